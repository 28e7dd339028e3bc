"""GPU: the attention rewrite runs cuDNN and gives the unfused numbers; the timing table's compute time is
the device time (ordered below latency, within 5 % of back-to-back calls for GPU-bound work); per-layer
times from the kernel trace sum to the compute time."""

import math

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine import xla_attention
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
