"""Device time of xla-engine calls from jax's profiler (XLA's XPlane trace), joined to the layer table.

Every event XLA records for the work of a compiled module carries the stats ``hlo_module`` (``jit_main``
for the engine's executables) and ``hlo_op`` (the HLO instruction: the fusion, custom call or copy that
``layers.layer_records`` makes a row of). On GPUs they are the CUPTI kernel/memset/memcpy events of
the device plane; on CPU the thunk executor's events on the host plane. So:

* **per call** (compute time): the events of one call, from the first start to the last end. CPU events
  carry the call's ``run_id``. On GPUs the calls run back to back after sustained work (the clocks the
  back-to-back throughput sees) and are cut apart by their kernel count; without a cut, synchronized calls
  are told apart by the ``calls - 1`` widest gaps between kernels (each ends in a host sync).
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

from tripy_lab.engine.xla.split import HEAD_NAME, HEAD_PREFIX

MODULE = "jit_main"
HEAD_MODULE = "jit_" + HEAD_NAME


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
                hlo_module = str(stats.get("hlo_module", ""))
                if not op or not hlo_module.startswith(module):
                    continue
                if hlo_module.startswith(HEAD_MODULE):  # a split signature's second executable (``split``)
                    op = HEAD_PREFIX + str(op)
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
        runs = sorted(groups.values(), key=lambda g: min(e.start for e in g))
        per_call = len(runs) // calls if calls else 1
        if per_call > 1 and len(runs) == per_call * calls:  # one run per executable: a split signature has two
            runs = [sum(runs[i:i + per_call], []) for i in range(0, len(runs), per_call)]
        return runs
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
    wall_s: list[float]  # host wall time of each profiled call() + sync() (back to back: each call's period)
    back_to_back: bool = False  # the calls ran back to back, after sustained work (GPUs)


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


SUSTAIN_S = 0.2  # GPUs: seconds of back-to-back calls before the timed ones (``profile_calls``)
SUSTAIN_MAX_CALLS = 2000  # ... at most this many (a host-bound program: the trace stays small)


def _split_back_to_back(events: list[_Event], total: int, keep: int) -> list[list[_Event]] | None:
    """The last ``keep`` of ``total`` calls queued back to back (no idle gap marks where one ends), cut by
    their kernel count: an executable launches the same kernels in the same order every call. None when the
    count does not divide or a kept call's kernel names differ from the first kept call's."""
    if not events or total < keep or len(events) % total:
        return None
    evs = sorted(events, key=lambda e: e.start)
    k = len(evs) // total
    groups = [evs[(total - keep + i) * k:(total - keep + i + 1) * k] for i in range(keep)]
    first = [e.name for e in groups[0]]
    return groups if all([e.name for e in g] == first for g in groups[1:]) else None


def _sustained(stop, call, sync, calls: int, sustain_s: float, module: str):
    """(groups, per-call periods) of ``calls`` calls run back to back after ``sustain_s`` seconds of the
    same calls, in the profiler session that ``stop`` ends; None when the trace cannot be cut into calls."""
    try:
        warm, end = 0, time.perf_counter() + sustain_s
        while time.perf_counter() < end and warm < SUSTAIN_MAX_CALLS:
            call()
            warm += 1
        for _ in range(calls):
            call()
        sync()
    finally:
        data = stop()
    groups = _split_back_to_back(_events(data, module), warm + calls, calls)
    if groups is None:
        return None
    starts = [min(e.start for e in g) for g in groups]
    ends = [max(e.end for e in g) for g in groups]
    periods = [(b - a) * 1e-9 for a, b in zip(starts, starts[1:])] + [(ends[-1] - starts[-1]) * 1e-9]
    return groups, periods


def profile_calls(call, sync, calls: int, layers=(), module: str = MODULE,
                  sustain_s: float = 0.0) -> CallTimes | None:
    """Run ``call(); sync()`` ``calls`` times under the profiler. None when no profiler session can start
    (another one is active) or the trace holds no events of ``module``.

    ``sustain_s`` > 0 (GPUs): the calls run back to back, after ``sustain_s`` seconds of back-to-back calls,
    as trtexec times its compute: a GPU under sustained work lowers its clocks to its power cap (an H200 ran
    a GEMM chain at 1980 MHz in synchronized calls, 0.74 ms each, and at 1400-1500 MHz back to back, 0.85 ms),
    so only calls timed in that state agree with the back-to-back throughput. ``wall_s`` then holds each
    call's period on the device (its first kernel to the next call's). If the trace cannot be cut into
    calls, synchronized calls are timed instead, with a note."""
    notes = []
    if sustain_s > 0:
        try:
            stop = _session()
        except Exception:  # another profiler session is active, or this jaxlib lacks the in-memory session
            return None
        cut = _sustained(stop, call, sync, calls, sustain_s, module)  # the call's own errors propagate
        if cut is not None:
            return _call_times(cut[0], calls, layers, notes, cut[1], True)
        notes.append("back-to-back calls could not be told apart in the trace: synchronized calls timed instead")
    try:
        stop = _session()
    except Exception:
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
    if len(groups) != calls:
        notes.append(f"the trace splits into {len(groups)} groups of events for {calls} calls")
    return _call_times(groups, calls, layers, notes, wall if len(groups) == calls else [], False)


def _call_times(groups, calls: int, layers, notes: list[str], wall: list[float], back_to_back: bool) -> CallTimes:
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
    wait = _head_wait(groups)
    if wait is not None and wait > 0.05 * float(np.median(compute)):
        notes.append(f"the device waited {wait * 1e6:.0f} us a call between the body's last kernel and the head's "
                     "first (xla_split: the host launches the head after the body, here faster on the device than "
                     "that launch); compute time includes the wait, no layer does")
    return CallTimes(compute, op_s, op_n, notes, wall, back_to_back)


def _head_wait(groups) -> float | None:
    """Median seconds a call's device idles between a split signature's body and head (None: not split)."""
    waits = []
    for g in groups:
        body = [e.end for e in g if not e.op.startswith(HEAD_PREFIX)]
        head = [e.start for e in g if e.op.startswith(HEAD_PREFIX)]
        if body and head:
            waits.append(max(0.0, (min(head) - max(body)) * 1e-9))
    return float(np.median(waits)) if waits else None
