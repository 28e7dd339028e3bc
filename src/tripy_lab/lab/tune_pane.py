"""The Tune tab: pick a space (engines, optimization levels, dtypes, int8, opt points), run it here or on a Dask
scheduler, watch rows arrive, open one config's stages.

The sweep is ``tuning.tune(..., wait=False)`` over the cell's function and its current bounds; rows arrive on a
background thread and are drawn on the kernel's event loop (``call_soon_threadsafe``), like background builds.
"""

from __future__ import annotations

import asyncio

from tripy_lab.lab import tuning
from tripy_lab.lab.html import sanitize
from tripy_lab.lab.shape_text import parse_custom_shapes
from tripy_lab.lab.tune_view import progress_html
from tripy_lab.lab.views import draw as views
from tripy_lab.lab.views import snapshot

ENGINES = ("reference", "xla", "onnxruntime", "tensorrt")
PROMPT = "Open a config's stages…"


def parse_opts(text: str) -> list[dict | None]:
    """``"x=8x64; x=32x64"`` -> [{"x": (8, 64)}, {"x": (32, 64)}]; empty -> [None] (the cell's opt point)."""
    points = [p.strip() for p in text.split(";") if p.strip()]
    return [parse_custom_shapes(p) for p in points] or [None]


class TunePane:
    def __init__(self, session, on_change=None):
        import ipywidgets as W

        from tripy_lab.engine import engine_class

        self.session, self.on_change = session, on_change
        usable = [e for e in ENGINES if engine_class(e).available()[0]]
        box = lambda w: W.Layout(width=w)
        self.engines = W.SelectMultiple(options=usable, value=tuple(usable[:1] if "xla" not in usable else ["xla"]),
                                        rows=3, description="engines", layout=box("220px"))
        self.levels = W.SelectMultiple(options=list(range(6)), value=(0, 3), rows=3, description="-O",
                                       layout=box("150px"), style={"description_width": "30px"})
        self.dtypes = W.SelectMultiple(options=list(tuning.DTYPES), value=("float32", "float16"), rows=3,
                                       description="dtype", layout=box("200px"))
        self.int8 = W.SelectMultiple(options=[("none", "none"), ("int8 weight-only", "int8")], value=("none",),
                                     rows=2, description="quantize", layout=box("240px"))
        self.opt = W.Text(placeholder="x=8x64; x=32x64 (empty: the cell's opt)", description="opt points",
                          layout=box("420px"))
        self.address = W.Text(placeholder="tcp://host:8786 (empty: in this kernel)", description="Dask scheduler",
                              style={"description_width": "initial"}, layout=box("420px"))
        self.run_button = W.Button(description="Tune", icon="play", button_style="primary")
        self.cancel_button = W.Button(description="Cancel", icon="stop", button_style="danger",
                                      layout=W.Layout(display="none"))
        self.run_button.add_class("tripy-tune-run")
        self.cancel_button.add_class("tripy-tune-cancel")
        self.run_button.on_click(lambda _: self.start())
        self.cancel_button.on_click(lambda _: self.cancel())
        self.count = W.HTML()
        self.out = W.HTML("<i>Pick a space and press Tune: every combination is built, checked against fp32 "
                          "(reference engine, same inputs) and timed.</i>")
        self.out.add_class("tripy-tune-out")
        self.picker = W.Dropdown(options=[(PROMPT, None)], value=None, layout=box("420px"))
        self.picker.add_class("tripy-tune-picker")
        self.picker.observe(self._picked, "value")
        self.stages = W.HTML()
        for w in (self.engines, self.levels, self.dtypes, self.int8, self.opt):
            w.observe(lambda _: self._count(), "value")
        self.widget = W.VBox([W.HBox([self.engines, self.levels, self.dtypes, self.int8]), self.opt,
                              W.HBox([self.address, self.run_button, self.cancel_button, self.count]),
                              self.out, self.picker, self.stages])
        self.run = None
        self.result = None  # the last finished sweep's TuneResult (the static snapshot shows it)
        self._clients: dict = {}
        self._loop = None
        self._count()

    def space(self) -> dict:
        return {"engine": list(self.engines.value), "optimization_level": list(self.levels.value),
                "dtype": list(self.dtypes.value), "quantize": [None if q == "none" else q for q in self.int8.value],
                "opt": parse_opts(self.opt.value)}

    def _count(self) -> None:
        try:
            n = len(tuning.expand(self.space()))
            self.count.value = f"<span style='font-size:12px'>{n} configs</span>"
        except Exception as exc:  # an empty selection or an unreadable opt point
            self.count.value = views.status_html(getattr(exc, "summary", str(exc)), "error")

    def _client(self):
        address = self.address.value.strip()
        if not address:
            return None
        if address not in self._clients:
            from distributed import Client

            self._clients[address] = Client(address, timeout=10)
        return self._clients[address]

    def start(self) -> None:
        s = self.session
        if s.func is None:
            self.out.value = views.status_html("Tune needs the cell's function: use %%tpcompile, or call "
                                               "tripy_lab.lab.tune(func, args, space).", "error")
            return
        if s.model.problems():
            self.out.value = views.status_html("The bounds are invalid: fix them first.", "error")
            return
        try:
            self.run = tuning.tune(s.func, s.model.values(), self.space(), client=self._client(), wait=False)
        except Exception as exc:  # a bad space or an unreachable scheduler: say so, keep the tab alive
            self.out.value = views.error_html(getattr(exc, "summary", f"{type(exc).__name__}: {exc}"),
                                              list(getattr(exc, "details", [])))
            return
        try:
            self._loop = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self.result = None
        self.run_button.disabled, self.cancel_button.layout.display = True, ""
        self.run.listeners.append(self._on_run)
        self._draw()

    def cancel(self) -> None:
        if self.run is not None:
            self.run.cancel()

    def _on_run(self, _run) -> None:  # the sweep's thread
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._draw)
        else:
            self._draw()

    def _draw(self) -> None:
        run = self.run
        if run is None:
            return
        if run.done.is_set() and self.result is None:
            self.result = run.result()
            self.run_button.disabled, self.cancel_button.layout.display = False, "none"
            if self.on_change is not None:
                self.on_change()
        self.out.value = sanitize(self.result.html() if self.result is not None else progress_html(run))
        self.picker.unobserve(self._picked, "value")
        rows = [(f"#{i} {r['config']}", i) for i, r in enumerate(run.rows) if r is not None and not r.get("error")]
        self.picker.options, self.picker.value = [(PROMPT, None), *rows], None
        self.picker.observe(self._picked, "value")

    def _picked(self, change) -> None:
        if change["new"] is not None:
            self.open(change["new"])

    def open(self, index: int) -> None:
        """Config ``index``'s Trace, MLIR and Engine panes (kept from an in-kernel sweep, else built here)."""
        run = self.run
        self.stages.value = views.status_html(f"opening #{index}…", "busy")
        try:
            from tripy_lab.lab.tune_view import TuneResult

            result = self.result or TuneResult(list(run.rows), run.configs, run.program, run.gate, 0.0)
            exe = result.executable(index)
        except Exception as exc:
            self.stages.value = views.error_html(getattr(exc, "summary", f"{type(exc).__name__}: {exc}"), [])
            return
        title = f"#{index} {run.rows[index]['config']}"
        self.stages.value = snapshot.snapshot_html(title, snapshot.executable_panes(exe),
                                                   keys=("trace", "mlir", "engine"))

    def view(self):
        return self.result
