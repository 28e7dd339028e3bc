"""The xla and onnxruntime engines agree with the reference interpreter: hypothesis draws concrete shapes
inside each program's InputInfo bounds (and DimensionSize values inside their bounds) and random values."""

import functools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tripy_lab as tp
from tripy_lab.engine.semantics import is_float

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


# ------------------------------------------------------------------------------------------------ special values
# docs/SEMANTICS.md: float -> int casts truncate, saturate and send nan to 0; integer / and // by zero give 0
# (so % by zero gives the dividend); everything else is IEEE. Both engines must give the same bits.

I32, I8, I64 = tp.int32, tp.int8, tp.int64
# magnitudes in [1e-3, 1e30] (and 0, inf, nan), so no quotient is subnormal: XLA flushes subnormals to zero in
# arithmetic (docs/SEMANTICS.md; test_subnormals_flush_on_xla pins that one difference)
FLOAT_SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-3, -1e-3, 2.5, -2.5, 127.5, -128.5, 3e9, -3e9,
                  2.0**31, -(2.0**31), 2.0**63, -(2.0**63), 1e30, -1e30, 65520.0, 449.0]
INT_SPECIALS = [0, 0, -1, 1, 7, -7, 2**31 - 1, -(2**31)]


def ints():
    return tp.InputInfo((dyn(1, 8),), I32)


SPECIAL_PROGRAMS = {
    "cast_int32": (lambda x: tp.cast(x, I32), [tp.InputInfo((dyn(1, 8),), F32)]),
    "cast_int8": (lambda x: tp.cast(x, I8), [tp.InputInfo((dyn(1, 8),), F32)]),
    "cast_int64": (lambda x: tp.cast(x, I64), [tp.InputInfo((dyn(1, 8),), F32)]),
    "cast_bool": (lambda x: tp.cast(x, tp.bool), [tp.InputInfo((dyn(1, 8),), F32)]),
    "cast_low_floats": (lambda x: (tp.cast(x, F16), tp.cast(x, tp.bfloat16), tp.cast(x, tp.float8)),
                        [tp.InputInfo((dyn(1, 8),), F32)]),
    "cast_f16_to_int": (lambda x: (tp.cast(x, I8), tp.cast(x, I32)), [tp.InputInfo((dyn(1, 8),), F16)]),
    # int4 / float8 casts go through quantize with scale 1 (round half to even, saturate, nan -> 0)
    "cast_int4_quantize": (lambda x: (tp.cast(x, tp.int4), tp.quantize(x, tp.Tensor(np.float32(0.5)), I8),
                                      tp.quantize(x, tp.Tensor(np.float32(0.5)), tp.float8)),
                           [tp.InputInfo((dyn(1, 8),), F32)]),
    "int_division": (lambda a, b: (a // b, a / b, a % b), [ints(), ints()]),
    # (no float %: a - floor(a / b) * b cancels, and XLA may fuse it into an FMA; docs/SEMANTICS.md)
    "float_division": (lambda a, b: (a / b, a // b), [tp.InputInfo((dyn(1, 8),), F32)] * 2),
    "compare_select": (lambda a, b: (a > b, a == b, tp.where(a < b, a, b), tp.maximum(a, b), tp.minimum(a, b)),
                       [tp.InputInfo((dyn(1, 8),), F32)] * 2),
    "transcendental": (lambda x: (tp.exp(x), tp.log(x), tp.sqrt(x), tp.tanh(x)), [tp.InputInfo((dyn(1, 8),), F32)]),
}


@functools.cache
def special_executables(name, engine):
    func, args = SPECIAL_PROGRAMS[name]
    return tuple(tp.compile(func, args=args, engine=e) for e in ("reference", engine))


def draw_special_args(data, infos):
    n = data.draw(st.integers(1, 8))
    args = []
    for info in infos:
        if info.dtype is I32:
            values = data.draw(st.lists(st.sampled_from(INT_SPECIALS) | st.integers(-(2**31), 2**31 - 1),
                                        min_size=n, max_size=n))
            args.append(np.array(values, np.int32))
        else:
            plain = st.floats(-1e10, 1e10, width=32).filter(lambda v: v == 0 or abs(v) >= 1e-3)
            values = data.draw(st.lists(st.sampled_from(FLOAT_SPECIALS) | plain,
                                        min_size=n, max_size=n))
            with np.errstate(over="ignore"):
                args.append(np.array(values, np.float32).astype(np.float16 if info.dtype is F16 else np.float32))
    return args


@functools.cache
def on_gpu() -> bool:
    """Where the xla engine runs on a CUDA device (the GPU machine)."""
    import jax

    return jax.default_backend() == "gpu"


def flush(values: np.ndarray, dt) -> np.ndarray:
    """Subnormal values of ``dt`` as (signed) zero: what XLA's FTZ arithmetic gives."""
    if not is_float(dt):  # bool, ints (int4 too)
        return values
    tiny = float(ml_dtypes.finfo(dt).tiny)
    return np.where(np.abs(values) < tiny, np.copysign(0.0, values), values)


@pytest.mark.parametrize("engine", ["xla", "onnxruntime"])
@pytest.mark.parametrize("name", sorted(SPECIAL_PROGRAMS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_engines_agree_on_special_values(name, engine, data):
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    ref, xla = special_executables(name, engine)
    args = draw_special_args(data, SPECIAL_PROGRAMS[name][1])
    outs_ref, outs_xla = ref(*args), xla(*args)
    outs_ref = outs_ref if isinstance(outs_ref, tuple) else (outs_ref,)
    outs_xla = outs_xla if isinstance(outs_xla, tuple) else (outs_xla,)
    for r, x in zip(outs_ref, outs_xla):
        r, x = np.asarray(r), np.asarray(x)
        assert r.dtype == x.dtype and r.shape == x.shape
        if name == "transcendental":  # libm differences in the last bit: same specials, close values
            np.testing.assert_allclose(x.astype(np.float64), r.astype(np.float64), rtol=2e-6, atol=1.2e-38,
                                       equal_nan=True)
        else:  # exact up to the sign of nan, once subnormal results are flushed (docs/SEMANTICS.md)
            rf, xf = flush(r.astype(np.float64), r.dtype), flush(x.astype(np.float64), x.dtype)
            assert np.array_equal(np.isnan(rf), np.isnan(xf)), (args, r, x)
            rf, xf = np.where(np.isnan(rf), 0, rf), np.where(np.isnan(xf), 0, xf)
            if is_float(r.dtype) and engine == "xla" and on_gpu():
                # CUDA's f32 division and fused multiply-adds round differently in the last bits: the same
                # specials (inf, zeros, nan above) in the same places, finite values within 2 ulp.
                assert np.array_equal(np.isinf(rf), np.isinf(xf)) and np.array_equal(rf == 0, xf == 0), (args, r, x)
                finite = np.isfinite(rf)
                ulp = float(ml_dtypes.finfo(r.dtype).eps) * np.abs(rf[finite])
                assert np.all(np.abs(rf[finite] - xf[finite]) <= 2 * ulp), (args, r, x)
            else:
                assert np.array_equal(rf, xf), (args, r, x)


@pytest.mark.parametrize("engine", ["reference", "xla", "onnxruntime"])
def test_documented_rules(engine):
    """The rules of docs/SEMANTICS.md, spelled out."""
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.7, -2.7, 300.0, -0.0], np.float32)
    cast = tp.compile(lambda v: (tp.cast(v, I32), tp.cast(v, I8)), args=[tp.InputInfo((9,), F32)], engine=engine)
    i32, i8 = (np.asarray(o) for o in cast(x))
    np.testing.assert_array_equal(i32, [0, 2**31 - 1, -(2**31), 2**31 - 1, -(2**31), 2, -2, 300, 0])
    np.testing.assert_array_equal(i8, [0, 127, -128, 127, -128, 2, -2, 127, 0])
    div = tp.compile(lambda a, b: (a // b, a / b, a % b), args=[tp.InputInfo((7,), I32)] * 2, engine=engine)
    a = np.array([7, -7, 0, -(2**31), 1, -1, -7], np.int32)
    b = np.array([0, 0, 0, -1, -(2**31), -(2**31), 2], np.int32)
    floor_q, trunc_q, rem = (np.asarray(o) for o in div(a, b))
    np.testing.assert_array_equal(floor_q, [0, 0, 0, -(2**31), -1, 0, -4])
    np.testing.assert_array_equal(trunc_q, [0, 0, 0, -(2**31), 0, 0, -3])
    np.testing.assert_array_equal(rem, [7, -7, 0, 0, 1 - 2**31, -1, 1])  # the sign follows b, as Python's %


def test_subnormals_flush_on_xla():
    """The one documented difference: XLA on CPUs runs arithmetic with denormals flushed to zero (FTZ/DAZ),
    the reference keeps them (so does XLA on CUDA GPUs, measured on an H200). Passing data through unchanged
    keeps their bits on both."""
    x = np.array([1e-45, -1e-40, 1.0], np.float32)
    ref, xla = (tp.compile(lambda v: (tp.cast(v, tp.bool), v), args=[tp.InputInfo((3,), F32)], engine=e)
                for e in ("reference", "xla"))
    (rb, rv), (xb, xv) = ref(x), xla(x)
    np.testing.assert_array_equal(np.asarray(rb), [True, True, True])
    np.testing.assert_array_equal(np.asarray(xb), [True, True, True] if on_gpu() else [False, False, True])
    assert np.asarray(rv).tobytes() == np.asarray(xv).tobytes() == x.tobytes()


def test_float_floor_division_is_exact_where_the_division_is_not():
    """CUDA's f32 division is within 2 ulp, not correctly rounded: x / x came out just below 1 on an H200 and
    floor made x // x == 0. The rule keeps exact integer quotients whatever the division rounds to."""
    from types import SimpleNamespace

    from tripy_lab.engine.semantics import float_floor_divide

    low = SimpleNamespace(**{k: getattr(np, k) for k in ("fmod", "where", "round", "floor")},
                          divide=lambda a, b: np.nextafter(np.divide(a, b), np.float32(-np.inf)))  # 1 ulp low
    a = np.array([10927883.0, 6.0, -6.0, 7.0], np.float32)
    b = np.array([10927883.0, 3.0, 3.0, 2.0], np.float32)
    assert np.floor(low.divide(a, b)).tolist() == [0.0, 1.0, -3.0, 3.0]  # what plain floor gave there
    np.testing.assert_array_equal(float_floor_divide(low, a, b), [1.0, 2.0, -2.0, 3.0])
    a, b = np.array([1.0, 0.0, np.inf, 1.0, -7.5], np.float32), np.array([0.0, 5.0, 2.0, 0.1, 2.0], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):  # IEEE division (CPUs): plain floor, specials too
        np.testing.assert_array_equal(float_floor_divide(np, a, b), np.floor(a / b))
