"""The fused Linear kernel (engine/xla/pallas.py) against XLA's GEMM + epilogue and torch, on the GPU:

    python benchmarks/bench_pallas.py [--json out.json] [--sweep]

For GPT-2-small's projections (fp16; c_fc with bias + exact GELU, the packed q/k/v projection with bias
split into three outputs) at M = B*T = 8192 and 128: XLA (``jax.jit`` of ``gelu(x @ W.T + b)``), torch
eager and ``torch.compile``, and the Pallas kernel with the tiles of ``TILE_TABLE`` (``--sweep``: every
candidate tile). Each jitted call runs the layer on ``COPIES`` different inputs, so a time is per layer with
the host's dispatch spread over the copies. XLA's dot merger merges the copies' GEMMs (they share W) into
one, with concatenation and slice copies around it, so XLA's columns here are pessimistic: the fair
comparison is in one program, ``gpt_options.py`` (``linear_off`` vs ``defaults`` with xla_linear on).
Medians of 7 batches of back-to-back calls; max |difference| vs XLA's result.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_gpu import timed  # noqa: E402

CANDIDATES = {
    "big": [(128, 128, 64, 4, 3), (128, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4),
            (128, 256, 64, 8, 3), (64, 128, 64, 4, 4), (128, 64, 64, 4, 4), (256, 128, 64, 8, 3),
            (128, 128, 32, 4, 4), (64, 256, 64, 8, 3)],
    "small": [(16, 64, 128, 4, 3), (32, 64, 64, 4, 3), (64, 64, 64, 4, 3), (32, 32, 128, 4, 3),
              (16, 32, 256, 4, 2), (64, 32, 64, 2, 3), (16, 128, 64, 4, 3), (32, 128, 64, 4, 3)],
}
COPIES = 8
CASES = [  # name, M, K, N, act, parts
    ("c_fc+gelu", 8192, 768, 3072, "gelu_erf", 1),
    ("qkv", 8192, 768, 2304, "none", 3),
    ("c_fc+gelu", 128, 768, 3072, "gelu_erf", 1),
    ("qkv", 128, 768, 2304, "none", 3),
]


def bench_case(name, m, k, n, act, parts, sweep, rng):
    import jax
    import jax.numpy as jnp

    from tripy_lab.engine.xla import pallas as P

    xs = tuple(jnp.asarray(rng.standard_normal((m, k)).astype(np.float16)) for _ in range(COPIES))
    x = xs[0]
    w = jnp.asarray((rng.standard_normal((n, k)) * 0.03).astype(np.float16))
    b = jnp.asarray((rng.standard_normal(n) * 0.1).astype(np.float16))
    flop = 2.0 * m * n * k

    def xla_f(x, w, b, act=act, parts=parts, n=n):
        y = x @ w.T + b
        if act == "gelu_erf":
            y = jax.nn.gelu(y, approximate=False)
        return tuple(jnp.split(y, parts, axis=1)) if parts > 1 else y

    def per_layer(layer):
        g, last = jax.jit(lambda xs, w, b: [layer(x, w, b) for x in xs]), {}

        def call():
            last["out"] = g(xs, w, b)

        return timed(call, lambda: jax.block_until_ready(last["out"]), iters=10) * 1e6 / COPIES

    ref = jax.jit(xla_f)(x, w, b)
    row = {"case": name, "M": m, "K": k, "N": n}
    row["xla_us"] = per_layer(xla_f)
    row["xla_gemm_only_us"] = per_layer(lambda x, w, b: x @ w.T)
    try:
        import torch
        import torch.nn.functional as F

        txs = [torch.from_numpy(np.array(v)).cuda() for v in xs]
        tw, tb = (torch.from_numpy(np.array(v)).cuda() for v in (w, b))

        def tf(txs=txs, tw=tw, tb=tb, act=act):
            out = []
            for tx in txs:
                y = F.linear(tx, tw, tb)
                out.append(F.gelu(y) if act == "gelu_erf" else y)
            return out

        row["torch_us"] = timed(tf, torch.cuda.synchronize, iters=10) * 1e6 / COPIES
        tc = torch.compile(tf)
        tc()
        row["torch_compile_us"] = timed(tc, torch.cuda.synchronize, iters=10) * 1e6 / COPIES
    except Exception as exc:  # torch missing: XLA and Pallas only
        row["torch_error"] = f"{type(exc).__name__}: {exc}"[:200]
    cands = CANDIDATES["big" if m >= 512 else "small"] if sweep else []
    tiles = [("table", None)] + [(str(c), P.Tiles(*c)) for c in cands]
    row["pallas"] = {}
    for label, t in tiles:
        if P.tiles_for(m, n, k, parts, t) is None:
            continue
        try:
            def layer(x, w, b, t=t):
                return P.linear(x, w, b, w_nk=True, act=act, parts=parts, tiles=t)

            out = jax.jit(layer)(x, w, b)
            err = max(float(jnp.max(jnp.abs(o.astype(jnp.float32) - r.astype(jnp.float32))))
                      for o, r in zip(out if parts > 1 else [out], ref if parts > 1 else [ref]))
            us = per_layer(layer)
            row["pallas"][label] = {"us": round(us, 2), "tflops": round(flop / us / 1e6, 1),
                                    "max_err": err}
        except Exception as exc:
            row["pallas"][label] = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    return row


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json", default=None)
    p.add_argument("--sweep", action="store_true")
    a = p.parse_args()


    rng = np.random.default_rng(0)
    results = []
    for case in CASES:
        row = bench_case(*case, sweep=a.sweep, rng=rng)
        results.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
