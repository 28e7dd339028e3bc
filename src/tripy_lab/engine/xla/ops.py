"""The xla engine's translation table: MLIR op name -> ``fn(op, args, ctx) -> [results]``.

``args`` are the translated operands in ``op.operands`` order; ``ctx`` (an ``OpContext``) gives named
operands (``ctx.operand("start")``), attributes as plain Python values (``ctx.attr("axis")``), result
types, and ``ctx.xp``: the array module the op runs with.

Two kinds of values flow through a translation:

* **static** values are numpy arrays known while tracing: small constants, ``tensorrt.shape`` results,
  DimensionInputInfo arguments, and every small result computed only from static values (shape
  arithmetic). For those ops ``ctx.xp`` is ``numpy``; XLA never sees them. Shape operands (reshape /
  broadcast / slice / linspace / resize ``shape``, slice ``start/size/stride``) must be static:
  ``ctx.static(v, "what")`` returns the numpy array or raises a TripyException naming the op.
* **traced** values are jax tracers (tensor data); then ``ctx.xp`` is ``jax.numpy``.

Functions that work with both use ``xp`` only; the rest (convolution, pooling, top_k ...) always trace.
"""

from __future__ import annotations

import itertools
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from tripy_lab.core.errors import TripyException
from tripy_lab.engine.semantics import float_floor_divide, float_to_int, int_divide, is_float, is_int

STATIC_RESULT_LIMIT = 1024  # static (numpy) results larger than this are recomputed as traced values
# operands that must be static (``ctx.static``): the values a shape is made of
SHAPE_OPERANDS: dict[str, tuple[str, ...]] = {
    "tensorrt.slice": ("start", "size", "stride"), "tensorrt.reshape": ("shape",),
    "tensorrt.broadcast": ("shape",), "tensorrt.linspace": ("shape",), "tensorrt.shuffle": ("dynamic_reshape",),
    "tensorrt.resize_nearest": ("output_shape",), "tensorrt.resize_linear": ("output_shape",),
    "tensorrt.resize_cubic": ("output_shape",),
}


# an op's plain attribute values, read once per op (every signature's trace reads them again); weak keys: the
# entries go with the program's ops
_ATTRS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_MISSING = object()
_IMMUTABLE = (int, float, str, tuple, type(None))


def _segments(op) -> dict | None:
    """{operand group name: its SSA values} of an op whose groups a segment-size property delimits, else None."""
    seg = op.properties.get("operandSegmentSizes")
    if seg is None:
        return None
    names = [n for n, _ in type(op).get_irdl_definition().operands]
    sizes = seg.get_values()
    if len(sizes) != len(names):
        return None
    groups, at, operands = {}, 0, tuple(op.operands)
    for n, k in zip(names, sizes):
        groups[n] = operands[at:at + k]
        at += k
    return groups


class OpContext:
    """What a translation function may ask about the op it translates."""

    def __init__(self, op, index: int, env: dict, xp, program=None, origin_line: str = "", trace_name: str = "",
                 location=None):
        self.op = op
        self.location = location  # the user's SourceLocation of the trace op, for error messages
        self.index = index
        self.env = env
        self.xp = xp
        self.program = program
        self.origin_line = origin_line
        self.trace_name = trace_name
        self.lifted: dict[int, Any] = {}  # constant op index -> traced parameter (set by the engine)

    @property
    def static_mode(self) -> bool:
        return self.xp is np

    # --- operands / attributes / types -------------------------------------------------------
    def _named(self, name: str) -> tuple:
        """The SSA values of the op's operand group ``name``, read once per op: an op with optional operands
        (a slice's start/size/stride) finds its groups from a segment-size attribute, about 20 us a read."""
        known = _ATTRS.get(self.op)
        if known is None:
            known = _ATTRS[self.op] = {}
        key = (name,)  # attribute names are strings: no clash
        vals = known.get(key)
        if vals is None:
            groups = _segments(self.op)
            if groups is not None:  # every group of the op at once
                for n, g in groups.items():
                    known[(n,)] = g
                return groups.get(name, ())
            v = getattr(self.op, name, None)
            vals = known[key] = () if v is None else tuple(v) if isinstance(v, (tuple, list)) else (v,)
        return vals

    def operand(self, name: str):
        vals = self._named(name)
        return self.env[vals[0]] if vals else None

    def operands(self, name: str) -> list:
        return [self.env[x] for x in self._named(name)]

    def attr(self, name: str, default=None):
        known = _ATTRS.get(self.op)
        if known is None:
            known = _ATTRS[self.op] = {}
        v = known.get(name, _MISSING)
        if v is _MISSING:
            from tripy_lab.mlir.dialect import attr_value

            v = attr_value(self.op, name, getattr(self.program, "resources", None))
            if isinstance(v, _IMMUTABLE):  # arrays and dicts are read afresh: a translation may own its copy
                known[name] = v
        return default if v is None else v

    def result_dtype(self, i: int = 0) -> np.dtype:
        return type_info(self.op.results[i].type)[1]

    def result_shape(self, i: int = 0) -> tuple[int | None, ...]:
        return type_info(self.op.results[i].type)[0]

    def operand_type_shape(self, name: str) -> tuple[int | None, ...]:
        return type_info(getattr(self.op, name).type)[0]

    # --- helpers ------------------------------------------------------------------------------
    def error(self, summary: str, details=()) -> TripyException:
        where = f"{self.op.name} (MLIR op #{self.index}"
        where += f", trace op {self.trace_name}" if self.trace_name else ""
        where += f", {self.origin_line})" if self.origin_line else ")"
        return TripyException(f"xla engine: {summary}", [f"In {where}.", *details], self.location,
                              op=self.trace_name or None)

    def static(self, value, what: str) -> np.ndarray:
        if isinstance(value, np.ndarray):
            return value
        if isinstance(value, np.generic):
            return np.asarray(value)
        raise self.error(f"'{what}' must be known when the program is traced (a shape value), but it depends "
                         "on tensor data.",
                         ["XLA compiles one executable per concrete shape, so shape operands must come from "
                          "input shapes, DimensionInputInfo values and constants."])

    def static_ints(self, value, what: str) -> tuple[int, ...]:
        return tuple(int(v) for v in np.asarray(self.static(value, what)).reshape(-1))

    def scalar(self, value, dtype):
        # numpy in both modes: jax takes it as the same constant, without jnp.asarray's dispatch per call
        return np.asarray(value, dtype=dtype)

    @property
    def jnp(self):
        import jax.numpy as jnp

        return jnp

    @property
    def lax(self):
        from jax import lax

        return lax


_TYPE_INFO: dict = {}


def type_info(t) -> tuple[tuple[int | None, ...], np.dtype]:
    """(shape with None for dynamic dims, numpy dtype) of an MLIR tensor type, memoised (types are immutable)."""
    entry = _TYPE_INFO.get(id(t))  # by identity: hashing an xDSL type hashes all its parameters
    if entry is None or entry[0] is not t:
        from tripy_lab.mlir.attrs import NUMPY_DTYPES, elem_of, shape_of

        if len(_TYPE_INFO) > 65536:
            _TYPE_INFO.clear()
        entry = _TYPE_INFO[id(t)] = (t, (shape_of(t), np.dtype(NUMPY_DTYPES[elem_of(t)])))
    return entry[1]


Translation = Callable[[Any, list, OpContext], list]
TABLE: dict[str, Translation] = {}
# ops that may run in numpy when all operands are static (shape arithmetic, small constants)
STATIC_OK: set[str] = set()


def register(name: str, static_ok: bool = False):
    def deco(fn):
        TABLE["tensorrt." + name] = fn
        if static_ok:
            STATIC_OK.add("tensorrt." + name)
        return fn

    return deco


_NARROW_INTS = {"int2", "uint2", "int4", "uint4"}  # ml_dtypes integers: numpy kind "V", not np.integer


def _is_int(dt) -> bool:
    d = np.dtype(dt)
    return d.kind in "iu" or d.name in _NARROW_INTS


def _is_low_float(dt) -> bool:
    """f16, bf16 and the float8 types (ml_dtypes floats have numpy kind "V")."""
    d = np.dtype(dt)
    return (d.kind == "f" and d.itemsize < 4) or (d.kind == "V" and not _is_int(d))


def _is_bool(dt) -> bool:
    return np.dtype(dt) == np.bool_


def _erf(xp, x):
    if xp is np:
        return np.vectorize(math.erf, otypes=[np.float64])(x).astype(x.dtype)
    from jax.scipy.special import erf

    return erf(x)


# ---------------------------------------------------------------------------------------------- element-wise


_EW = {"kSUM": "add", "kPROD": "multiply", "kMAX": "maximum", "kMIN": "minimum", "kSUB": "subtract",
       "kAND": "logical_and", "kOR": "logical_or", "kXOR": "logical_xor", "kEQUAL": "equal",
       "kGREATER": "greater", "kLESS": "less"}


@register("element_wise", static_ok=True)
def _element_wise(op, args, ctx):
    a, b = args
    xp, kind = ctx.xp, ctx.attr("elementwiseOperation")
    if kind in _EW:
        return [getattr(xp, _EW[kind])(a, b)]
    integer = _is_int(a.dtype)
    if kind in ("kDIV", "kFLOOR_DIV") and integer:  # docs/SEMANTICS.md: x / 0 == x // 0 == 0
        return [int_divide(xp, a, b, kind)]
    if kind == "kDIV":
        return [xp.divide(a, b)]
    if kind == "kFLOOR_DIV":
        return [float_floor_divide(xp, a, b)]
    if kind == "kPOW":
        return [xp.power(a, b)]
    raise ctx.error(f"unknown element-wise operation {kind!r}")


_UNARY = {"kEXP": "exp", "kLOG": "log", "kSQRT": "sqrt", "kABS": "abs", "kNEG": "negative", "kSIN": "sin",
          "kCOS": "cos", "kTAN": "tan", "kSINH": "sinh", "kCOSH": "cosh", "kASIN": "arcsin", "kACOS": "arccos",
          "kATAN": "arctan", "kASINH": "arcsinh", "kACOSH": "arccosh", "kATANH": "arctanh", "kCEIL": "ceil",
          "kFLOOR": "floor", "kNOT": "logical_not", "kSIGN": "sign", "kROUND": "round"}


@register("unary", static_ok=True)
def _unary(op, args, ctx):
    (x,) = args
    xp, kind = ctx.xp, ctx.attr("unaryOperation")
    if kind in _UNARY:
        return [getattr(xp, _UNARY[kind])(x)]
    if kind == "kRECIP":
        return [xp.divide(ctx.scalar(1, x.dtype), x)]
    if kind == "kERF":
        return [_erf(xp, x)]
    raise ctx.error(f"unknown unary operation {kind!r}")


@register("activation", static_ok=True)
def _activation(op, args, ctx):
    (x,) = args
    if _is_low_float(x.dtype):  # f16/bf16 compute in f32 (exp(20) overflows f16), one rounding at the end
        return [r.astype(x.dtype) for r in _activation(op, [x.astype(np.float32)], ctx)]
    xp, kind, dt = ctx.xp, ctx.attr("activationType"), x.dtype
    alpha, beta = ctx.attr("alpha", 0.0), ctx.attr("beta", 0.0)
    a, b = ctx.scalar(alpha, dt), ctx.scalar(beta, dt)
    zero, one, half = ctx.scalar(0, dt), ctx.scalar(1, dt), ctx.scalar(0.5, dt)
    if kind == "kRELU":
        return [xp.maximum(x, zero)]
    if kind == "kSIGMOID":
        return [one / (one + xp.exp(-x))]
    if kind == "kTANH":
        return [xp.tanh(x)]
    if kind == "kLEAKY_RELU":
        return [xp.where(x >= zero, x, a * x)]
    if kind == "kELU":
        return [xp.where(x >= zero, x, a * (xp.exp(x) - one))]
    if kind == "kSELU":
        return [b * xp.where(x > zero, x, a * (xp.exp(x) - one))]
    if kind == "kSOFTSIGN":
        return [x / (one + xp.abs(x))]
    if kind == "kSOFTPLUS":  # a * log(1 + exp(b * x)), without overflow for large b * x
        z = b * x
        return [a * (xp.maximum(z, zero) + xp.log1p(xp.exp(-xp.abs(z))))]
    if kind == "kCLIP":
        return [xp.minimum(xp.maximum(x, a), b)]
    if kind == "kHARD_SIGMOID":
        return [xp.maximum(zero, xp.minimum(one, a * x + b))]
    if kind == "kSCALED_TANH":
        return [a * xp.tanh(b * x)]
    if kind == "kTHRESHOLDED_RELU":
        return [xp.where(x > a, x, zero)]
    if kind == "kGELU_ERF":
        return [half * x * (one + _erf(xp, x / ctx.scalar(math.sqrt(2.0), dt)))]
    if kind == "kGELU_TANH":
        c = ctx.scalar(math.sqrt(2.0 / math.pi), dt)
        return [half * x * (one + xp.tanh(c * (x + ctx.scalar(0.044715, dt) * x * x * x)))]
    raise ctx.error(f"unknown activation type {kind!r}")


# ---------------------------------------------------------------------------------------------- linear algebra


@register("matrix_multiply", static_ok=True)
def _matrix_multiply(op, args, ctx):
    a, b = args
    xp = ctx.xp
    op0, op1 = ctx.attr("op0", "kNONE"), ctx.attr("op1", "kNONE")
    if op0 == "kTRANSPOSE":
        a = xp.swapaxes(a, -1, -2)
    if op1 == "kTRANSPOSE":
        b = xp.swapaxes(b, -1, -2)
    prec = {}
    out_dt = a.dtype
    if not ctx.static_mode and np.dtype(a.dtype) == np.float32:
        prec = {"precision": ctx.lax.Precision.HIGHEST}  # exact f32 (no TF32 on GPUs), like the reference
    elif ctx.static_mode and _is_low_float(a.dtype):
        # numpy's einsum has no bf16/f16-safe loop (bf16: "invalid data type for einsum"): f32 accumulation,
        # one rounding to the result type, like the reference engine
        a, b = a.astype(np.float32), b.astype(np.float32)
    if op0 == "kVECTOR" and op1 == "kVECTOR":
        spec = "...k,...k->..."
    elif op0 == "kVECTOR":
        spec = "...k,...kn->...n"
    elif op1 == "kVECTOR":
        spec = "...mk,...k->...m"
    else:
        return [xp.matmul(a, b, **prec).astype(out_dt)]
    return [xp.einsum(spec, a, b, **prec).astype(out_dt)]


_REDUCE = {"kSUM": "sum", "kPROD": "prod", "kMAX": "max", "kMIN": "min", "kAVG": "mean"}


@register("reduce", static_ok=True)
def _reduce(op, args, ctx):
    (x,) = args
    axes = tuple(ctx.attr("reduceAxes", ()))
    keep = bool(ctx.attr("keepDimensions", False))
    kind = ctx.attr("reduceOperation")
    if kind not in _REDUCE:
        raise ctx.error(f"unknown reduce operation {kind!r}")
    acc = x.astype(np.float32) if _is_low_float(x.dtype) and kind in ("kSUM", "kPROD", "kAVG") else x
    out = getattr(ctx.xp, _REDUCE[kind])(acc, axis=axes, keepdims=keep)
    return [ctx.xp.asarray(out).astype(x.dtype)]


@register("softmax", static_ok=True)
def _softmax(op, args, ctx):
    (x,) = args
    xp, axis, dt = ctx.xp, int(ctx.attr("axis")), x.dtype
    xf = x.astype(np.float32) if _is_low_float(dt) else x  # f16/bf16 accumulate in f32
    if not ctx.static_mode:
        import jax

        return [jax.nn.softmax(xf, axis=axis).astype(dt)]
    e = xp.exp(xf - xp.max(xf, axis=axis, keepdims=True))
    return [(e / xp.sum(e, axis=axis, keepdims=True)).astype(dt)]


# ---------------------------------------------------------------------------------------------- shapes, data movement


@register("constant", static_ok=True)
def _constant(op, args, ctx):
    if ctx.index in ctx.lifted:
        return [ctx.lifted[ctx.index]]
    return [constant_value(op, ctx.program)]


_PLAIN_STORAGE = {np.dtype(t) for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                                         np.uint8, np.uint16, np.uint32, np.uint64)}


def constant_value(op, program) -> np.ndarray:
    value = _plain_dense(op.properties.get("weights"))
    if value is not None:
        return value
    return _constant_value(op, program)


def _plain_dense(attr) -> np.ndarray | None:
    """A ``dense<...>`` payload stored as its own numpy dtype, read without the general path's lookups."""
    from xdsl.dialects.builtin import DenseIntOrFPElementsAttr

    if not isinstance(attr, DenseIntOrFPElementsAttr) or np.little_endian is False:
        return None
    shape, dt = type_info(attr.type)
    if dt not in _PLAIN_STORAGE:
        return None
    flat = np.frombuffer(attr.data.data, dtype=dt)
    n = math.prod(shape)
    if flat.size == 1 and n != 1:
        return np.broadcast_to(flat.reshape(()), shape).copy()
    return flat.reshape(shape)


def _constant_value(op, program) -> np.ndarray:
    if program is not None and hasattr(program, "constant_value"):
        try:
            return np.asarray(program.constant_value(op))
        except (ImportError, ModuleNotFoundError):
            pass
    from tripy_lab.mlir.attrs import elements_to_numpy

    attr = op.properties.get("weights") or op.attributes.get("weights")
    return np.asarray(elements_to_numpy(attr, getattr(program, "resources", None)))


@register("shape", static_ok=True)
def _shape(op, args, ctx):
    return [np.asarray(args[0].shape, dtype=ctx.result_dtype())]


def _reflect(idx: np.ndarray, n: int) -> np.ndarray:
    if n == 1:
        return np.zeros_like(idx)
    period = 2 * (n - 1)
    m = np.mod(idx, period)
    return np.where(m >= n, period - m, m)


@register("slice", static_ok=True)
def _slice(op, args, ctx):
    x = ctx.operand("input")
    xp, rank = ctx.xp, x.ndim
    start = ctx.operand("start")
    size = ctx.operand("size")
    stride = ctx.operand("stride")
    start = ctx.static_ints(start, "start") if start is not None else tuple(ctx.attr("static_start", ()))
    size = ctx.static_ints(size, "size") if size is not None else tuple(ctx.attr("static_size", ()))
    stride = ctx.static_ints(stride, "stride") if stride is not None else tuple(ctx.attr("static_stride", ()))
    if not stride:
        stride = (1,) * rank
    if not (len(start) == len(size) == len(stride) == rank):
        raise ctx.error("slice start/size/stride must each have one entry per input dim.",
                        [f"Input rank {rank}; start {start}, size {size}, stride {stride}."])
    mode = ctx.attr("mode", "kDEFAULT")
    if any(s < 0 for s in size):
        raise ctx.error(f"slice sizes must be >= 0, got {size}.")
    idx = [st + np.arange(sz, dtype=np.int64) * sd for st, sz, sd in zip(start, size, stride)]
    shape = x.shape
    inb = all(((i >= 0) & (i < n)).all() for i, n in zip(idx, shape))
    if inb:
        sl = []
        for st, sz, sd in zip(start, size, stride):
            if sz == 0:
                sl.append(slice(0, 0))
                continue
            stop = st + (sz - 1) * sd + (1 if sd > 0 else -1)
            sl.append(slice(st, None if stop < 0 else stop, sd))
        return [x[tuple(sl)]]
    if mode == "kDEFAULT":
        raise ctx.error("slice reads out of bounds (mode kDEFAULT).",
                        [f"Input shape {tuple(shape)}; start {start}, size {size}, stride {stride}."])
    if mode == "kFILL":
        fill = ctx.operand("fill")
        fill = ctx.scalar(0, x.dtype) if fill is None else xp.reshape(fill, ()).astype(x.dtype)
        if all(abs(s) == 1 for s in stride):
            # flip negative-stride dims, take the in-bounds window, pad the rest with `fill`
            pads, sl = [], []
            for d, (i, n) in enumerate(zip(idx, shape)):
                if len(i) and i[0] > i[-1]:
                    x = xp.flip(x, axis=d)
                    i = n - 1 - i
                lo = int(np.sum(i < 0))
                hi = int(np.sum(i >= n))
                mid = i[(i >= 0) & (i < n)]
                sl.append(slice(int(mid[0]), int(mid[-1]) + 1) if len(mid) else slice(0, 0))
                pads.append((lo, hi))
            x = x[tuple(sl)]
            if xp is np:
                return [np.pad(x, pads, constant_values=fill)]
            return [ctx.lax.pad(x, fill, [(lo, hi, 0) for lo, hi in pads])]
        for d, (i, n) in enumerate(zip(idx, shape)):
            ok = (i >= 0) & (i < n)
            x = xp.take(x, np.clip(i, 0, max(n - 1, 0)), axis=d)
            mask = ok.reshape([-1 if k == d else 1 for k in range(rank)])
            x = xp.where(mask, x, fill)
        return [x]
    for d, (i, n) in enumerate(zip(idx, shape)):
        if mode == "kWRAP":
            i = np.mod(i, n)
        elif mode == "kCLAMP":
            i = np.clip(i, 0, n - 1)
        elif mode == "kREFLECT":
            i = _reflect(i, n)
        else:
            raise ctx.error(f"unknown slice mode {mode!r}")
        x = xp.take(x, i, axis=d)
    return [x]


def _target_shape(ctx, shape_operand, what="shape"):
    if shape_operand is not None:
        return ctx.static_ints(shape_operand, what)
    shape = ctx.result_shape()
    if any(d is None for d in shape):
        raise ctx.error(f"result type has unknown dims and no '{what}' operand.")
    return tuple(shape)


@register("reshape", static_ok=True)
def _reshape(op, args, ctx):
    x = ctx.operand("input")
    shape = _target_shape(ctx, ctx.operand("shape"))
    try:
        return [ctx.xp.reshape(x, shape)]
    except (TypeError, ValueError) as e:
        raise ctx.error(f"cannot reshape {tuple(x.shape)} to {shape}.", [str(e).splitlines()[0]]) from None


@register("transpose", static_ok=True)
def _transpose(op, args, ctx):
    (x,) = args
    return [ctx.xp.transpose(x, tuple(ctx.attr("permutation")))]


@register("broadcast", static_ok=True)
def _broadcast(op, args, ctx):
    x = ctx.operand("input")
    xp = ctx.xp
    shape = _target_shape(ctx, ctx.operand("shape"))
    dims = tuple(ctx.attr("broadcast_dims", ()))
    if len(dims) != x.ndim:
        if dims or x.ndim > len(shape):
            raise ctx.error(f"broadcast_dims {dims} must have one entry per input dim (rank {x.ndim}).")
        dims = tuple(range(len(shape) - x.ndim, len(shape)))  # `broadcast_dims<>`: numpy-style right alignment
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = xp.transpose(x, order)
        dims = tuple(dims[i] for i in order)
    mid = [1] * len(shape)
    for i, d in enumerate(dims):
        mid[d] = x.shape[i]
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise ctx.error(f"cannot broadcast input dim {i} of size {x.shape[i]} to {shape[d]}.",
                            [f"Input shape {tuple(x.shape)}, target {shape}, broadcast_dims {dims}."])
    return [xp.broadcast_to(xp.reshape(x, mid), shape)]


@register("concatenation", static_ok=True)
def _concatenation(op, args, ctx):
    return [ctx.xp.concatenate(list(args), axis=int(ctx.attr("axis", 0)))]


def _take(xp, data, idx, axis):
    """Gather along ``axis``: indices in [-n, n) count from the end when negative, all others read 0.

    (Not ``jnp.take(..., mode="fill")`` on the wrapped indices: it wraps negative indices once more, so an
    index below -n read a real element.)
    """
    n = data.shape[axis]
    idx = xp.where(idx < 0, idx + n, idx)
    ok = (idx >= 0) & (idx < n)
    if n == 0:
        return xp.zeros(tuple(data.shape[:axis]) + tuple(idx.shape) + tuple(data.shape[axis + 1:]), data.dtype)
    out = xp.take(data, xp.where(ok, idx, 0), axis=axis)
    mask = xp.reshape(ok, (1,) * axis + tuple(ok.shape) + (1,) * (data.ndim - axis - 1))
    return xp.where(mask, out, xp.zeros((), data.dtype))


@register("gather", static_ok=True)
def _gather(op, args, ctx):
    data, idx = ctx.operand("data"), ctx.operand("indices")
    xp = ctx.xp
    axis = int(ctx.attr("axis", 0))
    nb = int(ctx.attr("numBroadcastDims", 0) or 0)
    if nb == 0:
        return [_take(xp, data, idx, axis)]
    if nb != 1 or axis < 1 or idx.ndim < 1:
        raise ctx.error("numBroadcastDims must be 0, or 1 with axis >= 1 and indices of rank >= 1.",
                        [f"numBroadcastDims={nb}, axis={axis}, indices shape {tuple(idx.shape)}."])
    batch = data.shape[0]
    if idx.shape[0] not in (1, batch):
        raise ctx.error("the batch dim of indices must be 1 or match the data's.",
                        [f"data shape {tuple(data.shape)}, indices shape {tuple(idx.shape)}."])
    if batch == 0:
        return [xp.zeros(tuple(data.shape[:axis]) + tuple(idx.shape[1:]) + tuple(data.shape[axis + 1:]), data.dtype)]
    idx_b = (lambda b: idx[b]) if idx.shape[0] == batch else (lambda b: idx[0])
    return [xp.stack([_take(xp, data[b], idx_b(b), axis - 1) for b in range(batch)])]


@register("select", static_ok=True)
def _select(op, args, ctx):
    c, t, e = args
    return [ctx.xp.where(c, t, e)]


def _convert(xp, x, dt):
    """docs/SEMANTICS.md: float -> int truncates and saturates (nan -> 0), -> bool is ``x != 0``, int -> int wraps."""
    if _is_bool(dt):
        return x != 0
    if is_float(x.dtype) and is_int(dt):
        return float_to_int(xp, x, dt)
    return x.astype(dt)


@register("cast", static_ok=True)
def _cast(op, args, ctx):
    (x,) = args
    return [_convert(ctx.xp, x, ctx.result_dtype())]


@register("identity", static_ok=True)
def _identity(op, args, ctx):
    (x,) = args
    return [_convert(ctx.xp, x, ctx.result_dtype())]


def _unit_dims_to_drop(in_shape, type_in, out_type):
    """Indices of unit dims of ``in_shape`` whose removal gives a shape compatible with ``out_type``."""
    k = len(in_shape) - len(out_type)
    units = [i for i, d in enumerate(in_shape) if d == 1]
    units.sort(key=lambda i: type_in[i] != 1)  # prefer dims that are 1 in the operand type
    for combo in itertools.combinations(units, k):
        rest = [d for i, d in enumerate(in_shape) if i not in combo]
        if all(t is None or t == d for t, d in zip(out_type, rest)):
            return set(combo)
    return None


@register("collapse_rank", static_ok=True)
def _collapse_rank(op, args, ctx):
    (x,) = args
    out_t = ctx.result_shape()
    drop = _unit_dims_to_drop(tuple(x.shape), ctx.operand_type_shape("input"), out_t)
    if drop is None:
        raise ctx.error(f"collapse_rank can only drop unit dims: {tuple(x.shape)} -> {out_t}.")
    return [ctx.xp.reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in drop))]


@register("expand_rank", static_ok=True)
def _expand_rank(op, args, ctx):
    (x,) = args
    out_t = ctx.result_shape()
    k = len(out_t) - x.ndim
    cands = [i for i, d in enumerate(out_t) if d == 1]
    for combo in itertools.combinations(cands, k):
        it = iter(x.shape)
        shape = [1 if i in combo else next(it) for i in range(len(out_t))]
        if all(t is None or t == d for t, d in zip(out_t, shape)):
            return [ctx.xp.reshape(x, tuple(shape))]
    raise ctx.error(f"expand_rank can only insert unit dims: {tuple(x.shape)} -> {out_t}.")


@register("shuffle", static_ok=True)
def _shuffle(op, args, ctx):
    x = ctx.operand("input")
    xp = ctx.xp
    x = xp.transpose(x, tuple(ctx.attr("first_transpose", tuple(range(x.ndim)))))
    dyn = ctx.operand("dynamic_reshape")
    reshape = ctx.static_ints(dyn, "dynamic_reshape") if dyn is not None else ctx.attr("reshape", None)
    if reshape is not None and (len(reshape) or x.size == 1):
        zero_ph = bool(ctx.attr("zero_is_placeholder", True))
        shape = tuple(x.shape[i] if (d == 0 and zero_ph) else d for i, d in enumerate(reshape))
        x = xp.reshape(x, shape)
    second = ctx.attr("second_transpose", ())
    if second:
        x = xp.transpose(x, tuple(second))
    return [x]


@register("linspace", static_ok=True)
def _linspace(op, args, ctx):
    xp, dt = ctx.xp, ctx.result_dtype()
    shape = _target_shape(ctx, ctx.operand("shape"))
    start, step = ctx.operand("start"), ctx.operand("step")
    start = ctx.scalar(ctx.attr("static_start", 0.0), dt) if start is None else xp.reshape(start, ()).astype(dt)
    if step is None:
        step = xp.asarray([ctx.attr("static_step", 1.0)] * max(len(shape), 1), dtype=dt)
    step = xp.reshape(step, (-1,)).astype(dt)
    out = xp.zeros(shape, dtype=dt) + start
    for d, n in enumerate(shape):
        iota = xp.reshape(xp.arange(n, dtype=dt), tuple(n if k == d else 1 for k in range(len(shape))))
        out = out + iota * step[d]
    return [out]


# ---------------------------------------------------------------------------------------------- NN layers (traced)


@register("normalization")
def _normalization(op, args, ctx):
    x, scale, bias = ctx.operand("input"), ctx.operand("scale"), ctx.operand("bias")
    jnp = ctx.jnp
    dt = x.dtype
    axes = tuple(ctx.attr("axis", ()))
    eps = float(ctx.attr("eps", 1e-5))
    groups = int(ctx.attr("num_groups", 1) or 1)
    xf = x.astype(jnp.float32) if np.dtype(dt).itemsize < 4 else x
    if groups > 1:
        n, c = x.shape[0], x.shape[1]
        if c % groups:
            raise ctx.error(f"num_groups {groups} must divide the channel count {c}.")
        g = xf.reshape((n, groups, c // groups) + tuple(x.shape[2:]))
        red = tuple(range(2, g.ndim))
        mean = g.mean(axis=red, keepdims=True)
        var = ((g - mean) ** 2).mean(axis=red, keepdims=True)
        y = ((g - mean) / jnp.sqrt(var + eps)).reshape(x.shape)
        if scale.shape[1] == groups and groups != c:
            rep = c // groups
            scale, bias = jnp.repeat(scale, rep, axis=1), jnp.repeat(bias, rep, axis=1)
    else:
        mean = xf.mean(axis=axes, keepdims=True)
        var = ((xf - mean) ** 2).mean(axis=axes, keepdims=True)
        y = (xf - mean) / jnp.sqrt(var + eps)
    y = y * scale.astype(y.dtype) + bias.astype(y.dtype)
    return [y.astype(dt)]


def _nd_spec(rank: int):
    sp = "DHW"[-(rank - 2):] if rank - 2 <= 3 else None
    if sp is None:
        raise ValueError
    return ("NC" + sp, "OI" + sp, "NC" + sp)


def _weights(ctx, operand_name: str, static_name: str):
    w = ctx.operand(operand_name)
    if w is None:
        w = ctx.attr(static_name)
    return w


def _window_attrs(ctx, nsp: int):
    """stride, pre/post padding and dilation of a (de)convolution, with TensorRT's defaults."""
    stride = tuple(ctx.attr("stride", (1,) * nsp))
    pre, post = tuple(ctx.attr("pre_padding", (0,) * nsp)), tuple(ctx.attr("post_padding", (0,) * nsp))
    dil = tuple(ctx.attr("dilation", None) or (1,) * nsp)
    return stride, pre, post, dil


@register("convolution")
def _convolution(op, args, ctx):
    x = ctx.operand("input")
    w, b = _weights(ctx, "kernel", "kernelStatic"), _weights(ctx, "bias", "biasStatic")
    nsp = x.ndim - 2
    stride, pre, post, dil = _window_attrs(ctx, nsp)
    groups = int(ctx.attr("num_groups", 1) or 1)
    w = ctx.jnp.asarray(w).astype(x.dtype)
    prec = {"precision": ctx.lax.Precision.HIGHEST} if np.dtype(x.dtype) == np.float32 else {}
    y = ctx.lax.conv_general_dilated(x, w, stride, list(zip(pre, post)), rhs_dilation=dil,
                                     feature_group_count=groups, dimension_numbers=_nd_spec(x.ndim), **prec)
    if b is not None:
        y = y + ctx.jnp.asarray(b).astype(x.dtype).reshape((1, -1) + (1,) * nsp)
    return [y]


@register("deconvolution")
def _deconvolution(op, args, ctx):
    jnp = ctx.jnp
    x = ctx.operand("input")
    w, b = _weights(ctx, "kernelWeights", "kernelWeightsStatic"), _weights(ctx, "biasWeights", "biasWeightsStatic")
    nsp = x.ndim - 2
    stride, pre, post, dil = _window_attrs(ctx, nsp)
    g = int(ctx.attr("num_groups", 1) or 1)
    w = jnp.asarray(w).astype(x.dtype)  # [C, K/g, k...]
    c, kg = w.shape[0], w.shape[1]
    ks = w.shape[2:]
    w = w.reshape((g, c // g, kg) + ks)
    w = jnp.swapaxes(w, 1, 2).reshape((g * kg, c // g) + ks)  # [K, C/g, k...]
    w = jnp.flip(w, axis=tuple(range(2, w.ndim)))
    pads = [(d * (k - 1) - p, d * (k - 1) - q) for d, k, p, q in zip(dil, ks, pre, post)]
    prec = {"precision": ctx.lax.Precision.HIGHEST} if np.dtype(x.dtype) == np.float32 else {}
    y = ctx.lax.conv_general_dilated(x, w, (1,) * nsp, pads, lhs_dilation=stride, rhs_dilation=dil,
                                     feature_group_count=g, dimension_numbers=_nd_spec(x.ndim), **prec)
    if b is not None:
        y = y + jnp.asarray(b).astype(x.dtype).reshape((1, -1) + (1,) * nsp)
    return [y]


@register("pooling")
def _pooling(op, args, ctx):
    (x,) = args
    lax, jnp = ctx.lax, ctx.jnp
    nsp = len(ctx.attr("windowSize"))
    lead = x.ndim - nsp
    win = (1,) * lead + tuple(ctx.attr("windowSize"))
    strides = (1,) * lead + tuple(ctx.attr("stride", (1,) * nsp))
    pads = [(0, 0)] * lead + list(zip(ctx.attr("prePadding", (0,) * nsp), ctx.attr("postPadding", (0,) * nsp)))
    kind = ctx.attr("poolingType")
    dt = x.dtype

    def pmax():
        init = -np.inf if not _is_int(dt) else np.iinfo(dt).min
        return lax.reduce_window(x, jnp.asarray(init, dt), lax.max, win, strides, pads)

    def pavg():
        xf = x.astype(jnp.float32)
        s = lax.reduce_window(xf, jnp.asarray(0, jnp.float32), lax.add, win, strides, pads)
        if ctx.attr("averageCountExcludesPadding", True):
            cnt = lax.reduce_window(jnp.ones(x.shape, jnp.float32), jnp.asarray(0, jnp.float32), lax.add, win,
                                    strides, pads)
        else:
            cnt = float(np.prod(win))
        return s / cnt

    if kind == "kMAX":
        return [pmax()]
    if kind == "kAVERAGE":
        avg = pavg()
        return [jnp.round(avg).astype(dt) if _is_int(dt) else avg.astype(dt)]
    if kind == "kMAX_AVERAGE_BLEND":
        blend = float(ctx.attr("blendFactor", 0.5))
        mixed = blend * pmax().astype(jnp.float32) + (1 - blend) * pavg()
        return [jnp.round(mixed).astype(dt) if _is_int(dt) else mixed.astype(dt)]  # ints round, like kAVERAGE
    raise ctx.error(f"unknown pooling type {kind!r}")


# ---------------------------------------------------------------------------------------------- resize


def _resize_out_shape(ctx, x):
    shp = ctx.operand("output_shape")
    if shp is not None:
        return ctx.static_ints(shp, "output_shape"), None
    scales = ctx.attr("scales", None)
    if scales:
        return tuple(int(math.floor(n * s)) for n, s in zip(x.shape, scales)), tuple(scales)
    return _target_shape(ctx, None), None


def _coords(ctx, n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    y = np.arange(n_out, dtype=np.float64)
    mode = ctx.attr("coordinateTransformation", "kHALF_PIXEL")
    if n_out == 1 and ctx.attr("selectorForSinglePixel", "kFORMULA") == "kUPPER":
        return np.zeros(1)
    ratio = (1.0 / scale) if scale else n_in / n_out
    if mode == "kALIGN_CORNERS":
        return y * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros_like(y)
    if mode == "kASYMMETRIC":
        return y * ratio
    return (y + 0.5) * ratio - 0.5


def _cubic_near(s, a):  # Keys' cubic convolution weight for |s| <= 1
    return ((a + 2) * s - (a + 3)) * s * s + 1


def _cubic_far(s, a):  # ... and for 1 < |s| < 2
    return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a


def _resize(op, args, ctx, method: str):
    x = ctx.operand("input")
    coeff = float(ctx.attr("cubicCoeff", -0.75))
    jnp = ctx.jnp
    out_shape, scales = _resize_out_shape(ctx, x)
    dt = x.dtype
    y = x.astype(jnp.float32) if method != "nearest" else x
    for d, (n_in, n_out) in enumerate(zip(x.shape, out_shape)):
        if n_in == n_out and (not scales or scales[d] == 1):
            continue
        c = _coords(ctx, n_in, n_out, scales[d] if scales else None)
        if method == "nearest":
            rnd = ctx.attr("nearestRounding", "kFLOOR")
            i = {"kFLOOR": np.floor, "kCEIL": np.ceil, "kHALF_UP": lambda v: np.floor(v + 0.5),
                 "kHALF_DOWN": lambda v: np.ceil(v - 0.5)}[rnd](c)
            y = jnp.take(y, np.clip(i, 0, n_in - 1).astype(np.int32), axis=d)
            continue
        shape = [1] * y.ndim
        shape[d] = n_out
        if method == "linear":
            c = np.clip(c, 0, n_in - 1)
            i0 = np.floor(c).astype(np.int64)
            f = (c - i0).astype(np.float32).reshape(shape)
            i1 = np.minimum(i0 + 1, n_in - 1)
            y = jnp.take(y, i0.astype(np.int32), axis=d) * (1 - f) + jnp.take(y, i1.astype(np.int32), axis=d) * f
        else:
            i0 = np.floor(c).astype(np.int64)
            t = c - i0
            ws = [_cubic_far(t + 1, coeff), _cubic_near(t, coeff), _cubic_near(1 - t, coeff),
                  _cubic_far(2 - t, coeff)]
            acc = None
            for k, w in zip(range(-1, 3), ws):
                i = np.clip(i0 + k, 0, n_in - 1).astype(np.int32)
                term = jnp.take(y, i, axis=d) * w.astype(np.float32).reshape(shape)
                acc = term if acc is None else acc + term
            y = acc
    if method != "nearest":
        y = jnp.round(y).astype(dt) if _is_int(dt) else y.astype(dt)
    return [y]


@register("resize_nearest")
def _resize_nearest(op, args, ctx):
    return _resize(op, args, ctx, "nearest")


@register("resize_linear")
def _resize_linear(op, args, ctx):
    return _resize(op, args, ctx, "linear")


@register("resize_cubic")
def _resize_cubic(op, args, ctx):
    return _resize(op, args, ctx, "cubic")


# ---------------------------------------------------------------------------------------------- top-k, quantization


@register("top_k")
def _top_k(op, args, ctx):
    (x,) = args
    jnp, lax = ctx.jnp, ctx.lax
    k, axis = int(ctx.attr("k")), int(ctx.attr("axis"))
    kind = ctx.attr("topkOperation", "kMAX")
    xt = jnp.moveaxis(x, axis, -1)
    # Like the reference: equal values keep their index order, -0.0 equals 0.0 (lax.top_k and sort order
    # -0.0 below 0.0, so keys are canonicalised), NaN is the largest value (first for kMAX, last for kMIN).
    if _is_int(xt.dtype):
        _, i = lax.top_k(~xt if kind == "kMIN" else xt, k)  # bitwise not: order-reversing without overflow
    else:
        keys = jnp.where(xt == 0, jnp.zeros((), xt.dtype), xt)
        if kind == "kMIN":
            i = jnp.argsort(keys, axis=-1, stable=True)[..., :k]  # ascending, NaN last
        else:
            _, i = lax.top_k(keys, k)
    v = jnp.take_along_axis(xt, i, axis=-1)
    return [jnp.moveaxis(v, -1, axis), jnp.moveaxis(i.astype(ctx.result_dtype(1)), -1, axis)]


def _q_scale(ctx, x, scale):
    jnp = ctx.jnp
    axis = ctx.attr("axis", None)
    scale = jnp.asarray(scale).astype(jnp.float32)
    if scale.ndim == 0:
        return scale
    if scale.ndim == 1 and x.ndim != 1 or axis is not None:
        ax = int(axis if axis is not None else 0)
        return scale.reshape(tuple(-1 if d == ax else 1 for d in range(x.ndim)))
    for d in range(x.ndim):  # block quantization: repeat along the blocked dim
        if scale.shape[d] != x.shape[d]:
            scale = jnp.repeat(scale, x.shape[d] // scale.shape[d], axis=d)
    return scale


_QRANGE = {np.dtype(np.int8): (-128, 127)}


@register("quantize")
def _quantize(op, args, ctx):
    jnp = ctx.jnp
    x, scale = ctx.operand("input"), ctx.operand("scale")
    out = ctx.result_dtype()
    q = x.astype(jnp.float32) / _q_scale(ctx, x, scale)
    if _is_int(out):
        lo, hi = (-8, 7) if out.itemsize == 1 and "int4" in out.name else _QRANGE.get(out, (-128, 127))
        q = jnp.where(jnp.isnan(q), 0.0, jnp.clip(jnp.round(q), lo, hi))  # nan -> 0 (docs/SEMANTICS.md)
    else:  # f8E4M3FN saturates at +-448
        q = jnp.clip(q, -448.0, 448.0)
    return [q.astype(out)]


@register("dequantize")
def _dequantize(op, args, ctx):
    jnp = ctx.jnp
    x, scale = ctx.operand("input"), ctx.operand("scale")
    y = x.astype(jnp.float32) * _q_scale(ctx, x, scale)
    return [y.astype(ctx.result_dtype())]


@register("opaque_plugin")
def _opaque_plugin(op, args, ctx):
    name = ctx.attr("plugin_name", "?")
    raise ctx.error(f"plugins need TensorRT: the xla engine cannot run TensorRT plugin '{name}'.",
                    ["Build this program with engine='tensorrt' on a machine with TensorRT and a CUDA GPU."])
