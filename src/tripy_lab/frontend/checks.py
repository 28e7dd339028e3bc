"""Argument checks shared by the ops: dtype contracts, dims, scalar operands."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tripy_lab.core import config, dtypes
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend.build import scalar_constant
from tripy_lab.frontend.tensor import DimensionSize, Tensor

D = dtypes
FLOAT = (D.float32, D.float16, D.bfloat16)
NUMERIC = (D.float32, D.float16, D.bfloat16, D.int8, D.int32, D.int64)
NUMERIC_B = NUMERIC + (D.bool,)
ALL9 = D.ALL


def names(allowed) -> str:
    return ", ".join(d.name for d in allowed)


def check_tensor(fn: str, param: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise_error(f"Could not find an implementation for function: '{fn}'.",
                    [f"For parameter: '{param}', expected an instance of type: 'Tensor' "
                     f"but got argument of type: '{type(value).__name__}'."])
    return value


def check_dtype(fn: str, param: str, t: Tensor, allowed) -> None:
    if config.enable_input_validation and t.dtype not in allowed:
        raise_error(f"Invalid inputs for function: '{fn}'.",
                    [f"Expected: '{param}' to have one of the data types: [{names(allowed)}], "
                     f"but got: {t.dtype}."])


def check_same_dtype(fn: str, params: Sequence[str], tensors: Sequence[Tensor]) -> None:
    first = tensors[0].dtype
    for p, t in zip(params[1:], tensors[1:]):
        if config.enable_input_validation and t.dtype is not first:
            raise_error(f"Invalid inputs for function: '{fn}'.",
                        [f"Expected: '{params[0]}' and '{p}' to have the same data type, "
                         f"but got: {first} and {t.dtype}."])


def check_int(fn: str, param: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise_error(f"Could not find an implementation for function: '{fn}'.",
                    [f"For parameter: '{param}', expected an instance of type: 'int' "
                     f"but got argument of type: '{type(value).__name__}'."])
    return int(value)


def check_float(fn: str, param: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise_error(f"Could not find an implementation for function: '{fn}'.",
                    [f"For parameter: '{param}', expected an instance of type: 'float' "
                     f"but got argument of type: '{type(value).__name__}'."])
    return float(value)


def check_ints(fn: str, **values) -> None:
    """Each keyword is an int parameter of ``fn`` (a layer's constructor): sizes, channel and group counts."""
    for param, value in values.items():
        check_int(fn, param, value)


def check_sequence(fn: str, param: str, value, what: str = "int", intlike: bool = False) -> list:
    """A list/tuple of ints (``intlike``: ints or DimensionSizes), else the overload error naming the parameter."""
    ok = isinstance(value, (list, tuple)) and all(
        (isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)))
        or (intlike and isinstance(v, DimensionSize)) for v in value)
    if not ok:
        raise_error(f"Could not find an implementation for function: '{fn}'.",
                    [f"For parameter: '{param}', expected an instance of type: 'Sequence[{what}]' "
                     f"but got argument: {value!r} of type: '{type(value).__name__}'."])
    return list(value)


def norm_dim(fn: str, dim, rank: int, param: str = "dim") -> int:
    dim = check_int(fn, param, dim)
    if not -rank <= dim < rank:
        raise_error("Dimension argument is out of bounds.",
                    [f"For parameter: '{param}' of '{fn}', expected a value in [{-rank}, {rank}), but got: {dim}."])
    return dim % rank


def norm_dims(fn: str, dims, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    seq = list(dims) if isinstance(dims, (list, tuple)) else [dims]
    out = [norm_dim(fn, d, rank) for d in seq]
    if len(set(out)) != len(out):
        raise_error("Each dimension may only be specified once.", [f"Got dims: {seq}."])
    return out


def operand(fn: str, param: str, value, like: dtypes.dtype, rank: int = 0, loc=None) -> Tensor:
    """A Tensor for ``value``; Python scalars take the dtype ``like`` (lossy casts are refused) and, with ``rank``,
    are reshaped to that rank (see ``scalar_constant``); ``loc``: the user's line, when already looked up."""
    if isinstance(value, Tensor):
        if isinstance(value, DimensionSize) and like is not D.int32 and value.dtype is not like:
            from tripy_lab.frontend import ops_math

            return ops_math.cast(value, like)
        return value
    if isinstance(value, (bool, np.bool_)):
        return scalar_constant(value, like, rank, loc)
    if isinstance(value, (int, np.integer)):
        if like is D.bool:
            raise_error(f"Refusing to automatically cast 'int32' argument to '{like}'.",
                        [f"For parameter: '{param}' of '{fn}', got: {value!r}."])
        return scalar_constant(value, like, rank, loc)
    if isinstance(value, (float, np.floating)):
        if like not in (D.float32, D.float16, D.bfloat16, D.float8):
            raise_error(f"Refusing to automatically cast 'float32' argument to '{like}'.",
                        [f"For parameter: '{param}' of '{fn}', got: {value!r}."])
        return scalar_constant(value, like, rank, loc)
    raise_error(f"Could not find an implementation for function: '{fn}'.",
                [f"For parameter: '{param}', expected a Tensor or a Python number "
                 f"but got argument of type: '{type(value).__name__}'."])


def arity_checked(fn, name: str):
    """``fn`` whose calls with arguments its signature cannot take raise a TripyException (nvtripy's message, then
    Python's and the signature) instead of a TypeError. Only a TypeError pays for the check."""
    import functools
    import inspect

    from tripy_lab.core.errors import TripyException
    from tripy_lab.core.source import user_location

    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    variadic = any(p.kind is p.VAR_POSITIONAL for p in params)
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]

    @functools.wraps(fn)
    def call(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TypeError:
            try:
                sig.bind(*args, **kwargs)
            except TypeError as bad:
                first = (f"Function expects {len(positional)} parameters, but {len(args)} arguments were provided."
                         if not variadic and len(args) > len(positional) else str(bad).capitalize() + ".")
                raise TripyException(f"Could not find an implementation for function: '{name}'.",
                                     [first, f"Signature: {name}{sig}"], user_location()) from None
            raise

    return call
