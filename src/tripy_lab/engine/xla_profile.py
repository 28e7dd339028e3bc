"""Device time of xla-engine calls from jax's profiler (XLA's XPlane trace), joined to the layer table.

Every event XLA records for the work of a compiled module carries the stats ``hlo_module`` (``jit_main``
for the engine's executables) and ``hlo_op`` (the HLO instruction: the fusion, custom call or copy that
``xla_layers.layer_records`` makes a row of). On GPUs they are the CUPTI kernel/memset/memcpy events of
the device plane; on CPU the thunk executor's events on the host plane. So:

* **per call** (compute time): the events of one call, from the first start to the last end. CPU events
  carry the call's ``run_id``; GPU kernels do not, so the synchronized calls are told apart by the
  ``calls - 1`` widest gaps between kernels (each call ends in a host sync, the widest idle time).
* **per layer**: the durations of a layer's events in a call summed (events nested in another event of
  the same thread, e.g. the body of a CPU ``while`` thunk, are counted once), the median over the calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

MODULE = "jit_main"


@dataclass(frozen=True)
class _Event:
    op: str
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


def _events(data, module: str) -> list[_Event]:
    out = []
    for plane in data.planes:
        for line in plane.lines:
            for e in line.events:
                stats = dict(e.stats)
                op = stats.get("hlo_op")
                if not op or not str(stats.get("hlo_module", "")).startswith(module):
                    continue
                rid = stats.get("run_id")
                out.append(_Event(str(op), float(e.start_ns), float(e.end_ns), (plane.name, line.name),
                                  int(rid) if rid is not None else None))
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
    op_s: dict[str, float]  # hlo op -> mean seconds per call
    op_count: dict[str, float]  # hlo op -> events per call
    notes: list[str]


def profile_calls(call, sync, calls: int, module: str = MODULE) -> CallTimes | None:
    """Run ``call(); sync()`` ``calls`` times under the profiler. None when no profiler session can start
    (another one is active) or the trace holds no events of ``module``."""
    try:
        stop = _session()
    except Exception:  # another profiler session is active, or this jaxlib lacks the in-memory session
        return None
    try:
        for _ in range(calls):
            call()
            sync()
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
        for e in _outermost(g):
            times[e.op] = times.get(e.op, 0.0) + (e.end - e.start) * 1e-9
            op_n[e.op] = op_n.get(e.op, 0.0) + 1.0 / len(groups)
        per_call.append(times)
    # the median call's share of each op: robust to a call that a busy host preempted
    op_s = {op: float(np.median([t.get(op, 0.0) for t in per_call])) for op in op_n}
    return CallTimes(compute, op_s, op_n, notes)
