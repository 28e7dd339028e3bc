"""quantize / dequantize (int8, float8, int4; per-tensor, per-channel, block-wise) and casts to and from
int4 / float8, which go through them with a scale of 1."""

from __future__ import annotations

import numpy as np

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.core.source import user_location
from tripy_lab.frontend import ops_math, ops_shape
from tripy_lab.frontend.build import make1, scalar_constant
from tripy_lab.frontend.checks import FLOAT, check_dtype, check_tensor, names, norm_dim
from tripy_lab.frontend.tensor import Tensor, constant, wrap

QUANT_DTYPES = (D.int4, D.int8, D.float8)


def _scale(fn: str, scale, like: D.dtype) -> Tensor:
    """The scale as a CPU constant; Python numbers and (nested) lists take the dtype ``like``."""
    if isinstance(scale, Tensor):
        if not scale._is_evaluated() or scale.device.kind != "cpu":
            raise_error("`scale` argument must be a constant in CPU memory.",
                        [f"The scale of '{fn}' is folded into the engine, so it must be known when building: "
                         "pass a Python number or list, or a tp.Tensor made from host data."])
        return scale
    if isinstance(scale, bool):
        raise_error(f"Could not find an implementation for function: '{fn}'.",
                    [f"For parameter: 'scale', expected a Tensor or number(s) but got: {scale!r}."])
    try:
        array = np.asarray(scale, dtype=np.float64)
    except (TypeError, ValueError):
        raise_error(f"Could not find an implementation for function: '{fn}'.",
                    ["For parameter: 'scale', expected an instance of type: 'Tensor | Number | Sequence[Number] | "
                     f"Sequence[Sequence[Number]]' but got argument of type: '{type(scale).__name__}'."])
    if array.ndim > 2 or array.dtype == object:
        raise_error(f"Could not find an implementation for function: '{fn}'.",
                    [f"For parameter: 'scale', expected a number or a 1-D / 2-D sequence of numbers, got: {scale!r}."])
    return wrap(constant(array.astype(D.to_numpy(like)), like, user_location()))


def _check_layout(fn: str, input, scale: Tensor, dtype, dim) -> int | None:  # noqa: A002
    op = "quantize" if fn == "quantize" else "dequantize"
    if dim is not None:
        d = norm_dim(fn, dim, input.rank)
        if scale.rank != 1:
            raise_error(f"If dim is given, scale must be a 1-D tensor in per-channel {op} op.",
                        [f"Got a scale of rank {scale.rank}."])
        n, size = scale.trace_tensor.shape[0], input.trace_tensor.shape[d]
        if n is not None and size is not None and n != size:
            raise_error(f"Scale must have one entry per channel in per-channel {op} op.",
                        [f"Got {n} scales for dim {d} of size {size}."])
        return d
    if scale.rank == 2:
        if (input.dtype if fn == "dequantize" else dtype) is not D.int4:
            raise_error(f"Unsupported data type in block-wise {op} op.",
                        ["Block-wise quantization (a 2-D scale) is only supported for int4."])
        if input.rank != 2:
            raise_error(f"Input must be a 2-D tensor in block-wise {op} op.", [f"Got rank: {input.rank}."])
        (d0, d1), (b0, b1) = input.trace_tensor.shape, scale.trace_tensor.shape
        if None not in (d0, b0) and (b0 == 0 or d0 % b0):
            raise_error(f"Scale dim 0 must divide input dim 0 in block-wise {op} op.",
                        [f"Input shape: ({d0}, {d1}), scale shape: ({b0}, {b1})."])
        if None not in (d1, b1) and d1 != b1:
            raise_error(f"Scale dim 1 must equal input dim 1 in block-wise {op} op.",
                        [f"Input shape: ({d0}, {d1}), scale shape: ({b0}, {b1})."])
        return None
    if scale.rank != 0:
        raise_error(f"Scale must be a scalar tensor in per-tensor {op} op.",
                    [f"Got a scale of rank {scale.rank}; pass `dim` for per-channel or a 2-D scale for block-wise."])
    return None


def quantize(input, scale, dtype, dim: int | None = None) -> Tensor:  # noqa: A002 - tripy's parameter name
    """``clamp(round_half_even(input / scale))`` into int8 / int4, or saturated float8 (E4M3FN)."""
    check_tensor("quantize", "input", input)
    check_dtype("quantize", "input", input, FLOAT)
    if dtype not in QUANT_DTYPES:
        raise_error("Unsupported data type in quantize op.",
                    [f"Expected: 'dtype' to be one of [{names(QUANT_DTYPES)}], but got: {dtype!r}."])
    s = _scale("quantize", scale, input.dtype)
    if s.dtype is not input.dtype:
        raise_error("Scale dtype does not match expected dtype in quantize op.",
                    [f"Expected: 'scale' to have the data type of 'input' ({input.dtype}), but got: {s.dtype}."])
    d = _check_layout("quantize", input, s, dtype, dim)
    return _rank1("quantize", input, s, dtype, d)


def dequantize(input, scale, dtype, dim: int | None = None) -> Tensor:  # noqa: A002
    """``input * scale`` back to float32 / float16 / bfloat16 (``dtype`` equals the scale's dtype)."""
    check_tensor("dequantize", "input", input)
    check_dtype("dequantize", "input", input, QUANT_DTYPES)
    if dtype not in FLOAT:
        raise_error("Unsupported data type in dequantize op.",
                    [f"Expected: 'dtype' to be one of [{names(FLOAT)}], but got: {dtype!r}."])
    s = _scale("dequantize", scale, dtype)
    if s.dtype is not dtype:
        raise_error("Scale dtype does not match expected dtype in dequantize op.",
                    [f"Expected: 'scale' to have the data type {dtype} (the 'dtype' argument), but got: {s.dtype}."])
    d = _check_layout("dequantize", input, s, dtype, dim)
    return _rank1("dequantize", input, s, dtype, d)


def _rank1(kind: str, input, scale: Tensor, dtype, dim) -> Tensor:  # noqa: A002
    """The (de)quantize op; a rank-0 input goes through shape (1,), since the layer needs rank >= 1."""
    if input.rank > 0:
        return make1(kind, [input, scale], {"dtype": dtype, "dim": dim})
    out = make1(kind, [ops_shape._reshape_raw(input, [1]), scale], {"dtype": dtype, "dim": dim})
    return ops_shape._reshape_raw(out, [])


# Casts Tripy refuses, (from, to).
_NO_CAST = {(D.float8, D.int4), (D.float8, D.int8), (D.int8, D.float8), (D.int4, D.float8), (D.int4, D.int8),
            (D.int4, D.int64)}


def needs_quant_cast(src: D.dtype, dst: D.dtype) -> bool:
    return D.int4 in (src, dst) or D.float8 in (src, dst) or (src is D.int8 and dst is D.bool)


def cast_quantized(input, dtype) -> Tensor:  # noqa: A002
    """Casts into int4/float8 are ``quantize(x, 1.0)`` (via float32 for non-float inputs); casts out of them
    (and int8 -> bool) are ``dequantize(x, 1.0, float32)`` then an ordinary cast."""
    if (input.dtype, dtype) in _NO_CAST:
        raise_error("Invalid inputs for function: 'cast'.",
                    [f"Casting from {input.dtype} to {dtype} is not supported.",
                     "Unsupported casts: float8 -> int4/int8, int8 -> float8, int4 -> float8/int8/int64."])
    if dtype in (D.int4, D.float8):
        x = input if input.dtype in FLOAT else ops_math.cast(input, D.float32)
        return _rank1("quantize", x, scalar_constant(1.0, x.dtype), dtype, None)
    out = _rank1("dequantize", input, scalar_constant(1.0, D.float32), D.float32, None)
    return out if dtype is D.float32 else ops_math.cast(out, dtype)
