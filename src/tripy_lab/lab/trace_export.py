"""A timing run as a Chrome / Perfetto trace (``lab.profile(exe).to_trace(path)``), which ui.perfetto.dev and
chrome://tracing open.

What the engine measured is a compute time per profiled call and a median time per layer; the order and overlap
of layers inside one call are not recorded. So each call is one slice of its measured compute time, and its
layers are laid end to end inside it in table order, each as long as its median time (the args say so).
"""

from __future__ import annotations

import json
import math

PID, CALLS_TID, LAYERS_TID = 1, 1, 2


def chrome_trace(df, title: str = "tripy-lab") -> dict:
    """The trace events (JSON object format, times in µs) of a ``profile()`` frame."""
    calls_ms = [float(c) for c in df.attrs.get("calls_ms") or [df.attrs.get("compute_ms", float("nan"))]]
    method, shape = df.attrs.get("method", ""), df.attrs.get("shape", "")
    events: list[dict] = [
        {"ph": "M", "pid": PID, "name": "process_name", "args": {"name": f"{title} {shape}".strip()}},
        {"ph": "M", "pid": PID, "tid": CALLS_TID, "name": "thread_name", "args": {"name": "calls (compute)"}},
        {"ph": "M", "pid": PID, "tid": LAYERS_TID, "name": "thread_name",
         "args": {"name": "layers (median time each, in table order)"}},
    ]
    start = 0.0
    for k, call_ms in enumerate(calls_ms):
        dur = call_ms * 1e3 if math.isfinite(call_ms) else 0.0
        events.append({"ph": "X", "pid": PID, "tid": CALLS_TID, "name": f"call {k}", "cat": "call", "ts": start,
                       "dur": dur, "args": {"compute_ms": call_ms, "method": method, "shape": shape}})
        t = start
        for row in df.to_dict("records"):
            layer_us = float(row["time_ms"]) * 1e3
            if not math.isfinite(layer_us) or layer_us <= 0:
                continue
            events.append({"ph": "X", "pid": PID, "tid": LAYERS_TID, "name": str(row["layer"]), "cat": str(row["kind"]),
                           "ts": t, "dur": layer_us,
                           "args": {"kind": row["kind"], "time_ms (median)": row["time_ms"],
                                    "source_ops": row["source_ops"], "source_lines": row["source_lines"],
                                    "kernel": row["kernel"]}})
            t += layer_us
        start = max(start + dur, t) + 10.0  # a 10 µs gap between calls keeps them apart on the timeline
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"tool": "tripy-lab", "method": method, "shape": shape,
                          "note": "per-layer slices are median times laid end to end; the in-call order is not "
                                  "measured"}}


def write_trace(df, path, title: str = "tripy-lab") -> str:
    """Write the trace JSON to ``path`` atomically; returns the path."""
    import os

    from tripy_lab.core.cache import write_atomic

    path = os.fspath(path)
    write_atomic(path, json.dumps(chrome_trace(df, title), default=str).encode())
    return path
