"""The front half over a mix of op families, at several sizes, vs jax on the same functions (CPU):

    python benchmarks/bench_front_mix.py [--sizes 1000,10000,80000] [--reps 5] [--json out.json] [--no-pin]

bench_front.py times one spelling (a chain of element-wise ops). Users write other things, so this one
builds each program from a block that mixes the families people use — matmul, conv, reductions, softmax,
reshape/transpose, slices with a dynamic bound read from the input's shape, gather, casts, constants — and
repeats it until the trace has about ``--sizes`` ops. For each size, in one process:

* trace+lower: ``pipeline.trace(f, args).lower()`` with a dynamic batch vs jax's ``jit(f).lower(x)`` of the
  same function in jax.numpy (goal <= 0.5x);
* xla build: ``Lowered.build(engine="xla", shapes="opt")`` vs jax's ``.compile()`` of its lowered program
  (goal <= 1.2x); skipped above ``--max-build-ops`` trace ops (XLA's own compile is minutes there);
* time per trace op, so a superlinear stage shows as a rising column (goal: flat from 1k to 80k ops).

Medians of ``--reps`` warm runs (at most two above 20,000 ops), a ``gc.collect()`` before each, both sides
timed the same way and interleaved (ours, jax, ours, jax...): each ratio is the median of the per-rep ratios, so
a load change on a shared machine hits both sides. The trace+lower ratio is also given in process CPU time
(``*_cpu_*``: both stages are single-threaded Python), which such a machine disturbs less than wall time;
``per_op_us`` sums up each size. The 80k-op size takes about 2 minutes on an idle machine (no build there).

**One CPU for the single-threaded pairs.** On a shared virtual machine the CPUs are not equal: on the H200
machine (16 vCPUs, 2026-12-02) the same trace+lower took 0.23 s pinned to most vCPUs and 0.40-0.43 s pinned to
some others, and a process moved between them as the scheduler pleased, so a pair could time ours on a slow vCPU
and jax on a fast one, and the per-op growth compared sizes measured on different ones. The trace+lower pairs
therefore run pinned (``os.sched_setaffinity``) to the CPU where a short pure-Python loop ran fastest
(``quiet_cpu``: best of three on each allowed CPU, at the start); ``cpu_loop_ms`` records the fastest and
slowest CPU's loop. Both sides of those pairs are single-threaded Python, so one CPU costs neither anything.
XLA's compile uses several threads (1.4 CPU-seconds a second on the 2-core VM), so a build and its jax compile
run on the *set* of quiet CPUs instead (``quiet_set``: those whose loop was within ``QUIET_WITHIN`` of the
fastest), every thread of the process pinned (XLA's compile pool was started before): on the H200 machine the
slowest vCPU ran the loop 1.8x slower than the fastest (2026-12-03), and the scheduler may put one side's compile
threads there and not the other's. ``--no-pin`` leaves the scheduler's choice for both.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import time

import numpy as np
from bench_front import fresh  # the same fresh-cache handling as bench_front


def paired_median_times(fns: dict, reps: int, r: dict) -> list[tuple[float, object]]:
    """``warm_median_time`` for two sides, interleaved: each rep times the first side, then the second, so that a
    load change on a shared machine hits both; the ratio first/second is the median of the per-rep ratios
    (``{first}_vs_{second}_paired``, and ``..._cpu_paired`` in process CPU time). Each side's cold first call,
    wall and CPU medians are kept as ``warm_median_time`` keeps them."""
    keys = list(fns)
    times: dict = {k: ([], []) for k in keys}
    outs: dict = {}
    for k in keys:
        start = time.perf_counter()
        fns[k]()
        r[f"{k}_cold_s"] = time.perf_counter() - start
    for _ in range(reps):
        for k in keys:
            outs[k] = None  # the previous result is freed outside the timer
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            outs[k] = fns[k]()
            times[k][0].append(time.perf_counter() - start)
            times[k][1].append(time.process_time() - start_cpu)
    a, b = keys
    r[f"{a}_vs_{b}_paired"] = statistics.median(x / y for x, y in zip(times[a][0], times[b][0]))
    r[f"{a}_vs_{b}_cpu_paired"] = statistics.median(x / y for x, y in zip(times[a][1], times[b][1]))
    for k in keys:
        r[f"{k}_cpu_s"] = statistics.median(times[k][1])
    return [(statistics.median(times[k][0]), outs[k]) for k in keys]


def _loop() -> int:  # a few ms of the interpreter's allocation and dict work, as tracing does
    d = {}
    for i in range(20000):
        d[i] = (i, str(i))
    return len(d)


def quiet_cpu(out: dict) -> int | None:
    """The allowed CPU where ``_loop`` runs fastest (best of three per CPU), or None where affinity cannot be set
    or only one CPU is allowed. Records each CPU's best time in ``out["cpu_loop_ms"]``."""
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None
    best = {}
    _loop()  # the first run grows the heap: not any CPU's time
    try:
        for cpu in allowed:
            os.sched_setaffinity(0, {cpu})
            times = []
            for _ in range(3):
                start = time.perf_counter()
                _loop()
                times.append(time.perf_counter() - start)
            best[cpu] = min(times)
    finally:
        os.sched_setaffinity(0, allowed)
    out["cpu_loop_ms"] = {c: round(t * 1e3, 2) for c, t in best.items()}
    return min(best, key=best.get)


QUIET_WITHIN = 1.15  # a CPU whose loop took at most this times the fastest CPU's is quiet


def quiet_set(out: dict) -> set | None:
    """The CPUs of ``out["cpu_loop_ms"]`` (``quiet_cpu``) within ``QUIET_WITHIN`` of the fastest (None without)."""
    loops = out.get("cpu_loop_ms")
    if not loops:
        return None
    fastest = min(loops.values())
    return {c for c, t in loops.items() if t <= fastest * QUIET_WITHIN}


def _threads() -> list[int]:
    try:
        return [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:  # no procfs: the calling thread only
        return [0]


@contextlib.contextmanager
def pinned(cpus, all_threads: bool = False):
    """Run the block on ``cpus`` (one CPU or a set; None: as the scheduler pleases), then give each thread its
    allowed set back. ``all_threads``: every thread of the process, not only the calling one (``sched_setaffinity``
    sets one thread's mask; XLA's compile threads exist before the block)."""
    if cpus is None:
        yield
        return
    mask = {cpus} if isinstance(cpus, int) else set(cpus)
    before = {}
    for tid in (_threads() if all_threads else [0]):
        try:
            before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, mask)
        except OSError:  # a thread that ended meanwhile
            before.pop(tid, None)
    try:
        yield
    finally:
        for tid, allowed in before.items():
            try:
                os.sched_setaffinity(tid, allowed)
            except OSError:
                pass


D = 32  # feature width: small, so the front half dominates, not XLA's compile of big constants


def _tp_block(tp, x, w, k, idx, i):
    """One block of mixed ops on x: (B, D) float32. Returns x of the same shape."""
    h = x @ w                                                   # matmul
    h = tp.softmax(h, dim=-1) * float(D)                         # softmax
    n = x.shape[1] // 2                                          # a dimension read from the input
    left, right = h[:, :n], h[:, n:]                             # slices with a shape-derived bound
    h = tp.concatenate([right, left], dim=1)
    m = tp.mean(h, dim=1, keepdim=True)                          # reductions
    v = tp.max(h, dim=1, keepdim=True)
    h = (h - m) / (v + 1.0)
    img = tp.reshape(h, (-1, 1, 4, D // 4))                       # conv over a reshaped view
    img = tp.permute(img, (0, 1, 3, 2))
    img = tp.permute(k(img), (0, 1, 3, 2))
    h = tp.reshape(img, (-1, D))
    g = tp.gather(h, 1, idx)                                     # gather
    q = tp.cast(tp.cast(g, tp.float16), tp.float32)              # casts
    return tp.tanh(q) + x * (0.5 + 0.01 * (i % 7))               # a constant per block


def _jax_block(jnp, jax, x, w, kw, idx, i):
    h = x @ w
    h = jax.nn.softmax(h, axis=-1) * float(D)
    n = x.shape[1] // 2
    left, right = h[:, :n], h[:, n:]
    h = jnp.concatenate([right, left], axis=1)
    m = jnp.mean(h, axis=1, keepdims=True)
    v = jnp.max(h, axis=1, keepdims=True)
    h = (h - m) / (v + 1.0)
    img = jnp.reshape(h, (-1, 1, 4, D // 4))
    img = jnp.transpose(img, (0, 1, 3, 2))
    img = jax.lax.conv_general_dilated(img, kw, (1, 1), "SAME")
    img = jnp.transpose(img, (0, 1, 3, 2))
    h = jnp.reshape(img, (-1, D))
    g = jnp.take(h, idx, axis=1)
    q = g.astype(jnp.float16).astype(jnp.float32)
    return jnp.tanh(q) + x * (0.5 + 0.01 * (i % 7))


def programs(blocks: int):
    import jax
    import jax.numpy as jnp

    import tripy_lab as tp

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((D, D)) / np.sqrt(D)).astype(np.float32)
    kw = (rng.standard_normal((1, 1, 3, 3)) / 3).astype(np.float32)
    idx = rng.permutation(D).astype(np.int32)

    def f_tp(x):
        tw, tidx = tp.Tensor(w), tp.Tensor(idx)
        conv = tp.Conv(1, 1, (3, 3), padding=((1, 1), (1, 1)), bias=False)
        conv.weight = tp.Tensor(kw)
        for i in range(blocks):
            x = _tp_block(tp, x, tw, conv, tidx, i)
        return x

    def f_jax(x):
        for i in range(blocks):
            x = _jax_block(jnp, jax, x, w, kw, idx, i)
        return x

    return f_tp, f_jax


def measure(target_ops: int, reps: int, max_build_ops: int, cpu: int | None = None, build_cpus=None) -> dict:
    import jax

    import tripy_lab as tp
    from tripy_lab import pipeline

    probe_tp, _ = programs(1)
    per_block = len(pipeline.trace(probe_tp, args=[tp.InputInfo(((1, 8, 16), D), tp.float32)]).trace.ops)
    blocks = max(1, round(target_ops / per_block))
    f_tp, f_jax = programs(blocks)
    info = tp.InputInfo(((1, 8, 16), D), tp.float32)
    x = np.random.default_rng(1).standard_normal((8, D)).astype(np.float32)
    r = {"target_ops": target_ops, "blocks": blocks}
    reps_here = reps if target_ops <= 20000 else max(1, min(reps, 2))

    def ours():
        return pipeline.trace(f_tp, args=[info]).lower()

    def jax_lower():
        jax.clear_caches()
        return jax.jit(f_jax).lower(x)

    with pinned(cpu):  # both sides single-threaded Python: the same CPU for each pair (module docstring)
        (t_ours, lowered), (t_jax, _) = paired_median_times({"trace_lower": ours, "jax_lower": jax_lower},
                                                            reps_here, r)
    r["pinned_cpu"] = cpu
    r["trace_ops"] = len(lowered.traced.trace.ops)
    r["mlir_ops"] = len(lowered.program.ops())
    r["trace_s"], r["lower_s"] = lowered.traced.seconds, lowered.seconds
    r["trace_lower_s"], r["jax_lower_s"] = t_ours, t_jax
    r["trace_lower_vs_jax_lower"] = r["trace_lower_vs_jax_lower_paired"]  # the median of the per-rep ratios
    r["trace_lower_us_per_op"] = t_ours / r["trace_ops"] * 1e6
    r["trace_lower_cpu_vs_jax_lower_cpu"] = r["trace_lower_vs_jax_lower_cpu_paired"]  # both single-threaded
    r["trace_lower_cpu_us_per_op"] = r["trace_lower_cpu_s"] / r["trace_ops"] * 1e6

    if r["trace_ops"] <= max_build_ops:
        builds, compiles, parts = [], [], []
        for _ in range(max(1, reps_here)):
            fresh()
            with pinned(build_cpus, all_threads=True):
                start = time.perf_counter()
                built = lowered.build(engine="xla", shapes="opt")
                builds.append(time.perf_counter() - start)
            # where a build's time went: its StableHLO emission and its XLA compile (key, load, compile)
            parts.append([(round(b.lower_s, 3), round(b.compile_s, 3)) for b in built.compiled.executables().values()])
            del built
            fresh()
            jl = jax.jit(f_jax).lower(x)
            with pinned(build_cpus, all_threads=True):
                start = time.perf_counter()
                jl.compile()
                compiles.append(time.perf_counter() - start)
            del jl
        r["build_cpus"] = sorted(build_cpus) if build_cpus is not None else None
        r["xla_build_reps_s"], r["jax_compile_reps_s"] = [round(b, 3) for b in builds], [round(c, 3) for c in compiles]
        r["xla_build_lower_compile_reps_s"] = parts
        r["xla_build_s"], r["jax_compile_s"] = statistics.median(builds), statistics.median(compiles)
        # each rep builds, then compiles: the median of the per-rep ratios (a load change hits both)
        r["xla_build_vs_jax_compile"] = statistics.median(b / c for b, c in zip(builds, compiles))
        r["xla_build_us_per_op"] = r["xla_build_s"] / r["trace_ops"] * 1e6
    return r


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--sizes", default="1000,10000,80000")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--max-build-ops", type=int, default=20000)
    p.add_argument("--json", default=None)
    p.add_argument("--no-pin", action="store_true", help="leave the pairs and the builds to the scheduler's CPUs")
    a = p.parse_args(argv)
    import jax

    out = {"jax": jax.__version__, "device": str(jax.devices()[0].device_kind), "machine": platform.machine(),
           "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "load_average_before": os.getloadavg()[0], "sizes": []}
    cpu = None if a.no_pin else quiet_cpu(out)
    build_cpus = None if cpu is None else quiet_set(out)
    out["pinned_cpu"], out["build_cpus"] = cpu, sorted(build_cpus) if build_cpus is not None else None
    for size in [int(s) for s in a.sizes.split(",")]:
        r = measure(size, a.reps, a.max_build_ops, cpu, build_cpus)
        out["sizes"].append(r)
        print(json.dumps(r), flush=True)
    sizes = out["sizes"]
    per_op = [s["trace_lower_us_per_op"] for s in sizes]
    out["per_op_growth"] = per_op[-1] / per_op[0]
    out["per_op_us"] = {s["trace_ops"]: {"trace_lower": round(s["trace_lower_us_per_op"], 1),
                                         "trace_lower_cpu": round(s["trace_lower_cpu_us_per_op"], 1),
                                         "jax_lower": round(s["jax_lower_s"] / s["trace_ops"] * 1e6, 1),
                                         "xla_build": round(s["xla_build_us_per_op"], 1) if "xla_build_s" in s
                                         else None}
                        for s in sizes}
    out["goals"] = {
        "trace_lower <= 0.5x jax lower (every size)": all(s["trace_lower_vs_jax_lower"] <= 0.5 for s in sizes),
        "xla build <= 1.2x jax compile (every built size)":
            all(s["xla_build_vs_jax_compile"] <= 1.2 for s in sizes if "xla_build_s" in s),
        "time per op flat (largest / smallest <= 1.3)": out["per_op_growth"] <= 1.3,
    }
    out["load_average_after"] = os.getloadavg()[0]
    print(json.dumps({k: v for k, v in out.items() if k != "sizes"}, indent=1))
    if a.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(a.json, json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
