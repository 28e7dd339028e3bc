"""The front half and the build vs jax, same function, one process (CPU or GPU):

    python benchmarks/bench_front.py [--ops 1000] [--reps 5] [--json out.json]

* trace+lower: ``tp`` trace -> MLIR of a graph of ``--ops`` element-wise ops vs jax's ``jit(f).lower(x)``
  of the same function in jax.numpy (goal <= 0.5x); both warm (one untimed call first) with a full
  ``gc.collect()`` before each timed call;
* xla build: ``Lowered.build(engine="xla", shapes="opt")`` (our MLIR -> jax -> XLA compile) vs jax's
  ``.compile()`` of the lowered program alone (goal <= 1.2x);
* three profile points (opt, min, max compiled concurrently) vs one (goal <= 1.5x);
* Executable call vs a raw ``jax.jit`` call on a tiny input (goal <= 1.5x).

Every build runs with an empty persistent cache and cleared jax caches. Medians of ``--reps``.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import tempfile
import time

import numpy as np


def tp_graph(n_ops: int):
    import tripy_lab as tp

    def f(x):
        for i in range(n_ops // 4):
            x = tp.tanh(x) * 1.01 + x - 0.5 * (i % 3)
        return x

    return f


def jax_graph(n_ops: int):
    import jax.numpy as jnp

    def f(x):
        for i in range(n_ops // 4):
            x = jnp.tanh(x) * 1.01 + x - 0.5 * (i % 3)
        return x

    return f


def median_time(fn, reps: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(reps):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def warm_median_time(fn, reps: int, r: dict, key: str) -> tuple[float, object]:
    """Median of ``reps`` calls after an untimed first one (imports, first-use caches: kept as ``{key}_cold_s``),
    each after a full ``gc.collect()``: otherwise whichever side happens to trigger Python's full collection of
    the whole heap (50-80 ms with jax loaded) pays for both. Both sides of a ratio are timed this way."""
    start = time.perf_counter()
    fn()
    r[f"{key}_cold_s"] = time.perf_counter() - start
    times, out = [], None
    for _ in range(reps):
        gc.collect()
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def fresh():
    import jax

    import tripy_lab as tp

    tp.config.compilation_cache_dir = tempfile.mkdtemp(prefix="tripy-bench-")
    jax.clear_caches()


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--ops", type=int, default=1000)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import jax

    import tripy_lab as tp
    from tripy_lab import pipeline

    n = a.ops
    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    f_tp, f_jax = tp_graph(n), jax_graph(n)
    info = tp.InputInfo((64, 64), tp.float32)
    dyn = tp.InputInfo(((16, 64, 128), 64), tp.float32)
    r: dict = {"ops": n, "jax": jax.__version__, "device": str(jax.devices()[0].device_kind),
               "machine": platform.machine(), "date": time.strftime("%Y-%m-%d")}

    t_ours, lowered = warm_median_time(lambda: pipeline.trace(f_tp, args=[info]).lower(), a.reps, r, "trace_lower")
    r["mlir_ops"] = len(lowered.program.ops())
    r["trace_s"], r["lower_s"] = lowered.traced.seconds, lowered.seconds  # the split, from the last rep

    def jax_lower():
        jax.clear_caches()
        return jax.jit(f_jax).lower(x)

    t_jax, jl = warm_median_time(jax_lower, a.reps, r, "jax_lower")
    r["trace_lower_s"], r["jax_lower_s"] = t_ours, t_jax
    r["trace_lower_vs_jax_lower"] = t_ours / t_jax

    builds, compiles = [], []
    for _ in range(max(2, a.reps // 2)):
        fresh()
        start = time.perf_counter()
        lowered.build(engine="xla", shapes="opt")
        builds.append(time.perf_counter() - start)
        fresh()
        jl = jax.jit(f_jax).lower(x)
        start = time.perf_counter()
        jl.compile()
        compiles.append(time.perf_counter() - start)
    r["xla_build_s"], r["jax_compile_s"] = statistics.median(builds), statistics.median(compiles)
    r["xla_build_vs_jax_compile"] = r["xla_build_s"] / r["jax_compile_s"]

    dyn_lowered = pipeline.trace(f_tp, args=[dyn]).lower()
    ones, threes = [], []
    for _ in range(max(2, a.reps // 2)):
        fresh()
        start = time.perf_counter()
        dyn_lowered.build(engine="xla", shapes="opt")
        ones.append(time.perf_counter() - start)
        fresh()
        start = time.perf_counter()
        dyn_lowered.build(engine="xla", shapes="profile")
        threes.append(time.perf_counter() - start)
    r["build_one_point_s"], r["build_three_points_s"] = statistics.median(ones), statistics.median(threes)
    r["three_points_vs_one"] = r["build_three_points_s"] / r["build_one_point_s"]

    # call overhead: the tiny function of bench_xla_overhead, Executable vs raw jit, interleaved
    import jax.numpy as jnp

    small = np.random.default_rng(1).standard_normal(8).astype(np.float32)
    exe = tp.compile(lambda v: tp.tanh(v) * 2 + v, args=[tp.InputInfo([8], tp.float32)], engine="xla")
    jitted = jax.jit(lambda v: jnp.tanh(v) * 2 + v)
    dev = jax.device_put(small)
    per = {"jit": [], "executable": []}

    def batch(fn, calls=2000):
        out = None
        start = time.perf_counter()
        for _ in range(calls):
            out = fn(dev)
        jax.block_until_ready(out)
        return (time.perf_counter() - start) / calls

    batch(jitted, 200)
    batch(exe, 200)
    for _ in range(15):
        per["jit"].append(batch(jitted))
        per["executable"].append(batch(exe))
    r["jit_call_us"] = statistics.median(per["jit"]) * 1e6
    r["executable_call_us"] = statistics.median(per["executable"]) * 1e6
    r["executable_vs_jit"] = r["executable_call_us"] / r["jit_call_us"]
    r["goals"] = {"trace_lower <= 0.5x jax lower": r["trace_lower_vs_jax_lower"] <= 0.5,
                  "xla build <= 1.2x jax compile": r["xla_build_vs_jax_compile"] <= 1.2,
                  "three points <= 1.5x one": r["three_points_vs_one"] <= 1.5,
                  "executable call <= 1.5x jit": r["executable_vs_jit"] <= 1.5}
    print(json.dumps(r, indent=1))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(r, fh, indent=1)
    return r


if __name__ == "__main__":
    main()
