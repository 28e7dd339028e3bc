"""What the host and the device do between back-to-back calls (GPU; the GEMM chain of tests/gpu):

    python benchmarks/gpu_call_gaps.py

Prints the device's gaps over 20 us in 30 back-to-back calls, the host events that overlap them, and the
device span per call (to compare with the lab's compute and back-to-back columns)."""
import collections
import os
import warnings

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax
import numpy as np

import tripy_lab as tp
from tripy_lab.engine.xla.profile import _session


def gemm_chain(x, w):
    for _ in range(4):
        x = x @ w
    return x

w = (np.random.default_rng(1).standard_normal((4096, 4096)) / 64).astype(np.float16)
exe = tp.compile(gemm_chain, args=[tp.InputInfo((4096, 4096), tp.float16), tp.Tensor(w)], engine="xla")
x = jax.device_put(np.ones((4096, 4096), np.float16))
for _ in range(300):
    exe(x)
exe.synchronize()
stop = _session()
for _ in range(30):
    exe(x)
exe.synchronize()
data = stop()
warnings.simplefilter("ignore")
dev, host = [], []
for p in data.planes:
    for line in p.lines:
        for e in line.events:
            rec = (float(e.start_ns), float(e.end_ns), str(e.name)[:70], p.name[:20], line.name[:30])
            (dev if p.name.startswith("/device:GPU") else host).append(rec)
dev.sort()
kern = [d for d in dev if "Stream" in d[4] or "stream" in d[4]] or dev
print("device lines:", collections.Counter(d[4] for d in dev).most_common(8))
gaps = []
reach = kern[0][1]
for d in kern[1:]:
    if d[0] - reach > 20e3:
        gaps.append((reach, d[0]))
    reach = max(reach, d[1])
print(len(gaps), "device gaps > 20 us; sizes (us):", [round((b - a) / 1e3) for a, b in gaps[:12]])
print("kernel sequence of one call:", [d[2][:30] for d in kern[:8]])
inside = collections.Counter()
for a, b in gaps:
    for h in host:
        if h[0] < b and h[1] > a and (h[1] - h[0]) < 5e6:
            inside[(h[2], h[4])] += min(h[1], b) - max(h[0], a)
for (n, ln), t in inside.most_common(25):
    print(f"  {t / len(gaps) / 1e3:8.1f} us/gap  {n!r} [{ln}]")
span = (kern[-1][1] - kern[0][0]) / 30 / 1e3
print("device span per call", round(span, 1), "us")
