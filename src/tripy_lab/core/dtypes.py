"""Tripy's dtypes: classes (not instances), as in nvtripy, so ``issubclass(tp.int32, tp.integer)`` works."""

from __future__ import annotations

import ml_dtypes
import numpy as np


class dtype(type):
    """Metaclass of every tripy dtype. ``str(tp.float32) == "float32"``."""

    name: str
    shortname: str
    itemsize: float
    mlir: str
    numpy: str

    def __str__(cls) -> str:
        return cls.name

    def __repr__(cls) -> str:
        return cls.name


class _Base(metaclass=dtype):
    name = "<abstract>"


class integer(_Base):
    """Abstract base of integer dtypes."""


class floating(_Base):
    """Abstract base of floating-point dtypes."""


def _make(name: str, base: type, shortname: str, itemsize: float, mlir: str, numpy_name: str) -> dtype:
    return dtype(name, (base,), {"name": name, "shortname": shortname, "itemsize": itemsize,
                                 "mlir": mlir, "numpy": numpy_name, "__module__": __name__})


float32 = _make("float32", floating, "f32", 4, "f32", "float32")
float16 = _make("float16", floating, "f16", 2, "f16", "float16")
bfloat16 = _make("bfloat16", floating, "bf16", 2, "bf16", "bfloat16")
float8 = _make("float8", floating, "f8", 1, "f8E4M3FN", "float8_e4m3fn")
int4 = _make("int4", integer, "i4", 0.5, "i4", "int4")
int8 = _make("int8", integer, "i8", 1, "i8", "int8")
int32 = _make("int32", integer, "i32", 4, "i32", "int32")
int64 = _make("int64", integer, "i64", 8, "i64", "int64")
bool = _make("bool", _Base, "b", 1, "i1", "bool")  # noqa: A001 - tripy's public name

ALL: tuple[dtype, ...] = (float32, float16, bfloat16, float8, int4, int8, int32, int64, bool)
BY_NAME: dict[str, dtype] = {d.name: d for d in ALL}
BY_MLIR: dict[str, dtype] = {d.mlir: d for d in ALL}
FLOATS = (float32, float16, bfloat16)

# Names users reach for that tripy does not have, and what to use instead.
SUGGESTIONS = {"float64": "float32", "double": "float32", "int16": "int32", "uint8": "int8", "half": "float16"}


def to_numpy(dt: dtype) -> np.dtype:
    """The numpy dtype that holds host data of ``dt`` (bf16/f8/i4 need ml_dtypes)."""
    if dt in (bfloat16, float8, int4):
        return np.dtype(getattr(ml_dtypes, dt.numpy))
    return np.dtype(dt.numpy)


_FROM_NUMPY: dict[np.dtype, dtype] = {}


def from_numpy(npdt) -> dtype:
    """Map a numpy (or ml_dtypes) dtype to a tripy dtype; types tripy lacks map to the nearest one (float64 ->
    float32). ``tp.Tensor`` refuses float64 data before it gets here, as nvtripy does (frontend/tensor.py)."""
    cached = _FROM_NUMPY.get(npdt)
    if cached is None:
        cached = _FROM_NUMPY[npdt] = _from_numpy(npdt)
    return cached


def _from_numpy(npdt) -> dtype:
    npdt = np.dtype(npdt)
    name = npdt.name
    if name in BY_NAME:
        return BY_NAME[name]
    widen = {"float64": float32, "int16": int32, "uint8": int32, "uint16": int32, "bfloat16": bfloat16,
             "float8_e4m3fn": float8, "int4": int4, "uint32": int64}
    if name in widen:
        return widen[name]
    from tripy_lab.core.errors import TripyException

    raise TripyException(f"Unsupported data type: '{name}'.")
