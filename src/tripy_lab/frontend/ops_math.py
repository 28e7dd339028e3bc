"""Element-wise math, activations, matmul, reductions, softmax, cast, where."""

from __future__ import annotations

import builtins

import numpy as np

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_shape
from tripy_lab.frontend.build import make1, make_plain
from tripy_lab.frontend.checks import (
    FLOAT,
    NUMERIC,
    NUMERIC_B,
    check_dtype,
    check_float,
    check_same_dtype,
    check_tensor,
    norm_dim,
    norm_dims,
    operand,
)
from tripy_lab.frontend.scopes import op_location
from tripy_lab.frontend.tensor import DimensionSize, Tensor, wrap


def match_ranks(*tensors: Tensor) -> list[Tensor]:
    """Prepend size-1 dims so every tensor has the largest rank (numpy's right alignment)."""
    ranks = [t.rank for t in tensors]
    rank = builtins.max(ranks)
    return [t if r == rank else ops_shape.prepend_ones(t, rank - r) for t, r in zip(tensors, ranks)]


def _as_dim(value, other):
    """Python ints next to a DimensionSize are DimensionSizes too, so shape arithmetic stays foldable."""
    if isinstance(other, DimensionSize) and isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return DimensionSize(int(value))
    return value


_PY_NUMBERS = (int, float)


def _binary(fn: str, kind: str, lhs, rhs, allowed=NUMERIC_B, reflected: bool = False) -> Tensor:
    if not reflected and type(lhs) is Tensor and type(rhs) in _PY_NUMBERS:  # x * 2.0: the most common call
        loc = op_location()
        return _with_scalar(fn, kind, lhs, operand(fn, "other", rhs, lhs.dtype, lhs.rank, loc), allowed, loc)
    if not reflected and type(rhs) is Tensor and type(lhs) in _PY_NUMBERS:  # 2.0 * x
        loc = op_location()
        return _with_scalar(fn, kind, operand(fn, "self", lhs, rhs.dtype, rhs.rank, loc), rhs, allowed, loc)
    if type(lhs) is Tensor and type(rhs) is Tensor:  # x + y: nothing for _as_dim or operand to convert
        a, b = lhs, rhs
    else:
        lhs, rhs = _as_dim(lhs, rhs), _as_dim(rhs, lhs)
        if isinstance(lhs, Tensor):
            a = lhs
            b = operand(fn, "other", rhs, a.dtype)
        else:
            b = check_tensor(fn, "other", rhs)
            a = operand(fn, "self", lhs, b.dtype)
    if reflected:
        a, b = b, a
    check_dtype(fn, "self", a, allowed)
    check_same_dtype(fn, ("self", "other"), (a, b))
    if a.rank != b.rank:
        a, b = match_ranks(a, b)
    if a.dtype is D.bool and kind not in ("logical_or",):
        # TensorRT's element-wise layer rejects i1 here: compute in int8.
        out = make1(kind, [cast(a, D.int8), cast(b, D.int8)])
        return out if out.dtype is D.bool else cast(out, D.bool)
    ta, tb = a.trace_tensor, b.trace_tensor
    if not (ta.is_shape and tb.is_shape):  # shape arithmetic (both shape values) folds in make
        return make_plain(kind, [ta, tb])
    return make1(kind, [a, b])


def _with_scalar(fn: str, kind: str, a: Tensor, b: Tensor, allowed, loc) -> Tensor:
    """The rest of ``_binary`` for a Tensor and a Python int or float, which ``operand`` made with the Tensor's
    dtype (never bool: it refuses ints and floats for bool tensors) and rank: the same checks and the same op as
    the general path, with one location look-up. ``b`` has ``a``'s dtype by construction (check_same_dtype
    passes) and is not a shape value: ``make_plain`` makes what ``make`` would."""
    check_dtype(fn, "self", a, allowed)
    return make_plain(kind, [a.trace_tensor, b.trace_tensor], loc)


def add(a, b):
    return _binary("__add__", "add", a, b)


def sub(a, b):
    return _binary("__sub__", "sub", a, b)


def mul(a, b):
    return _binary("__mul__", "mul", a, b)


def div(a, b):
    return _binary("__truediv__", "div", a, b)


def floor_div(a, b):
    return _binary("__floordiv__", "floor_div", a, b)


def mod(a, b):
    return sub(a, mul(floor_div(a, b), b)) if isinstance(a, Tensor) else sub(
        operand("__rmod__", "self", a, b.dtype), mul(floor_div(a, b), b))


def pow(a, b):  # noqa: A001 - operator name
    return _binary("__pow__", "pow", a, b, allowed=(D.float32, D.float16, D.bfloat16, D.int8, D.int64))


def maximum(lhs, rhs):
    """Element-wise maximum with broadcasting."""
    return _binary("maximum", "maximum", lhs, rhs)


def minimum(lhs, rhs):
    """Element-wise minimum with broadcasting."""
    return _binary("minimum", "minimum", lhs, rhs)


def less(a, b):
    return _binary("__lt__", "less", a, b)


def greater(a, b):
    return _binary("__gt__", "greater", a, b)


def eq(a, b):
    return _binary("__eq__", "equal", a, b)


def logical_not(a: Tensor) -> Tensor:
    check_dtype("__invert__", "self", a, (D.bool,))
    return make1("not", [a])


def ne(a, b):
    return logical_not(eq(a, b))


def le(a, b):
    return logical_not(greater(a, b))


def ge(a, b):
    return logical_not(less(a, b))


def logical_or(a, b):
    check_tensor("__or__", "other", b)
    return _binary("__or__", "logical_or", a, b, allowed=(D.bool,))


def _unary(fn: str, kind: str, x, allowed=FLOAT) -> Tensor:
    check_tensor(fn, "input", x)
    check_dtype(fn, "input", x, allowed)
    tt = x.trace_tensor
    return make1(kind, [x]) if tt.is_shape else make_plain(kind, [tt])


def exp(input):  # noqa: A002 - tripy's parameter name
    """Element-wise e**x."""
    return _unary("exp", "exp", input)


def log(input):  # noqa: A002
    return _unary("log", "log", input)


def sin(input):  # noqa: A002
    return _unary("sin", "sin", input)


def cos(input):  # noqa: A002
    return _unary("cos", "cos", input)


def sqrt(input):  # noqa: A002
    return _unary("sqrt", "sqrt", input)


def rsqrt(input):  # noqa: A002
    """1 / sqrt(x): a kSQRT then a kRECIP unary."""
    return make1("recip", [sqrt(input)])


def neg(x):
    return _unary("__neg__", "neg", x, NUMERIC)


def abs(x):  # noqa: A001
    return _unary("__abs__", "abs", x, NUMERIC)


def tanh(input):  # noqa: A002
    return _unary("tanh", "tanh", input, FLOAT + (D.int8,))


def sigmoid(input):  # noqa: A002
    return _unary("sigmoid", "sigmoid", input, FLOAT + (D.int8,))


def gelu(input):  # noqa: A002
    """Exact (erf) GELU."""
    return _unary("gelu", "gelu_erf", input, FLOAT + (D.int8,))


def silu(input):  # noqa: A002
    """x * sigmoid(x)."""
    return mul(input, sigmoid(input))


def relu(input):  # noqa: A002
    """max(x, 0): an activation for floats, element-wise max for integers."""
    check_tensor("relu", "input", input)
    check_dtype("relu", "input", input, FLOAT + (D.int4, D.int8, D.int32, D.int64))
    if input.dtype in FLOAT:
        return make1("relu", [input])
    return maximum(input, 0)


def cast(input, dtype):  # noqa: A002
    """Convert to ``dtype``; returns ``input`` itself when it already has that dtype."""
    check_tensor("cast", "input", input)
    if not isinstance(dtype, D.dtype) or dtype in (D.integer, D.floating):
        raise_error("Invalid value for parameter: 'dtype' of 'cast'.", [f"Expected a tripy dtype, got: {dtype!r}."])
    if input.dtype is dtype:
        return input
    from tripy_lab.frontend import ops_quant

    if ops_quant.needs_quant_cast(input.dtype, dtype):  # int4/float8 go through (de)quantize with scale 1
        return ops_quant.cast_quantized(input, dtype)
    out = make1("cast", [input], {"dtype": dtype})
    return out


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """Matrix product with numpy's rank rules (1-D operands are vectors)."""
    check_tensor("__matmul__", "self", a)
    check_tensor("__matmul__", "other", b)
    check_dtype("__matmul__", "self", a, FLOAT)
    check_same_dtype("__matmul__", ("self", "other"), (a, b))
    if a.rank == 0 or b.rank == 0:
        raise_error("Input tensors must have at least 1 dimension.",
                    [f"Got ranks: {a.rank} and {b.rank}."])
    if a.rank >= 2 and b.rank >= 2 and a.rank != b.rank:
        a, b = match_ranks(a, b)
    ka = a.trace_tensor.shape[-1]
    kb = b.trace_tensor.shape[-2] if b.rank >= 2 else b.trace_tensor.shape[-1]
    if ka is not None and kb is not None and ka != kb:
        which = "second to last dimension" if b.rank >= 2 else "last dimension"  # nvtripy's (MLIR-TRT's) words
        raise_error("Incompatible shapes for matrix multiplication.",
                    [f"last dimension of input0 = {ka} and {which} of input1 = {kb} but must match",
                     f"Contraction dims differ: {ka} (last dim of 'self') and {kb} (of 'other')."])
    return make1("matmul", [a, b])


_REDUCE_DTYPES = (D.float32, D.float16, D.bfloat16, D.int32, D.int64)


def _reduce(fn: str, kind: str, input, dim, keepdim: bool) -> Tensor:  # noqa: A002
    check_tensor(fn, "input", input)
    check_dtype(fn, "input", input, _REDUCE_DTYPES)
    if input.rank == 0:
        if dim is not None:
            raise_error("Dimension argument must be `None` for scalars.", [f"Got dim: {dim!r}."])
        return input
    dims = sorted(norm_dims(fn, dim, input.rank))
    return make1(kind, [input], {"dims": tuple(dims), "keepdim": bool(keepdim)})


def sum(input, dim=None, keepdim: bool = False):  # noqa: A001,A002
    """Sum over ``dim`` (all dims when None)."""
    return _reduce("sum", "reduce_sum", input, dim, keepdim)


def prod(input, dim=None, keepdim: bool = False):  # noqa: A002
    return _reduce("prod", "reduce_prod", input, dim, keepdim)


def max(input, dim=None, keepdim: bool = False):  # noqa: A001,A002
    return _reduce("max", "reduce_max", input, dim, keepdim)


def min(input, dim=None, keepdim: bool = False):  # noqa: A001,A002
    return _reduce("min", "reduce_min", input, dim, keepdim)


def mean(input, dim=None, keepdim: bool = False):  # noqa: A002
    return _reduce("mean", "reduce_avg", input, dim, keepdim)


def softmax(input, dim: int | None = None):  # noqa: A002
    """exp(x) / sum(exp(x)) along ``dim`` (None: over the flattened tensor)."""
    check_tensor("softmax", "input", input)
    check_dtype("softmax", "input", input, FLOAT)
    if dim is None:
        flat = ops_shape.reshape(input, (1, -1))
        return ops_shape.reshape(make1("softmax", [flat], {"dim": 1}), ops_shape.dims_of(input))
    d = norm_dim("softmax", dim, builtins.max(input.rank, 1))
    if input.rank < 2:
        x = ops_shape.unsqueeze(input, -1) if input.rank == 1 else ops_shape.reshape(input, (1, 1))
        out = make1("softmax", [x], {"dim": d if input.rank == 1 else 0})
        return ops_shape.reshape(out, ops_shape.dims_of(input))
    return make1("softmax", [input], {"dim": d})


def where(condition, input, other):  # noqa: A002
    """Pick ``input`` where ``condition`` is true, else ``other`` (all three broadcast)."""
    check_tensor("where", "condition", condition)
    check_dtype("where", "condition", condition, (D.bool,))
    if isinstance(input, Tensor):
        a = input
        b = operand("where", "other", other, a.dtype)
    else:
        b = check_tensor("where", "other", other)
        a = operand("where", "input", input, b.dtype)
    check_dtype("where", "input", a, NUMERIC)
    check_same_dtype("where", ("input", "other"), (a, b))
    c, a, b = match_ranks(condition, a, b)
    out = make1("where", [c, a, b])
    if isinstance(input, DimensionSize) or isinstance(other, DimensionSize):
        if out.rank == 0 and out.dtype is D.int32:  # a choice between shape values is one (nvtripy)
            out.trace_tensor.is_shape = True
            return wrap(out.trace_tensor)
    return out


def masked_fill(input, mask, value):  # noqa: A002
    """``value`` where ``mask`` is true, else ``input``."""
    check_tensor("masked_fill", "input", input)
    check_tensor("masked_fill", "mask", mask)  # its own name in errors, not the `where` it is made of
    check_dtype("masked_fill", "mask", mask, (D.bool,))
    from tripy_lab.frontend import ops_init

    return where(mask, ops_init.full_like(input, value), input)


def _host_pair(fn: str, a, b, allowed):
    check_tensor(fn, "input", a)
    check_tensor(fn, "other", b)
    check_dtype(fn, "input", a, allowed)
    check_same_dtype(fn, ("input", "other"), (a, b))
    return np.asarray(a.numpy()), np.asarray(b.numpy())


def allclose(input, other, rtol: float = 1e-05, atol: float = 1e-08) -> bool:  # noqa: A002
    """True iff |a - b| <= atol + rtol * |b| everywhere (evaluates both)."""
    rtol, atol = check_float("allclose", "rtol", rtol), check_float("allclose", "atol", atol)
    a, b = _host_pair("allclose", input, other, FLOAT)
    return bool(np.all(np.abs(a.astype(np.float64) - b.astype(np.float64))
                       <= atol + rtol * np.abs(b.astype(np.float64))))


def equal(input, other) -> bool:  # noqa: A002
    """True iff same shape and all elements equal (evaluates both)."""
    a, b = _host_pair("equal", input, other, FLOAT + (D.int8, D.int32, D.int64, D.bool))
    return a.shape == b.shape and bool(np.all(a == b))

