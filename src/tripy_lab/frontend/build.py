"""Making trace ops from the frontend: locations, shape-value folding, wrapping results."""

from __future__ import annotations

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.frontend.scopes import op_location
from tripy_lab.frontend.tensor import NUMPY_OF, Tensor, check_python_values, constant, fits_python_number, wrap
from tripy_lab.trace import TraceTensor, apply
from tripy_lab.trace.optable import OPS, record

# Shape arithmetic on known values is folded at trace time, so static shapes stay constants.
_FOLD = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "floor_div": np.floor_divide,
    "div": lambda a, b: np.trunc(a / b).astype(a.dtype),
    "maximum": np.maximum, "minimum": np.minimum,
}


def _fold(kind: str, ins: list[TraceTensor], params: dict):
    values = [t.value for t in ins]
    if kind in _FOLD:
        return _FOLD[kind](*values).astype(np.int32)
    if kind == "concatenate":
        return np.concatenate([v.reshape(-1) for v in values]).astype(np.int32)
    if kind == "reshape":
        return values[0].reshape(tuple(int(v) for v in values[1]))
    return None


def make(kind: str, inputs: list[Tensor | TraceTensor], params: dict | None = None, loc=None) -> list[Tensor]:
    """Record one op; returns its outputs as Tensors (DimensionSize for 0-d shape values).

    ``loc``: the user's line when the caller already looked it up (one frontend call, one line: no second
    stack walk); else it is looked up here."""
    ins = [t.trace_tensor if isinstance(t, Tensor) else t for t in inputs]
    params = params or {}
    if loc is None:
        loc = op_location()
    shape_values = bool(ins)
    for t in ins:  # a loop, not all(...): this runs for every op
        if not t.is_shape:
            shape_values = False
            break
    if shape_values and all(t.value is not None for t in ins):
        folded = _fold(kind, ins, params)
        if folded is not None:
            tt = constant(folded, dtypes.int32, loc, value=folded)
            tt.is_shape = True
            return [wrap(tt)]
    if shape_values and len(ins) == 2 and ins[1].value is not None and ins[1].value.size == 1:
        # x + 0, x - 0, x * 1, x // 1 on shape values: no op needed.
        identity = {"add": 0, "sub": 0, "mul": 1, "floor_div": 1, "div": 1}.get(kind)
        if identity is not None and int(ins[1].value) == identity and ins[0].shape == ins[1].shape:
            return [wrap(ins[0])]
    outs = apply(kind, ins, params, loc)
    if not shape_values and kind not in _SHAPE_KINDS:  # no shape value (is_shape stays False): plain Tensors
        return [_tensor(o) for o in outs]
    for out in outs:
        out.is_shape = out.dtype is dtypes.int32 and out.rank <= 1
    return [wrap(o) for o in outs]


_SHAPE_KINDS = ("shape", "get_dim")
_tensor = Tensor._wrap


def make1(kind: str, inputs, params: dict | None = None, loc=None) -> Tensor:
    return make(kind, inputs, params, loc)[0]


def make_plain(kind: str, ins: list[TraceTensor], loc=None) -> Tensor:
    """``make1(kind, ins)`` for a one-output op without params whose inputs are not all shape values: then ``make``
    folds nothing and marks nothing as a shape, so the op is recorded with its rule's type and wrapped as a plain
    Tensor (element-wise math: most ops of a program)."""
    if loc is None:
        loc = op_location()
    ((shape, dt),) = OPS[kind].rule(ins, {})
    return _tensor(record(kind, ins, tuple(shape), dt, {}, loc))


def shape_constant(values) -> Tensor:
    array = np.asarray(values, dtype=np.int32).reshape(-1)
    tt = constant(array, dtypes.int32, op_location(), value=array)
    tt.is_shape = True
    return wrap(tt)


_F32 = np.dtype(np.float32)
_F32_MAX = float(np.finfo(np.float32).max)


def scalar_constant(value, dt: dtypes.dtype, rank: int = 0, loc=None) -> Tensor:
    """A Python number as a constant of ``dt``; ``rank`` > 0: of shape ``(1,) * rank``, so that it broadcasts
    against a tensor of that rank without the reshape ``match_ranks`` would add."""
    kind = type(value)
    if kind is float and dt is dtypes.float32 and -_F32_MAX <= value <= _F32_MAX:  # x * 2.0: fits, nothing to check
        array = np.asarray(value, dtype=_F32)
    else:
        # never a raw OverflowError or a silent inf; the message is formatted only for a number that does not fit
        if isinstance(value, (int, float, np.integer, np.floating)) and not fits_python_number(value, dt):
            check_python_values(value, dt, where=f"For a Python number used with {dt} data")
        npdt = NUMPY_OF.get(dt) or dtypes.to_numpy(dt)
        if (kind is int and npdt.kind in "iu") or (kind in (int, float) and npdt == _F32 and abs(value) <= _F32_MAX):
            array = np.asarray(value, dtype=npdt)  # checked above: cannot overflow
        else:
            with np.errstate(over="ignore"):  # beyond float16 / bfloat16: inf, as a cast (docs/SEMANTICS.md)
                array = np.asarray(value, dtype=npdt)
    if loc is None:
        loc = op_location()
    if rank:
        # One constant already of rank ``rank`` (all 1s), not a 0-d constant, a shape constant and a reshape:
        # the same value for a third of the ops (``x * 2.0`` is most programs' most common call).
        array = array.reshape((1,) * rank)
    return wrap(record("constant", [], array.shape, dt, {"value": array, "dtype": dt}, loc))
