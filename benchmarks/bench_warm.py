"""Warm-up: the first call at shapes inside the profile that were not built, after ``exe.warm()``, against the same
shape's steady call (each call synchronized), on the GPT of benchmarks/gpt.py (the tp.split spelling). Each run is
a fresh process (a new compile, new jax caches); the table is the median over ``--runs`` of them:

    python benchmarks/bench_warm.py                      # CPU: a small GPT (2 layers, d 128), 5 processes
    python benchmarks/bench_warm.py --ladder             # CPU, warming the whole ladder (~18 compiles each)
    python benchmarks/bench_warm.py --gpu                # GPU: GPT-2 small (12 layers), 3 processes sharing
                                                         # one cache (the first compiles, the others load)
    python benchmarks/bench_warm.py --gpu --json out.json

Per shape: ``first_ms`` (the first call after the warm-up, with a new array), ``steady_ms`` (the median of the
next ten on the same array), ``ratio`` = first / steady (goal, issue 31: <= 2), ``fresh_ms`` (the median of ten
calls, each on a new array: what every new input pays), ``revisit_ms`` (the first call at the shape again after
the other shapes ran: the floor a first call can reach). Half the shapes get numpy arrays, half device arrays
(jax), as users pass both. Also the cold first call at a shape that was not warmed (it compiles).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402

CPU_SIZES = dict(layers=2, d=128, heads=4, vocab=1000, tmax=256)
# (B, T): on the ladder of the profile (one dim moved from opt, or both at one rung index); the input kind
CPU_PROFILE, CPU_SHAPES = ((1, 4, 8), (1, 64, 256)), [((2, 64), "numpy"), ((4, 128), "device"),
                                                       ((4, 32), "numpy"), ((8, 128), "device")]
GPU_PROFILE, GPU_SHAPES = ((1, 4, 8), (1, 256, 1024)), [((2, 256), "numpy"), ((4, 512), "device"),
                                                        ((4, 128), "numpy"), ((8, 128), "device")]


def child(gpu: bool, full_ladder: bool, cache: str | None) -> dict:
    import jax

    import tripy_lab as tp

    # a fresh cache: this process compiles everything; a shared one: the runs after the first load from disk
    tp.config.compilation_cache_dir = cache or tempfile.mkdtemp(prefix="bench-warm-")
    sizes = {} if gpu else CPU_SIZES
    profile, shapes = (GPU_PROFILE, GPU_SHAPES) if gpu else (CPU_PROFILE, CPU_SHAPES)
    rng = np.random.default_rng(0)
    vocab = sizes.get("vocab", gpt.V)
    params = gpt.weights(rng, **{k: v for k, v in sizes.items() if k != "heads"})
    model = gpt.tripy_gpt(params, split_qkv=True, **sizes)
    exe = tp.compile(model, args=[tp.InputInfo(profile, tp.int32)], engine="xla")
    device = jax.devices()[0]

    def new_array(b, t, kind):
        x = rng.integers(0, vocab, (b, t)).astype(np.int32)
        if kind == "device":
            x = jax.device_put(x, device)
            x.block_until_ready()  # the transfer is not part of the call
        return x

    def timed(x):
        start = time.perf_counter()
        exe(x)
        exe.synchronize()
        return time.perf_counter() - start

    r: dict = {"device": device.device_kind}
    cold = new_array(1, 3, "device")  # (1, 3): on no ladder rung, so never warm
    r["cold_first_ms"] = timed(cold) * 1e3
    r["cold_steady_ms"] = statistics.median(timed(cold) for _ in range(10)) * 1e3
    start = time.perf_counter()
    # the whole ladder (~20 shapes) on the GPU; on the CPU, where each compile takes seconds, the measured shapes
    # and a few more unless --ladder (the order of compiles and calls matters on GPUs only: ``evicts_on_build``)
    extra = [(1, 64), (2, 2), (8, 8)]
    warm = exe.warm("ladder" if full_ladder else [{"idx": s} for s in [s for s, _ in shapes] + extra],
                    background=False)
    r["warm_up_s"], r["warm_up"] = time.perf_counter() - start, repr(warm)
    report = exe.stages["built"].report
    misses = report.cache["misses"]
    for (b, t), kind in shapes:
        x = new_array(b, t, kind)
        first = timed(x)
        steady = statistics.median(timed(x) for _ in range(10))
        fresh = statistics.median(timed(new_array(b, t, kind)) for _ in range(10))
        r[f"B{b}_T{t}_{kind}"] = {"first_ms": first * 1e3, "steady_ms": steady * 1e3, "ratio": first / steady,
                                  "fresh_ms": fresh * 1e3}
    for (b, t), kind in shapes:  # each shape again, after the others ran: a first call without anything cold
        r[f"B{b}_T{t}_{kind}"]["revisit_ms"] = timed(new_array(b, t, kind)) * 1e3
    r["compiles_after_warm_up"] = report.cache["misses"] - misses  # 0: every measured shape was warm
    r["persistent_hits"] = report.cache["persistent_hits"]
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--gpu", action="store_true", help="GPT-2 small on the GPU (default: a small GPT on the CPU)")
    p.add_argument("--runs", type=int, default=None, help="fresh processes (default 5 on CPU, 3 on GPU)")
    p.add_argument("--ladder", action="store_true", help="CPU: warm the whole ladder (GPU: always)")
    p.add_argument("--shared-cache", action="store_true",
                   help="one persistent cache for all runs: the first compiles, the others load (default on GPU)")
    p.add_argument("--json")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--cache", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print("RESULT " + json.dumps(child(a.gpu, a.gpu or a.ladder, a.cache)), flush=True)
        return
    runs = []
    shared = ["--cache", tempfile.mkdtemp(prefix="bench-warm-")] if a.shared_cache or a.gpu else []
    for i in range(a.runs or (3 if a.gpu else 5)):
        out = subprocess.run([sys.executable, __file__, "--child"] + (["--gpu"] if a.gpu else [])
                             + (["--ladder"] if a.ladder else []) + shared,
                             capture_output=True, text=True, check=False)
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if line is None:
            sys.exit(f"run {i} failed:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        runs.append(json.loads(line[7:]))
        print(f"run {i}: {runs[-1]['warm_up']} in {runs[-1]['warm_up_s']:.1f} s, persistent hits "
              f"{runs[-1]['persistent_hits']}", file=sys.stderr, flush=True)
    shapes = [k for k, v in runs[0].items() if isinstance(v, dict)]
    table = {s: {m: statistics.median(r[s][m] for r in runs) for m in runs[0][s]} for s in shapes}
    r = {"device": runs[0]["device"], "runs": len(runs), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
         "median_over_runs": table,
         "cold_first_ms": statistics.median(r["cold_first_ms"] for r in runs),
         "cold_steady_ms": statistics.median(r["cold_steady_ms"] for r in runs),
         "warm_up_s": statistics.median(r["warm_up_s"] for r in runs),
         "compiles_after_warm_up": max(r["compiles_after_warm_up"] for r in runs),
         "ratios_per_run": {s: [round(r[s]["ratio"], 2) for r in runs] for s in shapes},
         "warm_up_s_per_run": [round(r["warm_up_s"], 1) for r in runs],
         "persistent_hits_per_run": [r["persistent_hits"] for r in runs]}
    r["goal_first_within_2x_steady"] = all(v["ratio"] <= 2.0 for v in table.values())
    print(f"{'shape':<18}{'first ms':>10}{'steady ms':>11}{'ratio':>7}{'fresh ms':>10}{'revisit ms':>12}")
    for s, v in table.items():
        print(f"{s:<18}{v['first_ms']:>10.3f}{v['steady_ms']:>11.3f}{v['ratio']:>7.2f}{v['fresh_ms']:>10.3f}"
              f"{v['revisit_ms']:>12.3f}")
    print(json.dumps(r, indent=1))
    if a.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(a.json, json.dumps(r, indent=1))


if __name__ == "__main__":
    main()
