"""The public op namespace and the Tensor operators/methods bound to it."""

from __future__ import annotations

from tripy_lab.frontend import ops_index as X
from tripy_lab.frontend import ops_math as M
from tripy_lab.frontend import ops_shape as S
from tripy_lab.frontend.checks import arity_checked
from tripy_lab.frontend.ops_device import copy
from tripy_lab.frontend.ops_index import flip, pad, repeat, split
from tripy_lab.frontend.ops_init import full, full_like, iota, ones, ones_like, zeros, zeros_like
from tripy_lab.frontend.ops_math import (
    allclose,
    cast,
    cos,
    equal,
    exp,
    gelu,
    log,
    masked_fill,
    matmul,
    maximum,
    mean,
    minimum,
    prod,
    relu,
    rsqrt,
    sigmoid,
    silu,
    sin,
    softmax,
    sqrt,
    tanh,
    where,
)
from tripy_lab.frontend.ops_math import max as max  # noqa: A004
from tripy_lab.frontend.ops_math import min as min  # noqa: A004
from tripy_lab.frontend.ops_math import sum as sum  # noqa: A004
from tripy_lab.frontend.ops_nn import avgpool, iota_like, maxpool, outer, plugin, resize, tril, triu
from tripy_lab.frontend.ops_quant import dequantize, quantize
from tripy_lab.frontend.ops_range import arange
from tripy_lab.frontend.ops_reduce import all as all  # noqa: A004
from tripy_lab.frontend.ops_reduce import any as any  # noqa: A004
from tripy_lab.frontend.ops_reduce import argmax, argmin, cumsum, topk, var
from tripy_lab.frontend.ops_shape import (
    concatenate,
    expand,
    flatten,
    gather,
    permute,
    reshape,
    squeeze,
    stack,
    transpose,
    unsqueeze,
)
from tripy_lab.frontend.scopes import public, public_property
from tripy_lab.frontend.tensor import DimensionSize, Tensor

PUBLIC = [
    "allclose", "arange", "cast", "concatenate", "cos", "equal", "exp", "expand", "flatten", "full",
    "full_like", "gather", "gelu", "iota", "log", "masked_fill", "matmul", "max", "maximum", "mean", "min",
    "minimum", "ones", "ones_like", "permute", "prod", "relu", "reshape", "rsqrt", "sigmoid", "silu", "sin",
    "softmax", "sqrt", "squeeze", "stack", "sum", "tanh", "transpose", "unsqueeze", "where", "zeros",
    "zeros_like",
    # issue 3: the rest of Tripy's functions
    "all", "any", "argmax", "argmin", "avgpool", "copy", "cumsum", "dequantize", "flip", "iota_like", "maxpool",
    "outer", "pad", "plugin", "quantize", "repeat", "resize", "split", "topk", "tril", "triu", "var",
]

# Tensor methods that forward to the functions.
METHODS = {
    "cast": cast, "reshape": reshape, "transpose": transpose, "flatten": flatten, "permute": permute,
    "squeeze": squeeze, "unsqueeze": unsqueeze, "copy": copy,
}


def _bind_operators() -> None:
    def reflected(fn):
        return lambda self, other: fn(other, self)

    table = {
        "__add__": M.add, "__radd__": reflected(M.add), "__sub__": M.sub, "__rsub__": reflected(M.sub),
        "__mul__": M.mul, "__rmul__": reflected(M.mul), "__truediv__": M.div,
        "__rtruediv__": reflected(M.div), "__floordiv__": M.floor_div, "__rfloordiv__": reflected(M.floor_div),
        "__mod__": M.mod, "__rmod__": reflected(M.mod), "__pow__": M.pow, "__rpow__": reflected(M.pow),
        "__lt__": M.less, "__gt__": M.greater, "__le__": M.le, "__ge__": M.ge, "__eq__": M.eq, "__ne__": M.ne,
        "__or__": M.logical_or, "__invert__": M.logical_not, "__neg__": M.neg, "__abs__": M.abs,
        "__matmul__": matmul, "__rmatmul__": reflected(matmul), "__getitem__": X.getitem,
    }
    for name, fn in table.items():
        setattr(Tensor, name, public(fn, name))
    Tensor.__hash__ = object.__hash__
    # every op a public call makes shares its CallScope (frontend/scopes.py)
    Tensor.shape = public_property(Tensor.shape, "shape")
    for cls in (Tensor, DimensionSize):
        cls.__init__ = public(cls.__init__, cls.__name__)
    namespace = globals()
    for name in PUBLIC:
        namespace[name] = public(namespace[name], name)
    for name, fn in METHODS.items():
        METHODS[name] = public(fn, name)


_bind_operators()


def _check_arity() -> None:
    """Wrong argument counts are TripyExceptions (nvtripy's function registry), not TypeErrors."""
    namespace = globals()
    for name in PUBLIC:
        namespace[name] = arity_checked(namespace[name], name)
    for name, fn in METHODS.items():
        METHODS[name] = arity_checked(fn, name)


_check_arity()

__all__ = PUBLIC + ["METHODS"]
