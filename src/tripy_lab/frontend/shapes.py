"""Shapes as values: ``t.shape``, DimensionSize arithmetic, and ShapeLike -> 1-D int32 shape tensors."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend.build import make1, shape_constant
from tripy_lab.frontend.tensor import DimensionSize, Tensor


def dim(t: Tensor, i: int) -> int | DimensionSize:
    """Size of dim ``i``: an int when static, else a DimensionSize computed from the tensor's shape."""
    size = t.trace_tensor.shape[i]
    if size is not None:
        return size
    return make1("get_dim", [t], {"dim": i})


def shape_of(t: Tensor):
    """A tuple of ints when every dim is known and ``t`` is not traced from a compile input (nvtripy's rule),
    else a tuple of DimensionSizes (static dims of a compile tracer are DimensionSize constants)."""
    known = t.trace_tensor.shape
    if all(d is not None for d in known) and not t.trace_tensor.is_compile_tracer:
        return tuple(int(d) for d in known)
    return tuple(dim(t, i) if d is None else _const_dim(d) for i, d in enumerate(known))


def _const_dim(value: int) -> DimensionSize:
    return DimensionSize(int(value))


def is_intlike(v) -> bool:
    return (isinstance(v, (int, np.integer)) and not isinstance(v, bool)) or isinstance(v, DimensionSize)


def shape_tensor(shape: Sequence, param: str = "shape") -> Tensor:
    """ShapeLike -> 1-D int32 tensor. Runs of ints become one constant; DimensionSizes are reshaped to [1]."""
    if isinstance(shape, Tensor) and not isinstance(shape, DimensionSize):
        if shape.dtype is not dtypes.int32 or shape.rank != 1:
            raise_error(f"Invalid value for parameter: '{param}'.", ["Expected a 1-D int32 shape tensor."])
        return shape
    if not isinstance(shape, (list, tuple)):
        raise_error(f"Invalid value for parameter: '{param}'.",
                    [f"Expected a sequence of ints or DimensionSizes, but got: {shape!r}."])
    if all(type(v) is int for v in shape):  # the common case (every rank-matching reshape): one constant
        return shape_constant(list(shape))
    for v in shape:
        if not is_intlike(v):
            raise_error(f"Invalid value for parameter: '{param}'.",
                        [f"Expected a sequence of ints or DimensionSizes, but got an element: {v!r}."])
    if all(not isinstance(v, DimensionSize) or v.trace_tensor.value is not None for v in shape):
        return shape_constant([int(v.trace_tensor.value) if isinstance(v, DimensionSize) else int(v)
                               for v in shape])
    pieces: list[Tensor] = []
    run: list[int] = []
    for v in shape:
        if isinstance(v, DimensionSize):
            if run:
                pieces.append(shape_constant(run))
                run = []
            pieces.append(_one_entry(v))
        else:
            run.append(int(v))
    if run:
        pieces.append(shape_constant(run))
    out = pieces[0] if len(pieces) == 1 else make1("concatenate", pieces, {"dim": 0})
    out.trace_tensor.known = tuple(
        None if isinstance(v, DimensionSize) and v.trace_tensor.value is None
        else int(v.trace_tensor.value) if isinstance(v, DimensionSize) else int(v) for v in shape)
    return out


def _one_entry(v: DimensionSize) -> Tensor:
    """A DimensionSize as a 1-D shape tensor: ``t.shape[i]`` read again as one entry (one op, where a reshape to
    [1] of the 0-d size is two trace ops and, lowered, three MLIR ops more), anything else reshaped."""
    op = v.trace_tensor.producer
    if op is not None and op.kind == "get_dim" and not op.params.get("keepdim"):
        return make1("get_dim", [op.inputs[0]], {"dim": op.params["dim"], "keepdim": True})
    return make1("reshape", [v, shape_constant([1])])


def shape_dims(t: Tensor) -> list:
    """Each dim of ``t`` as an int or DimensionSize (for building new shapes)."""
    return [dim(t, i) for i in range(t.rank)]

