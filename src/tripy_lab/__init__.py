"""tripy-lab: a Tripy-compatible API whose every stage (Trace -> MLIR -> engine -> Executable) can be looked at.

``import tripy_lab as tp`` stays light: no jax, IPython, pandas or graphviz are imported here.
"""

from tripy_lab import types  # tp.types: TensorLike, IntLike, ShapeLike
from tripy_lab.core import config
from tripy_lab.core.bounds import Bounds, DimensionInputInfo, InputInfo, NamedDimension
from tripy_lab.core.device import device
from tripy_lab.core.dtypes import (
    bfloat16,
    bool,
    dtype,
    float8,
    float16,
    float32,
    floating,
    int4,
    int8,
    int32,
    int64,
    integer,
)
from tripy_lab.core.errors import TripyException
from tripy_lab.core.logging import logger
from tripy_lab.executable import Executable, Stream, default_stream
from tripy_lab.frontend import DimensionSize, Embedding, LayerNorm, Linear, Module, Sequential, Tensor
from tripy_lab.frontend.modules_nn import BatchNorm, Conv, ConvTranspose, GroupNorm, InstanceNorm
from tripy_lab.frontend.ops import *  # noqa: F403 - the public op namespace
from tripy_lab.frontend.ops import PUBLIC as _OPS
from tripy_lab.pipeline import compile

__version__ = "0.1.0"

__all__ = [
    "Bounds", "DimensionInputInfo", "DimensionSize", "Embedding", "Executable", "InputInfo", "LayerNorm",
    "Linear", "Module", "NamedDimension", "Sequential", "Stream", "Tensor", "TripyException", "bfloat16",
    "bool", "compile", "config", "default_stream", "device", "dtype", "float8", "float16", "float32",
    "floating", "int4", "int8", "int32", "int64", "integer", "logger", *_OPS,
    "BatchNorm", "Conv", "ConvTranspose", "GroupNorm", "InstanceNorm", "types",
]


def __getattr__(name: str):
    from tripy_lab.core.dtypes import SUGGESTIONS

    if name in SUGGESTIONS:
        hint = f"Did you mean: tripy_lab.{SUGGESTIONS[name]}?"
        raise AttributeError(f"module 'tripy_lab' has no attribute '{name}'. {hint}")
    raise AttributeError(f"module 'tripy_lab' has no attribute '{name}'")


def load_ipython_extension(ipython) -> None:
    """``%load_ext tripy_lab``: registers ``%%tpcompile`` (the lab layer is imported only now)."""
    from tripy_lab.lab.widget.magic import load_ipython_extension as _load

    _load(ipython)
