"""onnxruntime vs xla on a GPT-2-small-sized model (CPU): first call at a new shape, and steady state.

    python benchmarks/bench_onnx.py            # GPT-2 small: 12 layers, d=768, 12 heads, vocab 50257
    python benchmarks/bench_onnx.py --small    # 2 layers, d=128 (a quick run on a busy machine)

One process, one set of weights, three runners of the same nanoGPT forward pass (ids [1, T] -> logits):
  * ``onnxruntime``: ``tp.compile(model, engine="onnxruntime")``: one InferenceSession for T in [1, 128]
  * ``xla``: ``tp.compile(model, engine="xla")``: XLA compiles again for each new T
  * ``jax.jit``: the same forward pass written in jax.numpy, jitted (the peer for steady state)
The XLA persistent cache points at a fresh empty folder, so every xla compile is real. Reported: build time;
first-call latency at a T never seen before (for xla that includes its compile);
steady-state median latency at T=64 of all three, and ratios against jax.jit measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import time

import numpy as np

import tripy_lab as tp

T_MIN, T_OPT, T_MAX = 1, 32, 128


class Block(tp.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.d, self.h = d, heads
        self.ln1, self.ln2 = tp.LayerNorm(d), tp.LayerNorm(d)
        self.qkv, self.proj = tp.Linear(d, 3 * d), tp.Linear(d, d)
        self.fc, self.out = tp.Linear(d, 4 * d), tp.Linear(4 * d, d)

    def forward(self, x):
        b, t = x.shape[0], x.shape[1]
        hd = self.d // self.h
        qkv = tp.permute(tp.reshape(self.qkv(self.ln1(x)), (b, t, 3, self.h, hd)), (2, 0, 3, 1, 4))
        att = (qkv[0] @ tp.transpose(qkv[1], -1, -2)) * (1.0 / math.sqrt(hd))
        mask = tp.tril(tp.ones((t, t), dtype=tp.bool))
        att = tp.softmax(tp.masked_fill(att, ~mask, float("-inf")), dim=-1)
        x = x + self.proj(tp.reshape(tp.permute(att @ qkv[2], (0, 2, 1, 3)), (b, t, self.d)))
        return x + self.out(tp.gelu(self.fc(self.ln2(x))))


class GPT(tp.Module):
    def __init__(self, vocab, ctx, d, heads, layers):
        super().__init__()
        self.wte, self.wpe = tp.Embedding(vocab, d), tp.Embedding(ctx, d)
        self.blocks = [Block(d, heads) for _ in range(layers)]
        self.ln = tp.LayerNorm(d)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(tp.arange(idx.shape[1], dtype=tp.int32))
        for block in self.blocks:
            x = block(x)
        return self.ln(x) @ tp.transpose(self.wte.weight, 0, 1)


def randomize(model, seed=0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    weights = {}
    for name, p in model.state_dict().items():
        w = (rng.standard_normal(p.shape) * 0.02).astype(np.float32)
        if name.endswith(("ln1.weight", "ln2.weight", "ln.weight")):
            w = np.ones(p.shape, np.float32)
        weights[name] = w
    model.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()})
    return weights


def jax_forward(cfg):
    import jax
    import jax.numpy as jnp

    d, h = cfg["d"], cfg["heads"]

    def ln(x, p, name):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5) * p[name + ".weight"] + p[name + ".bias"]

    def lin(x, p, name):
        return x @ p[name + ".weight"].T + p[name + ".bias"]

    def forward(p, idx):
        b, t = idx.shape
        x = p["wte.weight"][idx] + p["wpe.weight"][jnp.arange(t)]
        mask = jnp.tril(jnp.ones((t, t), bool))
        for i in range(cfg["layers"]):
            k = f"blocks.{i}."
            qkv = lin(ln(x, p, k + "ln1"), p, k + "qkv").reshape(b, t, 3, h, d // h).transpose(2, 0, 3, 1, 4)
            att = (qkv[0] @ jnp.swapaxes(qkv[1], -1, -2)) * (1.0 / math.sqrt(d // h))
            att = jax.nn.softmax(jnp.where(mask, att, -jnp.inf), axis=-1)
            x = x + lin((att @ qkv[2]).transpose(0, 2, 1, 3).reshape(b, t, d), p, k + "proj")
            x = x + lin(jax.nn.gelu(lin(ln(x, p, k + "ln2"), p, k + "fc"), approximate=False), p, k + "out")
        return ln(x, p, "ln") @ p["wte.weight"].T

    return jax.jit(forward)


def median_ms(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", action="store_true", help="2 layers, d=128, vocab 1000 instead of GPT-2 small")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    cfg = (dict(vocab=1000, ctx=T_MAX, d=128, heads=4, layers=2) if args.small
           else dict(vocab=50257, ctx=1024, d=768, heads=12, layers=12))
    import tempfile

    import jax

    # a fresh, empty XLA persistent cache: every xla compile below is a real one (a warm cache from an earlier
    # run would turn "first call at a new shape" into a disk read)
    tp.config.compilation_cache_dir = tempfile.mkdtemp(prefix="bench_onnx_xla_")
    model = GPT(**cfg)
    weights = randomize(model)
    params = sum(w.size for w in weights.values())
    info = tp.InputInfo((1, (T_MIN, T_OPT, T_MAX)), tp.int32)
    results = {"config": cfg, "params": int(params), "machine": platform.processor() or platform.machine(),
               "jax": jax.__version__}
    rng = np.random.default_rng(1)

    def ids(t):
        return tp.Tensor(rng.integers(0, cfg["vocab"], size=(1, t)).astype(np.int32))

    exes = {}
    for engine in ("onnxruntime", "xla"):
        t0 = time.perf_counter()
        exes[engine] = tp.compile(model, args=[info], engine=engine)
        results[f"{engine}_build_s"] = time.perf_counter() - t0
    jitted = jax_forward(cfg)
    p = {k: jax.device_put(v) for k, v in weights.items()}
    t0 = time.perf_counter()
    jax.block_until_ready(jitted(p, np.asarray(ids(T_OPT))))
    results["jax_jit_first_call_s"] = time.perf_counter() - t0

    # first call at new lengths (never built, never run): xla compiles, onnxruntime just runs
    for engine, exe in exes.items():
        firsts = []
        for t in (17, 45, 77, 101):
            x = ids(t)
            t0 = time.perf_counter()
            np.asarray(exe(x))
            firsts.append((time.perf_counter() - t0) * 1e3)
        results[f"{engine}_first_call_new_shape_ms"] = statistics.median(firsts)
    ref_check = np.asarray(exes["onnxruntime"](ids_ := ids(T_OPT)))
    np.testing.assert_allclose(np.asarray(exes["xla"](ids_)), ref_check, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(np.asarray(jitted(p, np.asarray(ids_))), ref_check, rtol=2e-3, atol=2e-3)

    x = ids(64)
    xn = np.asarray(x)
    for e in exes.values():
        np.asarray(e(x))  # warm (xla compiles T=64 here)
    jax.block_until_ready(jitted(p, xn))
    results["onnxruntime_steady_ms"] = median_ms(lambda: np.asarray(exes["onnxruntime"](x)), args.reps)
    results["xla_steady_ms"] = median_ms(lambda: np.asarray(exes["xla"](x)), args.reps)
    results["jax_jit_steady_ms"] = median_ms(lambda: jax.block_until_ready(jitted(p, xn)), args.reps)
    for engine in ("onnxruntime", "xla"):
        results[f"{engine}_steady_vs_jit"] = results[f"{engine}_steady_ms"] / results["jax_jit_steady_ms"]
    results["first_call_xla_over_onnxruntime"] = (results["xla_first_call_new_shape_ms"]
                                                  / results["onnxruntime_first_call_new_shape_ms"])
    results["onnxruntime_sessions_built"] = exes["onnxruntime"]._compiled.sessions_built
    results["xla_shapes_built"] = len(exes["xla"]._compiled.report.cache["shapes_built"])
    for k, v in results.items():
        print(f"{k:36s} {v:.3f}" if isinstance(v, float) else f"{k:36s} {v}")
    if args.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(args.json, json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
