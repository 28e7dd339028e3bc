"""Time of onnxruntime engine calls from onnxruntime's profiler (its JSON trace), joined to the layer table.

A session built with ``enable_profiling`` records, for every ``run``, one ``model_run`` event (cat
``Session``) and, inside it, one ``<node name>_kernel_time`` event (cat ``Node``) per node executed; the
node names are those of the session's optimized graph, which are the layer table's ``LayerRecord.name``
(``OnnxRuntimeCompiled.layers``). Times are microseconds. So:

* **per call** (compute time): on the CPU provider, the span of a run's node events (first node start
  to last node end; the executor's work between nodes counts, the Python binding and the input/output
  conversion around it do not). On GPU providers a node event is the host time of its kernel launches,
  not device time, so the compute time is the ``model_run`` event (it waits for the outputs' copy to
  the host) and per-layer times are host times; ``method`` says which.
* **per layer**: a run's events of one node summed (a node of a subgraph lies inside its ``If``/``Loop``
  node's event and counts once, there), the median over the runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

KERNEL_SUFFIX = "_kernel_time"


@dataclass
class ProfiledRun:
    """One ``run`` of a profiling session: its ``model_run`` time, the span of its node events and the
    time (seconds) and event count per node name."""

    run_s: float
    span_s: float
    node_s: dict[str, float] = field(default_factory=dict)
    node_calls: dict[str, int] = field(default_factory=dict)


@dataclass
class TraceRuns:
    runs: list[ProfiledRun]
    node_info: dict[str, dict]  # node name -> {"op_name": ..., "provider": ...} from its first event


def _outermost(nodes: list[dict]) -> list[dict]:
    """Drop node events that lie inside another node event of the same thread (subgraph nodes)."""
    out = []
    by_tid: dict = {}
    for e in nodes:
        by_tid.setdefault(e.get("tid"), []).append(e)
    for evs in by_tid.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        reach = float("-inf")
        for e in evs:
            end = e["ts"] + e["dur"]
            if e["dur"] > 0 and end <= reach:
                continue
            out.append(e)
            reach = max(reach, end)
    return out


def trace_runs(events: list[dict]) -> TraceRuns:
    """The runs of an onnxruntime profile (its JSON events), in order, each with its node events."""
    runs_ev = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                     key=lambda e: e["ts"])
    nodes = sorted((e for e in events if e.get("cat") == "Node" and e.get("name", "").endswith(KERNEL_SUFFIX)),
                   key=lambda e: e["ts"])
    info: dict[str, dict] = {}
    runs: list[ProfiledRun] = []
    k = 0
    for run in runs_ev:
        lo, hi = run["ts"], run["ts"] + run["dur"]
        inside = []
        while k < len(nodes) and nodes[k]["ts"] < lo:  # before this run (none expected): skip
            k += 1
        while k < len(nodes) and nodes[k]["ts"] <= hi:
            inside.append(nodes[k])
            k += 1
        span = (max(e["ts"] + e["dur"] for e in inside) - min(e["ts"] for e in inside)) if inside else 0
        pr = ProfiledRun(run_s=run["dur"] * 1e-6, span_s=span * 1e-6)
        for e in _outermost(inside):
            name = e["name"].removesuffix(KERNEL_SUFFIX)
            pr.node_s[name] = pr.node_s.get(name, 0.0) + e["dur"] * 1e-6
            pr.node_calls[name] = pr.node_calls.get(name, 0) + 1
            if name not in info:
                args = e.get("args", {})
                info[name] = {"op_name": args.get("op_name", ""), "provider": args.get("provider", "")}
        runs.append(pr)
    return TraceRuns(runs, info)


def median_node_s(runs: list[ProfiledRun]) -> dict[str, float]:
    """node name -> seconds per run, the median over the runs (a run without the node counts 0)."""
    names = dict.fromkeys(n for r in runs for n in r.node_s)
    return {n: float(np.median([r.node_s.get(n, 0.0) for r in runs])) for n in names}
