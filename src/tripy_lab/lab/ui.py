"""The %%tpcompile widget: bounds editor, status + Build button, and the stage tabs over a Session."""

from __future__ import annotations

import html
import time

import ipywidgets as W

from tripy_lab.lab import crosswalk, tabs, timing, views
from tripy_lab.lab.bounds_editor import BoundsEditor
from tripy_lab.lab.compare_pane import ComparePane
from tripy_lab.lab.mlir_editor import MlirEditor
from tripy_lab.lab.session import Session

TAB_NAMES = ("Trace", "MLIR", "Engine", "Run & time", "Log", "Error", "Crosswalk", "Compare")
_KEYS = ("trace", "mlir", "engine", "run", "log", "error", "crosswalk", "compare")
ENGINES = ["default", "reference", "xla", "tensorrt"]  # "default": tp.config.engine, else the best installed
CSS = """<style>
.tripy-stale { opacity: 0.55; }
.tripy-lab .widget-tab > .lm-TabBar .lm-TabBar-tab { flex: 0 0 auto; max-width: none; min-width: 90px; }
.tripy-lab .widget-html > .widget-html-content { flex: 1 1 auto; min-width: 0; overflow-x: auto; }
.tripy-lab .tripy-table td, .tripy-lab .tripy-table th { padding: 1px 8px; text-align: left; }
</style>"""


class LabWidget:
    """``.widget`` is what the cell displays. Tabs other than Trace/MLIR render when first shown."""

    def __init__(self, session: Session, editor: BoundsEditor, title: str = ""):
        self.session, self.editor = session, editor
        self.generic = W.Checkbox(value=False, description="generic form", indent=False)
        self.generic.observe(lambda _: self._render("mlir"), "value")
        self.status = W.HTML()
        self.build_button = W.Button(description="Build", icon="cogs", button_style="primary")
        self.build_button.on_click(lambda _: self.session.build())
        self.engine = W.Dropdown(options=ENGINES, value=session.engine or "default", description="engine",
                                 layout=W.Layout(width="200px"))
        self.level = W.Dropdown(options=list(range(6)), value=session.optimization_level, description="-O",
                                style={"description_width": "24px"}, layout=W.Layout(width="90px"))
        self.engine.observe(self._on_engine, "value")
        self.level.observe(self._on_engine, "value")
        self.auto_ms = W.FloatText(value=session.auto_build_seconds * 1e3, description="auto-build < ms",
                                   style={"description_width": "initial"}, layout=W.Layout(width="190px"))
        self.auto_ms.observe(self._on_auto, "value")
        self.panes = {k: W.HTML() for k in _KEYS if k not in ("crosswalk", "run", "compare")}
        self.crosswalk = W.Output()
        self.run_box = self._run_controls()
        # The MLIR tab switches between the highlighted text and an editor; Compare holds the diff view.
        self.mlir_editor = MlirEditor(session, on_toggle=self._on_edit_toggle)
        self.compare = ComparePane(session)
        self.generic.layout.width = "auto"  # the Edit toggle sits next to it
        mlir_box = W.VBox([W.HBox([self.generic, self.mlir_editor.toggle]), self.panes["mlir"],
                           self.mlir_editor.widget])
        children = [self.panes["trace"], mlir_box, self.panes["engine"], self.run_box, self.panes["log"],
                    self.panes["error"], self.crosswalk, self.compare.widget]
        self.tabs = W.Tab(children=children, titles=TAB_NAMES)
        self.tabs.observe(lambda _: self._render_visible(), "selected_index")
        for key, child in zip(_KEYS, children):
            child.add_class(f"tripy-tab-{key}")
        self.dirty: set[str] = set(_KEYS)
        self.svg: tuple | None = None
        head = W.HBox([self.build_button, self.engine, self.level, self.auto_ms])
        self.widget = W.VBox([W.HTML(CSS + f"<b>{html.escape(title)}</b>"), editor.widget, head, self.status,
                              self.tabs])
        self.widget.add_class("tripy-lab")
        self.render_times: dict[str, float] = {}
        session.listeners.append(self.on_session)
        self._update_status()

    # -- session events -------------------------------------------------------------------------------
    def on_session(self, changed: set[str]) -> None:
        if "error" in changed:
            self.dirty |= {"error", "trace", "mlir", "crosswalk"}
        if "trace" in changed:
            self.dirty |= {"trace", "crosswalk"}
            self.svg = None
        if "mlir" in changed:
            self.dirty |= {"mlir", "crosswalk"}
            self.mlir_editor.on_session()
        if "engine" in changed:
            self.dirty |= {"engine", "crosswalk", "compare"}
        if "run" in changed and self.run_shown:  # a result of the old engine is on screen
            self.run_out.value = "<i>engine changed: run or time again</i>"
            self.run_shown = False
        if "log" in changed:
            self.dirty.add("log")
        # The fast tabs are the point of the loop: always refresh them (and the cheap engine/error ones);
        # the log and the crosswalk when shown.
        for key in ("trace", "mlir", "engine", "error"):
            if key in self.dirty:
                self._render(key)
        self._render_visible()
        if changed & {"stale", "status", "error"}:
            self._update_status()

    def _update_status(self) -> None:
        text, kind = self.session.status()
        self.status.value = views.status_html(text, kind)
        s = self.session
        self.build_button.disabled = s.building or s.lowered is None or bool(s.model.problems())
        self.build_button.description = "building…" if self.session.building else "Build"
        stale = self.session.stale
        titles = []
        for key, name in zip(_KEYS, TAB_NAMES):
            mark = " (stale)" if key in stale else ""
            if key == "error" and self.session.error is not None:
                mark = " ●"
            titles.append(name + mark)
        self.tabs.titles = tuple(titles)
        for key, child in zip(_KEYS, self.tabs.children):
            (child.add_class if key in stale else child.remove_class)("tripy-stale")

    def _render_visible(self) -> None:
        key = _KEYS[self.tabs.selected_index or 0]
        if key in self.dirty:
            self._render(key)

    def _render(self, key: str) -> None:
        start = time.perf_counter()
        s = self.session
        self.dirty.discard(key)
        if key == "trace" and s.traced is not None:
            self.svg = tabs.trace_graph(s.traced, s.error_op)
            self.panes["trace"].value = tabs.trace_tab(s.traced, *self.svg)
        elif key == "mlir" and s.lowered is not None:
            self.panes["mlir"].value = tabs.mlir_tab(s.lowered, self.generic.value, s.error_op)[0]
        elif key == "engine" and s.built is not None:
            self.panes["engine"].value = tabs.engine_tab(s.built)
        elif key == "log":
            self.panes["log"].value = tabs.log_tab(s)
        elif key == "error":
            self.panes["error"].value = tabs.error_tab(s.error_info())
        elif key == "crosswalk" and s.traced is not None:
            self._render_crosswalk()
        elif key == "compare":
            self.compare.refresh()
        self.render_times[key] = time.perf_counter() - start

    def _render_crosswalk(self) -> None:
        s = self.session
        if self.svg is None:
            self.svg = tabs.trace_graph(s.traced, s.error_op)
        svg, dot, _ = self.svg
        info = s.error_info()
        error = None if info is None else {"message": info["summary"], "op": info.get("op")}
        bundle = crosswalk.build_bundle(
            s.traced, s.lowered, s.built, title=self.session.exe_name, error=error, svg=svg, dot=dot
        )
        self.crosswalk.outputs = (
            {"output_type": "display_data", "data": crosswalk.mime_bundle(bundle), "metadata": {}},
        )

    # -- controls -------------------------------------------------------------------------------------
    def _on_engine(self, _change) -> None:
        engine = None if self.engine.value == "default" else self.engine.value
        self.session.set_engine(engine, self.level.value)
        s = self.session
        if s.stale & {"engine"} and (s.last_build_seconds or 0) < s.auto_build_seconds:
            s.build()

    def _on_edit_toggle(self, editing: bool) -> None:
        self.panes["mlir"].layout.display = "none" if editing else None
        self.generic.disabled = editing

    def _on_auto(self, change) -> None:
        self.session.auto_build_seconds = max(float(change["new"]), 0.0) / 1e3

    def _run_controls(self) -> W.Widget:
        self.point = W.Dropdown(
            options=["min, opt, max", "min", "opt", "max", "custom"],
            value="min, opt, max",
            description="shapes",
            layout=W.Layout(width="220px"),
        )
        self.custom = W.Text(placeholder="a=2x4 s=3", description="custom", layout=W.Layout(width="240px"))
        self.warmup = W.BoundedIntText(
            value=3, min=0, max=10_000, description="warm-up", layout=W.Layout(width="160px")
        )
        self.iters = W.BoundedIntText(
            value=30, min=1, max=100_000, description="iterations", layout=W.Layout(width="170px")
        )
        self.run_button = W.Button(description="Run", icon="play")
        self.time_button = W.Button(description="Time", icon="clock-o", button_style="info")
        self.sweep_button = W.Button(description="Sweep", icon="line-chart")
        self.run_button.on_click(lambda _: self._guard(self._run_once))
        self.time_button.on_click(lambda _: self._guard(self._time))
        self.sweep_button.on_click(lambda _: self._guard(self._sweep))
        self.run_button.add_class("tripy-run")
        self.time_button.add_class("tripy-time")
        self.sweep_button.add_class("tripy-sweep-button")
        self.run_shown = False  # run_out holds a result (not a hint): an engine change must say so
        self.run_out = W.HTML("<i>build, then Run or Time</i>")
        self.run_out.add_class("tripy-run-out")
        return W.VBox(
            [
                W.HBox([self.point, self.custom]),
                W.HBox([self.warmup, self.iters]),
                W.HBox([self.run_button, self.time_button, self.sweep_button]),
                self.run_out,
            ]
        )

    def _points(self) -> list:
        value = self.point.value
        if value == "custom":
            return [parse_custom_shapes(self.custom.value)]
        return ["min", "opt", "max"] if value == "min, opt, max" else [value]

    def _guard(self, fn) -> None:
        if self.session.exe is None:
            self.run_out.value = views.status_html("No Executable yet: press Build.", "error")
            return
        self.run_out.value = views.status_html("running…", "busy")
        try:
            self.run_out.value = fn(self.session.exe)
            self.run_shown = True
        except Exception as exc:  # a bad custom shape or a run-time error: show it, keep the widget alive
            self.run_out.value = views.error_html(
                getattr(exc, "summary", f"{type(exc).__name__}: {exc}"), getattr(exc, "details", [])
            )

    def _run_once(self, exe) -> str:
        parts = []
        for point in self._points():
            shapes = timing.shapes_at(exe.input_infos, point)
            out = exe(**timing.make_inputs(exe.input_infos, shapes))
            outs = out if isinstance(out, tuple) else (out,)
            desc = "; ".join(f"{tuple(o.shape)} {o.dtype}" for o in outs)
            parts.append(
                f"<li><code>{html.escape(timing.shape_label(shapes))}</code> → {html.escape(desc)}</li>"
            )
        return f"<ul class='tripy-run-result'>{''.join(parts)}</ul>"

    def _time(self, exe) -> str:
        df = timing.benchmark(exe, self._points(), warmup=self.warmup.value, iters=self.iters.value)
        return (
            '<div class="tripy-timing">'
            + views.frame_html(df.drop(columns=["error"]) if not df["error"].any() else df)
            + "</div>"
        )

    def _sweep(self, exe) -> str:
        points, xlabel, xs, opt_x = timing.sweep_points(exe.input_infos, n=6)
        df = timing.benchmark(exe, points, warmup=self.warmup.value, iters=self.iters.value, label="sweep")
        ok = df["error"] == ""
        svg = views.sweep_svg(
            [x for x, good in zip(xs, ok) if good], list(df.loc[ok, "median_ms"]), opt_x, xlabel
        )
        return svg + '<div class="tripy-timing">' + views.frame_html(df) + "</div>"


def parse_custom_shapes(text: str) -> dict:
    """``a=2x4 s=3`` -> {"a": (2, 4), "s": 3}; ``a=scalar`` for rank 0."""
    out: dict = {}
    for part in text.split():
        name, eq, value = part.partition("=")
        if not eq:
            raise ValueError(f"cannot read {part!r}: expected NAME=2x4 or NAME=3")
        if value == "scalar":
            out[name] = ()
        elif "x" in value:
            out[name] = tuple(int(v) for v in value.split("x"))
        else:
            out[name] = int(value)
    return out
