"""Drawing the folded trace graph: overlays, the DOT of one visible level, and the static pictures.

A drawing shows the model's top level with the groups in ``expanded`` opened in place (graphviz clusters);
every edge between two leaves is drawn once between the visible nodes holding its ends. The browser renderer
(extension/src/graph.ts) builds the same DOT from the same JSON; the static snapshot and ``lab.report`` draw
the top level and each module they have room for with the kernel's graphviz.

Overlays: ``Overlay(title, values)`` maps trace op names to a number (time per call, error vs. the reference);
a folded group shows the sum (or the max) of its ops, and nodes are shaded by their value against the largest
one drawn, with a legend.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tripy_lab.lab.html import esc
from tripy_lab.lab.views import draw as views
from tripy_lab.lab.views.graph_model import GraphModel
from tripy_lab.trace.graph import dot_quote

FILL = {"op": "#f3f4f6", "const": "#fef3c7", "input": "#dbeafe", "output": "#dcfce7", "module": "#e0e7ff",
        "call": "#f3f4f6", "run": "#ede9fe", "failed": "#fecaca"}
SHAPE = {"const": "note", "input": "invhouse", "output": "house"}
RED = "#dc2626"
FANOUT = 4


@dataclass
class Overlay:
    """Per-trace-op values drawn as node shading: ``values`` op name -> number, ``title`` names the legend.

    ``aggregate`` is how a folded group shows its ops: ``"sum"`` (time) or ``"max"`` (error)."""

    title: str
    values: dict[str, float]
    unit: str = ""
    aggregate: str = "sum"

    def __post_init__(self):
        # inf / nan (an overflowed op's error) shade as the darkest value: ten times the largest finite one
        finite = [float(v) for v in self.values.values() if math.isfinite(float(v))]
        top = 10 * max(finite, default=1.0) or 1.0
        self.values = {k: (float(v) if math.isfinite(float(v)) else top) for k, v in self.values.items()}

    def node_values(self, model: GraphModel) -> dict[int, float]:
        """Node index -> value, for every node with an op that has a value (groups aggregated)."""
        out: dict[int, float] = {}
        combine = max if self.aggregate == "max" else (lambda a, b: a + b)
        for name, value in self.values.items():
            i = model.op_node.get(name)
            if i is None or value != value:  # NaN: no value
                continue
            for j in (i, *model.ancestors(i)):
                out[j] = combine(out[j], float(value)) if j in out else float(value)
        return out

    def to_json(self, model: GraphModel) -> dict:
        total = sum(v for k, v in self.values.items() if k in model.op_node and v == v)
        return {"title": self.title, "unit": self.unit, "aggregate": self.aggregate, "total": total,
                "values": {str(k): v for k, v in self.node_values(model).items()}}


def op_times(prof) -> dict[str, float]:
    """Trace op name -> ms per call from an engine profile: each layer's time split evenly over its source ops
    (as ``layer_time.line_times`` does for source lines)."""
    out: dict[str, float] = {}
    for ly in prof.layers:
        t = prof.layer_s.get(ly.name, 0.0)
        ops = [o for o in ly.source_ops if o]
        for name in ops:
            out[name] = out.get(name, 0.0) + t * 1e3 / len(ops)
    return out


def timing_overlay(built) -> Overlay | None:
    """The last timing run's per-layer time on the trace ops (None before any timing run)."""
    prof = getattr(getattr(built, "compiled", None), "last_profile", None)
    if prof is None:
        return None
    times = op_times(prof)
    return Overlay("engine time per call", times, "ms") if times else None


def fmt(value: float, unit: str) -> str:
    return f"{value:.3g} {unit}".strip()


def shade(fraction: float) -> str:
    """White (0) to deep orange (1)."""
    f = min(max(fraction, 0.0), 1.0)
    lo, hi = (255, 247, 237), (234, 88, 12)
    return "#" + "".join(f"{round(a + (b - a) * f):02x}" for a, b in zip(lo, hi))


def visible(model: GraphModel, expanded: set[int]) -> list[int]:
    """For each node, the node that stands for it in the drawing: itself when every ancestor is open, else
    its outermost closed ancestor."""
    rep = [-1] * len(model.nodes)

    def cut(i: int) -> int:
        if rep[i] >= 0:
            return rep[i]
        p = model.nodes[i].parent
        if p < 0:
            rep[i] = i
        else:
            c = cut(p)
            rep[i] = c if c != p else (i if p in expanded else p)
        return rep[i]

    for i in range(len(model.nodes)):
        cut(i)
    return rep


def level_dot(model: GraphModel, expanded: set[int] | list[int], values: dict[int, float] | None = None,
              unit: str = "", total: float = 0.0) -> str:
    """DOT of the drawing with ``expanded`` groups open (clusters); node ids are the model's ``Node.id``."""
    expanded = {i for i in expanded if model.nodes[i].children}
    rep = visible(model, expanded)
    edges, fan = _edges(model, rep)
    shown = [i for i in range(len(model.nodes)) if rep[i] == i and i not in expanded]
    vmax = max((values.get(i, 0.0) for i in shown), default=0.0) if values else 0.0
    hot = {model.error, *model.ancestors(model.error)} if model.error is not None else set()
    q = dot_quote
    lines = ["digraph trace {", "  rankdir=TB;", '  node [fontname="Courier", fontsize=10, margin="0.08,0.03"];',
             '  edge [color="#6b7280", arrowsize=0.6];']
    if len(shown) > 40:
        lines.append("  splines=line; nslimit=1; mclimit=0.1;")
    else:
        lines.append("  nslimit=2;")

    def node_line(i: int, pad: str) -> str:
        n = model.nodes[i]
        label = n.label if n.kind in ("input", "output", "failed") or not n.line or n.kind == "module" \
            else f"{n.label}\n{n.line}"
        if i in fan:
            label += f"\n(feeds {fan[i]} nodes)"
        fill = FILL.get(n.kind, "#f3f4f6")
        style = "filled" if n.kind in ("op", "const", "input", "output", "failed") else '"rounded,filled"'
        extra = ""
        if n.kind == "module":
            extra += ", penwidth=1.6"
        if n.kind == "call":
            style = '"rounded,filled,dashed"'
        if values and i in values:
            v = values[i]
            share = f" · {v / total:.0%}" if total > 0 and unit == "ms" else ""
            label += f"\n{fmt(v, unit)}{share}"
            fill = shade(v / vmax if vmax > 0 else 0.0)
        if i in hot:
            extra += f', color="{RED}", penwidth=3' + (', fontcolor="#991b1b"' if n.kind == "failed" else "")
        shape = SHAPE.get(n.kind, "box")
        return (f'{pad}"n{i}" [id={q(n.id, "id")}, shape={shape}, style={style}, fillcolor="{fill}"{extra}, '
                f"label={q(label)}, tooltip={q(model.tip(i) or n.label, 'tooltip')}];")

    def emit(i: int, pad: str) -> None:
        n = model.nodes[i]
        if i in expanded:
            color = RED if i in hot else "#6366f1"
            lines.append(f'{pad}subgraph "cluster_n{i}" {{')
            lines.append(f'{pad}  id={q("cl-" + n.id, "id")}; label={q(n.label.splitlines()[0] + "  ▾")}; '
                         f'style="rounded,dashed"; color="{color}"; fontname="Helvetica"; fontsize=11;')
            for c in n.children:
                emit(c, pad + "  ")
            lines.append(f"{pad}}}")
        else:
            lines.append(node_line(i, pad))

    for r in model.roots:
        emit(r, "  ")
    lines += [f'  "n{a}" -> "n{b}";' for a, b in edges]
    lines.append("}")
    return "\n".join(lines)


def _edges(model: GraphModel, rep: list[int]) -> tuple[list[tuple[int, int]], dict[int, int]]:
    """The drawn edges, and the nodes of constants only that feed more than ``FANOUT`` nodes (weights shared by
    every block): their edges are left out and their label says how many they feed."""
    seen: dict[tuple[int, int], None] = {}
    for a, b in model.edges:
        ra, rb = rep[a], rep[b]
        if ra != rb:
            seen[(ra, rb)] = None
    fan: dict[int, int] = {}
    for ra, _ in seen:
        n = model.nodes[ra]
        if n.n_const and n.n_const == n.n_ops:
            fan[ra] = fan.get(ra, 0) + 1
    fan = {i: k for i, k in fan.items() if k > FANOUT}
    return [e for e in seen if e[0] not in fan], fan


def render(model: GraphModel, expanded, overlay: Overlay | None = None) -> tuple[str | None, str, str]:
    """(svg or None, dot, note) of one drawing, by the kernel's graphviz."""
    values = overlay.node_values(model) if overlay is not None else None
    total = overlay.to_json(model)["total"] if overlay is not None else 0.0
    dot = level_dot(model, set(expanded), values, overlay.unit if overlay else "", total)
    svg, note = views.render_svg(dot)
    return svg, dot, note


_OP_NAME = re.compile(r"%t\d+ = ")


def _signature(model: GraphModel, i: int) -> tuple:
    return tuple((model.nodes[c].kind, _OP_NAME.sub("", model.nodes[c].label)) for c in model.nodes[i].children)


def picture_plan(model: GraphModel, limit: int = 12) -> list[tuple[int | None, list[int]]]:
    """The drawings a static snapshot tries, in order: the top level, then each group opened in place
    (breadth first, modules before calls), a group laid out like one already drawn (``h.1`` after ``h.0``)
    left out."""
    plan: list[tuple[int | None, list[int]]] = [(None, model.initial_expanded())]
    seen: set[tuple] = set()
    queue = list(model.roots)
    while queue and len(plan) < limit:
        level = sorted(queue, key=lambda i: (model.nodes[i].kind != "module", -model.nodes[i].n_ops))
        queue = []
        for i in level:
            n = model.nodes[i]
            if len(n.children) < 2 or n.kind not in ("module", "run", "call") or n.n_const == n.n_ops:
                continue  # nothing to see inside: one op, or constants only
            sig = _signature(model, i)
            if sig in seen:
                continue
            seen.add(sig)
            if len(plan) < limit:
                plan.append((i, [*model.ancestors(i), i]))
            queue.extend(n.children)
    return plan


def legend_html(overlay: Overlay | None, model: GraphModel) -> str:
    if overlay is None:
        return ""
    values = overlay.node_values(model)
    tops = sorted(((v, i) for i, v in values.items() if model.nodes[i].parent < 0), reverse=True)[:3]
    top = ", ".join(f"{esc(model.nodes[i].label.splitlines()[0])} {esc(fmt(v, overlay.unit))}" for v, i in tops)
    ramp = "".join(f'<span style="display:inline-block;width:14px;height:10px;background:{shade(k / 4)}"></span>'
                   for k in range(5))
    how = "sum of its ops" if overlay.aggregate == "sum" else "largest of its ops"
    return (f'<div class="tripy-graph-legend" style="font-size:12px;margin:2px 0">{esc(overlay.title)}: {ramp} '
            f"less → more (a folded node shows the {how}); top level: {top}</div>")
