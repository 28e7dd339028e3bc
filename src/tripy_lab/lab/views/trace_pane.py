"""The Trace tab's view models: the folded graph (``graph_model``), drawn live by the browser and statically here.

``TraceView.html(limits)`` is the static rendering (snapshot, report, and the text/html beside the live graph):
the top level as a picture, then each module opened in place as far as ``limits.svg_chars`` allows, then the
listing. ``TraceView.bundle()`` is the live one: the model as JSON for the JupyterLab renderer
(extension/src/graph.ts), which lays out each level in the browser (expand, search, select, zoom, overlays).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tripy_lab.lab.html import esc
from tripy_lab.lab.views import draw as views
from tripy_lab.lab.views import graph_draw, graph_model
from tripy_lab.lab.views.limits import LIVE, SNAPSHOT, _cut, _ms, head_html, note_html

GRAPH_MIME = "application/vnd.tripy-lab.graph+json"
EXPAND_ALL_OPS = 60  # a program this small is also drawn with every group open




def picture_html(svg: str | None, dot: str, note: str, image: bool, caption: str = "") -> str:
    """One drawing: inline SVG (live) or an image (static: survives untrusted sanitizers), fitted to the
    width of the output and never clipped (no fixed-height scroll box)."""
    if svg is None:
        return views.graph_html(None, dot, note)
    if image:
        drawn = views.svg_image(svg).replace('style="max-width:none"', 'style="max-width:100%;height:auto"')
    else:
        drawn = svg
    cap = f'<div style="font-size:12px;color:#374151">{esc(caption)}</div>' if caption else ""
    return f'<div class="tripy-graph" style="overflow:auto">{cap}{drawn}</div>'


@dataclass(repr=False)
class TraceView:
    n_ops: int
    seconds: float | None
    source: object  # the listing's text, or the Traced it is printed from when first shown (20,000 ops: 0.5 s)
    model: graph_model.GraphModel
    overlay: graph_draw.Overlay | None = None
    _drawn: dict = field(default_factory=dict, repr=False)  # expanded tuple -> (svg, dot, note)

    @classmethod
    def of(cls, traced, error_op: str | None = None, overlay: graph_draw.Overlay | None = None) -> TraceView:
        failed = getattr(traced, "failed_call", None)
        model = graph_model.build(traced.trace, failed=failed, error_op=error_op)
        return cls(len(traced.trace.ops), traced.seconds, traced, model, overlay)

    @property
    def listing(self) -> str:
        if not isinstance(self.source, str):
            self.source = self.source.as_text()
        return self.source

    def __repr__(self) -> str:  # a notebook shows it after lab.graph(...): not the whole listing
        return f"TraceView({self.model.title!r}: {self.n_ops} ops, {len(self.model.roots)} top-level nodes)"

    def with_overlay(self, overlay: graph_draw.Overlay | None) -> TraceView:
        return TraceView(self.n_ops, self.seconds, self.source, self.model, overlay)

    def drawing(self, expanded=()) -> tuple[str | None, str, str]:
        key = tuple(sorted(expanded))
        if key not in self._drawn:
            self._drawn[key] = graph_draw.render(self.model, key, self.overlay)
        return self._drawn[key]

    def _whole(self) -> list[int]:
        """A small program drawn with every group open (every op a node: the crosswalk links each), else the
        top level."""
        if self.n_ops <= EXPAND_ALL_OPS:
            return [i for i, n in enumerate(self.model.nodes) if n.children]
        return self.model.initial_expanded()

    @property
    def svg(self) -> str | None:  # the crosswalk's fallback drawing
        return self.drawing(self._whole())[0]

    @property
    def dot(self) -> str:
        return self.drawing(self._whole())[1]

    @property
    def note(self) -> str:
        return self.drawing(self._whole())[2]

    def bundle(self) -> dict:
        """The live graph's MIME data (the model as JSON)."""
        return self.model.to_json(self.overlay)

    def _head(self) -> str:
        groups = sum(1 for n in self.model.nodes if n.kind == "module")
        ops = f"{self.n_ops} op" + ("" if self.n_ops == 1 else "s")
        where = f" in {groups} module group" + ("" if groups == 1 else "s") if groups else ""
        folded = "folded by module and by frontend call" if groups else "folded by frontend call"
        return head_html(f"{ops}{where} · traced in {_ms(self.seconds)} · {folded}; inputs blue, constants yellow, "
                         "outputs green; <code>?</code> marks a dynamic dim")

    def graph_html(self, limits) -> str:
        """The top level and as many opened groups as ``limits.svg_chars`` has room for."""
        budget = limits.svg_chars
        plan = graph_draw.picture_plan(self.model)[: limits.graph_pictures]
        if self.n_ops <= EXPAND_ALL_OPS and len(plan) > 1:
            every = [i for i, n in enumerate(self.model.nodes) if n.children]
            if every:
                plan.insert(1, (-1, every))
        parts, used, left_out = [], 0, 0
        for k, (group, expanded) in enumerate(plan):
            svg, dot, note = self.drawing(expanded)
            size = len(svg) if svg is not None else 0
            if k and budget is not None and used + size > budget:
                left_out += 1
                continue
            if k == 0 and budget is not None and size > budget:
                return note_html(f"Graph elided: its SVG is {size // 1000} kB (limit {budget // 1000} kB); the "
                                 "listing below has every op.")
            used += size
            if k == 0:
                parts.append(picture_html(svg, dot, note, limits.svg_image))
                continue
            name = "every group" if group == -1 else self.model.nodes[group].module or \
                self.model.nodes[group].label.splitlines()[0]
            body = picture_html(svg, dot, note, limits.svg_image)
            opened = " open" if len(parts) == 1 else ""  # the first module opened shows, the others on a click
            parts.append(f'<details class="tripy-graph-expanded"{opened}><summary style="font-size:12px">{esc(name)} '
                         f"opened</summary>{body}</details>")
        if left_out:
            parts.append(note_html(f"{left_out} more opened groups left out (size limit); run the cell to open "
                                   "any group in the live graph."))
        return "".join(parts)

    def html(self, limits=None) -> str:
        limits = limits or LIVE
        graph = self.graph_html(limits)
        elided = "Graph elided" in graph[:200]
        legend = graph_draw.legend_html(self.overlay, self.model)
        listing = esc(_cut(self.listing, limits.text_chars, "listing"))
        opened = " open" if elided else ""
        return (self._head() + legend + graph + f'<details{opened}><summary style="font-size:12px">trace listing'
                f'</summary><pre style="font-size:11px">{listing}</pre></details>')


@dataclass
class FailedTraceView:
    """The Trace tab after a failed trace: the ops recorded up to the failing line (``partial``, with the call
    that raised drawn in red, its operand shapes and line), and the last good trace with the op on the failing
    line highlighted (``good``)."""

    stop: str  # "In [5], line 3 in f()"
    summary: str
    partial: TraceView | None
    good: TraceView | None = None
    good_op: str | None = None

    @classmethod
    def of(cls, partial, info: dict | None, good=None, error_op: str | None = None) -> FailedTraceView:
        where = (info or {}).get("location", "").splitlines()
        stop = where[0].removeprefix("--> ") if where else "the failing line"
        return cls(stop, (info or {}).get("summary", ""), TraceView.of(partial) if partial is not None else None,
                   TraceView.of(good, error_op) if good is not None and error_op is not None else None, error_op)

    @property
    def model(self):
        return self.partial.model if self.partial is not None else None

    @property
    def svg(self) -> str | None:  # the crosswalk draws the last good trace
        return self.good.svg if self.good is not None else None

    @property
    def dot(self) -> str:
        return self.good.dot if self.good is not None else ""

    def bundle(self) -> dict | None:
        return self.partial.bundle() if self.partial is not None else None

    def html(self, limits=None) -> str:
        head = (f'<div class="tripy-partial-trace" style="font-size:12px;color:#b91c1c">Tracing stopped at '
                f"<b>{esc(self.stop)}</b>: {esc(self.summary)}</div>")
        if self.partial is None:
            body = '<div style="font-size:12px">No op was recorded before the error (see the Error tab).</div>'
        else:
            n = self.partial.n_ops
            red = " and the call that failed (red)" if self.partial.model.error is not None else ""
            body = (head_html(f"partial trace: the {n} op{'s' if n != 1 else ''} recorded before the error{red} "
                              "(unused results shown as outputs)") + self.partial.html(limits))
        good = ""
        if self.good is not None:
            good = (f"<details><summary style='font-size:12px'>last good trace: <code>{esc(self.good_op)}"
                    f"</code> (red) is the op on the failing line</summary>{self.good.html(limits)}</details>")
        return head + body + good


@dataclass
class MissingView:
    """A tab whose stage does not exist because an earlier one failed: what there is instead."""

    stage: str  # "MLIR", "Engine", "Crosswalk"
    reason: str  # "tracing stopped at In [5], line 3: Incompatible shapes ..."
    have: str  # "The Trace tab shows the 4 ops recorded before the error."

    def html(self, limits=None) -> str:
        return (f'<div class="tripy-missing" style="font-size:12px"><b>No {esc(self.stage)} for this program</b>: '
                f"{esc(self.reason.rstrip('.'))}.<br>{esc(self.have)}</div>")


def missing_views(session) -> dict:
    """MissingViews for the tabs a failed trace or lowering leaves without a stage (key -> view)."""
    info = session.error_info() or {}
    stage = getattr(session, "error_stage", "")
    if stage not in ("trace", "mlir", "lower"):
        return {}
    where = (info.get("location") or "").splitlines()
    at = where[0].removeprefix("--> ") if where else "the failing line"
    partial = getattr(session, "partial_traced", None)
    if stage == "trace":
        reason = f"tracing stopped at {at}: {info.get('summary', '')}"
        n = len(partial.trace.ops) if partial is not None else 0
        have = (f"The Trace tab shows the {n} op{'s' if n != 1 else ''} recorded before the error and the failing "
                "call in red; the Error "
                "tab has the details. MLIR, engine and layers appear once the trace succeeds.")
    else:
        reason = f"lowering to MLIR failed: {info.get('summary', '')}"
        have = "The Trace tab has the whole trace (the failing op in red); the Error tab has the details."
    out = {"mlir": MissingView("MLIR", reason, have), "engine": MissingView("engine", reason, have)}
    return out


def show_graph(obj, overlay=None, title: str = "") -> TraceView:
    """Display the folded graph of an Executable, a ``Traced`` or a failed trace's exception: the live graph
    (for the JupyterLab extension) and its static pictures (``text/html``), in one output."""
    from IPython.display import display

    from tripy_lab.lab.html import sanitize

    stages = getattr(obj, "stages", None)
    traced = stages.get("traced") if isinstance(stages, dict) else getattr(obj, "partial_trace", obj)
    if traced is None or not hasattr(traced, "trace"):
        raise TypeError(f"lab.graph: expected an Executable, a Traced or a failed trace's exception, got {obj!r}")
    built = stages.get("built") if isinstance(stages, dict) else None
    view = TraceView.of(traced, overlay=overlay if overlay is not None else graph_draw.timing_overlay(built))
    if title:
        view.model.title = title
    html_text = sanitize(view.html(SNAPSHOT))
    data = {GRAPH_MIME: view.bundle(), "text/html": html_text,
            "text/plain": f"trace graph: {view.model.title} ({view.n_ops} ops)"}
    display(data, raw=True)
    return view
