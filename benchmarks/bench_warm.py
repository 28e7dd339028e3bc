"""Warm-up on the GPT (benchmarks/gpt.py, the tp.split spelling): the first call at shapes inside the profile that
were not built, cold and after ``exe.warm()``, against the same shape's steady call (each synchronized):

    python benchmarks/bench_warm.py [--layers 12] [--json out.json]

Goal: after warm-up, a first call within 2x its steady call (issue 31).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_gpu  # noqa: E402
import gpt  # noqa: E402

import tripy_lab as tp  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=gpt.L)
    p.add_argument("--json")
    a = p.parse_args()
    import jax

    rng = np.random.default_rng(0)
    params = gpt.weights(rng, layers=a.layers)
    model = gpt.tripy_gpt(params, split_qkv=True, layers=a.layers)
    exe = tp.compile(model, args=[tp.InputInfo(((1, 4, 8), (1, 256, 1024)), tp.int32)], engine="xla")
    r = bench_gpu.warm_up_rows(exe, rng, jax.devices()[0])
    r.update(device=str(jax.devices()[0].device_kind), date=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))
    print(json.dumps(r, indent=1))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(r, fh, indent=1)


if __name__ == "__main__":
    main()
