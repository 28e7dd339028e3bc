"""The op table: one row per trace op: its name, the tensorrt op (and enum) it becomes, its shape rule.

Later stages own their own tables keyed by these names (mlir lowering) or by tensorrt op name (engines);
tests check that every row has an entry in each.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tripy_lab.core import dtypes
from tripy_lab.core.errors import raise_error
from tripy_lab.trace import rules_nn as nn
from tripy_lab.trace.ir import TraceOp, TraceTensor
from tripy_lab.trace.scopes import current_call
from tripy_lab.trace.scopes import peek as _peek_scopes

Shape = tuple[int | None, ...]
Rule = Callable[[list[TraceTensor], dict], list[tuple[Shape, dtypes.dtype]]]


@dataclass(frozen=True)
class OpDef:
    name: str
    tensorrt_op: str  # e.g. "element_wise"
    enum: str | None  # e.g. "kSUM"
    rule: Rule


def broadcast_shapes(*shapes: Shape) -> Shape:
    """Same-rank broadcasting: each dim pair equal or one of them 1 (None = not known until run time)."""
    first = shapes[0]
    if len(shapes) == 2 and shapes[1] == first and type(first) is tuple:  # x + y of one shape: that shape
        return first
    if len(shapes) == 2 and len(shapes[1]) == len(first):  # binary ops: pairwise, errors from the loop below
        out = []
        for a, b in zip(first, shapes[1]):
            if a == b or b == 1 or (b is None and a != 1):
                out.append(a)
            elif a == 1 or a is None:
                out.append(b)
            else:
                break
        else:
            return tuple(out)
    rank = len(first)
    out = []
    for i in range(rank):
        dims = [s[i] for s in shapes]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise_error("Shapes are not broadcastable.",
                        [f"Dimension {i} has sizes {dims}; each pair must be equal or one of them 1.",
                         "Shapes: " + ", ".join(str(tuple(s)) for s in shapes)])
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _same(ins, p):
    return [(ins[0].shape, ins[0].dtype)]


def _binary(ins, p):
    return [(broadcast_shapes(ins[0].shape, ins[1].shape), ins[0].dtype)]


def _compare(ins, p):
    return [(broadcast_shapes(ins[0].shape, ins[1].shape), dtypes.bool)]


def _select(ins, p):
    return [(broadcast_shapes(*(t.shape for t in ins)), ins[1].dtype)]


def _matmul(ins, p):
    a, b = ins[0].shape, ins[1].shape
    if len(a) == 1 and len(b) == 1:
        return [((), ins[0].dtype)]
    if len(b) == 1:
        return [(a[:-1], ins[0].dtype)]
    if len(a) == 1:
        return [(b[:-2] + b[-1:], ins[0].dtype)]
    batch = broadcast_shapes(a[:-2], b[:-2])
    return [(batch + (a[-2], b[-1]), ins[0].dtype)]


def _reduce(ins, p):
    dims, keep = p["dims"], p["keepdim"]
    shape = ins[0].shape
    out = tuple(1 if i in dims else d for i, d in enumerate(shape)) if keep else tuple(
        d for i, d in enumerate(shape) if i not in dims)
    return [(out, ins[0].dtype)]


def _shape_from_value(t: TraceTensor) -> Shape:
    if t.value is not None:
        return tuple(map(int, t.value.reshape(-1).tolist()))  # tolist: no numpy scalar per element
    if t.known is not None:
        return tuple(t.known)
    return (None,) * t.shape[0]


def _reshape(ins, p):
    return [(_shape_from_value(ins[1]), ins[0].dtype)]


def _permute(ins, p):
    return [(tuple(ins[0].shape[i] for i in p["perm"]), ins[0].dtype)]


def _broadcast_to(ins, p):
    return [(_shape_from_value(ins[1]), ins[0].dtype)]


def _concat(ins, p):
    axis = p["dim"]
    sizes = [t.shape[axis] for t in ins]
    total = None if any(s is None for s in sizes) else sum(sizes)
    others = broadcast_shapes(*(t.shape[:axis] + t.shape[axis + 1:] for t in ins))
    return [(others[:axis] + (total,) + others[axis:], ins[0].dtype)]


def _gather(ins, p):
    axis = p["dim"]
    data = ins[0].shape
    return [(data[:axis] + ins[1].shape + data[axis + 1:], ins[0].dtype)]


def _cast(ins, p):
    return [(ins[0].shape, p["dtype"])]


def _constant(ins, p):
    return [(tuple(p["value"].shape), p["dtype"])]


def _shape(ins, p):
    return [((ins[0].rank,), dtypes.int32)]


def _get_dim(ins, p):
    # keepdim: the size as a 1-D shape tensor of one entry, ready to concatenate into a shape
    return [((1,) if p.get("keepdim") else (), dtypes.int32)]


def _slice(ins, p):
    return [(_shape_from_value(ins[2]), ins[0].dtype)]


def _iota(ins, p):
    return [(_shape_from_value(ins[0]), p["dtype"])]


def _arange(ins, p):
    return [(_shape_from_value(ins[2]), p["dtype"])]


def _softmax(ins, p):
    return [(ins[0].shape, ins[0].dtype)]


ROWS: list[OpDef] = [
    OpDef("constant", "constant", None, _constant),
    OpDef("add", "element_wise", "kSUM", _binary),
    OpDef("sub", "element_wise", "kSUB", _binary),
    OpDef("mul", "element_wise", "kPROD", _binary),
    OpDef("div", "element_wise", "kDIV", _binary),
    OpDef("floor_div", "element_wise", "kFLOOR_DIV", _binary),
    OpDef("pow", "element_wise", "kPOW", _binary),
    OpDef("maximum", "element_wise", "kMAX", _binary),
    OpDef("minimum", "element_wise", "kMIN", _binary),
    OpDef("less", "element_wise", "kLESS", _compare),
    OpDef("greater", "element_wise", "kGREATER", _compare),
    OpDef("equal", "element_wise", "kEQUAL", _compare),
    OpDef("logical_or", "element_wise", "kOR", _compare),
    OpDef("exp", "unary", "kEXP", _same),
    OpDef("log", "unary", "kLOG", _same),
    OpDef("sin", "unary", "kSIN", _same),
    OpDef("cos", "unary", "kCOS", _same),
    OpDef("sqrt", "unary", "kSQRT", _same),
    OpDef("recip", "unary", "kRECIP", _same),
    OpDef("abs", "unary", "kABS", _same),
    OpDef("neg", "unary", "kNEG", _same),
    OpDef("not", "unary", "kNOT", _same),
    OpDef("tanh", "activation", "kTANH", _same),
    OpDef("relu", "activation", "kRELU", _same),
    OpDef("sigmoid", "activation", "kSIGMOID", _same),
    OpDef("gelu_erf", "activation", "kGELU_ERF", _same),
    OpDef("matmul", "matrix_multiply", None, _matmul),
    OpDef("reduce_sum", "reduce", "kSUM", _reduce),
    OpDef("reduce_prod", "reduce", "kPROD", _reduce),
    OpDef("reduce_max", "reduce", "kMAX", _reduce),
    OpDef("reduce_min", "reduce", "kMIN", _reduce),
    OpDef("reduce_avg", "reduce", "kAVG", _reduce),
    OpDef("softmax", "softmax", None, _softmax),
    OpDef("slice", "slice", "kDEFAULT", _slice),
    OpDef("reshape", "reshape", None, _reshape),
    OpDef("permute", "transpose", None, _permute),
    OpDef("broadcast", "broadcast", None, _broadcast_to),
    OpDef("concatenate", "concatenation", None, _concat),
    OpDef("gather", "gather", None, _gather),
    OpDef("where", "select", None, _select),
    OpDef("cast", "cast", None, _cast),
    OpDef("shape", "shape", None, _shape),
    OpDef("get_dim", "slice", "kDEFAULT", _get_dim),
    OpDef("iota", "linspace", None, _iota),
    OpDef("arange", "linspace", None, _arange),
    OpDef("layer_norm", "normalization", None, _same),
    # The full Tripy API (issue 3): shape rules in trace/rules_nn.py.
    OpDef("slice_fill", "slice", "kFILL", nn.padded_slice),
    OpDef("slice_reflect", "slice", "kREFLECT", nn.padded_slice),
    OpDef("top_k_max", "top_k", "kMAX", nn.top_k),
    OpDef("top_k_min", "top_k", "kMIN", nn.top_k),
    OpDef("instance_norm", "normalization", None, nn.same),
    OpDef("conv", "convolution", None, nn.conv),
    OpDef("deconv", "deconvolution", None, nn.deconv),
    OpDef("max_pool", "pooling", "kMAX", nn.pool),
    OpDef("avg_pool", "pooling", "kAVERAGE", nn.pool),
    OpDef("resize_nearest", "resize_nearest", None, nn.resize),
    OpDef("resize_linear", "resize_linear", None, nn.resize),
    OpDef("resize_cubic", "resize_cubic", None, nn.resize),
    OpDef("quantize", "quantize", None, nn.quant),
    OpDef("dequantize", "dequantize", None, nn.quant),
    OpDef("plugin", "opaque_plugin", None, nn.plugin),
]

OPS: dict[str, OpDef] = {row.name: row for row in ROWS}
# While pipeline.trace runs, the ops made so far: a failed trace can still show its partial graph.
recording: list[list] = []


def apply(kind: str, inputs: list[TraceTensor], params: dict | None = None, location=None) -> list[TraceTensor]:
    """Make a TraceOp of ``kind`` and return its outputs (shapes and dtypes from the table's rule)."""
    params = params or {}
    results = OPS[kind].rule(inputs, params)
    tracer = False
    for t in inputs:  # a loop, not any(...): this runs for every op
        if t.is_compile_tracer:
            tracer = True
            break
    outputs = [TraceTensor(shape=tuple(s), dtype=dt, location=location, is_compile_tracer=tracer)
               for s, dt in results]
    scopes = _peek_scopes(None)
    if scopes is None:
        module = call = None
    else:
        module, call = scopes.module, scopes.call  # current_call, inlined for the common cases (every op asks)
        if call is None and scopes.call_name is not None:
            call = current_call(scopes, location)
    op = TraceOp(kind, list(inputs), outputs, params, location, module or "", call)
    for out in outputs:
        out.producer = op
    if recording:
        recording[-1].append(op)
    return outputs


def record(kind: str, inputs: list[TraceTensor], shape: Shape, dtype: dtypes.dtype, params: dict,
           location=None) -> TraceTensor:
    """``apply`` for a one-output op whose shape and dtype the caller already knows (the rule's answer): a Python
    number's constant and rank-matching reshape, made for every ``x * 2.0``."""
    tracer = False
    for t in inputs:
        if t.is_compile_tracer:
            tracer = True
            break
    out = TraceTensor(shape=shape, dtype=dtype, location=location, is_compile_tracer=tracer)
    scopes = _peek_scopes(None)
    if scopes is None:
        module = call = None
    else:
        module, call = scopes.module, scopes.call
        if call is None and scopes.call_name is not None:
            call = current_call(scopes, location)
    out.producer = op = TraceOp(kind, inputs, [out], params, location, module or "", call)
    if recording:
        recording[-1].append(op)
    return out
