"""The reference engine's table: MLIR op name -> its numpy meaning (``build.py`` runs the program with it).

It is the test oracle for the other engines, so each entry is the plain meaning of the op.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.reference.ops_nn import TABLE_NN
from tripy_lab.engine.semantics import float_floor_divide, float_to_int, int_divide, is_float, is_int
from tripy_lab.mlir.dialect import attr_value


def np_dtype(tensor_type) -> np.dtype:
    return dtypes.to_numpy(dtypes.BY_MLIR[str(tensor_type.element_type)])


def _result_dtype(op, i: int = 0) -> np.dtype:
    return np_dtype(op.results[i].type)


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


_ELEMENT_WISE: dict[str, Callable] = {
    "kSUM": np.add, "kSUB": np.subtract, "kPROD": np.multiply, "kMAX": np.maximum, "kMIN": np.minimum,
    "kPOW": np.power, "kAND": np.logical_and, "kOR": np.logical_or, "kXOR": np.logical_xor,
    "kEQUAL": np.equal, "kGREATER": np.greater, "kLESS": np.less,
}


def _element_wise(op, a, b):
    with np.errstate(all="ignore"):  # IEEE results (inf, nan) as a GPU gives them, without numpy's warnings
        return _element_wise_values(op, a, b)


def _element_wise_values(op, a, b):
    kind = attr_value(op, "elementwiseOperation")
    out_dt = _result_dtype(op)
    if kind == "kDIV":
        # TensorRT integer division truncates toward zero (exactly: no detour through float64, which rounds
        # int64 values above 2**53).
        res = int_divide(np, a, b, kind) if is_int(a.dtype) else np.true_divide(a, b)
    elif kind == "kFLOOR_DIV":
        res = int_divide(np, a, b, kind) if is_int(a.dtype) else float_floor_divide(np, a, b)
    else:
        res = _ELEMENT_WISE[kind](a, b)
    return np.asarray(res).astype(out_dt)


_UNARY: dict[str, Callable] = {
    "kEXP": np.exp, "kLOG": np.log, "kSQRT": np.sqrt, "kRECIP": lambda x: 1 / x, "kABS": np.abs,
    "kNEG": np.negative, "kSIN": np.sin, "kCOS": np.cos, "kTAN": np.tan, "kSINH": np.sinh, "kCOSH": np.cosh,
    "kASIN": np.arcsin, "kACOS": np.arccos, "kATAN": np.arctan, "kASINH": np.arcsinh, "kACOSH": np.arccosh,
    "kATANH": np.arctanh, "kCEIL": np.ceil, "kFLOOR": np.floor, "kERF": _erf, "kNOT": np.logical_not,
    "kSIGN": np.sign, "kROUND": np.round,
}


def _unary(op, x):
    with np.errstate(all="ignore"):
        return np.asarray(_UNARY[attr_value(op, "unaryOperation")](x)).astype(_result_dtype(op))


def _softplus(z):
    """log(1 + exp(z)) without overflow for large z."""
    return np.maximum(z, 0) + np.log1p(np.exp(-np.abs(z)))


def _activation(op, x):
    kind = attr_value(op, "activationType")
    xf = x.astype(np.float64)
    alpha = attr_value(op, "alpha")
    beta = attr_value(op, "beta")
    fns = {
        "kRELU": lambda: np.maximum(xf, 0), "kSIGMOID": lambda: 1 / (1 + np.exp(-xf)), "kTANH": lambda: np.tanh(xf),
        "kGELU_ERF": lambda: 0.5 * xf * (1 + _erf(xf / math.sqrt(2))),
        "kGELU_TANH": lambda: 0.5 * xf * (1 + np.tanh(math.sqrt(2 / math.pi) * (xf + 0.044715 * xf**3))),
        "kLEAKY_RELU": lambda: np.where(xf >= 0, xf, alpha * xf), "kCLIP": lambda: np.clip(xf, alpha, beta),
        "kSOFTSIGN": lambda: xf / (1 + np.abs(xf)), "kSOFTPLUS": lambda: alpha * _softplus(beta * xf),
        "kELU": lambda: np.where(xf >= 0, xf, alpha * (np.exp(xf) - 1)),
        "kSELU": lambda: beta * np.where(xf >= 0, xf, alpha * (np.exp(xf) - 1)),
        "kHARD_SIGMOID": lambda: np.clip(alpha * xf + beta, 0, 1),
        "kSCALED_TANH": lambda: alpha * np.tanh(beta * xf),
        "kTHRESHOLDED_RELU": lambda: np.where(xf > alpha, xf, 0),
    }
    with np.errstate(over="ignore"):
        return fns[kind]().astype(x.dtype)


def _matmul(op, a, b):
    if attr_value(op, "op0") == "kTRANSPOSE":
        a = np.swapaxes(a, -1, -2)
    if attr_value(op, "op1") == "kTRANSPOSE":
        b = np.swapaxes(b, -1, -2)
    wide = np.float32 if a.dtype != np.float64 else np.float64
    return np.matmul(a.astype(wide), b.astype(wide)).astype(_result_dtype(op))


def _reduce(op, x):
    kind = attr_value(op, "reduceOperation")
    axes = tuple(attr_value(op, "reduceAxes"))
    keep = bool(attr_value(op, "keepDimensions"))
    fn = {"kSUM": np.sum, "kPROD": np.prod, "kMAX": np.max, "kMIN": np.min, "kAVG": np.mean}[kind]
    acc = x.astype(np.float32) if x.dtype.kind == "f" or x.dtype == ml_dtypes.bfloat16 else x
    res = fn(acc, axis=axes, keepdims=keep)
    if kind == "kAVG" and x.dtype.kind in "iu":
        res = np.trunc(res)
    return np.asarray(res).astype(_result_dtype(op))


def _softmax(op, x):
    axis = attr_value(op, "axis")
    xf = x.astype(np.float32)
    e = np.exp(xf - np.max(xf, axis=axis, keepdims=True))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def _static_or(op, env_vals, name):
    val = getattr(op, name, None)
    if val is not None:
        return [int(v) for v in env_vals[val].reshape(-1)]
    return list(attr_value(op, "static_" + name))


def _slice(op, x, env):
    start = _static_or(op, env, "start")
    size = _static_or(op, env, "size")
    stride = _static_or(op, env, "stride")
    mode = attr_value(op, "mode") or "kDEFAULT"
    idx = [np.asarray(s) + np.arange(n) * st for s, n, st in zip(start, size, stride)]
    grids = np.ix_(*idx) if idx else ()
    if mode == "kDEFAULT":
        for d, ix in enumerate(idx):
            if ix.size and (ix.min() < 0 or ix.max() >= x.shape[d]):
                raise TripyException("Slice reads out of bounds.",
                                     [f"Dim {d}: indices {ix.min()}..{ix.max()} for size {x.shape[d]}."])
        return x[grids] if idx else x.copy()
    if mode == "kWRAP":
        return x[np.ix_(*[ix % x.shape[d] for d, ix in enumerate(idx)])]
    if mode == "kCLAMP":
        return x[np.ix_(*[np.clip(ix, 0, x.shape[d] - 1) for d, ix in enumerate(idx)])]
    if mode == "kREFLECT":
        def reflect(ix, n):
            period = 2 * (n - 1) if n > 1 else 1
            ix = np.abs(ix) % period
            return np.where(ix >= n, period - ix, ix)
        return x[np.ix_(*[reflect(ix, x.shape[d]) for d, ix in enumerate(idx)])]
    if mode == "kFILL":
        fill = env[op.fill].reshape(()) if getattr(op, "fill", None) is not None else 0
        inside = np.ones([len(i) for i in idx], dtype=bool)
        clipped = []
        for d, ix in enumerate(idx):
            ok = (ix >= 0) & (ix < x.shape[d])
            shape = [1] * len(idx)
            shape[d] = len(ix)
            inside &= ok.reshape(shape)
            clipped.append(np.clip(ix, 0, max(x.shape[d] - 1, 0)))
        vals = x[np.ix_(*clipped)] if x.size else np.zeros(inside.shape, x.dtype)
        return np.where(inside, vals, np.asarray(fill, dtype=x.dtype)).astype(x.dtype)
    raise TripyException(f"Unsupported slice mode: {mode}.")


def _reshape(op, x, env):
    shape_val = getattr(op, "shape", None)
    if shape_val is not None:
        target = tuple(int(v) for v in env[shape_val].reshape(-1))
    else:
        target = tuple(-1 if d < 0 else d for d in op.results[0].type.get_shape())
    if math.prod(target) != x.size and -1 not in target:
        raise TripyException("Reshape volume mismatch at run time.",
                             [f"Input shape {x.shape} cannot become {target}."])
    return x.reshape(target)


def _broadcast(op, x, env):
    dims = list(attr_value(op, "broadcast_dims"))
    shape_val = getattr(op, "shape", None)
    if shape_val is not None:
        target = tuple(int(v) for v in env[shape_val].reshape(-1))
    else:
        target = tuple(op.results[0].type.get_shape())
    expanded = [1] * len(target)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    try:
        return np.broadcast_to(x.reshape(expanded), target).copy()
    except ValueError:
        raise TripyException("Broadcast shapes do not match at run time.",
                             [f"Input shape {x.shape} cannot broadcast to {target}."]) from None


def _linspace(op, env):
    shape_val = getattr(op, "shape", None)
    if shape_val is not None:
        shape = tuple(int(v) for v in env[shape_val].reshape(-1))
    else:
        shape = tuple(op.results[0].type.get_shape())
    start_v = getattr(op, "start", None)
    step_v = getattr(op, "step", None)
    start = env[start_v].reshape(()) if start_v is not None else attr_value(op, "static_start")
    step = env[step_v].reshape(-1) if step_v is not None else np.full(len(shape), attr_value(op, "static_step"))
    coords = np.indices(shape) if shape else np.zeros((0,))
    res = start + np.tensordot(step, coords, axes=(0, 0)) if shape else np.asarray(start)
    return np.asarray(res).astype(_result_dtype(op))


def _normalization(op, x, scale, bias):
    """``(x - mean) / sqrt(var + eps) * scale + bias`` over ``axis``; with ``num_groups`` G > 1 the statistics
    are per (sample, group of C / G channels) over the group's channels and every dim after the channel dim,
    and a scale/bias of shape ``[1, G, 1, ...]`` applies one value per group (tensorrt-dialect.md §5.19)."""
    axes = tuple(attr_value(op, "axis"))
    eps = attr_value(op, "eps")
    eps = 1e-5 if eps is None else eps
    groups = int(attr_value(op, "num_groups") or 1)
    xf = x.astype(np.float32)
    scale, bias = scale.astype(np.float32), bias.astype(np.float32)
    if groups > 1:
        n, c = x.shape[0], x.shape[1]
        if c % groups:
            raise TripyException(f"Normalization: num_groups {groups} must divide the channel count {c}.")
        g = xf.reshape((n, groups, c // groups) + x.shape[2:])
        red = tuple(range(2, g.ndim))
        mean = g.mean(axis=red, keepdims=True)
        var = ((g - mean) ** 2).mean(axis=red, keepdims=True)
        y = ((g - mean) / np.sqrt(var + eps)).reshape(x.shape)
        if scale.shape[1] == groups != c:  # one scale/bias value per group: the same for its channels
            scale, bias = np.repeat(scale, c // groups, axis=1), np.repeat(bias, c // groups, axis=1)
    else:
        mean = xf.mean(axis=axes, keepdims=True)
        var = ((xf - mean) ** 2).mean(axis=axes, keepdims=True)
        y = (xf - mean) / np.sqrt(var + eps)
    return (y * scale + bias).astype(x.dtype)


def _take_or_zero(data, idx, axis):
    """``np.take`` where negative indices count from the end and out-of-bounds indices read 0."""
    n = data.shape[axis]
    idx = np.where(idx < 0, idx + n, idx)
    ok = (idx >= 0) & (idx < n)
    res = np.take(data, np.where(ok, idx, 0), axis=axis) if n else np.zeros(
        data.shape[:axis] + idx.shape + data.shape[axis + 1:], data.dtype)
    mask = ok.reshape((1,) * axis + ok.shape + (1,) * (data.ndim - axis - 1))
    return np.where(mask, res, np.zeros((), data.dtype)).astype(data.dtype)


def _gather(op, data, idx):
    """IGatherLayer kDEFAULT. With ``numBroadcastDims = 1`` dim 0 of data and indices is a batch dim: batch
    entry b gathers ``data[b]`` with ``indices[b]`` (an indices batch of 1 is broadcast); the result is
    ``data.shape[:axis] + indices.shape[1:] + data.shape[axis+1:]``."""
    axis = attr_value(op, "axis")
    nb = int(attr_value(op, "numBroadcastDims") or 0)
    if nb == 0:
        return _take_or_zero(data, idx, axis)
    if nb != 1 or axis < 1 or idx.ndim < 1:
        raise TripyException("Gather: numBroadcastDims must be 0, or 1 with axis >= 1 and indices of rank >= 1.",
                             [f"numBroadcastDims={nb}, axis={axis}, indices shape {idx.shape}."])
    batch = data.shape[0]
    if idx.shape[0] not in (1, batch):
        raise TripyException("Gather: the batch dim of indices must be 1 or match the data's.",
                             [f"data shape {data.shape}, indices shape {idx.shape}."])
    out = np.zeros(data.shape[:axis] + idx.shape[1:] + data.shape[axis + 1:], data.dtype)
    for b in range(batch):
        out[b] = _take_or_zero(data[b], idx[b if idx.shape[0] > 1 else 0], axis - 1)
    return out


def _top_k(op, x):
    """Sorted k largest (kMAX) / smallest (kMIN) along ``axis``; equal values keep their index order, -0.0 equals
    0.0, and NaN is larger than every number (as in XLA and torch): first for kMAX, last for kMIN."""
    k = attr_value(op, "k")
    axis = attr_value(op, "axis")
    kind = attr_value(op, "topkOperation")
    if x.dtype.kind in "iu":  # exact: ~x reverses the order without overflow (no float64 detour)
        order = np.argsort(~x if kind == "kMAX" else x, axis=axis, kind="stable")
    elif kind == "kMAX":
        xf = x.astype(np.float64)
        nan = np.isnan(xf)
        order = np.lexsort((np.where(nan, 0.0, -xf), ~nan), axis=axis)  # NaN first, then descending
    else:
        order = np.argsort(x.astype(np.float64), axis=axis, kind="stable")  # ascending, NaN last
    idx = np.take(order, np.arange(k), axis=axis)
    return [np.take_along_axis(x, idx, axis=axis), idx.astype(np.int32)]


def _constant(op, program):
    return program.constant_value(op)


# Each entry: (op, operand arrays, env, program) -> one array or a list for multi-result ops.
TABLE: dict[str, Callable] = {
    "tensorrt.constant": lambda op, a, env, prog: _constant(op, prog),
    "tensorrt.element_wise": lambda op, a, env, prog: _element_wise(op, a[0], a[1]),
    "tensorrt.unary": lambda op, a, env, prog: _unary(op, a[0]),
    "tensorrt.activation": lambda op, a, env, prog: _activation(op, a[0]),
    "tensorrt.matrix_multiply": lambda op, a, env, prog: _matmul(op, a[0], a[1]),
    "tensorrt.reduce": lambda op, a, env, prog: _reduce(op, a[0]),
    "tensorrt.softmax": lambda op, a, env, prog: _softmax(op, a[0]),
    "tensorrt.slice": lambda op, a, env, prog: _slice(op, a[0], env),
    "tensorrt.reshape": lambda op, a, env, prog: _reshape(op, a[0], env),
    "tensorrt.transpose": lambda op, a, env, prog: np.transpose(a[0], attr_value(op, "permutation")).copy(),
    "tensorrt.broadcast": lambda op, a, env, prog: _broadcast(op, a[0], env),
    "tensorrt.concatenation": lambda op, a, env, prog: np.concatenate(a, axis=attr_value(op, "axis")),
    "tensorrt.gather": lambda op, a, env, prog: _gather(op, a[0], a[1]),
    "tensorrt.select": lambda op, a, env, prog: np.where(a[0], a[1], a[2]).astype(a[1].dtype),
    "tensorrt.cast": lambda op, a, env, prog: _cast(a[0], _result_dtype(op)),
    "tensorrt.identity": lambda op, a, env, prog: _cast(a[0], _result_dtype(op)),
    "tensorrt.shape": lambda op, a, env, prog: np.asarray(a[0].shape, dtype=np.int32),
    "tensorrt.collapse_rank": lambda op, a, env, prog: a[0].reshape(_static_shape(op, a[0])),
    "tensorrt.expand_rank": lambda op, a, env, prog: a[0].reshape(_static_shape(op, a[0])),
    "tensorrt.linspace": lambda op, a, env, prog: _linspace(op, env),
    "tensorrt.normalization": lambda op, a, env, prog: _normalization(op, a[0], a[1], a[2]),
    "tensorrt.top_k": lambda op, a, env, prog: _top_k(op, a[0]),
}
TABLE.update(TABLE_NN)  # layer ops of the full Tripy API (issue 3): engine/reference/ops_nn.py


def _cast(x, dt):
    """docs/SEMANTICS.md: float -> int truncates and saturates (nan -> 0), -> bool is ``x != 0``, int -> int wraps."""
    if dt == np.bool_:
        return x != 0
    if is_float(x.dtype) and is_int(dt):
        with np.errstate(invalid="ignore"):
            return float_to_int(np, x, dt)
    with np.errstate(over="ignore"):  # f32 -> f16 overflow is inf (IEEE), as on every engine
        return x.astype(dt)


def _static_shape(op, x):
    """Result shape of a rank change that only adds/drops unit dims (dynamic dims kept in order)."""
    dims = list(op.results[0].type.get_shape())
    non_unit = [d for d in x.shape if d != 1]
    out, it = [], iter(non_unit)
    for d in dims:
        out.append(1 if d == 1 else next(it))
    return tuple(out)
