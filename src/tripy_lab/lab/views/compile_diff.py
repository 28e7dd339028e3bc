"""Compare two compiles: ``diff(exe_a, exe_b)`` -> a ``CompileDiff`` view model, rendered by ``diff_html``.

Side by side per stage: trace ops, MLIR text (profiles inlined), the layer table, outputs on the same inputs
(max abs/rel error) and timing. Works for two optimization levels, two bound sets or two engines; the same
HTML fragment goes into the live widget (``Compare`` tab) and static HTML (``_repr_html_``).
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field

import numpy as np

from tripy_lab.core.bounds import DimensionInputInfo
from tripy_lab.lab import tables
from tripy_lab.lab.html import esc, sanitize, stylesheet  # the lab's one escaping helper, its sanitizer
from tripy_lab.lab.measure import timing
from tripy_lab.lab.views import draw as views

CONTEXT = 3  # unchanged lines shown around each change; longer equal runs fold into one row
COLORS = {"delete": "#fee2e2", "insert": "#dcfce7", "replace": "#fef9c3", "mark_a": "#fca5a5", "mark_b": "#86efac"}


# -- the view model ---------------------------------------------------------------------------------
@dataclass
class DiffRow:
    kind: str  # "equal" | "replace" | "delete" | "insert" | "fold"
    left: str | None = None
    right: str | None = None
    left_no: int | None = None
    right_no: int | None = None


@dataclass
class Section:
    title: str
    rows: list[DiffRow]
    note: str = ""
    by_row: bool = False  # a changed row is marked whole (table rows), not character by character (text)

    @property
    def changed(self) -> int:
        return sum(r.kind in ("replace", "delete", "insert") for r in self.rows)


@dataclass
class CompileDiff:
    labels: tuple[str, str]
    summary: list[tuple[str, str, str]]  # (what, a, b)
    sections: list[Section]
    outputs: object | None = None  # LabFrame: max abs/rel error per output, or None
    outputs_note: str = ""
    timing: object | None = None  # LabFrame from timing.compare, or None
    extra: dict = field(default_factory=dict)

    def section(self, title: str) -> Section:
        return next(s for s in self.sections if s.title == title)

    def to_html(self) -> str:
        """What leaves the kernel (notebook output, the Compare tab): sanitized, with the lab's own table CSS."""
        return safe_html(self)

    def _repr_html_(self) -> str:
        return safe_html(self)


def safe_html(d: CompileDiff) -> str:
    """``diff_html`` through ``html.sanitize`` (which drops each Styler table's ``<style>``), led by the lab's
    stylesheet (our constants) so the tables look the same."""
    return f"<style>{stylesheet(tables.TABLE_CSS, '.tripy-diff')}</style>" + sanitize(diff_html(d))


def line_rows(a: list[str], b: list[str], context: int = CONTEXT) -> list[DiffRow]:
    """Side-by-side rows of a line diff (difflib); long unchanged runs fold into one ``fold`` row."""
    rows: list[DiffRow] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            n = i2 - i1
            keep = range(n) if n <= 2 * context + 1 else [*range(context), None, *range(n - context, n)]
            for k in keep:
                if k is None:
                    rows.append(DiffRow("fold", left=f"{n - 2 * context} unchanged lines"))
                else:
                    rows.append(DiffRow("equal", a[i1 + k], b[j1 + k], i1 + k + 1, j1 + k + 1))
            continue
        for k in range(max(i2 - i1, j2 - j1)):
            left = a[i1 + k] if i1 + k < i2 else None
            right = b[j1 + k] if j1 + k < j2 else None
            kind = tag if tag != "replace" else ("replace" if left is not None and right is not None
                                                 else "delete" if right is None else "insert")
            rows.append(DiffRow(kind, left, right, i1 + k + 1 if left is not None else None,
                                j1 + k + 1 if right is not None else None))
    return rows


# -- what is compared -------------------------------------------------------------------------------
def bounds_text(infos: dict) -> str:
    parts = []
    for name, info in infos.items():
        b = info.value_bounds if isinstance(info, DimensionInputInfo) else info.shape_bounds
        dims = [f"{lo}:{mid}:{hi}" if lo != hi else str(lo) for lo, mid, hi in zip(b.min, b.opt, b.max)]
        parts.append(f"{name}=[{','.join(dims)}]")
    return " ".join(parts)


def _trace_lines(exe) -> list[str] | None:
    traced = exe.stages.get("traced")
    return None if traced is None else traced.as_text().splitlines()


def _mlir_lines(exe) -> list[str] | None:
    lowered = exe.stages.get("lowered")
    return None if lowered is None else views.inline_aliases(lowered.as_text()).splitlines()


def _layer_lines(exe) -> list[str] | None:
    built = exe.stages.get("built")
    if built is None:
        return None
    df = views.layers_frame(built.layers)
    return [f"{r['kind']:<14} {r['shapes']:<14} {r['dtype']:<9} ← {r['source ops']}" for _, r in df.iterrows()]


def _section(title: str, a: list[str] | None, b: list[str] | None, by_row: bool = False) -> Section:
    if a is None or b is None:
        return Section(title, [], note="not available (an Executable without its stages, e.g. loaded from a file)")
    return Section(title, line_rows(a, b), by_row=by_row)


def _stage_seconds(exe, stage: str):
    obj = exe.stages.get(stage)
    return None if obj is None else obj.seconds * 1e3


def summary_rows(exe_a, exe_b) -> list[tuple[str, str, str]]:
    def row(what, fn):
        return (what, str(fn(exe_a)), str(fn(exe_b)))

    built = lambda e: e.stages.get("built")
    return [
        row("engine", lambda e: e.engine),
        row("optimization level", lambda e: e.optimization_level),
        row("bounds", lambda e: bounds_text(e.input_infos)),
        row("signature", lambda e: e),
        row("trace ops", lambda e: len(e.stages["traced"].trace.ops) if e.stages.get("traced") else "?"),
        row("MLIR ops", lambda e: len(e.stages["lowered"].program.ops()) if e.stages.get("lowered") else "?"),
        row("layers", lambda e: len(built(e).layers) if built(e) else "?"),
        row("build (ms)", lambda e: tables.sig3(_stage_seconds(e, "built")) or "?"),
    ]


def compare_outputs(exe_a, exe_b, shapes="opt", seed: int = 0, labels: tuple[str, str] = ("a", "b")):
    """Run both on the same random inputs (``exe_a``'s shapes at ``shapes``) -> LabFrame per output:
    shapes, max abs error, max rel error (|a-b| / max(|a|, tiny)) and whether they are allclose."""
    inputs = timing.make_inputs(exe_a.input_infos, timing.shapes_at(exe_a.input_infos, shapes), seed)
    outs = []
    for exe in (exe_a, exe_b):
        out = exe(**inputs)
        outs.append([np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))])
    rows = []
    for k in range(max(len(outs[0]), len(outs[1]))):
        x = outs[0][k] if k < len(outs[0]) else None
        y = outs[1][k] if k < len(outs[1]) else None
        row = {"output": k, f"shape {labels[0]}": "" if x is None else str(tuple(x.shape)),
               f"shape {labels[1]}": "" if y is None else str(tuple(y.shape)),
               "max_abs_err": None, "max_rel_err": None, "allclose": False}
        if x is not None and y is not None and x.shape == y.shape:
            xf, yf = x.astype(np.float64), y.astype(np.float64)
            err = np.abs(xf - yf)
            row["max_abs_err"] = float(err.max()) if err.size else 0.0
            rel = err / np.maximum(np.abs(xf), np.finfo(np.float32).tiny)
            row["max_rel_err"] = float(rel.max()) if rel.size else 0.0
            row["allclose"] = bool(np.allclose(xf, yf, rtol=1e-4, atol=1e-5, equal_nan=True))
        rows.append(row)
    return tables.LabFrame(rows), timing.shape_label(timing.shapes_at(exe_a.input_infos, shapes))


def diff(exe_a, exe_b, labels: tuple[str, str] | None = None, *, outputs: bool = True, time: bool = True,
         shapes="opt", warmup: int = 3, iters: int = 20, max_seconds: float = 2.0) -> CompileDiff:
    """Compare two Executables stage by stage (trace, MLIR, layers), on the same inputs, and their timing.

    ``labels`` default to "engine -O level" (plus "A"/"B" when those are equal). ``outputs``/``time`` turn
    the runs off; timing uses each Executable's own ``shapes`` point (bounds may differ).
    """
    if labels is None:
        labels = tuple(f"{e.engine} -O{e.optimization_level}" for e in (exe_a, exe_b))
        if labels[0] == labels[1]:
            labels = (f"A: {labels[0]}", f"B: {labels[1]}")
    sections = [
        _section("Trace ops", _trace_lines(exe_a), _trace_lines(exe_b)),
        _section("MLIR", _mlir_lines(exe_a), _mlir_lines(exe_b)),
        _section("Layers", _layer_lines(exe_a), _layer_lines(exe_b), by_row=True),
    ]
    result = CompileDiff(labels, summary_rows(exe_a, exe_b), sections)
    if outputs:
        try:
            result.outputs, where = compare_outputs(exe_a, exe_b, shapes, labels=("A", "B"))
            result.outputs_note = f"on the same random inputs at {labels[0]}'s {shapes} shapes: {where}"
        except Exception as exc:  # e.g. B's bounds do not admit A's shapes: say so, keep the rest
            result.outputs_note = f"could not run both on the same inputs: {getattr(exc, 'summary', exc)}"
    if time:
        result.timing = timing.compare((labels[0], exe_a), (labels[1], exe_b), shapes=shapes, warmup=warmup,
                                       iters=iters, max_seconds=max_seconds)
    return result


# -- rendering --------------------------------------------------------------------------------------
def _marked(a: str, b: str) -> tuple[str, str]:
    """Both lines escaped, with the characters that differ highlighted."""
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    if matcher.ratio() < 0.5:  # unrelated lines: marking characters would only be noise
        return esc(a), esc(b)
    out_a, out_b = [], []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out_a.append(esc(a[i1:i2]))
            out_b.append(esc(b[j1:j2]))
            continue
        if i2 > i1:
            out_a.append(f'<span style="background:{COLORS["mark_a"]}">{esc(a[i1:i2])}</span>')
        if j2 > j1:
            out_b.append(f'<span style="background:{COLORS["mark_b"]}">{esc(b[j1:j2])}</span>')
    return "".join(out_a), "".join(out_b)


# Inline text-align/background: JupyterLab's output CSS right-aligns cells and stripes rows.
_CELL = "text-align:left;padding:0 6px;white-space:pre-wrap;overflow-wrap:anywhere;vertical-align:top;width:50%"
_NO = "background:none;padding:0 4px;color:#9ca3af;text-align:right;user-select:none;vertical-align:top"


def rows_html(rows: list[DiffRow], labels: tuple[str, str] = ("A", "B"), by_row: bool = False) -> str:
    head = (f'<thead><tr><th></th><th style="text-align:left;padding:0 6px">{esc(labels[0])}</th><th></th>'
            f'<th style="text-align:left;padding:0 6px">{esc(labels[1])}</th></tr></thead>')
    body = []
    for r in rows:
        if r.kind == "fold":
            body.append(f'<tr class="tripy-diff-fold" style="background:none"><td colspan="4" '
                        f'style="text-align:left;color:#6b7280;padding:0 6px">'
                        f"⋯ {esc(r.left)}</td></tr>")
            continue
        if r.kind == "replace" and not by_row:
            left, right = _marked(r.left, r.right)
        else:
            left = "" if r.left is None else esc(r.left)
            right = "" if r.right is None else esc(r.right)
        bg_l = {"replace": COLORS["replace"], "delete": COLORS["delete"], "insert": "#f9fafb"}.get(r.kind, "none")
        bg_r = {"replace": COLORS["replace"], "insert": COLORS["insert"], "delete": "#f9fafb"}.get(r.kind, "none")
        body.append(
            f'<tr class="tripy-diff-{r.kind}" style="background:none">'
            f'<td style="{_NO}">{r.left_no or ""}</td><td style="{_CELL};background:{bg_l}">{left}</td>'
            f'<td style="{_NO}">{r.right_no or ""}</td><td style="{_CELL};background:{bg_r}">{right}</td></tr>'
        )
    return ('<table class="tripy-diff-table" style="border-collapse:collapse;width:100%;table-layout:fixed;'
            'font-family:monospace;font-size:11.5px;line-height:1.35">'
            '<colgroup><col style="width:3em"><col><col style="width:3em"><col></colgroup>'
            + head + "<tbody>" + "".join(body) + "</tbody></table>")


def _section_html(s: Section, labels: tuple[str, str]) -> str:
    if s.note:
        status = esc(s.note)
    else:
        status = "identical" if s.changed == 0 else f"{s.changed} changed line{'s' * (s.changed != 1)}"
    table = rows_html(s.rows, labels, s.by_row) if s.rows else ""
    key = s.title.lower().split()[0]
    return (f'<details class="tripy-diff-section tripy-diff-{key}" {"open" if s.changed else ""}>'
            f'<summary style="font-weight:600;cursor:pointer">{esc(s.title)} '
            f'<span style="font-weight:normal;color:#6b7280">· {status}</span></summary>'
            f'<div style="overflow:auto;max-height:520px">{table}</div></details>')


def diff_html(d: CompileDiff) -> str:
    """The HTML fragment of a CompileDiff (live widget and static HTML alike)."""
    summary = "".join(
        f"<tr style='background:none'><th style='text-align:left;padding:0 10px 0 0'>{esc(what)}</th>"
        f"<td style='text-align:left;padding:0 10px;background:{COLORS['replace'] if a != b else 'none'}'>"
        f"{esc(a)}</td><td style='text-align:left;padding:0 10px;"
        f"background:{COLORS['replace'] if a != b else 'none'}'>{esc(b)}</td></tr>"
        for what, a, b in d.summary
    )
    parts = [
        '<div class="tripy-diff" style="font-size:12px;line-height:1.4">',
        f"<table class='tripy-diff-summary' style='font-size:12px;margin-bottom:6px'><tr><th></th>"
        f"<th style='text-align:left;padding:0 10px'>{esc(d.labels[0])}</th>"
        f"<th style='text-align:left;padding:0 10px'>{esc(d.labels[1])}</th></tr>{summary}</table>",
        *(_section_html(s, d.labels) for s in d.sections),
    ]
    if d.outputs is not None or d.outputs_note:
        same = d.outputs is not None and bool(d.outputs["allclose"].all())
        verdict = "" if d.outputs is None else (" · allclose" if same else " · <b style='color:#b91c1c'>differ</b>")
        parts.append(f'<details class="tripy-diff-section tripy-diff-outputs" open><summary style="font-weight:600">'
                     f'Outputs<span style="font-weight:normal;color:#6b7280"> · {esc(d.outputs_note)}</span>'
                     f"{verdict}</summary>"
                     + ("" if d.outputs is None else tables.frame_html(d.outputs)) + "</details>")
    if d.timing is not None:
        med = list(d.timing["compute_ms"])
        ok = len(med) == 2 and all(isinstance(m, float) and math.isfinite(m) and m > 0 for m in med)
        ratio = f" · B/A compute {med[1] / med[0]:.3g}×" if ok else ""
        parts.append(f'<details class="tripy-diff-section tripy-diff-timing" open><summary style="font-weight:600">'
                     f'Timing<span style="font-weight:normal;color:#6b7280">{esc(ratio)}</span></summary>'
                     + tables.frame_html(d.timing.drop(columns=["error"]) if not d.timing["error"].any()
                                         else d.timing) + "</details>")
    parts.append("</div>")
    return "".join(parts)
