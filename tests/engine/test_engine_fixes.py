"""Regression tests for the xla / reference disagreements found by running the frontend tests on both engines.

Each program runs on the reference interpreter and on the xla engine (its inputs traced by XLA), and the
eager forms run with the xla engine's constant folding on and off (``xla.FOLD_CONSTANTS``).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from test_xla_programs import ProgramBuilder, run_np

import tripy_lab as tp
from tripy_lab.core.errors import TripyException
from tripy_lab.engine import xla
from tripy_lab.engine.base import BuildOptions
from tripy_lab.engine.reference.build import ReferenceEngine
from tripy_lab.engine.xla import ops as xla_ops
from tripy_lab.engine.xla.build import XlaEngine
from tripy_lab.mlir import dialect as d
from tripy_lab.mlir.attrs import tensor_type

pytest.importorskip("jax")
rng = np.random.default_rng(7)


def run_both(prog, *args) -> tuple[list[np.ndarray], list[np.ndarray]]:
    ref = ReferenceEngine().build(prog, BuildOptions(optimization_level=0)).run(list(args))
    got = run_np(XlaEngine().build(prog, BuildOptions(optimization_level=0)), *args)
    return [np.asarray(r) for r in ref], got


@pytest.fixture(params=[True, False], ids=["folded", "traced"])
def eager_xla(request, monkeypatch):
    """Eager evaluation on the xla engine, with small constants folded in numpy or traced by XLA."""
    monkeypatch.setattr(tp.config, "engine", "xla")
    monkeypatch.setattr(xla, "FOLD_CONSTANTS", request.param)


def on_reference(fn):
    old = tp.config.engine
    tp.config.engine = "reference"
    try:
        return np.asarray(fn().eval())
    finally:
        tp.config.engine = old


# ---------------------------------------------------------------------------------------------- int4 quantize
HALVES = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.6, -2.6, 0.49, 9.0, -9.0], np.float32)
HALVES_INT4 = np.array([0, 2, 2, 0, -2, -2, 3, -3, 0, 7, -8])


def test_xla_treats_narrow_ml_dtypes_ints_as_integers():
    assert xla_ops._is_int(ml_dtypes.int4) and xla_ops._is_int(ml_dtypes.uint4) and xla_ops._is_int(np.int8)
    assert not xla_ops._is_int(ml_dtypes.bfloat16) and not xla_ops._is_int(ml_dtypes.float8_e4m3fn)
    assert xla_ops._is_low_float(ml_dtypes.bfloat16) and xla_ops._is_low_float(ml_dtypes.float8_e4m3fn)
    assert not xla_ops._is_low_float(ml_dtypes.int4) and not xla_ops._is_low_float(np.float32)


def test_int4_quantize_rounds_half_to_even_on_both_engines():
    """xla used to truncate (``_is_int`` did not know ml_dtypes' int4), giving 2.6 -> 2 and 1.5 -> 1."""
    b = ProgramBuilder()
    x = b.input("x", HALVES.shape)
    scale = b.const(np.float32(1.0))
    prog = b.program(b.add(d.QuantizeOp(x, scale, tensor_type(HALVES.shape, "i4"))))
    (ref,), (got,) = run_both(prog, HALVES)
    assert got.dtype == np.dtype(ml_dtypes.int4)
    np.testing.assert_array_equal(ref.astype(np.int64), HALVES_INT4)
    np.testing.assert_array_equal(got.astype(np.int64), HALVES_INT4)


def test_eager_cast_and_quantize_to_int4_on_xla(eager_xla):
    assert tp.cast(tp.Tensor(2.6), tp.int4).tolist() == 3
    q = tp.quantize(tp.Tensor(HALVES * 0.5), 0.5, tp.int4)
    np.testing.assert_array_equal(np.asarray(q.eval()).astype(np.int64), HALVES_INT4)


# ---------------------------------------------------------------------------------------------- bf16 matmul
@pytest.mark.parametrize("dt", [tp.bfloat16, tp.float16])
def test_low_precision_vector_matmuls_on_xla(eager_xla, dt):
    """Folded in numpy, a bf16 vector x matrix product failed ("invalid data type for einsum"), so bf16 cumsum
    did too; the fold now accumulates in f32 and rounds once, like the reference."""
    np_dt = ml_dtypes.bfloat16 if dt is tp.bfloat16 else np.float16
    v = rng.uniform(-2, 2, 5).astype(np_dt)
    m = rng.uniform(-2, 2, (5, 3)).astype(np_dt)
    cases = {
        "vec@mat": lambda: tp.Tensor(v) @ tp.Tensor(m),
        "mat@vec": lambda: tp.Tensor(m.T.copy()) @ tp.Tensor(v),
        "vec@vec": lambda: tp.Tensor(v) @ tp.Tensor(v),
        "cumsum": lambda: tp.cumsum(tp.Tensor(m), 0),
    }
    for name, fn in cases.items():
        got, want = np.asarray(fn().eval()), on_reference(fn)
        assert got.dtype == np.dtype(np_dt) and got.shape == want.shape, name
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-2, atol=2e-2,
                                   err_msg=name)


def test_bf16_cumsum_compiled_on_xla():
    x = rng.uniform(-2, 2, (4, 3)).astype(ml_dtypes.bfloat16)
    exes = [tp.compile(lambda t: tp.cumsum(t, 0), args=[tp.InputInfo((4, 3), tp.bfloat16)], engine=e)
            for e in ("reference", "xla")]
    ref, got = (np.asarray(e(tp.Tensor(x))).astype(np.float64) for e in exes)
    np.testing.assert_allclose(got, ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_allclose(ref, np.cumsum(x.astype(np.float64), 0), rtol=2e-2, atol=5e-2)


# ---------------------------------------------------------------------------------------------- group normalization
def group_norm_np(x, groups, scale, bias, eps):
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape((n, groups, -1))
    y = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + eps)).reshape(x.shape)
    s, b = scale.astype(np.float64), bias.astype(np.float64)
    if s.shape[1] != c:
        s, b = np.repeat(s, c // groups, axis=1), np.repeat(b, c // groups, axis=1)
    return y * s + b


@pytest.mark.parametrize("per", ["group", "channel"])
@pytest.mark.parametrize("shape, groups", [((2, 6, 3, 4), 3), ((1, 4, 5), 2), ((3, 8, 2, 2), 4), ((2, 6, 4), 6)])
def test_group_normalization_uses_num_groups(shape, groups, per):
    """The reference ignored ``num_groups`` and normalized each channel on its own (instance norm); G < C
    channels groups share their statistics, and a ``[1, G, 1, ...]`` scale/bias applies per group (§5.19)."""
    c, rank = shape[1], len(shape)
    sb_shape = (1, groups if per == "group" else c) + (1,) * (rank - 2)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    s = rng.standard_normal(sb_shape).astype(np.float32)
    bias = rng.standard_normal(sb_shape).astype(np.float32)
    b = ProgramBuilder()
    xi, si, bi = b.input("x", shape), b.input("s", sb_shape), b.input("b", sb_shape)
    prog = b.program(b.add(d.NormalizationOp(xi, si, bi, list(range(2, rank)), eps=1e-5, num_groups=groups)))
    (ref,), (got,) = run_both(prog, x, s, bias)
    want = group_norm_np(x, groups, s, bias, 1e-5)
    np.testing.assert_allclose(ref, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_group_norm_module_agrees_on_both_engines():
    gn = tp.GroupNorm(2, 6)
    gn.weight = tp.Tensor(rng.standard_normal(6).astype(np.float32))
    gn.bias = tp.Tensor(rng.standard_normal(6).astype(np.float32))
    x = rng.standard_normal((2, 6, 3, 3)).astype(np.float32)
    outs = [np.asarray(tp.compile(gn, args=[tp.InputInfo((2, 6, 3, 3), tp.float32)], engine=e)(tp.Tensor(x)))
            for e in ("reference", "xla")]
    want = group_norm_np(x, 2, np.ones((1, 2, 1, 1)), np.zeros((1, 2, 1, 1)), 1e-5)
    want = want * np.asarray(gn.weight.eval()).reshape(1, 6, 1, 1) + np.asarray(gn.bias.eval()).reshape(1, 6, 1, 1)
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------------------------------------- batched gather
def batched_gather_np(data, idx, axis):
    out = []
    for bi in range(data.shape[0]):
        i = idx[bi if idx.shape[0] > 1 else 0]
        n = data.shape[axis]
        i = np.where(i < 0, i + n, i)
        ok = (i >= 0) & (i < n)
        taken = np.take(data[bi], np.where(ok, i, 0), axis=axis - 1)
        mask = ok.reshape((1,) * (axis - 1) + ok.shape + (1,) * (data.ndim - axis - 1))
        out.append(np.where(mask, taken, 0))
    return np.stack(out).astype(data.dtype)


@pytest.mark.parametrize("data_shape, idx_shape, axis", [((3, 5, 2), (3, 4), 1), ((2, 3, 4), (2, 2, 3), 2),
                                                        ((3, 4, 2), (1, 5), 1), ((2, 6), (2,), 1)])
def test_gather_with_one_broadcast_dim(data_shape, idx_shape, axis):
    """The reference ignored ``numBroadcastDims = 1``: batch b must gather ``data[b]`` with ``indices[b]``."""
    data = rng.standard_normal(data_shape).astype(np.float32)
    n = data_shape[axis]
    idx = rng.integers(-n - 1, n + 1, idx_shape).astype(np.int32)  # negative and out-of-bounds (-> 0) included
    b = ProgramBuilder()
    di, ii = b.input("data", data_shape), b.input("idx", idx_shape, "i32")
    prog = b.program(b.add(d.GatherOp(di, ii, axis, num_broadcast_dims=1)))
    (ref,), (got,) = run_both(prog, data, idx)
    want = batched_gather_np(data, idx, axis)
    assert ref.shape == got.shape == want.shape == data_shape[:axis] + idx_shape[1:] + data_shape[axis + 1:]
    np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(got, want)


def test_gather_broadcast_dim_errors_on_both_engines():
    b = ProgramBuilder()
    di, ii = b.input("data", (3, 4)), b.input("idx", (2, 2), "i32")
    prog = b.program(b.add(d.GatherOp(di, ii, 1, result_type=tensor_type((3, 2), "f32"), num_broadcast_dims=1)))
    data, idx = np.zeros((3, 4), np.float32), np.zeros((2, 2), np.int32)
    with pytest.raises(TripyException, match="batch dim of indices must be 1 or match"):
        ReferenceEngine().build(prog, BuildOptions()).run([data, idx])
    with pytest.raises(TripyException, match="batch dim of indices must be 1 or match"):
        XlaEngine().build(prog, BuildOptions(optimization_level=0))


# ---------------------------------------------------------------------------------------------- FOLD_CONSTANTS
def test_unfolded_constants_are_traced_and_shape_constants_stay_static(monkeypatch):
    from tripy_lab import pipeline

    def f():
        x = tp.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        return tp.reshape(x + 1.0, (3, 2))[1:] * 2.0

    want = (np.arange(6, dtype=np.float32).reshape(2, 3) + 1).reshape(3, 2)[1:] * 2
    for fold, n_args in ((True, 0), (False, 3)):  # x, 1.0 and 2.0 become arguments; the shape (3, 2) does not
        monkeypatch.setattr(xla, "FOLD_CONSTANTS", fold)
        built = pipeline.trace(f, args=[]).lower().build(engine="xla")
        hlo = built.report.extra_stages["stablehlo"]
        params = hlo.split("func.func public @main(")[1].split(")")[0]
        assert params.count("%arg") == n_args, params
        np.testing.assert_array_equal(np.asarray(built.executable()()), want)


def test_gather_indices_below_minus_n_read_zero():
    """xla's ``jnp.take(mode="fill")`` wrapped negative indices a second time, so -n-1 read element n-1."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4) + 1
    idx = np.array([-5, -4, -1, 0, 3, 4, 9], np.int32)
    b = ProgramBuilder()
    di, ii = b.input("data", (3, 4)), b.input("idx", (7,), "i32")
    prog = b.program(b.add(d.GatherOp(di, ii, 1)), b.add(d.GatherOp(di, ii, 0)))
    ref, got = run_both(prog, data, idx)
    want1 = np.stack([np.where((idx >= -4) & (idx < 4), row[np.clip(np.where(idx < 0, idx + 4, idx), 0, 3)], 0)
                      for row in data]).astype(np.float32)
    want0 = np.stack([data[i + 3 if i < 0 else i] if -3 <= i < 3 else np.zeros(4, np.float32) for i in idx])
    for out in (ref, got):
        np.testing.assert_array_equal(out[0], want1)
        np.testing.assert_array_equal(out[1], want0)


# ---------------------------------------------------------------------------------------------- integer division
def test_int64_truncating_division_is_exact():
    """The reference divided integers through float64, which rounds int64 values above 2**53."""
    a = np.array([2**60 + 1, -(2**60) - 3, 7, -7, 2**62 - 1], np.int64)
    c = np.array([1, 2, -2, 2, 3], np.int64)
    b = ProgramBuilder()
    x, y = b.input("x", (5,), "i64"), b.input("y", (5,), "i64")
    prog = b.program(b.add(d.ElementWiseOp(x, y, "kDIV")))
    want = np.array([2**60 + 1, -(2**59) - 1, -3, -3, (2**62 - 1) // 3], np.int64)
    (ref,), (got,) = run_both(prog, a, c)
    np.testing.assert_array_equal(ref, want)
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------------------------- top-k
TOPK_CASES = {
    "signed zeros tie": np.array([[0.0, -0.0, 1.0, 0.0, -0.0]], np.float32),
    "nan is largest": np.array([[1.0, np.nan, 2.0, -np.inf, np.inf]], np.float32),
    "ties by index": np.array([[2.0, 1.0, 2.0, 1.0, 2.0]], np.float32),
}


@pytest.mark.parametrize("kind", ["kMAX", "kMIN"])
@pytest.mark.parametrize("case", sorted(TOPK_CASES))
def test_top_k_ties_signed_zeros_and_nan(case, kind):
    """lax.top_k / sort order -0.0 below 0.0 and the reference put NaN last for kMAX while xla put it first for
    kMIN too; both now: equal values (-0.0 == 0.0) in index order, NaN larger than everything."""
    x = TOPK_CASES[case]
    b = ProgramBuilder()
    xi = b.input("x", x.shape)
    v, i = b.add(d.TopKOp(xi, kind, 3, 1))
    ref, got = run_both(b.program(v, i), x)
    np.testing.assert_array_equal(ref[1], got[1])
    np.testing.assert_array_equal(ref[0], got[0])
    keys = np.where(np.isnan(x[0]), np.inf, x[0] + 0.0)
    order = sorted(range(5), key=lambda j: (-keys[j] if kind == "kMAX" else keys[j],
                                            np.isnan(x[0][j]) != (kind == "kMAX"), j))
    np.testing.assert_array_equal(ref[1][0], order[:3])


def test_top_k_int64_is_exact():
    x = np.array([[2**60 + 1, 2**60, 2**60 + 2, -(2**63)]], np.int64)
    for kind, want in (("kMAX", [2, 0, 1]), ("kMIN", [3, 1, 0])):
        b = ProgramBuilder()
        xi = b.input("x", x.shape, "i64")
        v, i = b.add(d.TopKOp(xi, kind, 3, 1))
        ref, got = run_both(b.program(v, i), x)
        for out in (ref, got):
            np.testing.assert_array_equal(out[1][0], want)
            np.testing.assert_array_equal(out[0][0], x[0][want])


# ---------------------------------------------------------------------------------------------- pooling, activations
def test_average_pool_without_the_count_attribute_excludes_padding():
    """TensorRT's default (averageCountExcludesPadding = true); the reference divided by the window size."""
    b = ProgramBuilder()
    x = b.input("x", (1, 1, 2, 2))
    prog = b.program(b.add(d.PoolingOp(x, "kAVERAGE", [2, 2], [1, 1], [1, 1], [0, 0])))
    (ref,), (got,) = run_both(prog, np.ones((1, 1, 2, 2), np.float32))
    np.testing.assert_array_equal(ref, np.ones((1, 1, 2, 2), np.float32))
    np.testing.assert_array_equal(got, ref)


def test_int8_max_average_blend_rounds():
    """xla truncated the blended value (3.75 -> 3); ints round like kAVERAGE (-> 4)."""
    b = ProgramBuilder()
    x = b.input("x", (1, 1, 2, 2), "i8")
    prog = b.program(b.add(d.PoolingOp(x, "kMAX_AVERAGE_BLEND", [2, 2], [2, 2], [0, 0], [0, 0], blend_factor=0.5,
                                       average_count_excludes_padding=True)))
    (ref,), (got,) = run_both(prog, np.array([[[[4, 4], [4, 2]]]], np.int8))
    assert ref.item() == got.item() == 4


@pytest.mark.parametrize("elem", ["f16", "bf16", "f32"])
def test_softplus_does_not_overflow(elem):
    """xla computed f16 activations in f16 (exp(20) = inf) and softplus as log(exp(z) + 1) (inf for z > 88)."""
    np_dt = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32}[elem]
    x = np.array([-30.0, -1.0, 0.0, 1.0, 20.0, 100.0], np.float32).astype(np_dt)
    b = ProgramBuilder()
    xi = b.input("x", x.shape, elem)
    prog = b.program(b.add(d.ActivationOp(xi, "kSOFTPLUS", alpha=1.0, beta=1.0)))
    (ref,), (got,) = run_both(prog, x)
    want = np.logaddexp(0.0, x.astype(np.float64)).astype(np_dt).astype(np.float64)
    np.testing.assert_allclose(ref.astype(np.float64), want, rtol=1e-2)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2)
