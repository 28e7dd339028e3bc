"""Which engines exist, which are usable here, and which one a build gets (and why)."""

from __future__ import annotations

import importlib
import importlib.util

from tripy_lab.core import config
from tripy_lab.core.errors import raise_error
from tripy_lab.engine.base import Engine

# name -> "module:Class"; imported only when used, so `import tripy_lab` never pulls in jax or TensorRT.
ENGINES: dict[str, str] = {
    "reference": "tripy_lab.engine.reference.build:ReferenceEngine",
    "xla": "tripy_lab.engine.xla.build:XlaEngine",
    "tensorrt": "tripy_lab.engine.tensorrt.build:TensorRTEngine",
    "onnxruntime": "tripy_lab.engine.onnx.build:OnnxRuntimeEngine",
}


def engine_class(name: str) -> type[Engine]:
    if name not in ENGINES:
        raise_error(f"Invalid value for parameter: 'engine': {name!r}.",
                    [f"Expected one of: {', '.join(sorted(ENGINES))}."])
    module, _, cls = ENGINES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def _has_cuda_gpu() -> bool:
    try:
        from cuda.bindings import runtime  # cuda-python
    except ImportError:
        return False
    err, count = runtime.cudaGetDeviceCount()
    return int(err) == 0 and count > 0


def default_engine() -> tuple[str, str]:
    """(engine name, reason): tensorrt with a CUDA GPU, else xla when jax is installed, else reference."""
    if _has("tensorrt") and _has_cuda_gpu():
        return "tensorrt", "default: TensorRT is importable and a CUDA GPU is present"
    if _has("jax"):
        why = "TensorRT is not installed" if not _has("tensorrt") else "no CUDA GPU for TensorRT"
        return "xla", f"default: {why}; jax is installed"
    return "reference", "default: neither TensorRT nor jax is installed"


def choose(requested: str | None) -> tuple[str, str]:
    """Resolve an explicit request, then ``tp.config.engine``, then the default."""
    if requested:
        engine_class(requested)
        return requested, "requested by the caller (engine=...)"
    if config.engine:
        engine_class(config.engine)
        return config.engine, "set by tp.config.engine"
    return default_engine()
