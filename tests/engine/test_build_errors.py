"""Every build failure on every engine is a TripyException naming the op, its shapes, the profile point
(min/opt/max) and the user's line; no raw jax/xDSL exception escapes (issue 8, finding 4)."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine import base

pytest.importorskip("jax")
W = np.ones((3, 2), np.float32)


def conv():
    c = tp.Conv(2, 4, (3, 3))
    c.weight = tp.Tensor(np.ones((4, 2, 3, 3), np.float32))
    c.bias = tp.Tensor(np.zeros(4, np.float32))
    return c


def test_a_conv_whose_opt_shape_is_invalid():
    with pytest.raises(tp.TripyException) as info:
        tp.compile(conv(), args=[tp.InputInfo((1, (2, 3, 4), 8, 8), tp.float32)], engine="xla")
    err = info.value
    text = str(err)
    assert "tensorrt.convolution" in text and "Profile point: opt (input=1x3x8x8)" in text
    assert "(1, 3, 8, 8)" in text  # the operand shapes at that point
    assert err.op is not None and err.location.file.endswith("test_build_errors.py")


def test_an_invalid_min_shape_fails_at_first_use_naming_min():
    exe = tp.compile(lambda a: a @ tp.Tensor(W), args=[tp.InputInfo((2, (1, 3, 4)), tp.float32)], engine="xla")
    with pytest.raises(tp.TripyException) as info:
        exe(np.ones((2, 1), np.float32))
    text = str(info.value)
    assert "tensorrt.matrix_multiply" in text and "Profile point: min (a=2x1)" in text
    assert "lambda a: a @ tp.Tensor(W)" in info.value.location.render()


def test_a_raw_error_inside_the_xla_build_is_a_tripy_exception(monkeypatch):
    from tripy_lab.engine.xla import build as xla

    def fail(self, wanted):
        raise RuntimeError("INTERNAL: RET_CHECK failure in fusion of t1__op1 (a jax/XLA message)")

    monkeypatch.setattr(xla.XlaCompiled, "_build_many", fail)
    with pytest.raises(tp.TripyException) as info:
        tp.compile(lambda a: tp.exp(a) * 2.0, args=[tp.InputInfo(((1, 2, 3), 4), tp.float32)], engine="xla")
    err = info.value
    assert err.summary.startswith("xla engine: the build failed in tensorrt.")
    assert "Profile point: opt (a=2x4)" in str(err) and "RuntimeError: INTERNAL" in str(err)
    assert err.op is not None and "tp.exp(a) * 2.0" in err.location.render()
    assert not isinstance(err.__cause__, tp.TripyException)


def test_any_engine_build_error_is_a_tripy_exception(monkeypatch):
    from tripy_lab.engine.reference import build as reference

    def fail(self, program, options):
        raise KeyError("weights")

    monkeypatch.setattr(reference.ReferenceEngine, "build", fail)
    with pytest.raises(tp.TripyException, match="reference engine: the build failed: KeyError"):
        tp.compile(lambda a: a + 1.0, args=[tp.InputInfo((2,), tp.float32)], engine="reference")


def test_find_op_reads_every_engines_naming():
    lowered = tp.pipeline.trace(lambda a: tp.exp(a) + 1.0, args=[tp.InputInfo((2,), tp.float32)]).lower()
    program = lowered.program
    names = [op.name for op in program.ops()]
    i = names.index("tensorrt.unary")
    assert base.find_op(program, f"error in t0__op{i}") == i  # xla scopes
    assert base.find_op(program, f"layer unary_{i}.cast: bad") == i  # tensorrt layer names
    assert base.find_op(program, f"layer unary_{i + 1} is not that op") is None or names[i + 1] == "tensorrt.unary"
    assert base.find_op(program, "nothing here") is None
