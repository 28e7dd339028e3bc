"""``tp.arange``'s two overloads: ``arange(start, stop, step=1, dtype=float32)`` and ``arange(stop, dtype=float32)``."""

from __future__ import annotations

import numpy as np

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_init
from tripy_lab.frontend.tensor import DimensionSize


def _number(param: str, value):
    if isinstance(value, DimensionSize) or (
            isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)):
        return value
    raise_error("Could not find an implementation for function: 'arange'.",
                [f"For parameter: '{param}', expected an instance of type: 'Number | DimensionSize' "
                 f"but got argument of type: '{type(value).__name__}'."])


def arange(*args, **kwargs):
    """Overload 1 ``arange(start, stop, step=1, dtype=float32)``: [start, stop) by step.
    Overload 2 ``arange(stop, dtype=float32)``: [0, stop). ``arange(6, tp.float32)`` is overload 2."""
    unknown = set(kwargs) - {"start", "stop", "step", "dtype"}
    if unknown:
        raise_error("Could not find an implementation for function: 'arange'.",
                    [f"Unexpected keyword arguments: {sorted(unknown)}."])
    second_is_dtype = len(args) == 2 and isinstance(args[1], D.dtype)
    overload2 = "start" not in kwargs and "step" not in kwargs and (
        (len(args) == 1 and "stop" not in kwargs) or second_is_dtype or (not args and "stop" in kwargs))
    if overload2:
        if len(args) > 2:
            raise_error("Could not find an implementation for function: 'arange'.", ["Too many arguments."])
        stop = args[0] if args else kwargs["stop"]
        dtype = args[1] if second_is_dtype else kwargs.get("dtype", D.float32)
        if second_is_dtype and "dtype" in kwargs:
            raise_error("Could not find an implementation for function: 'arange'.",
                        ["Got multiple values for argument: 'dtype'."])
        start, step = 0, 1
    else:
        names = ["start", "stop", "step", "dtype"]
        if len(args) > len(names):
            raise_error("Could not find an implementation for function: 'arange'.", ["Too many arguments."])
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k in bound:
                raise_error("Could not find an implementation for function: 'arange'.",
                            [f"Got multiple values for argument: '{k}'."])
            bound[k] = v
        for req in ("start", "stop"):
            if req not in bound:
                raise_error("Could not find an implementation for function: 'arange'.",
                            [f"Missing argument: '{req}'."])
        start, stop, step = bound["start"], bound["stop"], bound.get("step", 1)
        dtype = bound.get("dtype", D.float32)
    start, stop, step = _number("start", start), _number("stop", stop), _number("step", step)
    if not isinstance(dtype, D.dtype):
        raise_error("Could not find an implementation for function: 'arange'.",
                    [f"For parameter: 'dtype', expected an instance of type: 'tripy.dtype' "
                     f"but got argument of type: '{type(dtype).__name__}'."])
    return ops_init.arange(start, stop, step, dtype)
