"""Per-op accuracy of a GPT-2-small-sized model in fp16 (xla engine) against the float64 reference interpreter.

    python benchmarks/bench_accuracy.py [--layers 12] [--seq 16] [--engine xla] [--json out.json]

Two fresh subprocesses, so peaks don't mix (``ru_maxrss``):
  * ``model``:    the fp16 GPT of benchmarks/gpt.py (124M params, random weights), ``tp.compile`` + one run:
                  the model's own peak
  * ``accuracy``: the same, then ``lab.accuracy(exe, idx)``: every intermediate marked as an output of the
                  MLIR, built with the same engine and run once, and the same program in the reference
                  interpreter in float64; per-op table and first divergent op
Goals (issue 28): ``accuracy`` within 60 s on the 2-core CPU, its peak within 2x the model's.
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


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _model(layers: int, seq: int, engine: str):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import numpy as np
    from gpt import tripy_gpt, weights

    import tripy_lab as tp

    model = tripy_gpt(weights(np.random.default_rng(0), layers=layers), layers=layers)
    exe = tp.pipeline.trace(model, args=[tp.InputInfo((1, seq), tp.int32)]).lower().build(
        engine=engine, shapes="opt").executable()
    idx = np.random.default_rng(1).integers(0, 50257, size=(1, seq)).astype(np.int32)
    np.asarray(exe(idx).numpy())
    return exe, idx


def run(which: str, layers: int, seq: int, engine: str) -> dict:
    start = time.perf_counter()
    exe, idx = _model(layers, seq, engine)
    out = {"build_run_s": time.perf_counter() - start, "peak_model_mb": _peak_mb()}
    if which == "accuracy":
        from tripy_lab.lab.measure.accuracy_report import accuracy

        start = time.perf_counter()
        report = accuracy(exe, idx)
        table = report.table()
        first = report.first_divergent
        out.update({"accuracy_s": time.perf_counter() - start, "ops": len(table), "chunks": report.chunks,
                    "outside": int(sum(not e.within for e in report.ops)),
                    "first_divergent": f"{first.op} op {first.index} {first.user_line} module '{first.module}' "
                                       f"max_rel {first.max_rel:.3g}" if first else "none",
                    "logits_max_abs": report.ops[-1].max_abs})
    out["peak_mb"] = _peak_mb()
    return out


def _child(which: str, args) -> dict:
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    cmd = [sys.executable, __file__, "--child", which, "--layers", str(args.layers), "--seq", str(args.seq),
           "--engine", args.engine]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--engine", default="xla")
    ap.add_argument("--child", choices=["model", "accuracy"])
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run(args.child, args.layers, args.seq, args.engine)))
        return
    model, acc = _child("model", args), _child("accuracy", args)
    ratio = acc["peak_mb"] / model["peak_mb"]
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; GPT-2 small fp16, "
          f"{args.layers} layers, batch 1, seq {args.seq}, engine {args.engine}")
    print("| run | build + first run | accuracy() | peak RSS |")
    print("|---|---|---|---|")
    print(f"| model | {model['build_run_s']:.1f} s | | {model['peak_mb']:.0f} MB |")
    print(f"| model + accuracy | {acc['build_run_s']:.1f} s | {acc['accuracy_s']:.1f} s | {acc['peak_mb']:.0f} MB |")
    print(f"ops compared: {acc['ops']} in {acc['chunks']} run(s); outside tolerance: {acc['outside']}; "
          f"first divergent: {acc['first_divergent']}; logits max abs error {acc['logits_max_abs']:.3g}")
    print(f"accuracy() {acc['accuracy_s']:.1f} s (goal <= 60 s); peak accuracy / model = {ratio:.2f}x (goal <= 2x)")
    if args.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(args.json, json.dumps({"model": model, "accuracy": acc, "ratio": ratio}, indent=1))


if __name__ == "__main__":
    main()
