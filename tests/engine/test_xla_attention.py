"""The xla engine's attention rewrite: the matched pattern runs as jax.nn.dot_product_attention and gives
the numbers of the unfused program (CPU: jax's own implementation; the GPU tests check cuDNN)."""

import math
import re

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.xla import attention as xla_attention

pytest.importorskip("jax")

B, H, T, D = 2, 3, 16, 8
CAUSAL = np.tril(np.ones((T, T), np.float32))


def causal_attention(q, k, v):
    s = (q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(D))
    s = tp.masked_fill(s, tp.Tensor(CAUSAL) == 0, float("-inf"))
    return tp.softmax(s, dim=-1) @ v


def plain_attention(q, k, v):
    return tp.softmax((q @ tp.transpose(k, -1, -2)) / math.sqrt(D), dim=-1) @ v


def banded_attention(q, k, v):  # a mask that is not causal: stays unfused
    band = np.triu(np.tril(np.ones((T, T), np.float32)), -2)
    s = tp.masked_fill(q @ tp.transpose(k, -1, -2), tp.Tensor(band) == 0, float("-inf"))
    return tp.softmax(s, dim=-1) @ v


def build(fn, mode, dtype=tp.float32, shape=(B, H, T, D)):
    old = xla_attention.MODE
    xla_attention.MODE = mode
    try:
        info = tp.InputInfo(shape, dtype)
        return tp.compile(fn, args=[info, info, info], engine="xla")
    finally:
        xla_attention.MODE = old


def inputs(shape=(B, H, T, D), dtype=np.float32):
    rng = np.random.default_rng(0)
    return [rng.standard_normal(shape).astype(dtype) for _ in range(3)]


def numpy_attention(q, k, v, causal):
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / math.sqrt(D)
    if causal:
        s = np.where(CAUSAL == 0, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    return (p / p.sum(-1, keepdims=True)) @ v


@pytest.mark.parametrize("fn,causal", [(causal_attention, True), (plain_attention, False)])
def test_fused_matches_unfused_and_numpy(fn, causal):
    args = inputs()
    fused, unfused = build(fn, "xla"), build(fn, "off")
    notes = " ".join(fused.stages["built"].report.notes)
    assert "attention 1 of 1 pattern(s) fused (xla" + (", causal" if causal else "") in notes, notes
    assert "attention 0 of 1 pattern(s) fused" in " ".join(unfused.stages["built"].report.notes)
    a, b = np.asarray(fused(*args)), np.asarray(unfused(*args))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(a, numpy_attention(*args, causal), rtol=1e-4, atol=1e-5)


def test_fused_layer_names_every_op_of_the_pattern_and_its_lines():
    exe = build(causal_attention, "xla")
    rows = exe.stages["built"].layers
    lines = {ln for r in rows for ln in r.source_lines}
    first = causal_attention.__code__.co_firstlineno
    assert {f"test_xla_attention.py:{first + k}" for k in (1, 2, 3)} <= lines
    # the softmax's trace op is a source op of a layer that also does the matmuls' work
    assert any(len(r.source_ops) >= 4 for r in rows), [r.as_dict() for r in rows]


def test_non_causal_mask_and_f32_under_auto_stay_unfused():
    args = inputs()
    exe = build(banded_attention, "xla")
    assert "attention 0 of 1 pattern(s) fused" in " ".join(exe.stages["built"].report.notes)
    band = np.triu(np.tril(np.ones((T, T))), -2)
    s = args[0].astype(np.float64) @ np.swapaxes(args[1], -1, -2)
    s = np.where(band == 0, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    np.testing.assert_allclose(np.asarray(exe(*args)), (p / p.sum(-1, keepdims=True)) @ args[2], rtol=1e-4,
                               atol=1e-5)
    auto = build(causal_attention, "auto")  # CPU: no cuDNN, so the program runs op by op
    assert "attention 0 of 1 pattern(s) fused" in " ".join(auto.stages["built"].report.notes)


def test_rank3_fused():
    shape = (4, T, D)
    args = inputs(shape)
    fused = build(plain_attention, "xla", tp.float32, shape)
    unfused = build(plain_attention, "off", tp.float32, shape)
    assert "attention 1 of 1" in " ".join(fused.stages["built"].report.notes)
    np.testing.assert_allclose(np.asarray(fused(*args)), np.asarray(unfused(*args)), rtol=1e-5, atol=1e-5)


def test_pattern_is_not_matched_when_an_intermediate_has_another_use():
    def leaky(q, k, v):
        s = q @ tp.transpose(k, -1, -2)
        return tp.softmax(s, dim=-1) @ v, s

    exe = build(leaky, "xla")
    assert not any("attention" in n for n in exe.stages["built"].report.notes)


WQKV = np.random.default_rng(3).standard_normal((3 * H * D, 24)).astype(np.float32) / 5
BQKV = np.random.default_rng(4).standard_normal(3 * H * D).astype(np.float32)


def packed_attention_of(w, b, heads, head_dim, mask):
    """GPT-2's c_attn: one Linear (weight ``w`` [3 * heads * head_dim, Din], bias ``b``) for q, k and v,
    reshaped and sliced, then attention masked where ``mask`` is 0 (also used by test_xla_linear.py)."""

    def packed_attention(x):
        bsz, t = x.shape[0], x.shape[1]
        lin = tp.Linear(w.shape[1], w.shape[0])
        lin.weight, lin.bias = tp.Tensor(w), tp.Tensor(b)
        qkv = tp.permute(tp.reshape(lin(x), (bsz, t, 3, heads, head_dim)), (2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        s = (q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(head_dim))
        return tp.softmax(tp.masked_fill(s, tp.Tensor(mask) == 0, float("-inf")), dim=-1) @ v

    return packed_attention


packed_attention = packed_attention_of(WQKV, BQKV, H, D, CAUSAL)


def split_attention(x):
    """The same projection with q, k, v by ``tp.split`` (nanoGPT's spelling): slices of its last dim, each
    reshaped to [B, T, H, D] and transposed; the mask an int buffer compared with 0."""
    bsz, t = x.shape[0], x.shape[1]
    lin = tp.Linear(WQKV.shape[1], WQKV.shape[0])
    lin.weight, lin.bias = tp.Tensor(WQKV), tp.Tensor(BQKV)
    q, k, v = (tp.permute(tp.reshape(part, (bsz, t, H, D)), (0, 2, 1, 3)) for part in tp.split(lin(x), 3, dim=2))
    s = (q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(D))
    return tp.softmax(tp.masked_fill(s, tp.Tensor(CAUSAL.astype(np.int32)) == 0, float("-inf")), dim=-1) @ v


@pytest.mark.parametrize("fn", [packed_attention, split_attention], ids=["packed", "split"])
def test_each_qkv_spelling_is_computed_from_the_projection(monkeypatch, fn):
    """q, k, v sliced out of one projection, by reshape + index or by ``tp.split``: three GEMMs in the kernel's
    layout, and numpy's numbers."""
    monkeypatch.setattr(xla_attention, "MODE", "xla")
    exe = tp.compile(fn, args=[tp.InputInfo(((1, 2, 3), T, 24), tp.float32)], engine="xla")
    notes = " ".join(exe.stages["built"].report.notes)
    assert "attention 1 of 1 pattern(s) fused (xla, split qkv (einsums), causal)" in notes, notes
    x = np.random.default_rng(8).standard_normal((B, T, 24)).astype(np.float32)
    y = x @ WQKV.T + BQKV
    q, k, v = np.transpose(y.reshape(B, T, 3, H, D), (2, 0, 3, 1, 4))
    np.testing.assert_allclose(np.asarray(exe(x)), numpy_attention(q, k, v, True), rtol=1e-4, atol=1e-4)


VOCAB = 1027  # an unaligned lm head (not a multiple of 8, at least xla_split.MIN_COLUMNS): a split signature
EMB16 = (np.random.default_rng(7).standard_normal((VOCAB, H * D)) * 0.3).astype(np.float16)


def packed_attention_lm(x):
    """The packed attention (f32: XLA:CPU fuses no f16 attention), then an f16 tied lm head: the body of a split
    signature holds the attention."""
    bsz, t = x.shape[0], x.shape[1]
    o = tp.reshape(tp.permute(packed_attention(x), (0, 2, 1, 3)), (bsz, t, H * D))
    return tp.cast(o, tp.float16) @ tp.transpose(tp.Tensor(EMB16), 0, 1)


def numpy_attention_lm(x):
    y = x @ WQKV.T + BQKV
    q, k, v = np.transpose(y.reshape(x.shape[0], T, 3, H, D), (2, 0, 3, 1, 4))
    o = numpy_attention(q, k, v, True).transpose(0, 2, 1, 3).reshape(x.shape[0], T, H * D)
    return o.astype(np.float16).astype(np.float32) @ EMB16.T.astype(np.float32)


def test_packed_qkv_weights_are_cut_apart_in_a_split_body_from_the_row_threshold(monkeypatch):
    """In a split signature's body with at least QKV_APART_MIN_ROWS rows, the three q/k/v GEMMs read W's and b's
    parts from arguments cut apart at build time (not slices of W per call), with XLA's dot merger off; below it,
    the slices; the numbers are numpy's either way."""
    from tripy_lab.engine.xla import split as xla_split

    monkeypatch.setattr(xla_split, "MODE", "always")
    monkeypatch.setattr(xla_split, "MIN_ROWS", 8)
    monkeypatch.setattr(xla_attention, "MODE", "xla")
    monkeypatch.setattr(xla_attention, "QKV_APART", "always")
    monkeypatch.setattr(xla_attention, "QKV_APART_MIN_ROWS", B * T)
    info = tp.InputInfo(((1, B, B), T, 24), tp.float32)
    exe = tp.compile(packed_attention_lm, args=[info], engine="xla")
    built = exe.stages["built"].report
    notes = " ".join(built.notes)
    assert "q/k/v weights of 1 packed projection(s) also passed cut apart" in notes, notes
    assert "attention 1 of 1 pattern(s) fused (xla, split qkv (apart), causal)" in notes, notes
    assert "'xla_disable_hlo_passes': 'dot-merger'" in notes, notes  # the body's options
    hlo = built.extra_stages["hlo"]
    for part in ("w", "b"):
        used = re.findall(rf"const_opqkv\d+{part}[.\w]* = \S+ parameter", hlo)
        assert len(used) == 3, (part, used)  # the three parts reach the executable (not pruned as unused)
    rng = np.random.default_rng(6)
    for bsz in (B, 1):  # at B rows x T: apart; at 1 x T: below the threshold, sliced per call
        x = rng.standard_normal((bsz, T, 24)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(x)).astype(np.float32), numpy_attention_lm(x), rtol=2e-2,
                                   atol=2e-2)
    notes = " ".join(exe.stages["built"].report.notes)
    assert "(xla, split qkv (einsums), causal)" in notes, notes
    # without the parts, the 1-row signature's module prints the same (jax pruned them there) but takes fewer
    # arguments: a different cache entry, not one loaded and rejected
    monkeypatch.setattr(xla_attention, "QKV_APART", "off")
    again = tp.compile(packed_attention_lm, args=[info], engine="xla")
    assert not again.stages["built"].report.cache["persistent_rejected"], again.stages["built"].report.notes


def test_cutting_apart_reads_each_constant_once():
    """``apart_weights`` asks ``_static`` about data values too (x, the packed result): with a deep chain before
    the projection whose steps read the step before twice, each constant is read at most once (a data operand
    ends the walk), not once per path through the chain."""
    from collections import Counter

    from tripy_lab import pipeline

    def deep(x):
        for i in range(24):  # two constants a step, and every step reads the step before twice
            scale, shift = np.full((24,), 1.0 + i / 100, np.float32), np.full((24,), 0.01, np.float32)
            x = x * tp.Tensor(scale) + x * tp.Tensor(shift)
        return packed_attention(x)

    program = pipeline.trace(deep, args=[tp.InputInfo((B, T, 24), tp.float32)]).lower().program
    reads, real = Counter(), program.constant_value

    def counted(op):
        reads[id(op)] += 1
        return real(op)

    program.constant_value = counted
    parts = xla_attention.apart_weights(xla_attention.find(program.ops()), program)
    assert len(parts) == 3 and reads and max(reads.values()) == 1, (len(parts), reads.most_common(3))


def test_packed_qkv_is_not_cut_apart_outside_a_split_body(monkeypatch):
    """Without a split (no unaligned head), XLA's Triton GEMMs would take no bias epilogue: the parts are not made."""
    monkeypatch.setattr(xla_attention, "MODE", "xla")
    monkeypatch.setattr(xla_attention, "QKV_APART", "always")
    monkeypatch.setattr(xla_attention, "QKV_APART_MIN_ROWS", B * T)
    exe = tp.compile(packed_attention, args=[tp.InputInfo((B, T, 24), tp.float32)], engine="xla")
    notes = " ".join(exe.stages["built"].report.notes)
    assert "cut apart" not in notes and "split qkv (einsums)" in notes, notes


def test_packed_qkv_projection_is_split_into_three_gemms():
    x = np.random.default_rng(5).standard_normal((B, T, 24)).astype(np.float32)
    old = xla_attention.MODE
    try:
        xla_attention.MODE = "xla"
        fused = tp.compile(packed_attention, args=[tp.InputInfo(((1, 2, 3), T, 24), tp.float32)], engine="xla")
        xla_attention.MODE = "off"
        unfused = tp.compile(packed_attention, args=[tp.InputInfo((B, T, 24), tp.float32)], engine="xla")
    finally:
        xla_attention.MODE = old
    notes = " ".join(fused.stages["built"].report.notes)
    assert "attention 1 of 1 pattern(s) fused (xla, split qkv (einsums), causal)" in notes, notes
    np.testing.assert_allclose(np.asarray(fused(x)), np.asarray(unfused(x)), rtol=1e-5, atol=1e-5)
    y = x @ WQKV.T + BQKV
    q, k, v = np.transpose(y.reshape(B, T, 3, H, D), (2, 0, 3, 1, 4))
    np.testing.assert_allclose(np.asarray(fused(x)), numpy_attention(q, k, v, True), rtol=1e-4, atol=1e-4)

