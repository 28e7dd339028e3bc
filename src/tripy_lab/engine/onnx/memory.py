"""The onnxruntime engine's memory, as onnxruntime reports it: its profiler's node events carry, in ``args``,
``output_size`` (bytes the node wrote), ``activation_size`` (bytes of its non-weight inputs) and ``parameter_size``
(bytes of the initializers it read; a weight onnxruntime pre-packed at session start no longer shows), and, where
the build has memory statistics, the CPU arena's ``mem_in_use_peak`` and ``mem_arena_held``. The weights are the
optimized model's initializers. Measured from the last profiled run (a profiling session, ``build._profiled_runs``)."""

from __future__ import annotations

from dataclasses import replace

from tripy_lab.engine.memory import MemoryUse
from tripy_lab.engine.onnx.profile import KERNEL_SUFFIX

_NODE_KEYS = ("output_size", "activation_size", "parameter_size")


def node_memory(events: list[dict]) -> dict:
    """``{"nodes": {name: {output_size, activation_size, parameter_size}}, "peak": int|None, "held": int|None}``
    from the node events of the last ``model_run`` in an onnxruntime profile."""
    runs = sorted((e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"),
                  key=lambda e: e["ts"])
    out: dict = {"nodes": {}, "peak": None, "held": None}
    if not runs:
        return out
    lo, hi = runs[-1]["ts"], runs[-1]["ts"] + runs[-1]["dur"]
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith(KERNEL_SUFFIX) or not lo <= e["ts"] <= hi:
            continue
        args = e.get("args", {})
        name = e["name"].removesuffix(KERNEL_SUFFIX)
        if name not in out["nodes"]:  # a node in a loop body runs more than once: its first event
            out["nodes"][name] = {k: int(args[k]) for k in _NODE_KEYS if str(args.get(k, "")).isdigit()}
        for key, field in (("peak", "mem_in_use_peak"), ("held", "mem_arena_held")):
            if str(args.get(field, "")).isdigit():
                out[key] = max(out[key] or 0, int(args[field]))
    return out


def initializer_bytes(model) -> int:
    """Bytes of a model's initializers (its weights and constants), from their dims and element type."""
    import math

    from onnx.helper import tensor_dtype_to_np_dtype

    total = 0
    for t in model.graph.initializer:
        total += math.prod(t.dims) * tensor_dtype_to_np_dtype(t.data_type).itemsize
    return total


def memory_use(measured: dict, shape: str, weights: int, inputs: int) -> MemoryUse:
    """The ``MemoryUse`` of a ``node_memory`` measurement at ``shape``, with the optimized model's initializer bytes
    and the run's input bytes."""
    nodes = measured["nodes"]
    outputs = sum(n.get("output_size", 0) for n in nodes.values())
    parts = {"weights (initializers)": weights, "inputs": inputs, "layer outputs (summed)": outputs}
    source = ("onnxruntime's profiler: each node's output_size and parameter_size (per layer), the session arena's "
              "peak bytes in use (the total) and bytes held; weights: the optimized model's initializers")
    if measured["peak"] is None:  # no arena statistics in this onnxruntime: the parts' sum, an upper bound
        return MemoryUse(shape, sum(parts.values()), parts, source.replace("the session arena's peak bytes in use "
                         "(the total) and bytes held", "their sum (no arena statistics here; no buffer reuse "
                         "counted)"), notes=["this onnxruntime reports no arena statistics"])
    if measured["held"] is not None:
        parts["arena held"] = measured["held"]
    return MemoryUse(shape, measured["peak"], parts, source, sums=False, total_name="arena peak in use")


def with_memory(layers: list, measured: dict) -> list:
    """The layer records with ``output_bytes`` / ``weight_bytes`` from onnxruntime's node events."""
    nodes = measured["nodes"]
    return [replace(ly, output_bytes=nodes[ly.name].get("output_size"), weight_bytes=nodes[ly.name].get(
        "parameter_size")) if ly.name in nodes else ly for ly in layers]
