"""The GPT's profile build on the GPU, each point compiled alone and together (H200):

    python benchmarks/bench_build_points.py

Builds with a fresh persistent cache and cleared jax caches: opt alone and the three profile points
(twice each, after a warm-up build), then each point's static signature alone, tuned and untuned, so
the build notes show whether concurrent compiles slow each other or one point is the critical path."""

import os
import sys

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpt  # noqa: E402
from bench_gpu import fresh_build  # noqa: E402

import tripy_lab as tp  # noqa: E402
from tripy_lab import pipeline  # noqa: E402
from tripy_lab.engine import xla  # noqa: E402


def fresh(lowered, shapes):
    built, seconds = fresh_build(lowered, shapes)
    return round(seconds, 3), [n for n in built.report.notes if n.startswith("built")]


def main() -> None:
    model = gpt.tripy_gpt(gpt.weights(np.random.default_rng(0)))
    profile = pipeline.trace(model, args=[tp.InputInfo(((1, 4, 8), (1, 256, 1024)), tp.int32)]).lower()
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
