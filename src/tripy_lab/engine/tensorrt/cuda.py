"""CUDA for the tensorrt engine: cuda-python's runtime calls, device buffers and arrays, and which arrays are
used in place (``__cuda_array_interface__``, single-device jax GPU arrays)."""

from __future__ import annotations

import ctypes
import importlib
import math
import weakref
from collections.abc import Sequence

import numpy as np

from tripy_lab.core.errors import TripyException


def import_cudart():
    """cuda-python's runtime bindings (``cuda.bindings.runtime``; ``cuda.cudart`` before 12.6), or None."""
    for name in ("cuda.bindings.runtime", "cuda.cudart"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def cuda_device_count() -> tuple[int, str]:
    """(number of CUDA GPUs, why none) through cuda-python."""
    rt = import_cudart()
    if rt is None:
        return 0, "cuda-python is not installed (pip install cuda-python)"
    try:
        err, count = rt.cudaGetDeviceCount()
    except Exception as exc:  # no driver
        return 0, f"the CUDA runtime failed: {exc}"
    if int(err) != 0:
        return 0, f"no CUDA GPU ({_err_name(err)})"
    return int(count), "" if count else "no CUDA GPU"


def _err_name(err) -> str:
    return getattr(err, "name", str(err))


# =============================================================================================
# CUDA: device buffers, streams, copies (cuda-python runtime API)


class Cuda:
    """The few CUDA runtime calls the engine makes, with errors turned into TripyExceptions."""

    def __init__(self, rt=None):
        self.rt = rt or import_cudart()
        if self.rt is None:
            raise TripyException("cuda-python is not installed.", ["The tensorrt engine runs through cuda-python."])

    def _ok(self, result, what: str):
        result = result if isinstance(result, tuple) else (result,)
        if int(result[0]) != 0:
            raise TripyException(f"CUDA call failed: {what}: {_err_name(result[0])}.")
        return result[1] if len(result) == 2 else result[1:]

    def malloc(self, nbytes: int) -> int:
        return int(self._ok(self.rt.cudaMalloc(max(int(nbytes), 1)), "cudaMalloc"))

    def free(self, ptr: int) -> None:
        try:
            self.rt.cudaFree(ptr)
        except Exception:  # interpreter shutdown: nothing useful to do
            pass

    def htod(self, dst: int, src: np.ndarray) -> None:
        if src.nbytes:
            kind = self.rt.cudaMemcpyKind.cudaMemcpyHostToDevice
            self._ok(self.rt.cudaMemcpy(dst, src.ctypes.data, src.nbytes, kind), "cudaMemcpy host->device")

    def dtoh(self, dst: np.ndarray, src: int) -> None:
        if dst.nbytes:
            kind = self.rt.cudaMemcpyKind.cudaMemcpyDeviceToHost
            self._ok(self.rt.cudaMemcpy(dst.ctypes.data, src, dst.nbytes, kind), "cudaMemcpy device->host")

    def stream(self):
        return self._ok(self.rt.cudaStreamCreate(), "cudaStreamCreate")

    def sync(self, stream) -> None:
        self._ok(self.rt.cudaStreamSynchronize(stream), "cudaStreamSynchronize")

    def device_name(self) -> str:
        try:
            err, prop = self.rt.cudaGetDeviceProperties(0)
            name = prop.name
            return (name.decode(errors="replace") if isinstance(name, bytes) else str(name)).rstrip("\0")
        except Exception:
            return "CUDA GPU"


def handle_int(handle) -> int:
    """A CUDA handle (cuda-python object or int) as an int address."""
    try:
        return int(handle)
    except TypeError:
        return int(handle.getPtr())


class DeviceBuffer:
    """``nbytes`` of device memory, freed when the last reference goes."""

    def __init__(self, cuda: Cuda, nbytes: int):
        self.nbytes = int(nbytes)
        self.ptr = cuda.malloc(self.nbytes)
        self._free = weakref.finalize(self, cuda.free, self.ptr)


# =============================================================================================
# Result arrays

_KDL_CPU, _KDL_CUDA = 1, 2  # DLPack device types


class DeviceArray:
    """A C-contiguous array in device memory: the results when neither cupy nor torch is installed.

    Exports ``__cuda_array_interface__`` (``cupy.asarray(a)``, ``torch.as_tensor(a, device="cuda")``
    and numba use the memory in place) and copies to the host with ``get()`` / ``np.asarray(a)``.
    It is *not* a DLPack producer: a DLPack capsule needs a C-level deleter, which pure Python
    cannot provide safely (a Python deleter breaks when a consumer frees the tensor while an
    exception is in flight). With cupy or torch installed the engine returns their arrays instead,
    which are full DLPack producers.
    """

    def __init__(self, buffer, shape: Sequence[int], dtype, device: tuple[int, int] = (_KDL_CUDA, 0),
                 cuda: Cuda | None = None):  # fmt: skip
        self.buffer = buffer  # anything with .ptr; keeps the memory alive
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.device = device
        self._cuda = cuda

    @property
    def ptr(self) -> int:
        return int(self.buffer.ptr)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def __cuda_array_interface__(self) -> dict:
        if self.device[0] != _KDL_CUDA:
            raise AttributeError("__cuda_array_interface__")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None}

    def get(self) -> np.ndarray:
        """A host copy."""
        out = np.empty(self.shape, self.dtype)
        if self.device[0] == _KDL_CPU:
            ctypes.memmove(out.ctypes.data, self.ptr, self.nbytes)
        else:
            (self._cuda or Cuda()).dtoh(out, self.ptr)
        return out

    def __array__(self, dtype=None, copy=None):
        out = self.get()
        return out if dtype is None else out.astype(dtype)

    def __repr__(self) -> str:
        where = "cuda" if self.device[0] == _KDL_CUDA else "cpu"
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device={where}:{self.device[1]})"


def output_allocator(cuda: Cuda):
    """(name, allocate) where ``allocate(shape, np_dtype) -> (array, device pointer)``.

    cupy arrays if cupy is importable, else torch CUDA tensors, else :class:`DeviceArray`.
    """
    try:
        cupy = importlib.import_module("cupy")

        def with_cupy(shape, dtype):
            arr = cupy.empty(shape, dtype=dtype)
            return arr, int(arr.data.ptr)

        return "cupy", with_cupy
    except ImportError:
        pass
    try:
        torch = importlib.import_module("torch")
        if torch.cuda.is_available():
            def with_torch(shape, dtype):
                tdt = torch.from_numpy(np.empty(0, dtype)).dtype if np.dtype(dtype).name not in (
                    "bfloat16", "float8_e4m3fn") else getattr(torch, np.dtype(dtype).name)
                t = torch.empty(tuple(shape), dtype=tdt, device="cuda")
                return t, int(t.data_ptr())

            return "torch", with_torch
    except ImportError:
        pass

    def with_device_array(shape, dtype):
        buf = DeviceBuffer(cuda, math.prod(shape) * np.dtype(dtype).itemsize)
        return DeviceArray(buf, shape, dtype, (_KDL_CUDA, 0), cuda), buf.ptr

    return "tripy_lab DeviceArray", with_device_array


def _jax_gpu_array(value, dtype: np.dtype):
    """(pointer, shape) of a single-device jax array on a GPU, once it is computed; else None."""
    pointer = getattr(value, "unsafe_buffer_pointer", None)
    devices = getattr(value, "devices", None)
    if pointer is None or devices is None or np.dtype(value.dtype) != dtype:
        return None
    try:
        devs = list(devices())
        if len(devs) != 1 or devs[0].platform not in ("gpu", "cuda"):
            return None
        value.block_until_ready()
        return int(pointer()), tuple(int(d) for d in value.shape)
    except Exception:  # sharded, deleted, or an older jax: copy instead
        return None


def _cuda_array(value, dtype: np.dtype):
    """(pointer, shape) of a C-contiguous CUDA array of ``dtype`` usable in place, else None.

    Anything exporting ``__cuda_array_interface__`` (cupy, torch, numba, :class:`DeviceArray`) and
    single-device jax GPU arrays.
    """
    try:
        cai = getattr(value, "__cuda_array_interface__", None)
    except Exception:  # torch raises for CPU tensors
        cai = None
    if not isinstance(cai, dict):
        return _jax_gpu_array(value, dtype)
    shape = tuple(int(d) for d in cai["shape"])
    if np.dtype(cai["typestr"]) != dtype:
        return None
    strides = cai.get("strides")
    if strides is not None:
        expect, step = [], dtype.itemsize
        for d in reversed(shape):
            expect.append(step)
            step *= max(d, 1)
        if tuple(strides) != tuple(reversed(expect)) and math.prod(shape) > 1:
            return None
    return int(cai["data"][0]), shape
