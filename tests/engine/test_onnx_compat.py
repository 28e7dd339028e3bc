"""Graphs run on the oldest onnxruntime we support: onnxruntime 1.30 (the GPU machine's) has no int8/int16/bool
``Where`` kernel, so every ``Where`` the lowering emits computes in a type its CPU kernels have."""

import numpy as np
import onnx
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.engine.onnx.ops import _WHERE_TYPES

ELEM = {onnx.TensorProto.FLOAT: "f32", onnx.TensorProto.DOUBLE: "f64", onnx.TensorProto.INT32: "i32",
        onnx.TensorProto.INT64: "i64", onnx.TensorProto.UINT8: "ui8"}

PROGRAMS = {
    "cast to int8": (lambda x: tp.cast(x, tp.int8), [tp.InputInfo((4,), tp.float32)]),
    "int8 floor division": (lambda a, b: a // b, [tp.InputInfo((4,), tp.int8)] * 2),
    "int8 select": (lambda c, a, b: tp.where(c, a, b), [tp.InputInfo((4,), tp.bool), tp.InputInfo((4,), tp.int8),
                                                         tp.InputInfo((4,), tp.int8)]),
    "int8 gather": (lambda x, i: tp.gather(x, 0, i), [tp.InputInfo((4,), tp.int8), tp.InputInfo((2,), tp.int32)]),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_every_where_is_of_a_type_onnxruntime_130_has(name, tmp_path):
    func, args = PROGRAMS[name]
    path = tmp_path / "m.onnx"
    pipeline.trace(func, args=args).lower().to_onnx(str(path))
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)), strict_mode=True)
    types = {v.name: v.type.tensor_type.elem_type for v in (*model.graph.value_info, *model.graph.output)}
    wheres = [n for n in model.graph.node if n.op_type == "Where"]
    assert wheres, "the lowering was expected to emit Where here"
    for node in wheres:
        assert ELEM.get(types[node.output[0]]) in _WHERE_TYPES, (node.name, types[node.output[0]])


def test_int8_programs_still_follow_the_rules():
    div = tp.compile(lambda a, b: a // b, args=[tp.InputInfo((4,), tp.int8)] * 2, engine="onnxruntime")
    a, b = np.array([7, -7, -128, 5], np.int8), np.array([0, 2, -1, -2], np.int8)
    np.testing.assert_array_equal(np.asarray(div(a, b)), [0, -4, -128, -3])
    cast = tp.compile(lambda x: tp.cast(x, tp.int8), args=[tp.InputInfo((4,), tp.float32)], engine="onnxruntime")
    np.testing.assert_array_equal(np.asarray(cast(np.array([np.nan, 300.0, -300.0, -2.7], np.float32))),
                                  [0, 127, -128, -2])
