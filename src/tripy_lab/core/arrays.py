"""Moving array data between DLPack producers (numpy, cupy, torch, jax) and the host."""

from __future__ import annotations

import ctypes

import numpy as np

_DL_UINT, _DL_BFLOAT = 1, 4  # dlpack.h DLDataTypeCode


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):  # dlpack.h DLTensor, up to its dtype
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", _DLDataType)]


# DLManagedTensorVersioned: version (2 x u32), manager_ctx, deleter, flags (u64), then its DLTensor
_TENSOR_OFFSET = {b"dltensor": 0, b"dltensor_versioned": 8 + 3 * ctypes.sizeof(ctypes.c_void_p)}
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype, _capsule_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]


class _Bfloat16AsUint16:
    """A DLPack producer whose bfloat16 capsules say uint16 (numpy cannot import DLPack bfloat16): the same memory
    is then viewed as ml_dtypes.bfloat16, never copied through float32."""

    def __init__(self, producer):
        self._producer = producer
        self.relabelled = False

    def __dlpack_device__(self):
        return self._producer.__dlpack_device__()

    def __dlpack__(self, *args, **kwargs):
        capsule = self._producer.__dlpack__(*args, **kwargs)
        name = _capsule_name(capsule)
        if name in _TENSOR_OFFSET:
            tensor = _DLTensor.from_address(_capsule_pointer(capsule, name) + _TENSOR_OFFSET[name])
            if (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) == (_DL_BFLOAT, 16, 1):
                tensor.dtype.code = _DL_UINT
                self.relabelled = True
        return capsule


def from_dlpack(array) -> np.ndarray:
    """``np.from_dlpack`` (zero-copy, host memory), which also reads bfloat16 producers (torch, jax, DLPack-only
    objects) as ml_dtypes.bfloat16 through a uint16 view of the same memory."""
    try:
        return np.from_dlpack(array)
    except (BufferError, TypeError, RuntimeError, ValueError) as exc:
        first = exc
    proxy = _Bfloat16AsUint16(array)
    try:
        out = np.from_dlpack(proxy)
    except Exception:
        raise first from None
    if not proxy.relabelled:
        raise first
    import ml_dtypes

    return out.view(ml_dtypes.bfloat16)


def to_host(array) -> np.ndarray:
    """Any array (numpy, DLPack producer on CPU or GPU) as a host numpy array."""
    if isinstance(array, np.ndarray):
        return array
    if isinstance(array, (np.generic, int, float, bool)):
        return np.asarray(array)
    try:
        return from_dlpack(array)
    except (TypeError, RuntimeError, BufferError, AttributeError, ValueError):
        pass
    if hasattr(array, "get"):  # cupy
        return array.get()
    if hasattr(array, "detach"):  # torch on a GPU: to host memory, then read as above (bfloat16 included)
        return from_dlpack(array.detach().cpu())
    return np.asarray(array)


def device_kind(array) -> str:
    """'cpu' or 'gpu' for any array, from its DLPack device."""
    if isinstance(array, np.ndarray):
        return "cpu"
    try:
        kind = int(array.__dlpack_device__()[0])
    except Exception:
        return "cpu"
    return "cpu" if kind in (1, 3) else "gpu"
