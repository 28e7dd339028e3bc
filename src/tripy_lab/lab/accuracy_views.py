"""Accuracy in the lab: the precision each MLIR op computes in (a column of the Engine tab's layer table), the
Run & time tab's Accuracy action (random inputs at the chosen profile point, or the user's), MLIR lines shaded
by error, and the per-trace-op error map for the graph overlay."""

from __future__ import annotations

import math

from tripy_lab.core import dtypes
from tripy_lab.lab.html import esc


def precision_of(op) -> str:
    """The dtype an MLIR op computes in: its float operands' type (a comparison of f16 values computes in f16,
    a cast to f32 of an f16 value reads f16), else its first result's element type."""
    for v in list(op.operands) + list(op.results):
        elem = str(getattr(v.type, "element_type", ""))
        dt = dtypes.BY_MLIR.get(elem)
        if dt in dtypes.FLOATS or dt is dtypes.float8:
            return dt.name
    for r in op.results:
        dt = dtypes.BY_MLIR.get(str(getattr(r.type, "element_type", "")))
        if dt is not None:
            return dt.name
    return ""


def with_precision(frame, layers, program):
    """The layer table with a ``precision`` column (after ``dtype``): each layer's MLIR ops' compute dtypes."""
    if program is None or "mlir ops" not in getattr(frame, "columns", ()) or len(frame) != len(layers):
        return frame
    ops = program.ops()
    values = []
    for ly in layers:
        seen = dict.fromkeys(precision_of(ops[i]) for i in ly.mlir_ops if 0 <= i < len(ops))
        values.append("/".join(p for p in seen if p))
    at = list(frame.columns).index("dtype") + 1 if "dtype" in frame.columns else len(frame.columns)
    frame = frame.copy()
    frame.insert(at, "precision", values)
    return frame


def _shade(ratio: float) -> str:
    """Background for an error of ``ratio`` tolerances: none within tolerance (<= 1), then light to dark red
    up to 1000 tolerances (log scale)."""
    if not ratio > 1:
        return ""
    level = 1.0 if math.isinf(ratio) or math.isnan(ratio) else min(1.0, math.log10(ratio) / 3)
    return f"background:rgba(239, 68, 68, {0.12 + 0.5 * level:.2f});"


def shade_mlir_html(html: str, by_line: dict[int, float], first_line: int | None = None) -> str:
    """``views.mlir_html`` output with each line's background set by its op's max relative error; the first
    divergent op's line gets a left bar."""
    for line, rel in by_line.items():
        style = _shade(rel) + ("border-left:4px solid #b91c1c;" if line == first_line else "")
        if style:
            key = f'data-line="{line}" style="'
            html = html.replace(key, key + style, 1)
    return html


def line_errors(report, lines: list[str], n_ops: int) -> tuple[dict[int, float], int | None]:
    """({1-based line of ``lines``: max relative error of its op}, the first divergent op's line), for the MLIR
    pane's own printing (profiles inlined: its line numbers are not those of ``as_text()``)."""
    from tripy_lab.lab.accuracy_report import mlir_lines

    at = mlir_lines("\n".join(lines), n_ops)
    out: dict[int, float] = {}
    for e in report.ops:
        line = at[e.index] if e.index < len(at) else None
        if line is not None:
            out[line] = max(out.get(line, 0.0), e.tol_ratio)
    first = report.first_divergent
    return out, (at[first.index] if first is not None and first.index < len(at) else None)


def legend_html() -> str:
    return ("<div class='tripy-accuracy-legend' style='font-size:11px;color:#4b5563'>MLIR lines shaded by error "
            "against the reference (float64), in tolerances (atol + rtol·|ref|): none within, light just outside, "
            "dark ≥ 1000×; a bar marks the first divergent op.</div>")


def report_html(report) -> str:
    """The Run & time tab's accuracy result: the summary line and the per-op table."""
    from tripy_lab.lab import views

    first = report.first_divergent
    head = (f"<div class='tripy-accuracy-summary' style='font-size:12px;margin:2px 0'>{esc(report.summary())}"
            f" ({report.seconds:.2f} s)</div>")
    if first is not None:
        head += (f"<div class='tripy-accuracy-first' style='font-size:12px;color:#b91c1c'>first divergent: "
                 f"<code>{esc(first.op)}</code> at MLIR line {first.mlir_line}, trace op <code>{esc(first.trace_op)}"
                 f"</code>, {esc(first.user_line)}</div>")
    return head + '<div class="tripy-accuracy">' + views.frame_html(report.table()) + "</div>"


def run_accuracy(exe, point="opt", inputs=None):
    """``lab.accuracy`` on random inputs at the profile ``point`` ("min"/"opt"/"max" or {arg: shape}), or the
    user's ``inputs`` (a dict by argument name)."""
    from tripy_lab.lab import timing
    from tripy_lab.lab.accuracy_report import accuracy

    if inputs is None:
        inputs = timing.make_inputs(exe.input_infos, timing.shapes_at(exe.input_infos, point))
    return accuracy(exe, *[inputs[n] for n in exe._arg_names])
