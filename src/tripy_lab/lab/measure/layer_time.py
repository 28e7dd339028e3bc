"""Per-layer time: ``profile(exe)`` -> DataFrame, and the user's source lines shaded by their share.

The engine measures (``CompiledEngine.profile``): the xla engine joins the XLA profiler's kernel (GPU)
or thunk (CPU) events to its layer table by HLO instruction name; the reference engine times each MLIR
op; the onnxruntime engine joins its profiler's node events to its layer table by node name. A layer's
time goes to its source ops (split evenly when a fused kernel does the work of several), and from there
to the user lines they were traced at, which is what the shaded source shows, like ``%%cython -a`` does
for C code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tripy_lab.lab.html import esc
from tripy_lab.lab.measure import timing

COLUMNS = ["layer", "kind", "module", "time_ms", "share", "memory", "source_ops", "source_lines", "kernel",
           "mlir_ops"]


def profile(exe, shapes: str | dict = "opt", calls: int = 20, warmup: int = 3):
    """Time ``exe`` at ``shapes`` and return its layer table with a time per layer -> DataFrame.

    Columns: layer, kind, module, time_ms (median per call), share (of the median compute time), memory (a
    layer's outputs + the weights it reads, where the engine knows them), source_ops,
    source_lines, kernel, mlir_ops; ``df.attrs`` holds ``compute_ms``, ``layers_ms`` (the layer times
    summed), ``method`` (how the engine measured) and ``shape``.
    """
    point = timing.shapes_at(exe.input_infos, shapes)
    inputs = timing.resident_inputs(exe, timing.make_inputs(exe.input_infos, point))
    for _ in range(warmup):
        exe(**inputs)
    exe.synchronize()
    prof = timing.profile_engine(exe, inputs, calls)
    df = layer_times_frame(prof)
    df.attrs["shape"] = timing.shape_label(point)
    return df


def layer_times_frame(prof):
    from tripy_lab.engine.memory import fmt_bytes, layer_bytes
    from tripy_lab.lab.tables import LayerTimes  # a DataFrame with .to_trace(path); pandas loads here

    compute = float(np.median(prof.compute_s)) if prof.compute_s else float("nan")
    rows = []
    for ly in prof.layers:
        t = prof.layer_s.get(ly.name, 0.0)
        rows.append({"layer": ly.name, "kind": ly.kind, "module": ly.module, "time_ms": t * 1e3,
                     "share": t / compute if compute > 0 else float("nan"), "memory": fmt_bytes(layer_bytes(ly)),
                     "source_ops": " ".join(ly.source_ops), "source_lines": " ".join(ly.source_lines),
                     "kernel": ly.kernel, "mlir_ops": ",".join(map(str, ly.mlir_ops))})
    df = LayerTimes(rows, columns=COLUMNS)
    df.attrs.update(compute_ms=compute * 1e3, layers_ms=sum(prof.layer_s.values()) * 1e3, method=prof.method,
                    calls_ms=[c * 1e3 for c in prof.compute_s])
    return df


def line_times(prof, program) -> dict[tuple[str, int], float]:
    """(file, line) -> seconds per call: each layer's time split over its source ops, then their lines."""
    out: dict[tuple[str, int], float] = {}
    for ly in prof.layers:
        t = prof.layer_s.get(ly.name, 0.0)
        ops = [o for o in ly.source_ops if o]
        if not t or not ops:
            continue
        for name in ops:
            origin = program.origins.get(name)
            loc = origin.location if origin else None
            if loc is None:
                continue
            key = (loc.file, loc.line)
            out[key] = out.get(key, 0.0) + t / len(ops)
    return out


def source_heat_html(prof, program, context: int = 2) -> str:
    """The user's source lines that did engine work, shaded by their share of the layer time."""
    import linecache

    from tripy_lab.core.source import SourceLocation

    times = line_times(prof, program)
    total = sum(prof.layer_s.values())
    if not times or total <= 0:
        return ""
    parts = []
    for file in dict.fromkeys(f for f, _ in times):
        nums = sorted(n for f, n in times if f == file)
        lo, hi = max(1, nums[0] - context), nums[-1] + context
        name = SourceLocation(file, lo, "").short.rsplit(":", 1)[0]
        rows = []
        for n in range(lo, hi + 1):
            code = linecache.getline(file, n).rstrip("\n")
            if not code and n > nums[-1]:
                break
            t = times.get((file, n), 0.0)
            share = t / total
            bg = f"rgba(234,88,12,{0.08 + 0.8 * share:.3f})" if t else "transparent"
            cell = f"{t * 1e3:.3g} ms · {share:.0%}" if t else ""
            rows.append(f"<tr style='background:{bg}'><td style='color:#6b7280;text-align:right;padding-right:6px'>"
                        f"{n}</td><td><pre style='margin:0'>{esc(code) or ' '}</pre></td>"
                        f"<td style='text-align:right;padding-left:12px;white-space:nowrap'>{cell}</td></tr>")
        parts.append(f"<div style='font-size:12px;margin-top:6px'><b>{esc(name)}</b>"
                     f"<table class='tripy-source-heat' style='font-size:11px;border-collapse:collapse'>"
                     f"{''.join(rows)}</table></div>")
    return "".join(parts)


def summary(prof) -> dict[str, Any]:
    compute = float(np.median(prof.compute_s)) * 1e3 if prof.compute_s else float("nan")
    return {"compute_ms": compute, "layers_ms": sum(prof.layer_s.values()) * 1e3, "method": prof.method,
            "calls": len(prof.compute_s)}
