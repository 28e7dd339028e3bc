"""The engine interface. An engine turns an MLIR program (tensorrt dialect) into something runnable.

Every engine reads the same ``MlirProgram`` (see ``tripy_lab.mlir.program``): it walks the ops of
``program.main()`` and uses its own table keyed by op name (``"tensorrt.element_wise"`` ...).
"""

from __future__ import annotations

import dataclasses
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class LayerRecord:
    """One row of an engine's layer table. Same fields on every engine."""

    name: str
    kind: str  # e.g. "element_wise", "loop fusion", "GEMM (cuBLAS)", "copy"
    source_ops: tuple[str, ...]  # trace op names (e.g. "%t5") whose work this layer does
    source_lines: tuple[str, ...]  # user lines of those ops ("cell:3", "model.py:12")
    output_shapes: tuple[tuple[int | None, ...], ...]
    output_dtypes: tuple[str, ...]
    kernel: str = ""  # kernel, custom-call target or tactic
    mlir_ops: tuple[int, ...] = ()  # indices into program.main() ops, for the crosswalk
    module: str = ""  # the module path of its source ops ("h.3.attn"; see ``layer_module``), "" at top level
    # memory (``engine.memory``), None where the engine does not know it: bytes the layer writes (its outputs at
    # the shape measured) and bytes of the weights/constants it reads
    output_bytes: int | None = None
    weight_bytes: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "source_ops": list(self.source_ops),
                "source_lines": list(self.source_lines), "output_shapes": [list(s) for s in self.output_shapes],
                "output_dtypes": list(self.output_dtypes), "kernel": self.kernel, "mlir_ops": list(self.mlir_ops),
                "module": self.module, "output_bytes": self.output_bytes, "weight_bytes": self.weight_bytes}


def layer_module(modules: Sequence[str]) -> str:
    """The module of a layer made from ops of ``modules``: the innermost one holding all of them (a fusion of
    ``h.3.attn.c_attn`` and ``h.3.attn.c_proj`` ops is ``h.3.attn``); when that is the top level but the ops
    come from modules, those modules joined by `` + `` (at most three, then ``…``)."""
    distinct = list(dict.fromkeys(modules))
    if len(distinct) <= 1:
        return distinct[0] if distinct else ""
    common = distinct[0].split(".")
    for path in distinct[1:]:
        parts = path.split(".") if path else []
        k = 0
        while k < min(len(common), len(parts)) and common[k] == parts[k]:
            k += 1
        common = common[:k]
    if common:
        return ".".join(common)
    named = [m for m in distinct if m]
    return " + ".join(named[:3]) + (" + …" if len(named) > 3 else "")


def with_modules(layers: list[LayerRecord], origins: Mapping) -> list[LayerRecord]:
    """``layers`` with ``module`` filled from the origins (``MlirProgram.origins``) of their source ops."""
    out = []
    for layer in layers:
        modules = [origins[n].module for n in layer.source_ops if n in origins]
        module = layer_module(modules) if modules else ""
        out.append(dataclasses.replace(layer, module=module) if module != layer.module else layer)
    return out


@dataclass
class BuildOptions:
    optimization_level: int = 3
    timing_cache_path: str | None = None  # TensorRT timing cache file
    compilation_cache_dir: str | None = None  # xla persistent cache
    # Which input signatures the build compiles up front (xla): "profile" = opt, min and max (concurrently),
    # "opt" = opt only; or a list of {arg name: shape (or value, for DimensionInputInfo)} dicts besides them.
    build_shapes: Any = "profile"


@dataclass
class BuildReport:
    """What the build did: shown in the Log tab and in ``Built.as_text()``."""

    engine: str
    reason: str = ""  # why this engine was chosen
    device: str = "cpu"
    cache: dict[str, Any] = field(default_factory=dict)  # e.g. {"timing_cache": "none", "hits": 1}
    notes: list[str] = field(default_factory=list)
    extra_stages: dict[str, str] = field(default_factory=dict)  # e.g. {"stablehlo": "..."}
    # The engine's own build span, its library already loaded (None: not measured). The pipeline's Built.seconds
    # is the whole stage the user waited for; the difference is the engine's start-up (e.g. importing jax).
    seconds: float | None = None


@dataclass
class EngineProfile:
    """What a profiling run measured: per-call compute time and per-layer time (seconds).

    ``compute_s``: one entry per profiled call, the time the engine's work took (GPU: from the first
    kernel's start to the last kernel's end, from the profiler's device trace; CPU: the span of the
    computation's own events, or its wall time). ``layer_s``: layer name -> seconds per call (median)
    (a layer's kernels summed), for the layer table ``layers`` of the executable that ran.
    """

    compute_s: list[float]
    layer_s: dict[str, float]
    layers: list[LayerRecord]
    method: str
    notes: list[str] = field(default_factory=list)
    # host wall time of each profiled synchronized call (where the engine records it): the bound compute_s keeps;
    # for calls run back to back (xla on a GPU), each call's period on the device
    wall_s: list[float] = field(default_factory=list)


class CompiledEngine(ABC):
    """A built engine: runs the program, and describes itself as layer records."""

    report: BuildReport

    @property
    @abstractmethod
    def layers(self) -> list[LayerRecord]: ...

    @abstractmethod
    def run(self, args: Sequence[Any]) -> list[Any]:
        """Run ``main`` on arrays in argument order (DimensionInputInfo args are 0-d int32 numpy arrays).

        Returns one array per result: numpy arrays on CPU engines, device arrays (DLPack producers) on GPU.
        """

    def synchronize(self) -> None:
        """Block until queued device work is done (GPU engines); timing uses it."""

    def input_devices(self) -> frozenset[str]:
        """Memory kinds (``"cpu"``, ``"cuda"``; see ``executable.arguments.DLPACK_DEVICES``) whose arrays ``run``
        reads. The Executable refuses an argument in any other memory before ``run`` sees it. Default: host
        memory, plus CUDA memory when the engine runs on a GPU."""
        return frozenset({"cpu"}) if self.report.device == "cpu" else frozenset({"cpu", "cuda"})


    last_profile: EngineProfile | None = None  # set by the lab's timing runs; the Engine tab shows it

    def memory(self, measure: bool = True) -> list:
        """Device memory per built shape (``engine.memory.MemoryUse``, the opt shape first), and the layer table's
        ``output_bytes``/``weight_bytes`` filled where the engine knows them. ``measure=False``: only what is known
        without running anything (engines that measure by running return [] until something measured). Default:
        [] (this engine does not report memory)."""
        return []

    def warm(self, signature: dict[str, Any]) -> bool:
        """Compile ``signature`` ({argument: shape, or value for a DimensionInputInfo}) now, if this engine compiles
        per shape and has not yet; True when it compiled. Default: False, nothing to do (one build covers every
        shape in the profile). Raises TripyException for a signature outside the profile or one that fails."""
        return False

    def built_points(self) -> list[dict[str, Any]]:
        """The signatures compiled so far, as ``warm`` takes them (engines that compile per shape; default none)."""
        return []

    # True where compiling a new signature makes the next call of every earlier one pay a one-time cost again
    # (the xla engine on GPUs); a warm-up then calls each built signature once more at its end.
    evicts_on_build: bool = False

    def to_device(self, array: Any) -> Any:
        """A data argument as this engine's resident input (GPU engines upload it once), for timing."""
        return array

    def profile(self, args: Sequence[Any], calls: int = 10) -> EngineProfile:
        """Run ``calls`` synchronized calls and measure them. Engines with a device timer override this;
        the default is the wall time of ``run`` + ``synchronize`` and no per-layer times."""
        import time

        times = []
        for _ in range(calls):
            start = time.perf_counter()
            self.run(args)
            self.synchronize()
            times.append(time.perf_counter() - start)
        return EngineProfile(times, {}, self.layers, "host wall time of run() + synchronize() (no device timer)")


def opt_inputs(program, seed: int = 0) -> list:
    """Random numpy arrays at the profile's opt shapes (DimensionInputInfo: its opt value), in argument order."""
    import numpy as np

    from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
    from tripy_lab.mlir.attrs import NUMPY_DTYPES, elem_of, shape_of

    rng = np.random.default_rng(seed)
    out, args = [], list(program.main().body.block.args)
    for name, arg in zip(list(program.arg_names) or [f"arg{i}" for i in range(len(args))], args):
        info = program.input_infos.get(name)
        if isinstance(info, DimensionInputInfo):
            out.append(np.asarray(info.value_bounds.opt[0], np.int32))
            continue
        shape = tuple(info.shape_bounds.opt) if isinstance(info, InputInfo) else tuple(
            d or 1 for d in shape_of(arg.type))
        dt = NUMPY_DTYPES[elem_of(arg.type)]
        out.append(rng.integers(0, 2, size=shape).astype(dt) if dt.kind in "iub" else
                   rng.standard_normal(shape).astype(dt))
    return out


def cuda_device_count() -> int:
    """CUDA devices the driver reports (0 without a driver); asks libcuda directly, so no jax/cupy import."""
    global _CUDA_COUNT
    if _CUDA_COUNT is None:
        import ctypes

        _CUDA_COUNT = 0
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            count = ctypes.c_int(0)
            if lib.cuInit(0) == 0 and lib.cuDeviceGetCount(ctypes.byref(count)) == 0:
                _CUDA_COUNT = int(count.value)
        except (OSError, AttributeError):
            pass
    return _CUDA_COUNT


_CUDA_COUNT: int | None = None


class Engine(ABC):
    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]:
        """(usable here, why or why not)."""

    @abstractmethod
    def build(self, program, options: BuildOptions) -> CompiledEngine: ...


# ---------------------------------------------------------------------------------------------------------
# Build failures: every engine's build error is a TripyException naming the op, its shapes, the profile point
# and the user's line (issue 8). Engines wrap each build in ``build_errors(engine, program, point)``.

_OP_PATTERNS = (
    re.compile(r"\b\w*?__op(\d+)\b"),  # xla named scopes: t5__op3
    re.compile(r"MLIR op #(\d+)"),  # our own messages
    re.compile(r"\b([a-z_]+)_(\d+)(?:\.\w+)?\b"),  # tensorrt layer names: element_wise_3, broadcast_4.expand
)


def find_op(program, text: str) -> int | None:
    """Index (in ``program.ops()``) of the MLIR op an engine's error message talks about, if it names one."""
    ops = program.ops()
    for pattern in _OP_PATTERNS:
        for m in pattern.finditer(text):
            if len(m.groups()) == 1:
                i = int(m.group(1))
                if 0 <= i < len(ops):
                    return i
            else:
                i = int(m.group(2))
                if 0 <= i < len(ops) and ops[i].name == "tensorrt." + m.group(1):
                    return i
    return None


def _fmt(shape) -> str:
    return "x".join(str(d) for d in shape) if shape else "scalar"


def profile_point(program, name: str) -> str:
    """``"opt (x=2x6, s=2)"``: the arguments' sizes at the profile point ``min`` / ``opt`` / ``max``."""
    parts = []
    for arg, info in program.input_infos.items():
        bounds = getattr(info, "value_bounds", None)
        if bounds is not None:
            parts.append(f"{arg}={getattr(bounds, name)[0]}")
        else:
            parts.append(f"{arg}={_fmt(getattr(info.shape_bounds, name))}")
    return f"{name} ({', '.join(parts)})"


def call_point(program, values: dict[str, Any]) -> str:
    """The profile point a concrete call signature is (``min``/``opt``/``max``), or ``call (...)`` inside it;
    ``values`` maps argument names to shapes (tuples) or DimensionSize values (ints)."""
    for name in ("opt", "min", "max"):
        def at(arg, info, name=name):
            b = getattr(info, "value_bounds", None)
            return getattr(b, name)[0] if b is not None else tuple(getattr(info.shape_bounds, name))

        if values and all(arg in program.input_infos and at(arg, program.input_infos[arg]) == (
                v if isinstance(v, int) else tuple(v)) for arg, v in values.items()):
            return profile_point(program, name)
    parts = ", ".join(f"{a}={v if isinstance(v, int) else _fmt(v)}" for a, v in values.items())
    return f"a call's shapes inside the profile ({parts})"


def _with_point(exc, point: str | None, program, engine: str):
    from tripy_lab.core.errors import TripyException

    details = list(exc.details)
    location, op = exc.location, exc.op
    if op is None:  # say which op the message (or its cause) is about, when it names one
        text = "\n".join([str(exc), str(exc.__cause__ or "")])
        i = find_op(program, text)
        if i is not None:
            mlir_op = program.ops()[i]
            origin = program.origin_of(mlir_op)
            details.append(_op_detail(program, i, mlir_op, origin))
            if origin is not None:
                location, op = origin.location or location, origin.trace_op
    if point and not any(d.startswith("Profile point:") for d in details):
        details.append(f"Profile point: {point}.")
    if details == exc.details and (location, op) == (exc.location, exc.op):
        return None
    return TripyException(exc.summary, details, location, op=op)


def _op_detail(program, index: int, op, origin) -> str:
    types = ", ".join(str(v.type) for v in op.operands) or "no operands"
    where = f"In {op.name} (MLIR op #{index}"
    if origin is not None:
        where += f", trace op {origin.trace_op}" + (f", {origin.line}" if origin.line else "")
    return where + f"); operand types: {types}."


def build_failure(engine: str, program, exc: BaseException, point: str | None):
    """A TripyException for a raw exception raised while ``engine`` built ``program`` at ``point``."""
    from tripy_lab.core.errors import TripyException
    from tripy_lab.core.source import user_location

    text = str(exc).strip()
    first = text.splitlines()[0][:300] if text else ""
    i = find_op(program, f"{text}\n{exc.__cause__ or ''}")
    details, location, trace_op = [], None, None
    summary = f"{engine} engine: the build failed"
    if i is not None:
        op = program.ops()[i]
        origin = program.origin_of(op)
        summary += f" in {op.name}"
        details.append(_op_detail(program, i, op, origin))
        if origin is not None:
            location, trace_op = origin.location, origin.trace_op
            details.append(f"Trace op: {origin.text}")
    else:
        details.append("The error does not say which op failed; the engine's message follows.")
    if point:
        details.append(f"Profile point: {point}.")
    details.append(f"{type(exc).__name__}: {first}")
    details += [line[:300] for line in text.splitlines()[1:6]]
    return TripyException(f"{summary}: {type(exc).__name__}.", details, location or user_location(), op=trace_op)


@contextmanager
def build_errors(engine: str, program, point: str | None = None):
    """Turn anything raised inside into a TripyException that names the op, shapes, profile point and line."""
    from tripy_lab.core.errors import TripyException

    try:
        yield
    except TripyException as exc:
        better = _with_point(exc, point, program, engine)
        if better is None:
            raise
        raise better from exc
    except Exception as exc:
        raise build_failure(engine, program, exc, point) from exc
