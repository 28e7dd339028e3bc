"""The %%tpcompile widget: bounds editor, status + Build button, and the stage tabs over a Session."""

from __future__ import annotations

import time

import ipywidgets as W

from tripy_lab.lab.html import esc, sanitize, stylesheet
from tripy_lab.lab.measure import timing
from tripy_lab.lab.session import Session
from tripy_lab.lab.shape_text import parse_custom_shapes
from tripy_lab.lab.tables import TABLE_CSS
from tripy_lab.lab.tune_pane import TunePane
from tripy_lab.lab.views import crosswalk, snapshot, tabs, trace_pane
from tripy_lab.lab.views import draw as views
from tripy_lab.lab.views.graph_draw import Overlay, timing_overlay
from tripy_lab.lab.widget.bounds_editor import BoundsEditor
from tripy_lab.lab.widget.compare_pane import ComparePane
from tripy_lab.lab.widget.mlir_editor import MlirEditor

TAB_NAMES = ("Trace", "MLIR", "Engine", "Run & time", "Log", "Error", "Crosswalk", "Compare", "Tune")
_KEYS = ("trace", "mlir", "engine", "run", "log", "error", "crosswalk", "compare", "tune")
# "default": tp.config.engine, else the best installed
ENGINES = ["default", "reference", "xla", "onnxruntime", "tensorrt"]
# Narrow panes (a split view, ~480 px): rows of controls wrap instead of squeezing their children (toggles read
# "dy", sliders shrank to knobs, Build became an icon); the tab bar wraps instead of cutting tabs off.
NARROW_CSS = """
.tripy-lab .widget-hbox { flex-wrap: wrap; row-gap: 2px; }
.tripy-lab .widget-hbox > .widget-toggle-button, .tripy-lab .widget-hbox > .widget-button,
.tripy-lab .widget-hbox > .widget-inline-hbox, .tripy-lab .widget-hbox > .widget-label,
.tripy-lab .widget-hbox > .widget-text, .tripy-lab .widget-hbox > .widget-dropdown { flex-shrink: 0; }
.tripy-lab .widget-toggle-button, .tripy-lab .widget-button { min-width: max-content; }
.tripy-lab .widget-tab > .lm-TabBar .lm-TabBar-content { flex-wrap: wrap; }
.tripy-lab .widget-tab > .lm-TabBar { min-height: max-content; }
"""
CSS = """<style>
.tripy-stale { opacity: 0.55; }
.tripy-lab .widget-tab > .lm-TabBar .lm-TabBar-tab { flex: 0 0 auto; max-width: none; min-width: 90px; }
.tripy-lab .widget-html > .widget-html-content { flex: 1 1 auto; min-width: 0; overflow-x: auto; }
.tripy-lab .tripy-table td, .tripy-lab .tripy-table th { padding: 1px 8px; text-align: left; }
""" + NARROW_CSS + stylesheet(TABLE_CSS, ".tripy-lab") + "</style>"


class LabWidget:
    """``.widget`` is the live view; ``show()`` displays it with its static snapshot in one output.

    Each pane is a ``tabs`` view model rendered by ``view.html()``: into the widget (tabs other than
    Trace/MLIR when first shown) and into the snapshot, which ``show()`` keeps up to date. ``editor=None``
    (``tripy_lab.lab.show(exe)``): the bounds are fixed, only the engine can be rebuilt.
    """

    def __init__(self, session: Session, editor: BoundsEditor | None, title: str = ""):
        self.session, self.editor, self.title = session, editor, title
        self.generic = W.Checkbox(value=False, description="generic form", indent=False)
        self.generic.observe(self._on_generic, "value")
        self.status = W.HTML()
        self.build_button = W.Button(description="Build", icon="cogs", button_style="primary")
        self.build_button.on_click(lambda _: self.session.build())
        self.cancel_button = W.Button(description="Cancel", icon="stop", button_style="danger",
                                      tooltip="stop waiting for this build (an interrupt does the same)",
                                      layout=W.Layout(display="none"))
        self.cancel_button.add_class("tripy-cancel")
        self.cancel_button.on_click(lambda _: self.session.cancel_build())
        self.build_button.add_class("tripy-build")
        self.engine = W.Dropdown(options=ENGINES, value=session.engine or "default", description="engine",
                                 layout=W.Layout(width="200px"))
        self.level = W.Dropdown(options=list(range(6)), value=session.optimization_level, description="-O",
                                style={"description_width": "24px"}, layout=W.Layout(width="90px"))
        self.engine.observe(self._on_engine, "value")
        self.level.observe(self._on_engine, "value")
        self.auto_ms = W.FloatText(value=session.auto_build_seconds * 1e3, description="auto-build < ms",
                                   style={"description_width": "initial"}, layout=W.Layout(width="190px"))
        self.auto_ms.observe(self._on_auto, "value")
        self.panes = {k: W.HTML() for k in _KEYS if k not in ("crosswalk", "run", "compare", "tune")}
        self.crosswalk = W.Output()
        # The live folded graph (extension/src/graph.ts) above the Trace pane; where it draws, the pane's static
        # picture is hidden by the extension's CSS (the listing stays)
        self.graph_out = W.Output()
        self.graph_out.add_class("tripy-graph-live")
        self.panes["trace"].add_class("tripy-trace-static")
        self.run_box = self._run_controls()
        # The MLIR tab switches between the highlighted text and an editor; Compare holds the diff view.
        self.mlir_editor = MlirEditor(session, on_toggle=self._on_edit_toggle)
        self.compare = ComparePane(session)
        self.tune = TunePane(session, on_change=self._changed)  # a finished sweep goes into the snapshot
        self.generic.layout.width = "auto"  # the Edit toggle sits next to it
        mlir_box = W.VBox([W.HBox([self.generic, self.mlir_editor.toggle]), self.panes["mlir"],
                           self.mlir_editor.widget])
        children = [W.VBox([self.graph_out, self.panes["trace"]]), mlir_box, self.panes["engine"], self.run_box,
                    self.panes["log"], self.panes["error"], self.crosswalk, self.compare.widget, self.tune.widget]
        self.tabs = W.Tab(children=children, titles=TAB_NAMES)
        self.tabs.observe(self._on_tab, "selected_index")
        for key, child in zip(_KEYS, children):
            child.add_class(f"tripy-tab-{key}")
        self.dirty: set[str] = set(_KEYS)
        self.views: dict = {"run": self.run_view}  # key -> tabs view model of the current stages
        self._shown_error: BaseException | None = None
        self._after_build = None  # a Run/Time/Sweep pressed while building
        self._tab_before_error = 0
        head = W.HBox([self.build_button, self.cancel_button, self.engine, self.level, self.auto_ms])
        bounds = editor.widget if editor is not None else W.HTML(
            "<i>Compiled in Python: the bounds are fixed (use %%tpcompile to edit them).</i>")
        self.widget = W.VBox([W.HTML(CSS + f"<b>{esc(title)}</b>"), bounds, head, self.status, self.tabs])
        self.widget.add_class("tripy-lab")
        self.render_times: dict[str, float] = {}
        self.overlay = None  # set_overlay: the Trace tab's shading (else the last timing run's)
        self.display: snapshot.SnapshotDisplay | None = None
        session.listeners.append(self.on_session)
        self._update_status()

    # -- the output: live widget + static snapshot ----------------------------------------------------
    def _view(self, key: str):
        """The view model of ``key`` for the current stages (built once per change), or None."""
        if key in self.views:
            return self.views[key]
        if key == "tune":
            return self.tune.view()
        s = self.session
        view = None
        if key == "trace" and s.error_stage == "trace":
            view = tabs.FailedTraceView.of(s.partial_traced, s.error_info(), s.good_traced, s.error_op)
        elif key == "trace" and s.traced is not None:
            view = tabs.TraceView.of(s.traced, s.error_op, self.overlay or timing_overlay(s.built))
        elif key == "mlir" and s.lowered is not None:
            trace = self._view("trace")  # the MLIR folds by module as the trace graph does
            view = tabs.MlirView.of(s.lowered, self.generic.value, s.error_op, getattr(trace, "model", None))
        elif key == "engine" and s.built is not None:
            view = tabs.EngineView.of(s.built)
        elif key in ("mlir", "engine", "crosswalk") and s.error is not None:
            view = trace_pane.missing_views(s).get("mlir" if key == "crosswalk" else key)  # says what exists
        elif key == "log":
            view = tabs.LogView.of(s)
        elif key == "error":
            view = tabs.ErrorView(s.error_info())
        if view is not None:
            self.views[key] = view
        return view

    def _invalidate(self, keys: set[str]) -> None:
        self.dirty |= keys
        for key in keys:
            self.views.pop(key, None)

    def snapshot_html(self) -> str:
        try:
            panes = {key: self._view(key) for key, _ in snapshot.PANES}
            return snapshot.snapshot_html(self.title, panes, self.session.status())
        except Exception as exc:  # a bug in a view: say so in the output (no marker: the notebook test flags it)
            return sanitize(views.error_html("tripy-lab could not draw the static snapshot of this cell.",
                                             [f"{type(exc).__name__}: {exc}"]))

    def _summary(self) -> str:
        text, _ = self.session.status()
        return f"{self.title}: {text}"

    def show(self, delay: float | None = None) -> snapshot.SnapshotDisplay:
        """Display the widget and its snapshot as one output (kept up to date: see ``snapshot``)."""
        self.display = snapshot.SnapshotDisplay(self.widget, lambda: (self.snapshot_html(), self._summary()), delay)
        self.display.show()
        return self.display

    def _changed(self) -> None:
        if self.display is not None:
            self.display.changed()

    # -- session events -------------------------------------------------------------------------------
    def on_session(self, changed: set[str]) -> None:
        if "error" in changed:
            self._invalidate({"error", "trace", "mlir", "crosswalk"})
        if "trace" in changed:
            self._invalidate({"trace", "crosswalk"})
        if "mlir" in changed:
            self._invalidate({"mlir", "crosswalk"})
            self.mlir_editor.on_session()
        if "engine" in changed:
            self._invalidate({"engine", "crosswalk", "compare"})
        if "run" in changed and self.run_view.kind != "note":  # a result of the old engine is on screen
            self._set_run(tabs.RunView(message="engine changed: run or time again"), publish=False)
        if "log" in changed:
            self._invalidate({"log"})
        # The fast tabs are the point of the loop: always refresh them (and the cheap engine/error ones);
        # the log and the crosswalk when shown.
        for key in ("trace", "mlir", "engine", "error"):
            if key in self.dirty:
                self._render(key)
        self._render_visible()
        if changed & {"stale", "status", "error"}:
            self._update_status()
        if "error" in changed:
            self._select_error_tab()
        if self._after_build is not None and not self.session.building:
            fn, self._after_build = self._after_build, None
            if "engine" in self.session.stale:  # the build was cancelled or failed: nothing new to run
                self._set_run(tabs.RunView(message="the build did not finish: nothing was run"))
            else:
                self._guard(fn)

    def _select_error_tab(self) -> None:
        """A new error opens the Error tab; once it is fixed, the tab shown before comes back."""
        error, index = self.session.error, _KEYS.index("error")
        if error is not None and error is not self._shown_error:
            if self.tabs.selected_index != index:
                self._tab_before_error = self.tabs.selected_index or 0
            self.tabs.selected_index = index
        elif error is None and self._shown_error is not None and self.tabs.selected_index == index:
            self.tabs.selected_index = self._tab_before_error
        self._shown_error = error
        self._changed()

    def _update_status(self) -> None:
        text, kind = self.session.status()
        self.status.value = views.status_html(text, kind)
        s = self.session
        self.build_button.disabled = s.building or s.lowered is None or bool(s.model.problems())
        self.build_button.description = "building…" if s.building else "Build"
        self.cancel_button.layout.display = "" if s.building else "none"
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
        self.dirty.discard(key)
        if key == "crosswalk":
            if self.session.traced is not None:
                self._render_crosswalk()
            elif (missing := self._view("crosswalk")) is not None:
                html = sanitize(missing.html().replace("No MLIR", "No crosswalk"))
                self.crosswalk.outputs = ({"output_type": "display_data", "data": {"text/html": html}, "metadata": {}},)
        elif key == "compare":
            self.compare.refresh()
        elif key in self.panes:
            view = self._view(key)
            if view is not None:
                self.panes[key].value = sanitize(view.html())
            if key == "trace":
                self._render_graph(view)
        self.render_times[key] = time.perf_counter() - start

    def _render_graph(self, view) -> None:
        bundle = view.bundle() if view is not None and hasattr(view, "bundle") else None
        if bundle is None:
            self.graph_out.outputs = ()
            return
        data = {trace_pane.GRAPH_MIME: bundle, "text/plain": ""}
        self.graph_out.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)

    def set_overlay(self, overlay) -> None:
        """Shade the Trace tab's nodes by ``overlay`` (a ``graph_draw.Overlay``; None clears it)."""
        self.overlay = overlay
        self._invalidate({"trace"})
        self._render("trace")
        self._changed()

    def _render_crosswalk(self) -> None:
        s = self.session
        trace = self._view("trace")
        info = s.error_info()
        error = None if info is None else {"message": info["summary"], "op": info.get("op")}
        graph = trace.bundle() if hasattr(trace, "bundle") else None  # the folded graph, drawn in the browser
        bundle = crosswalk.build_bundle(s.traced, s.lowered, s.built, title=self.session.exe_name, error=error,
                                        svg=None if graph else trace.svg, dot=trace.dot, graph=graph,
                                        model=getattr(trace, "model", None))
        # Where the tripy-lab renderer is not installed, the static trace/MLIR/layer panes stand in.
        panes = {key: self._view(key) for key in ("trace", "mlir", "engine")}
        fallback = snapshot.snapshot_html(self.title, panes, keys=("trace", "mlir", "engine"))
        data = {**crosswalk.mime_bundle(bundle), "text/html": fallback}
        self.crosswalk.outputs = ({"output_type": "display_data", "data": data, "metadata": {}},)

    # -- controls -------------------------------------------------------------------------------------
    def _on_engine(self, _change) -> None:
        engine = None if self.engine.value == "default" else self.engine.value
        self.session.set_engine(engine, self.level.value)
        s = self.session
        if s.stale & {"engine"} and s.builds_on_change():
            s.build()

    def _on_tab(self, _change) -> None:
        self._render_visible()
        self._changed()  # activity: holds back the snapshot update while the user looks around

    def _on_generic(self, _change) -> None:
        self._invalidate({"mlir"})
        self._render("mlir")
        self._changed()

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
        self.accuracy_button = W.Button(description="Accuracy", icon="crosshairs",
                                        tooltip="per-op error against the reference in float64")
        self.accuracy_button.on_click(lambda _: self._guard(self._accuracy))
        self.accuracy_button.add_class("tripy-accuracy-button")
        self.run_button.add_class("tripy-run")
        self.time_button.add_class("tripy-time")
        self.sweep_button.add_class("tripy-sweep-button")
        self.run_view = tabs.RunView()  # kind "note" until something ran: an engine change only says so then
        self.run_out = W.HTML(self.run_view.html())
        self.run_out.add_class("tripy-run-out")
        return W.VBox(
            [
                W.HBox([self.point, self.custom]),
                W.HBox([self.warmup, self.iters]),
                W.HBox([self.run_button, self.time_button, self.sweep_button, self.accuracy_button]),
                self.run_out,
            ]
        )

    def _points(self) -> list:
        value = self.point.value
        if value == "custom":
            return [parse_custom_shapes(self.custom.value)]
        return ["min", "opt", "max"] if value == "min, opt, max" else [value]

    def _set_run(self, view: tabs.RunView, publish: bool = True) -> None:
        self.run_view = self.views["run"] = view
        self.run_out.value = sanitize(view.html())
        if publish:
            self._changed()

    def _guard(self, fn) -> None:
        if self.session.building:  # run on the Executable being built, once it lands (not on the old one)
            self._after_build = fn
            self._set_run(tabs.RunView("busy", "waiting for the build to finish…"), publish=False)
            return
        if self.session.exe is None:
            self._set_run(tabs.RunView("error", "No Executable yet: press Build."))
            return
        self._set_run(tabs.RunView("busy", "running…"), publish=False)
        try:
            self._set_run(fn(self.session.exe))
        except Exception as exc:  # a bad custom shape or a run-time error: show it, keep the widget alive
            self._set_run(tabs.RunView("error", getattr(exc, "summary", f"{type(exc).__name__}: {exc}"),
                                       details=list(getattr(exc, "details", []))))

    def _run_once(self, exe) -> tabs.RunView:
        results = []
        for point in self._points():
            shapes = timing.shapes_at(exe.input_infos, point)
            out = exe(**timing.make_inputs(exe.input_infos, shapes))
            outs = out if isinstance(out, tuple) else (out,)
            results.append((timing.shape_label(shapes), "; ".join(f"{tuple(o.shape)} {o.dtype}" for o in outs)))
        return tabs.RunView("run", results=results)

    def _time(self, exe) -> tabs.RunView:
        self.overlay = None  # the Trace tab shades by this run's engine time, not an earlier accuracy run's error
        df = timing.benchmark(exe, self._points(), warmup=self.warmup.value, iters=self.iters.value)
        self._invalidate({"trace", "engine"})  # the per-layer times shade the graph and fill the layer table
        for key in ("trace", "engine"):
            self._render(key)
        return tabs.RunView("time", frame=df)

    def _sweep(self, exe) -> tabs.RunView:
        points, xlabel, xs, opt_x = timing.sweep_points(exe.input_infos, n=6)
        exe.warm(points, background=False)  # every point compiled before the first is timed (xla; others: no-op)
        df = timing.benchmark(exe, points, warmup=self.warmup.value, iters=self.iters.value, label="sweep")
        ok = df["error"] == ""
        sweep = ([x for x, good in zip(xs, ok) if good], list(df.loc[ok, "compute_ms"]), opt_x, xlabel)
        return tabs.RunView("sweep", frame=df, sweep=sweep)

    def _accuracy(self, exe) -> tabs.RunView:
        """Per-op accuracy on random inputs at the first chosen shape point; the MLIR pane shades by error."""
        from tripy_lab.lab.views.accuracy_views import run_accuracy

        report = run_accuracy(exe, self._points()[0])
        mlir = self._view("mlir")
        if isinstance(mlir, tabs.MlirView) and mlir.n_ops == len(report.program.ops()):
            mlir.accuracy = report
            self._render("mlir")
        # the Trace tab shaded by error: each node by how many tolerances off its worst MLIR op is
        self.set_overlay(Overlay("error against the reference (× tolerance)", report.by_trace_op(), unit="× tol",
                                 aggregate="max"))
        return tabs.RunView("accuracy", report=report)


def session_of(exe, name: str = "exe") -> Session:
    """A Session over an Executable's stages (``exe.stages``): nothing re-traced, the engine rebuildable."""
    from tripy_lab.lab.bounds_model import BoundsModel

    model = BoundsModel.from_values(list(exe.input_infos), dict(exe.input_infos))
    st = exe.stages
    built = st.get("built")
    session = Session(None, model, exe_name=name, engine=None,
                      optimization_level=getattr(built, "optimization_level", 3))
    session.traced = session.good_traced = st.get("traced")
    session.lowered = st.get("lowered")
    session.key = model.key()
    if built is not None:
        session.built, session.exe, session.last_build_seconds = built, exe, built.seconds
        session._built.put(session._build_key(), built)
    return session


def show(exe, name: str = "exe") -> LabWidget:
    """The ``%%tpcompile`` view (tabs + static snapshot, one output) of an Executable compiled in Python."""
    ui = LabWidget(session_of(exe, name), None, title=f"{name} = {exe}")
    for key in ("trace", "mlir", "engine", "error"):
        ui._render(key)
    ui.show()
    return ui
