"""GPU benchmarks on one device (run on the H200 machine): python benchmarks/bench_gpu.py [--json out.json]

1. A transformer block (fp16, batch 8, seq 512, d 1024, 16 heads) three ways, same weights:
   tp.compile(..., engine="xla")  vs  the same block hand-written in jax.numpy under jax.jit  vs  torch eager.
2. A GEMM-bound Linear (8192 x 8192 weight, 8192 rows, fp16): tp.compile/xla vs torch.matmul, in TFLOP/s.

Times are medians over repeated batches; each batch ends with a device sync (block_until_ready /
torch.cuda.synchronize), so they are device times of the queued work, not host launch times.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # share the GPU with torch in one process

import numpy as np

import tripy_lab as tp

B, S, D, H = 8, 512, 1024, 16


def timed(fn, sync, iters=20, reps=7):
    fn()
    sync()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / iters)
    return statistics.median(samples)


def weights(rng):
    def w(*shape, scale=0.02):
        return (rng.standard_normal(shape) * scale).astype(np.float16)

    return {"ln1.weight": np.ones(D, np.float16), "ln1.bias": np.zeros(D, np.float16),
            "qkv.weight": w(3 * D, D), "qkv.bias": w(3 * D), "proj.weight": w(D, D), "proj.bias": w(D),
            "ln2.weight": np.ones(D, np.float16), "ln2.bias": np.zeros(D, np.float16),
            "fc1.weight": w(4 * D, D), "fc1.bias": w(4 * D), "fc2.weight": w(D, 4 * D), "fc2.bias": w(D)}


class Block(tp.Module):
    def __init__(self):
        super().__init__()
        f16 = tp.float16
        self.ln1 = tp.LayerNorm(D, dtype=f16)
        self.qkv = tp.Linear(D, 3 * D, dtype=f16)
        self.proj = tp.Linear(D, D, dtype=f16)
        self.ln2 = tp.LayerNorm(D, dtype=f16)
        self.fc1 = tp.Linear(D, 4 * D, dtype=f16)
        self.fc2 = tp.Linear(4 * D, D, dtype=f16)

    def forward(self, x):
        qkv = tp.reshape(self.qkv(self.ln1(x)), (B, S, 3, H, D // H))
        qkv = tp.permute(qkv, (2, 0, 3, 1, 4))
        q, k, v = qkv[0], qkv[1], qkv[2]
        att = tp.softmax((q @ tp.transpose(k, -1, -2)) * (1.0 / math.sqrt(D // H)), dim=-1)
        o = tp.reshape(tp.permute(att @ v, (0, 2, 1, 3)), (B, S, D))
        x = x + self.proj(o)
        return x + self.fc2(tp.gelu(self.fc1(self.ln2(x))))


def jax_block(p, x):
    import jax
    import jax.numpy as jnp

    def ln(x, g, b):
        xf = x.astype(jnp.float32)
        mu = xf.mean(-1, keepdims=True)
        var = ((xf - mu) ** 2).mean(-1, keepdims=True)
        return ((xf - mu) / jnp.sqrt(var + 1e-5) * g + b).astype(x.dtype)

    qkv = (ln(x, p["ln1.weight"], p["ln1.bias"]) @ p["qkv.weight"].T + p["qkv.bias"]).reshape(B, S, 3, H, D // H)
    q, k, v = jnp.transpose(qkv, (2, 0, 3, 1, 4))
    att = jax.nn.softmax((q @ jnp.swapaxes(k, -1, -2)) * (1.0 / math.sqrt(D // H)), axis=-1)
    o = jnp.transpose(att @ v, (0, 2, 1, 3)).reshape(B, S, D)
    x = x + o @ p["proj.weight"].T + p["proj.bias"]
    h = jax.nn.gelu(ln(x, p["ln2.weight"], p["ln2.bias"]) @ p["fc1.weight"].T + p["fc1.bias"], approximate=False)
    return x + h @ p["fc2.weight"].T + p["fc2.bias"]


def torch_block(p, x):
    import torch.nn.functional as F

    h = F.layer_norm(x, (D,), p["ln1.weight"], p["ln1.bias"])
    q, k, v = F.linear(h, p["qkv.weight"], p["qkv.bias"]).view(B, S, 3, H, D // H).permute(2, 0, 3, 1, 4)
    att = (q @ k.transpose(-1, -2) * (1.0 / math.sqrt(D // H))).softmax(-1)
    o = (att @ v).permute(0, 2, 1, 3).reshape(B, S, D)
    x = x + F.linear(o, p["proj.weight"], p["proj.bias"])
    return x + F.linear(F.gelu(F.linear(F.layer_norm(x, (D,), p["ln2.weight"], p["ln2.bias"]),
                                        p["fc1.weight"], p["fc1.bias"])), p["fc2.weight"], p["fc2.bias"])


def bench_block(results):
    import jax
    import torch

    rng = np.random.default_rng(0)
    params = weights(rng)
    x_np = rng.standard_normal((B, S, D)).astype(np.float16)
    block = Block()
    block.load_state_dict({k: tp.Tensor(v) for k, v in params.items()})
    start = time.perf_counter()
    exe = tp.compile(block, args=[tp.InputInfo((B, S, D), tp.float16)], engine="xla")
    compile_s = time.perf_counter() - start
    gpu = jax.devices("gpu")[0]
    x_j = jax.device_put(x_np, gpu)
    p_j = {k: jax.device_put(v, gpu) for k, v in params.items()}
    jitted = jax.jit(jax_block)
    x_t = torch.from_numpy(x_np).cuda()
    p_t = {k: torch.from_numpy(v).cuda() for k, v in params.items()}
    ours = np.asarray(exe(x_j)).astype(np.float32)
    theirs = np.asarray(jitted(p_j, x_j)).astype(np.float32)
    torch_out = torch_block(p_t, x_t).float().cpu().numpy()
    err_jax = float(np.max(np.abs(ours - theirs)))
    err_torch = float(np.max(np.abs(ours - torch_out)))
    last = {}

    def run_ours():
        last["o"] = exe(x_j)

    def run_jax():
        last["j"] = jitted(p_j, x_j)

    t_ours = timed(run_ours, lambda: exe.synchronize())
    t_jax = timed(run_jax, lambda: last["j"].block_until_ready())
    t_torch = timed(lambda: torch_block(p_t, x_t), torch.cuda.synchronize)
    results["block"] = {"compile_s": compile_s, "tripy_lab_ms": t_ours * 1e3, "jax_jit_ms": t_jax * 1e3,
                        "torch_eager_ms": t_torch * 1e3, "vs_jax": t_jax / t_ours, "vs_torch": t_torch / t_ours,
                        "max_abs_diff_vs_jax": err_jax, "max_abs_diff_vs_torch": err_torch}


def bench_gemm(results):
    import jax
    import torch

    n = 8192
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((n, n)) * 0.01).astype(np.float16)
    x = rng.standard_normal((n, n)).astype(np.float16)
    lin = tp.Linear(n, n, bias=False, dtype=tp.float16)
    lin.weight = tp.Tensor(w)
    start = time.perf_counter()
    exe = tp.compile(lin, args=[tp.InputInfo((n, n), tp.float16)], engine="xla")
    compile_s = time.perf_counter() - start
    x_j = jax.device_put(x, jax.devices("gpu")[0])
    w_t = torch.from_numpy(w).cuda()
    x_t = torch.from_numpy(x).cuda()
    t_ours = timed(lambda: exe(x_j), exe.synchronize, iters=10)
    t_torch = timed(lambda: torch.matmul(x_t, w_t.T), torch.cuda.synchronize, iters=10)
    flops = 2 * n**3
    results["gemm"] = {"compile_s": compile_s, "tripy_lab_tflops": flops / t_ours / 1e12,
                       "torch_matmul_tflops": flops / t_torch / 1e12, "ratio": t_torch / t_ours}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json")
    args = parser.parse_args()
    import jax
    import torch

    results = {"device": torch.cuda.get_device_name(0), "jax": jax.__version__, "torch": torch.__version__,
               "date": time.strftime("%Y-%m-%d")}
    bench_block(results)
    bench_gemm(results)
    print(json.dumps(results, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
