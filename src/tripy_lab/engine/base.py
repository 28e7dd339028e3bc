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


@dataclass
class BuildReport:
    """What the build did: shown in the Log tab and in ``Built.as_text()``."""

    engine: str
    reason: str = ""  # why this engine was chosen
    device: str = "cpu"
    cache: dict[str, Any] = field(default_factory=dict)  # e.g. {"timing_cache": "none", "hits": 1}
    notes: list[str] = field(default_factory=list)
    extra_stages: dict[str, str] = field(default_factory=dict)  # e.g. {"stablehlo": "..."}


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
