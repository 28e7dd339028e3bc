"""Every spine op against numpy, on hypothesis-drawn shapes and values (every engine: conftest.py)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tripy_lab as tp

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
# XLA on CPU (like TensorRT's GPU kernels) flushes subnormal floats to zero: inputs stay normal, and results
# compare with an absolute tolerance of the smallest normal float32.
floats = st.floats(-3, 3, width=32, allow_subnormal=False)
TINY = float(np.finfo(np.float32).tiny)


def arrays(shape, elements=floats, dtype=np.float32):
    return hnp.arrays(dtype, shape, elements=elements)


def run(t):
    return np.asarray(t.eval())


BINARY = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "maximum": (tp.maximum, np.maximum),
    "minimum": (tp.minimum, np.minimum),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(data=st.data())
def test_binary_broadcasting(name, data):
    shape = data.draw(shapes)
    # Broadcast partner: some dims replaced by 1, maybe fewer leading dims.
    other = tuple(1 if data.draw(st.booleans()) else d for d in shape)[data.draw(st.integers(0, len(shape) - 1)):]
    a = data.draw(arrays(shape))
    b = data.draw(arrays(other))
    ours, ref = BINARY[name]
    np.testing.assert_allclose(run(ours(tp.Tensor(a), tp.Tensor(b))), ref(a, b), rtol=1e-6, atol=TINY)


@SETTINGS
@given(data=st.data())
def test_div_pow_floordiv(data):
    shape = data.draw(shapes)
    a = data.draw(arrays(shape, st.floats(0.5, 3, width=32)))
    b = data.draw(arrays(shape, st.floats(0.5, 3, width=32)))
    np.testing.assert_allclose(run(tp.Tensor(a) / tp.Tensor(b)), a / b, rtol=1e-6)
    np.testing.assert_allclose(run(tp.Tensor(a) ** tp.Tensor(b)), a**b, rtol=1e-5)
    np.testing.assert_allclose(run(tp.Tensor(a) // tp.Tensor(b)), a // b, rtol=1e-6)


@SETTINGS
@given(data=st.data())
def test_comparisons(data):
    shape = data.draw(shapes)
    a = data.draw(arrays(shape, st.integers(-2, 2).map(float)))
    b = data.draw(arrays(shape, st.integers(-2, 2).map(float)))
    ta, tb = tp.Tensor(a), tp.Tensor(b)
    for ours, ref in [(ta < tb, a < b), (ta <= tb, a <= b), (ta > tb, a > b), (ta >= tb, a >= b),
                      (ta == tb, a == b), (ta != tb, a != b)]:
        assert ours.dtype is tp.bool
        np.testing.assert_array_equal(run(ours), ref)


UNARY = {
    "exp": (tp.exp, np.exp), "sin": (tp.sin, np.sin), "cos": (tp.cos, np.cos), "tanh": (tp.tanh, np.tanh),
    "sigmoid": (tp.sigmoid, lambda x: 1 / (1 + np.exp(-x))), "relu": (tp.relu, lambda x: np.maximum(x, 0)),
    "silu": (tp.silu, lambda x: x / (1 + np.exp(-x))), "neg": (lambda x: -x, np.negative),
    "gelu": (tp.gelu, lambda x: 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2)))),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(a=shapes.flatmap(arrays))
def test_unary(name, a):
    ours, ref = UNARY[name]
    np.testing.assert_allclose(run(ours(tp.Tensor(a))), ref(a.astype(np.float64)), rtol=1e-5, atol=1e-6)


@SETTINGS
@given(a=shapes.flatmap(lambda s: arrays(s, st.floats(0.125, 4, width=32))))
def test_log_sqrt_rsqrt(a):
    np.testing.assert_allclose(run(tp.log(tp.Tensor(a))), np.log(a), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run(tp.sqrt(tp.Tensor(a))), np.sqrt(a), rtol=1e-5)
    np.testing.assert_allclose(run(tp.rsqrt(tp.Tensor(a))), 1 / np.sqrt(a), rtol=1e-5)


REDUCE = {"sum": (tp.sum, np.sum), "mean": (tp.mean, np.mean), "max": (tp.max, np.max),
          "min": (tp.min, np.min), "prod": (tp.prod, np.prod)}


@pytest.mark.parametrize("name", sorted(REDUCE))
@SETTINGS
@given(data=st.data())
def test_reductions(name, data):
    a = data.draw(shapes.flatmap(arrays))
    dim = data.draw(st.none() | st.integers(-a.ndim, a.ndim - 1))
    keepdim = data.draw(st.booleans())
    ours, ref = REDUCE[name]
    axis = None if dim is None else dim
    expected = ref(a.astype(np.float64), axis=axis, keepdims=keepdim)
    np.testing.assert_allclose(run(ours(tp.Tensor(a), dim=dim, keepdim=keepdim)), expected, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(data=st.data())
def test_softmax(data):
    a = data.draw(shapes.flatmap(arrays))
    dim = data.draw(st.integers(-a.ndim, a.ndim - 1))
    e = np.exp(a - a.max(axis=dim, keepdims=True))
    np.testing.assert_allclose(run(tp.softmax(tp.Tensor(a), dim=dim)), e / e.sum(axis=dim, keepdims=True),
                               rtol=1e-5, atol=1e-6)


@SETTINGS
@given(data=st.data())
def test_matmul(data):
    m, k, n = (data.draw(st.integers(1, 4)) for _ in range(3))
    batch = data.draw(st.sampled_from([(), (2,), (1,), (3, 1)]))
    a = data.draw(arrays(batch + (m, k)))
    b = data.draw(arrays((k, n)))
    np.testing.assert_allclose(run(tp.Tensor(a) @ tp.Tensor(b)), a @ b, rtol=1e-5, atol=1e-5)
    v = data.draw(arrays((k,)))
    np.testing.assert_allclose(run(tp.Tensor(a) @ tp.Tensor(v)), a @ v, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run(tp.Tensor(v) @ tp.Tensor(v)), v @ v, rtol=1e-5, atol=1e-5)


@SETTINGS
@given(data=st.data())
def test_layout_ops(data):
    a = data.draw(hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=3).flatmap(arrays))
    t = tp.Tensor(a)
    perm = data.draw(st.permutations(range(a.ndim)))
    np.testing.assert_array_equal(run(tp.permute(t, perm)), np.transpose(a, perm))
    np.testing.assert_array_equal(run(tp.transpose(t, 0, -1)), np.swapaxes(a, 0, -1))
    np.testing.assert_array_equal(run(tp.reshape(t, (-1,))), a.reshape(-1))
    np.testing.assert_array_equal(run(tp.reshape(t, (a.shape[0], -1))), a.reshape(a.shape[0], -1))
    np.testing.assert_array_equal(run(tp.flatten(t, 1)), a.reshape(a.shape[0], -1))
    np.testing.assert_array_equal(run(tp.unsqueeze(t, -1)), a[..., None])
    np.testing.assert_array_equal(run(tp.squeeze(tp.unsqueeze(t, 1), 1)), a)
    np.testing.assert_array_equal(run(tp.concatenate([t, t], dim=-1)), np.concatenate([a, a], -1))
    np.testing.assert_array_equal(run(tp.stack([t, t], dim=1)), np.stack([a, a], 1))
    np.testing.assert_array_equal(run(tp.expand(tp.unsqueeze(t, 0), (3,) + (-1,) * a.ndim)),
                                  np.broadcast_to(a[None], (3,) + a.shape))


index_part = st.one_of(
    st.integers(-3, 2),
    st.builds(slice, st.none() | st.integers(-4, 4), st.none() | st.integers(-4, 4),
              st.none() | st.sampled_from([1, 2, -1, -2])),
    st.none(),
)


@settings(max_examples=60, deadline=None)
@given(a=hnp.array_shapes(min_dims=1, max_dims=3, min_side=3, max_side=4).flatmap(arrays),
       index=st.lists(index_part, min_size=1, max_size=3))
def test_getitem_matches_numpy(a, index):
    used = sum(1 for i in index if i is not None)
    if used > a.ndim:
        return
    expected = a[tuple(index)]
    np.testing.assert_array_equal(run(tp.Tensor(a)[tuple(index)]), expected)


@SETTINGS
@given(data=st.data())
def test_initializers_and_cast(data):
    shape = data.draw(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4))
    value = data.draw(st.floats(-5, 5, width=32))
    np.testing.assert_array_equal(run(tp.ones(shape)), np.ones(shape, np.float32))
    np.testing.assert_array_equal(run(tp.zeros(shape, tp.int32)), np.zeros(shape, np.int32))
    np.testing.assert_array_equal(run(tp.full(shape, value)), np.full(shape, value, np.float32))
    a = data.draw(arrays(shape if shape else (1,)))
    t = tp.Tensor(a)
    np.testing.assert_array_equal(run(tp.ones_like(t)), np.ones_like(a))
    np.testing.assert_array_equal(run(tp.zeros_like(t)), np.zeros_like(a))
    np.testing.assert_array_equal(run(tp.full_like(t, 2.0)), np.full_like(a, 2.0))
    np.testing.assert_array_equal(run(tp.cast(t, tp.int32)), np.trunc(a).astype(np.int32))
    np.testing.assert_array_equal(run(tp.cast(t, tp.float16)), a.astype(np.float16))


def test_iota_and_arange():
    np.testing.assert_array_equal(run(tp.iota((2, 3), dim=1)), np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)))
    np.testing.assert_array_equal(run(tp.iota((2, 3), dim=0, dtype=tp.int32)),
                                  np.broadcast_to(np.arange(2, dtype=np.int32)[:, None], (2, 3)))
    np.testing.assert_array_equal(run(tp.arange(5)), np.arange(5, dtype=np.float32))
    np.testing.assert_allclose(run(tp.arange(1, 4, 0.5)), np.arange(1, 4, 0.5, dtype=np.float32))
    np.testing.assert_array_equal(run(tp.arange(2, 11, 3, dtype=tp.int32)), np.arange(2, 11, 3, dtype=np.int32))


@SETTINGS
@given(data=st.data())
def test_where_and_masked_fill(data):
    shape = data.draw(shapes)
    a = data.draw(arrays(shape))
    b = data.draw(arrays(shape))
    cond = a > b
    np.testing.assert_array_equal(run(tp.where(tp.Tensor(a) > tp.Tensor(b), tp.Tensor(a), tp.Tensor(b))),
                                  np.where(cond, a, b))
    np.testing.assert_array_equal(run(tp.masked_fill(tp.Tensor(a), tp.Tensor(cond), -1.0)), np.where(cond, -1.0, a))


def test_equal_and_allclose():
    a = tp.Tensor([1.0, 2.0])
    assert tp.equal(a, tp.Tensor([1.0, 2.0]))
    assert not tp.equal(a, tp.Tensor([1.0, 2.5]))
    assert tp.allclose(a, tp.Tensor([1.0, 2.0 + 1e-7]))
    assert not tp.allclose(a, tp.Tensor([1.0, 2.1]))
