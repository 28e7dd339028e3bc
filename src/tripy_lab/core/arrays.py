"""Moving array data between DLPack producers (numpy, cupy, torch, jax) and the host."""

from __future__ import annotations

import numpy as np


def to_host(array) -> np.ndarray:
    """Any array (numpy, DLPack producer on CPU or GPU) as a host numpy array."""
    if isinstance(array, np.ndarray):
        return array
    if isinstance(array, (np.generic, int, float, bool)):
        return np.asarray(array)
    try:
        return np.from_dlpack(array)
    except (TypeError, RuntimeError, BufferError, AttributeError, ValueError):
        pass
    if hasattr(array, "get"):  # cupy
        return array.get()
    if hasattr(array, "detach"):  # torch
        return array.detach().cpu().numpy()
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
