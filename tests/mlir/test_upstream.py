"""The generic text parses and verifies in upstream MLIR (jaxlib's bindings, no mlir-opt), and
our float / dense spellings match upstream MLIR's printer."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FileLineColLoc,
    IntAttr,
    ModuleOp,
    NameLoc,
    StringAttr,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from tripy_lab.mlir import dialect as trt
from tripy_lab.mlir import upstream
from tripy_lab.mlir.attrs import MemorySpaceAttr, ShapeProfileAttr
from tripy_lab.mlir.dialect import tensor_type
from tripy_lab.mlir.text import format_float, parse_module, print_module
from tripy_lab.mlir.upstream import check_with_upstream

pytest.importorskip("jaxlib.mlir.ir")


def _program() -> ModuleOp:
    """Several ops, every kind of argument attribute, and locations."""
    x_t, n_t = tensor_type((None, 4), "f32"), tensor_type((), "i32")
    block = Block(arg_types=[x_t, n_t])
    x, n = block.args
    ops = []

    def add(op, line):
        op.location = NameLoc(
            StringAttr(f"%t{len(ops)}"), FileLineColLoc(StringAttr("model.py"), IntAttr(line), IntAttr(5))
        )
        ops.append(op)
        return op.results[0]

    shape = add(trt.ShapeOp(x), 3)
    rows = add(
        trt.CollapseRankOp(add(trt.SliceOp(shape, [0], [1], [1], tensor_type((1,), "i32")), 4), tensor_type((), "i32")),
        5,
    )
    w = add(trt.ConstantOp(np.arange(16, dtype=np.float32).reshape(4, 4) / 7, "f32"), 6)
    y = add(trt.MatrixMultiplyOp(x, w, "kNONE", "kNONE"), 7)
    y = add(trt.ActivationOp(y, "kRELU"), 8)
    t = add(trt.TransposeOp(y, [1, 0]), 9)
    s = add(trt.ReduceOp(t, "kSUM", [0], keep_dims=True), 10)
    total = add(trt.ElementWiseOp(rows, n, "kSUM"), 11)
    big = add(trt.ConstantOp(np.linspace(0, 1, 200, dtype=np.float32).reshape(50, 4), "f32"), 12)
    ops.append(ReturnOp(s, total, big))
    block.add_ops(ops)
    arg_attrs = ArrayAttr(
        [
            DictionaryAttr(
                {
                    "tensorrt.shape_profile": ShapeProfileAttr([1, 4], [8, 4], [64, 4]),
                    "tensorrt.dimension_names": DictionaryAttr({"0": StringAttr("batch")}),
                }
            ),
            DictionaryAttr(
                {
                    "tensorrt.value_bounds": ShapeProfileAttr([0], [5], [10]),
                    "plan.memory_space": MemorySpaceAttr("host"),
                }
            ),
        ]
    )
    func = FuncOp("main", ([x_t, n_t], [s.type, total.type, big.type]), Region(block), arg_attrs=arg_attrs)
    module = ModuleOp([func], sym_name=StringAttr("ins_x_n_outs_%t7_%t8_0"))
    module.verify()
    return module


def test_generic_form_passes_upstream_mlir():
    generic = print_module(_program(), generic=True, locations=True)
    assert "#profile = #tensorrt.shape_profile" in generic and 'loc("%t0"("model.py":3:5))' in generic
    assert check_with_upstream(generic) == []
    assert check_with_upstream(print_module(_program(), generic=True)) == []


def test_broken_module_gives_a_diagnostic():
    generic = print_module(_program(), generic=True)
    broken = generic.replace(
        "-> (tensor<1x?xf32>, tensor<i32>, tensor<50x4xf32>)",
        "-> (tensor<i32>, tensor<i32>, tensor<50x4xf32>)",
    )
    assert broken != generic
    diags = check_with_upstream(broken)
    assert diags[0].startswith('loc("-":')
    assert "type of return operand 0 ('tensor<1x?xf32>') doesn't match function result type ('tensor<i32>')" in diags[0]


def test_syntax_error_is_reported():
    diags = check_with_upstream('"builtin.module"() ({\n  %0 = "x.y"(%undefined) : (i32) -> i32\n}) : () -> ()')
    assert diags and "use of undeclared SSA value name" in diags[0]


def test_pretty_form_is_not_upstream_syntax():
    assert check_with_upstream(print_module(_program())) != []


def test_mlir_opt_is_not_needed(monkeypatch):
    """No external tool: nothing is spawned and an empty PATH does not matter."""
    src = inspect.getsource(upstream)
    assert "subprocess" not in src and "shutil" not in src and "os.system" not in src
    monkeypatch.setenv("PATH", "")
    assert check_with_upstream(print_module(_program(), generic=True)) == []


def test_generic_round_trip_of_the_program():
    module = _program()
    generic = print_module(module, generic=True, locations=True)
    assert print_module(parse_module(generic), generic=True, locations=True) == generic
    assert print_module(parse_module(generic)) == print_module(module)


# ---- spellings agree with upstream MLIR's printer ----------------------------------------------

_IR_TYPES = {"f32": "F32Type", "f16": "F16Type", "bf16": "BF16Type", "f64": "F64Type"}
_BITS = {"f32": (np.uint32, np.float32), "f16": (np.uint16, np.float16), "f64": (np.uint64, np.float64)}


def _upstream_float(value: float, elem: str) -> str:
    from jaxlib.mlir import ir

    with ir.Context(), ir.Location.unknown():
        return str(ir.FloatAttr.get(getattr(ir, _IR_TYPES[elem]).get(), value)).rsplit(" : ", 1)[0]


@settings(max_examples=300, deadline=None)
@given(bits=st.integers(0, 2**32 - 1))
def test_f32_spelling_matches_upstream(bits):
    value = float(np.array([bits], np.uint32).view(np.float32)[0])
    if value != value:
        return  # NaN payloads are not preserved by FloatAttr.get
    assert format_float(value, "f32") == _upstream_float(value, "f32")


@settings(max_examples=200, deadline=None)
@given(bits=st.integers(0, 2**16 - 1), elem=st.sampled_from(["f16", "bf16"]))
def test_half_spellings_match_upstream(bits, elem):
    import ml_dtypes

    dtype = np.float16 if elem == "f16" else ml_dtypes.bfloat16
    value = float(np.array([bits], np.uint16).view(dtype)[0])
    if value != value:
        return
    assert format_float(value, elem) == _upstream_float(value, elem)


@settings(max_examples=200, deadline=None)
@given(value=st.floats(allow_nan=False, allow_infinity=True) | st.sampled_from([1e-5, 0.1, 1 / 3, 2.5e-300]))
def test_f64_spelling_matches_upstream(value):
    assert format_float(value, "f64") == _upstream_float(value, "f64")


def test_dense_spellings_match_upstream():
    from jaxlib.mlir import ir

    cases = [
        (np.arange(101, dtype=np.float32) / 3, "f32"),
        (np.arange(6, dtype=np.int32).reshape(2, 3), "i32"),
        (np.array([1e-5, 0.1, -0.0], np.float32), "f32"),
        (np.full((2, 2), 0.5, np.float32), "f32"),
        (np.arange(120, dtype=np.int64), "i64"),
    ]
    for array, elem in cases:
        module = ModuleOp([FuncOp("main", ([], []), Region(Block()))])
        block = module.body.block.first_op.body.block
        block.add_ops([trt.ConstantOp(array, elem), ReturnOp()])
        ours = [line for line in print_module(module, generic=True).splitlines() if "weights" in line][0]
        with ir.Context() as ctx:
            ctx.allow_unregistered_dialects = True
            theirs = str(ir.Attribute.parse(ours.split("weights = ", 1)[1].split("}>", 1)[0]))
        assert ours.split("weights = ", 1)[1].startswith(theirs + "}>")
