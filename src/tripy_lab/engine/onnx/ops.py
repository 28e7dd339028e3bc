"""The ONNX lowering table: MLIR op name -> ``fn(op, ctx) -> [ONNX tensor name per result]``.

``ctx`` is a ``lowering.OpLowering``: named operands as ONNX tensor names (``ctx.operand("input")``),
attributes as Python values (``ctx.attr("axis")``), MLIR types (``ctx.elem(v)``, ``ctx.shape(v)``) and
``ctx.node(op_type, inputs, **attrs)`` / ``ctx.const(array)`` to emit nodes and initializers.

Every entry keeps the reference engine's meaning (``engine/reference/ops.py``) at every shape of the profile:
shape operands are graph values, never numbers baked in at build time. Where onnxruntime's CPU kernels
lack a dtype (f16/bf16 math, bool reductions) the entry computes in f32 (or i32) and casts back once,
which is also what the reference does. Entries that cannot be expressed raise a TripyException naming the
op and the user's line (``ctx.error``): ``tensorrt.opaque_plugin`` (TensorRT plugins) and a gather with
``numBroadcastDims`` != 0 (never emitted by tripy-lab's lowering).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import ml_dtypes
import numpy as np

from tripy_lab.engine.onnx import fold

LOW_FLOATS = {"f16", "bf16", "f8E4M3FN", "f4E2M1FN"}
INTS = {"i4", "i8", "ui8", "i32", "i64", "ui32"}
INT64_MIN = -(2**63)

TABLE: dict[str, Callable] = {}


def register(name: str):
    def deco(fn):
        TABLE["tensorrt." + name] = fn
        return fn
    return deco


def _up(ctx, x: str, elem: str) -> tuple[str, str]:
    """Compute in f32 for f16/bf16/f8 (onnxruntime's CPU kernels are f32/f64)."""
    return (ctx.cast(x, "f32"), "f32") if elem in LOW_FLOATS else (x, elem)


def _back(ctx, y: str, cur: str, want: str) -> str:
    return y if cur == want else ctx.cast(y, want)


def _scalar(ctx, value, elem: str) -> str:
    from tripy_lab.mlir.attrs import NUMPY_DTYPES

    return ctx.const(np.asarray(value, dtype=NUMPY_DTYPES[elem]))


def _i64(ctx, name: str, elem: str) -> str:
    return name if elem == "i64" else ctx.cast(name, "i64")


# ---------------------------------------------------------------------------------------------- element-wise
_EW = {"kSUM": "Add", "kSUB": "Sub", "kPROD": "Mul", "kMAX": "Max", "kMIN": "Min", "kPOW": "Pow",
       "kAND": "And", "kOR": "Or", "kXOR": "Xor", "kEQUAL": "Equal", "kGREATER": "Greater", "kLESS": "Less"}


@register("element_wise")
def _element_wise(op, ctx):
    a, b = ctx.operand("input1"), ctx.operand("input2")
    kind, elem, out = ctx.attr("elementwiseOperation"), ctx.elem(op.input1), ctx.result_elem()
    if elem == "i1" and kind in ("kSUM", "kPROD", "kMAX", "kMIN", "kSUB"):  # bool arithmetic: via int32
        y = _element_wise_named(ctx, kind, ctx.cast(a, "i32"), ctx.cast(b, "i32"), "i32")
        return [ctx.cast(y, "i1")]
    a, cur = _up(ctx, a, elem)
    b, _ = _up(ctx, b, elem)
    y = _element_wise_named(ctx, kind, a, b, cur)
    return [y if out == "i1" else _back(ctx, y, cur, out)]


def _element_wise_named(ctx, kind: str, a: str, b: str, elem: str) -> str:
    if kind in ("kDIV", "kFLOOR_DIV") and elem in INTS:
        return _int_divide(ctx, kind, a, b, elem)
    if kind == "kDIV":
        return ctx.node("Div", [a, b])
    if kind == "kFLOOR_DIV":
        return ctx.node("Floor", [ctx.node("Div", [a, b])])
    if kind not in _EW:
        raise ctx.error(f"unknown element-wise operation {kind!r}")
    return ctx.node(_EW[kind], [a, b])


def _int_divide(ctx, kind: str, a: str, b: str, elem: str) -> str:
    """docs/SEMANTICS.md (``semantics.int_divide``): kDIV truncates, kFLOOR_DIV floors, a zero divisor gives 0
    and ``INT_MIN / -1`` wraps to ``INT_MIN``. ONNX Div on ints truncates; the divisor it sees is never 0 or -1
    (both trap in C++), a quotient by -1 is ``0 - a`` (which wraps), and floor steps the truncated quotient
    down where the remainder's sign differs from the divisor's (no ``a - a % b``, which overflows)."""
    zero, one = _scalar(ctx, 0, elem), _scalar(ctx, 1, elem)
    is_zero = ctx.node("Equal", [b, zero])
    signed = not elem.startswith("ui")
    is_neg1 = ctx.node("Equal", [b, _scalar(ctx, -1, elem)]) if signed else None
    unsafe = ctx.node("Or", [is_zero, is_neg1]) if signed else is_zero
    safe = _where(ctx, unsafe, one, b, elem)
    q = ctx.node("Div", [a, safe])
    if kind == "kFLOOR_DIV" and signed:
        r = ctx.node("Sub", [a, ctx.node("Mul", [q, safe])])
        differs = ctx.node("Xor", [ctx.node("Less", [r, zero]), ctx.node("Less", [safe, zero])])
        step = ctx.node("And", [ctx.node("Not", [ctx.node("Equal", [r, zero])]), differs])
        q = _where(ctx, step, ctx.node("Sub", [q, one]), q, elem)
    if signed:
        q = _where(ctx, is_neg1, ctx.node("Sub", [zero, a]), q, elem)
    return _where(ctx, is_zero, zero, q, elem)


_UNARY = {"kEXP": "Exp", "kLOG": "Log", "kSQRT": "Sqrt", "kRECIP": "Reciprocal", "kABS": "Abs", "kNEG": "Neg",
          "kSIN": "Sin", "kCOS": "Cos", "kTAN": "Tan", "kSINH": "Sinh", "kCOSH": "Cosh", "kASIN": "Asin",
          "kACOS": "Acos", "kATAN": "Atan", "kASINH": "Asinh", "kACOSH": "Acosh", "kATANH": "Atanh",
          "kCEIL": "Ceil", "kFLOOR": "Floor", "kERF": "Erf", "kNOT": "Not", "kSIGN": "Sign", "kROUND": "Round"}
_INT_UNARY = {"kABS", "kNEG", "kSIGN", "kNOT"}


@register("unary")
def _unary(op, ctx):
    x, kind, elem = ctx.operand("input"), ctx.attr("unaryOperation"), ctx.elem(op.input)
    if kind not in _UNARY:
        raise ctx.error(f"unknown unary operation {kind!r}")
    if elem in INTS and kind not in _INT_UNARY:  # float math on ints: in f64, truncated back like numpy
        return [ctx.cast(ctx.node(_UNARY[kind], [ctx.cast(x, "f64")]), elem)]
    x, cur = _up(ctx, x, elem)
    return [_back(ctx, ctx.node(_UNARY[kind], [x]), cur, ctx.result_elem())]


@register("activation")
def _activation(op, ctx):
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    x, cur = _up(ctx, x, elem)
    kind = ctx.attr("activationType")
    alpha, beta = float(ctx.attr("alpha", 0.0)), float(ctx.attr("beta", 0.0))
    direct = {"kRELU": ("Relu", {}), "kSIGMOID": ("Sigmoid", {}), "kTANH": ("Tanh", {}),
              "kLEAKY_RELU": ("LeakyRelu", {"alpha": alpha}), "kELU": ("Elu", {"alpha": alpha}),
              "kSELU": ("Selu", {"alpha": alpha, "gamma": beta}), "kSOFTSIGN": ("Softsign", {}),
              "kHARD_SIGMOID": ("HardSigmoid", {"alpha": alpha, "beta": beta}),
              "kTHRESHOLDED_RELU": ("ThresholdedRelu", {"alpha": alpha}),
              "kGELU_ERF": ("Gelu", {"approximate": "none"}), "kGELU_TANH": ("Gelu", {"approximate": "tanh"})}
    if kind in direct:
        name, attrs = direct[kind]
        y = ctx.node(name, [x], **attrs)
    elif kind == "kCLIP":
        y = ctx.node("Clip", [x, _scalar(ctx, alpha, cur), _scalar(ctx, beta, cur)])
    elif kind == "kSOFTPLUS":  # alpha * log(1 + exp(beta * x))
        y = ctx.node("Mul", [ctx.node("Softplus", [ctx.node("Mul", [x, _scalar(ctx, beta, cur)])]),
                             _scalar(ctx, alpha, cur)])
    elif kind == "kSCALED_TANH":
        y = ctx.node("Mul", [ctx.node("Tanh", [ctx.node("Mul", [x, _scalar(ctx, beta, cur)])]),
                             _scalar(ctx, alpha, cur)])
    else:
        raise ctx.error(f"unknown activation type {kind!r}")
    return [_back(ctx, y, cur, elem)]


# ---------------------------------------------------------------------------------------------- linear algebra
@register("matrix_multiply")
def _matrix_multiply(op, ctx):
    a, b = ctx.operand("input0"), ctx.operand("input1")
    elem = ctx.elem(op.input0)
    a, cur = _up(ctx, a, elem)
    b, _ = _up(ctx, b, elem)
    op0, op1 = ctx.attr("op0", "kNONE"), ctx.attr("op1", "kNONE")
    ra, rb = len(ctx.shape(op.input0)), len(ctx.shape(op.input1))

    def swap_last(x, rank):
        perm = list(range(rank))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        return ctx.node("Transpose", [x], perm=perm)

    if op0 == "kTRANSPOSE":
        a = swap_last(a, ra)
    if op1 == "kTRANSPOSE":
        b = swap_last(b, rb)
    if op0 != "kVECTOR" and op1 != "kVECTOR" and 2 < rb <= ra:
        shape = list(ctx.shape(op.input1))
        if op1 == "kTRANSPOSE":
            shape[-1], shape[-2] = shape[-2], shape[-1]
        b = _matrix_operand(ctx, b, shape)
    if op0 == "kVECTOR" and op1 == "kVECTOR":
        y = ctx.node("ReduceSum", [ctx.node("Mul", [a, b]), ctx.ints([-1])], keepdims=0)
    elif op0 == "kVECTOR":  # [..., k] x [..., k, n] -> [..., n]
        y = ctx.node("Squeeze", [ctx.node("MatMul", [ctx.node("Unsqueeze", [a, ctx.ints([-2])]), b]),
                                 ctx.ints([-2])])
    elif op1 == "kVECTOR":  # [..., m, k] x [..., k] -> [..., m]
        y = ctx.node("Squeeze", [ctx.node("MatMul", [a, ctx.node("Unsqueeze", [b, ctx.ints([-1])])]),
                                 ctx.ints([-1])])
    else:
        y = ctx.node("MatMul", [a, b])
    return [_back(ctx, y, cur, ctx.result_elem())]


def _matrix_operand(ctx, b: str, shape) -> str:
    """``b`` [1, .., 1, K, N] (a Linear's weight as the frontend broadcasts it) as [K, N], with the same
    product (MatMul broadcasts it back over a's batch dims): onnxruntime prepacks only a 2-D constant B
    (GPT-2 small, T=64: its 13 MatMuls 433 -> 269 ms per call)."""
    *lead, k, n = shape
    if any(d != 1 for d in lead) or k is None or n is None:
        return b
    return ctx.node("Reshape", [b, ctx.ints([k, n])])


_REDUCE = {"kSUM": "ReduceSum", "kPROD": "ReduceProd", "kMAX": "ReduceMax", "kMIN": "ReduceMin",
           "kAVG": "ReduceMean"}


@register("reduce")
def _reduce(op, ctx):
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    kind = ctx.attr("reduceOperation")
    axes = [int(a) for a in ctx.attr("reduceAxes", ())]
    keep = int(bool(ctx.attr("keepDimensions", False)))
    if kind not in _REDUCE:
        raise ctx.error(f"unknown reduce operation {kind!r}")
    if not axes:
        return [ctx.node("Identity", [x])]
    if elem == "i1":
        x, cur = ctx.cast(x, "i32"), "i32"
    elif kind == "kAVG" and elem in INTS:  # mean of ints: in f64, truncated (numpy's mean, then astype)
        x, cur = ctx.cast(x, "f64"), "f64"
    else:
        x, cur = _up(ctx, x, elem)
    y = ctx.node(_REDUCE[kind], [x, ctx.ints(axes)], keepdims=keep)
    return [_back(ctx, y, cur, ctx.result_elem())]


@register("softmax")
def _softmax(op, ctx):
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    x, cur = _up(ctx, x, elem)
    return [_back(ctx, ctx.node("Softmax", [x], axis=int(ctx.attr("axis"))), cur, elem)]


# ---------------------------------------------------------------------------------------------- data movement
@register("constant")
def _constant(op, ctx):
    value = np.asarray(ctx.b.program.constant_value(op))
    shape = ctx.result_shape()
    if value.shape != shape:  # splats come back with one element
        value = np.broadcast_to(value.reshape(-1)[:1].reshape(()) if value.size == 1 else value, shape)
    return [ctx.const(value)]


@register("shape")
def _shape(op, ctx):
    return [_back(ctx, ctx.shape_node(op.input), "i64", ctx.result_elem())]


def _vector_or_static(ctx, operand: str, static: str, rank: int, default=None) -> tuple[str, np.ndarray | None]:
    """(ONNX int64 vector, its numpy value when static) of a shape-like operand or static attribute."""
    name = ctx.operand(operand)
    if name is not None:
        return _i64(ctx, name, ctx.elem(ctx.operand_value(operand))), None
    values = ctx.attr(static, None)
    if values is None or (len(values) == 0 and rank):
        values = default if default is not None else ()
    arr = np.asarray(values, dtype=np.int64).reshape(-1)
    return ctx.ints(arr), arr


def _dim(ctx, x: str, d: int) -> str:
    """Size of dim ``d`` of ``x`` as an int64 scalar."""
    return ctx.node("Squeeze", [ctx.node("Shape", [x], start=d, end=d + 1), ctx.ints([0])])


def _element(ctx, vec: str, static: np.ndarray | None, d: int) -> str:
    if static is not None:
        return ctx.const(np.asarray(static[d], dtype=np.int64))
    return ctx.node("Gather", [vec, ctx.const(np.asarray(d, dtype=np.int64))], axis=0)


@register("slice")
def _slice(op, ctx):
    x = ctx.operand("input")
    rank = len(ctx.shape(op.input))
    start, start_v = _vector_or_static(ctx, "start", "static_start", rank)
    size, size_v = _vector_or_static(ctx, "size", "static_size", rank)
    stride, stride_v = _vector_or_static(ctx, "stride", "static_stride", rank, default=[1] * rank)
    mode = ctx.attr("mode", "kDEFAULT") or "kDEFAULT"
    if rank == 0:
        return [ctx.node("Identity", [x])]
    if mode == "kDEFAULT" and stride_v is not None and np.all(stride_v != 0):
        # ONNX Slice: end = start + size * stride; a negative end of a non-empty negative-stride slice means
        # "down to index 0" (ONNX would count it from the back), so it becomes INT64_MIN
        if start_v is not None and size_v is not None:
            end_v = start_v + size_v * stride_v
            end_v = np.where((stride_v < 0) & (end_v < 0) & (size_v > 0), INT64_MIN, end_v)
            end = ctx.ints(end_v)
        else:
            end = ctx.node("Add", [start, ctx.node("Mul", [size, stride])])
            if np.any(stride_v < 0):
                zeros = ctx.ints([0] * rank)
                neg = ctx.node("And", [ctx.node("And", [ctx.node("Less", [stride, zeros]),
                                                        ctx.node("Less", [end, zeros])]),
                                       ctx.node("Greater", [size, zeros])])
                end = ctx.node("Where", [neg, ctx.ints([INT64_MIN] * rank), end])
        return [ctx.node("Slice", [x, start, end, ctx.ints(range(rank)), stride])]
    return [_slice_gather(op, ctx, x, rank, (start, start_v), (size, size_v), (stride, stride_v), mode)]


def _slice_gather(op, ctx, x, rank, start, size, stride, mode):
    """Slice as one Gather per dim, with the mode's index rule (wrap, clamp, reflect, fill)."""
    elem = ctx.elem(op.input)
    fill = None
    if mode == "kFILL":
        f = ctx.operand("fill")
        fill = (ctx.node("Reshape", [ctx.cast(f, elem) if ctx.elem(ctx.operand_value("fill")) != elem else f,
                                     ctx.ints([])]) if f is not None else _scalar(ctx, 0, elem))
    zero, one = ctx.const(np.asarray(0, np.int64)), ctx.const(np.asarray(1, np.int64))
    for d in range(rank):
        n = _dim(ctx, x, d)
        idx = ctx.node("Add", [_element(ctx, *start, d),
                               ctx.node("Mul", [ctx.node("Range", [zero, _element(ctx, *size, d), one]),
                                                _element(ctx, *stride, d)])])
        ok = None
        if mode == "kWRAP":
            idx = ctx.node("Mod", [idx, n])
        elif mode == "kCLAMP" or mode == "kFILL":
            if mode == "kFILL":
                ok = ctx.node("And", [ctx.node("GreaterOrEqual", [idx, zero]), ctx.node("Less", [idx, n])])
            idx = ctx.node("Max", [ctx.node("Min", [idx, ctx.node("Sub", [n, one])]), zero])
        elif mode == "kREFLECT":
            period = ctx.node("Max", [ctx.node("Mul", [ctx.node("Sub", [n, one]), ctx.const(np.asarray(2, np.int64))]),
                                      one])
            m = ctx.node("Mod", [idx, period])
            idx = ctx.node("Where", [ctx.node("GreaterOrEqual", [m, n]), ctx.node("Sub", [period, m]), m])
        elif mode != "kDEFAULT":
            raise ctx.error(f"unknown slice mode {mode!r}")
        x = ctx.node("Gather", [x, idx], axis=d)
        if ok is not None:
            axes = [k for k in range(rank) if k != d]
            mask = ctx.node("Unsqueeze", [ok, ctx.ints(axes)]) if axes else ok
            x = _where(ctx, mask, x, fill, elem)
    return x


@register("reshape")
def _reshape(op, ctx):
    x = ctx.operand("input")
    shape = ctx.operand("shape")
    if shape is not None:
        shape = _i64(ctx, shape, ctx.elem(op.shape))
        target = fold.reshape_target(ctx.known(shape))  # [1, T, 3, 4, 32] -> [1, -1, 3, 4, 32]: no shape nodes
        if target is not None:
            shape = ctx.ints(target)
    else:
        target = [-1 if d is None else d for d in ctx.result_shape()]
        if target.count(-1) > 1:
            raise ctx.error("the result type has more than one unknown dim and there is no 'shape' operand.")
        shape = ctx.ints(target)
    return [ctx.node("Reshape", [x, shape], allowzero=1)]


@register("transpose")
def _transpose(op, ctx):
    return [ctx.node("Transpose", [ctx.operand("input")], perm=[int(p) for p in ctx.attr("permutation")])]


@register("broadcast")
def _broadcast(op, ctx):
    x = ctx.operand("input")
    rank_in, out_shape = len(ctx.shape(op.input)), ctx.result_shape()
    shape = ctx.operand("shape")
    if shape is not None:
        shape = _i64(ctx, shape, ctx.elem(op.shape))
    elif any(d is None for d in out_shape):
        raise ctx.error("the result type has unknown dims and there is no 'shape' operand.")
    else:
        shape = ctx.ints(out_shape)
    dims = [int(d) for d in ctx.attr("broadcast_dims", ())]
    if len(dims) != rank_in:
        if dims or rank_in > len(out_shape):
            raise ctx.error(f"broadcast_dims {dims} must have one entry per input dim (rank {rank_in}).")
        dims = list(range(len(out_shape) - rank_in, len(out_shape)))
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    if order != list(range(len(dims))):
        x = ctx.node("Transpose", [x], perm=order)
        dims = [dims[i] for i in order]
    missing = [d for d in range(len(out_shape)) if d not in dims]
    if missing:
        x = ctx.node("Unsqueeze", [x, ctx.ints(missing)])
    return [ctx.node("Expand", [x, shape])]


@register("concatenation")
def _concatenation(op, ctx):
    return [ctx.node("Concat", ctx.operands("inputs"), axis=int(ctx.attr("axis", 0)))]


@register("gather")
def _gather(op, ctx):
    """IGatherLayer kDEFAULT: indices in [-n, n) count from the end when negative, the rest read 0."""
    data, idx = ctx.operand("data"), ctx.operand("indices")
    axis = int(ctx.attr("axis", 0))
    if int(ctx.attr("numBroadcastDims", 0) or 0):
        raise ctx.error("numBroadcastDims != 0 has no ONNX lowering (tripy-lab's lowering never emits it).")
    rank, irank = len(ctx.shape(op.data)), len(ctx.shape(op.indices))
    idx = _i64(ctx, idx, ctx.elem(op.indices))
    n = _dim(ctx, data, axis)
    zero = ctx.const(np.asarray(0, np.int64))
    idx = ctx.node("Where", [ctx.node("Less", [idx, zero]), ctx.node("Add", [idx, n]), idx])
    ok = ctx.node("And", [ctx.node("GreaterOrEqual", [idx, zero]), ctx.node("Less", [idx, n])])
    out = ctx.node("Gather", [data, ctx.node("Where", [ok, idx, zero])], axis=axis)
    axes = list(range(axis)) + list(range(axis + irank, rank - 1 + irank))
    mask = ctx.node("Unsqueeze", [ok, ctx.ints(axes)]) if axes else ok
    return [_where(ctx, mask, out, _scalar(ctx, 0, ctx.elem(op.data)), ctx.elem(op.data))]


_WHERE_TYPES = {"f32", "f64", "i32", "i64", "ui8"}  # onnxruntime's CPU Where kernels (1.30 has no int8 one)


def _where(ctx, c: str, t: str, e: str, elem: str) -> str:
    """``Where`` of ``elem`` values, through a type onnxruntime's CPU kernels have (exact: widening casts)."""
    if elem in _WHERE_TYPES:
        return ctx.node("Where", [c, t, e])
    via = "ui8" if elem == "i1" else "i32" if elem in INTS else "f32"
    return ctx.cast(ctx.node("Where", [c, ctx.cast(t, via), ctx.cast(e, via)]), elem)


@register("select")
def _select(op, ctx):
    c, t, e = ctx.operand("condition"), ctx.operand("thenInput"), ctx.operand("elseInput")
    return [_where(ctx, c, t, e, ctx.result_elem())]


def _convert(op, ctx):
    x, elem, out = ctx.operand("input"), ctx.elem(op.input), ctx.result_elem()
    if elem == out:
        return [ctx.node("Identity", [x])]
    if elem not in INTS and elem != "i1" and out in INTS:
        return [_float_to_int(ctx, x, elem, out)]
    return [ctx.cast(x, out)]


def _float_to_int(ctx, x: str, elem: str, out: str) -> str:
    """docs/SEMANTICS.md (``semantics.float_to_int``): truncate toward zero, saturate at the target's min / max
    (+-inf too), nan -> 0. ONNX Cast leaves nan and out-of-range values undefined, so only in-range values
    reach it. Compares run in f64 for f64 input, else in f32 (exact for every narrower float); the target's
    min and max + 1 are powers of two, so both bounds are exact there."""
    from tripy_lab.mlir.attrs import NUMPY_DTYPES

    wide = "f64" if elem == "f64" else "f32"
    x = x if elem == wide else ctx.cast(x, wide)
    info = ml_dtypes.iinfo(NUMPY_DTYPES[out])
    hi = ctx.node("GreaterOrEqual", [x, _scalar(ctx, float(info.max) + 1, wide)])
    lo = ctx.node("Less", [x, _scalar(ctx, float(info.min), wide)])
    bad = ctx.node("Or", [ctx.node("Or", [hi, lo]), ctx.node("IsNaN", [x])])
    mid = ctx.cast(ctx.node("Where", [bad, _scalar(ctx, 0.0, wide), x]), out)
    low = _where(ctx, lo, _scalar(ctx, info.min, out), mid, out)
    return _where(ctx, hi, _scalar(ctx, info.max, out), low, out)


TABLE["tensorrt.cast"] = _convert
TABLE["tensorrt.identity"] = _convert


@register("collapse_rank")
def _collapse_rank(op, ctx):
    t_in, t_out = ctx.shape(op.input), ctx.result_shape()
    k = len(t_in) - len(t_out)
    cands = sorted(range(len(t_in)), key=lambda i: t_in[i] != 1)
    cands = [i for i in cands if t_in[i] in (1, None)]
    for combo in itertools.combinations(cands, k):
        rest = [d for i, d in enumerate(t_in) if i not in combo]
        if all(a is None or b is None or a == b for a, b in zip(rest, t_out)):
            return [ctx.node("Squeeze", [ctx.operand("input"), ctx.ints(sorted(combo))]) if combo
                    else ctx.node("Identity", [ctx.operand("input")])]
    raise ctx.error(f"collapse_rank can only drop unit dims: {t_in} -> {t_out}.")


@register("expand_rank")
def _expand_rank(op, ctx):
    t_in, t_out = ctx.shape(op.input), ctx.result_shape()
    k = len(t_out) - len(t_in)
    for combo in itertools.combinations([i for i, d in enumerate(t_out) if d in (1, None)], k):
        rest = [d for i, d in enumerate(t_out) if i not in combo]
        if all(a is None or b is None or a == b for a, b in zip(rest, t_in)):
            return [ctx.node("Unsqueeze", [ctx.operand("input"), ctx.ints(combo)]) if combo
                    else ctx.node("Identity", [ctx.operand("input")])]
    raise ctx.error(f"expand_rank can only insert unit dims: {t_in} -> {t_out}.")


@register("shuffle")
def _shuffle(op, ctx):
    x = ctx.operand("input")
    rank = len(ctx.shape(op.input))
    first = list(ctx.attr("first_transpose", ()) or range(rank))
    if first != list(range(rank)):
        x = ctx.node("Transpose", [x], perm=first)
    dyn = ctx.operand("dynamic_reshape")
    target = ctx.attr("reshape", None)
    if dyn is not None or target is not None:
        shape = _i64(ctx, dyn, ctx.elem(op.dynamic_reshape)) if dyn is not None else ctx.ints(target)
        x = ctx.node("Reshape", [x, shape], allowzero=0 if ctx.attr("zero_is_placeholder", True) else 1)
    second = list(ctx.attr("second_transpose", ()) or ())
    if second and second != list(range(len(second))):
        x = ctx.node("Transpose", [x], perm=second)
    return [x if x != ctx.operand("input") else ctx.node("Identity", [x])]


@register("linspace")
def _linspace(op, ctx):
    """start + sum_d iota_d * step[d], computed in f64 (ints in i64) like the reference, cast once."""
    out_elem, out_shape = ctx.result_elem(), ctx.result_shape()
    rank = len(out_shape)
    comp = "i64" if out_elem in INTS else "f64"
    shape = ctx.operand("shape")
    shape = _i64(ctx, shape, ctx.elem(op.shape)) if shape is not None else ctx.ints(out_shape)
    start = ctx.operand("start")
    start = (ctx.cast(ctx.node("Reshape", [start, ctx.ints([])]), comp) if start is not None
             else _scalar(ctx, ctx.attr("static_start", 0.0), comp))
    step = ctx.operand("step")
    step = ctx.cast(ctx.node("Reshape", [step, ctx.ints([-1])]), comp) if step is not None else None
    acc = ctx.node("Expand", [start, shape])
    for d in range(rank):
        n = ctx.node("Gather", [shape, ctx.const(np.asarray(d, np.int64))], axis=0)
        iota = ctx.node("Range", [_scalar(ctx, 0, comp), ctx.cast(n, comp), _scalar(ctx, 1, comp)])
        axes = [k for k in range(rank) if k != d]
        iota = ctx.node("Unsqueeze", [iota, ctx.ints(axes)]) if axes else iota
        s = (ctx.node("Gather", [step, ctx.const(np.asarray(d, np.int64))], axis=0) if step is not None
             else _scalar(ctx, ctx.attr("static_step", 1.0), comp))
        acc = ctx.node("Add", [acc, ctx.node("Mul", [iota, s])])
    return [ctx.cast(acc, out_elem)]


# ---------------------------------------------------------------------------------------------- NN layers
@register("normalization")
def _normalization(op, ctx):
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    scale, bias = ctx.operand("scale"), ctx.operand("bias")
    shape_in = ctx.shape(op.input)
    axes = [int(a) for a in ctx.attr("axis", ())]
    eps = float(ctx.attr("eps", 1e-5))
    groups = int(ctx.attr("num_groups", 1) or 1)
    x = ctx.cast(x, "f32") if elem != "f32" else x
    scale = ctx.cast(scale, "f32") if ctx.elem(op.scale) != "f32" else scale
    bias = ctx.cast(bias, "f32") if ctx.elem(op.bias) != "f32" else bias
    s_shape, b_shape = ctx.shape(op.scale), ctx.shape(op.bias)
    last = shape_in[-1] if shape_in else None
    if (groups == 1 and axes in ([len(shape_in) - 1], [-1]) and last is not None
            and all(tuple(t) == (1,) * (len(t) - 1) + (last,) for t in (s_shape, b_shape))):
        # a layer norm over the last dim: ONNX LayerNormalization (onnxruntime's fused kernel)
        flat = ctx.ints([-1])
        y = ctx.node("LayerNormalization", [x, ctx.node("Reshape", [scale, flat]), ctx.node("Reshape", [bias, flat])],
                     axis=-1, epsilon=eps)
        return [_back(ctx, y, "f32", elem)]
    orig = x
    if groups > 1:  # statistics per (sample, group): [N, G, C/G * rest]
        x = ctx.node("Reshape", [x, ctx.ints([0, groups, -1])])
        axes = [2]
    mean = ctx.node("ReduceMean", [x, ctx.ints(axes)], keepdims=1)
    diff = ctx.node("Sub", [x, mean])
    var = ctx.node("ReduceMean", [ctx.node("Mul", [diff, diff]), ctx.ints(axes)], keepdims=1)
    y = ctx.node("Div", [diff, ctx.node("Sqrt", [ctx.node("Add", [var, _scalar(ctx, eps, "f32")])])])
    if groups > 1:
        y = ctx.node("Reshape", [y, ctx.node("Shape", [orig])])
        s_shape, c = ctx.shape(op.scale), shape_in[1]
        if len(s_shape) > 1 and s_shape[1] == groups and c is not None and c != groups:
            rep = c // groups  # one scale/bias per group: repeat it for the group's channels
            reps = ctx.ints([1, 1, rep] + [1] * (len(s_shape) - 2))
            unsq = ctx.ints([2])
            flat = ctx.ints([s_shape[0] or 1, c] + [1] * (len(s_shape) - 2))
            scale = ctx.node("Reshape", [ctx.node("Tile", [ctx.node("Unsqueeze", [scale, unsq]), reps]), flat])
            bias = ctx.node("Reshape", [ctx.node("Tile", [ctx.node("Unsqueeze", [bias, unsq]), reps]), flat])
    y = ctx.node("Add", [ctx.node("Mul", [y, scale]), bias])
    return [_back(ctx, y, "f32", elem)]


def _weights(ctx, operand: str, static: str):
    name = ctx.operand(operand)
    if name is not None:
        return name, ctx.elem(ctx.operand_value(operand))
    value = ctx.attr(static, None)
    if value is None:
        return None, None
    return ctx.const(np.asarray(value, dtype=np.float32)), "f32"


def _window(ctx, nsp: int):
    stride = [int(s) for s in ctx.attr("stride", (1,) * nsp)]
    pre = [int(p) for p in ctx.attr("pre_padding", (0,) * nsp)]
    post = [int(p) for p in ctx.attr("post_padding", (0,) * nsp)]
    dil = [int(d) for d in (ctx.attr("dilation", None) or (1,) * nsp)]
    if any(p < 0 for p in pre + post):
        raise ctx.error(f"negative padding {pre}/{post} has no ONNX Conv equivalent.")
    return stride, pre, post, dil


def _conv_like(op, ctx, onnx_op: str, kernel: tuple[str, str], bias: tuple[str, str]):
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    nsp = len(ctx.shape(op.input)) - 2
    stride, pre, post, dil = _window(ctx, nsp)
    x, cur = (ctx.cast(x, "f32"), "f32") if elem != "f32" else (x, elem)
    w, w_elem = _weights(ctx, *kernel)
    if w is None:
        raise ctx.error("the op has no kernel weights.")
    w = ctx.cast(w, "f32") if w_elem != "f32" else w
    b, b_elem = _weights(ctx, *bias)
    inputs = [x, w] + ([ctx.cast(b, "f32") if b_elem != "f32" else b] if b is not None else [])
    y = ctx.node(onnx_op, inputs, strides=stride, pads=pre + post, dilations=dil,
                 group=int(ctx.attr("num_groups", 1) or 1))
    return [_back(ctx, y, cur, ctx.result_elem())]


@register("convolution")
def _convolution(op, ctx):
    return _conv_like(op, ctx, "Conv", ("kernel", "kernelStatic"), ("bias", "biasStatic"))


@register("deconvolution")
def _deconvolution(op, ctx):
    return _conv_like(op, ctx, "ConvTranspose", ("kernelWeights", "kernelWeightsStatic"),
                      ("biasWeights", "biasWeightsStatic"))


@register("pooling")
def _pooling(op, ctx):
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    win = [int(w) for w in ctx.attr("windowSize")]
    nsp, rank = len(win), len(ctx.shape(op.input))
    if rank - nsp != 2:
        raise ctx.error(f"ONNX pooling needs [N, C, spatial...] inputs; got rank {rank} with {nsp} window dims.")
    stride = [int(s) for s in ctx.attr("stride", (1,) * nsp)]
    pads = [int(p) for p in ctx.attr("prePadding", (0,) * nsp)] + [int(p) for p in
                                                                    ctx.attr("postPadding", (0,) * nsp)]
    x, cur = (ctx.cast(x, "f32"), "f32") if elem != "f32" else (x, elem)
    kind = ctx.attr("poolingType")
    exclude = ctx.attr("averageCountExcludesPadding", True)
    exclude = True if exclude is None else bool(exclude)

    def pmax():
        return ctx.node("MaxPool", [x], kernel_shape=win, strides=stride, pads=pads)

    def pavg():
        return ctx.node("AveragePool", [x], kernel_shape=win, strides=stride, pads=pads,
                        count_include_pad=0 if exclude else 1)

    if kind == "kMAX":
        y = pmax()
    elif kind == "kAVERAGE":
        y = pavg()
    elif kind == "kMAX_AVERAGE_BLEND":
        blend = float(ctx.attr("blendFactor", 0.5))
        y = ctx.node("Add", [ctx.node("Mul", [pmax(), _scalar(ctx, blend, "f32")]),
                             ctx.node("Mul", [pavg(), _scalar(ctx, 1 - blend, "f32")])])
    else:
        raise ctx.error(f"unknown pooling type {kind!r}")
    if elem in INTS:
        y = ctx.node("Round", [y])
    return [_back(ctx, y, cur, elem)]


_ROUNDING = {"kFLOOR": "floor", "kCEIL": "ceil", "kHALF_UP": "half_up", "kHALF_DOWN": "half_down"}


def _resize(op, ctx, method: str):
    """Separable resize, one dim at a time, as Gathers with in-graph coordinates (like the reference): ONNX
    Resize in onnxruntime interpolates only the innermost 2 (or 3) dims, TensorRT's resize every dim."""
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    rank = len(ctx.shape(op.input))
    shape_v, scales = ctx.operand("output_shape"), ctx.attr("scales", None)
    if shape_v is not None:
        shape_v, scales = _i64(ctx, shape_v, ctx.elem(op.output_shape)), None
    elif not scales and any(d is None for d in ctx.result_shape()):
        raise ctx.error("the result type has unknown dims and there is neither 'output_shape' nor 'scales'.")
    mode = ctx.attr("coordinateTransformation", "kHALF_PIXEL")
    upper = ctx.attr("selectorForSinglePixel", "kFORMULA") == "kUPPER"
    coeff = float(ctx.attr("cubicCoeff", -0.75))
    f64 = lambda v: _scalar(ctx, v, "f64")  # noqa: E731
    i64 = lambda v: ctx.const(np.asarray(v, np.int64))  # noqa: E731
    y = x if method == "nearest" else ctx.cast(x, "f64")
    for d in range(rank):
        scale = float(scales[d]) if scales else None
        if scale == 1.0:
            continue
        n_in = _dim(ctx, x, d)
        if shape_v is not None:
            n_out = ctx.node("Gather", [shape_v, i64(d)], axis=0)
        elif scale is not None:
            n_out = ctx.cast(ctx.node("Floor", [ctx.node("Mul", [ctx.cast(n_in, "f64"), f64(scale)])]), "i64")
        else:
            n_out = i64(ctx.result_shape()[d])
        n_in_f, n_out_f = ctx.cast(n_in, "f64"), ctx.cast(n_out, "f64")
        pos = ctx.node("Range", [f64(0.0), n_out_f, f64(1.0)])
        ratio = f64(1.0 / scale) if scale else ctx.node("Div", [n_in_f, n_out_f])
        if mode == "kALIGN_CORNERS":
            span = ctx.node("Div", [ctx.node("Sub", [n_in_f, f64(1.0)]),
                                    ctx.node("Max", [ctx.node("Sub", [n_out_f, f64(1.0)]), f64(1.0)])])
            c = ctx.node("Where", [ctx.node("Greater", [n_out, i64(1)]), ctx.node("Mul", [pos, span]), f64(0.0)])
        elif mode == "kASYMMETRIC":
            c = ctx.node("Mul", [pos, ratio])
        else:
            c = ctx.node("Sub", [ctx.node("Mul", [ctx.node("Add", [pos, f64(0.5)]), ratio]), f64(0.5)])
        if upper:
            c = ctx.node("Where", [ctx.node("Equal", [n_out, i64(1)]), f64(0.0), c])
        last = ctx.node("Sub", [n_in, i64(1)])
        axes = [k for k in range(rank) if k != d]

        def along(v, axes=axes):  # a [n_out] vector broadcast along dim d
            return ctx.node("Unsqueeze", [v, ctx.ints(axes)]) if axes else v

        def take(idx, y=y, last=last, d=d):  # the input along d at clamped indices
            return ctx.node("Gather", [y, ctx.node("Max", [ctx.node("Min", [idx, last]), i64(0)])], axis=d)

        if method == "nearest":
            rnd = _ROUNDING[ctx.attr("nearestRounding", "kFLOOR")]
            i = (ctx.node("Floor", [c]) if rnd == "floor" else ctx.node("Ceil", [c]) if rnd == "ceil"
                 else ctx.node("Floor", [ctx.node("Add", [c, f64(0.5)])]) if rnd == "half_up"
                 else ctx.node("Ceil", [ctx.node("Sub", [c, f64(0.5)])]))
            y = take(ctx.cast(i, "i64"))
        elif method == "linear":
            c = ctx.node("Max", [ctx.node("Min", [c, ctx.cast(last, "f64")]), f64(0.0)])
            lo = ctx.node("Floor", [c])
            frac = along(ctx.node("Sub", [c, lo]))
            i0 = ctx.cast(lo, "i64")
            a, b = take(i0), take(ctx.node("Add", [i0, i64(1)]))
            y = ctx.node("Add", [ctx.node("Mul", [a, ctx.node("Sub", [f64(1.0), frac])]), ctx.node("Mul", [b, frac])])
        else:  # Keys' cubic convolution over the 4 neighbours, edge indices clamped
            lo = ctx.node("Floor", [c])
            t = ctx.node("Sub", [c, lo])
            i0 = ctx.cast(lo, "i64")
            acc = None
            for k, dist in zip(range(-1, 3), (ctx.node("Add", [t, f64(1.0)]), t, ctx.node("Sub", [f64(1.0), t]),
                                              ctx.node("Sub", [f64(2.0), t]))):
                w = along(_cubic_weight(ctx, dist, coeff, near=k in (0, 1)))
                term = ctx.node("Mul", [take(ctx.node("Add", [i0, i64(k)])), w])
                acc = term if acc is None else ctx.node("Add", [acc, term])
            y = acc
    if method == "nearest":
        return [y if y != x else ctx.node("Identity", [x])]
    if elem in INTS:
        y = ctx.node("Round", [y])
    return [ctx.cast(y, elem)]


def _cubic_weight(ctx, s: str, a: float, near: bool) -> str:
    """((a+2)s - (a+3))s^2 + 1 for |s| <= 1, ((as - 5a)s + 8a)s - 4a for 1 < |s| < 2."""
    def k(v):
        return _scalar(ctx, v, "f64")

    if near:
        inner = ctx.node("Sub", [ctx.node("Mul", [k(a + 2), s]), k(a + 3)])
        return ctx.node("Add", [ctx.node("Mul", [ctx.node("Mul", [inner, s]), s]), k(1.0)])
    inner = ctx.node("Add", [ctx.node("Mul", [ctx.node("Sub", [ctx.node("Mul", [k(a), s]), k(5 * a)]), s]), k(8 * a)])
    return ctx.node("Sub", [ctx.node("Mul", [inner, s]), k(4 * a)])


TABLE["tensorrt.resize_nearest"] = lambda op, ctx: _resize(op, ctx, "nearest")
TABLE["tensorrt.resize_linear"] = lambda op, ctx: _resize(op, ctx, "linear")
TABLE["tensorrt.resize_cubic"] = lambda op, ctx: _resize(op, ctx, "cubic")


# ---------------------------------------------------------------------------------------------- top-k, quantization
@register("top_k")
def _top_k(op, ctx):
    x, elem = ctx.operand("input"), ctx.elem(op.input)
    x, cur = _up(ctx, x, elem)
    largest = 1 if ctx.attr("topkOperation", "kMAX") == "kMAX" else 0
    values, idx = ctx.node("TopK", [x, ctx.ints([int(ctx.attr("k"))])], outputs=2, axis=int(ctx.attr("axis")),
                           largest=largest, sorted=1)
    return [_back(ctx, values, cur, elem), ctx.cast(idx, ctx.result_elem(1))]


def _q_attrs(ctx, x_shape, s_shape) -> dict:
    """Per-tensor (0-d scale), per-channel (``axis``) or block-wise (scale of the input's rank) attributes."""
    axis = ctx.attr("axis", None)
    if len(s_shape) == 0:
        return {}
    if axis is not None:
        return {"axis": int(axis)}
    if len(s_shape) == 1 and len(x_shape) != 1:
        return {"axis": 0}
    blocked = [d for d, (a, b) in enumerate(zip(x_shape, s_shape)) if a != b]
    if not blocked and x_shape and x_shape[-1] is not None:  # scale of the input's shape: blocks of 1, any axis
        return {"axis": len(x_shape) - 1, "block_size": 1}
    if len(blocked) != 1 or x_shape[blocked[0]] is None or s_shape[blocked[0]] is None:
        raise ctx.error(f"block quantization needs exactly one blocked static dim: input {x_shape}, scale {s_shape}.")
    d = blocked[0]
    return {"axis": d, "block_size": x_shape[d] // s_shape[d]}


@register("quantize")
def _quantize(op, ctx):
    x, scale = ctx.operand("input"), ctx.operand("scale")
    out = ctx.result_elem()
    x = ctx.cast(x, "f32") if ctx.elem(op.input) != "f32" else x
    if out in INTS:  # nan -> 0 (docs/SEMANTICS.md); QuantizeLinear would give the type's min
        x = ctx.node("Where", [ctx.node("IsNaN", [x]), _scalar(ctx, 0.0, "f32"), x])
    scale = ctx.cast(scale, "f32") if ctx.elem(op.scale) != "f32" else scale
    from tripy_lab.mlir.attrs import NUMPY_DTYPES

    attrs = _q_attrs(ctx, ctx.shape(op.input), ctx.shape(op.scale))
    if attrs.get("block_size") is None and attrs and len(ctx.shape(op.scale)) > 1:
        raise ctx.error("per-channel scales must be 1-D.")
    zp_shape = ctx.shape(op.scale)  # the zero point has the scale's shape (and carries the output type)
    if any(d is None for d in zp_shape):
        raise ctx.error(f"the scale needs a static shape for the ONNX zero point, got {zp_shape}.")
    zero = ctx.const(np.zeros(zp_shape, NUMPY_DTYPES[out]))
    if out in INTS and not attrs:  # per-tensor: saturate before QuantizeLinear (onnxruntime 1.30 wraps int4)
        info = ml_dtypes.iinfo(NUMPY_DTYPES[out])
        low = ctx.node("Mul", [scale, _scalar(ctx, float(info.min), "f32")])
        high = ctx.node("Mul", [scale, _scalar(ctx, float(info.max), "f32")])
        x = ctx.node("Min", [ctx.node("Max", [x, ctx.node("Min", [low, high])]), ctx.node("Max", [low, high])])
    return [ctx.node("QuantizeLinear", [x, scale, zero], **attrs)]


@register("dequantize")
def _dequantize(op, ctx):
    x, scale = ctx.operand("input"), ctx.operand("scale")
    scale = ctx.cast(scale, "f32") if ctx.elem(op.scale) != "f32" else scale
    attrs = _q_attrs(ctx, ctx.shape(op.input), ctx.shape(op.scale))
    return [_back(ctx, ctx.node("DequantizeLinear", [x, scale], **attrs), "f32", ctx.result_elem())]


@register("opaque_plugin")
def _opaque_plugin(op, ctx):
    name = ctx.attr("plugin_name", "?")
    raise ctx.error(f"plugins need TensorRT: the onnxruntime engine cannot run TensorRT plugin '{name}'.",
                    ["Build this program with engine='tensorrt' on a machine with TensorRT and a CUDA GPU."])

