"""Precision what-ifs of one program: the same function or Module at another compute dtype (float16 /
bfloat16) or with int8 weight-only Linear layers. ``variant`` returns a new callable and new args; the
original function, Module and args are never mutated (Modules are copied, parameters re-made as constants)."""

from __future__ import annotations

import copy

import numpy as np

from tripy_lab.core import dtypes as D
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend.modules import DefaultParameter, Linear, Module, OptionalParameter
from tripy_lab.frontend.tensor import Tensor

QUANTIZE = (None, "int8")


def _dtype(value) -> D.dtype | None:
    if value is None:
        return None
    if isinstance(value, D.dtype) and value in D.FLOATS:
        return value
    if isinstance(value, str) and D.BY_NAME.get(value) in D.FLOATS:
        return D.BY_NAME[value]
    raise_error("Invalid value for parameter: 'dtype' of variant().",
                [f"Expected one of 'float32', 'float16', 'bfloat16' (a name or a tp dtype) or None, "
                 f"but got: {value!r}."])


def _is_float(dt) -> bool:
    return dt in D.FLOATS


def _cast_array(array: np.ndarray, dt: D.dtype) -> np.ndarray:
    return np.asarray(array).astype(D.to_numpy(dt))


def _cast_tensor(t: Tensor, dt: D.dtype | None) -> Tensor:
    """A new constant Tensor holding ``t``'s values in ``dt`` (float tensors only; others returned as is)."""
    if dt is None or not _is_float(t.dtype) or t.dtype is dt:
        return t
    out = Tensor(_cast_array(t.numpy(), dt))
    if t.trace_tensor.name:
        out.name = t.trace_tensor.name
    return out


def _cast_arg(value, dt: D.dtype | None):
    """InputInfos, arrays and Tensors (also inside lists/tuples/dicts) with a float dtype, in ``dt``."""
    if dt is None:
        return value
    if isinstance(value, InputInfo):
        return InputInfo(value.shape_spec(), dt) if _is_float(value.dtype) else value
    if isinstance(value, DimensionInputInfo):
        return value
    if isinstance(value, Tensor):
        return _cast_tensor(value, dt)
    if isinstance(value, np.ndarray):
        return _cast_array(value, dt) if value.dtype.kind == "f" or value.dtype == D.to_numpy(D.bfloat16) else value
    if isinstance(value, (list, tuple)):
        out = [_cast_arg(v, dt) for v in value]
        return type(value)(out) if isinstance(value, tuple) else out
    if isinstance(value, dict):
        return {k: _cast_arg(v, dt) for k, v in value.items()}
    if hasattr(value, "__dlpack__") and hasattr(value, "dtype"):  # jax / torch arrays: through the host
        host = np.asarray(value)
        return _cast_array(host, dt) if host.dtype.kind == "f" else value
    return value


def int8_weight_scale(weight: np.ndarray) -> np.ndarray:
    """Per-output-channel symmetric scale: max |w| of each row / 127 (rows of zeros get scale 1)."""
    amax = np.max(np.abs(np.asarray(weight, dtype=np.float32)), axis=1)
    return np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)


def _quantized_linear(layer: Linear, dt: D.dtype) -> Linear:
    """``layer`` (already copied) as int8 weight-only: weight quantized per output channel (dim 0)."""
    if layer.quant_dtype is not None:
        return layer  # already quantized by its author: keep their scales
    weight = layer.weight
    if not isinstance(weight, Tensor):
        raise_error("Cannot quantize a Linear whose weight is not set.",
                    [f"The weight is {weight!r}: load the state_dict first."])
    scale = Tensor(_cast_array(int8_weight_scale(weight.numpy()), weight.dtype))
    d = layer.__dict__
    d["quant_dtype"], d["weight_quant_dim"] = D.int8, 0
    d["weight_scale"] = scale
    d["input_scale"] = OptionalParameter((), dt)
    return layer


def _clone(module: Module, dt: D.dtype | None, quantize: str | None, prefix: str = "") -> Module:
    """A copy of ``module`` (and its children), parameters cast to ``dt``; the original is untouched."""
    new = copy.copy(module)
    d = new.__dict__

    def convert(value, key):
        if isinstance(value, Module):
            return _clone(value, dt, quantize, f"{prefix}{key}.")
        if isinstance(value, Tensor):
            return _cast_tensor(value, dt)
        if isinstance(value, DefaultParameter):
            return type(value)(value.shape, dt if dt is not None and _is_float(value.dtype) else value.dtype)
        if isinstance(value, (list, tuple)):
            out = [convert(v, f"{key}.{i}") for i, v in enumerate(value)]
            return type(value)(out) if isinstance(value, tuple) else out
        if isinstance(value, dict):
            return {k: convert(v, f"{key}.{k}") for k, v in value.items()}
        return value

    for name, value in list(d.items()):
        if name == "__signature__":
            continue
        d[name] = convert(value, name)
    if dt is not None and _is_float(d.get("dtype")):
        d["dtype"] = dt  # layers build their constants (eps, dequantize's output) in their own dtype
    if quantize == "int8" and isinstance(new, Linear):
        _quantized_linear(new, d.get("dtype", D.float32))
    return new


def variant(func_or_module, args, *, dtype=None, quantize=None):
    """``(callable, args)`` computing in ``dtype`` ("float32"/"float16"/"bfloat16" or a tp dtype): float
    InputInfos / arrays / Tensors in ``args`` and float Module parameters are cast to it (outputs are not cast
    back); ``quantize="int8"`` makes every ``tp.Linear`` int8 weight-only, one scale per output channel
    (``Linear(quant_dtype=tp.int8, weight_quant_dim=0)``)."""
    dt = _dtype(dtype)
    if quantize not in QUANTIZE:
        raise_error("Invalid value for parameter: 'quantize' of variant().",
                    [f"Expected None or 'int8', but got: {quantize!r}."])
    if not callable(func_or_module):
        raise_error("Invalid value for parameter: 'func_or_module' of variant().",
                    [f"Expected a function or tp.Module, but got: {func_or_module!r}."])
    if isinstance(args, dict) or not isinstance(args, (list, tuple)):
        raise_error("Invalid value for parameter: 'args' of variant().",
                    [f"Expected a list or tuple of arguments, but got: {type(args).__name__}."])
    new_args = [_cast_arg(a, dt) for a in args]
    if isinstance(func_or_module, Module):
        return _clone(func_or_module, dt, quantize), new_args
    if quantize is not None:
        raise_error("Cannot quantize a plain function.",
                    ["quantize='int8' replaces the Linear layers of a tp.Module: pass the Module itself."])
    return func_or_module, new_args
