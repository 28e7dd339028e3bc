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
# a library kernel's family, read from its name (cuDNN's are checked first: their names hold "gemm" words too)
_CUDNN = re.compile(r"cudnn|sdpa|fmha|flash", re.I)
_CUBLAS = re.compile(r"nvjet|gemm|gemv|cublas|cutlass|xmma|splitk", re.I)
_CONTINUES = re.compile(r"splitkreduce", re.I)  # a cuBLAS call's second kernel (the split-K sum)


def _sanitized(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _layer_family(kind: str) -> str:
    return "cudnn" if "cuDNN" in kind else ("cublas" if "cuBLAS" in kind else "other")


def _kernel_family(name: str) -> str:
    return "cudnn" if _CUDNN.search(name) else ("cublas" if _CUBLAS.search(name) else "other")


def attribute(group: list[_Event], layers) -> list[tuple[str, _Event]]:
    """(layer name, event) for a call's events. An event's ``hlo_op`` names its layer, except inside a GPU
    command buffer (one thunk: ``hlo_op`` is the buffer), where kernels are matched to layers by name
    (XLA names a fusion's kernel after the fusion, '.' -> '_'; one kernel shared by identical fusions goes
    to each of them in turn) and library kernels go to the next library call of their family (cuBLAS,
    cuDNN, other) in the layer table's schedule order; memsets go with the kernel that follows them."""
    names = [ly.name for ly in layers]
    known = set(names)
    by_kernel = {_sanitized(n): k for k, n in enumerate(names)}
    family = [_layer_family(ly.kind) if any(s in ly.kind for s in _LIBRARY_KINDS) else None for ly in layers]
    sig = [(ly.kind, ly.output_shapes, ly.output_dtypes) for ly in layers]
    n = len(names)
    out: list[tuple[str, _Event]] = []
    nxt, last_lib = 0, None  # last_lib: (layer index, family) of the library call the last kernel went to
    taken: set[int] = set()
    pending: list[_Event] = []  # memsets waiting for the kernel they belong to
    last_of: dict[str, int] = {}  # library family -> the layer its last kernel went to

    def after(start, ok):  # the first index from ``start`` on (then from the top) that ``ok`` accepts
        return next((i for i in (*range(start, n), *range(0, start)) if ok(i)), None)

    def place(k, e):
        out.extend((names[k], m) for m in pending)
        pending.clear()
        out.append((names[k], e))

    for e in sorted(group, key=lambda e: e.start):
        if e.op in known:
            out.append((e.op, e))
            continue
        k = by_kernel.get(_sanitized(e.name))
        if k is None:  # e.g. gemm_fusion_dot_52 for gemm_fusion_dot.52 with a kernel-index suffix
            base = re.sub(r"_\d+$", "", _sanitized(e.name))
            k = by_kernel.get(base) if base != _sanitized(e.name) else None
        if k is not None:
            if k in taken:  # XLA reuses one kernel for identical fusions (repeated layers): the next twin
                twin = after(nxt, lambda i, k=k: sig[i] == sig[k] and i not in taken and family[i] is None)
                k = k if twin is None else twin
            taken.add(k)
            place(k, e)
            nxt, last_lib = k + 1, None
            continue
        low = e.name.lower()
        if low.startswith("memset") or low.startswith("memcpy"):
            pending.append(e)
            continue
        fam = _kernel_family(e.name)
        if last_lib is not None and last_lib[1] == "cublas" and not pending and _CONTINUES.search(e.name):
            place(last_lib[0], e)  # split-K: the same cuBLAS call's second kernel
            continue
        start = nxt if last_lib is None else last_lib[0] + 1
        k = after(start, lambda i, fam=fam: family[i] == fam and i not in taken)
        if k is None:  # more kernels than calls of this library (a call of two kernels): the one before,
            k = last_of.get(fam)  # so the surplus never shifts the kernels of another library
        if k is None:
            out.extend((m.op, m) for m in pending)
            pending.clear()
            out.append((e.op, e))
            continue
        taken.add(k)
        place(k, e)
        nxt, last_lib, last_of[fam] = k + 1, (k, fam), k
    out.extend((m.op, m) for m in pending)
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
