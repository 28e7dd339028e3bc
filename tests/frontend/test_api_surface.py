"""The Tensor surface: every operator (reflected ones too) against numpy over hypothesis-drawn dtypes, shapes and
values; the Tensor methods; shape / DimensionSize arithmetic; DLPack; ``tp.types``."""

import operator

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tripy_lab as tp

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
NP = {tp.float32: np.float32, tp.float16: np.float16, tp.bfloat16: ml_dtypes.bfloat16, tp.int8: np.int8,
      tp.int32: np.int32, tp.int64: np.int64, tp.bool: np.bool_}
FLOATS = (tp.float32, tp.float16, tp.bfloat16)
TOL = {tp.float32: 1e-6, tp.float16: 1e-3, tp.bfloat16: 1e-2}


def run(t):
    return np.asarray(t.eval())


def arrays(shape, dt, lo=-6, hi=6, nonzero=False):
    if dt is tp.bool:
        return hnp.arrays(np.bool_, shape)
    ints = st.integers(lo, hi).filter(lambda v: v != 0) if nonzero else st.integers(lo, hi)
    return hnp.arrays(np.int32, shape, elements=ints).map(lambda a: a.astype(NP[dt]))


def check(ours, ref, dt):
    ours = np.asarray(ours)
    ref = np.asarray(ref)
    assert ours.shape == ref.shape
    if ours.dtype == np.bool_ or dt not in FLOATS:
        np.testing.assert_array_equal(ours.astype(np.float64), ref.astype(np.float64))
    else:
        np.testing.assert_allclose(ours.astype(np.float64), ref.astype(np.float64), rtol=TOL[dt] * 4, atol=TOL[dt])


def np_floordiv(a, b):
    return np.floor(a / b)


def np_div(a, b, dt):
    q = a / b
    return q if dt in FLOATS else np.trunc(q)  # integer division truncates (no promotion to float)


ARITH = {
    "+": (operator.add, lambda a, b, dt: a + b),
    "-": (operator.sub, lambda a, b, dt: a - b),
    "*": (operator.mul, lambda a, b, dt: a * b),
    "/": (operator.truediv, np_div),
    "//": (operator.floordiv, lambda a, b, dt: np_floordiv(a, b)),
    "%": (operator.mod, lambda a, b, dt: a - np_floordiv(a, b) * b),
}


@pytest.mark.parametrize("op", sorted(ARITH))
@SETTINGS
@given(data=st.data())
def test_arithmetic_operators_and_reflected(op, data):
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64]))
    shape = data.draw(shapes)
    divides = op in ("/", "//", "%")
    a = data.draw(arrays(shape, dt, nonzero=divides))
    b = data.draw(arrays(shape, dt, nonzero=divides))
    ours, ref = ARITH[op]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    out = ours(tp.Tensor(a), tp.Tensor(b))
    assert out.dtype is dt
    check(run(out), ref(a64, b64, dt).astype(NP[dt]), dt)
    scalar = data.draw(st.integers(1, 5)) if dt not in FLOATS else float(data.draw(st.integers(1, 5)))
    check(run(ours(tp.Tensor(a), scalar)), ref(a64, np.float64(scalar), dt).astype(NP[dt]), dt)  # t op 3
    out = ours(scalar, tp.Tensor(b))  # 3 op t: the reflected operator
    assert out.dtype is dt
    check(run(out), ref(np.float64(scalar), b64, dt).astype(NP[dt]), dt)


@SETTINGS
@given(data=st.data())
def test_pow_and_rpow(data):
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int64]))
    shape = data.draw(shapes)
    a = data.draw(arrays(shape, dt, 1, 3))
    b = data.draw(arrays(shape, dt, 0, 3))
    check(run(tp.Tensor(a) ** tp.Tensor(b)), a.astype(np.float64) ** b.astype(np.float64), dt)
    two = 2.0 if dt in FLOATS else 2
    check(run(two ** tp.Tensor(b)), 2.0 ** b.astype(np.float64), dt)
    check(run(tp.Tensor(a) ** two), a.astype(np.float64) ** 2, dt)


COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
           "!=": operator.ne}


@pytest.mark.parametrize("op", sorted(COMPARE))
@SETTINGS
@given(data=st.data())
def test_comparisons_with_tensors_and_scalars(op, data):
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64]))
    shape = data.draw(shapes)
    a = data.draw(arrays(shape, dt, -2, 2))
    b = data.draw(arrays(shape, dt, -2, 2))
    fn = COMPARE[op]
    out = fn(tp.Tensor(a), tp.Tensor(b))
    assert out.dtype is tp.bool
    check(run(out), fn(a, b), tp.bool)
    scalar = 1.0 if dt in FLOATS else 1
    check(run(fn(scalar, tp.Tensor(b))), fn(NP[dt](scalar), b), tp.bool)  # Python reflects to the swapped op


@SETTINGS
@given(data=st.data())
def test_unary_and_logical_operators(data):
    shape = data.draw(shapes)
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64]))
    a = data.draw(arrays(shape, dt))
    check(run(-tp.Tensor(a)), -a.astype(np.float64), dt)
    check(run(abs(tp.Tensor(a))), np.abs(a.astype(np.float64)), dt)
    p = data.draw(arrays(shape, tp.bool))
    q = data.draw(arrays(shape, tp.bool))
    check(run(tp.Tensor(p) | tp.Tensor(q)), p | q, tp.bool)
    check(run(~tp.Tensor(p)), ~p, tp.bool)
    check(run(tp.Tensor(p) + tp.Tensor(q)), p | q, tp.bool)  # bool arithmetic is computed in int8


@SETTINGS
@given(data=st.data())
def test_matmul_operator(data):
    dt = data.draw(st.sampled_from(FLOATS))
    m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
    a = data.draw(arrays((m, k), dt))
    b = data.draw(arrays((k, n), dt))
    check(run(tp.Tensor(a) @ tp.Tensor(b)), a.astype(np.float64) @ b.astype(np.float64), dt)
    check(run(tp.Tensor(b).__rmatmul__(tp.Tensor(a))), a.astype(np.float64) @ b.astype(np.float64), dt)


def test_tensor_methods():
    a = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
    t = tp.Tensor(a)
    assert t.cast(tp.int32).dtype is tp.int32
    np.testing.assert_array_equal(run(t.reshape((3, 2))), a.reshape(3, 2))
    np.testing.assert_array_equal(run(t.transpose(1, 2)), a.transpose(0, 2, 1))
    np.testing.assert_array_equal(run(t.flatten()), a.reshape(-1))
    np.testing.assert_array_equal(run(t.permute((2, 0, 1))), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(run(t.squeeze(0)), a[0])
    np.testing.assert_array_equal(run(t.unsqueeze(-1)), a[..., None])
    assert (t + 1.0).copy(tp.device("cpu")).device.kind == "cpu"
    assert t.rank == t.ndim == 3 and t.dtype is tp.float32
    t.name = "my_tensor"
    assert t.name == "my_tensor"
    assert t.__dlpack_device__() == (1, 0)  # kDLCPU, device 0
    with pytest.raises(AttributeError):
        t.no_such_method  # noqa: B018


def test_shape_and_dimension_size_arithmetic():
    x = tp.ones((4, 6))
    assert x.shape == (4, 6)

    def f(a):
        n, m = a.shape
        assert isinstance(n, tp.DimensionSize) and isinstance(m, tp.DimensionSize)
        half = m // 2
        assert isinstance(half, tp.DimensionSize)
        assert isinstance(n * 2 + 1 - half, tp.DimensionSize)
        assert isinstance(n + a.shape[1], tp.DimensionSize)
        assert not isinstance(n + tp.ones(()).cast(tp.int32), tp.DimensionSize)  # mixing with a Tensor
        return tp.reshape(a, (n * m // 2, 2)) + tp.cast(half, tp.float32)

    exe = tp.compile(f, args=[tp.InputInfo(((2, 4, 6), 6), tp.float32)])
    out = np.asarray(exe(tp.ones((4, 6)).eval()))
    assert out.shape == (12, 2) and np.all(out == 4.0)
    d = tp.DimensionSize(7)
    assert int(d) == 7 and str(d) == "7" and repr(d) == "7"
    assert int(d * 3 // 2 - 1) == 9
    assert int(10 - d) == 3 and int(2 * d) == 14 and int(15 // d) == 2 and int(d % 4) == 3
    assert d.eval().device.kind == "cpu"


def test_types_module():
    from tripy_lab import types

    assert tp.types is types
    assert set(types.__all__) == {"TensorLike", "IntLike", "ShapeLike"}
    assert tp.DimensionSize in types.IntLike.__args__ and int in types.IntLike.__args__
    assert tp.Tensor in types.TensorLike.__args__
