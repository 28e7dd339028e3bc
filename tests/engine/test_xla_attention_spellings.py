"""Attention as people write it: each spelling of causal scaled-dot-product attention is fused by the xla
engine's rewrite (MODE "xla" on CPU, jax's own fused implementation) and gives the numbers of the same program
run op by op, and of numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.xla import attention as xla_attention

pytest.importorskip("jax")

B, H, T, D = 2, 3, 16, 8
SCALE = 1.0 / math.sqrt(D)


def tril(dtype):
    return tp.Tensor(np.tril(np.ones((T, T), dtype)))


def scores(q, k):
    return q @ tp.transpose(k, -1, -2)


SPELLINGS = {
    # masked_fill of a bool tril, -inf, scale after the matmul (the frontend's own example)
    "masked_fill_bool_tril": lambda q, k, v: tp.softmax(
        tp.masked_fill(scores(q, k) * SCALE, ~tp.cast(tril(np.int32), tp.bool), float("-inf")), dim=-1) @ v,
    # an int tril buffer compared with 0 (nanoGPT's `bias` buffer), divide by sqrt(d)
    "masked_fill_int_tril_eq0": lambda q, k, v: tp.softmax(
        tp.masked_fill(scores(q, k) / math.sqrt(D), tril(np.int32) == 0, float("-inf")), dim=-1) @ v,
    # tp.where keeping the scores where the mask holds, the dtype's lowest value as the fill
    "where_lowest": lambda q, k, v: tp.softmax(
        tp.where(tp.cast(tril(np.float32), tp.bool), scores(q, k) * SCALE,
                 tp.Tensor(np.float32(np.finfo(np.float32).min))), dim=-1) @ v,
    # triu above the diagonal as the mask of what to drop
    "masked_fill_triu": lambda q, k, v: tp.softmax(
        tp.masked_fill(scores(q, k) * SCALE, tp.cast(tp.triu(tp.ones((T, T), tp.int32), 1), tp.bool),
                       float("-inf")), dim=-1) @ v,
    # the scale applied to q before the matmul
    "scale_before_matmul": lambda q, k, v: tp.softmax(
        tp.masked_fill((q * SCALE) @ tp.transpose(k, -1, -2), tril(np.int32) == 0, float("-inf")), dim=-1) @ v,
    # k given already transposed with permute
    "permuted_k": lambda q, k, v: tp.softmax(
        tp.masked_fill((q @ tp.permute(k, (0, 1, 3, 2))) * SCALE, tril(np.int32) == 0, float("-inf")), dim=-1) @ v,
}


def build(fn, mode, dtype):
    old = xla_attention.MODE
    xla_attention.MODE = mode
    try:
        info = tp.InputInfo((B, H, T, D), dtype)
        return tp.compile(fn, args=[info, info, info], engine="xla")
    finally:
        xla_attention.MODE = old


def numpy_causal(q, k, v):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) * SCALE
    s = np.where(np.tril(np.ones((T, T))) == 0, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)


@pytest.mark.parametrize("name", list(SPELLINGS))
def test_each_spelling_is_fused_and_matches_the_unfused_program(name):
    fn = SPELLINGS[name]
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((B, H, T, D)).astype(np.float32) for _ in range(3)]
    fused, unfused = build(fn, "xla", tp.float32), build(fn, "off", tp.float32)
    notes = " ".join(fused.stages["built"].report.notes)
    assert "attention 1 of 1 pattern(s) fused (xla, causal" in notes, notes
    a, b = np.asarray(fused(*args)), np.asarray(unfused(*args))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a, numpy_causal(*args), rtol=1e-4, atol=1e-5)


def fp32_softmax(q, k, v):
    """``softmax(att.float()).type_as(v)``: f16 scores, the softmax in f32, cast back for the matmul with v."""
    s = tp.masked_fill(scores(q, k) * SCALE, tril(np.int32) == 0, float("-inf"))
    return tp.cast(tp.softmax(tp.cast(s, tp.float32), dim=-1), tp.float16) @ v


def test_softmax_in_fp32_of_fp16_scores_is_matched_with_its_casts():
    """The fused kernel's softmax runs in f32 already, so the two casts are part of the pattern. (Fused f16
    attention needs a GPU: XLA:CPU has no f16 dot with f32 accumulation, so on CPU the program runs unfused;
    tests/gpu/test_gpu_xla.py checks the cuDNN numbers.)"""
    info = tp.InputInfo((B, H, T, D), tp.float16)
    lowered = tp.pipeline.trace(fp32_softmax, args=[info, info, info]).lower()
    ops = lowered.program.ops()
    (m,) = xla_attention.find(ops)
    assert sorted(ops[i].name for i in m.removed).count("tensorrt.cast") == 2
    assert {ops[i].name for i in m.removed} >= {"tensorrt.softmax", "tensorrt.select", "tensorrt.matrix_multiply"}
    old = xla_attention.MODE
    xla_attention.MODE = "xla"
    try:  # CPU: refused by plan (no f16 dot with f32 accumulation), not a failed build
        exe = tp.compile(fp32_softmax, args=[info, info, info], engine="xla")
    finally:
        xla_attention.MODE = old
    assert "attention 0 of 1 pattern(s) fused" in " ".join(exe.stages["built"].report.notes)
    rng = np.random.default_rng(1)
    args = [rng.standard_normal((B, H, T, D)).astype(np.float16) for _ in range(3)]
    np.testing.assert_allclose(np.asarray(exe(*args)).astype(np.float64), numpy_causal(*args), rtol=2e-2, atol=2e-2)


def test_a_cast_to_another_dtype_around_the_softmax_is_not_matched():
    def f32_out(q, k, v):  # the probabilities stay f32: not the f16 kernel's result
        s = scores(q, k) * SCALE
        return tp.softmax(tp.cast(s, tp.float32), dim=-1) @ tp.cast(v, tp.float32)

    info = tp.InputInfo((B, H, T, D), tp.float16)
    lowered = tp.pipeline.trace(f32_out, args=[info, info, info]).lower()
    assert not xla_attention.find(lowered.program.ops())
