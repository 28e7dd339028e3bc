"""tp.Tensor and tp.DimensionSize: lazy handles on trace tensors."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.arrays import device_kind, to_host
from tripy_lab.core.device import device as Device
from tripy_lab.core.errors import expected, raise_error
from tripy_lab.core.logging import logger
from tripy_lab.frontend.scopes import op_location
from tripy_lab.trace import TraceOp, TraceTensor, apply

# Set by tripy_lab.pipeline at import: runs the one pipeline on a tensor and returns its array.
_EVALUATOR: Callable[[TraceTensor], Any] | None = None


def set_evaluator(fn: Callable[[TraceTensor], Any]) -> None:
    global _EVALUATOR
    _EVALUATOR = fn


def _infer_python_dtype(values) -> dtypes.dtype:
    flat = np.asarray(values, dtype=object).reshape(-1)
    if flat.size == 0:
        return dtypes.float32
    if all(isinstance(v, (bool, np.bool_)) for v in flat):
        return dtypes.bool
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in flat):
        big = any(not -(2**31) <= int(v) < 2**31 for v in flat)
        return dtypes.int64 if big else dtypes.int32
    if all(isinstance(v, (int, float, np.integer, np.floating)) for v in flat):
        return dtypes.float32
    raise_error("Unsupported element type.", [f"Got element of type: {type(flat[0]).__name__}."])


def _python_array(data, dt: dtypes.dtype) -> np.ndarray:
    """Python data as an array of ``dt``. Python floats become float32 (as in nvtripy), so a finite value beyond
    float32's range is an error rather than inf; so is an int beyond int64's range (never a raw OverflowError)."""
    npdt = dtypes.to_numpy(dt)
    try:
        with np.errstate(over="ignore"):
            array = np.asarray(data, dtype=npdt)
    except OverflowError:
        array = None
    if array is not None and not (array.dtype.kind == "f" and np.isinf(array).any()):
        return array
    check_python_values(data, dt)
    if array is None:
        raise_error("Data does not fit its data type.", [f"Converting the data to {dt} failed."])
    return array  # the only infs are infs in the data


def check_python_values(data, dt: dtypes.dtype, where: str = "For parameter: 'data'") -> None:
    """Raise for the first Python number in ``data`` that ``dt`` cannot hold: an int outside an integer dtype's
    range; a finite float beyond float32's range for a float dtype (Python floats become float32 first, as in
    nvtripy; narrower floats then overflow to inf as a cast does, docs/SEMANTICS.md)."""
    if fits_python_number(data, dt):
        return
    npdt = NUMPY_OF.get(dt) or dtypes.to_numpy(dt)
    check = npdt if npdt.kind in "iu" else np.dtype(np.float32) if issubclass(dt, dtypes.floating) else None
    for v in np.asarray(data, dtype=object).reshape(-1):
        if isinstance(v, (bool, np.bool_)) or not _does_not_fit(v, check):
            continue
        shown = repr(v) if len(repr(v)) <= 40 else f"{repr(v)[:20]}... ({len(repr(v))} digits)"
        if npdt.kind in "iu":
            info = np.iinfo(npdt)
            raise_error(f"Value {shown} does not fit in {dt}.",
                        [f"{where}, expected integers in [{info.min}, {info.max}] (the range of {dt}) "
                         f"but got: {shown}."])
        raise_error(f"Value {shown} is not representable in float32: it would become inf.",
                    [f"{where}, expected values of magnitude at most {float(np.finfo(check).max):.7g} "
                     f"(the largest float32) but got: {shown}.",
                     "Python floats become float32, as in nvtripy: scale the data so that it fits."])


_F32_MAX = float(np.finfo(np.float32).max)
NUMPY_OF: dict[dtypes.dtype, np.dtype] = {d: dtypes.to_numpy(d) for d in dtypes.ALL}  # per scalar operand
_INT_RANGES: dict[np.dtype, tuple[int, int]] = {}


def fits_python_number(data, dt: dtypes.dtype) -> bool:
    """True when ``check_python_values(data, dt)`` has nothing to check: ``dt`` is not an integer or float dtype,
    or ``data`` is one Python number well inside its range (every ``x * 2``: no numpy, no message formatted)."""
    npdt = NUMPY_OF.get(dt) or dtypes.to_numpy(dt)
    check = npdt if npdt.kind in "iu" else _F32_DTYPE if issubclass(dt, dtypes.floating) else None
    return check is None or _fits_scalar(data, check)


_F32_DTYPE = np.dtype(np.float32)


def _fits_scalar(data, check: np.dtype) -> bool:
    """The common case of one Python number well inside ``check``'s range, without numpy (every ``x * 2``)."""
    kind = type(data)
    if kind is float:
        return check.kind == "f" and -_F32_MAX <= data <= _F32_MAX
    if kind is int and check.kind in "iu":
        bounds = _INT_RANGES.get(check)
        if bounds is None:
            info = np.iinfo(check)
            bounds = _INT_RANGES[check] = (int(info.min), int(info.max))
        return bounds[0] <= data <= bounds[1]
    return False


def _does_not_fit(v, npdt: np.dtype) -> bool:
    try:
        if npdt.kind in "iu":
            return not np.iinfo(npdt).min <= int(v) <= np.iinfo(npdt).max
        f = float(v)
    except OverflowError:
        return True
    with np.errstate(over="ignore"):
        return math.isfinite(f) and not np.isfinite(npdt.type(f))


def _reject_unsupported_array(npdt: np.dtype) -> None:
    """nvtripy has no float64: a float64 DLPack/numpy array raises there (no silent narrowing), and here too."""
    if npdt == np.float64:
        raise_error("Unsupported data type: 'float64'.",
                    ["Tripy has no float64 (its floats are float32, float16, bfloat16 and float8); a float64 array "
                     "is not narrowed silently, since values beyond float32's range would become inf.",
                     "Convert it first: `tp.Tensor(array.astype(np.float32))`."])


def _check_ragged(data, path="data") -> None:
    if isinstance(data, (list, tuple)) and data and isinstance(data[0], (list, tuple)):
        lengths = {len(d) if isinstance(d, (list, tuple)) else -1 for d in data}
        if len(lengths) > 1:
            raise_error("Mismatched dimension sizes in provided sequence.",
                        [f"Sub-sequences of {path} have lengths {sorted(lengths)}."])
        for d in data:
            _check_ragged(d, path)


def device_of(array) -> Device:
    return Device(device_kind(array))


def constant(array, dt: dtypes.dtype, location=None, value=None, name: str | None = None) -> TraceTensor:
    (out,) = apply("constant", [], {"value": array, "dtype": dt}, location)
    out.value = value
    if name:
        out.name = name
    return out


class Tensor:
    """A lazily evaluated tensor. Ops record trace ops; ``eval()`` runs the pipeline."""

    trace_tensor: TraceTensor

    def __init__(self, data: Any, dtype: dtypes.dtype | None = None, device: Device | None = None,
                 name: str | None = None):
        loc = op_location()
        if data is None:
            raise_error("Data argument to Tensor must not be None.")
        if isinstance(data, Tensor):
            raise_error("Cannot initialize Tensor with another Tensor.")
        python_data = isinstance(data, (bool, int, float, list, tuple))
        if device is not None and not python_data:
            raise_error("Device can only be specified for Python lists and numbers.")
        if dtype is not None and not (isinstance(data, (list, tuple)) and len(data) == 0):
            raise_error("Data type can only be specified for empty lists.")
        if python_data:
            _check_ragged(data)
            dt = dtype or _infer_python_dtype(data)
            array = _python_array(data, dt)
            if device is not None and device.kind == "gpu":  # tp.device("gpu"): allocate on the GPU
                from tripy_lab.frontend.ops_device import to_gpu

                array = to_gpu(array)
        elif hasattr(data, "__dlpack__") or isinstance(data, np.ndarray) or hasattr(data, "__array__"):
            if isinstance(data, np.ma.MaskedArray):
                raise_error("Unsupported data for Tensor: a numpy masked array.",
                            ["Its mask would be dropped. Fill the masked values first: `tp.Tensor(data.filled(0))`, "
                             "or pass `data.data` if the mask does not matter."])
            array = data if hasattr(data, "__dlpack__") or isinstance(data, np.ndarray) else np.asarray(data)
            if getattr(array, "shape", None) is None or getattr(array, "dtype", None) is None:
                array = to_host(array)  # an object that only speaks DLPack: read through numpy (zero-copy)
            host_dtype = getattr(array, "dtype", None)
            host_dtype = to_host(array).dtype if host_dtype is None or not isinstance(
                host_dtype, np.dtype) else host_dtype
            _reject_unsupported_array(host_dtype)
            dt = dtypes.from_numpy(host_dtype)
            if isinstance(array, np.ndarray) and array.dtype != dtypes.to_numpy(dt):
                array = array.astype(dtypes.to_numpy(dt))
            if isinstance(array, np.ndarray) and not array.flags.c_contiguous:
                # nvtripy refuses non-canonical strides ("Non-canonical strides are not supported"): a limit of
                # MLIR-TensorRT's runtime memrefs, not of the values. A constant is copied into the program here
                # anyway, so it is made contiguous, with a note (docs/coverage.md, "behaviour").
                logger.info("tp.Tensor: an array with non-canonical strides (e.g. a transpose) was copied to a "
                            "contiguous one; nvtripy refuses such arrays (use np.ascontiguousarray there).",
                            mode="once")
                array = np.ascontiguousarray(array)
        else:
            raise_error("Unsupported data for Tensor.", [f"Got an object of type: {type(data).__name__}."])
        self.trace_tensor = constant(array, dt, loc, name=name)

    @classmethod
    def _from_array(cls, array, dt: dtypes.dtype) -> Tensor:
        """An evaluated tensor around an engine's output: no data checks, no stack walk (the hot path)."""
        t = object.__new__(_OutputTensor)
        t._array = array
        t._dtype = dt
        return t

    @classmethod
    def _wrap(cls, tt: TraceTensor) -> Tensor:
        t = object.__new__(cls)
        t.trace_tensor = tt
        return t

    # ---- properties ----
    @property
    def dtype(self) -> dtypes.dtype:
        return self.trace_tensor.dtype

    @property
    def rank(self) -> int:
        return self.trace_tensor.rank

    ndim = rank

    @property
    def name(self) -> str:
        return self.trace_tensor.name

    @name.setter
    def name(self, value: str) -> None:
        self.trace_tensor.name = value

    @property
    def shape(self):
        from tripy_lab.frontend import shapes

        return shapes.shape_of(self)

    @property
    def device(self) -> Device:
        producer = self.trace_tensor.producer
        if producer is not None and producer.kind == "constant":
            return device_of(producer.params["value"])
        return Device("gpu")

    def _is_evaluated(self) -> bool:
        producer = self.trace_tensor.producer
        return producer is not None and producer.kind == "constant"

    def _data(self):
        return self.trace_tensor.producer.params["value"]

    # ---- evaluation ----
    def eval(self) -> Tensor:
        if self._is_evaluated():
            return self
        if _EVALUATOR is None:
            raise_error("No evaluator is registered; import tripy_lab, not tripy_lab.frontend alone.")
        array = _EVALUATOR(self.trace_tensor)
        tt = self.trace_tensor
        (const,) = apply("constant", [], {"value": array, "dtype": tt.dtype}, tt.location)
        # Keep this TraceTensor object (others may hold it) but make a constant its producer.
        op = const.producer
        op.outputs = [tt]
        tt.producer = op
        if tt.value is None and isinstance(array, np.ndarray) and array.size <= 16 and tt.dtype in (
                dtypes.int32, dtypes.int64) and isinstance(self, DimensionSize):
            tt.value = array
        tt.shape = tuple(int(d) for d in np.shape(array)) if hasattr(array, "shape") else tt.shape
        return self

    def numpy(self) -> np.ndarray:
        return to_host(self.eval()._data())

    def tolist(self):
        array = self.numpy()
        if self.dtype in (dtypes.float16, dtypes.bfloat16, dtypes.float8):
            array = array.astype(np.float32)
        if self.dtype is dtypes.int4:
            array = array.astype(np.int32)
        return array.tolist()

    def __array__(self, dtype=None, copy=None):
        array = self.numpy()
        return array.astype(dtype) if dtype is not None else array

    def __dlpack__(self, *args, **kwargs):
        data = self.eval()._data()
        if isinstance(data, np.ndarray) and data.dtype.kind == "V":
            raise_error("DLPack cannot export this dtype.", [f"dtype: {self.dtype}"])
        return data.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self.eval()._data().__dlpack_device__()

    def __repr__(self) -> str:
        array = self.numpy()
        if self.dtype in (dtypes.bfloat16, dtypes.float8, dtypes.int4):
            array = array.astype(np.float32 if self.dtype is not dtypes.int4 else np.int32)
        body = np.array2string(array, separator=", ", threshold=100, edgeitems=3,
                               formatter={"float_kind": lambda v: f"{v:g}"}, prefix="tensor(")
        return f"tensor({body}, dtype={self.dtype}, loc={self.device}, shape={tuple(array.shape)})"

    __str__ = __repr__

    def __bool__(self) -> bool:
        array = self.numpy()
        if array.size != 1:
            raise_error("Boolean value of a Tensor with more than one value is ambiguous")
        return bool(array.reshape(-1)[0])

    def __iter__(self):
        raise TypeError("Iterating over tensors is not supported")

    __hash__ = object.__hash__

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        from tripy_lab.frontend import ops

        if name in ops.METHODS:
            fn = ops.METHODS[name]
            return lambda *a, **k: fn(self, *a, **k)
        # nvtripy's message and hint: a free function's name, or a close Tensor attribute for a typo
        msg = f"Module: 'tripy_lab.Tensor' does not have attribute: '{name}'"
        if name in ops.PUBLIC:
            msg += f". Did you mean: 'tripy_lab.{name}'?"
        else:
            import difflib

            close = difflib.get_close_matches(name, [n for n in dir(type(self)) if not n.startswith("_")]
                                              + list(ops.METHODS), n=1)
            msg += f". Did you mean: '{close[0]}'?" if close else ""
        raise AttributeError(msg)


class _OutputTensor(Tensor):
    """An Executable's output: its trace tensor is made only when something asks for it."""

    @property
    def trace_tensor(self) -> TraceTensor:
        tt = self.__dict__.get("_tt")
        if tt is None:
            tt = TraceTensor(shape=tuple(self._array.shape), dtype=self._dtype)
            tt.producer = TraceOp("constant", [], [tt], {"value": self._array, "dtype": self._dtype})
            self.__dict__["_tt"] = tt
        return tt

    @trace_tensor.setter
    def trace_tensor(self, tt: TraceTensor) -> None:
        self.__dict__["_tt"] = tt


class DimensionSize(Tensor):
    """A 0-d int32 tensor that stands for one value of a shape."""

    def __init__(self, data: int, name: str | None = None):
        if isinstance(data, bool) or not isinstance(data, (int, np.integer)):
            raise_error("DimensionSize data must be an int.", [f"Got: {data!r}."])
        if not -(2**31) <= int(data) < 2**31:
            raise_error(f"Value {int(data)} does not fit in int32.",
                        [expected("data", int(data), "an int32 value (a DimensionSize is int32: "
                                  f"[{-(2**31)}, {2**31 - 1}])")])
        array = np.asarray(int(data), dtype=np.int32)
        self.trace_tensor = constant(array, dtypes.int32, op_location(), value=array, name=name)
        self.trace_tensor.is_shape = True

    def __int__(self) -> int:
        return int(self.numpy())

    __index__ = __int__

    def __repr__(self) -> str:
        return str(int(self))

    __str__ = __repr__


def wrap(tt: TraceTensor) -> Tensor:
    """A Tensor (or DimensionSize for 0-d int32 shape values) for a trace tensor."""
    if tt.dtype is dtypes.int32 and tt.rank == 0 and tt.is_shape:
        return DimensionSize._wrap(tt)
    return Tensor._wrap(tt)
