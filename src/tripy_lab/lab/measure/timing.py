"""Timing without widgets: ``benchmark(exe, ...)`` and ``compare(...)`` return pandas DataFrames.

Inputs are generated from the Executable's InputInfos at the min, opt or max bounds (or shapes you
give). Like trtexec, a row reports the engine's *compute time* (measured by the engine: device time
on GPUs), the *latency* of one synchronized call (host wall time) and the *throughput* of calls
queued back to back, as separate columns (see ``benchmark``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import Any

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException

COLUMNS = ["label", "engine", "opt_level", "shape", "warmup", "iters", "compute_ms", "latency_ms", "latency_p10_ms",
           "latency_p90_ms", "latency_mean_ms", "latency_std_ms", "back_to_back_ms", "throughput_per_s",
           "compute_method", "error"]
POINTS = ("min", "opt", "max")


def shapes_at(infos: dict, point: str | dict) -> dict[str, Any]:
    """name -> shape tuple (tensors) or int (DimensionInputInfo), at "min"/"opt"/"max" or given explicitly.

    A dict gives shapes per parameter; missing parameters take opt.
    """
    out: dict[str, Any] = {}
    for name, info in infos.items():
        if isinstance(point, dict) and name in point:
            value = point[name]
            if isinstance(info, DimensionInputInfo):
                out[name] = int(value)
            else:
                out[name] = tuple(value) if isinstance(value, (tuple, list)) else (int(value),)
            continue
        which = point if isinstance(point, str) else "opt"
        if which not in POINTS:
            raise TripyException(
                f"Invalid shape point: {which!r}.", ["Expected 'min', 'opt', 'max' or a dict."]
            )
        if isinstance(info, DimensionInputInfo):
            out[name] = getattr(info.value_bounds, which)[0]
        else:
            out[name] = tuple(getattr(info.shape_bounds, which))
    return out


def shape_label(shapes: dict[str, Any]) -> str:
    parts = []
    for name, s in shapes.items():
        parts.append(
            f"{name}={s}" if isinstance(s, int) else f"{name}=" + ("x".join(map(str, s)) or "scalar")
        )
    return " ".join(parts)


def make_inputs(infos: dict, shapes: dict[str, Any], seed: int = 0) -> dict[str, Any]:
    """Random arrays of each InputInfo's dtype at ``shapes``; DimensionInputInfos get their int value."""
    rng = np.random.default_rng(seed)
    out: dict[str, Any] = {}
    for name, info in infos.items():
        if isinstance(info, DimensionInputInfo):
            out[name] = int(shapes[name])
            continue
        shape = tuple(shapes[name])
        npdt = dtypes.to_numpy(info.dtype)
        if info.dtype is dtypes.bool:
            out[name] = rng.random(shape) > 0.5
        elif issubclass(info.dtype, dtypes.integer):
            out[name] = rng.integers(0, 4, size=shape).astype(npdt)
        else:
            out[name] = rng.standard_normal(shape).astype(np.float32).astype(npdt)
    return out


def sweep_points(infos: dict, n: int = 5) -> tuple[list[dict], str, list[int], int | None]:
    """Shapes from min to max along every dynamic dim at once (NamedDimensions stay equal).

    Returns (shape dicts, x label, x values, x at opt): x is the first dynamic dim's size.
    """
    dynamic = [
        (name, i)
        for name, info in infos.items()
        if isinstance(info, InputInfo)
        for i, (lo, hi) in enumerate(zip(info.shape_bounds.min, info.shape_bounds.max))
        if lo != hi
    ]
    dynamic += [
        (name, None)
        for name, info in infos.items()
        if isinstance(info, DimensionInputInfo) and info.value_bounds.min != info.value_bounds.max
    ]
    if not dynamic:
        return [shapes_at(infos, "opt")], "static", [0], 0
    points, xs = [], []
    for k in range(n):
        t = k / max(n - 1, 1)
        shapes: dict[str, Any] = {}
        for name, info in infos.items():
            if isinstance(info, DimensionInputInfo):
                b = info.value_bounds
                shapes[name] = round(b.min[0] + t * (b.max[0] - b.min[0]))
            else:
                b = info.shape_bounds
                shapes[name] = tuple(round(lo + t * (hi - lo)) for lo, hi in zip(b.min, b.max))
        name, i = dynamic[0]
        x = shapes[name] if i is None else shapes[name][i]
        if x in xs:
            continue
        points.append(shapes)
        xs.append(x)
    name, i = dynamic[0]
    opt = shapes_at(infos, "opt")[name]
    return points, (name if i is None else f"{name}[{i}]"), xs, (opt if i is None else opt[i])


def time_calls(
    exe, inputs: dict[str, Any], warmup: int = 10, iters: int = 100, max_seconds: float = 10.0
) -> list[float]:
    """Latency: seconds per call, each call synchronized (host wall time), after ``warmup`` untimed calls;
    stops early past ``max_seconds``."""
    for _ in range(warmup):
        exe(**inputs)
    exe.synchronize()
    times: list[float] = []
    budget_end = time.perf_counter() + max_seconds
    for _ in range(iters):
        start = time.perf_counter()
        exe(**inputs)
        exe.synchronize()
        times.append(time.perf_counter() - start)
        if time.perf_counter() > budget_end:
            break
    return times


BACK_TO_BACK_BATCHES = 3
BACK_TO_BACK_MIN_S = 0.2  # per batch: the first call's dispatch and the final sync are not overlapped, so
# a short batch reads high; trtexec also times throughput over a span. H200, a 0.76 ms GEMM chain: batches of
# 10 / 30 / 50 / 150 / 400 calls read 0.89 / 0.82 / 0.77 / 0.76 / 0.76 ms per call (about 1.3 ms per batch)


def time_back_to_back(exe, inputs: dict[str, Any], calls: int, per_call_s: float = 0.0) -> float:
    """Seconds per call of calls queued back to back, one synchronize at the end of each batch: the median
    of ``BACK_TO_BACK_BATCHES`` batches of at least ``calls`` calls each, more (up to 10x) when
    ``per_call_s`` (a latency estimate) says a batch would take under ``BACK_TO_BACK_MIN_S``."""
    n = max(calls, 1)
    if per_call_s > 0:
        n = min(10 * n, max(n, math.ceil(BACK_TO_BACK_MIN_S / per_call_s)))
    samples = []
    for _ in range(BACK_TO_BACK_BATCHES):
        exe.synchronize()
        start = time.perf_counter()
        for _ in range(n):
            exe(**inputs)
        exe.synchronize()
        samples.append((time.perf_counter() - start) / n)
    return float(np.median(samples))


def resident_inputs(exe, inputs: dict[str, Any]) -> dict[str, Any]:
    """The inputs uploaded once to the engine's device (so calls time the engine, not host copies)."""
    compiled = exe._compiled
    return {n: compiled.to_device(v) if isinstance(exe.input_infos.get(n), InputInfo) else v
            for n, v in inputs.items()}


def profile_engine(exe, inputs: dict[str, Any], calls: int = 10):
    """The engine's own measurement of ``calls`` calls (``EngineProfile``: compute time per call, time per
    layer); kept as the engine's ``last_profile`` for the Engine tab and ``tripy_lab.lab.profile``."""
    compiled = exe._compiled
    prof = compiled.profile(exe.engine_args(**inputs), calls)
    compiled.last_profile = prof
    return prof


def summarize(times: list[float]) -> dict[str, float]:
    """Latency statistics (ms) of synchronized calls."""
    ms = np.asarray(times) * 1e3
    return {
        "latency_ms": float(np.median(ms)),
        "latency_p10_ms": float(np.percentile(ms, 10)),
        "latency_p90_ms": float(np.percentile(ms, 90)),
        "latency_mean_ms": float(ms.mean()),
        "latency_std_ms": float(ms.std()),
    }


def _exe_meta(exe) -> tuple[str, Any]:
    built = getattr(exe, "stages", {}).get("built")
    return getattr(exe, "engine", "?"), getattr(built, "optimization_level", None)


def measure(exe, inputs: dict[str, Any], warmup: int = 10, iters: int = 100, max_seconds: float = 10.0,
            profile_calls: int = 20) -> dict[str, Any]:
    """One row's numbers: latency statistics, back-to-back time and throughput, compute time (median)."""
    inputs = resident_inputs(exe, inputs)
    times = time_calls(exe, inputs, warmup, iters, max_seconds)
    row: dict[str, Any] = {"iters": len(times), **summarize(times)}
    row["back_to_back_ms"] = time_back_to_back(exe, inputs, len(times), float(np.median(times))) * 1e3
    row["throughput_per_s"] = 1e3 / row["back_to_back_ms"] if row["back_to_back_ms"] > 0 else float("inf")
    # compute right after the back-to-back batches: a GPU's clocks depend on the work of the last second
    if profile_calls:
        prof = profile_engine(exe, inputs, min(profile_calls, max(len(times), 1)))
        row["compute_ms"] = float(np.median(prof.compute_s)) * 1e3
        row["compute_method"] = prof.method
    else:
        row["compute_ms"], row["compute_method"] = float("nan"), "not measured"
    return row


def _rows(exe, points: Iterable, warmup: int, iters: int, label: str, max_seconds: float,
          profile_calls: int = 20) -> list[dict]:
    engine, level = _exe_meta(exe)
    rows = []
    for point in points:
        shapes = shapes_at(exe.input_infos, point)
        row = {
            "label": label,
            "engine": engine,
            "opt_level": level,
            "shape": shape_label(shapes),
            "warmup": warmup,
            "iters": 0,
            "compute_method": "",
            "error": "",
        }
        try:
            row.update(measure(exe, make_inputs(exe.input_infos, shapes), warmup, iters, max_seconds,
                               profile_calls))
        except TripyException as exc:
            row["error"] = exc.summary
        row["label"] = f"{label} {point if isinstance(point, str) else row['shape']}".strip()
        rows.append(row)
    return rows


def benchmark(
    exe, shapes: Any = POINTS, warmup: int = 10, iters: int = 100, label: str = "", max_seconds: float = 10.0,
    profile_calls: int = 20,
):
    """Time ``exe`` at each of ``shapes`` ("min"/"opt"/"max" or {param: shape} dicts) -> DataFrame.

    What each column measures (inputs are uploaded to the engine's device once, before timing):

    * ``compute_ms``: median time of the engine's work per call, measured by the engine (xla: the XLA
      profiler's device trace, GPU kernels or CPU thunks; reference: the interpreter's wall time;
      onnxruntime: wall time of its session's run) over ``profile_calls`` calls; ``compute_method``
      says how. On a GPU (xla) those calls run back to back after 0.2 s of sustained calls, like
      trtexec's compute time: a GPU lowers its clocks under sustained work, and synchronized calls with
      idle gaps between them would read the faster clocks of a rested GPU.
    * ``latency_ms`` (and ``latency_p10_ms`` ... ``latency_std_ms``): host wall time of one call followed
      by ``synchronize()``, over ``iters`` calls after ``warmup``.
    * ``back_to_back_ms``: wall time per call of calls queued back to back with one synchronize at the
      end: the median of 3 batches of ``iters`` calls, or more (up to 10x, a batch of at least 200 ms) when
      calls are short, so the batch's first dispatch and last sync are spread thin;
      ``throughput_per_s`` = 1000 / ``back_to_back_ms``.
    * ``error``: why a row failed to run (its numbers are NaN).

    The notebook shows shape, compute, latency p50/p90 and throughput with the method as a footnote;
    ``.full()`` shows every column.
    """
    from tripy_lab.lab.tables import TimingFrame  # shown with the lab's table style, the columns people read

    points = [shapes] if isinstance(shapes, (str, dict)) else list(shapes)
    return TimingFrame(_rows(exe, points, warmup, iters, label, max_seconds, profile_calls), columns=COLUMNS)


def _compile_config(config: dict):
    from tripy_lab import pipeline

    traced = pipeline.trace(config["func"], args=config.get("args", ()), kwargs=config.get("kwargs"))
    built = traced.lower().build(
        engine=config.get("engine"), optimization_level=config.get("optimization_level", 3)
    )
    return built.executable()


def compare(*items, shapes: Any = "opt", warmup: int = 10, iters: int = 100, max_seconds: float = 10.0,
            profile_calls: int = 20):
    """Time several Executables (or configs) side by side -> DataFrame with a ``build_ms`` column.

    Each item is an Executable, a ``(label, Executable)`` pair, or a config dict
    ``{"func": f, "args": [...], "engine": "xla", "optimization_level": 3, "label": "..."}``
    that is compiled here (so engines, optimization levels or bounds can be compared).
    """
    from tripy_lab.lab.tables import TimingFrame

    rows = []
    points = [shapes] if isinstance(shapes, (str, dict)) else list(shapes)
    for k, item in enumerate(items):
        label = f"#{k}"
        if isinstance(item, tuple):
            label, item = item
        build_ms = None
        if isinstance(item, dict):
            label = item.get("label", label)
            start = time.perf_counter()
            item = _compile_config(item)
            build_ms = (time.perf_counter() - start) * 1e3
        elif item.stages.get("built") is not None:
            build_ms = item.stages["built"].seconds * 1e3
        for row in _rows(item, points, warmup, iters, label, max_seconds, profile_calls):
            row["build_ms"] = build_ms
            rows.append(row)
    return TimingFrame(rows, columns=[*COLUMNS[:3], "build_ms", *COLUMNS[3:]])
