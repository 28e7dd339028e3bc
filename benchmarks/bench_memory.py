"""Peak memory of compiling and running a GPT-2-small-sized model: ``tp.compile`` (xla engine) vs jax.

    python benchmarks/bench_memory.py [--layers 12] [--json out.json]

Each contender runs in its own fresh subprocess (so peaks don't mix) and reports ``ru_maxrss``:
  * ``jax``:   the same GPT-2 forward written in ``jax.numpy``, weights as jit arguments, ``jax.jit`` + one run
  * ``tripy``: the nanoGPT program of ``tests/programs/test_nanogpt.py`` at GPT-2 small size (124M params,
               tied embedding), weights loaded through ``state_dict``, ``tp.compile`` with a dynamic sequence
               + one run
Both start from the same random float32 weights (a numpy dict built the same way), so "weights" (the RSS
after making them) is the floor both share; the ratio of peaks is the figure of merit (goal <= 1.2x).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB, BLOCK, EMB, HEADS = 50257, 1024, 768, 12
SEQ = 8


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _weights(layers: int) -> dict:
    """GPT-2 weights in the nanoGPT state_dict layout (float32, random); lm_head is wte (tied)."""
    import numpy as np

    rng = np.random.default_rng(0)

    def r(*shape):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)

    w = {"transformer.wte.weight": r(VOCAB, EMB), "transformer.wpe.weight": r(BLOCK, EMB),
         "transformer.ln_f.weight": np.ones(EMB, np.float32), "transformer.ln_f.bias": np.zeros(EMB, np.float32)}
    for i in range(layers):
        p = f"transformer.h.{i}."
        for ln in ("ln_1", "ln_2"):
            w[p + ln + ".weight"], w[p + ln + ".bias"] = np.ones(EMB, np.float32), np.zeros(EMB, np.float32)
        for name, (o, n) in {"attn.c_attn": (3 * EMB, EMB), "attn.c_proj": (EMB, EMB),
                             "mlp.c_fc": (4 * EMB, EMB), "mlp.c_proj": (EMB, 4 * EMB)}.items():
            w[p + name + ".weight"], w[p + name + ".bias"] = r(o, n), r(o)
    w["lm_head.weight"] = w["transformer.wte.weight"]
    return w


def run_tripy(layers: int) -> dict:
    import numpy as np

    sys.path.insert(0, ROOT)
    from tests.programs.test_nanogpt import GPT, GPTConfig

    import tripy_lab as tp

    w = _weights(layers)
    floor = _rss_mb()
    cfg = GPTConfig(block_size=BLOCK, vocab_size=VOCAB, num_layers=layers, num_heads=HEADS, embedding_size=EMB)
    model = GPT(cfg)
    model.load_state_dict({k: tp.Tensor(v) for k, v in w.items()}, strict=False)
    t0 = time.perf_counter()
    exe = tp.compile(model, args=[tp.InputInfo((1, (1, SEQ, 64)), tp.int32)], engine="xla")
    build = time.perf_counter() - t0
    out = np.asarray(exe(tp.Tensor(np.arange(SEQ, dtype=np.int32).reshape(1, SEQ)).eval()))
    return {"floor_mb": floor, "peak_mb": _peak_mb(), "build_s": build, "checksum": float(out[0, -1, :8].sum())}


def run_jax(layers: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np

    w = _weights(layers)
    floor = _rss_mb()

    def ln(x, g, b):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5) * g + b

    def gpt(p, idx):
        t = idx.shape[1]
        x = p["transformer.wte.weight"][idx] + p["transformer.wpe.weight"][:t][None]
        mask = jnp.tril(jnp.ones((t, t), bool))
        for i in range(layers):
            q = f"transformer.h.{i}."
            h = ln(x, p[q + "ln_1.weight"], p[q + "ln_1.bias"])
            qkv = h @ p[q + "attn.c_attn.weight"].T + p[q + "attn.c_attn.bias"]
            a, k, v = (z.reshape(1, t, HEADS, EMB // HEADS).transpose(0, 2, 1, 3) for z in jnp.split(qkv, 3, 2))
            att = jnp.where(mask, a @ k.transpose(0, 1, 3, 2) / np.sqrt(EMB // HEADS), -jnp.inf)
            y = (jax.nn.softmax(att, -1) @ v).transpose(0, 2, 1, 3).reshape(1, t, EMB)
            x = x + y @ p[q + "attn.c_proj.weight"].T + p[q + "attn.c_proj.bias"]
            h = jax.nn.gelu(ln(x, p[q + "ln_2.weight"], p[q + "ln_2.bias"]) @ p[q + "mlp.c_fc.weight"].T
                            + p[q + "mlp.c_fc.bias"], approximate=False)
            x = x + h @ p[q + "mlp.c_proj.weight"].T + p[q + "mlp.c_proj.bias"]
        x = ln(x, p["transformer.ln_f.weight"], p["transformer.ln_f.bias"])
        return x @ p["lm_head.weight"].T

    t0 = time.perf_counter()
    params = {k: jnp.asarray(v) for k, v in w.items()}
    fn = jax.jit(gpt)
    out = np.asarray(fn(params, jnp.arange(SEQ, dtype=jnp.int32).reshape(1, SEQ)))
    build = time.perf_counter() - t0
    return {"floor_mb": floor, "peak_mb": _peak_mb(), "build_s": build, "checksum": float(out[0, -1, :8].sum())}


def _child(which: str, layers: int) -> dict:
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    env["TMPDIR"] = os.environ.get("BENCH_TMPDIR", env.get("TMPDIR", "/tmp"))
    out = subprocess.run([sys.executable, __file__, "--child", which, "--layers", str(layers)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--child", choices=["jax", "tripy"])
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        print(json.dumps((run_jax if args.child == "jax" else run_tripy)(args.layers)))
        return
    rows = {name: _child(name, args.layers) for name in ("jax", "tripy")}
    ratio = rows["tripy"]["peak_mb"] / rows["jax"]["peak_mb"]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; GPT-2 small, "
          f"{args.layers} layers, seq {SEQ}")
    print("| contender | weights (floor) | peak RSS | build + first run | checksum |")
    print("|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['floor_mb']:.0f} MB | {r['peak_mb']:.0f} MB | {r['build_s']:.1f} s | "
              f"{r['checksum']:.4f} |")
    print(f"peak tripy / jax = {ratio:.2f}x (goal <= 1.2x)")
    if args.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(args.json, json.dumps({"rows": rows, "ratio": ratio, "layers": args.layers}, indent=2))


if __name__ == "__main__":
    main()
