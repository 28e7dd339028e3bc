"""Host cost per argument of a jitted call on this device (python benchmarks/bench_call_args.py): N small
device-resident arguments vs the same values packed into one argument; back-to-back and latency, µs."""
import statistics
import time

import jax
import numpy as np


def timed(fn, n=200, reps=7):
    out = fn()
    jax.block_until_ready(out)
    lat, b2b = [], []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            out = fn()
        jax.block_until_ready(out)
        b2b.append((time.perf_counter() - t) / n)
        t = time.perf_counter()
        jax.block_until_ready(fn())
        lat.append(time.perf_counter() - t)
    return statistics.median(b2b) * 1e6, statistics.median(lat) * 1e6


dev = jax.devices()[0]
x = jax.device_put(np.ones((128, 768), np.float16), dev)
for n_args in (1, 8, 32, 76, 152):
    ws = [jax.device_put(np.full((768,), 0.001 * i, np.float16), dev) for i in range(n_args)]

    def f(x, *ws):
        for w in ws:
            x = x * w
        return x

    j = jax.jit(f)
    flat = jax.device_put(np.concatenate([np.asarray(w) for w in ws]), dev)

    def g(x, flat, n=n_args):
        for i in range(n):
            x = x * flat[i * 768:(i + 1) * 768]
        return x

    jg = jax.jit(g)
    sep = timed(lambda j=j, ws=ws: j(x, *ws))
    packed = timed(lambda jg=jg, flat=flat: jg(x, flat))
    print(f"{dev.platform} args={n_args:4d}: separate back-to-back {sep[0]:.1f} us, latency {sep[1]:.1f} us; "
          f"packed {packed[0]:.1f} us, {packed[1]:.1f} us", flush=True)
