"""GPU: the attention rewrite runs cuDNN and gives the unfused numbers; the timing table's compute time is
the device time (ordered below latency, within 5 % of back-to-back calls for GPU-bound work); per-layer
times from the kernel trace sum to the compute time."""

import math

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.xla import attention as xla_attention
from tripy_lab.lab import benchmark, profile

pytestmark = pytest.mark.gpu
jax = pytest.importorskip("jax")

B, H, T, D = 4, 12, 256, 64
CAUSAL = np.tril(np.ones((T, T), np.float32))


def causal_attention(q, k, v):
    s = (q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(D))
    s = tp.masked_fill(s, tp.Tensor(CAUSAL) == 0, float("-inf"))
    return tp.softmax(s, dim=-1) @ v


def build(mode):
    old = xla_attention.MODE
    xla_attention.MODE = mode
    try:
        info = tp.InputInfo((B, H, T, D), tp.float16)
        return tp.compile(causal_attention, args=[info, info, info], engine="xla")
    finally:
        xla_attention.MODE = old


def test_cudnn_attention_matches_the_unfused_program():
    fused, unfused = build("auto"), build("off")
    assert any("attention 1 of 1 pattern(s) fused (cudnn, causal)" in n
               for n in fused.stages["built"].report.notes), fused.stages["built"].report.notes
    rows = fused.stages["built"].layers
    att = [r for r in rows if r.kind == "attention (cuDNN)"]
    assert len(att) == 1 and len(att[0].source_ops) >= 4, [r.as_dict() for r in rows]
    first = causal_attention.__code__.co_firstlineno
    assert {f"test_gpu_timing.py:{first + k}" for k in (1, 2, 3)} <= set(att[0].source_lines)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((B, H, T, D)).astype(np.float16) for _ in range(3)]
    a = np.asarray(fused(*args)).astype(np.float32)
    b = np.asarray(unfused(*args)).astype(np.float32)
    np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-3)


def fp32_softmax_attention(q, k, v):  # softmax(att.float()).half(): the casts are part of the fused pattern
    s = tp.masked_fill((q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(D)), tp.Tensor(CAUSAL) == 0, float("-inf"))
    return tp.cast(tp.softmax(tp.cast(s, tp.float32), dim=-1), tp.float16) @ v


def test_cudnn_fuses_attention_with_its_softmax_in_fp32():
    info = tp.InputInfo((B, H, T, D), tp.float16)
    fused = tp.compile(fp32_softmax_attention, args=[info, info, info], engine="xla")
    assert any("attention 1 of 1 pattern(s) fused (cudnn, causal)" in n
               for n in fused.stages["built"].report.notes), fused.stages["built"].report.notes
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((B, H, T, D)).astype(np.float16) for _ in range(3))
    s = q.astype(np.float64) @ np.swapaxes(k, -1, -2).astype(np.float64) / math.sqrt(D)
    s = np.where(CAUSAL == 0, -np.inf, s)
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    np.testing.assert_allclose(np.asarray(fused(q, k, v)).astype(np.float64), want, rtol=2e-2, atol=5e-3)


def gemm_chain(x, w):
    for _ in range(4):
        x = x @ w
    return x


@pytest.fixture(scope="module")
def gemm_exe():
    w = (np.random.default_rng(1).standard_normal((4096, 4096)) / 64).astype(np.float16)
    return tp.compile(gemm_chain, args=[tp.InputInfo((4096, 4096), tp.float16), tp.Tensor(w)], engine="xla")


def test_compute_is_device_time_ordered_and_matches_back_to_back(gemm_exe):
    x = jax.device_put(np.ones((4096, 4096), np.float16))
    for _ in range(400):  # ~0.3 s of GEMMs: the GPU leaves its idle clocks before anything is timed
        gemm_exe(x)
    gemm_exe.synchronize()
    df = benchmark(gemm_exe, shapes="opt", warmup=5, iters=30)
    row = df.iloc[0]
    assert row["error"] == "" and "GPU kernel trace" in row["compute_method"]
    assert 0 < row["compute_ms"] <= row["latency_ms"]
    assert abs(row["compute_ms"] - row["back_to_back_ms"]) <= 0.05 * row["back_to_back_ms"], row.to_dict()


def test_layer_times_sum_to_compute_on_gpu(gemm_exe):
    df = profile(gemm_exe, calls=10)
    assert df.attrs["compute_ms"] > 0
    assert abs(df.attrs["layers_ms"] - df.attrs["compute_ms"]) <= 0.15 * df.attrs["compute_ms"], df.attrs
    assert (df[df["kind"].str.startswith("GEMM")]["time_ms"] > 0).sum() >= 1


def test_small_attention_stays_unfused_and_emitted_natively():
    """Under "auto", scores below FUSE_MIN_SCORES run as XLA's own fusions (one CUDA graph), the StableHLO
    emitted from the MLIR op by op."""
    shape = (1, 2, 64, 64)
    assert 2 * 64 * 64 < xla_attention.FUSE_MIN_SCORES
    info = tp.InputInfo(shape, tp.float16)
    mask = tp.Tensor(np.tril(np.ones((64, 64), np.float32)))

    def small(q, k, v):
        s = tp.masked_fill((q @ tp.transpose(k, -1, -2)) * 0.125, mask == 0, float("-inf"))
        return tp.softmax(s, dim=-1) @ v

    exe = tp.compile(small, args=[info, info, info], engine="xla")
    notes = " ".join(exe.stages["built"].report.notes)
    assert "attention 0 of 1 pattern(s) fused (scores below xla_attention.FUSE_MIN_SCORES" in notes, notes
    assert not any(r.kind == "attention (cuDNN)" for r in exe.stages["built"].layers)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(shape).astype(np.float16) for _ in range(3)]
    ref = tp.compile(small, args=[info, info, info], engine="reference")
    np.testing.assert_allclose(np.asarray(exe(*args)).astype(np.float32),
                               np.asarray(ref(*args)).astype(np.float32), rtol=2e-2, atol=2e-3)


def test_pallas_linear_gelu_matches_unfused_and_is_timed_as_its_own_layer():
    from tripy_lab.engine.xla import linear as xla_linear

    w = (np.random.default_rng(1).standard_normal((3072, 768)) * 0.03).astype(np.float16)
    b = (np.random.default_rng(2).standard_normal(3072) * 0.1).astype(np.float16)

    def mlp(x):
        fc = tp.Linear(768, 3072, dtype=tp.float16)
        fc.weight, fc.bias = tp.Tensor(w), tp.Tensor(b)
        return tp.gelu(fc(x))

    info = tp.InputInfo((8, 512, 768), tp.float16)
    old = xla_linear.MODE
    try:
        xla_linear.MODE = "auto"
        fused = tp.compile(mlp, args=[info], engine="xla")
        xla_linear.MODE = "off"
        unfused = tp.compile(mlp, args=[info], engine="xla")
    finally:
        xla_linear.MODE = old
    assert any("linear + GELU 1 of 1 pattern(s) fused (pallas)" in n for n in fused.stages["built"].report.notes)
    x = np.random.default_rng(3).standard_normal((8, 512, 768)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(fused(x)).astype(np.float32), np.asarray(unfused(x)).astype(np.float32),
                               rtol=1e-2, atol=1e-2)
    rows = [r for r in fused.stages["built"].layers if r.kind == "Pallas kernel (Triton)"]
    first = mlp.__code__.co_firstlineno
    assert len(rows) == 1 and f"test_gpu_timing.py:{first + 3}" in rows[0].source_lines, \
        [r.as_dict() for r in fused.stages["built"].layers]
    df = profile(fused, calls=10)
    pallas = df[df["kind"] == "Pallas kernel (Triton)"]["time_ms"].sum()
    assert pallas > 0.5 * df.attrs["compute_ms"], df.to_dict("records")
    assert abs(df.attrs["layers_ms"] - df.attrs["compute_ms"]) <= 0.15 * df.attrs["compute_ms"], df.attrs


@pytest.mark.parametrize("how", ["einsums", "apart", "tp.split", "tp.split apart"])
def test_packed_qkv_split_into_cudnn_attention_matches_the_reference(monkeypatch, how):
    """GPT-2's c_attn sliced into q, k, v in f16: q, k, v are computed from the packed projection in the
    layout cuDNN reads, and the result is the reference interpreter's. "apart": the attention in the body of a
    split signature (an unaligned lm head follows) with QKV_APART_MIN_ROWS rows: three cuBLAS GEMMs on the
    weight's parts cut apart at build time (the dot merger off keeps them three), each with its bias."""
    apart = how.endswith("apart")
    if apart:
        monkeypatch.setattr(xla_attention, "QKV_APART_MIN_ROWS", B * T)
    hd = H * D
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((3 * hd, hd)) * 0.03).astype(np.float16)
    b = (rng.standard_normal(3 * hd) * 0.1).astype(np.float16)
    emb = (rng.standard_normal((1027, hd)) * 0.03).astype(np.float16)  # 1027: unaligned, >= xla_split.MIN_COLUMNS

    def packed(x):
        lin = tp.Linear(hd, 3 * hd, dtype=tp.float16)
        lin.weight, lin.bias = tp.Tensor(w), tp.Tensor(b)
        if how.startswith("tp.split"):  # nanoGPT's spelling of the same q, k, v
            qkv = [tp.permute(tp.reshape(p, (B, T, H, D)), (0, 2, 1, 3)) for p in tp.split(lin(x), 3, dim=2)]
        else:
            qkv = tp.permute(tp.reshape(lin(x), (B, T, 3, H, D)), (2, 0, 3, 1, 4))
        o = causal_attention(qkv[0], qkv[1], qkv[2])
        if not apart:
            return o
        return tp.reshape(tp.permute(o, (0, 2, 1, 3)), (B, T, hd)) @ tp.transpose(tp.Tensor(emb), 0, 1)

    info = tp.InputInfo((B, T, hd), tp.float16)
    exe = tp.compile(packed, args=[info], engine="xla")
    notes = " ".join(exe.stages["built"].report.notes)
    path = "apart" if apart else "einsums"
    assert f"attention 1 of 1 pattern(s) fused (cudnn, split qkv ({path}), causal)" in notes, notes
    assert sum(r.kind == "attention (cuDNN)" for r in exe.stages["built"].layers) == 1
    if apart:  # q, k, v and the head
        gemms = [r for r in exe.stages["built"].layers if r.kind.startswith("GEMM")]
        assert len(gemms) == 4 and "two executables" in notes, [r.as_dict() for r in exe.stages["built"].layers]
    x = rng.standard_normal((B, T, hd)).astype(np.float16)
    ref = tp.compile(packed, args=[info], engine="reference")
    np.testing.assert_allclose(np.asarray(exe(x)).astype(np.float32), np.asarray(ref(x)).astype(np.float32),
                               rtol=2e-2, atol=5e-3)
    df = profile(exe, calls=5)  # library kernels go to calls of their own library
    att = df[df["kind"] == "attention (cuDNN)"]["time_ms"].sum()
    gemm = df[df["kind"].str.startswith("GEMM")]["time_ms"].sum()
    assert att > 0 and gemm > 0, df.to_dict("records")


@pytest.mark.parametrize("layout", ["auto", "rows"])
def test_unaligned_lm_head_compiles_apart_and_matches_one_executable(monkeypatch, layout):
    """A GEMM with N = 50257 at the end (a GPT's lm head) on CUDA: two executables (the rest with cuBLASLt; the
    head's logits N-major, written by cuBLAS unpadded, or row-major, written by XLA's Triton GEMM), the one
    executable's numbers, and the head's kernels timed in the profile."""
    from tripy_lab.engine.xla import split as xla_split

    monkeypatch.setattr(xla_split, "HEAD_LAYOUT", layout)
    # d = 1024: a body on the device longer than the host's launch of the head; with d = 256 (a 6 us body) the
    # device waited 40 us a call for the head's launch, which compute time holds and no layer does (the profile
    # notes it)
    d, vocab, rows = 1024, 50257, 4096
    rng = np.random.default_rng(6)
    w1 = (rng.standard_normal((d, d)) * 0.03).astype(np.float16)
    b1 = (rng.standard_normal(d) * 0.1).astype(np.float16)
    emb = (rng.standard_normal((vocab, d)) * 0.03).astype(np.float16)

    def lm(x):
        return tp.gelu(x @ tp.Tensor(w1) + tp.Tensor(b1)) @ tp.transpose(tp.Tensor(emb), 0, 1)

    info = tp.InputInfo((rows, d), tp.float16)
    split = tp.compile(lm, args=[info], engine="xla")
    monkeypatch.setattr(xla_split, "MODE", "off")
    whole = tp.compile(lm, args=[info], engine="xla")
    notes = " ".join(split.stages["built"].report.notes)
    assert "two executables" in notes and "xla_gpu_enable_triton_gemm" in notes, notes
    x = rng.standard_normal((rows, d)).astype(np.float16)
    out = split(x)
    order = split.stages["built"].compiled._last[0].format.layout.major_to_minor
    assert order == ((1, 0) if layout == "auto" else (0, 1))
    a = np.asarray(out).astype(np.float32)
    b = np.asarray(whole(x)).astype(np.float32)
    np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)
    h = x.astype(np.float32) @ w1.astype(np.float32) + b1.astype(np.float32)
    h = (0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(a, h @ emb.T.astype(np.float32), rtol=2e-2, atol=5e-2)
    head_hlo = split.stages["built"].report.extra_stages["hlo"].split("jit_main_head", 1)[1]
    assert "slice(" not in head_hlo  # no padded GEMM whose logits are then copied
    df = profile(split, calls=5)
    head = df[df["layer"].str.startswith(xla_split.HEAD_PREFIX)]
    kind = "GEMM (cuBLAS)" if layout == "auto" else "GEMM (Triton)"
    assert (head["kind"] == kind).any() and head["time_ms"].sum() > 0, df.to_dict("records")
    assert 0.85 <= df.attrs["layers_ms"] / df.attrs["compute_ms"] <= 1.15, df.attrs
    if layout == "auto":  # N-major logits go on to row-major executables and to torch as they are
        import torch

        t = torch.from_dlpack(out)
        assert t.stride() == (1, rows)
        np.testing.assert_array_equal(t.cpu().numpy().astype(np.float32), a)
        def double(v):
            return v * 2.0

        again = tp.compile(double, args=[tp.InputInfo((rows, vocab), tp.float16)], engine="xla")
        np.testing.assert_array_equal(np.asarray(again(out)).astype(np.float32), a * 2)
