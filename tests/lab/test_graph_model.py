"""The folded trace graph: groups by module and by frontend call, runs, overlays, the failing call, drawings."""

from __future__ import annotations

import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.lab.views import crosswalk, graph_draw, graph_model, tabs, trace_pane
from tripy_lab.lab.views.crosswalk_schema import validate_bundle
from tripy_lab.trace.ir import CallScope

INFO = tp.InputInfo(((1, 2, 4), 8), tp.float32)


def _block(x):
    h = tp.relu(x * 2.0)
    return h + x


def _program(x):
    for _ in range(2):
        x = _block(x)
    return tp.softmax(x, dim=-1) * 3.0


def _scoped(traced):
    """Fill TraceOp.module / .call by hand (as the tracer does): the two blocks are modules "h.0" and "h.1"
    (each with a sub-module "act" for its relu); the last ``* 3.0`` is one frontend call of 4 ops (its constant
    and reshape folded with the mul). ``h`` itself made no op."""
    mul = CallScope("__mul__")
    block = 0
    for op in traced.trace.ops:
        if block < 2:
            op.module = f"h.{block}.act" if op.kind == "relu" else f"h.{block}"
            block += op.kind == "add"
        elif op.kind != "softmax":
            op.call = mul
    return traced


@pytest.fixture(scope="module")
def traced():
    return _scoped(pipeline.trace(_program, args=[INFO]))


def labels(model, indices):
    return [model.nodes[i].label.splitlines()[0] for i in indices]


def test_top_level_is_modules_and_calls(traced):
    model = graph_model.build(traced.trace)
    top = labels(model, model.roots)
    # inputs first, outputs last; the container "h" is not a level: h.0, h.1 sit at the top
    assert top[0] == "x" and top[-1].startswith("return")
    assert "h.0" in top and "h.1" in top and "h" not in top
    assert top.index("h.0") < top.index("h.1")
    calls = [model.nodes[i] for i in model.roots if model.nodes[i].kind == "call"]
    assert [c.label for c in calls] == ["mul (2 ops)"] and top[-3].endswith("= softmax")
    h0 = model.module_node("h.0")
    assert "act" in labels(model, model.nodes[h0].children)
    assert model.module_node("h.0.act") is not None and model.module_node("h") is None
    # every op is a leaf exactly once, and each group counts its ops
    leaves = [n for n in model.nodes if n.id.startswith("op-")]
    assert sorted(n.id for n in leaves) == sorted("op-" + op.name for op in traced.trace.ops)
    assert model.nodes[h0].n_ops == len(model.ops_under(h0)) > 1


def test_visible_level_draws_edges_between_visible_nodes(traced):
    model = graph_model.build(traced.trace)
    h0, h1 = model.module_node("h.0"), model.module_node("h.1")
    top = graph_draw.level_dot(model, set())
    assert f'"n{h0}" -> "n{h1}"' in top and "cluster" not in top
    assert 'id="op-' not in top.split("->")[0] or "relu" not in top  # the ops inside h.0 are folded away
    opened = graph_draw.level_dot(model, {h0})
    assert f'subgraph "cluster_n{h0}"' in opened and 'id="m:h.0.act"' in opened
    act = model.module_node("h.0.act")
    assert f'"n{act}"' in opened and f'"n{h0}" ->' not in opened  # edges now leave from inside h.0


def test_overlay_sums_or_maxes_over_groups(traced):
    model = graph_model.build(traced.trace)
    names = [op.name for op in traced.trace.ops]
    ov = graph_draw.Overlay("time", {n: 1.0 for n in names}, "ms")
    values = ov.node_values(model)
    h0 = model.module_node("h.0")
    assert values[h0] == model.nodes[h0].n_ops
    worst = graph_draw.Overlay("error", {n: float(k) for k, n in enumerate(names)}, aggregate="max")
    assert worst.node_values(model)[h0] == max(names.index(o) for o in model.ops_under(h0))
    dot = graph_draw.level_dot(model, set(), values, "ms", ov.to_json(model)["total"])
    assert graph_draw.shade(1.0) in dot and " ms" in dot
    assert "time:" in graph_draw.legend_html(ov, model)


def test_many_nodes_fold_into_runs():
    def long(x):
        for _ in range(80):
            x = tp.relu(x)
        return x

    model = graph_model.build(pipeline.trace(long, args=[INFO]).trace)
    assert len(model.roots) <= graph_model.MAX_CHILDREN + 2
    runs = [i for i in model.roots if model.nodes[i].kind == "run"]
    assert runs and sum(model.nodes[i].n_ops for i in runs) == 80
    assert model.nodes[runs[0]].label.startswith("%t0 … ")


def test_failed_call_is_a_red_node_fed_by_its_operands():
    def bad(x, w):
        y = tp.relu(x)
        return y @ w

    with pytest.raises(tp.TripyException) as info:
        pipeline.trace(bad, args=[tp.InputInfo((2, 3), tp.float32), tp.InputInfo((4, 5), tp.float32)])
    partial = info.value.partial_trace
    assert partial.failed_call["name"] == "matmul"
    assert partial.failed_call["types"] == ["tensor<2x3xf32>", "tensor<4x5xf32>"]
    view = trace_pane.TraceView.of(partial)
    model = view.model
    failed = model.nodes[model.error]
    assert failed.kind == "failed" and "matmul" in failed.label and "tensor<4x5xf32>" in failed.label
    assert "test_graph_model.py" in failed.line
    fed = {model.nodes[a].id for a, b in model.edges if b == model.error}
    assert fed == {"op-" + partial.trace.ops[0].name, "in-w"}
    svg = view.svg
    assert svg is not None and graph_draw.RED in svg and "matmul" in svg
    html = trace_pane.FailedTraceView.of(partial, {"summary": "bad", "location": "--> here"}).html(tabs.SNAPSHOT)
    assert "the call that failed (red)" in html and "<img" in html


def test_snapshot_pictures_top_level_and_opened_groups(traced):
    view = tabs.TraceView.of(traced)
    html = view.html(tabs.SNAPSHOT)
    assert html.count("<img") >= 2 and "h.0 opened" in html
    assert "h.1 opened" not in html  # laid out like h.0: drawn once
    assert "max-height:640px" not in html
    live = view.html(tabs.LIVE)
    assert live.count("<svg") == 1  # live: the top level only (the browser opens groups)
    tight = tabs.Limits(svg_chars=1000, text_chars=500, svg_image=True)
    assert "Graph elided" in view.html(tight)


def test_crosswalk_bundle_carries_the_folded_graph(traced):
    lowered = traced.lower()
    view = tabs.TraceView.of(traced)
    bundle = crosswalk.build_bundle(traced, lowered, None, dot=view.dot, graph=view.bundle())
    assert validate_bundle(bundle) == []
    assert bundle["graph"]["top"] == view.model.roots
    broken = dict(bundle, graph={**bundle["graph"], "nodes": bundle["graph"]["nodes"][:3]})
    assert any(e.startswith("graph: no node") for e in validate_bundle(broken))


def test_missing_views_say_what_exists():
    class S:
        error_stage = "trace"
        partial_traced = None

        def error_info(self):
            return {"summary": "Incompatible shapes.", "location": "--> In [3], line 4 in f()"}

    views = trace_pane.missing_views(S())
    html = views["mlir"].html()
    assert "No MLIR for this program" in html and "In [3], line 4" in html and "Shapes.." not in html
    assert "engine" in views


def test_timing_overlay_splits_layer_time_over_its_ops():
    class Layer:
        def __init__(self, name, ops):
            self.name, self.source_ops = name, ops

    class Prof:
        layers = [Layer("L0", ["%t1", "%t2"]), Layer("L1", ["%t2"])]
        layer_s = {"L0": 0.002, "L1": 0.001}

    class Compiled:
        last_profile = Prof()

    class Built:
        compiled = Compiled()

    ov = graph_draw.timing_overlay(Built())
    assert ov.values == pytest.approx({"%t1": 1.0, "%t2": 2.0}) and ov.unit == "ms"
    assert graph_draw.timing_overlay(type("B", (), {"compiled": None})()) is None


def decode(bundle: dict) -> list[dict]:
    """The live bundle's nodes with the keys the kernel leaves out filled in, as the renderer does
    (extension/src/graph_level.ts GraphModel)."""
    nodes = [dict(n) for n in bundle["nodes"]]

    def inherit(i: int, key: str) -> str:
        if key not in nodes[i]:
            nodes[i][key] = inherit(nodes[i]["p"], key) if nodes[i]["p"] >= 0 else ""
        return nodes[i][key]

    for i, n in enumerate(nodes):
        n.setdefault("i", "op-" + n["l"][:n["l"].find(" = ")])
        n.setdefault("t", "")
        n.setdefault("n", 1 if n["k"] in ("op", "const") else 0)
        inherit(i, "m")
        inherit(i, "s")
    return nodes


def test_live_bundle_is_compact_and_decodes_to_the_model(traced, monkeypatch):
    out = next(op for op in traced.trace.ops if op.kind == "mul").outputs[0]
    name, out.name = out.name, "a = b"  # a name the renderer's "op-" + label-name rule would get wrong
    try:
        model = graph_model.build(traced.trace)
        bundle = model.to_json()
    finally:
        out.name = name
    nodes = decode(bundle)
    assert [(n["i"], n["l"], n["k"], n["p"], n["s"], n["m"], n["n"], n.get("c", [])) for n in nodes] == \
        [(m.id, m.label, m.kind, m.parent, m.line, m.module, m.n_ops, m.children) for m in model.nodes]
    leaves = [raw for raw, m in zip(bundle["nodes"], model.nodes) if m.kind in ("op", "const")]
    assert sum("i" in raw for raw in leaves) == 1  # only the op whose name the rule gets wrong carries its id
    assert not any("m" in raw or "n" in raw for raw in leaves)  # its module and op count go without saying
    tips = [n["t"] for n, m in zip(nodes, model.nodes) if m.kind == "op"]
    assert all(t.startswith(n + " = ") and " : tensor<" in t for t, n in zip(tips, (m.id[3:] for m in model.nodes
                                                                                      if m.kind == "op")))
    monkeypatch.setattr(graph_model, "TIP_OPS", 3)  # a big program: the ops' tooltips stay in the kernel
    big = graph_model.build(traced.trace).to_json()
    assert not any("t" in raw for raw, m in zip(big["nodes"], model.nodes) if m.kind in ("op", "const"))
    assert len(str(big)) < len(str(bundle))


def test_the_trace_pane_heading_counts_what_is_there():
    """A program with no modules is not "in 0 module groups"; one group is singular; small programs show every
    group opened in one picture, named once ("every group opened", not "... opened opened")."""
    plain = trace_pane.TraceView.of(pipeline.trace(_program, args=[INFO]))
    head = plain.html(tabs.SNAPSHOT)
    assert "module group" not in head and "folded by frontend call" in head and f"{plain.n_ops} ops" in head
    scoped = trace_pane.TraceView.of(_scoped(pipeline.trace(_program, args=[INFO])))
    html = scoped.html(tabs.SNAPSHOT)
    groups = sum(1 for n in scoped.model.nodes if n.kind == "module")
    assert f"in {groups} module groups" in html and "folded by module and by frontend call" in html
    assert "opened opened" not in html and "every group opened" in html
