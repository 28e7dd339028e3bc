"""Trace -> MLIR (tensorrt dialect). One table entry per trace op kind (see trace/optable.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseResourceAttr,
    DictionaryAttr,
    ModuleOp,
    StringAttr,
    UnknownLoc,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Block, Region

from tripy_lab.core import config, dtypes
from tripy_lab.core.arrays import to_host
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.mlir import dialect as trt
from tripy_lab.mlir.attrs import file_loc, name_loc
from tripy_lab.mlir.lowering_nn import LOWERING_NN
from tripy_lab.mlir.op_builder import new_op
from tripy_lab.mlir.program import MlirProgram, OpOrigin
from tripy_lab.trace import OPS, Trace, TraceOp


def tensor_type(shape, dt: dtypes.dtype):
    """The shared ``tensor<...>`` of a trace tensor's shape and dtype (one look-up: every op asks)."""
    if type(shape) is tuple:
        hit = _TYPES.get((shape, dt))
        if hit is None:
            hit = trt.tensor_type(shape, dt.mlir)
            if len(_TYPES) >= 1 << 15:
                _TYPES.clear()
            _TYPES[(shape, dt)] = hit
        return hit
    return trt.tensor_type(tuple(shape), dt.mlir)


_TYPES: dict[tuple, object] = {}  # (shape, dtype) -> TensorType: immutable values, shared like attrs' own cache


_first = tuple.__getitem__  # op.results[0] without SSAValues.__getitem__ (a Python method): every op asks


class _Ctx:
    """Lowering state: SSA values of trace tensors (keyed by the tensor: they hash by identity), the block being
    filled, resource blobs."""

    def __init__(self, block: Block, location):
        self.block = block
        self.values: dict = {}
        self.location = location
        self.resources: dict[str, bytes] = {}
        self._buffers: dict[tuple, object] = {}

    def add(self, op):
        """Append ``op`` to the block under the current location. A fresh op without regions (every op the
        lowering makes) is linked in directly: ``Block.add_op``'s checks (no parent yet, the block not inside
        the op) hold by construction, and they were ~1.5 us an op (test_lowering_fast_paths checks the links)."""
        op.location = self.location
        block = self.block
        if op.parent is not None or op.regions:
            block.add_op(op)
            return op
        op.parent = block
        last = block._last_op  # noqa: SLF001 - xDSL is pinned (pyproject.toml)
        if last is None:
            block._first_op = op  # noqa: SLF001
        else:
            last._next_op = op  # noqa: SLF001
            op._prev_op = last  # noqa: SLF001
        block._last_op = op  # noqa: SLF001
        return op

    def result(self, op):
        """``add(op).results[0]``."""
        return _first(self.add(op).results, 0)

    def value(self, tt):
        """SSA value of a trace tensor; constants are emitted here, at first use as an operand (with its location)."""
        v = self.values[tt]
        if type(v) is _Deferred:
            v = self.values[tt] = v.emit()
        return v

    def i32_const(self, values):
        array = np.asarray(values, dtype=np.int32)
        return self.add(trt.ConstantOp(trt.dense_elements(array, "i32"))).results[0]

    def constant(self, array: np.ndarray, dt: dtypes.dtype):
        array = np.asarray(array, order="C")  # not ascontiguousarray: it turns 0-d into 1-d
        if dt is dtypes.bool:  # no dense i1 constants: emit i32 and cast
            i32 = self.add(trt.ConstantOp(trt.dense_elements(array.astype(np.int32), "i32"))).results[0]
            return self.add(trt.CastOp(i32, tensor_type(array.shape, dtypes.bool))).results[0]
        if array.size > config.inline_constant_limit and not _is_splat(array):
            # One constant per buffer: a weight used twice (a tied embedding) is one constant in the IR.
            key = (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str, dt.name)
            if key in self._buffers:
                return self._buffers[key]
            handle = f"tripy_const_{len(self.resources)}"
            data = np.ascontiguousarray(array, dtype=dtypes.to_numpy(dt))
            # No copy: the blob is a view of the trace constant's array (which the user's Tensor already holds).
            self.resources[handle] = memoryview(data.reshape(-1).view(np.uint8)).toreadonly()
            attr = DenseResourceAttr.from_params(handle, tensor_type(array.shape, dt))
            self._buffers[key] = value = self.add(trt.ConstantOp(attr)).results[0]
            return value
        return self.add(trt.ConstantOp(trt.dense_elements(array, dt.mlir))).results[0]


class _Deferred:
    """A constant not emitted yet: ops that take a known shape as a static list (slice) never need it."""

    __slots__ = ("ctx", "op")

    def __init__(self, ctx: _Ctx, op: TraceOp):
        self.ctx, self.op = ctx, op

    def emit(self):
        params = self.op.params
        value, dt = params["value"], params["dtype"]
        if type(value) is np.ndarray and value.size <= config.inline_constant_limit and dt is not dtypes.bool:
            # what ctx.constant does for these (most constants: Python scalars, shapes), without its other cases
            weights = trt.dense_elements(value, dt.mlir)
            return self.ctx.result(new_op(trt.ConstantOp, (), weights.type, {"weights": weights}))
        return self.ctx.constant(to_host(value), dt)


def _is_splat(array: np.ndarray) -> bool:
    flat = array.reshape(-1)
    return flat.size > 0 and bool(np.all(flat == flat[0]))


def _out_type(op: TraceOp, i: int = 0):
    t = op.outputs[i]
    return tensor_type(t.shape, t.dtype)


def _static(tt) -> list[int] | None:
    return list(map(int, tt.value.reshape(-1).tolist())) if tt.value is not None else None


# ---- one function per op family ----
def _constant(ctx, op, ins):
    return [_Deferred(ctx, op)]


# The hottest ops are built with new_op: what their constructors make (test_lowering_fast_paths compares them),
# without the keyword packing, None filtering and generic checks of a constructor call.
def _element_wise(ctx, op, ins):
    props = {"elementwiseOperation": trt.enum_attr(trt.ElementWiseOperationAttr, OPS[op.kind].enum)}
    return [ctx.result(new_op(trt.ElementWiseOp, (ins[0], ins[1]), _out_type(op), props))]


def _unary(ctx, op, ins):
    props = {"unaryOperation": trt.enum_attr(trt.UnaryOperationAttr, OPS[op.kind].enum)}
    return [ctx.result(new_op(trt.UnaryOp, (ins[0],), ins[0].type, props))]


def _activation(ctx, op, ins):
    props = {"activationType": trt.enum_attr(trt.ActivationTypeAttr, OPS[op.kind].enum)}
    return [ctx.result(new_op(trt.ActivationOp, (ins[0],), ins[0].type, props))]


def _matmul(ctx, op, ins):
    kinds = ["kVECTOR" if t.rank == 1 else "kNONE" for t in op.inputs]
    return [ctx.add(trt.MatrixMultiplyOp(ins[0], ins[1], kinds[0], kinds[1], _out_type(op))).results[0]]


def _reduce(ctx, op, ins):
    p = op.params
    return [ctx.add(trt.ReduceOp(ins[0], OPS[op.kind].enum, axes=list(p["dims"]), keep_dims=p["keepdim"],
                                 result_type=_out_type(op))).results[0]]


def _softmax(ctx, op, ins):
    return [ctx.add(trt.SoftmaxOp(ins[0], op.params["dim"])).results[0]]


def _slice(ctx, op, ins):
    args = [_static(t) or v for t, v in zip(op.inputs[1:], ins[1:])]
    return [ctx.add(trt.SliceOp(ins[0], args[0], args[1], args[2], _out_type(op))).results[0]]


def _get_dim(ctx, op, ins):
    shape = ctx.add(trt.ShapeOp(ins[0])).results[0]
    i = op.params["dim"]
    one = ctx.add(trt.SliceOp(shape, [i], [1], [1], trt.tensor_type((1,), "i32"))).results[0]
    if op.params.get("keepdim"):
        return [one]
    return [ctx.add(trt.CollapseRankOp(one, trt.tensor_type((), "i32"))).results[0]]


def _shape(ctx, op, ins):
    return [ctx.add(trt.ShapeOp(ins[0])).results[0]]


def _reshape(ctx, op, ins):
    return [ctx.result(new_op(trt.ReshapeOp, (ins[0], ins[1]), _out_type(op), {}))]


def _permute(ctx, op, ins):
    return [ctx.add(trt.TransposeOp(ins[0], list(op.params["perm"]), _out_type(op))).results[0]]


def _broadcast(ctx, op, ins):
    in_rank, out_rank = op.inputs[0].rank, op.outputs[0].rank
    dims = list(range(out_rank - in_rank, out_rank))
    return [ctx.add(trt.BroadcastOp(ins[0], dims, _out_type(op), shape=ins[1])).results[0]]


def _concatenate(ctx, op, ins):
    return [ctx.add(trt.ConcatenationOp(list(ins), op.params["dim"], _out_type(op))).results[0]]


def _gather(ctx, op, ins):
    return [ctx.add(trt.GatherOp(ins[0], ins[1], op.params["dim"], _out_type(op))).results[0]]


def _where(ctx, op, ins):
    return [ctx.add(trt.SelectOp(ins[0], ins[1], ins[2], _out_type(op))).results[0]]


def _cast(ctx, op, ins):
    return [ctx.add(trt.CastOp(ins[0], _out_type(op))).results[0]]


def _iota(ctx, op, ins):
    out = op.outputs[0]
    dt = op.params["dtype"]
    step = np.zeros(out.rank, dtype=dtypes.to_numpy(dt))
    step[op.params["dim"]] = 1
    start = ctx.constant(np.zeros((), dtype=dtypes.to_numpy(dt)), dt)
    step_v = ctx.constant(step, dt)
    return [ctx.add(trt.LinspaceOp(_out_type(op), start, step_v, shape=ins[0])).results[0]]


def _arange(ctx, op, ins):
    dt = op.params["dtype"]
    step = ctx.add(trt.ReshapeOp(ins[1], tensor_type((1,), dt), shape=ctx.i32_const([1]))).results[0]
    return [ctx.add(trt.LinspaceOp(_out_type(op), ins[0], step, shape=ins[2])).results[0]]


def _layer_norm(ctx, op, ins):
    p = op.params
    return [ctx.add(trt.NormalizationOp(ins[0], ins[1], ins[2], list(p["dims"]), eps=p["eps"],
                                        num_groups=1)).results[0]]


LOWERING: dict[str, Callable] = {
    "constant": _constant, "softmax": _softmax, "slice": _slice, "get_dim": _get_dim, "shape": _shape,
    "reshape": _reshape, "permute": _permute, "broadcast": _broadcast, "concatenate": _concatenate,
    "gather": _gather, "where": _where, "cast": _cast, "iota": _iota, "arange": _arange,
    "layer_norm": _layer_norm, "matmul": _matmul,
}
LOWERING.update(LOWERING_NN)  # the full Tripy API (issue 3)
for _row in OPS.values():
    family = {"element_wise": _element_wise, "unary": _unary, "activation": _activation, "reduce": _reduce}
    if _row.tensorrt_op in family and _row.name not in LOWERING:
        LOWERING[_row.name] = family[_row.tensorrt_op]


_STATIC_OPERANDS = ("slice", "slice_fill", "slice_reflect")


def _takes_static(op: TraceOp, i: int, t) -> bool:
    """Slice start/size/stride with known values are printed as static lists, not SSA operands."""
    if op.kind in ("slice_fill", "slice_reflect"):
        return 0 < i < 4 and t.value is not None and t.value.size > 0
    return op.kind == "slice" and i > 0 and t.value is not None


def _arg_attrs(info) -> DictionaryAttr:
    if isinstance(info, InputInfo):
        b = info.shape_bounds
        names = DictionaryAttr({str(k): StringAttr(v) for k, v in info.dimension_names.items()})
        return DictionaryAttr({"tensorrt.dimension_names": names,
                               "tensorrt.shape_profile": trt.ShapeProfileAttr(b.min, b.opt, b.max)})
    if isinstance(info, DimensionInputInfo):
        b = info.value_bounds
        return DictionaryAttr({"plan.memory_space": trt.MemorySpaceAttr("host"),
                               "tensorrt.value_bounds": trt.ShapeProfileAttr(b.min, b.opt, b.max)})
    return DictionaryAttr({})


_UNKNOWN = UnknownLoc()


def _location(name: str, loc, module: str = ""):
    """``loc("%t5"("file.py":12:5))`` of the trace op ``name`` made at ``loc`` (columns 1-based); inside a module,
    ``loc("%t5"("h.3.attn"("file.py":12:5)))``: the trace op's name stays outermost (engines find origins by it),
    the module path names the source location, as MLIR-TensorRT names ops."""
    if loc is None:
        child = _UNKNOWN
    else:
        # one SourceLocation object per user position (core.source caches them), many ops each: remember its
        # FileLineColLoc by id (hashing the frozen dataclass hashes its fields); the entry holds loc, so the id stays
        hit = _FILE_LOC_OF.get(id(loc))
        if hit is not None and hit[0] is loc:
            child = hit[1]
        else:
            # a notebook cell by the name the trace and the errors give it (In [5]), not the kernel's temp file
            # (/tmp/ipykernel_<pid>/<hash>.py), which every re-save of a shared notebook would change
            file = (loc.cell_name or loc.file) if loc.is_cell else loc.file
            child = file_loc(file, loc.line, (loc.col or 0) + 1)
            if len(_FILE_LOC_OF) >= 1 << 14:
                _FILE_LOC_OF.clear()
            _FILE_LOC_OF[id(loc)] = (loc, child)
    if module:
        key = (module, id(child))  # the FileLineColLocs are shared (attrs.file_loc): one NameLoc a position
        hit = _MODULE_LOC_OF.get(key)
        if hit is not None and hit[0] is child:
            child = hit[1]
        else:
            named = name_loc(module, child)
            if len(_MODULE_LOC_OF) >= 1 << 14:
                _MODULE_LOC_OF.clear()
            _MODULE_LOC_OF[key] = (child, named)
            child = named
    return name_loc(name, child)


_MODULE_LOC_OF: dict[tuple, tuple] = {}
_FILE_LOC_OF: dict[int, tuple] = {}


def lower(trace: Trace) -> MlirProgram:
    """Build the module ``{name} { func.func @main(...) }`` from a trace."""
    in_types = [tensor_type(t.shape, t.dtype) for t in trace.inputs]
    block = Block(arg_types=in_types)
    ctx = _Ctx(block, None)
    for t, arg in zip(trace.inputs, block.args):
        ctx.values[t] = arg
    origins: dict[str, OpOrigin] = {}
    values, value, of_trace_op = ctx.values, ctx.value, OpOrigin.of_trace_op
    for op in trace.ops:
        name = op.outputs[0].name
        kind = op.kind
        if kind == "constant":  # emitted where it is first used, under that op's location: none needed here
            values[op.outputs[0]] = _Deferred(ctx, op)
            origins[name] = of_trace_op(op)
            continue
        ctx.location = _location(name, op.location, op.module)
        if kind in _STATIC_OPERANDS:
            ins = [values[t] if _takes_static(op, i, t) else value(t) for i, t in enumerate(op.inputs)]
        else:
            ins = []
            for t in op.inputs:  # ctx.value, inlined: two inputs an op
                v = values[t]
                if type(v) is _Deferred:
                    v = values[t] = v.emit()
                ins.append(v)
        results = LOWERING[kind](ctx, op, ins)
        for t, v in zip(op.outputs, results):
            values[t] = v
        origins[name] = of_trace_op(op)
    if trace.ops and trace.ops[-1].kind == "constant":  # constants returned as outputs: at the last op's location
        last = trace.ops[-1]
        ctx.location = _location(last.outputs[0].name, last.location, last.module)
    outs = [ctx.value(t) for t in trace.outputs]
    ret = ReturnOp(*outs)
    block.add_op(ret)
    arg_attrs = ArrayAttr([_arg_attrs(trace.input_infos.get(t.name)) for t in trace.inputs])
    func = FuncOp("main", (in_types, [v.type for v in outs]), Region(block),
                  arg_attrs=arg_attrs if trace.inputs else None)
    ins_part = "_".join(t.name for t in trace.inputs)
    outs_part = "_".join(t.name for t in trace.outputs)
    name = (f"ins_{ins_part}_" if ins_part else "") + f"outs_{outs_part}"
    module = ModuleOp([func], sym_name=StringAttr(name))
    return MlirProgram(module=module, arg_names=[t.name for t in trace.inputs],
                       input_infos=dict(trace.input_infos), output_names=[t.name for t in trace.outputs],
                       origins=origins, resources=ctx.resources)
