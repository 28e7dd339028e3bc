"""all, any, var, argmax, argmin, topk, cumsum against numpy on hypothesis-drawn shapes and values
(every engine: conftest.py), with dtype-appropriate tolerances; plus their dtype contracts and errors."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tripy_lab as tp

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)

FLOATS = {"float32": (tp.float32, np.float32, 1e-5), "float16": (tp.float16, np.float16, 2e-3),
          "bfloat16": (tp.bfloat16, ml_dtypes.bfloat16, 2e-2)}
INTS = {"int32": (tp.int32, np.int32), "int64": (tp.int64, np.int64)}


def run(t):
    return np.asarray(t.eval())


def float_arrays(shape, np_dt, lo=-4, hi=4):
    return hnp.arrays(np.float32, shape, elements=st.floats(lo, hi, width=32)).map(lambda a: a.astype(np_dt))


def dims_strategy(rank):
    return st.none() | st.integers(-rank, rank - 1) | st.lists(st.integers(0, rank - 1), min_size=1, unique=True)


def axis(dim):
    return tuple(dim) if isinstance(dim, list) else dim


@pytest.mark.parametrize("name", ["all", "any"])
@SETTINGS
@given(data=st.data())
def test_all_any(name, data):
    a = data.draw(shapes.flatmap(lambda s: hnp.arrays(np.bool_, s)))
    dim = data.draw(dims_strategy(a.ndim))
    keepdim = data.draw(st.booleans())
    out = getattr(tp, name)(tp.Tensor(a), dim=dim, keepdim=keepdim)
    assert out.dtype is tp.bool
    ref = getattr(np, name)(a, axis=axis(dim), keepdims=keepdim)
    np.testing.assert_array_equal(run(out), ref)


def test_all_any_rank0_and_errors():
    assert tp.all(tp.Tensor(True)).tolist() is True
    assert tp.any(tp.Tensor(False)).tolist() is False
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'all'") as err:
        tp.all(tp.ones((2,)))
    assert "tp.all(input != 0)" in str(err.value)
    assert err.value.location.file == __file__
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'any'"):
        tp.any(tp.ones((2,), dtype=tp.int32))


@pytest.mark.parametrize("name", sorted(FLOATS))
@SETTINGS
@given(data=st.data())
def test_var(name, data):
    dt, np_dt, tol = FLOATS[name]
    a = data.draw(shapes.flatmap(lambda s: float_arrays(s, np_dt)))
    dim = data.draw(dims_strategy(a.ndim))
    keepdim = data.draw(st.booleans())
    correction = data.draw(st.integers(0, 2))
    a64 = a.astype(np.float64)
    n = a.size if dim is None else int(np.prod([a.shape[d] for d in np.atleast_1d(dim)]))
    mean = a64.mean(axis=axis(dim), keepdims=True)
    total = ((a64 - mean) ** 2).sum(axis=axis(dim), keepdims=keepdim)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = total / max(0, n - correction)
    out = tp.var(tp.Tensor(a), dim=dim, keepdim=keepdim, correction=correction)
    assert out.dtype is dt
    if n - correction <= 0:  # x / 0: inf, or nan where the squared deviations underflow to 0 in f16 / bf16
        assert not np.isfinite(run(out).astype(np.float64)).any()
        return
    np.testing.assert_allclose(run(out).astype(np.float64), ref, rtol=tol * 10, atol=tol * 10)


def test_var_dynamic_shape_and_errors():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    exe = tp.compile(lambda x: tp.var(x, dim=0), args=[tp.InputInfo(((1, 3, 5), 4), tp.float32)])
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(a).eval())), a.var(axis=0, ddof=1), rtol=1e-6)
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'var'"):
        tp.var(tp.ones((2,), dtype=tp.int32))
    with pytest.raises(tp.TripyException, match="Dimension argument must be `None` for scalars."):
        tp.var(tp.Tensor(1.0), dim=0)


def _distinct(shape, np_dt):
    """Values without ties (so top-k and arg-max/min are unique)."""
    n = int(np.prod(shape))
    return st.permutations(list(range(n))).map(lambda p: (np.asarray(p, dtype=np.float64) - n // 2)
                                               .reshape(shape).astype(np_dt))


TOPK = {**{k: v[1] for k, v in FLOATS.items()}, **{k: v[1] for k, v in INTS.items()}}


@pytest.mark.parametrize("name", sorted(TOPK))
@SETTINGS
@given(data=st.data())
def test_topk(name, data):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6))
    a = data.draw(_distinct(shape, TOPK[name]))
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    k = data.draw(st.integers(1, a.shape[dim]))
    values, indices = tp.topk(tp.Tensor(a), k, dim)
    assert indices.dtype is tp.int32
    order = np.argsort(-a.astype(np.float64), axis=dim, kind="stable")
    ref_idx = np.take(order, np.arange(k), axis=dim)
    np.testing.assert_array_equal(run(indices), ref_idx)
    np.testing.assert_array_equal(run(values).astype(np.float64),
                                  np.take_along_axis(a, ref_idx, axis=dim).astype(np.float64))


@pytest.mark.parametrize("fn", ["argmax", "argmin"])
@SETTINGS
@given(data=st.data())
def test_argmax_argmin(fn, data):
    name = data.draw(st.sampled_from(sorted(TOPK)))
    # Small integers: ties happen, and the first index must win.
    a = data.draw(shapes.flatmap(lambda s: hnp.arrays(np.int32, s, elements=st.integers(-3, 3))))
    a = a.astype(TOPK[name])
    dim = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    keepdim = data.draw(st.booleans())
    out = getattr(tp, fn)(tp.Tensor(a), dim=dim, keepdim=keepdim)
    assert out.dtype is tp.int32
    ref = getattr(np, fn)(a.astype(np.float64), axis=dim, keepdims=keepdim)
    np.testing.assert_array_equal(run(out), ref)


def test_arg_rank0_and_errors():
    assert tp.argmax(tp.Tensor(3.0)).tolist() == 0
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'argmax'"):
        tp.argmax(tp.ones((2,), dtype=tp.bool))
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'topk'"):
        tp.topk(tp.ones((2,), dtype=tp.int8), 1, 0)
    with pytest.raises(tp.TripyException, match="Invalid value for parameter: 'k' of 'topk'"):
        tp.topk(tp.ones((2, 3)), 4, 1)
    with pytest.raises(tp.TripyException, match="Dimension argument is out of bounds"):
        tp.topk(tp.ones((2, 3)), 1, 2)


@pytest.mark.parametrize("name", sorted(FLOATS))
@SETTINGS
@given(data=st.data())
def test_cumsum(name, data):
    dt, np_dt, tol = FLOATS[name]
    a = data.draw(shapes.flatmap(lambda s: float_arrays(s, np_dt)))
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    out = tp.cumsum(tp.Tensor(a), dim)
    assert out.dtype is dt
    ref = np.cumsum(a.astype(np.float64), axis=dim)
    np.testing.assert_allclose(run(out).astype(np.float64), ref, rtol=tol * 10, atol=tol * 20)


def test_cumsum_dynamic_and_errors():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    exe = tp.compile(lambda x: tp.cumsum(x, 0), args=[tp.InputInfo(((1, 3, 5), 4), tp.float32)])
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(a).eval())), np.cumsum(a, 0))
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'cumsum'"):
        tp.cumsum(tp.ones((2,), dtype=tp.int32), 0)
