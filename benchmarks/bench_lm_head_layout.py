"""The lm head alone, logits row-major vs N-major, under a few XLA option sets (GPU):

    python benchmarks/bench_lm_head_layout.py

x [8, 1024, 768] @ Wᵀ with W [50257, 768], fp16: the GEMM whose unaligned rows (50257 × 2 bytes) make cuBLAS
pad and copy, and which ``xla_split.HEAD_LAYOUT = "n_major"`` writes transposed (aligned rows) instead. Prints
back-to-back ms per call (200 calls after 50), the GEMM back end in the compiled HLO, whether a padded copy is
sliced, and that the N-major values match the row-major ones through numpy, DLPack (torch) and a jitted argmax.
"""

from __future__ import annotations

import time

import numpy as np

NOPAD = {"xla_disable_hlo_passes": "cublas-pad-for-gemms"}
TRITON_OFF = {"xla_gpu_enable_triton_gemm": False}
OPTIONS = {"defaults": {}, "triton_off": TRITON_OFF, "triton_off+nopad": {**TRITON_OFF, **NOPAD},
           "cublaslt+triton_off+nopad": {**TRITON_OFF, **NOPAD, "xla_gpu_enable_cublaslt": True}, "nopad": NOPAD}
KINDS = ("__cublas$lt$matmul", "__cublas$gemm", "__triton", "slice(")


def per_call_ms(fn, n=200) -> tuple[float, object]:
    out = fn()
    for _ in range(50):
        out = fn()
    out.block_until_ready()
    t = time.perf_counter()
    for _ in range(n):
        out = fn()
    out.block_until_ready()
    return (time.perf_counter() - t) / n * 1e3, out


def main():
    import jax
    import jax.numpy as jnp
    from jax.experimental.layout import Format, Layout

    rng = np.random.default_rng(0)
    dev = jax.devices()[0]
    x = jax.device_put(rng.standard_normal((8, 1024, 768)).astype(np.float16), dev)
    w = jax.device_put((rng.standard_normal((50257, 768)) * 0.02).astype(np.float16), dev)

    def head(x, w):
        return jnp.einsum("btk,nk->btn", x, w)

    ref = None
    for layout in ("rows", "n_major"):
        outs = None if layout == "rows" else Format(Layout(major_to_minor=(2, 0, 1)),
                                                     jax.sharding.SingleDeviceSharding(dev))
        for name, opts in OPTIONS.items():
            c = jax.jit(head, out_shardings=outs).lower(x, w).compile(compiler_options=opts)
            ms, out = per_call_ms(lambda c=c: c(x, w))
            hlo = c.as_text()
            got = np.asarray(out).astype(np.float32)
            ref = got if ref is None else ref
            print(f"{layout:8s} {name:26s} {ms:.4f} ms  {[k for k in KINDS if k in hlo]}  "
                  f"max |diff| vs the first {float(np.max(np.abs(got - ref))):.3g}", flush=True)
    # ``out``: the N-major logits of the last option set, read in place by jax and (if installed) torch
    top = jax.jit(lambda a: jnp.argmax(a[:, -1, :], axis=-1))(out)
    print("argmax of the last token:", np.array_equal(np.asarray(top), np.argmax(ref[:, -1, :], -1)))
    try:
        import torch
    except ImportError:
        return
    t = torch.from_dlpack(out)
    print("torch.from_dlpack:", tuple(t.shape), t.stride(),
          "equal" if np.array_equal(t.float().cpu().numpy(), ref) else "DIFFERENT")


if __name__ == "__main__":
    main()
