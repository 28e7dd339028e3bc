"""The one place run-time arguments are checked, before any engine sees them: nothing is converted, wrapped or
truncated, with one exception for every engine alike: non-native byte order (``>f4``) is read in native order. A
float64 array for a float32 parameter, ``np.int64(2**32 + 3)`` or ``np.float32(3.7)`` for a DimensionSize, a
masked array, or an array on a device the engine cannot read is a TripyException naming the parameter, the value
and what was expected, at the user's line (the same on every engine).

    tensor_argument(name, info, value, devices) -> array      # dtype, rank, bounds, device checked
    dimension_argument(name, info, value) -> np.ndarray        # 0-d int32, value checked against bounds
    always_readable(cls, devices, probes) -> bool              # every instance of cls passes the device check
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.arrays import from_dlpack
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import expected, raise_error

# DLPack device types (dlpack.h DLDeviceType) -> the kind of memory they are
DLPACK_DEVICES = {1: "cpu", 3: "cpu", 11: "cpu", 2: "cuda", 13: "cuda", 4: "opencl", 7: "vulkan", 8: "metal",
                  9: "vpi", 10: "rocm", 12: "ext_dev", 14: "oneapi", 15: "webgpu", 16: "hexagon"}


def _describe(value) -> str:
    """A short, bounded description of a value for error messages (never its whole data)."""
    shape = getattr(value, "shape", None)
    dt = getattr(value, "dtype", None)
    kind = type(value).__module__.split(".")[0] + "." + type(value).__name__
    if shape is not None and dt is not None:
        return f"{kind} of dtype {_dtype_name(dt)} and shape {tuple(int(d) for d in shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _dtype_name(dt) -> str:
    """numpy / ml_dtypes / torch / cupy / tripy dtype -> its numpy-style name (``float32``, ``bfloat16``)."""
    if isinstance(dt, dtypes.dtype):
        return dtypes.to_numpy(dt).name
    if isinstance(dt, np.dtype):
        return dt.name
    try:
        return np.dtype(dt).name
    except TypeError:
        return str(dt).rsplit(".", 1)[-1]  # torch.float16 -> float16


def device_kind(value) -> str:
    """'cpu', 'cuda'... : the memory an array is in, from its DLPack device (host when it has none)."""
    fn = getattr(value, "__dlpack_device__", None)
    if fn is None:
        return "cpu"
    try:
        dev_type = int(fn()[0])
    except Exception as exc:  # a broken producer is the caller's object: say so
        return f"unknown ({type(exc).__name__} from __dlpack_device__)"
    return DLPACK_DEVICES.get(dev_type, f"DLPack device type {dev_type}")


def always_readable(cls: type, devices: frozenset[str], probes=None) -> bool:
    """True when every instance of ``cls`` is in memory ``devices`` lists, so a call need not ask each one.

    numpy arrays are host memory. For other classes the engine may vouch (``probes``: one array on each device an
    array of its runtime can be on, e.g. jax's, each backend with one device so none can span several): when
    ``cls`` is their class and each is in listed memory (asked through ``device_kind``, as ``tensor_argument``
    asks), so is every instance. Any other class (subclasses, torch, cupy, tracers) is asked per call."""
    if cls is np.ndarray:
        return "cpu" in devices
    return bool(probes) and all(type(p) is cls and device_kind(p) in devices for p in probes)


def _check_device(name: str, value, devices: frozenset[str], engine: str) -> None:
    kind = device_kind(value)
    if kind not in devices:
        raise_error(f"Invalid device for parameter: '{name}'.",
                    [expected(name, _describe(value), f"an array in {' or '.join(sorted(devices))} memory "
                              f"(the memory the '{engine}' engine reads here)") + f" It is in {kind} memory."])


def tensor_argument(name: str, info: InputInfo, value, devices: frozenset[str], engine: str) -> Any:
    """The array for a Tensor parameter, unchanged, after checking dtype, rank, bounds and device."""
    from tripy_lab.frontend.tensor import Tensor

    want = dtypes.to_numpy(info.dtype).name
    if isinstance(value, Tensor):
        if not value._is_evaluated():
            raise_error(f"Tensor `{name}` is not evaluated.", ["Hint: call `.eval()` on it before passing it in."])
        if value.dtype is not info.dtype:
            raise_error("Unexpected tensor data type.",
                        [f"For parameter {name}, expected data type: {info.dtype} but got: {value.dtype}."])
        array = value._data()
    elif isinstance(value, np.ma.MaskedArray):
        raise_error(f"Invalid argument for parameter: '{name}'.",
                    [expected(name, _describe(value), "a plain array (a masked array's mask would be dropped)"),
                     "Fill the masked values first: `value.filled(fill_value)`, or pass `value.data` if the mask "
                     "does not matter."])
    elif isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
    elif hasattr(value, "__dlpack__"):
        array = value
    else:
        raise_error(f"Invalid argument for parameter: '{name}'.",
                    [expected(name, _describe(value), f"a tripy Tensor or an array (numpy, cupy, torch, jax) of "
                              f"{info.dtype}")])
    _check_device(name, array, devices, engine)
    foreign = not isinstance(array, np.ndarray) and not isinstance(getattr(array, "dtype", None), np.dtype)
    if getattr(array, "dtype", None) is None or getattr(array, "shape", None) is None or (
            foreign and device_kind(array) == "cpu"):
        # A bare DLPack producer, or a host array of another library (torch): looked at through numpy, zero-copy
        # (bfloat16 too), so that every engine reads it alike.
        try:
            array = from_dlpack(array)
        except Exception as exc:
            raise_error(f"Invalid argument for parameter: '{name}'.",
                        [expected(name, _describe(value), "an array with a dtype and a shape"),
                         f"Reading it through DLPack failed: {type(exc).__name__}: {exc}"])
    got = _dtype_name(array.dtype)
    if got != want:
        tripy_name = next((str(d) for d in dtypes.ALL if dtypes.to_numpy(d).name == got), got)
        raise_error("Unexpected tensor data type.",
                    [f"For parameter {name}, expected data type: {info.dtype} but got: {tripy_name}.",
                     f"The argument is a {_describe(array)}; arrays are never converted: cast it before the "
                     f"call (e.g. `.astype(np.{want})`) if the change of values is intended."])
    shape = tuple(int(d) for d in array.shape)
    if len(shape) != info.rank:
        raise_error("Unexpected tensor rank.",
                    [f"For parameter {name}, expected a rank of {info.rank} but got: {len(shape)} "
                     f"(shape {shape})."])
    b = info.shape_bounds
    for i, (d, lo, hi) in enumerate(zip(shape, b.min, b.max)):
        if not lo <= d <= hi:
            raise_error("Unexpected tensor shape.",
                        [f"For parameter {name}, dimension {i} has size {d}, outside the bounds "
                         f"[{lo}, {hi}] (min={b.min}, max={b.max}); got shape {shape}."])
    if isinstance(array, np.ndarray) and not array.dtype.isnative:
        # Big-endian data (``>f4``) read in native order, here for every engine: engines that take the buffer
        # as it is (onnxruntime) would read its bytes swapped. A copy, like any byte swap.
        array = array.astype(array.dtype.newbyteorder("="))
    return array


def _integer_value(name: str, value) -> int:
    """The exact integer a DimensionSize argument holds; floats and bools are refused, never truncated."""
    from tripy_lab.core.arrays import to_host
    from tripy_lab.frontend.tensor import DimensionSize, Tensor

    original = value
    if isinstance(value, DimensionSize) or (isinstance(value, Tensor) and not value._is_evaluated()):
        value = value.eval()
    if isinstance(value, Tensor):
        value = value._data()
    if isinstance(value, (bool, np.bool_)):
        raise_error("Unexpected DimensionSize value.", [expected(name, original, "an integer (not a bool)")])
    if isinstance(value, numbers.Integral):
        return int(value)
    if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__"):
        try:
            value = to_host(value)
        except Exception:
            pass
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise_error("Unexpected tensor rank.", [f"For parameter {name}, expected a scalar DimensionSize, "
                                                    f"but got shape {value.shape}."])
        if value.dtype.kind in "iu":
            return int(value)
        raise_error("Unexpected DimensionSize value.",
                    [expected(name, _describe(original), "an integer scalar (a DimensionSize is int32)")])
    raise_error("Unexpected DimensionSize value.",
                [expected(name, _describe(original) if not isinstance(original, numbers.Number) else original,
                          "an integer (a DimensionSize is int32; floats are not truncated)")])


def dimension_argument(name: str, info: DimensionInputInfo, value) -> np.ndarray:
    """The 0-d int32 array for a DimensionInputInfo parameter; its value must lie inside the bounds."""
    v = _integer_value(name, value)
    lo, hi = info.value_bounds.min[0], info.value_bounds.max[0]
    if not -(2**31) <= v < 2**31:
        raise_error("Unexpected DimensionSize value.", [expected(name, v, "an int32 value (a DimensionSize is int32)")])
    if not lo <= v <= hi:
        raise_error("Unexpected DimensionSize value.",
                    [f"For parameter {name}, value {v} is outside the bounds [{lo}, {hi}] ({info})."])
    return np.asarray(v, dtype=np.int32)  # exact: lo..hi are int32 values
