"""Reductions built from the spine's ops and ``top_k``: all, any, var, argmax, argmin, topk, cumsum."""

from __future__ import annotations

import builtins
import math

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_init, ops_math, ops_nn, ops_shape, shapes
from tripy_lab.frontend.build import make, scalar_constant
from tripy_lab.frontend.checks import FLOAT, check_dtype, check_int, check_tensor, norm_dim, norm_dims
from tripy_lab.frontend.tensor import Tensor

TOPK_DTYPES = (D.float32, D.float16, D.bfloat16, D.int32, D.int64)


def _bool_reduce(fn: str, input, dim, keepdim: bool, reducer) -> Tensor:  # noqa: A002
    check_tensor(fn, "input", input)
    if input.dtype is not D.bool:
        raise_error(f"Invalid inputs for function: '{fn}'.",
                    [f"Expected: 'input' to have one of the data types: [bool], but got: {input.dtype}.",
                     f"Note: to check non-bool values, compare them first, e.g. `tp.{fn}(input != 0)`."])
    return ops_math.cast(reducer(ops_math.cast(input, D.int32), dim=dim, keepdim=keepdim), D.bool)


def all(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002 - tripy's names
    """True where every element along ``dim`` is true (all dims when None)."""
    return _bool_reduce("all", input, dim, keepdim, ops_math.prod)


def any(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001,A002
    """True where some element along ``dim`` is true (all dims when None)."""
    return _bool_reduce("any", input, dim, keepdim, ops_math.sum)


def var(input, dim=None, keepdim: bool = False, correction: int = 1) -> Tensor:  # noqa: A002
    """sum((x - mean)^2) / max(0, N - correction) over ``dim``."""
    check_tensor("var", "input", input)
    check_dtype("var", "input", input, FLOAT)
    correction = check_int("var", "correction", correction)
    if input.rank == 0:
        if dim is not None:
            raise_error("Dimension argument must be `None` for scalars.", [f"Got dim: {dim!r}."])
        input = ops_shape.reshape(input, (1,))
        dims, keep_rank0 = [0], True
    else:
        dims, keep_rank0 = norm_dims("var", dim, input.rank), False
    mean = ops_math.mean(input, dim=dims, keepdim=True)
    diff = ops_math.sub(input, mean)
    total = ops_math.sum(ops_math.mul(diff, diff), dim=dims, keepdim=keepdim and not keep_rank0)
    count = [shapes.dim(input, d) for d in dims]
    if keep_rank0:  # a scalar's variance is 0 whatever the correction (nvtripy's test_reduce_ops pins 0, not nan)
        denom = scalar_constant(1.0, input.dtype)
    elif builtins.all(isinstance(c, int) for c in count):
        denom = scalar_constant(float(max(0, math.prod(count) - correction)), input.dtype)
    else:
        n = count[0]
        for c in count[1:]:
            n = n * c
        denom = ops_math.cast(ops_math.maximum(n - correction, 0), input.dtype)
    out = ops_math.div(total, denom)
    return ops_shape.reshape(out, ()) if keep_rank0 else out


def _top_k(fn: str, kind: str, input, k: int, dim: int):  # noqa: A002
    """values, indices of the k largest (kMAX) or smallest (kMIN) along ``dim``; 1-D inputs go through 2-D."""
    if input.rank == 1:
        x = ops_shape.unsqueeze(input, 0)
        values, indices = _top_k(fn, kind, x, k, 1)
        return ops_shape.squeeze(values, 0), ops_shape.squeeze(indices, 0)
    size = input.trace_tensor.shape[dim]
    if k <= 0 or (size is not None and k > size):
        raise_error(f"Invalid value for parameter: 'k' of '{fn}'.",
                    [f"Expected 0 < k <= {size if size is not None else 'the size of dim'} (dim {dim}), but got: {k}."])
    values, indices = make(kind, [input], {"k": k, "dim": dim})
    return values, indices


def topk(input, k: int, dim: int) -> tuple[Tensor, Tensor]:  # noqa: A002
    """The k largest values along ``dim`` (sorted descending) and their int32 indices."""
    check_tensor("topk", "input", input)
    check_dtype("topk", "input", input, TOPK_DTYPES)
    k = check_int("topk", "k", k)
    if input.rank == 0:  # nvtripy (test_reduce.py): a scalar, as one element along dim 0 or -1
        norm_dim("topk", dim, 1)
        x = ops_shape.reshape(input, (1,))
        values, indices = _top_k("topk", "top_k_max", x, k, 0)
        return ops_shape.reshape(values, ()), ops_shape.reshape(indices, ())
    d = norm_dim("topk", dim, input.rank)
    return _top_k("topk", "top_k_max", input, k, d)


def _arg(fn: str, kind: str, input, dim, keepdim: bool) -> Tensor:  # noqa: A002
    check_tensor(fn, "input", input)
    check_dtype(fn, "input", input, TOPK_DTYPES)
    if input.rank == 0:
        if dim is not None:
            raise_error("Dimension argument must be `None` for scalars.", [f"Got dim: {dim!r}."])
        return Tensor(0)
    if dim is None:
        flat = ops_shape.reshape(input, (-1,))
        _, idx = _top_k(fn, kind, flat, 1, 0)
        return ops_shape.reshape(idx, (1,) * input.rank) if keepdim else ops_shape.reshape(idx, ())
    d = norm_dim(fn, dim, input.rank)
    _, idx = _top_k(fn, kind, input, 1, d)
    return idx if keepdim else ops_shape.squeeze(idx, d)


def argmax(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """int32 index of the (first) largest value along ``dim`` (of the flattened tensor when None)."""
    return _arg("argmax", "top_k_max", input, dim, keepdim)


def argmin(input, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """int32 index of the (first) smallest value along ``dim`` (of the flattened tensor when None)."""
    return _arg("argmin", "top_k_min", input, dim, keepdim)


def cumsum(input, dim: int) -> Tensor:  # noqa: A002
    """Running sum along ``dim``: the dim moved last, times an upper-triangular ones matrix, moved back."""
    check_tensor("cumsum", "input", input)
    check_dtype("cumsum", "input", input, FLOAT)
    if input.rank == 0:
        norm_dim("cumsum", dim, 1)
        return input
    d = norm_dim("cumsum", dim, input.rank)
    perm = [i for i in range(input.rank) if i != d] + [d]
    x = ops_shape.permute(input, perm) if d != input.rank - 1 else input
    n = shapes.dim(input, d)
    out = ops_math.matmul(x, ops_nn.triu(ops_init.ones((n, n), input.dtype)))
    if d == input.rank - 1:
        return out
    inverse = [perm.index(i) for i in range(input.rank)]
    return ops_shape.permute(out, inverse)
