# ruff: noqa: E501  (reference modules are kept verbatim)
"""Text form: MLIR's module/func/return spelling, SSA names, aliases, dense elements (hex and
elided), dialect resources, locations, generic form, and MLIR's float spelling."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects.arith import AddiOp
from xdsl.dialects.arith import ConstantOp as ArithConstantOp
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseResourceAttr,
    DictionaryAttr,
    FileLineColLoc,
    FusedLoc,
    IntAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
    UnknownLoc,
    i64,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from tripy_lab.mlir import dialect as trt
from tripy_lab.mlir.attrs import MemorySpaceAttr, ShapeProfileAttr
from tripy_lab.mlir.dialect import attr_value, tensor_type
from tripy_lab.mlir.text import format_float, parse_module, print_module

EAGER_MODULE = """\
module @"outs_%t2_0" {
  func.func @main() -> tensor<?x?xf32> {
    %cst_f32 = tensorrt.constant dense<1.000000e+00> : tensor<f32>
    %cst_i32 = tensorrt.constant dense<[2, 3]> : tensor<2xi32>
    %0 = tensorrt.broadcast %cst_f32 broadcast_dims<> shape(%cst_i32 : tensor<2xi32>) : tensor<f32> to tensor<?x?xf32>
    return %0 : tensor<?x?xf32>
  }
}
"""

WRAPPER_MODULE = """\
#profile = #tensorrt.shape_profile<min = [1, 2], opt = [2, 2], max = [3, 2]>
#profile1 = #tensorrt.shape_profile<min = [1], opt = [2], max = [4]>
module @"ins_a_s_outs_%t9_0" {
  func.func @main(%arg0: tensor<?x2xf32> {tensorrt.dimension_names = {}, tensorrt.shape_profile = #profile}, %arg1: tensor<i32> {plan.memory_space = #plan.memory_space<host>, tensorrt.value_bounds = #profile1}) -> tensor<?x2xf32> {
    %0 = tensorrt.element_wise <kSUM>(%arg0, %arg0 : tensor<?x2xf32>, tensor<?x2xf32>) -> tensor<?x2xf32>
    return %0 : tensor<?x2xf32>
  }
}
"""


def module_of(arg_types, make, arg_attrs=None, name=None, results=True) -> ModuleOp:
    """``module { func.func @main(args) { make(*args); return <last results> } }``."""
    block = Block(arg_types=arg_types)
    ops = make(*block.args)
    ops = ops if isinstance(ops, list) else [ops]
    block.add_ops(ops)
    outs = list(ops[-1].results) if results and ops else []
    block.add_op(ReturnOp(*outs))
    func = FuncOp(
        "main",
        (arg_types, [v.type for v in outs]),
        Region(block),
        arg_attrs=ArrayAttr(arg_attrs) if arg_attrs else None,
    )
    return ModuleOp([func], sym_name=StringAttr(name) if name else None)


@pytest.mark.parametrize("text", [EAGER_MODULE, WRAPPER_MODULE])
def test_reference_modules_round_trip_exactly(text):
    module = parse_module(text)
    assert print_module(module) == text
    generic = print_module(module, generic=True)
    assert print_module(parse_module(generic)) == text
    assert print_module(parse_module(generic), generic=True) == generic


def test_eager_module_built_with_constructors():
    def make():
        f = trt.ConstantOp(np.float32(1.0), "f32")
        s = trt.ConstantOp(np.array([2, 3]), "i32")
        return [f, s, trt.BroadcastOp(f.results[0], [], tensor_type((None, None), "f32"), shape=s.results[0])]

    assert print_module(module_of([], make, name="outs_%t2_0")) == EAGER_MODULE


def test_wrapper_module_built_with_constructors():
    f32, i32 = tensor_type((None, 2), "f32"), tensor_type((), "i32")
    attrs = [
        DictionaryAttr(
            {
                "tensorrt.shape_profile": ShapeProfileAttr([1, 2], [2, 2], [3, 2]),
                "tensorrt.dimension_names": DictionaryAttr({}),
            }
        ),
        DictionaryAttr(
            {
                "tensorrt.value_bounds": ShapeProfileAttr([1], [2], [4]),
                "plan.memory_space": MemorySpaceAttr("host"),
            }
        ),
    ]
    module = module_of([f32, i32], lambda a, s: trt.ElementWiseOp(a, a, "kSUM"), attrs, "ins_a_s_outs_%t9_0")
    module.verify()
    assert print_module(module) == WRAPPER_MODULE


def test_builtin_spellings_are_accepted():
    text = EAGER_MODULE.replace("module @", "builtin.module @").replace("    return", "    func.return")
    assert print_module(parse_module(text)) == EAGER_MODULE


# ---- names -------------------------------------------------------------------------------------


def test_constant_names_use_one_conflict_counter():
    def make():
        return (
            [trt.ConstantOp(np.float32(v), "f32") for v in (1, 2)]
            + [trt.ConstantOp(np.int32(v), "i32") for v in (1, 2)]
            + [trt.ConstantOp(np.float32(3), "f32")]
        )

    text = print_module(module_of([], make, results=False))
    names = [line.split(" = ")[0].strip() for line in text.splitlines() if "tensorrt.constant" in line]
    assert names == ["%cst_f32", "%cst_f32_0", "%cst_i32", "%cst_i32_1", "%cst_f32_2"]
    assert print_module(parse_module(text)) == text


def test_numbering_skips_named_results_and_topk_names():
    x = tensor_type((4, 5), "f32")

    def make(a):
        e = trt.UnaryOp(a, "kEXP")
        c = trt.ConstantOp(np.ones((4, 5), np.float32), "f32")
        s = trt.ElementWiseOp(e.results[0], c.results[0], "kSUM")
        k = trt.TopKOp(s.results[0], "kMIN", 2, 1)
        return [e, c, s, k, trt.UnaryOp(k.results[0], "kABS")]

    text = print_module(module_of([x], make))
    assert "%0 = tensorrt.unary" in text and "%cst_f32 = tensorrt.constant" in text
    assert "%1 = tensorrt.element_wise <kSUM>(%0, %cst_f32" in text
    assert "%values, %indices = tensorrt.top_k <kMIN> {axis = 1 : i64, k = 2 : i64} %1" in text
    assert "%2 = tensorrt.unary {unaryOperation = #tensorrt.unary_operation<kABS>} %values" in text
    assert print_module(parse_module(text)) == text


def test_unnamed_multi_result_ops_print_as_groups():
    x = tensor_type((2, 3), "f32")

    def make(a):
        p = trt.OpaquePluginOp([a], [x, x], "TwoOut", creator_params={"n": IntAttr(1) and trt.int_attr(3, "i32")})
        return [p, trt.ElementWiseOp(p.results[0], p.results[1], "kSUM")]

    module = module_of([x], make)
    text = print_module(module)
    assert (
        '%0:2 = tensorrt.opaque_plugin {creator_params = {n = 3 : i32}, plugin_name = "TwoOut", '
        'plugin_namespace = "", plugin_version = "1"}(%arg0) : (tensor<2x3xf32>) -> (tensor<2x3xf32>, '
        "tensor<2x3xf32>)" in text
    )
    assert "%1 = tensorrt.element_wise <kSUM>(%0#0, %0#1 :" in text
    assert print_module(parse_module(text)) == text
    generic = print_module(module, generic=True)
    assert '%0:2 = "tensorrt.opaque_plugin"(%arg0)' in generic
    assert print_module(parse_module(generic)) == text


def test_plugin_shape_region_round_trips():
    x = tensor_type((None, 4), "f32")

    def make(a):
        body = Block(arg_types=[i64, i64])
        two = ArithConstantOp.from_int_and_width(2, 64)
        add = AddiOp(body.args[0], two.result)
        body.add_ops([two, add, trt.YieldOp(add.result, body.args[1])])
        return trt.OpaquePluginOp([a], [x], "P", shapes_region=Region(body))

    text = print_module(module_of([x], make))
    assert "^bb0(%arg1: i64, %arg2: i64):" in text and "tensorrt.yield %1, %arg2 : i64, i64" in text
    assert print_module(parse_module(text)) == text


# ---- aliases -----------------------------------------------------------------------------------


def test_profiles_and_maps_are_hoisted_and_numbered():
    t3 = tensor_type((None, 3, 4), "f32")
    profiles = [
        ShapeProfileAttr([1, 3, 4], [2, 3, 4], [8, 3, 4]),
        ShapeProfileAttr([2], [2], [9]),
        ShapeProfileAttr([1, 3, 4], [2, 3, 4], [8, 3, 4]),
    ]
    attrs = [
        DictionaryAttr({"tensorrt.shape_profile": profiles[0], "tensorrt.dimension_names": DictionaryAttr({})}),
        DictionaryAttr({"tensorrt.value_bounds": profiles[1], "plan.memory_space": MemorySpaceAttr("host")}),
        DictionaryAttr({"tensorrt.shape_profile": profiles[2], "tensorrt.dimension_names": DictionaryAttr({})}),
    ]

    def make(a, s, b):
        t1 = trt.TransposeOp(a, [2, 0, 1])
        t2 = trt.TransposeOp(t1.results[0], [0, 2, 1])
        t3_ = trt.TransposeOp(t2.results[0], [0, 2, 1])
        return [t1, t2, t3_]

    module = module_of([t3, tensor_type((), "i32"), t3], make, attrs)
    module.verify()
    text = print_module(module)
    head = text.splitlines()[:4]
    assert head == [
        "#map = affine_map<(d0, d1, d2) -> (d2, d0, d1)>",
        "#map1 = affine_map<(d0, d1, d2) -> (d0, d2, d1)>",
        "#profile = #tensorrt.shape_profile<min = [1, 3, 4], opt = [2, 3, 4], max = [8, 3, 4]>",
        "#profile1 = #tensorrt.shape_profile<min = [2], opt = [2], max = [9]>",
    ]
    assert text.count("= #profile}") == 2 and "tensorrt.value_bounds = #profile1}" in text
    assert text.count("{permutation = #map1}") == 2 and "{permutation = #map}" in text
    assert print_module(parse_module(text)) == text
    generic = print_module(module, generic=True)
    assert generic.splitlines()[:4] == head
    assert print_module(parse_module(generic)) == text


# ---- dense elements ----------------------------------------------------------------------------


def _constant_module(*arrays, elem="f32"):
    return module_of([], lambda: [trt.ConstantOp(a, elem) for a in arrays], results=False)


def test_large_constants_print_as_hex_and_parse_back():
    big = np.arange(101, dtype=np.float32)
    text = print_module(_constant_module(np.arange(100, dtype=np.float32), big))
    assert "dense<[0.000000e+00, 1.000000e+00," in text
    assert 'dense<"0x000000000000803F00000040' in text
    back = parse_module(text)
    assert print_module(back) == text
    op = list(back.body.block.first_op.body.block.ops)[1]
    assert np.array_equal(attr_value(op, "weights"), big)


def test_elide_above():
    module = _constant_module(
        np.arange(33, dtype=np.float32), np.arange(32, dtype=np.float32), np.zeros(1000, np.float32)
    )
    text = print_module(module, elide_above=32)
    assert "%cst_f32 = tensorrt.constant dense_resource<__elided__> : tensor<33xf32>" in text
    assert "dense<[0.000000e+00, 1.000000e+00" in text  # 32 elements: kept
    assert "dense<0.000000e+00> : tensor<1000xf32>" in text  # splats are never elided
    assert print_module(parse_module(text), elide_above=32) == text  # display only, but it parses
    assert "__elided__" not in print_module(module)


def test_dense_spellings():
    module = _constant_module(np.array([[1.5, -2.0]], np.float32), np.float32(-0.0), np.array([1e-5], np.float32))
    text = print_module(module)
    assert "dense<[[1.500000e+00, -2.000000e+00]]> : tensor<1x2xf32>" in text
    assert "dense<-0.000000e+00> : tensor<f32>" in text
    assert "dense<9.99999974E-6> : tensor<1xf32>" in text
    empty = print_module(_constant_module(np.zeros((0,), np.int32), elem="i32"))
    assert "dense<> : tensor<0xi32>" in empty
    assert print_module(parse_module(empty)) == empty


# ---- resources ---------------------------------------------------------------------------------


def _resource_module(handle="blob", shape=(2, 2), elem="f32"):
    attr = DenseResourceAttr.from_params(handle, tensor_type(shape, elem))
    return module_of([], lambda: trt.ConstantOp(attr), name="res")


def test_resources_round_trip():
    data = np.array([[1, 2], [3, 4]], np.float32)
    resources = {"blob": data.tobytes(), "unused": b"\x00"}
    text = print_module(_resource_module(), resources=resources)
    assert text.endswith(
        '\n\n{-#\n  dialect_resources: {\n    builtin: {\n      blob: "0x04000000'
        + data.tobytes().hex().upper()
        + '"\n    }\n  }\n#-}\n'
    )
    assert "unused" not in text
    assert "%cst_f32 = tensorrt.constant dense_resource<blob> : tensor<2x2xf32>" in text
    got: dict[str, bytes] = {}
    module = parse_module(text, resources=got)
    assert got == {"blob": data.tobytes()}
    assert print_module(module, resources=got) == text
    op = module.body.block.first_op.body.block.first_op
    assert np.array_equal(attr_value(op, "weights", got), data)
    # without resources the trailer is left out, and the handle parses repeatedly unchanged
    bare = print_module(module)
    assert "{-#" not in bare and print_module(parse_module(bare)) == bare
    assert print_module(parse_module(bare)) == bare


def test_resource_alignment_follows_element_size():
    data = np.arange(3, dtype=np.int64)
    text = print_module(_resource_module("h", (3,), "i64"), resources={"h": data.tobytes()})
    assert 'h: "0x08000000' in text
    got: dict[str, bytes] = {}
    parse_module(text, resources=got)
    assert np.frombuffer(got["h"], np.int64).tolist() == [0, 1, 2]


# ---- locations ---------------------------------------------------------------------------------


def test_locations():
    x = tensor_type((2,), "f32")

    def make(a):
        e = trt.UnaryOp(a, "kEXP")
        e.location = NameLoc(StringAttr("%t5"), FileLineColLoc(StringAttr("model.py"), IntAttr(3), IntAttr(5)))
        r = trt.ActivationOp(e.results[0], "kRELU")
        r.location = NameLoc(StringAttr("%t6"), UnknownLoc())
        s = trt.UnaryOp(r.results[0], "kABS")
        s.location = FusedLoc([NameLoc(StringAttr("%t6;;<out>;;%t7"), UnknownLoc())], StringAttr("<TraceOp: abs>"))
        return [e, r, s]

    module = module_of([x], make)
    plain = print_module(module)
    assert "loc(" not in plain
    text = print_module(module, locations=True)
    assert (
        "%0 = tensorrt.unary {unaryOperation = #tensorrt.unary_operation<kEXP>} %arg0 : tensor<2xf32> "
        'loc("%t5"("model.py":3:5))' in text
    )
    assert 'tensor<2xf32> loc("%t6")' in text
    assert 'loc(fused<"<TraceOp: abs>">["%t6;;<out>;;%t7"])' in text
    back = parse_module(text)
    assert print_module(back, locations=True) == text
    assert print_module(back) == plain
    generic = print_module(module, generic=True, locations=True)
    assert 'loc("%t5"("model.py":3:5))' in generic
    assert print_module(parse_module(generic), locations=True) == text


# ---- floats ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,elem,text",
    [
        (1.0, "f32", "1.000000e+00"),
        (-0.75, "f32", "-7.500000e-01"),
        (float(np.float32(1e-5)), "f32", "9.99999974E-6"),
        (float(np.float32(0.1)), "f32", "1.000000e-01"),
        (1e-5, "f64", "1.000000e-05"),
        (float(np.float32(123456789.0)), "f32", "0x4CEB79A3"),
        (float("nan"), "f32", "0x7FC00000"),
        (float("inf"), "f32", "0x7F800000"),
        (float("-inf"), "f16", "0xFC00"),
        (0.0, "f32", "0.000000e+00"),
        (-0.0, "bf16", "-0.000000e+00"),
        (float(np.float16(0.1)), "f16", "9.997550e-02"),
        (448.0, "f8E4M3FN", "4.480000e+02"),
        (float(np.float32(3e38)), "f32", "3.000000e+38"),
    ],
)
def test_format_float(value, elem, text):
    assert format_float(value, elem) == text


def test_float_attributes_print_like_mlir():
    x = tensor_type((2, 3), "f32")
    module = module_of([x], lambda a: trt.ActivationOp(a, "kLEAKY_RELU", alpha=0.1))
    assert "alpha = 1.000000e-01 : f32" in print_module(module)
    module = module_of([x], lambda a: trt.ActivationOp(a, "kCLIP", alpha=1e-5, beta=6.0))
    assert (
        "{activationType = #tensorrt.activation_type<kCLIP>, alpha = 9.99999974E-6 : f32, beta = 6.000000e+00 : f32}"
        in print_module(module)
    )
    assert print_module(parse_module(print_module(module))) == print_module(module)
