"""Causal attention at GPT-2 small's B8 T1024 (12 heads of 64, f16) on an H100/H200, twelve calls in one jitted
function (as twelve layers), median ms:

    python3 benchmarks/attention_probe.py [--json PATH]

cuDNN on separate q, k, v arrays; cuDNN on slices of one packed [B, T, 3, H, D] projection (the difference is the
relayout copies XLA makes, since a custom call takes whole buffers); jax's own Mosaic GPU flash attention
(``jax.experimental.pallas.ops.gpu.attention_mgpu``, Hopper only) at a few tilings, with its max difference from
cuDNN. The question it answered (benchmarks/README.md, sixteenth session): would an attention kernel of that
design, reading q, k, v in place from the packed projection, beat cuDNN plus the copies?
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402

B, T, H, D, LAYERS = 8, 1024, 12, 64, 12
TILINGS = [(64, 64, 2), (64, 128, 2), (64, 64, 4), (128, 64, 2), (128, 128, 2), (64, 128, 4), (128, 128, 3)]


def median_ms(f, args, calls: int = 30) -> float:
    import jax

    for _ in range(2):
        jax.block_until_ready(f(*args))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(f(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times)) * 1e3


def main(argv=None) -> dict:
    import jax
    import jax.numpy as jnp

    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    rng = np.random.default_rng(0)
    packed = [jnp.asarray(rng.standard_normal((B * T, 3 * H * D)).astype(np.float16) * 0.5) for _ in range(LAYERS)]
    apart = jax.block_until_ready([tuple(x.reshape(B, T, 3, H, D)[:, :, i] for i in range(3)) for x in packed])

    def cudnn(q, k, v, scale=0.125):
        return jax.nn.dot_product_attention(q, k, v, is_causal=True, implementation="cudnn", scale=scale)

    @jax.jit
    def cudnn_apart(apart):
        return [cudnn(q, k, v) for q, k, v in apart]

    @jax.jit
    def cudnn_packed(packed):
        parts = [x.reshape(B, T, 3, H, D) for x in packed]
        return [cudnn(x[:, :, 0], x[:, :, 1], x[:, :, 2]) for x in parts]

    res = {"jax": jax.__version__, "device": str(jax.devices()[0]),
           "cudnn_separate_ms": median_ms(cudnn_apart, (apart,)),
           "cudnn_from_packed_ms": median_ms(cudnn_packed, (packed,))}
    print(res, flush=True)
    ref = np.asarray(cudnn(*apart[0], scale=1.0), np.float32)  # the Mosaic kernel applies no scale
    try:
        from jax.experimental.pallas.ops.gpu import attention_mgpu as mgpu
    except ImportError as exc:
        res["mosaic_gpu"] = f"not available: {exc}"
    else:
        for bq, bkv, steps in TILINGS:
            name = f"mosaic_gpu_q{bq}_kv{bkv}_s{steps}"
            try:
                cfg = mgpu.TuningConfig(block_q=bq, block_kv=bkv, max_concurrent_steps=steps, causal=True)
                run = jax.jit(lambda apart, cfg=cfg: [mgpu.attention(q, k, v, cfg) for q, k, v in apart])
                res[name + "_ms"] = median_ms(run, (apart,))
                res[name + "_max_diff"] = float(np.max(np.abs(np.asarray(run(apart)[0], np.float32) - ref)))
            except Exception as exc:  # a tiling this kernel refuses, or not a Hopper GPU
                res[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
            print(name, res.get(name + "_ms", res.get(name)), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


if __name__ == "__main__":
    main()
