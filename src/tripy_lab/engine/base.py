"""The engine interface. An engine turns an MLIR program (tensorrt dialect) into something runnable.

Every engine reads the same ``MlirProgram`` (see ``tripy_lab.mlir.program``): it walks the ops of
``program.main()`` and uses its own table keyed by op name (``"tensorrt.element_wise"`` ...).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
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

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "source_ops": list(self.source_ops),
                "source_lines": list(self.source_lines), "output_shapes": [list(s) for s in self.output_shapes],
                "output_dtypes": list(self.output_dtypes), "kernel": self.kernel, "mlir_ops": list(self.mlir_ops)}


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

    last_profile: EngineProfile | None = None  # set by the lab's timing runs; the Engine tab shows it

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


class Engine(ABC):
    name: ClassVar[str]

    @classmethod
    @abstractmethod
    def available(cls) -> tuple[bool, str]:
        """(usable here, why or why not)."""

    @abstractmethod
    def build(self, program, options: BuildOptions) -> CompiledEngine: ...
