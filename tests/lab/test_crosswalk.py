"""Stage links: MLIR lines -> trace ops (via NameLoc), layers -> trace ops, and a valid crosswalk bundle."""

import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.lab.views import crosswalk
from tripy_lab.lab.views.crosswalk_schema import MIME_TYPE, validate_bundle


def f(a, s):
    b = a + a
    c = tp.reshape(b, (-1, s))
    return tp.relu(c) * 2.0


@pytest.fixture(scope="module")
def stages():
    args = [tp.InputInfo(((1, 2, 3), 4), tp.float32), tp.DimensionInputInfo((1, 2, 4))]
    traced = pipeline.trace(f, args=args)
    lowered = traced.lower()
    built = lowered.build(engine="reference")
    return traced, lowered, built


@pytest.mark.parametrize(("line", "out"), [
    ('%0 = tensorrt.x %a : tensor<4xf32> loc("%t0"("f.py":4:9))', "%0 = tensorrt.x %a : tensor<4xf32>"),
    ("func.func @main(%a: t {x = 1} loc(unknown), %b: t loc(unknown)) {",
     "func.func @main(%a: t {x = 1}, %b: t) {"),
    ('x loc(fused<"a(b">["c"])', "x"),
    ("%0 = my.alloc(%x)", "%0 = my.alloc(%x)"),
])
def test_strip_locs(line, out):
    assert crosswalk.strip_locs(line) == out


def test_mlir_lines_map_to_trace_ops(stages):
    traced, lowered, _ = stages
    lines = crosswalk.mlir_lines(lowered)
    names = {op.name for op in traced.trace.ops}
    mapped = [op for _, op in lines if op is not None]
    assert set(mapped) <= names
    # Every MLIR op line is mapped; structural lines (module, func, return, braces) are not.
    assert len(mapped) == len(lowered.program.ops())
    assert all(" loc(" not in text for text, _ in lines)
    text = crosswalk.mlir_text(lowered)
    assert "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>" in text
    add = traced.trace.ops[0]
    assert any("kSUM" in t and op == add.name for t, op in lines)


def test_generic_form_maps_too(stages):
    _, lowered, _ = stages
    lines = crosswalk.mlir_lines(lowered, generic=True)
    assert any('"tensorrt.element_wise"' in t for t, op in lines if op)


def test_bundle_is_valid_and_linked(stages):
    traced, lowered, built = stages
    bundle = crosswalk.build_bundle(traced, lowered, built, title="f")
    assert validate_bundle(bundle) == []
    assert len(bundle["ops"]) == len(traced.trace.ops)
    assert len(bundle["layers"]) == len(built.layers)
    linked = [op for op in bundle["ops"] if op["mlir"] and op["layers"]]
    assert linked, "some trace op should link to both MLIR lines and a layer"
    mime = crosswalk.mime_bundle(bundle)
    assert MIME_TYPE in mime and "text/plain" in mime


def test_bundle_with_error_and_svg(stages):
    traced, lowered, _ = stages
    op = traced.trace.ops[1].name
    svg, dot, _ = __import__("tripy_lab.lab.views.tabs", fromlist=["x"]).trace_graph(traced, op)
    error = {"message": "boom", "op": op}
    bundle = crosswalk.build_bundle(traced, lowered, None, error=error, svg=svg, dot=dot)
    assert validate_bundle(bundle) == []
    assert bundle["error"] == {"message": "boom", "op": op}
    assert bundle["layers"] == []


def test_layer_ops_fall_back_to_mlir_op_locations(stages):
    traced, lowered, built = stages
    from dataclasses import replace

    layer = replace(built.layers[0], source_ops=())
    known = {op.name for op in traced.trace.ops}
    assert crosswalk.layer_ops(layer, lowered, known) == [traced.trace.ops[0].name]
