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


class DimOf:
    """Dynamic dim ``index`` of ``tensor``, for a shape being built inside the frontend (a full ``:`` slice's
    size, a ``-1`` that is one input dim): ``shape_tensor`` reads it as one ``get_dim`` (keepdim) entry, with no
    0-d DimensionSize made first that nothing else would use. Never handed to users."""

    __slots__ = ("tensor", "index")

    def __init__(self, tensor: Tensor, index: int):
        self.tensor, self.index = tensor, index


def dim_or_marker(t: Tensor, i: int):
    """``dim(t, i)`` for a shape entry only: an int when static, else a DimOf."""
    size = t.trace_tensor.shape[i]
    return size if size is not None else DimOf(t, i)


def shape_tensor(shape: Sequence, param: str = "shape") -> Tensor:
    """ShapeLike -> 1-D int32 tensor. Runs of ints become one constant; DimensionSizes (and the frontend's
    DimOf markers) become one-entry shape tensors."""
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
        if not is_intlike(v) and type(v) is not DimOf:
            raise_error(f"Invalid value for parameter: '{param}'.",
                        [f"Expected a sequence of ints or DimensionSizes, but got an element: {v!r}."])
    known = tuple([_entry_now(v) for v in shape])
    if None not in known:
        return shape_constant(list(known))
    pieces: list[Tensor] = []
    run: list[int] = []
    for v, value in zip(shape, known):
        if value is None:
            if run:
                pieces.append(shape_constant(run))
                run = []
            pieces.append(_dim_entry(v.tensor, v.index) if type(v) is DimOf else _one_entry(v))
        else:
            run.append(value)
    if run:
        pieces.append(shape_constant(run))
    out = pieces[0] if len(pieces) == 1 else make1("concatenate", pieces, {"dim": 0})
    out.trace_tensor.known = known
    return out


def value_now(v: DimensionSize) -> int | None:
    """A DimensionSize's value when it is known at trace time (a static dim, folded arithmetic), else None."""
    value = v.trace_tensor.value
    return None if value is None else int(value)


def _entry_now(v) -> int | None:
    """A shape entry's value at trace time: an int as it is, a DimensionSize's when known, else None."""
    if type(v) is DimOf:
        return None
    return value_now(v) if isinstance(v, DimensionSize) else int(v)


def _dim_entry(t, i: int) -> Tensor:
    """Dim ``i`` of ``t`` as a one-entry 1-D shape tensor: one ``get_dim`` (keepdim), where a 0-d size reshaped to
    [1] is three trace ops and, lowered, three MLIR ops more."""
    return make1("get_dim", [t], {"dim": i, "keepdim": True})


def _one_entry(v: DimensionSize) -> Tensor:
    """A DimensionSize as a one-entry shape tensor: ``t.shape[i]`` read again as such (``_dim_entry``), anything
    else reshaped."""
    op = v.trace_tensor.producer
    if op is not None and op.kind == "get_dim" and not op.params.get("keepdim"):
        return _dim_entry(op.inputs[0], op.params["dim"])
    return make1("reshape", [v, shape_constant([1])])


def shape_dims(t: Tensor) -> list:
    """Each dim of ``t`` as an int or DimensionSize (for building new shapes)."""
    return [dim(t, i) for i in range(t.rank)]

