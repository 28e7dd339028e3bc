"""The ``tensorrt`` engine: the MLIR program becomes a TensorRT ``INetworkDefinition``, then an engine.

NOT RUN IN THIS PROJECT'S ENVIRONMENT. TensorRT cannot be installed here, in CI or on our GPU machine,
so this engine has only been exercised against recording stand-ins of the ``tensorrt`` module and of
cuda-python (the network walk, profile, builder options, timing cache, inspector conversion and the
run plumbing are tested; building and running a real engine are not). It is written against TensorRT 10's documented
Python API for users who have TensorRT and a CUDA GPU; ``available()`` says why it cannot be used.

Build
-----
1. ``ops.build_network`` walks ``program.ops()`` through THE TABLE (op name -> layer
   builder) into a **strongly typed** network. Layer ``name`` = ``<op>_<index>``, ``metadata`` = the
   op's location name (its trace op), so the inspector's rows map back to source.
2. One optimization profile from the arguments' ``tensorrt.shape_profile`` / ``tensorrt.value_bounds``
   (``profile.profile_records``); DimensionInputInfo scalars are shape-tensor inputs
   (``set_shape_input``).
3. ``builder_optimization_level`` = ``BuildOptions.optimization_level`` (0-5), profiling verbosity
   DETAILED, the timing cache loaded from ``BuildOptions.timing_cache_path`` and written back
   atomically after the build; an ``IProgressMonitor`` records the build phases (``report.notes``).
4. ``build_serialized_network`` -> ``Runtime.deserialize_cuda_engine`` -> ``IEngineInspector`` JSON ->
   ``layers``. ``report.cache`` says whether the timing cache was loaded (``hit``) or created.

Run
---
cuda-python (``cuda.bindings.runtime``, or the older ``cuda.cudart``) makes the stream and copies.
Data inputs: device arrays exposing ``__cuda_array_interface__`` (cupy, torch, numba, our own
results) and single-device jax GPU arrays are used in place; anything else is copied to the device.
DimensionInputInfo arguments are host shape-tensor values (``set_tensor_address`` with a host
pointer). ``set_input_shape`` for every data input, ``execute_async_v3`` on the stream, then the
stream is synchronized, so results are complete when ``run`` returns (no cross-stream hazards for
whatever consumes them). Results stay on the GPU: cupy arrays if cupy is installed, else torch CUDA
tensors if torch is, both DLPack producers; otherwise :class:`DeviceArray`
(``__cuda_array_interface__`` + ``get()``).
"""

from __future__ import annotations

import importlib
import json
import time
from collections.abc import Sequence

import numpy as np

from tripy_lab.core.arrays import to_host
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.base import BuildOptions, BuildReport, CompiledEngine, Engine, LayerRecord, with_modules
from tripy_lab.engine.tensorrt import cuda as trt_cuda
from tripy_lab.engine.tensorrt.cuda import Cuda, DeviceBuffer, _cuda_array, handle_int, output_allocator
from tripy_lab.engine.tensorrt.layers import ProgramIndex, layer_records
from tripy_lab.engine.tensorrt.ops import build_network
from tripy_lab.engine.tensorrt.profile import (
    ProfileRecord,
    ProgressLog,
    apply_profile,
    attach_timing_cache,
    builder_settings,
    configure_builder,
    finish_timing_cache,
    network_flags,
    profile_records,
    reconcile_shape_tensors,
)
from tripy_lab.mlir.attrs import NUMPY_DTYPES, elem_of

# =============================================================================================
# Imports and availability


def import_tensorrt():
    """The ``tensorrt`` module, imported only when an engine is built."""
    try:
        return importlib.import_module("tensorrt")
    except ImportError as exc:
        raise TripyException("TensorRT is not installed.",
                             ["The 'tensorrt' engine needs NVIDIA TensorRT (>= 10) and cuda-python.",
                              f"Import error: {exc}"]) from exc  # fmt: skip


# =============================================================================================
# TensorRT callbacks: logger and progress monitor (classes made once the module is imported)


def _make_logger(trt):
    class _Logger(trt.ILogger):
        """Keeps warnings and errors for the build report and for error messages."""

        def __init__(self):
            trt.ILogger.__init__(self)
            self.messages: list[tuple[str, str]] = []

        def log(self, severity, msg):
            name = getattr(severity, "name", str(severity))
            if any(k in name for k in ("ERROR", "WARNING")):
                self.messages.append((name, str(msg)))

    return _Logger()


def _make_monitor(trt, progress: ProgressLog):
    base = getattr(trt, "IProgressMonitor", None)
    if base is None:
        return None

    class _Monitor(base):
        def __init__(self):
            base.__init__(self)

        def phase_start(self, phase_name, parent_phase, num_steps):
            progress.phase_start(phase_name, parent_phase, num_steps)

        def step_complete(self, phase_name, step):
            return progress.step_complete(phase_name, step)

        def phase_finish(self, phase_name):
            progress.phase_finish(phase_name)

    return _Monitor()


def _network_listing(ctx) -> str:
    """The layers added to the network, one per line (before TensorRT fuses anything)."""
    lines = []
    for info in ctx.layers:
        kind = getattr(getattr(info.layer, "type", None), "name", "")
        meta = getattr(info.layer, "metadata", "") or ""
        lines.append(f"{info.name:<32} {kind:<16} {meta}")
    return "\n".join(lines)


# =============================================================================================
# The engine


class TensorRTCompiled(CompiledEngine):
    """A deserialized TensorRT engine with an execution context and a CUDA stream."""

    def __init__(self, program, report: BuildReport, trt, runtime, engine, plan: bytes,
                 layers: list[LayerRecord], records: list[ProfileRecord], cuda: Cuda | None = None):  # fmt: skip
        self.program = program
        self.report = report
        self.plan = plan  # the serialized engine
        self._trt = trt
        self._runtime = runtime
        self._engine = engine
        self._layers = layers
        self._records = {r.name: r for r in records}
        self._cuda = cuda or Cuda()
        self._stream = self._cuda.stream()
        self._context = engine.create_execution_context()
        self.output_kind, self._allocate = output_allocator(self._cuda)
        main = program.main()
        self._out_dtypes = [NUMPY_DTYPES[elem_of(v.type)] for v in main.body.block.last_op.operands]
        self._in_dtypes = [NUMPY_DTYPES[elem_of(a.type)] for a in main.body.block.args]

    @property
    def layers(self) -> list[LayerRecord]:
        return self._layers

    def memory(self, measure: bool = True) -> list:
        """TensorRT's own numbers: ``ICudaEngine.device_memory_size_v2`` (or ``device_memory_size``: the activations
        and scratch an execution context needs, for any shape in the profile) and the plan's size (its weights and
        kernels); per layer, the inspector's outputs and weights (``layers``)."""
        from tripy_lab.engine.memory import MemoryUse

        scratch = next((int(v) for v in (getattr(self._engine, n, None) for n in ("device_memory_size_v2",
                                                                                 "device_memory_size"))
                        if isinstance(v, int)), None)
        if scratch is None:
            return []
        parts = {"activations and scratch": scratch, "engine plan (weights, kernels)": len(self.plan)}
        return [MemoryUse("the whole profile (min..max)", sum(parts.values()), parts,
                          "TensorRT's ICudaEngine.device_memory_size (an execution context's activations and scratch) "
                          "and the serialized plan's size; per layer: the engine inspector's outputs and weights")]

    def _is_host_tensor(self, name: str) -> bool:
        location = getattr(self._engine, "get_tensor_location", None)
        if location is not None:
            return location(name) == self._trt.TensorLocation.HOST
        rec = self._records.get(name)
        return bool(rec and rec.is_shape_tensor)

    def run(self, args: Sequence) -> list:
        names = list(self.program.arg_names)
        if len(args) != len(names):
            raise TripyException(f"Expected {len(names)} arguments, got {len(args)}.")
        ctx, keep = self._context, []  # keep: host values and device copies, alive until the stream is done
        for name, value, dtype in zip(names, args, self._in_dtypes):
            if self._is_host_tensor(name):  # shape tensor: TensorRT reads the value on the host
                host = np.ascontiguousarray(to_host(value), dtype=dtype)
                keep.append(host)
                ctx.set_tensor_address(name, host.ctypes.data)
                continue
            direct = _cuda_array(value, dtype)
            if direct is not None:
                ptr, shape = direct
                keep.append(value)
            else:
                host = np.ascontiguousarray(to_host(value), dtype=dtype)
                buf = DeviceBuffer(self._cuda, host.nbytes)
                self._cuda.htod(buf.ptr, host)
                ptr, shape = buf.ptr, host.shape
                keep.append(buf)
            if not ctx.set_input_shape(name, tuple(shape)):
                rec = self._records.get(name)
                bounds = f" (profile min={list(rec.min)}, max={list(rec.max)})" if rec else ""
                raise TripyException(f"Input '{name}' has shape {tuple(shape)}, outside what the engine accepts"
                                     f"{bounds}.")
            ctx.set_tensor_address(name, ptr)
        outs = []
        for name, dtype in zip(self.program.output_names, self._out_dtypes):
            shape = tuple(int(d) for d in ctx.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise TripyException(f"TensorRT could not infer the shape of output '{name}': {shape}.")
            if self._is_host_tensor(name):  # a shape-tensor output lives on the host
                arr = np.empty(shape, dtype)
                ptr = arr.ctypes.data
            else:
                arr, ptr = self._allocate(shape, dtype)
            ctx.set_tensor_address(name, ptr)
            outs.append(arr)
        if not ctx.execute_async_v3(handle_int(self._stream)):
            raise TripyException("TensorRT failed to enqueue the engine (execute_async_v3 returned False).")
        self._cuda.sync(self._stream)  # results complete on return; `keep` may go now
        del keep
        return outs

    def synchronize(self) -> None:
        self._cuda.sync(self._stream)


class TensorRTEngine(Engine):
    name = "tensorrt"
    progress_callback = None  # optional (event, PhaseRecord) -> None, e.g. a lab progress bar

    @classmethod
    def available(cls) -> tuple[bool, str]:
        try:
            trt = importlib.import_module("tensorrt")
        except ImportError:
            return False, "TensorRT is not installed (the 'tensorrt' module cannot be imported)"
        except Exception as exc:  # a broken install
            return False, f"TensorRT failed to import: {exc}"
        version = getattr(trt, "__version__", "?")
        count, why = trt_cuda.cuda_device_count()
        if count == 0:
            return False, f"TensorRT {version} is importable but {why}"
        return True, f"TensorRT {version} with {count} CUDA GPU(s)"

    def build(self, program, options: BuildOptions) -> CompiledEngine:
        trt = import_tensorrt()
        settings = builder_settings(options)
        records = profile_records(program)
        start = time.perf_counter()
        logger = _make_logger(trt)
        builder = trt.Builder(logger)
        network = builder.create_network(network_flags(trt, settings))
        ctx = build_network(trt, network, program)
        notes = [f"network: {len(ctx.layers)} layers from {len(program.ops())} MLIR ops "
                 f"in {time.perf_counter() - start:.3f}s"]
        config = builder.create_builder_config()
        notes += configure_builder(trt, config, settings)
        flags = {name: bool(t.is_shape_tensor) for name, t in ctx.inputs if hasattr(t, "is_shape_tensor")}
        records, more = reconcile_shape_tensors(records, flags)
        notes += more
        profile = builder.create_optimization_profile()
        notes += apply_profile(profile, records)
        config.add_optimization_profile(profile)
        _cache, cache_state = attach_timing_cache(config, settings.timing_cache_path)
        progress = ProgressLog(self.progress_callback)
        monitor = _make_monitor(trt, progress)
        if monitor is not None:
            config.progress_monitor = monitor
        else:
            notes.append("this TensorRT has no IProgressMonitor: build phases are not reported")
        t0 = time.perf_counter()
        serialized = builder.build_serialized_network(network, config)
        build_s = time.perf_counter() - t0
        errors = [m for s, m in logger.messages if "ERROR" in s]
        if serialized is None:
            raise TripyException("TensorRT could not build an engine for this program.",
                                 errors[-10:] or ["(TensorRT logged no error)"])
        try:
            finish_timing_cache(config, cache_state)
        except OSError as exc:
            cache_state.error = f"could not save the timing cache: {exc}"
        plan = bytes(memoryview(serialized))
        runtime = trt.Runtime(logger)
        engine = runtime.deserialize_cuda_engine(plan)
        if engine is None:
            raise TripyException("TensorRT could not deserialize the engine it built.", errors[-10:])
        info = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
        layers = with_modules(layer_records(info, ProgramIndex.from_program(program)), program.origins)
        cuda = Cuda()
        notes.append(f"built in {build_s:.3f}s; engine {len(plan)} bytes; {len(layers)} engine layers")
        notes.append(f"results are {output_allocator(cuda)[0]} arrays on the GPU")
        notes += progress.notes()
        notes += [f"TensorRT {s.lower()}: {m}" for s, m in logger.messages][-20:]
        try:
            pretty = json.dumps(json.loads(info), indent=1)
        except (TypeError, ValueError):
            pretty = str(info)
        report = BuildReport(engine=self.name, device=f"gpu:0 ({cuda.device_name()})", cache=cache_state.as_report(),
                             notes=notes, extra_stages={"tensorrt_network": _network_listing(ctx),
                                                        "tensorrt_engine_layers": pretty})  # fmt: skip
        del ctx, network, config, builder  # the weights ctx kept alive are baked into the plan now
        compiled = TensorRTCompiled(program, report, trt, runtime, engine, plan, layers, records, cuda)
        compiled._keep_alive = (logger, monitor)  # TensorRT objects may call back into them
        return compiled
