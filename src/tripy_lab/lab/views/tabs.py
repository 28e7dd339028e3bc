"""One view model per stage, and the one function that renders each into HTML.

The live widget (``ui.LabWidget``) and the static snapshot (``snapshot``) both call ``view.html(limits)``:
the widget with ``LIVE`` limits, the snapshot with ``SNAPSHOT`` limits (big graphs, MLIR and tables elided
with a note). So a pane exists once. Views are plain data built from stage objects; no widgets here.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from tripy_lab.engine.base import CompiledEngine
from tripy_lab.engine.memory import fmt_bytes
from tripy_lab.lab.html import esc
from tripy_lab.lab.views import crosswalk, mlir_folds
from tripy_lab.lab.views import draw as views
from tripy_lab.lab.views.limits import LIVE, SNAPSHOT, Limits, _cut, _ms, head_html, note_html  # noqa: F401 (re-exported: callers name tabs.LIVE, tabs.note_html)
from tripy_lab.lab.views.trace_pane import FailedTraceView, MissingView, TraceView  # noqa: F401 (re-exported)

MAX_GRAPH_OPS = 600  # above this, the crosswalk's flat (unfolded) drawing is left out




# -- Trace ------------------------------------------------------------------------------------------
def trace_graph(traced, highlight: str | None = None) -> tuple[str | None, str, str]:
    """(svg or None, dot, note): the flat (unfolded) drawing of a trace; op nodes carry ``id="op-%tN"``."""
    n_ops = len(traced.trace.ops)
    dot = views.fast_layout(crosswalk.trace_dot(traced, highlight), n_ops)
    if n_ops > MAX_GRAPH_OPS:
        return None, dot, f"{n_ops} ops: too many to draw on every edit (limit {MAX_GRAPH_OPS}); see the listing."
    svg, note = views.render_svg(dot)
    return svg, dot, note


# TraceView, FailedTraceView: the folded graph's view models (lab/trace_pane.py)


# -- MLIR -------------------------------------------------------------------------------------------
@dataclass
class MlirView:
    lines: list[tuple[str, str | None]]  # (text, trace op) per printed line
    n_ops: int
    seconds: float | None
    generic: bool = False
    error_op: str | None = None
    accuracy: object = None  # an AccuracyReport of this program: lines shaded by error (lab/views/accuracy_views.py)
    folds: list = field(default_factory=list)  # mlir_folds.Fold per top-level module: the lines fold as the graph

    @classmethod
    def of(cls, lowered, generic: bool = False, error_op: str | None = None, model=None) -> MlirView:
        """Profiles inlined, big constants elided, locations kept to highlight the failing op's lines and to fold
        the lines by module (``model``: the trace's folded graph, ``TraceView.model``)."""
        lines = crosswalk.mlir_lines(lowered, generic)
        return cls(lines, len(lowered.program.ops()), lowered.seconds, generic, error_op,
                   folds=mlir_folds.folds([op for _, op in lines], model))

    @property
    def text(self) -> str:
        return "\n".join(t for t, _ in self.lines)

    def html(self, limits: Limits = LIVE) -> str:
        lines = self.lines
        cut = limits.mlir_lines is not None and len(lines) > limits.mlir_lines
        if cut:
            lines = lines[: limits.mlir_lines]
        marked = {i + 1 for i, (_, op) in enumerate(self.lines) if self.error_op is not None and op == self.error_op}
        folded = f" · folded by module ({len(self.folds)} at the top level)" if self.folds else ""
        head = head_html(f"{self.n_ops} MLIR ops · lowered in {_ms(self.seconds)}"
                         f"{' · generic form' if self.generic else ''}{folded}")
        rows = views.mlir_rows("\n".join(t for t, _ in lines), marked)
        if self.folds:
            body = views.mlir_pre(mlir_folds.folds_html(rows, self.folds, {i - 1 for i in marked}))
        else:
            body = views.mlir_pre("".join(rows))
        if self.accuracy is not None and not self.generic:
            from tripy_lab.lab.views import accuracy_views

            body = accuracy_views.legend_html() + accuracy_views.shade_mlir_html(
                body, *accuracy_views.line_errors(self.accuracy, [t for t, _ in lines], self.n_ops))
        tail = note_html(f"MLIR elided: {len(self.lines) - len(lines)} more lines.") if cut else ""
        return head + body + tail


def profile_text(built) -> str:
    """Whether this build covers the whole shape profile or specializes per shape (issue 11)."""
    r = built.report
    if r.engine in ("onnxruntime", "tensorrt"):
        return "one build covers the whole profile: every shape in min..max runs without another build"
    if r.engine == "xla":
        shapes = r.cache.get("shapes_built", [])
        return (f"specializes per shape: XLA compiles each new shape on first use; built so far "
                f"({len(shapes)}): {'; '.join(shapes) or 'none'}")
    return "interprets every shape (no build)"


def export_commands(built) -> list[tuple[str, str]]:
    """The trtexec / polygraphy lines for the program's profile (``exe.trtexec_command()``)."""
    from tripy_lab.engine.onnx.export import polygraphy_command, trtexec_command

    program = built.lowered.program
    return [("trtexec", trtexec_command(program)), ("polygraphy", polygraphy_command(program))]


# -- Engine -----------------------------------------------------------------------------------------
def tilde(text) -> str:
    """The user's home directory as ``~`` (saved notebooks and reports do not ship the author's home path)."""
    home = os.path.expanduser("~")
    text = str(text)
    return text.replace(home + os.sep, "~" + os.sep) if home not in ("", os.sep, "~") else text


_SECONDS = re.compile(r"(?<![\w.])(\d+\.\d+) ?s\b")


def in_ms(text) -> str:
    """Durations engines write in seconds (``compile 0.336s``) in the lab's one unit for times, ms."""
    return _SECONDS.sub(lambda m: f"{float(m.group(1)) * 1e3:.1f} ms", str(text))


def cache_line(cache: dict) -> str:
    """An engine's cache internals as one line: where it lives (``~/...``), then its counts."""
    places, counts = [], []
    for key, value in cache.items():
        name = key.replace("_", " ")
        if isinstance(value, str) and os.sep in value:
            places.append(tilde(value))
        elif isinstance(value, (list, tuple, set, dict)):
            if value:
                counts.append(f"{name} {len(value)}")
        elif value not in (None, ""):
            counts.append(f"{name} {value}")
    return " · ".join([*dict.fromkeys(places), ", ".join(counts)] if counts else dict.fromkeys(places))


def memory_lines(built) -> tuple[list[str], str]:
    """The Engine tab's memory lines (the layer table's shape with its breakdown, the other built shapes' totals) and
    where the numbers come from. Nothing is run for them: an engine that measures by running shows what a
    ``built.memory()`` or a timing run measured, or says how to measure."""
    method = getattr(type(built.compiled), "memory", None)
    if method is None or method is CompiledEngine.memory:  # an engine that does not report memory
        return [], ""
    try:
        uses = built.compiled.memory(measure=False)
    except Exception as exc:  # a view never fails on a number it could not get
        return [f"memory: not available ({type(exc).__name__}: {str(exc)[:120]})"], ""
    if not uses:
        return ["memory: not measured yet (built.memory() or a timing run measures it at the opt shapes)"], ""
    first, rest = uses[0], uses[1:]
    lines = ["memory at " + first.line()]
    if rest:
        lines.append("other built shapes: " + " · ".join(f"{u.shape} {fmt_bytes(u.total)}" for u in rest))
    about = "; ".join([f"from {first.source}", "the memory column: a layer's outputs + the weights it reads",
                       *first.notes])
    return lines, about


@dataclass
class EngineView:
    engine: str
    info: list[tuple[str, object]]
    notes: list[str]
    layers: object  # pandas DataFrame (views.layers_frame, or the layer times after a timing run)
    extra_stages: dict[str, str] = field(default_factory=dict)
    commands: list[tuple[str, str]] = field(default_factory=list)  # trtexec / polygraphy lines (issue 11)
    timing_note: str = ""  # after a timing run: compute per call, layer sum, how it was measured
    source_heat: str = ""  # the user's source lines shaded by their share of engine time (HTML)
    memory: list[str] = field(default_factory=list)  # the total line(s) above the layer table (``memory_lines``)
    memory_about: str = ""  # where those numbers come from (folded under the lines)

    @classmethod
    def of(cls, built) -> EngineView:
        r = built.report
        info = [("engine", r.engine), ("why", r.reason), ("device", r.device),
                ("optimization level", built.optimization_level), ("build time", built.time_text()),
                ("profile", profile_text(built)), ("layers", len(built.layers))]
        if r.cache:
            info.append(("cache", cache_line(r.cache)))
        built_shapes = r.cache.get("shapes_built") if r.cache else None
        if built_shapes:  # an engine that compiles per shape: what runs without a compile (``exe.warm`` adds)
            info.append(("compiled shapes", "; ".join(built_shapes)))
        if r.cache and r.cache.get("shapes_warmed"):  # of those, compiled ahead of their first call (``exe.warm``)
            info.append(("warmed shapes", "; ".join(r.cache["shapes_warmed"])))
        from tripy_lab.lab.views.accuracy_views import with_precision

        layers = with_precision(views.layers_frame(built.layers), built.layers, built.lowered.program)
        notes = [in_ms(tilde(n)) for n in r.notes]
        memory, about = memory_lines(built)
        view = cls(r.engine, info, notes, layers, dict(r.extra_stages), export_commands(built),
                   memory=memory, memory_about=about)
        prof = getattr(built.compiled, "last_profile", None)
        if prof is not None:  # after a timing run: the layers that ran, with their time, and the shaded source
            from tripy_lab.lab.measure import layer_time

            frame = layer_time.layer_times_frame(prof)
            view.layers = frame
            view.timing_note = (f"last timing run: compute {frame.attrs['compute_ms']:.4g} ms per call (median), "
                                f"layers sum to {frame.attrs['layers_ms']:.4g} ms; {prof.method}"
                                + "".join(f"; {n}" for n in prof.notes))
            view.source_heat = layer_time.source_heat_html(prof, built.lowered.program)
        return view

    def html(self, limits: Limits = LIVE) -> str:
        # Inline alignment: a saved notebook's HTML gets JupyterLab's right-aligned cells (values far from keys).
        rows = "".join(f"<tr><th style='text-align:left;padding-right:12px'>{esc(k)}</th>"
                       f"<td style='text-align:left'>{esc(v)}</td></tr>" for k, v in self.info)
        notes = "".join(f"<li>{esc(n)}</li>" for n in self.notes)
        df, tail = self.layers, ""
        if limits.table_rows is not None and len(df) > limits.table_rows:
            df, tail = df.head(limits.table_rows), note_html(f"Layer table elided: {len(df) - limits.table_rows} "
                                                             "more layers.")
        extra = "".join(f"<details><summary>{esc(name)}</summary><pre style='font-size:11px'>"
                        f"{esc(_cut(text, limits.text_chars, name))}</pre></details>"
                        for name, text in self.extra_stages.items())
        cmds = "".join(f"<div><b>{esc(name)}</b> <code style='font-size:11px'>{esc(cmd)}</code></div>"
                       for name, cmd in self.commands)
        if cmds:
            extra += ("<details><summary>ONNX export (exe.export_onnx(path)) and TensorRT command lines</summary>"
                      f"<div style='font-size:12px'>{cmds}</div></details>")
        return (f'<div class="tripy-engine"><h4 style="margin:4px 0">Engine: <code>{esc(self.engine)}</code></h4>'
                f"<table style='font-size:12px'>{rows}</table>"
                + (f"<ul style='font-size:12px'>{notes}</ul>" if notes else "")
                + (f"<div class='tripy-layer-time' style='font-size:12px;margin-top:4px'>{esc(self.timing_note)}</div>"
                   if self.timing_note else "")
                + (f"<div class='tripy-memory' style='font-size:12px;margin-top:4px'>{esc(self.memory[0])}"
                   + "".join(f"<div style='color:#6b7280'>{esc(m)}</div>" for m in self.memory[1:])
                   + (f"<details style='color:#6b7280'><summary>where these numbers come from</summary>"
                      f"{esc(self.memory_about)}</details>" if self.memory_about else "") + "</div>"
                   if self.memory else "")
                + f'<div class="tripy-layers">{views.frame_html(df)}</div>' + tail + self.source_heat + extra
                + "</div>")


# -- Run & time -------------------------------------------------------------------------------------
@dataclass
class RunView:
    """The latest Run / Time / Sweep result (or a note saying there is none)."""

    kind: str = "note"  # "note", "run", "time", "sweep", "accuracy", "error"
    message: str = "Run, Time or Sweep at the shapes above (a stale engine is built first)"
    results: list[tuple[str, str]] = field(default_factory=list)  # run: (shape label, output description)
    frame: object = None  # time/sweep: the benchmark DataFrame
    sweep: tuple | None = None  # sweep: (xs, ys, opt_x, xlabel)
    details: list[str] = field(default_factory=list)  # error
    report: object = None  # accuracy: the AccuracyReport

    def html(self, limits: Limits = LIVE) -> str:
        if self.kind == "note":
            return f"<i>{esc(self.message)}</i>"
        if self.kind == "busy":
            return views.status_html(self.message, "busy")
        if self.kind == "error":
            return views.error_html(self.message, self.details)
        if self.kind == "run":
            items = "".join(f"<li><code>{esc(shape)}</code> → {esc(desc)}</li>" for shape, desc in self.results)
            return f"<ul class='tripy-run-result'>{items}</ul>"
        if self.kind == "accuracy":
            from tripy_lab.lab.views.accuracy_views import report_html

            return report_html(self.report)
        df = self.frame
        if self.kind == "time" and not df["error"].any():
            df = df.drop(columns=["error"])
        table = '<div class="tripy-timing">' + views.frame_html(df) + "</div>"
        return (views.sweep_svg(*self.sweep) if self.sweep else "") + table


# -- Log --------------------------------------------------------------------------------------------
@dataclass
class LogView:
    stages: list[dict]
    runs: str
    events: list[dict]

    @classmethod
    def of(cls, session) -> LogView:
        """Per-stage build times, cache hits, engine choice, then the event log (newest last)."""
        rows = [
            {"stage": name, "status": "current" if obj is not None else "-",
             "ms": None if obj is None else round(obj.seconds * 1e3, 3), "detail": ""}
            for name, obj in (("trace", session.traced), ("mlir", session.lowered), ("build", session.built))
        ]
        if session.built is not None:
            r = session.built.report
            rows[2]["detail"] = f"engine {r.engine}: {r.reason}; cache {r.cache}"
        runs = ", ".join(f"{k} ran {v}x" for k, v in session.counts.items())
        return cls(rows, runs, list(session.log[-200:]))

    def html(self, limits: Limits = LIVE) -> str:
        current = views.frame_html(views.log_frame(self.stages))
        events = views.frame_html(views.log_frame(self.events[-limits.log_events:]))
        return (f"<div class='tripy-log' style='font-size:12px'><b>Current stages</b>{current}"
                f"<div>{esc(self.runs)} (cache hits re-use stages)</div><b>Events</b>{events}</div>")


# -- Error ------------------------------------------------------------------------------------------
@dataclass
class ErrorView:
    info: dict | None  # Session.error_info()

    def html(self, limits: Limits = LIVE) -> str:
        info = self.info
        if info is None:
            return '<div class="tripy-error-none" style="color:#15803d">No errors.</div>'
        where = f"[{info['stage']}] " if info.get("stage") else ""
        return views.error_html(where + info["summary"], info["details"], info["location"], info.get("op"))


def stage_views(traced=None, lowered=None, built=None, *, error: dict | None = None,
                error_op: str | None = None, generic: bool = False) -> dict:
    """Views of the stages an Executable (or a Session) has: key -> view (missing stages left out)."""
    out: dict = {}
    if traced is not None:
        out["trace"] = TraceView.of(traced, error_op)
    if lowered is not None:
        model = out["trace"].model if "trace" in out else None
        out["mlir"] = MlirView.of(lowered, generic, error_op, model)
    if built is not None:
        out["engine"] = EngineView.of(built)
    out["error"] = ErrorView(error)
    return out
