"""GPU clocks in synchronized vs back-to-back calls (H200 diagnostic; the GEMM chain of tests/gpu):

    python benchmarks/gpu_clocks.py

Samples ``nvidia-smi`` every 20 ms while the chain runs back to back (input of ones, then random) and
while the lab times it, and prints each phase's time per call with the SM clock and the throttle reasons
seen (0x4: software power cap). A GPU at its power cap runs slower clocks than a rested one, which is why
the xla engine times compute from sustained back-to-back calls (``xla_profile.SUSTAIN_S``)."""

import os
import subprocess
import threading
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
import jax
import numpy as np

import tripy_lab as tp
from tripy_lab.lab import benchmark
from tripy_lab.lab.measure.timing import time_back_to_back

QUERY = "--query-gpu=clocks.sm,power.draw,clocks_event_reasons.active"
samples: list[tuple[float, list[str]]] = []


def sample(stop: threading.Event) -> None:
    proc = subprocess.Popen(["nvidia-smi", QUERY, "--format=csv,noheader,nounits", "-lms", "20"],
                            stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:
            samples.append((time.perf_counter(), [f.strip() for f in line.split(",")]))
            if stop.is_set():
                break
    finally:
        proc.kill()
        proc.wait()


def phase(name: str, fn) -> None:
    t0 = time.perf_counter()
    result = fn()
    seen = [s for t, s in samples if t0 <= t <= time.perf_counter()]
    clocks = [int(s[0]) for s in seen if s[0].isdigit()]
    reasons = sorted({s[2] for s in seen if len(s) > 2})
    print(f"{name}: {result} | SM clock median {np.median(clocks) if clocks else '-'} MHz over "
          f"{len(clocks)} samples, throttle reasons {reasons}", flush=True)


def back_to_back(exe, x, n: int):
    return lambda: f"{time_back_to_back(exe, {'x': x}, n) * 1e3:.4f} ms/call (median of 3 batches of {n})"


def gemm_chain(x, w):
    for _ in range(4):
        x = x @ w
    return x


def main() -> None:
    stop = threading.Event()
    threading.Thread(target=sample, args=(stop,), daemon=True).start()
    time.sleep(0.5)
    w = (np.random.default_rng(1).standard_normal((4096, 4096)) / 64).astype(np.float16)
    exe = tp.compile(gemm_chain, args=[tp.InputInfo((4096, 4096), tp.float16), tp.Tensor(w)], engine="xla")
    ones = jax.device_put(np.ones((4096, 4096), np.float16))
    rnd = jax.device_put(np.random.default_rng(2).standard_normal((4096, 4096)).astype(np.float16))
    phase("warm-up", back_to_back(exe, ones, 150))
    for name, x in (("ones", ones), ("random", rnd)) * 2:
        phase(f"{name}, back to back", back_to_back(exe, x, 250))

    def synchronized():
        times = []
        for _ in range(30):
            start = time.perf_counter()
            exe(rnd)
            exe.synchronize()
            times.append(time.perf_counter() - start)
            time.sleep(0.005)
        return f"{np.median(times) * 1e3:.4f} ms/call (latency)"

    phase("synchronized calls, 5 ms apart", synchronized)
    row = benchmark(exe, shapes="opt", warmup=5, iters=30).iloc[0]
    phase("lab benchmark()", lambda: {k: round(float(row[k]), 4)
                                      for k in ("compute_ms", "latency_ms", "back_to_back_ms")})
    stop.set()


if __name__ == "__main__":
    main()
