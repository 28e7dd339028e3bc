"""lab.tune on Dask: 16 build configs of a GPT-2-small-sized model (benchmarks/gpt.py), 1 vs 2 worker processes.

    python benchmarks/bench_tune.py [--workers 1,2] [--layers 12] [--json out.json]
    python benchmarks/bench_tune.py --gpu --json out.json        # the H200: one GPU worker
    (--levels 0,3 --opts 256,1024 --seq 64,512,1024 --batch 1,8,8 shrink the space or change the shapes)

CPU mode: the same sweep (xla, optimization levels 0-3 x four opt points of the sequence length) on a
LocalCluster of 1, then 2 worker processes (one thread each, each with its own private caches, so every config
is a cold build); the timing per config is short, so the sweep is build-bound. Goal: >= 1.6x with 2 workers
(needs 2 idle cores).

GPU mode (``--gpu``): one worker process with a ``GPU`` resource (one config at a time on the device); after the
sweep, the same configs are built and timed alone in this process; goal: each config's compute time within 5 %
of its time alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the worker and this process share the GPU

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gpt  # noqa: E402

import tripy_lab as tp  # noqa: E402


def model_and_args(layers: int, vocab: int, batch: tuple, seq: tuple):
    model = gpt.tripy_gpt(gpt.weights(np.random.default_rng(0), layers=layers, vocab=vocab), layers=layers,
                          vocab=vocab)
    args = [tp.InputInfo(shape=(batch, seq), dtype=tp.int32)]
    return model, args


def space(levels: list[int], opts: list[int], batch_opt: int) -> dict:
    return {"engine": ["xla"], "optimization_level": levels,
            "opt": [{"idx": (batch_opt, t)} for t in opts]}


def sweep(model, args, sp, workers: int, timing: dict, gpu: bool = False, reference: str = "reference"):
    from distributed import Client, LocalCluster

    from tripy_lab import lab

    extra = {"resources": {"GPU": 1}} if gpu else {}
    start = time.perf_counter()
    with LocalCluster(n_workers=workers, processes=True, threads_per_worker=1, dashboard_address=":0",
                      **extra) as cluster, Client(cluster) as client:
        client.wait_for_workers(workers)
        up = time.perf_counter() - start
        start = time.perf_counter()
        result = lab.tune(model, args, sp, client=client, timing=timing, progress=False, reference=reference)
        seconds = time.perf_counter() - start
    return result, up, seconds


def alone(model, args, result, timing: dict, reference: str) -> list[dict]:
    """Each config built and timed in this process, alone (``--gpu``)."""
    from tripy_lab.lab import tune_task
    from tripy_lab.lab.measure import timing as lab_timing

    func, fargs = model, args
    ref = tune_task.reference(func, fargs, engine=reference)
    out = []
    for row, config in zip(result.rows, result.configs):
        exe = tune_task.build(func, fargs, config)
        t = lab_timing.measure(exe, tune_task.cast_inputs(exe, ref["inputs"]), **timing)
        ratio = row["compute_ms"] / t["compute_ms"] if t["compute_ms"] else float("nan")
        out.append({"config": row["config"], "sweep_compute_ms": row["compute_ms"], "alone_compute_ms":
                    t["compute_ms"], "ratio": ratio})
        print(f"  {row['config']:<40} sweep {row['compute_ms']:.4g} ms  alone {t['compute_ms']:.4g} ms  "
              f"ratio {ratio:.3f}", flush=True)
    return out


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--gpu", action="store_true", help="one GPU worker; compare with the configs timed alone")
    p.add_argument("--workers", default="1,2", help="CPU mode: worker process counts to compare")
    p.add_argument("--layers", type=int, default=gpt.L)
    p.add_argument("--vocab", type=int, default=gpt.V)
    p.add_argument("--json", default=None)
    p.add_argument("--levels", default=None, help="optimization levels, e.g. 0,3 (default: 0,1,2,3; --gpu 0,3,4,5)")
    p.add_argument("--opts", default=None, help="opt sequence lengths (default: 8,16,24,32; --gpu 128,256,512,1024)")
    p.add_argument("--seq", default=None, help="sequence min,opt,max (default: 8,16,32; --gpu 64,512,1024)")
    p.add_argument("--batch", default=None, help="batch min,opt,max (default: 1,1,1; --gpu 1,8,8)")
    a = p.parse_args(argv)
    import cloudpickle

    cloudpickle.register_pickle_by_value(gpt)  # the workers need not find benchmarks/ on their path
    if a.gpu:
        batch, seq, levels, opts, bopt = (1, 8, 8), (64, 512, 1024), [0, 3, 4, 5], [128, 256, 512, 1024], 8
        timing = {"warmup": 10, "iters": 50, "max_seconds": 5.0, "profile_calls": 20}
    else:
        batch, seq, levels, opts, bopt = (1, 1, 1), (8, 16, 32), [0, 1, 2, 3], [8, 16, 24, 32], 1
        timing = {"warmup": 1, "iters": 3, "max_seconds": 0.5, "profile_calls": 2}  # build-bound
    ints = lambda text: [int(v) for v in text.split(",")]  # noqa: E731
    levels = ints(a.levels) if a.levels else levels
    opts = ints(a.opts) if a.opts else opts
    seq = tuple(ints(a.seq)) if a.seq else seq
    batch = tuple(ints(a.batch)) if a.batch else batch
    bopt = batch[1]
    model, args = model_and_args(a.layers, a.vocab, batch, seq)
    sp = space(levels, opts, bopt)
    report: dict = {"mode": "gpu" if a.gpu else "cpu", "layers": a.layers, "vocab": a.vocab,
                    "configs": len(levels) * len(opts), "cpus": os.cpu_count(), "load_avg": os.getloadavg(),
                    "runs": []}
    counts = [1] if a.gpu else [int(n) for n in a.workers.split(",")]
    for n in counts:
        # on the GPU the inputs are large (B8, T512): the fp32 reference runs on xla, not the numpy interpreter
        reference = "xla" if a.gpu else "reference"
        result, up, seconds = sweep(model, args, sp, n, timing, gpu=a.gpu, reference=reference)
        df = result.table
        run = {"workers": n, "sweep_s": seconds, "cluster_start_s": up, "rows": len(df),
               "failed": int((df["error"] != "").sum()), "build_s_sum": float(df["build_s"].sum()),
               "workers_used": sorted(set(df["worker"])), "load_avg": os.getloadavg(),
               "table": df[["config", "build_s", "compute_ms", "max_abs_err", "passed", "worker", "error"]]
               .to_dict("records")}
        report["runs"].append(run)
        print(f"{n} worker(s): {len(df)} configs in {seconds:.1f} s (builds sum {run['build_s_sum']:.1f} s, "
              f"{run['failed']} failed; cluster start {up:.1f} s; load {os.getloadavg()[0]:.1f})", flush=True)
        if a.gpu:
            run["alone"] = alone(model, args, result, timing, reference)
            worst = max(abs(r["ratio"] - 1) for r in run["alone"])
            run["worst_compute_deviation"] = worst
            print(f"worst compute-time deviation from alone: {worst * 100:.1f} % (goal <= 5 %)")
    if len(report["runs"]) >= 2:
        report["speedup"] = report["runs"][0]["sweep_s"] / report["runs"][-1]["sweep_s"]
        print(f"speed-up {counts[0]} -> {counts[-1]} workers: {report['speedup']:.2f}x (goal >= 1.6x)")
    if a.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(a.json, json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
