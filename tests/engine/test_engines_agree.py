"""The xla and onnxruntime engines agree with the reference interpreter: hypothesis draws concrete shapes
inside each program's InputInfo bounds (and DimensionSize values inside their bounds) and random values."""

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tripy_lab as tp

pytest.importorskip("jax")

F32, F16 = tp.float32, tp.float16
rng = np.random.default_rng(0)
W = rng.standard_normal((8, 5)).astype(np.float32)
BIAS = rng.standard_normal(5).astype(np.float32)
TABLE = rng.standard_normal((10, 4)).astype(np.float32)


def dyn(lo, hi):
    return (lo, (lo + hi) // 2, hi)


def layer_norm():
    ln = tp.LayerNorm(6)
    ln.weight = tp.Tensor(rng.standard_normal(6).astype(np.float32))
    ln.bias = tp.Tensor(rng.standard_normal(6).astype(np.float32))
    return ln


PROGRAMS = {
    "broadcast_add": (lambda a, b: a + b * 2.0, [tp.InputInfo((dyn(1, 6), 4), F32), tp.InputInfo((1, 4), F32)]),
    "mlp": (lambda x: tp.tanh(x @ tp.Tensor(W) + tp.Tensor(BIAS)) * 2.0, [tp.InputInfo((dyn(1, 9), 8), F32)]),
    "softmax": (lambda x: tp.softmax(x, dim=-1), [tp.InputInfo((dyn(1, 4), dyn(1, 7)), F32)]),
    "reductions": (lambda x: (tp.sum(x, dim=1), tp.max(x, dim=0, keepdim=True), tp.mean(x)),
                   [tp.InputInfo((dyn(1, 5), dyn(2, 6)), F32)]),
    "slicing": (lambda x: x[1:, ::-1][None, :2], [tp.InputInfo((dyn(2, 7), 3), F32)]),
    "reshape": (lambda x: tp.reshape(x, (-1, 2)), [tp.InputInfo((dyn(1, 5), 6), F32)]),
    "dimension_reshape": (lambda x, s: tp.reshape(x, (-1, s)), [tp.InputInfo((4, 6), F32),
                                                              tp.DimensionInputInfo((1, 2, 4))]),
    "where": (lambda x, y: tp.where(x > y, x, y) + tp.relu(x - y), [tp.InputInfo((dyn(1, 5), 3), F32)] * 2),
    "layer_norm": (layer_norm(), [tp.InputInfo((dyn(1, 4), 6), F32)]),
    "concat_cast": (lambda a, b: tp.cast(tp.concatenate([a, b], dim=1) * 3.0, tp.int32),
                    [tp.InputInfo((dyn(1, 4), 2), F32), tp.InputInfo((dyn(1, 4), 3), F32)]),
    "f16_matmul_gelu": (lambda a, b: tp.gelu(a @ b), [tp.InputInfo((dyn(1, 6), 8), F16), tp.InputInfo((8, 3), F16)]),
    "embedding": (lambda i: tp.gather(tp.Tensor(TABLE), 0, i) * 1.5, [tp.InputInfo((dyn(1, 6),), tp.int32)]),
}


@functools.cache
def executables(name, engine="xla"):
    func, args = PROGRAMS[name]
    return tuple(tp.compile(func, args=args, engine=e) for e in ("reference", engine))


def draw_args(data, infos):
    """Concrete arguments inside the bounds; NamedDimensions are not used by these programs."""
    args, sizes = [], {}
    for info in infos:
        if isinstance(info, tp.DimensionInputInfo):
            b = info.value_bounds
            value = data.draw(st.sampled_from([v for v in range(b.min[0], b.max[0] + 1) if 24 % v == 0]))
            args.append(tp.DimensionSize(value))
            continue
        b = info.shape_bounds
        shape = []
        for i, (lo, hi) in enumerate(zip(b.min, b.max)):
            # Same-position dynamic dims of sibling inputs share a size, so broadcasting stays valid.
            shape.append(sizes.setdefault(i, data.draw(st.integers(lo, hi))) if lo != hi else lo)
        if info.dtype is tp.int32:
            array = data.draw(st.lists(st.integers(0, 9), min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
            args.append(tp.Tensor(np.asarray(array, np.int32).reshape(shape)))
        else:
            seed = data.draw(st.integers(0, 2**31 - 1))
            values = np.random.default_rng(seed).uniform(-2, 2, size=shape)
            args.append(tp.Tensor(values.astype(np.float16 if info.dtype is F16 else np.float32)))
    return args


def as_list(out):
    return [np.asarray(o).astype(np.float64) for o in (out if isinstance(out, tuple) else (out,))]


@pytest.mark.parametrize("engine", ["xla", "onnxruntime"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_xla_matches_reference(name, engine, data):
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    ref, xla = executables(name, engine)
    args = draw_args(data, PROGRAMS[name][1])
    half = any(i.dtype is F16 for i in PROGRAMS[name][1] if isinstance(i, tp.InputInfo))
    for r, x in zip(as_list(ref(*args)), as_list(xla(*args))):
        assert r.shape == x.shape
        np.testing.assert_allclose(x, r, rtol=2e-2 if half else 1e-5, atol=2e-2 if half else 1e-5)
