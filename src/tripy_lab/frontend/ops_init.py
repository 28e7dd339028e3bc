"""Initializers: full/ones/zeros (+ _like), iota, arange."""

from __future__ import annotations

import math

import numpy as np

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_math, ops_shape, shapes
from tripy_lab.frontend.build import make1, scalar_constant, shape_constant
from tripy_lab.frontend.checks import ALL9, check_tensor
from tripy_lab.frontend.tensor import DimensionSize, Tensor

INIT_DTYPES = (D.float32, D.float16, D.bfloat16, D.int8, D.int32, D.int64, D.bool)


def _check_dtype_arg(fn: str, dtype, allowed=INIT_DTYPES):
    if dtype not in allowed:
        raise_error(f"Invalid inputs for function: '{fn}'.",
                    [f"Expected: 'dtype' to be one of [{', '.join(d.name for d in allowed)}], but got: {dtype!r}."])


def full(shape, value, dtype=D.float32) -> Tensor:
    """A tensor of ``shape`` filled with ``value``: a scalar constant broadcast to a shape tensor."""
    _check_dtype_arg("full", dtype)
    if isinstance(value, Tensor):
        scalar = ops_math.cast(value, dtype)
        if scalar.rank != 0:
            raise_error("Invalid value for parameter: 'value' of 'full'.", ["Expected a scalar (0-d) tensor."])
    else:
        if not isinstance(value, (bool, int, float, np.number)):
            raise_error("Invalid value for parameter: 'value' of 'full'.", [f"Expected a number, got: {value!r}."])
        scalar = scalar_constant(value, dtype)
    return make1("broadcast", [scalar, shapes.shape_tensor(shape)])


def ones(shape, dtype=D.float32) -> Tensor:
    """All ones."""
    _check_dtype_arg("ones", dtype)
    return full(shape, 1, dtype)


def zeros(shape, dtype=D.float32) -> Tensor:
    _check_dtype_arg("zeros", dtype)
    return full(shape, 0, dtype)


def _like(fn: str, input, value, dtype) -> Tensor:  # noqa: A002
    check_tensor(fn, "input", input)
    dtype = dtype or input.dtype
    _check_dtype_arg(fn, dtype)
    return full(ops_shape.dims_of(input), value, dtype)


def ones_like(input, dtype=None) -> Tensor:  # noqa: A002
    return _like("ones_like", input, 1, dtype)


def zeros_like(input, dtype=None) -> Tensor:  # noqa: A002
    return _like("zeros_like", input, 0, dtype)


def full_like(input, value, dtype=None) -> Tensor:  # noqa: A002
    return _like("full_like", input, value, dtype)


def iota(shape, dim: int = 0, dtype=D.float32) -> Tensor:
    """0, 1, 2, ... along ``dim``, constant along the other dims."""
    _check_dtype_arg("iota", dtype, ALL9)
    st = shapes.shape_tensor(shape)
    rank = st.trace_tensor.shape[0]
    if not -rank <= dim < max(rank, 1):
        raise_error("Dimension argument is out of bounds.", [f"Expected dim in [{-rank}, {rank}), got: {dim}."])
    compute = dtype if dtype in (D.float32, D.int32, D.int64) else D.float32
    out = make1("iota", [st], {"dim": dim % rank, "dtype": compute})
    return ops_math.cast(out, dtype)


def arange(start, stop=None, step=1, dtype=D.float32) -> Tensor:
    """[start, stop) by step; ``arange(stop)`` starts at 0."""
    if stop is None:
        start, stop = 0, start
    if isinstance(step, (int, float)) and step == 0:
        raise_error("Step in arange cannot be 0.")
    _check_dtype_arg("arange", dtype, ALL9)
    compute = dtype if dtype in (D.float32, D.int32, D.int64) else D.float32
    if all(isinstance(v, (int, float)) for v in (start, stop, step)):
        count = math.ceil((stop - start) / step)
        if count <= 0:
            raise_error("Arange tensor is empty.", [f"start={start}, stop={stop}, step={step}."])
        length = shape_constant([count])
    else:
        diff = stop - start
        length = shapes.shape_tensor([(diff + step - 1) // step if isinstance(step, int) else diff // step])
    start_t = start if isinstance(start, Tensor) else scalar_constant(start, compute)
    step_t = step if isinstance(step, Tensor) else scalar_constant(step, compute)
    if isinstance(start_t, DimensionSize) or start_t.dtype is not compute:
        start_t = ops_math.cast(start_t, compute)
    if isinstance(step_t, DimensionSize) or step_t.dtype is not compute:
        step_t = ops_math.cast(step_t, compute)
    out = make1("arange", [start_t, step_t, length], {"dtype": compute})
    return ops_math.cast(out, dtype)
