"""``tp.copy``: move an evaluated tensor's data between host and GPU memory (eager only)."""

from __future__ import annotations

import importlib

import numpy as np

from tripy_lab.core.arrays import to_host
from tripy_lab.core.device import device as Device
from tripy_lab.core.errors import raise_error
from tripy_lab.core.source import user_location
from tripy_lab.frontend.checks import check_tensor
from tripy_lab.frontend.tensor import Tensor, constant, wrap


def to_gpu(host: np.ndarray):
    """A CUDA array holding ``host``: through cupy or torch, whichever is installed with a usable GPU."""
    if host.dtype.kind not in "biuf" or host.dtype.name in ("bfloat16", "float8_e4m3fn", "int4"):
        raise_error("Copying this data type to the GPU is not supported.",
                    [f"Got dtype: {host.dtype.name}; cast to float32 (or an integer type) first."])
    reasons = []
    for name in ("cupy", "torch"):
        try:
            lib = importlib.import_module(name)
        except ImportError:
            reasons.append(f"{name} is not installed")
            continue
        try:
            if name == "cupy":
                return lib.asarray(host)
            if not lib.cuda.is_available():
                reasons.append("torch sees no CUDA device")
                continue
            return lib.from_numpy(np.ascontiguousarray(host)).cuda()
        except Exception as exc:  # no driver / no device
            reasons.append(f"{name} failed: {exc}")
    raise_error("Placing data on the GPU needs a CUDA GPU and cupy or torch.", reasons)


def copy(input, device) -> Tensor:  # noqa: A002 - tripy's parameter name
    """Evaluate ``input`` and return its data in ``device`` memory (a constant; eager only)."""
    check_tensor("copy", "input", input)
    if not isinstance(device, Device):
        raise_error("Could not find an implementation for function: 'copy'.",
                    ["For parameter: 'device', expected an instance of type: 'tripy.device' "
                     f"but got argument of type: '{type(device).__name__}'."])
    if input.device.kind == device.kind:
        raise_error("Copying within the same device kind is not currently supported.",
                    [f"The tensor is already in {input.device.kind} memory; tp.copy moves data between 'cpu' and "
                     "'gpu'."])
    host = to_host(input.eval()._data())
    array = np.array(host, copy=True) if device.kind == "cpu" else to_gpu(host)
    return wrap(constant(array, input.dtype, user_location()))
