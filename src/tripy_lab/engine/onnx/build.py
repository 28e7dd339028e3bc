"""The ``onnxruntime`` engine: the program lowered to ONNX (``lowering``) and run by ONE
``onnxruntime.InferenceSession`` for the whole profile: every shape inside the InputInfo bounds runs
without another build (the xla engine compiles once per new shape).

``optimization_level`` -> ``SessionOptions.graph_optimization_level``
====== ==================================================================================
level  onnxruntime graph optimization
====== ==================================================================================
0      ``ORT_DISABLE_ALL``: the ONNX graph as lowered, node for node
1      ``ORT_ENABLE_BASIC``: constant folding, redundant-node elimination
2      ``ORT_ENABLE_EXTENDED``: plus fusions (Gelu, LayerNorm, MatMul+Add, attention ...)
3-5    ``ORT_ENABLE_ALL`` (3 is the default, as in onnxruntime): plus layout optimizations.
       onnxruntime has no level above it, so 4 and 5 build the same session as 3.
====== ==================================================================================

Providers: ``TensorrtExecutionProvider`` when onnxruntime-gpu offers it and ``tensorrt`` imports (its
optimization profile is the InputInfo bounds: ``trt_profile_min_shapes`` / ``trt_profile_opt_shapes`` /
``trt_profile_max_shapes``; never run by us), else ``CUDAExecutionProvider`` when offered, then CPU.

``run`` takes numpy arrays or anything ``np.asarray`` reads (device arrays are copied to the host) and
returns host numpy arrays on every provider (no IOBinding of device buffers yet).

The layer table comes from the session's optimized model (``optimized_model_filepath``, its initializers written
to a file of their own so the graph stays small; both are read at once and their folder removed, so a process that
ends without finalizers leaves nothing in the temp folder): one row per node
after onnxruntime's fusions; a fused node names every MLIR op (hence trace op and user line) whose tensors
lie between its inputs and outputs. ``profile()`` (the lab's timing runs) and ``layer_times()`` run a
second, profiling session and join onnxruntime's per-node kernel times to those rows (``profile``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.base import (
    BuildOptions,
    BuildReport,
    CompiledEngine,
    Engine,
    EngineProfile,
    LayerRecord,
    opt_inputs,
    with_modules,
)

OPT_LEVELS = {0: "ORT_DISABLE_ALL", 1: "ORT_ENABLE_BASIC", 2: "ORT_ENABLE_EXTENDED", 3: "ORT_ENABLE_ALL",
              4: "ORT_ENABLE_ALL", 5: "ORT_ENABLE_ALL"}
# Idle worker threads sleep instead of spinning on machines this small: on a shared 2-core notebook CPU
# spinning threads fight the threads that do the work (GPT-2 small on a loaded 2-core VM: 1289 -> 644 ms per
# call). Above it onnxruntime's default (spinning) stays: a sleeping pool wakes once per parallel node, which
# costs a many-core machine more than it saves.
SLEEP_AT_OR_BELOW_CPUS = 4
_NODE_IN_ERROR = re.compile(r"(?:Name:|node with name )'([^']*)'")


def profile_shapes(program) -> dict[str, str]:
    """TensorRT EP profile options from the InputInfo bounds: ``{"trt_profile_min_shapes": "x:1x6,..."}``."""
    out = {}
    for point in ("min", "opt", "max"):
        parts = []
        for name, info in program.input_infos.items():
            if isinstance(info, InputInfo):
                parts.append(f"{name}:" + "x".join(str(d) for d in getattr(info.shape_bounds, point)))
        out[f"trt_profile_{point}_shapes"] = ",".join(parts)
    return out


def choose_providers(program) -> list:
    import onnxruntime as ort

    available = ort.get_available_providers()
    providers: list = []
    if "TensorrtExecutionProvider" in available and importlib.util.find_spec("tensorrt") is not None:
        providers.append(("TensorrtExecutionProvider", profile_shapes(program)))
    if "CUDAExecutionProvider" in available:
        providers.append("CUDAExecutionProvider")
    providers.append("CPUExecutionProvider")
    return providers


_CARRIER_NP = {"bf16": np.float32, "f8E4M3FN": np.float32, "f4E2M1FN": np.float32, "i4": np.int8}


def _read_or_none(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:  # onnxruntime wrote no optimized model: the layer table falls back to the lowered one
        return None


class OnnxRuntimeCompiled(CompiledEngine):
    def __init__(self, program, options: BuildOptions):
        import onnx
        import onnxruntime as ort

        from tripy_lab.engine.onnx.lowering import lower_to_onnx, with_carrier_types
        from tripy_lab.mlir.attrs import NUMPY_DTYPES, elem_of

        t0 = time.perf_counter()
        self.program = program
        self.lowering = lower_to_onnx(program)
        t1 = time.perf_counter()
        level = int(options.optimization_level)
        if level not in OPT_LEVELS:
            raise TripyException(f"Invalid optimization_level {level} for the onnxruntime engine.", ["Expected 0..5."])
        self.providers = choose_providers(program)
        self._model_bytes = with_carrier_types(self.lowering.model).SerializeToString()
        self._level = level
        self.sessions_built = 0
        with tempfile.TemporaryDirectory(prefix="tripy_lab_ort_") as work:
            path = os.path.join(work, "optimized.onnx")
            self.session = self._session(optimized=path)
            # the graph only (its initializers went to weights.bin): what the layer table and memory view read
            self._optimized_graph = _read_or_none(path)
        t2 = time.perf_counter()
        self._optimized = None
        self._layers: list[LayerRecord] | None = None
        self._memory = None  # MemoryUse of the last profiled run (``memory``)
        main = program.main()
        self._elems = [elem_of(a.type) for a in main.body.block.args]
        # bf16/f8/f4/int4 inputs travel as f32/int8 (exact; with_carrier_types), outputs come back that way
        self._carrier = [_CARRIER_NP.get(e) for e in self._elems]
        ret = main.body.block.last_op
        self._out_dtypes = [NUMPY_DTYPES[elem_of(v.type)] for v in ret.operands]
        self._in_names = self.lowering.input_names
        self._last = None
        used = self.session.get_providers()
        device = "cpu" if used[0] == "CPUExecutionProvider" else used[0].removesuffix("ExecutionProvider").lower()
        self.report = BuildReport(engine="onnxruntime", device=device)
        self.report.notes.append(f"optimization_level={level} -> graph_optimization_level={OPT_LEVELS[level]}"
                                 + (" (onnxruntime's highest; same session as level 3)" if level > 3 else ""))
        self.report.notes.append(f"onnx {onnx.__version__} (opset {self.lowering.model.opset_import[0].version}), "
                                 f"onnxruntime {ort.__version__}; providers {', '.join(used)}")
        self.report.notes.append(f"one InferenceSession for the whole profile: lower {t1 - t0:.3f}s, "
                                 f"session {t2 - t1:.3f}s, {len(self.lowering.model.graph.node)} ONNX nodes, "
                                 f"{len(self.lowering.model.graph.initializer)} initializers")
        self.report.cache.update({"sessions_built": self.sessions_built, "profile": "whole (min..max)",
                                  "shapes_run": 0})
        self._shapes_seen: set = set()

    def _session(self, optimized: str | None = None, profile_prefix: str | None = None):
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, OPT_LEVELS[self._level])
        so.log_severity_level = 3  # errors only: its warnings are about its own choices, not the user's program
        if (os.cpu_count() or 1) <= SLEEP_AT_OR_BELOW_CPUS:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Q/DQ stay as written: fused into onnxruntime's integer MatMul (u8s8 on x86 CPUs without VNNI) they
        # saturate 16-bit pair sums and gave wrong numbers for full-range int8 inputs and weights.
        so.add_session_config_entry("session.disable_quant_qdq", "1")
        if optimized:
            so.optimized_model_filepath = optimized
            so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
            so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "0")
        if profile_prefix:
            so.enable_profiling = True
            so.profile_file_prefix = profile_prefix
        try:
            sess = ort.InferenceSession(self._model_bytes, so, providers=self.providers)
        except Exception as exc:
            raise self._error("onnxruntime could not build a session", exc) from exc
        if not profile_prefix:
            self.sessions_built += 1
        return sess

    def _error(self, what: str, exc: Exception) -> TripyException:
        """A TripyException at the user's line of the node onnxruntime names in its message."""
        text = str(exc).strip()
        m = _NODE_IN_ERROR.search(text)
        index = self.lowering.origin_of_node(m.group(1)) if m else None
        first = text.splitlines()[0] if text else type(exc).__name__
        if index is None:
            return TripyException(f"onnxruntime engine: {what}: {first}")
        mlir_name, trace_name, line = self.lowering.op_info[index]
        origin = self.program.origins.get(trace_name) if trace_name else None
        details = [f"In {mlir_name} (MLIR op #{index}, trace op {trace_name}{', ' + line if line else ''})."]
        if origin is not None:
            details.append(f"Trace op: {origin.text}")
        return TripyException(f"onnxruntime engine: {what}: {first}", details,
                              origin.location if origin else None, op=trace_name or None)

    # ------------------------------------------------------------------------------------ running
    def _feed(self, args: Sequence[Any]) -> dict:
        feed = {}
        for name, a, carrier in zip(self._in_names, args, self._carrier):
            array = np.asarray(a)
            feed[name] = array.astype(carrier) if carrier is not None else array
        return feed

    def run(self, args: Sequence[Any]) -> list[Any]:
        feed = self._feed(args)
        key = tuple(np.shape(a) for a in args)
        if key not in self._shapes_seen:
            self._shapes_seen.add(key)
            self.report.cache["shapes_run"] = len(self._shapes_seen)
        try:
            outs = self.session.run(None, feed)
        except Exception as exc:
            raise self._error("run failed", exc) from exc
        return [o if o.dtype == dt else o.astype(dt) for o, dt in zip(outs, self._out_dtypes)]

    # ------------------------------------------------------------------------------------ describing
    @property
    def optimized_model(self):
        """The session's optimized graph (after onnxruntime's fusions), as an ``onnx.ModelProto``: its nodes, and
        its initializers' names, dims and types without their data (kept in the session, not here)."""
        if self._optimized is None:
            import onnx

            graph = self._optimized_graph
            self._optimized = onnx.load_from_string(graph) if graph is not None else self.lowering.model
        return self._optimized

    @property
    def layers(self) -> list[LayerRecord]:
        if self._layers is None:
            self._layers = with_modules(self._layer_records(), self.program.origins)
        return self._layers

    def _layer_records(self) -> list[LayerRecord]:
        from tripy_lab.engine.onnx.lowering import tensor_types

        low = self.lowering
        types = tensor_types(low.model)
        provider = self.session.get_providers()[0]
        nodes = list(self.optimized_model.graph.node)
        sources = []
        for node in nodes:
            index = low.origin_of_node(node.name)
            if index is not None and node.name in low.node_origin:  # a node as lowered
                sources.append([index])
            elif index is not None:  # fused: named after its first node; covers every op in between
                sources.append(sorted({index, *low.node_sources(node.input, node.output)}))
            else:  # made by onnxruntime (shared shape nodes, ...): the ops whose tensors it outputs
                sources.append(sorted({low.tensor_origin[o] for o in node.output if o in low.tensor_origin}))
        # nodes onnxruntime made from scratch (shared shape computations): the ops of their first consumer
        consumer = {t: k for k, node in reversed(list(enumerate(nodes))) for t in node.input}
        for k in range(len(nodes)):
            seen = set()
            j = k
            while not sources[k] and j not in seen:
                seen.add(j)
                nxt = [consumer[o] for o in nodes[j].output if o in consumer]
                if not nxt:
                    break
                j = nxt[0]
                sources[k] = list(sources[j])
        records = []
        for k, (node, ops) in enumerate(zip(nodes, sources)):
            trace_ops = tuple(dict.fromkeys(low.op_info[i][1] for i in ops if low.op_info[i][1]))
            lines = tuple(dict.fromkeys(low.op_info[i][2] for i in ops if low.op_info[i][2]))
            kind = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
            shapes = tuple(types.get(o, ((), ""))[0] for o in node.output if o)
            dts = tuple(types.get(o, ((), "?"))[1] for o in node.output if o)
            records.append(LayerRecord(name=node.name or f"{node.op_type}_{k}", kind=kind, source_ops=trace_ops,
                                       source_lines=lines, output_shapes=shapes, output_dtypes=dts,
                                       kernel=provider, mlir_ops=tuple(ops)))
        return records

    # ------------------------------------------------------------------------------------ timing
    def _profiled_runs(self, args: Sequence[Any] | None, calls: int, warmup: int = 1, between=None,
                       block: int = 1):
        """``calls`` runs of a profiling session (same options as the engine's session, hence the same
        optimized node names) on ``args`` (default: random data at the opt shapes), after ``warmup`` runs
        that are not counted (a fresh session allocates on its first run); ``between(feed, n)`` is called
        before each ``block`` of counted runs, with that block's size. -> (``TraceRuns``, build seconds)."""
        from tripy_lab.engine.onnx.profile import trace_runs

        args = list(args) if args is not None else self.opt_inputs()
        with tempfile.TemporaryDirectory(prefix="tripy_lab_ort_") as work:  # the profile file, read and gone
            t0 = time.perf_counter()
            sess = self._session(profile_prefix=os.path.join(work, "profile"))
            build_s = time.perf_counter() - t0
            feed = self._feed(args)
            try:
                for k in range(warmup + calls):
                    if between is not None and k >= warmup and (k - warmup) % block == 0:
                        between(feed, min(block, warmup + calls - k))
                    sess.run(None, feed)
            except Exception as exc:
                raise self._error("run failed", exc) from exc
            finally:
                path = sess.end_profiling()
            with open(path) as f:
                events = json.load(f)
        self._note_memory(events, args, feed)
        trace = trace_runs(events)
        trace.runs = trace.runs[warmup:]
        return trace, build_s

    def memory(self, measure: bool = True) -> list:
        """onnxruntime's own numbers (``onnx.memory``) from the last profiled run (a timing run's), or, with
        ``measure``, from one profiled run at the opt shapes now."""
        if self._memory is None and measure:
            self._profiled_runs(None, 1)
        return [self._memory] if self._memory is not None else []

    def _note_memory(self, events: list[dict], args: Sequence[Any], feed: dict) -> None:
        from tripy_lab.engine.base import call_point
        from tripy_lab.engine.onnx.memory import initializer_bytes, memory_use, node_memory, with_memory

        try:  # a by-product of a profiled run: never the reason a timing run fails
            measured = node_memory(events)
            if not measured["nodes"]:
                return
            infos = self.program.input_infos
            values = {n: int(np.asarray(a)) if isinstance(infos.get(n), DimensionInputInfo) else np.shape(a)
                      for n, a in zip(self._in_names, args)}
            use = memory_use(measured, call_point(self.program, values), initializer_bytes(self.optimized_model),
                             sum(np.asarray(v).nbytes for v in feed.values()))
        except (KeyError, TypeError, ValueError) as exc:
            self.report.notes.append(f"memory: onnxruntime's profile could not be read ({type(exc).__name__}: {exc})")
            return
        self._memory = use
        self._layers = with_memory(self.layers, measured)

    def layer_times(self, args: Sequence[Any] | None = None, iters: int = 10) -> list[dict]:
        """Per-layer kernel times from onnxruntime's profiler, one dict per layer that ran.

        Runs a second (profiling) session ``iters`` times on ``args`` (arrays in argument order; default:
        random data at the profile's opt shapes), after one uncounted warm-up run. Keys: ``name``, ``kind``,
        ``source_ops``, ``source_lines``, ``calls``, ``total_ms``, ``mean_ms``, ``provider``; sorted by
        ``total_ms``, largest first. The profiling session is not the engine's session (``sessions_built``
        does not count it). ``profile()`` gives the same measurement as an ``EngineProfile``.
        """
        trace, _ = self._profiled_runs(args, iters)
        by_name = {layer.name: layer for layer in self.layers}
        rows = []
        for name, info in trace.node_info.items():
            calls = sum(r.node_calls.get(name, 0) for r in trace.runs)
            total = sum(r.node_s.get(name, 0.0) for r in trace.runs) * 1e3
            layer = by_name.get(name)
            rows.append({"name": name, "kind": layer.kind if layer else info["op_name"],
                         "source_ops": list(layer.source_ops) if layer else [],
                         "source_lines": list(layer.source_lines) if layer else [],
                         "calls": calls, "total_ms": total, "mean_ms": total / max(calls, 1),
                         "provider": info["provider"]})
        return sorted(rows, key=lambda r: -r["total_ms"])

    def profile(self, args: Sequence[Any], calls: int = 10) -> EngineProfile:
        """Compute time per call: wall time of the engine's own ``InferenceSession.run`` (inputs converted
        once); time per layer: onnxruntime's profiler in a profiling session (see ``profile``).

        Like trtexec's ``--dumpProfile``, the layer times come from separate, profiled runs (in blocks
        alternating with the timed runs of the engine's session): the profiler adds its bookkeeping (a few microseconds
        per node) to each node's time and slows the run, so the profiled runs' time is not used as the
        compute time (it exceeded the latency of unprofiled calls).
        """
        from tripy_lab.engine.onnx.profile import median_node_s

        compute: list[float] = []

        def timed_runs(feed, n: int):
            for _ in range(n):
                start = time.perf_counter()
                self.session.run(None, feed)
                compute.append(time.perf_counter() - start)

        # blocks of timed runs alternate with blocks of profiled runs: a busy host slows both alike, and
        # only a block's first run pays for the switch between the sessions (~10% when alternating each run)
        trace, build_s = self._profiled_runs(args, calls, between=timed_runs, block=max(1, -(-calls // 4)))
        node_s = median_node_s(trace.runs)
        layers = list(self.layers)
        known = {ly.name for ly in layers}
        for name in node_s:
            if name not in known:  # a node the optimized model does not list: keep its time visible
                info = trace.node_info[name]
                layers.append(LayerRecord(name=name, kind=info["op_name"] or "unlisted", source_ops=(),
                                          source_lines=(), output_shapes=(), output_dtypes=(),
                                          kernel=info["provider"]))
        where = self.report.device
        method = (f"{'CPU' if where == 'cpu' else where}: wall time of the engine's InferenceSession.run per "
                  "call (inputs converted once); per layer: onnxruntime profiler's node kernel times "
                  "(a profiling session with the engine's options, in blocks alternating with the timed runs)")
        median = float(np.median(compute)) if compute else 0.0
        layer_sum = sum(node_s.values())
        span = float(np.median([r.span_s for r in trace.runs])) if trace.runs else 0.0
        notes = [f"profiling session built in {build_s:.3f}s (not the engine's session); its runs' node events "
                 f"span {span * 1e3:.4g} ms per run, the profiler's bookkeeping included"]
        if median > 0:
            notes.append(f"layers sum to {layer_sum / median:.0%} of the median compute time")
        if median > 0 and layer_sum > 1.15 * median and node_s:
            notes.append(f"the profiler's bookkeeping adds about {(layer_sum - median) / len(node_s) * 1e6:.2g} µs "
                         "to each node's time, so small nodes read high (time them at larger shapes)")
        if where != "cpu":
            notes.append("on this provider a node's time is the host time of its kernel launches, not device time; "
                         "the compute time includes the inputs' and outputs' copies between host and device")
        return EngineProfile(compute, {ly.name: node_s.get(ly.name, 0.0) for ly in layers}, layers, method, notes)

    def opt_inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Random arrays at the profile's opt shapes (DimensionInputInfo: its opt value), in argument order."""
        return opt_inputs(self.program, seed)


class OnnxRuntimeEngine(Engine):
    name = "onnxruntime"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        missing = [m for m in ("onnx", "onnxruntime") if importlib.util.find_spec(m) is None]
        if missing:
            return False, f"{' and '.join(missing)} not installed (pip install 'tripy-lab[onnx]')"
        from importlib.metadata import PackageNotFoundError, version

        for dist in ("onnxruntime", "onnxruntime-gpu"):
            try:
                return True, f"onnxruntime {version(dist)} is installed ({dist})"
            except PackageNotFoundError:
                continue
        return True, "onnxruntime is installed"

    def build(self, program, options: BuildOptions) -> CompiledEngine:
        return OnnxRuntimeCompiled(program, options)
