"""The GPT's profile build on the GPU, each point compiled alone and together (H200):

    python benchmarks/bench_build_points.py

Builds with a fresh persistent cache and cleared jax caches: opt alone and the three profile points
(twice each, after a warm-up build), then each point's static signature alone, tuned and untuned, so
the build notes show whether concurrent compiles slow each other or one point is the critical path.

    python benchmarks/bench_build_points.py --timeline

instead prints when each signature lowers and compiles (and a split signature's body and head) in builds of opt
alone and of the three points, under the build orders and split-compile modes of ``TIMELINE_VARIANTS``."""

import argparse
import math
import os
import sys
import threading
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402
from bench_gpu import fresh_build  # noqa: E402

import tripy_lab as tp  # noqa: E402
from tripy_lab import pipeline  # noqa: E402
from tripy_lab.engine.xla import build as xla  # noqa: E402
from tripy_lab.engine.xla import split as xla_split  # noqa: E402


def _largest_first(self, wanted):  # the seventh session's order
    return sorted(range(len(wanted)), key=lambda i: -sum(math.prod(s) for s in wanted[i][0]))


# name: (XlaCompiled._lowering_order, xla_split.PARALLEL_UNTUNED, xla.UNTUNED)
TIMELINE_VARIANTS = {
    "largest first, split parts one after the other, untuned Triton GEMMs":
        (_largest_first, False, {"xla_gpu_autotune_level": 0}),
    "tuned first, split parts one after the other, untuned Triton GEMMs":
        (xla.XlaCompiled._lowering_order, False, {"xla_gpu_autotune_level": 0}),
    "tuned first, untuned split parts at once, untuned Triton GEMMs":
        (xla.XlaCompiled._lowering_order, True, {"xla_gpu_autotune_level": 0}),
    "defaults (tuned first, untuned split parts at once, untuned GEMMs on cuBLAS)":
        (xla.XlaCompiled._lowering_order, True, dict(xla.UNTUNED)),
}


def timeline(profile) -> None:
    events, start = [], [0.0]

    def wrap(cls, name, label):
        real = getattr(cls, name)

        def timed(self, *a, **k):
            t = time.perf_counter()
            try:
                return real(self, *a, **k)
            finally:
                events.append((round(t - start[0], 3), round(time.perf_counter() - start[0], 3),
                               threading.current_thread().name, label(a, k)))
        setattr(cls, name, timed)
        return real

    reals = [(xla.XlaCompiled, "_lower", wrap(xla.XlaCompiled, "_lower", lambda a, k: f"lower {a[0]}")),
             (xla.XlaCompiled, "_compile", wrap(xla.XlaCompiled, "_compile",
                                                lambda a, k: f"compile {a[2]} untuned={k.get('untuned')}")),
             (xla_split.SplitLowered, "_compile", wrap(xla_split.SplitLowered, "_compile",
                                                       lambda a, k: f"  split {a[0]}"))]
    order, untuned = xla.XlaCompiled._lowering_order, dict(xla.UNTUNED)
    try:
        fresh(profile, "opt")  # warm-up
        for name, (how, parallel, options) in TIMELINE_VARIANTS.items():
            xla.XlaCompiled._lowering_order, xla_split.PARALLEL_UNTUNED = how, parallel
            xla.UNTUNED.clear()
            xla.UNTUNED.update(options)
            took = {}
            for shapes in ("opt", "profile"):
                events.clear()
                start[0] = time.perf_counter()
                took[shapes] = fresh(profile, shapes)[0]
                for e in sorted(events):
                    print(f"    {shapes:8s} {e[0]:6.3f}-{e[1]:6.3f} s  {e[2]:24s} {e[3]}")
            print(f"{name}: opt alone {took['opt']} s, three points {took['profile']} s: "
                  f"{took['profile'] / took['opt']:.2f}x", flush=True)
    finally:
        for cls, name, real in reals:
            setattr(cls, name, real)
        xla.XlaCompiled._lowering_order, xla_split.PARALLEL_UNTUNED = order, True
        xla.UNTUNED.clear()
        xla.UNTUNED.update(untuned)


def fresh(lowered, shapes):
    built, seconds = fresh_build(lowered, shapes)
    return round(seconds, 3), [n for n in built.report.notes if n.startswith("built")]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--timeline", action="store_true")
    a = p.parse_args()
    model = gpt.tripy_gpt(gpt.weights(np.random.default_rng(0)))
    profile = pipeline.trace(model, args=[tp.InputInfo(((1, 4, 8), (1, 256, 1024)), tp.int32)]).lower()
    if a.timeline:
        return timeline(profile)
    print("warm-up", fresh(profile, "opt"), flush=True)
    for _ in range(2):
        alone, _notes = fresh(profile, "opt")
        both, notes = fresh(profile, "profile")
        print(f"opt alone {alone} s, three points {both} s: {both / alone:.2f}x", notes, flush=True)
    statics = {bt: pipeline.trace(model, args=[tp.InputInfo(bt, tp.int32)]).lower()
               for bt in ((8, 1024), (4, 256), (1, 1))}
    old = dict(xla.OPT_LEVEL_OPTIONS[3])
    try:
        for name, options in (("tuned", old), ("untuned", {**old, **xla.UNTUNED})):
            xla.OPT_LEVEL_OPTIONS[3] = options
            for bt, lowered in statics.items():
                print(name, bt, fresh(lowered, "opt"), flush=True)
    finally:
        xla.OPT_LEVEL_OPTIONS[3] = old


if __name__ == "__main__":
    main()
