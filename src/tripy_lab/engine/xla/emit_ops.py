"""The direct StableHLO emitter's table: MLIR op name -> ``fn(op, args, ctx, em) -> [results]``, or FALLBACK.

Same calling convention as ``ops.TABLE`` (``ctx`` is an ``ops.OpContext`` for attributes and
result types) plus ``em``, the ``emit.Emitter`` the ops are written to. ``args`` are ``Val``s
(traced tensors) or numpy arrays (static values, written as constants where a tensor needs them).

Each emitted op sequence is the one jax makes from the matching ``ops`` translation (same primitives,
same operand order, same dtypes), so the executables compute the same bits; tests/engine/test_xla_emit.py
compiles programs both ways and compares them bit for bit. Ops marked FALLBACK (and any dtype or attribute
an emitter refuses with ``Fallback``) make the engine trace the whole program through jax.
"""

from __future__ import annotations

import itertools
import math
from functools import lru_cache

import numpy as np

from tripy_lab.engine.semantics import is_float, is_int
from tripy_lab.engine.xla.emit import Fallback, Val, i64_array
from tripy_lab.engine.xla.ops import _is_low_float, _unit_dims_to_drop

FALLBACK = "fallback"
TABLE: dict[str, object] = {}


def register(name: str):
    def deco(fn):
        TABLE["tensorrt." + name] = fn
        return fn

    return deco


for _name in ("deconvolution", "resize_nearest",
              "resize_linear", "resize_cubic", "top_k", "opaque_plugin"):
    TABLE["tensorrt." + _name] = FALLBACK


# ---------------------------------------------------------------------------------------------- building blocks
def val(em, x) -> Val:
    return x if isinstance(x, Val) else em.const(np.asarray(x))


def bcast(em, v: Val, shape) -> Val:
    shape = tuple(shape)
    if v.shape == shape:
        return v
    dims = range(len(shape) - v.ndim, len(shape))  # numpy's right alignment
    return em.op("stablehlo.broadcast_in_dim", [v], shape, v.dtype, {"broadcast_dimensions": i64_array(dims)},
                 prim="broadcast_in_dim")


def _same_dtype(*vs) -> np.dtype:
    if len(vs) == 2 and vs[0].dtype == vs[1].dtype:
        return vs[0].dtype
    dts = {v.dtype for v in vs}
    if len(dts) != 1:
        raise Fallback(f"operands of mixed dtypes {sorted(d.name for d in dts)}")
    return vs[0].dtype


def _common_shape(*shapes) -> tuple:
    first = shapes[0]
    for s in shapes:
        if s != first:
            return _broadcast_shapes(shapes)
    return first


@lru_cache(maxsize=4096)
def _broadcast_shapes(shapes: tuple) -> tuple:  # numpy's is ~4 us a call (it makes arrays)
    return tuple(np.broadcast_shapes(*shapes))


def binary(em, name: str, a, b, prim: str, out_dtype=None) -> Val:
    a, b = val(em, a), val(em, b)
    dt = _same_dtype(a, b)
    shape = _common_shape(a.shape, b.shape)
    return em.op(name, [bcast(em, a, shape), bcast(em, b, shape)], shape, out_dtype or dt, prim=prim)


def unary(em, name: str, x, prim: str) -> Val:
    x = val(em, x)
    return em.op(name, [x], x.shape, x.dtype, prim=prim)


def _cmp_type(dt) -> str:
    d = np.dtype(dt)
    if is_float(d):
        return "FLOAT"
    return "SIGNED" if d.kind == "i" else "UNSIGNED"


def compare(em, a, b, direction: str, prim: str) -> Val:
    a, b = val(em, a), val(em, b)
    dt = _same_dtype(a, b)
    shape = _common_shape(a.shape, b.shape)
    attrs = {"comparison_direction": f"#stablehlo<comparison_direction {direction}>",
             "compare_type": f"#stablehlo<comparison_type {_cmp_type(dt)}>"}
    return em.op("stablehlo.compare", [bcast(em, a, shape), bcast(em, b, shape)], shape, np.bool_, attrs, prim=prim)


def select(em, c, t, e) -> Val:
    c, t, e = val(em, c), val(em, t), val(em, e)
    dt = _same_dtype(t, e)
    shape = _common_shape(c.shape, t.shape, e.shape)
    return em.op("stablehlo.select", [bcast(em, c, shape), bcast(em, t, shape), bcast(em, e, shape)], shape, dt,
                 prim="select_n")


def convert(em, x, dt) -> Val:
    x, dt = val(em, x), np.dtype(dt)
    if x.dtype == dt:
        return x
    return em.op("stablehlo.convert", [x], x.shape, dt, prim="convert_element_type")


def scalar(value, dt) -> np.ndarray:
    return np.asarray(value, dtype=dt)


def reshape(em, x, shape) -> Val:
    x = val(em, x)
    shape = tuple(int(d) for d in shape)
    if shape.count(-1) == 1:  # numpy's inferred dim, as the translation's xp.reshape
        rest = math.prod(d for d in shape if d != -1)
        if rest and x.size % rest == 0:
            shape = tuple(x.size // rest if d == -1 else d for d in shape)
    if x.shape == shape:
        return x
    if int(np.prod(shape, dtype=np.int64)) != x.size:
        raise Fallback(f"reshape {x.shape} -> {shape}")
    return em.op("stablehlo.reshape", [x], shape, x.dtype, prim="reshape")


def transpose(em, x, perm) -> Val:
    x, perm = val(em, x), tuple(int(p) for p in perm)
    if perm == tuple(range(x.ndim)):
        return x
    return em.op("stablehlo.transpose", [x], tuple(x.shape[p] for p in perm), x.dtype,
                 {"permutation": i64_array(perm)}, prim="transpose")


def convert_like_translation(em, x, dt) -> Val:
    """``ops._convert``: float -> int saturates (nan -> 0), -> bool is ``x != 0``, others convert."""
    x, dt = val(em, x), np.dtype(dt)
    if dt == np.bool_:
        return compare(em, x, scalar(0, x.dtype), "NE", "ne")
    if is_float(x.dtype) and is_int(dt):
        return float_to_int(em, x, dt)
    return convert(em, x, dt)


def float_to_int(em, x, dt) -> Val:
    """``semantics.float_to_int`` op for op."""
    import ml_dtypes

    info = ml_dtypes.iinfo(dt)
    wide = np.float64 if np.dtype(x.dtype).itemsize >= 8 else np.float32
    xf = convert(em, x, wide)
    hi = compare(em, xf, scalar(info.max + 1, wide), "GE", "ge")
    lo = compare(em, xf, scalar(info.min, wide), "LT", "lt")
    nan = compare(em, xf, xf, "NE", "ne")
    out_of_range = binary(em, "stablehlo.or", binary(em, "stablehlo.or", hi, lo, "or"), nan, "or")
    trunc = select(em, compare(em, xf, scalar(0, wide), "LT", "lt"), unary(em, "stablehlo.ceil", xf, "ceil"),
                   unary(em, "stablehlo.floor", xf, "floor"))
    mid = convert(em, select(em, out_of_range, scalar(0, wide), trunc), dt)
    return select(em, hi, scalar(info.max, dt), select(em, lo, scalar(info.min, dt), mid))


def reduce(em, x: Val, axes, kind: str, init) -> Val:
    """``stablehlo.reduce`` over ``axes`` with ``stablehlo.<kind>`` (the result drops those dims)."""
    axes = sorted(int(a) % max(x.ndim, 1) for a in axes)
    init = em.const(np.asarray(init, x.dtype))
    t = Val("", (), x.dtype).type
    body = (f'{{\n    ^bb0(%a: {t}, %b: {t}):\n      %r = "stablehlo.{kind}"(%a, %b) : ({t}, {t}) -> {t}\n'
            f'      "stablehlo.return"(%r) : ({t}) -> ()\n    }}')
    shape = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    return em.op("stablehlo.reduce", [x, init], shape, x.dtype, {"dimensions": i64_array(axes)}, region=body,
                 prim="reduce_" + _REDUCE_PRIM[kind])


_REDUCE_PRIM = {"add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min"}


def keepdims(em, r: Val, x_shape, axes) -> Val:
    axes = {int(a) % max(len(x_shape), 1) for a in axes}
    shape = tuple(1 if i in axes else d for i, d in enumerate(x_shape))
    kept = [i for i in range(len(x_shape)) if i not in axes]
    return em.op("stablehlo.broadcast_in_dim", [r], shape, r.dtype, {"broadcast_dimensions": i64_array(kept)},
                 prim="broadcast_in_dim")


def float_only(x, what: str):
    if not is_float(x.dtype) or not isinstance(x, (Val, np.ndarray)):
        raise Fallback(f"{what} on {np.dtype(x.dtype).name}")


# ---------------------------------------------------------------------------------------------- element-wise
_EW = {"kSUM": "add", "kPROD": "multiply", "kMAX": "maximum", "kMIN": "minimum", "kSUB": "subtract"}
_LOGIC = {"kAND": "and", "kOR": "or", "kXOR": "xor"}
_CMP = {"kEQUAL": "EQ", "kGREATER": "GT", "kLESS": "LT"}


@register("element_wise")
def _element_wise(op, args, ctx, em):
    a, b = args
    kind = ctx.attr("elementwiseOperation")
    dt = np.dtype(a.dtype)
    if kind in _EW:
        if dt == np.bool_:
            raise Fallback(f"{kind} on bool")
        return [binary(em, f"stablehlo.{_EW[kind]}", a, b, _EW[kind][:3] if kind != "kSUB" else "sub")]
    if kind in _LOGIC:
        if dt != np.bool_:
            raise Fallback(f"{kind} on {dt.name}")
        return [binary(em, f"stablehlo.{_LOGIC[kind]}", a, b, _LOGIC[kind])]
    if kind in _CMP:
        return [compare(em, a, b, _CMP[kind], _CMP[kind].lower())]
    if kind in ("kDIV", "kFLOOR_DIV") and is_int(dt):
        return [int_divide(em, a, b, kind)]
    float_only(a, kind)
    if kind == "kDIV":
        return [binary(em, "stablehlo.divide", a, b, "div")]
    if kind == "kFLOOR_DIV":  # semantics.float_floor_divide
        q = binary(em, "stablehlo.divide", a, b, "div")
        exact = compare(em, binary(em, "stablehlo.remainder", a, b, "rem"), scalar(0, dt), "EQ", "eq")
        return [select(em, exact, unary(em, "stablehlo.round_nearest_even", q, "round"),
                       unary(em, "stablehlo.floor", q, "floor"))]
    if kind == "kPOW":
        return [binary(em, "stablehlo.power", a, b, "pow")]
    raise Fallback(f"element-wise {kind}")


def int_divide(em, a, b, kind):
    """``semantics.int_divide``: jnp.floor_divide of the safe divisor, kDIV's correction, 0 where b == 0."""
    a, b = val(em, a), val(em, b)
    dt = _same_dtype(a, b)
    shape = _common_shape(a.shape, b.shape)
    a, b = bcast(em, a, shape), bcast(em, b, shape)
    zero = compare(em, b, scalar(0, dt), "EQ", "eq")
    safe = select(em, zero, scalar(1, dt), b)
    div = binary(em, "stablehlo.divide", a, safe, "div")
    if dt.kind == "u":
        q = div
    else:  # jnp.floor_divide: truncating division, one less where the signs differ and it was inexact
        signs = compare(em, unary(em, "stablehlo.sign", a, "sign"), unary(em, "stablehlo.sign", safe, "sign"),
                        "NE", "ne")
        inexact = compare(em, binary(em, "stablehlo.remainder", a, safe, "rem"), scalar(0, dt), "NE", "ne")
        q = select(em, binary(em, "stablehlo.and", signs, inexact, "and"),
                   binary(em, "stablehlo.subtract", div, scalar(1, dt), "sub"), div)
    if kind == "kDIV":
        r = binary(em, "stablehlo.subtract", a, binary(em, "stablehlo.multiply", q, safe, "mul"), "sub")
        neg = compare(em, compare(em, a, scalar(0, dt), "LT", "lt"), compare(em, safe, scalar(0, dt), "LT", "lt"),
                      "NE", "ne")
        fix = binary(em, "stablehlo.and", compare(em, r, scalar(0, dt), "NE", "ne"), neg, "and")
        q = binary(em, "stablehlo.add", q, convert(em, fix, dt), "add")
    return select(em, zero, scalar(0, dt), q)


_UNARY = {"kEXP": "stablehlo.exponential", "kLOG": "stablehlo.log", "kSQRT": "stablehlo.sqrt",
          "kABS": "stablehlo.abs", "kNEG": "stablehlo.negate", "kSIN": "stablehlo.sine", "kCOS": "stablehlo.cosine",
          "kTAN": "stablehlo.tan", "kCEIL": "stablehlo.ceil", "kFLOOR": "stablehlo.floor",
          "kSIGN": "stablehlo.sign", "kROUND": "stablehlo.round_nearest_even", "kSINH": "chlo.sinh",
          "kCOSH": "chlo.cosh", "kASIN": "chlo.asin", "kACOS": "chlo.acos", "kATAN": "chlo.atan",
          "kASINH": "chlo.asinh", "kACOSH": "chlo.acosh", "kATANH": "chlo.atanh", "kERF": "chlo.erf"}
_INT_UNARY = {"kABS", "kNEG", "kSIGN"}


@register("unary")
def _unary(op, args, ctx, em):
    (x,) = args
    kind = ctx.attr("unaryOperation")
    dt = np.dtype(x.dtype)
    if kind == "kNOT" and dt == np.bool_:
        return [unary(em, "stablehlo.not", x, "not")]
    if kind == "kRECIP" and is_float(dt):
        return [binary(em, "stablehlo.divide", scalar(1, dt), x, "div")]
    if kind == "kROUND" and is_int(dt):
        return [val(em, x)]  # jnp.round of an integer is the integer
    if kind not in _UNARY or not (is_float(dt) or (kind in _INT_UNARY and is_int(dt) and dt.kind == "i")):
        raise Fallback(f"unary {kind} on {dt.name}")
    if kind == "kERF" and _is_low_float(dt):
        raise Fallback("kERF on a 16-bit float")  # jax upcasts erf of f16/bf16 itself
    name = _UNARY[kind]
    return [unary(em, name, x, name.split(".")[-1])]


@register("activation")
def _activation(op, args, ctx, em):
    (x,) = args
    x = val(em, x)
    float_only(x, "activation")
    if _is_low_float(x.dtype):  # f16/bf16 compute in f32, one rounding at the end (as the jax translation)
        (y,) = _activation(op, [convert(em, x, np.float32)], ctx, em)
        return [convert(em, y, x.dtype)]
    kind, dt = ctx.attr("activationType"), x.dtype
    a, b = scalar(ctx.attr("alpha", 0.0), dt), scalar(ctx.attr("beta", 0.0), dt)
    zero, one, half = scalar(0, dt), scalar(1, dt), scalar(0.5, dt)

    def ew(name, p, q):
        return binary(em, f"stablehlo.{name}", p, q, name[:3])

    def expm1_like(v):  # a * (exp(v) - 1)
        return ew("multiply", a, ew("subtract", unary(em, "stablehlo.exponential", v, "exp"), one))

    if kind == "kRELU":
        return [ew("maximum", x, zero)]
    if kind == "kSIGMOID":
        e = unary(em, "stablehlo.exponential", unary(em, "stablehlo.negate", x, "neg"), "exp")
        return [ew("divide", one, ew("add", one, e))]
    if kind == "kTANH":
        return [unary(em, "stablehlo.tanh", x, "tanh")]
    if kind == "kLEAKY_RELU":
        return [select(em, compare(em, x, zero, "GE", "ge"), x, ew("multiply", a, x))]
    if kind == "kELU":
        return [select(em, compare(em, x, zero, "GE", "ge"), x, expm1_like(x))]
    if kind == "kSELU":
        return [ew("multiply", b, select(em, compare(em, x, zero, "GT", "gt"), x, expm1_like(x)))]
    if kind == "kSOFTSIGN":
        return [ew("divide", x, ew("add", one, unary(em, "stablehlo.abs", x, "abs")))]
    if kind == "kSOFTPLUS":
        z = ew("multiply", b, x)
        tail = unary(em, "stablehlo.log_plus_one", unary(em, "stablehlo.exponential", unary(
            em, "stablehlo.negate", unary(em, "stablehlo.abs", z, "abs"), "neg"), "exp"), "log1p")
        return [ew("multiply", a, ew("add", ew("maximum", z, zero), tail))]
    if kind == "kCLIP":
        return [ew("minimum", ew("maximum", x, a), b)]
    if kind == "kHARD_SIGMOID":
        return [ew("maximum", zero, ew("minimum", one, ew("add", ew("multiply", a, x), b)))]
    if kind == "kSCALED_TANH":
        return [ew("multiply", a, unary(em, "stablehlo.tanh", ew("multiply", b, x), "tanh"))]
    if kind == "kTHRESHOLDED_RELU":
        return [select(em, compare(em, x, a, "GT", "gt"), x, zero)]
    if kind == "kGELU_ERF":
        inner = unary(em, "chlo.erf", ew("divide", x, scalar(math.sqrt(2.0), dt)), "erf")
        return [ew("multiply", ew("multiply", half, x), ew("add", one, inner))]
    if kind == "kGELU_TANH":
        c, k = scalar(math.sqrt(2.0 / math.pi), dt), scalar(0.044715, dt)
        cube = ew("multiply", ew("multiply", ew("multiply", k, x), x), x)
        t = unary(em, "stablehlo.tanh", ew("multiply", c, ew("add", x, cube)), "tanh")
        return [ew("multiply", ew("multiply", half, x), ew("add", one, t))]
    raise Fallback(f"activation {kind}")


# ---------------------------------------------------------------------------------------------- linear algebra
@register("matrix_multiply")
def _matrix_multiply(op, args, ctx, em):
    a, b = (val(em, v) for v in args)
    op0, op1 = ctx.attr("op0", "kNONE"), ctx.attr("op1", "kNONE")
    if "kVECTOR" in (op0, op1):
        return [_vector_matmul(em, a, b, op0, op1)]
    if a.ndim < 2 or a.ndim != b.ndim:
        raise Fallback("matrix_multiply with vectors or operands of different ranks")
    if not is_float(a.dtype):
        raise Fallback(f"matrix_multiply on {np.dtype(a.dtype).name}")
    _same_dtype(a, b)
    swap = list(range(a.ndim - 2)) + [a.ndim - 1, a.ndim - 2]
    if op0 == "kTRANSPOSE":
        a = transpose(em, a, swap)
    if op1 == "kTRANSPOSE":
        b = transpose(em, b, swap)
    return [_batched_matmul(em, a, b)]


def _batched_matmul(em, a: Val, b: Val) -> Val:
    """``jnp.matmul`` of two rank-n operands whose batch dims are equal or 1, as jax lowers it: a batch dim
    of 1 on one side is squeezed and becomes a free dim of the other operand, the shared ones are dot
    batch dims, and the result is transposed back into the batch order."""
    nb = a.ndim - 2
    a_sq, b_sq, a_batch, b_batch, idx_batch, idx_a, idx_b = [], [], [], [], [], [], []
    for i, (da, db) in enumerate(zip(a.shape[:nb], b.shape[:nb])):
        if da == 1:
            idx_b.append(i)
            a_sq.append(len(idx_batch) + len(idx_a) + len(a_sq))
        elif db == 1:
            idx_a.append(i)
            b_sq.append(len(idx_batch) + len(idx_b) + len(b_sq))
        elif da == db:
            a_batch.append(len(idx_batch) + len(idx_a))
            b_batch.append(len(idx_batch) + len(idx_b))
            idx_batch.append(i)
        else:
            raise Fallback(f"matrix_multiply batch dims {a.shape[:nb]} and {b.shape[:nb]}")
    idx_a.append(nb)
    idx_b.append(nb + 1)
    a = reshape(em, a, [d for k, d in enumerate(a.shape) if k not in a_sq])
    b = reshape(em, b, [d for k, d in enumerate(b.shape) if k not in b_sq])
    prec = em.dot_precision if np.dtype(a.dtype) == np.float32 else "DEFAULT"  # exact f32, like the jax path
    dims = (f"#stablehlo.dot<lhs_batching_dimensions = [{', '.join(map(str, a_batch))}], rhs_batching_dimensions = "
            f"[{', '.join(map(str, b_batch))}], lhs_contracting_dimensions = [{a.ndim - 1}], "
            f"rhs_contracting_dimensions = [{b.ndim - 2}]>")
    attrs = {"dot_dimension_numbers": dims,
             "precision_config": f"[#stablehlo<precision {prec}>, #stablehlo<precision {prec}>]"}
    free_a = [d for k, d in enumerate(a.shape[:-1]) if k not in a_batch]
    free_b = [d for k, d in enumerate(b.shape) if k not in b_batch and k != b.ndim - 2]
    shape = tuple(a.shape[k] for k in a_batch) + tuple(free_a) + tuple(free_b)
    out = em.op("stablehlo.dot_general", [a, b], shape, a.dtype, attrs, prim="dot_general")
    return transpose(em, out, np.argsort(np.array(idx_batch + idx_a + idx_b)))


def _dot(em, a, b, lhs: int, rhs: int, shape) -> Val:
    prec = em.dot_precision if np.dtype(a.dtype) == np.float32 else "DEFAULT"
    attrs = {"dot_dimension_numbers": f"#stablehlo.dot<lhs_batching_dimensions = [], rhs_batching_dimensions = [], "
                                      f"lhs_contracting_dimensions = [{lhs}], rhs_contracting_dimensions = [{rhs}]>",
             "precision_config": f"[#stablehlo<precision {prec}>, #stablehlo<precision {prec}>]"}
    return em.op("stablehlo.dot_general", [a, b], shape, a.dtype, attrs, prim="dot_general")


def _vector_matmul(em, a, b, op0, op1) -> Val:
    """The translation's einsums on a rank-1 vector and a matrix (or two vectors), as jnp.einsum lowers them."""
    if not is_float(a.dtype):
        raise Fallback(f"matrix_multiply on {np.dtype(a.dtype).name}")
    _same_dtype(a, b)
    if op0 == "kTRANSPOSE" or op1 == "kTRANSPOSE":
        raise Fallback("vector matrix_multiply with a transposed operand")
    if op0 == "kVECTOR" and op1 == "kVECTOR" and a.ndim == b.ndim == 1:
        return _dot(em, a, b, 0, 0, ())
    if op0 == "kVECTOR" and a.ndim == 1 and b.ndim == 2:  # "...k,...kn->...n"
        return _dot(em, a, b, 0, 0, (b.shape[1],))
    if op1 == "kVECTOR" and a.ndim == 2 and b.ndim == 1:  # "...mk,...k->...m"
        return _dot(em, a, b, 1, 0, (a.shape[0],))
    raise Fallback("matrix_multiply with batched vectors")


_REDUCE = {"kSUM": ("add", 0), "kPROD": ("multiply", 1), "kMAX": ("maximum", None), "kMIN": ("minimum", None)}


@register("reduce")
def _reduce(op, args, ctx, em):
    (x,) = args
    x = val(em, x)
    axes = tuple(ctx.attr("reduceAxes", ()))
    keep = bool(ctx.attr("keepDimensions", False))
    kind = ctx.attr("reduceOperation")
    dt = np.dtype(x.dtype)
    if kind not in (*_REDUCE, "kAVG") or dt == np.bool_ or (kind == "kAVG" and not is_float(dt)):
        raise Fallback(f"reduce {kind} on {dt.name}")
    acc = convert(em, x, np.float32) if _is_low_float(dt) and kind in ("kSUM", "kPROD", "kAVG") else x
    if kind in ("kSUM", "kPROD", "kAVG") and is_int(dt) and dt.itemsize < 4:
        raise Fallback(f"reduce {kind} on {dt.name}")  # jnp promotes small ints first
    name, init = _REDUCE["kSUM" if kind == "kAVG" else kind]
    if init is None:
        init = (-np.inf if kind == "kMAX" else np.inf) if is_float(dt) else (
            np.iinfo(dt).min if kind == "kMAX" else np.iinfo(dt).max)
    r = reduce(em, acc, axes, name, init)
    if keep:
        r = keepdims(em, r, x.shape, axes)
    if kind == "kAVG":
        count = int(np.prod([x.shape[int(a) % x.ndim] for a in axes], dtype=np.int64)) if axes else 1
        r = binary(em, "stablehlo.divide", r, scalar(count, acc.dtype), "div")
    return [convert(em, r, dt)]


@register("softmax")
def _softmax(op, args, ctx, em):
    (x,) = args
    x = val(em, x)
    float_only(x, "softmax")
    axis, dt = int(ctx.attr("axis")) % x.ndim, x.dtype
    xf = convert(em, x, np.float32) if _is_low_float(dt) else x
    m = reduce(em, xf, (axis,), "maximum", -np.inf)
    m = binary(em, "stablehlo.maximum", scalar(-np.inf, xf.dtype), m, "max")  # jnp.max(..., initial=-inf)
    e = unary(em, "stablehlo.exponential", binary(em, "stablehlo.subtract", xf, keepdims(em, m, xf.shape, (axis,)),
                                                  "sub"), "exp")
    s = keepdims(em, reduce(em, e, (axis,), "add", 0), xf.shape, (axis,))
    return [convert(em, binary(em, "stablehlo.divide", e, s, "div"), dt)]


# ---------------------------------------------------------------------------------------------- shapes, data movement
@register("constant")
def _constant(op, args, ctx, em):
    if ctx.index in ctx.lifted:
        return [ctx.lifted[ctx.index]]
    from tripy_lab.engine.xla.ops import constant_value

    return [constant_value(op, ctx.program)]


@register("shape")
def _shape(op, args, ctx, em):
    return [np.asarray(args[0].shape, dtype=ctx.result_dtype())]


def _static_shape(ctx, name: str):
    from tripy_lab.engine.xla.ops import _target_shape

    return _target_shape(ctx, ctx.operand(name))


@register("reshape")
def _reshape(op, args, ctx, em):
    return [reshape(em, ctx.operand("input"), _static_shape(ctx, "shape"))]


@register("transpose")
def _transpose(op, args, ctx, em):
    return [transpose(em, args[0], ctx.attr("permutation"))]


@register("broadcast")
def _broadcast(op, args, ctx, em):
    x = val(em, ctx.operand("input"))
    shape = tuple(_static_shape(ctx, "shape"))
    dims = tuple(ctx.attr("broadcast_dims", ()))
    if len(dims) != x.ndim:
        if dims or x.ndim > len(shape):
            raise Fallback("broadcast_dims of the wrong length")  # the jax path raises the user's error
        dims = tuple(range(len(shape) - x.ndim, len(shape)))
    if any(x.shape[i] not in (1, shape[d]) for i, d in enumerate(dims)):
        raise Fallback("broadcast of a non-unit dim")  # the jax path raises the user's error
    if len(set(dims)) != len(dims):
        raise Fallback("repeated broadcast_dims")
    # broadcast_in_dim takes unordered dims and unit dims stretch: the same values as the translation's
    # transpose + reshape + broadcast_to
    return [em.op("stablehlo.broadcast_in_dim", [x], shape, x.dtype, {"broadcast_dimensions": i64_array(dims)},
                  prim="broadcast_in_dim")]


@register("concatenation")
def _concatenation(op, args, ctx, em):
    vs = [val(em, v) for v in args]
    dt = _same_dtype(*vs)
    axis = int(ctx.attr("axis", 0)) % vs[0].ndim
    shape = list(vs[0].shape)
    shape[axis] = sum(v.shape[axis] for v in vs)
    if len(vs) == 1:
        return [vs[0]]
    return [em.op("stablehlo.concatenate", vs, shape, dt, {"dimension": f"{axis} : i64"}, prim="concatenate")]


@register("select")
def _select(op, args, ctx, em):
    return [select(em, *args)]


@register("cast")
def _cast(op, args, ctx, em):
    return [convert_like_translation(em, args[0], ctx.result_dtype())]


TABLE["tensorrt.identity"] = _cast


@register("collapse_rank")
def _collapse_rank(op, args, ctx, em):
    (x,) = args
    drop = _unit_dims_to_drop(tuple(x.shape), ctx.operand_type_shape("input"), ctx.result_shape())
    if drop is None:
        raise Fallback("collapse_rank of non-unit dims")  # the jax path raises the user's error
    return [reshape(em, x, tuple(d for i, d in enumerate(x.shape) if i not in drop))]


@register("expand_rank")
def _expand_rank(op, args, ctx, em):
    (x,) = args
    out_t = ctx.result_shape()
    k = len(out_t) - len(x.shape)
    for combo in itertools.combinations([i for i, d in enumerate(out_t) if d == 1], k):
        it = iter(x.shape)
        shape = [1 if i in combo else next(it) for i in range(len(out_t))]
        if all(t is None or t == d for t, d in zip(out_t, shape)):
            return [reshape(em, x, shape)]
    raise Fallback("expand_rank of non-unit dims")


@register("shuffle")
def _shuffle(op, args, ctx, em):
    x = val(em, ctx.operand("input"))
    x = transpose(em, x, tuple(ctx.attr("first_transpose", tuple(range(x.ndim)))))
    dyn = ctx.operand("dynamic_reshape")
    shape = ctx.static_ints(dyn, "dynamic_reshape") if dyn is not None else ctx.attr("reshape", None)
    if shape is not None and (len(shape) or x.size == 1):
        zero_ph = bool(ctx.attr("zero_is_placeholder", True))
        shape = tuple(x.shape[i] if (d == 0 and zero_ph) else d for i, d in enumerate(shape))
        if any(d < 0 for d in shape):
            raise Fallback("shuffle reshape with -1")
        x = reshape(em, x, shape)
    second = ctx.attr("second_transpose", ())
    return [transpose(em, x, tuple(second)) if second else x]


@register("slice")
def _slice(op, args, ctx, em):
    x = val(em, ctx.operand("input"))
    start, size, stride = (ctx.operand(n) for n in ("start", "size", "stride"))
    start = ctx.static_ints(start, "start") if start is not None else tuple(ctx.attr("static_start", ()))
    size = ctx.static_ints(size, "size") if size is not None else tuple(ctx.attr("static_size", ()))
    stride = ctx.static_ints(stride, "stride") if stride is not None else tuple(ctx.attr("static_stride", ()))
    stride = stride or (1,) * x.ndim
    if not (len(start) == len(size) == len(stride) == x.ndim) or any(s <= 0 for s in size) \
            or any(s == 0 for s in stride):
        raise Fallback("slice with empty, zero-stride or mismatched start/size/stride")
    last = [st + (sz - 1) * sd for st, sz, sd in zip(start, size, stride)]
    if any(min(st, la) < 0 or max(st, la) >= n for st, la, n in zip(start, last, x.shape)):
        raise Fallback("slice out of bounds")  # kFILL/kWRAP/... or the user's error: the jax path handles it
    flip = [d for d, sd in enumerate(stride) if sd < 0]
    if flip:  # reversed, a negative stride reads forward from n - 1 - start
        x = em.op("stablehlo.reverse", [x], x.shape, x.dtype, {"dimensions": i64_array(flip)}, prim="rev")
        start = [n - 1 - st if sd < 0 else st for st, sd, n in zip(start, stride, x.shape)]
        stride = [abs(sd) for sd in stride]
    limit = [st + (sz - 1) * sd + 1 for st, sz, sd in zip(start, size, stride)]
    attrs = {"start_indices": i64_array(start), "limit_indices": i64_array(limit), "strides": i64_array(stride)}
    return [em.op("stablehlo.slice", [x], size, x.dtype, attrs, prim="slice")]


# ---------------------------------------------------------------------------------------------- layers, indexing
def _mean(em, x: Val, axes) -> Val:
    """``jnp.mean(x, axes, keepdims=True)``: the sum, its dims kept, divided by the count (in x's dtype)."""
    count = math.prod(x.shape[a] for a in axes)
    return binary(em, "stablehlo.divide", keepdims(em, reduce(em, x, axes, "add", 0), x.shape, axes),
                  scalar(count, x.dtype), "div")


@register("normalization")
def _normalization(op, args, ctx, em):
    x = val(em, ctx.operand("input"))
    scale, bias = val(em, ctx.operand("scale")), val(em, ctx.operand("bias"))
    float_only(x, "normalization")
    if int(ctx.attr("num_groups", 1) or 1) > 1:
        raise Fallback("group normalization")
    axes = sorted(int(a) % x.ndim for a in ctx.attr("axis", ()))
    eps, dt = float(ctx.attr("eps", 1e-5)), x.dtype
    xf = convert(em, x, np.float32) if dt.itemsize < 4 else x
    d = binary(em, "stablehlo.subtract", xf, _mean(em, xf, axes), "sub")
    var = _mean(em, binary(em, "stablehlo.multiply", d, d, "integer_pow"), axes)  # (x - mean) ** 2
    y = binary(em, "stablehlo.divide", d, unary(em, "stablehlo.sqrt", binary(
        em, "stablehlo.add", var, scalar(eps, xf.dtype), "add"), "sqrt"), "div")
    y = binary(em, "stablehlo.add", binary(em, "stablehlo.multiply", y, convert(em, scale, y.dtype), "mul"),
               convert(em, bias, y.dtype), "add")
    return [convert(em, y, dt)]


@register("gather")
def _gather(op, args, ctx, em):
    """``ops._take``: indices in [-n, n) count from the end when negative, all others read 0."""
    data, known = val(em, ctx.operand("data")), ctx.operand("indices")
    idx = val(em, known)
    axis = int(ctx.attr("axis", 0)) % max(data.ndim, 1)
    if int(ctx.attr("numBroadcastDims", 0) or 0) or not is_int(idx.dtype) or data.shape[axis] == 0 or idx.size == 0:
        raise Fallback("gather with broadcast dims, non-integer or empty indices")
    n, it = data.shape[axis], idx.dtype
    safe = ok = None
    if isinstance(known, np.ndarray):  # constant indices (an Embedding's ids table, a permutation): wrap them here
        wrapped = np.where(known < 0, known + n, known)
        if ((wrapped >= 0) & (wrapped < n)).all():  # every one in range: a plain gather, no mask ops
            safe = val(em, wrapped.astype(known.dtype))
    if safe is None:
        idx = select(em, compare(em, idx, scalar(0, it), "LT", "lt"),
                     binary(em, "stablehlo.add", idx, scalar(n, it), "add"), idx)
        ok = binary(em, "stablehlo.and", compare(em, idx, scalar(0, it), "GE", "ge"),
                    compare(em, idx, scalar(n, it), "LT", "lt"), "and")
        safe = select(em, ok, idx, scalar(0, it))
    k = safe.ndim
    starts = reshape(em, safe, safe.shape + (1,))
    shape = data.shape[:axis] + safe.shape + data.shape[axis + 1:]
    offset = [d for d in range(len(shape)) if not axis <= d < axis + k]
    dims = (f"#stablehlo.gather<offset_dims = [{', '.join(map(str, offset))}], collapsed_slice_dims = [{axis}], "
            f"start_index_map = [{axis}], index_vector_dim = {k}>")
    sizes = [1 if d == axis else s for d, s in enumerate(data.shape)]
    out = em.op("stablehlo.gather", [data, starts], shape, data.dtype,
                {"dimension_numbers": dims, "slice_sizes": i64_array(sizes), "indices_are_sorted": "false"},
                prim="gather")
    if ok is None:
        return [out]
    mask = reshape(em, ok, (1,) * axis + ok.shape + (1,) * (data.ndim - axis - 1))
    return [select(em, mask, out, scalar(0, data.dtype))]


# ---------------------------------------------------------------------------------------------- windows
def _conv_dims(nsp: int) -> str:
    sp = ", ".join(str(i) for i in range(nsp))
    return f"#stablehlo.conv<[b, f, {sp}]x[o, i, {sp}]->[b, f, {sp}]>"


def _pads_attr(pads) -> str:
    pads = list(pads)
    rows = ", ".join(f"[{int(lo)}, {int(hi)}]" for lo, hi in pads)
    return f"dense<[{rows}]> : tensor<{len(pads)}x2xi64>"


@register("convolution")
def _convolution(op, args, ctx, em):
    """``ops._convolution``: one ``stablehlo.convolution`` as ``lax.conv_general_dilated`` writes it (NC..
    / OI.. layouts, exact f32), then the bias added with numpy's broadcast."""
    from tripy_lab.engine.xla.ops import _weights, _window_attrs

    x = ctx.operand("input")
    if not isinstance(x, Val) or not is_float(x.dtype) or not 1 <= x.ndim - 2 <= 3:
        raise Fallback("convolution of a static, non-float or rank > 5 input")
    w, b = _weights(ctx, "kernel", "kernelStatic"), _weights(ctx, "bias", "biasStatic")
    nsp = x.ndim - 2
    stride, pre, post, dil = _window_attrs(ctx, nsp)
    groups = int(ctx.attr("num_groups", 1) or 1)
    w = convert(em, val(em, w), x.dtype) if isinstance(w, Val) else em.const(np.asarray(w).astype(x.dtype))
    if w.ndim != x.ndim or x.shape[1] != w.shape[1] * groups:
        raise Fallback("convolution kernel shape")
    spatial = [(n + lo + hi - d * (k - 1) - 1) // s + 1
               for n, lo, hi, d, k, s in zip(x.shape[2:], pre, post, dil, w.shape[2:], stride)]
    prec = "HIGHEST" if x.dtype == np.float32 else "DEFAULT"
    attrs = {"batch_group_count": "1 : i64", "dimension_numbers": _conv_dims(nsp),
             "feature_group_count": f"{groups} : i64", "lhs_dilation": i64_array((1,) * nsp),
             "padding": _pads_attr(zip(pre, post)),
             "precision_config": f"[#stablehlo<precision {prec}>, #stablehlo<precision {prec}>]",
             "rhs_dilation": i64_array(dil), "window_reversal": "array<i1: " + ", ".join(["false"] * nsp) + ">",
             "window_strides": i64_array(stride)}
    y = em.op("stablehlo.convolution", [x, w], (x.shape[0], w.shape[0], *spatial), x.dtype, attrs,
              prim="conv_general_dilated")
    if b is not None:
        b = reshape(em, convert(em, b, x.dtype), (1, -1) + (1,) * nsp) if isinstance(b, Val) else \
            np.asarray(b).astype(x.dtype).reshape((1, -1) + (1,) * nsp)
        y = binary(em, "stablehlo.add", y, b, "add")
    return [y]


def _reduce_window(em, x: Val, init, kind: str, win, strides, pads) -> Val:
    t = Val("", (), x.dtype).type
    body = (f'{{\n    ^bb0(%a: {t}, %b: {t}):\n      %r = "stablehlo.{kind}"(%a, %b) : ({t}, {t}) -> {t}\n'
            f'      "stablehlo.return"(%r) : ({t}) -> ()\n    }}')
    shape = tuple((n + lo + hi - k) // s + 1 for n, (lo, hi), k, s in zip(x.shape, pads, win, strides))
    attrs = {"base_dilations": i64_array((1,) * x.ndim), "padding": _pads_attr(pads),
             "window_dilations": i64_array((1,) * x.ndim), "window_dimensions": i64_array(win),
             "window_strides": i64_array(strides)}
    return em.op("stablehlo.reduce_window", [x, em.const(np.asarray(init, x.dtype))], shape, x.dtype, attrs,
                 region=body, prim="reduce_window_" + _REDUCE_PRIM[kind])


@register("pooling")
def _pooling(op, args, ctx, em):
    """``ops._pooling`` for float inputs: max as one reduce_window, average as a windowed sum in f32 over
    the count of real (or all) elements."""
    (x,) = args
    if not isinstance(x, Val) or not is_float(x.dtype):
        raise Fallback("pooling of a static or integer input")
    nsp = len(ctx.attr("windowSize"))
    lead = x.ndim - nsp
    win = (1,) * lead + tuple(int(k) for k in ctx.attr("windowSize"))
    strides = (1,) * lead + tuple(int(s) for s in ctx.attr("stride", (1,) * nsp))
    pads = [(0, 0)] * lead + [(int(lo), int(hi)) for lo, hi in zip(ctx.attr("prePadding", (0,) * nsp),
                                                                 ctx.attr("postPadding", (0,) * nsp))]
    kind = ctx.attr("poolingType")
    if kind == "kMAX":
        return [_reduce_window(em, x, -np.inf, "maximum", win, strides, pads)]
    if kind != "kAVERAGE":
        raise Fallback(f"pooling {kind}")
    s = _reduce_window(em, convert(em, x, np.float32), 0.0, "add", win, strides, pads)
    if ctx.attr("averageCountExcludesPadding", True):
        ones = bcast(em, em.const(np.ones((), np.float32)), x.shape)
        cnt = _reduce_window(em, ones, 0.0, "add", win, strides, pads)
    else:
        cnt = scalar(float(np.prod(win)), np.float32)
    return [convert(em, binary(em, "stablehlo.divide", s, cnt, "div"), x.dtype)]


@register("linspace")
def _linspace(op, args, ctx, em):
    """``ops._linspace`` op for op: zeros + start, plus iota * step[d] along each dim."""
    from tripy_lab.engine.xla.ops import _target_shape

    dt = ctx.result_dtype()
    if dt == np.bool_:
        raise Fallback("linspace of bool")
    shape = tuple(_target_shape(ctx, ctx.operand("shape")))
    start, step = ctx.operand("start"), ctx.operand("step")
    start = scalar(ctx.attr("static_start", 0.0), dt) if start is None else convert(em, reshape(em, start, ()), dt)
    if step is None:
        step = np.asarray([ctx.attr("static_step", 1.0)] * max(len(shape), 1), dtype=dt)
    step = convert(em, reshape(em, step, (-1,)), dt)
    out = binary(em, "stablehlo.add", em.const(np.zeros((), dt)) if not shape else bcast(
        em, em.const(np.zeros((), dt)), shape), start, "add")
    for d, n in enumerate(shape):
        iota = em.op("stablehlo.iota", [], (n,), dt, {"iota_dimension": "0 : i64"}, prim="iota")
        iota = reshape(em, iota, tuple(n if k == d else 1 for k in range(len(shape))))
        sd = reshape(em, em.op("stablehlo.slice", [step], (1,), dt, {"start_indices": i64_array([d]),
                                                                      "limit_indices": i64_array([d + 1]),
                                                                      "strides": i64_array([1])}, prim="slice"), ())
        out = binary(em, "stablehlo.add", out, binary(em, "stablehlo.multiply", iota, sd, "mul"), "add")
    return [out]


def _q_scale(em, ctx, x, scale) -> Val:
    """``ops._q_scale``: a scalar, or per-axis scales shaped to broadcast along ``axis`` (blocks: fallback)."""
    scale = convert(em, val(em, scale), np.float32)
    axis = ctx.attr("axis", None)
    if scale.ndim == 0:
        return scale
    if scale.ndim == 1 and x.ndim != 1 or axis is not None:
        ax = int(axis if axis is not None else 0)
        return reshape(em, scale, tuple(scale.size if d == ax else 1 for d in range(x.ndim)))
    if scale.shape != x.shape:
        raise Fallback("block quantization scales")
    return scale


@register("quantize")
def _quantize(op, args, ctx, em):
    x, out = val(em, ctx.operand("input")), ctx.result_dtype()
    if out != np.int8:
        raise Fallback(f"quantize to {out.name}")
    lo, hi = (-128, 127)  # ops._QRANGE
    q = binary(em, "stablehlo.divide", convert(em, x, np.float32), _q_scale(em, ctx, x, ctx.operand("scale")), "div")
    f32 = np.float32
    clipped = binary(em, "stablehlo.minimum", scalar(hi, f32), binary(
        em, "stablehlo.maximum", scalar(lo, f32), unary(em, "stablehlo.round_nearest_even", q, "round"), "max"),
        "min")
    q = select(em, compare(em, q, q, "NE", "ne"), scalar(0.0, f32), clipped)  # nan -> 0 (docs/SEMANTICS.md)
    return [convert(em, q, out)]


@register("dequantize")
def _dequantize(op, args, ctx, em):
    x = val(em, ctx.operand("input"))
    y = binary(em, "stablehlo.multiply", convert(em, x, np.float32), _q_scale(em, ctx, x, ctx.operand("scale")),
               "mul")
    return [convert(em, y, ctx.result_dtype())]
