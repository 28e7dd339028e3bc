"""Device time of xla-engine calls from jax's profiler (XLA's XPlane trace), joined to the layer table.

Every event XLA records for the work of a compiled module carries the stats ``hlo_module`` (``jit_main``
for the engine's executables) and ``hlo_op`` (the HLO instruction: the fusion, custom call or copy that
``xla_layers.layer_records`` makes a row of). On GPUs they are the CUPTI kernel/memset/memcpy events of
the device plane; on CPU the thunk executor's events on the host plane. So:

* **per call** (compute time): the events of one call, from the first start to the last end. CPU events
  carry the call's ``run_id``; GPU kernels do not, so the synchronized calls are told apart by the
  ``calls - 1`` widest gaps between kernels (each call ends in a host sync, the widest idle time).
* **per layer**: events are joined to the layer table by ``hlo_op``, or, inside a GPU command buffer
  (where ``hlo_op`` names the buffer), by kernel name and schedule order (``attribute``); a layer's
  durations in a call are summed (events nested in another event of the same thread, e.g. the body of
  a CPU ``while`` thunk, count once), and the median over the calls is its time.
"""

from __future__ import annotations

import re
import time
import warnings
from dataclasses import dataclass

import numpy as np

MODULE = "jit_main"


@dataclass(frozen=True)
class _Event:
    op: str
    name: str  # the kernel's name (GPU) or the thunk's (CPU)
    start: float
    end: float
    line: tuple[str, str]
    run_id: int | None


def _session():
    """(stop() -> ProfileData): jax's in-memory profiler session, without the Python tracer."""
    from jax._src.lib import _profiler
    from jax.profiler import ProfileData

    opts = _profiler.ProfileOptions()
    opts.python_tracer_level = 0
    sess = _profiler.ProfilerSession(opts)
    return lambda: ProfileData.from_serialized_xspace(sess.stop())


def _lines(data):
    """The trace lines that hold XLA's own events: the GPU planes' streams when there are GPU planes, else
    the host's XLA thread lines (the other host events are of no use here and cost time to convert)."""
    planes = list(data.planes)
    gpu = [p for p in planes if p.name.startswith("/device:GPU")]
    if gpu:
        return [(p, line) for p in gpu for line in p.lines]
    return [(p, line) for p in planes if p.name == "/host:CPU" for line in p.lines
            if "XLA" in line.name or "Thunk" in line.name]


def _events(data, module: str) -> list[_Event]:
    out = []
    # jaxlib's stats converter warns (DeprecationWarning: "builtin type event_stats has no __module__");
    # a warnings filter that turns it into an error would raise inside C++, which aborts the process
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for plane, line in _lines(data):
            for e in line.events:
                stats = dict(e.stats)
                op = stats.get("hlo_op")
                if not op or not str(stats.get("hlo_module", "")).startswith(module):
                    continue
                rid = stats.get("run_id")
                out.append(_Event(str(op), str(e.name), float(e.start_ns), float(e.end_ns),
                                  (plane.name, line.name), int(rid) if rid is not None else None))
    return out


def _split(events: list[_Event], calls: int) -> list[list[_Event]]:
    if not events:
        return []
    if all(e.run_id is not None for e in events):
        groups: dict[int, list[_Event]] = {}
        for e in events:
            groups.setdefault(e.run_id, []).append(e)
        return sorted(groups.values(), key=lambda g: min(e.start for e in g))
    evs = sorted(events, key=lambda e: e.start)
    gaps, reach = [], evs[0].end
    for i in range(1, len(evs)):
        gaps.append((evs[i].start - reach, i))
        reach = max(reach, evs[i].end)
    cuts = sorted(i for _, i in sorted(gaps, reverse=True)[: max(calls - 1, 0)])
    bounds = [0, *cuts, len(evs)]
    return [evs[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


def _outermost(group: list[_Event]) -> list[_Event]:
    """Drop events that lie inside another event of the same thread/stream."""
    out = []
    by_line: dict[tuple[str, str], list[_Event]] = {}
    for e in group:
        by_line.setdefault(e.line, []).append(e)
    for evs in by_line.values():
        evs.sort(key=lambda e: (e.start, -e.end))
        reach = float("-inf")
        for e in evs:
            if e.end <= reach:
                continue
            out.append(e)
            reach = max(reach, e.end)
    return out


@dataclass
class CallTimes:
    compute_s: list[float]
    op_s: dict[str, float]  # hlo op (layer name) -> seconds per call (median over the calls)
    op_count: dict[str, float]  # hlo op -> events per call
    notes: list[str]
    wall_s: list[float]  # host wall time of each profiled call() + sync()


_LIBRARY_KINDS = ("cuBLAS", "cuDNN", "custom call", "library", "attention", "Pallas")


def _sanitized(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def attribute(group: list[_Event], layers) -> list[tuple[str, _Event]]:
    """(layer name, event) for a call's events. An event's ``hlo_op`` names its layer, except inside a GPU
    command buffer (one thunk: ``hlo_op`` is the buffer), where kernels are matched to layers by name
    (XLA names a fusion's kernel after the fusion, '.' -> '_') and library kernels (cuBLAS, cuDNN and
    their memsets) go to the next library call of the layer table in schedule order."""
    names = [ly.name for ly in layers]
    known = set(names)
    by_kernel = {_sanitized(n): k for k, n in enumerate(names)}
    library = [any(s in ly.kind for s in _LIBRARY_KINDS) for ly in layers]
    sig = [(ly.kind, ly.output_shapes, ly.output_dtypes) for ly in layers]
    out: list[tuple[str, _Event]] = []
    nxt, lib_at, lib_has_kernel = 0, None, False
    taken: set[int] = set()
    for e in sorted(group, key=lambda e: e.start):
        if e.op in known:
            out.append((e.op, e))
            continue
        k = by_kernel.get(_sanitized(e.name))
        if k is None:  # e.g. gemm_fusion_dot_52 for gemm_fusion_dot.52 with a kernel-index suffix
            base = re.sub(r"_\d+$", "", _sanitized(e.name))
            k = by_kernel.get(base) if base != _sanitized(e.name) else None
        if k is not None:
            if k in taken:  # XLA reuses one kernel for identical fusions (repeated layers): take the next twin
                k = next((i for i in range(nxt, len(names)) if sig[i] == sig[k] and i not in taken), k)
            taken.add(k)
            out.append((names[k], e))
            nxt, lib_at = k + 1, None
            continue
        memset = e.name.lower().startswith("memset") or e.name.lower().startswith("memcpy")
        if lib_at is None or lib_has_kernel:  # memsets come before their call's kernel
            start = nxt if lib_at is None else lib_at + 1
            lib_at = next((i for i in range(start, len(names)) if library[i]), None)
            lib_has_kernel = False
            if lib_at is None:
                out.append((e.op, e))
                continue
            nxt = lib_at + 1
        lib_has_kernel = lib_has_kernel or not memset
        out.append((names[lib_at], e))
    return out


def profile_calls(call, sync, calls: int, layers=(), module: str = MODULE) -> CallTimes | None:
    """Run ``call(); sync()`` ``calls`` times under the profiler. None when no profiler session can start
    (another one is active) or the trace holds no events of ``module``."""
    try:
        stop = _session()
    except Exception:  # another profiler session is active, or this jaxlib lacks the in-memory session
        return None
    wall = []
    try:
        for _ in range(calls):
            t0 = time.perf_counter()
            call()
            sync()
            wall.append(time.perf_counter() - t0)
            time.sleep(0)  # the sync is the gap that separates calls in the device trace
    finally:
        data = stop()
    groups = _split(_events(data, module), calls)
    if not groups:
        return None
    notes = []
    if len(groups) != calls:
        notes.append(f"the trace splits into {len(groups)} groups of events for {calls} calls")
    compute = [(max(e.end for e in g) - min(e.start for e in g)) * 1e-9 for g in groups]
    per_call: list[dict[str, float]] = []
    op_n: dict[str, float] = {}
    for g in groups:
        times: dict[str, float] = {}
        for op, e in attribute(_outermost(g), layers):
            times[op] = times.get(op, 0.0) + (e.end - e.start) * 1e-9
            op_n[op] = op_n.get(op, 0.0) + 1.0 / len(groups)
        per_call.append(times)
    # the median call's share of each op: robust to a call that a busy host preempted
    op_s = {op: float(np.median([t.get(op, 0.0) for t in per_call])) for op in op_n}
    return CallTimes(compute, op_s, op_n, notes, wall if len(groups) == calls else [])
