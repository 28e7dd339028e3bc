"""THE TABLE of the ``tensorrt`` engine: MLIR op name -> a function that adds TensorRT layers.

Each entry is ``builder(net, op, inputs, ctx) -> list[ITensor]``: ``net`` is the
``INetworkDefinition``, ``op`` the MLIR op, ``inputs`` the ITensors of ``op.operands`` in order,
``ctx`` the :class:`NetworkContext` (the ``tensorrt`` module as ``ctx.trt``, SSA value -> ITensor,
constants, naming). It returns one ITensor per op result. Op attributes are read with
:func:`~tripy_lab.mlir.dialect.attr_value`; MLIR enum strings map to TensorRT's Python enums by
dropping the ``k`` (``kSUM`` -> ``ElementWiseOperation.SUM``).

Every layer a builder adds goes through ``ctx.add(layer, role)``, which names it
``<op>_<index>`` (``<op>_<index>.<role>`` for helper layers such as the cast after a shape
layer) and sets its ``metadata`` to the op's location name, so the engine inspector's rows map back to
the op and its trace op. :func:`build_network` walks ``program.ops()`` through the table, adds the
network inputs and marks the outputs.

Ops without a TensorRT layer of their own (``reshape``, ``transpose``, ``expand_rank``,
``collapse_rank``, ``broadcast``) become ``IShuffleLayer``\\ s; ``broadcast`` adds a
``ISliceLayer`` in ``SampleMode.WRAP`` that repeats size-1 dims (as MLIR-TensorRT does).
``tensorrt.shape`` adds a cast to INT32 after ``add_shape`` (TensorRT 10 gives INT64 shapes).
Numpy buffers behind ``trt.Weights`` stay referenced in ``ctx.keep_alive`` until the engine is built.

This module imports no TensorRT: the module is passed in, so tests run the walk with a stand-in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tripy_lab.core.errors import TripyException
from tripy_lab.engine.tensorrt.layers import layer_name, op_loc_name
from tripy_lab.mlir.attrs import NUMPY_DTYPES, elem_of, shape_of
from tripy_lab.mlir.dialect import attr_value

# MLIR element type -> tensorrt.DataType member
DATA_TYPES: dict[str, str] = {
    "f32": "FLOAT", "f16": "HALF", "bf16": "BF16", "i8": "INT8", "i32": "INT32", "i64": "INT64", "i1": "BOOL",
    "ui8": "UINT8", "f8E4M3FN": "FP8", "i4": "INT4", "f4E2M1FN": "FP4",
}  # fmt: skip

# MLIR enum value -> TensorRT member name where it is not just the value without its "k"
_ENUM_ALIASES: dict[str, tuple[str, ...]] = {"kDEFAULT": ("STRICT_BOUNDS", "DEFAULT")}


def trt_dtype(trt, elem: str):
    try:
        return getattr(trt.DataType, DATA_TYPES[elem])
    except KeyError:
        raise TripyException(f"TensorRT has no data type for MLIR element type '{elem}'.") from None


def trt_enum(enum_cls, value: str):
    """``trt_enum(trt.ElementWiseOperation, "kSUM")`` -> ``trt.ElementWiseOperation.SUM``."""
    for name in _ENUM_ALIASES.get(value, (value[1:] if value.startswith("k") else value,)):
        member = getattr(enum_cls, name, None)
        if member is not None:
            return member
    raise TripyException(f"This TensorRT has no {getattr(enum_cls, '__name__', enum_cls)} value for '{value}'.")


def axes_mask(axes: Sequence[int]) -> int:
    """TensorRT's axes bitmask: bit ``a`` set for every axis ``a``."""
    mask = 0
    for a in axes:
        mask |= 1 << int(a)
    return mask


def _shape(value) -> tuple[int | None, ...]:
    return shape_of(value.type)


def _elem(value) -> str:
    return elem_of(value.type)


def _int4_bytes(array: np.ndarray) -> np.ndarray:
    """Pack int4 values two per byte, element 0 in the low nibble (assumed TensorRT's INT4 layout)."""
    flat = np.asarray(array).astype(np.int8).reshape(-1) & 0x0F
    if flat.size % 2:
        flat = np.concatenate([flat, np.zeros(1, np.int8)])
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8)


@dataclass
class LayerInfo:
    layer: Any
    name: str
    op_index: int
    role: str | None


@dataclass
class NetworkContext:
    """State of one network build: the module, the value map, weights kept alive, the layers added."""

    trt: Any
    net: Any
    program: Any
    env: dict = field(default_factory=dict)  # SSA value -> ITensor
    keep_alive: list = field(default_factory=list)  # numpy buffers referenced by trt.Weights
    layers: list[LayerInfo] = field(default_factory=list)
    inputs: list = field(default_factory=list)  # (name, ITensor)
    outputs: list = field(default_factory=list)  # (name, ITensor)
    op: Any = None
    index: int = -1

    # ---- naming ----
    def add(self, layer, role: str | None = None):
        """Name ``layer`` after the current op (plus ``role`` for helpers) and set its metadata."""
        if layer is None:
            raise TripyException(f"TensorRT refused to add a layer for '{self.op.name}' (op {self.index}).",
                                 self._origin_details())
        name = layer_name(self.op.name, self.index, role)
        layer.name = name
        loc = self.loc_name()
        if loc and hasattr(layer, "metadata"):
            layer.metadata = loc
        self.layers.append(LayerInfo(layer, name, self.index, role))
        return layer

    def loc_name(self) -> str | None:
        return op_loc_name(self.op)

    def _origin_details(self) -> list[str]:
        origin = self.program.origin_of(self.op) if self.op is not None else None
        return [f"Trace op: {origin.text}"] if origin else []

    # ---- values ----
    def tensor(self, value):
        return self.env[value]

    def constant_of(self, value) -> np.ndarray | None:
        """The numpy value of ``value`` when a ``tensorrt.constant`` defines it, else None."""
        owner = getattr(value, "owner", None)
        if getattr(owner, "name", None) == "tensorrt.constant":
            return self.program.constant_value(owner)
        return None

    def weights(self, array: np.ndarray, elem: str):
        """``trt.Weights`` over a numpy buffer of ``elem`` that this context keeps alive."""
        arr = np.asarray(array)
        count = int(arr.size)
        if elem == "i4":
            buf = _int4_bytes(arr)
        elif elem in ("bf16", "f8E4M3FN", "f4E2M1FN"):
            view = {"bf16": np.uint16, "f8E4M3FN": np.uint8, "f4E2M1FN": np.uint8}[elem]
            buf = np.ascontiguousarray(arr.astype(NUMPY_DTYPES[elem])).view(view)
            if elem == "f4E2M1FN":
                buf = _int4_bytes(buf)
        else:
            buf = np.ascontiguousarray(arr.astype(NUMPY_DTYPES[elem]))
        buf = np.ascontiguousarray(buf).reshape(-1)
        self.keep_alive.append(buf)
        return self.trt.Weights(trt_dtype(self.trt, elem), buf.ctypes.data, count)

    def empty_weights(self, elem: str):
        return self.trt.Weights(trt_dtype(self.trt, elem))

    def constant(self, array, elem: str, role: str | None = None):
        arr = np.asarray(array)
        layer = self.add(self.net.add_constant(tuple(arr.shape), self.weights(arr, elem)), role)
        return layer.get_output(0)

    def i32(self, values: Sequence[int], role: str):
        return self.constant(np.asarray(values, dtype=np.int32).reshape(-1), "i32", role)

    def shape_i32(self, x, role: str):
        """1-D INT32 shape of ``x`` (``add_shape`` gives INT64 on TensorRT 10, so cast)."""
        out = self.add(self.net.add_shape(x), role).get_output(0)
        if out.dtype != self.trt.DataType.INT32:
            out = self.add(self.net.add_cast(out, self.trt.DataType.INT32), role + "_i32").get_output(0)
        return out

    def dims_tensor(self, x, spec: Sequence, role: str):
        """A 1-D INT32 tensor of dims: ``spec`` entries are ints or ``("dim", j)`` (dim j of ``x``)."""
        pieces, run = [], []
        shape = None
        for k, s in enumerate(spec):
            if isinstance(s, tuple):
                if run:
                    pieces.append(self.i32(run, f"{role}_c{k}"))
                    run = []
                if shape is None:
                    shape = self.shape_i32(x, f"{role}_shape")
                layer = self.add(self.net.add_slice(shape, (s[1],), (1,), (1,)), f"{role}_d{k}")
                pieces.append(layer.get_output(0))
            else:
                run.append(int(s))
        if run:
            pieces.append(self.i32(run, f"{role}_c{len(spec)}"))
        if len(pieces) == 1:
            return pieces[0]
        layer = self.add(self.net.add_concatenation(pieces), f"{role}_concat")
        layer.axis = 0
        return layer.get_output(0)

    def reshape(self, x, spec: Sequence, role: str | None = None, first_transpose: Sequence[int] | None = None):
        """Shuffle ``x`` to the dims in ``spec`` (ints or ``("dim", j)``), static when possible."""
        layer = self.net.add_shuffle(x)
        if first_transpose is not None:
            layer.first_transpose = tuple(first_transpose)
        if all(isinstance(s, int) for s in spec):
            layer.reshape_dims = tuple(spec)
        else:
            layer.set_input(1, self.dims_tensor(x, spec, (role or "reshape") + "_dims"))
        layer.zero_is_placeholder = False
        return self.add(layer, role).get_output(0)


# =============================================================================================
# The builders. Signature: (net, op, inputs, ctx) -> list of ITensors (one per op result).


def _expand_rank_spec(in_shape, out_rank: int) -> list:
    """Right-align ``in_shape`` to ``out_rank`` dims (numpy broadcasting): prepend 1s / drop leading 1s."""
    k = out_rank - len(in_shape)
    if k >= 0:
        return [1] * k + [d if d is not None else ("dim", j) for j, d in enumerate(in_shape)]
    if any(d != 1 for d in in_shape[:-k]):
        raise TripyException(f"Cannot drop non-unit leading dims of shape {list(in_shape)} to rank {out_rank}.")
    return [d if d is not None else ("dim", j) for j, d in enumerate(in_shape[-k:], start=-k)]


def _same_rank(ctx, tensors, values, rank: int) -> list:
    """TensorRT's element-wise layers need equal ranks: right-align any operand of another rank."""
    out = []
    for i, (t, v) in enumerate(zip(tensors, values)):
        s = _shape(v)
        out.append(t if len(s) == rank else ctx.reshape(t, _expand_rank_spec(s, rank), f"rank{i}"))
    return out


def _element_wise(net, op, ins, ctx):
    a, b = _same_rank(ctx, ins, op.operands, len(_shape(op.results[0])))
    kind = trt_enum(ctx.trt.ElementWiseOperation, attr_value(op, "elementwiseOperation"))
    return [ctx.add(net.add_elementwise(a, b, kind)).get_output(0)]


def _unary(net, op, ins, ctx):
    kind = trt_enum(ctx.trt.UnaryOperation, attr_value(op, "unaryOperation"))
    return [ctx.add(net.add_unary(ins[0], kind)).get_output(0)]


def _activation(net, op, ins, ctx):
    layer = net.add_activation(ins[0], trt_enum(ctx.trt.ActivationType, attr_value(op, "activationType")))
    alpha, beta = attr_value(op, "alpha"), attr_value(op, "beta")
    if layer is not None and alpha is not None:
        layer.alpha = alpha
    if layer is not None and beta is not None:
        layer.beta = beta
    return [ctx.add(layer).get_output(0)]


def _matrix_multiply(net, op, ins, ctx):
    mo = ctx.trt.MatrixOperation
    layer = net.add_matrix_multiply(ins[0], trt_enum(mo, attr_value(op, "op0")),
                                    ins[1], trt_enum(mo, attr_value(op, "op1")))  # fmt: skip
    return [ctx.add(layer).get_output(0)]


def _reduce(net, op, ins, ctx):
    kind = trt_enum(ctx.trt.ReduceOperation, attr_value(op, "reduceOperation"))
    layer = net.add_reduce(ins[0], kind, axes_mask(attr_value(op, "reduceAxes")),
                           bool(attr_value(op, "keepDimensions")))  # fmt: skip
    return [ctx.add(layer).get_output(0)]


def _softmax(net, op, ins, ctx):
    layer = ctx.add(net.add_softmax(ins[0]))
    layer.axes = axes_mask([attr_value(op, "axis")])
    return [layer.get_output(0)]


def _scalar(ctx, t, value, role: str):
    """``t`` as a 0-D tensor (slice fill values must be scalars)."""
    return t if len(_shape(value)) == 0 else ctx.reshape(t, [], role)


def _slice(net, op, ins, ctx):
    x = ctx.tensor(op.input)
    rank = len(_shape(op.input))
    static = {}
    for key, default in (("start", 0), ("size", 0), ("stride", 1)):
        vals = attr_value(op, "static_" + key)
        static[key] = tuple(int(v) for v in vals) if vals is not None else (default,) * rank
    layer = ctx.add(net.add_slice(x, static["start"], static["size"], static["stride"]))
    for idx, key in ((1, "start"), (2, "size"), (3, "stride")):
        dyn = getattr(op, key)
        if dyn is not None:
            layer.set_input(idx, ctx.tensor(dyn))
    mode = attr_value(op, "mode") or "kDEFAULT"
    layer.mode = trt_enum(ctx.trt.SampleMode, mode)
    if op.fill is not None:
        layer.set_input(4, _scalar(ctx, ctx.tensor(op.fill), op.fill, "fill"))
    return [layer.get_output(0)]


def _reshape(net, op, ins, ctx):
    layer = net.add_shuffle(ctx.tensor(op.input))
    if op.shape is not None:
        layer.set_input(1, ctx.tensor(op.shape))
    else:
        out = _shape(op.result)
        if out.count(None) > 1:
            raise TripyException("A reshape without a 'shape' operand may have at most one dynamic dim.",
                                 [f"Result type {op.result.type}."])
        layer.reshape_dims = tuple(-1 if d is None else d for d in out)
    layer.zero_is_placeholder = False
    return [ctx.add(layer).get_output(0)]


def _transpose(net, op, ins, ctx):
    layer = net.add_shuffle(ins[0])
    layer.first_transpose = tuple(attr_value(op, "permutation"))
    return [ctx.add(layer).get_output(0)]


def _unit_dims_spec(big, small, input_is_big: bool) -> list:
    """Result dims of a rank change that only drops (collapse: input ``big``) or adds (expand: input
    ``small``) size-1 dims. Entries are static sizes or ``("dim", j)`` = dim j of the input."""
    spec: list = []
    j = 0
    for i, d in enumerate(big):
        s = small[j] if j < len(small) else 0
        if j < len(small) and (d == s or (d is None and s != 1) or (s is None and d != 1)):
            known = d if d is not None else s
            spec.append(known if known is not None else ("dim", i if input_is_big else j))
            j += 1
        elif d == 1:
            if not input_is_big:  # expand: the result has this inserted unit dim
                spec.append(1)
        else:
            j = -1
            break
    if j != len(small):
        raise TripyException("Expected a rank change that only adds or drops size-1 dims.",
                             [f"Shapes {list(big)} and {list(small)}."])
    return spec


def _collapse_rank(net, op, ins, ctx):
    spec = _unit_dims_spec(_shape(op.input), _shape(op.result), input_is_big=True)
    return [ctx.reshape(ins[0], spec)]


def _expand_rank(net, op, ins, ctx):
    spec = _unit_dims_spec(_shape(op.result), _shape(op.input), input_is_big=False)
    return [ctx.reshape(ins[0], spec)]


def _broadcast(net, op, ins, ctx):
    x = ctx.tensor(op.input)
    in_shape, out_shape = _shape(op.input), _shape(op.result)
    dims = [int(d) for d in attr_value(op, "broadcast_dims")]
    rank = len(out_shape)
    # 1. put input dim i at result dim dims[i] (transposing when dims are out of order), 1 elsewhere
    perm = sorted(range(len(dims)), key=lambda i: dims[i])
    where = {dims[p]: p for p in perm}  # result dim -> input dim
    spec = [1 if p not in where else (in_shape[where[p]] if in_shape[where[p]] is not None else ("dim", where[p]))
            for p in range(rank)]  # fmt: skip
    need_reshape = dims != list(range(rank))
    expanded = tuple(s if isinstance(s, int) else None for s in spec)
    # 2. repeat size-1 dims with a WRAP slice from 0 to the target size (not needed when nothing grows)
    need_slice = None in expanded or expanded != out_shape
    if not need_reshape and not need_slice:
        return [ctx.add(net.add_identity(x)).get_output(0)]
    if need_reshape:
        transpose = perm if perm != list(range(len(perm))) else None
        x = ctx.reshape(x, spec, "expand" if need_slice else None, first_transpose=transpose)
    if not need_slice:
        return [x]
    size = tuple(0 if d is None else d for d in out_shape)
    layer = ctx.add(net.add_slice(x, (0,) * rank, size, (1,) * rank))
    if op.shape is not None:
        layer.set_input(2, ctx.tensor(op.shape))
    elif None in out_shape:
        raise TripyException("A broadcast to a dynamic shape needs a 'shape' operand.",
                             [f"Result type {op.result.type}."])
    layer.mode = ctx.trt.SampleMode.WRAP
    return [layer.get_output(0)]


def _concatenation(net, op, ins, ctx):
    layer = ctx.add(net.add_concatenation(list(ins)))
    layer.axis = int(attr_value(op, "axis"))
    return [layer.get_output(0)]


def _gather(net, op, ins, ctx):
    layer = ctx.add(net.add_gather_v2(ins[0], ins[1], ctx.trt.GatherMode.DEFAULT))
    layer.axis = int(attr_value(op, "axis"))
    nb = int(attr_value(op, "numBroadcastDims") or 0)
    if nb:
        layer.num_elementwise_dims = nb
    return [layer.get_output(0)]


def _select(net, op, ins, ctx):
    c, t, e = _same_rank(ctx, ins, op.operands, len(_shape(op.results[0])))
    return [ctx.add(net.add_select(c, t, e)).get_output(0)]


def _cast(net, op, ins, ctx):
    out = _elem(op.results[0])
    if out == _elem(op.operands[0]):
        return [ctx.add(net.add_identity(ins[0])).get_output(0)]
    return [ctx.add(net.add_cast(ins[0], trt_dtype(ctx.trt, out))).get_output(0)]


def _constant(net, op, ins, ctx):
    return [ctx.constant(ctx.program.constant_value(op), _elem(op.results[0]))]


def _shape_op(net, op, ins, ctx):
    out = ctx.add(net.add_shape(ins[0])).get_output(0)
    if out.dtype != ctx.trt.DataType.INT32:
        out = ctx.add(net.add_cast(out, ctx.trt.DataType.INT32), "i32").get_output(0)
    return [out]


def _linspace(net, op, ins, ctx):
    out_shape = _shape(op.result)
    dtype = trt_dtype(ctx.trt, _elem(op.result))
    dims = tuple(0 if d is None else d for d in out_shape)
    fill_op = ctx.trt.FillOperation.LINSPACE
    try:
        layer = net.add_fill(dims, fill_op, dtype)
    except TypeError:  # TensorRT < 10: no output type argument
        layer = net.add_fill(dims, fill_op)
        layer.to_type = dtype
    ctx.add(layer)
    if op.shape is not None:
        layer.set_input(0, ctx.tensor(op.shape))
    elif None in out_shape:
        raise TripyException("A linspace with dynamic dims needs a 'shape' operand.", [f"{op.result.type}"])
    if op.start is not None:
        layer.set_input(1, _scalar(ctx, ctx.tensor(op.start), op.start, "start"))
        layer.set_input(2, ctx.tensor(op.step))
    else:
        # The binding stores a Python int as int64 alpha/beta (meant for INT64 outputs); floats as doubles.
        as_value = int if _elem(op.result) == "i64" else float
        layer.alpha = as_value(attr_value(op, "static_start"))
        layer.beta = as_value(attr_value(op, "static_step"))
    return [layer.get_output(0)]


def _normalization(net, op, ins, ctx):
    layer = ctx.add(net.add_normalization(ins[0], ins[1], ins[2], axes_mask(attr_value(op, "axis"))))
    eps = attr_value(op, "eps")
    layer.epsilon = 1e-5 if eps is None else float(eps)
    groups = attr_value(op, "num_groups")
    if groups is not None:
        layer.num_groups = int(groups)
    return [layer.get_output(0)]


def _conv_like(net, op, ctx, transposed: bool):
    kname, bname = ("kernelWeights", "biasWeights") if transposed else ("kernel", "bias")
    x = ctx.tensor(op.input)
    elem = _elem(op.input)
    kval, bval = getattr(op, kname), getattr(op, bname)
    kernel = attr_value(op, kname + "Static", ctx.program.resources)
    if kernel is None and kval is not None:
        kernel = ctx.constant_of(kval)
    bias = attr_value(op, bname + "Static", ctx.program.resources)
    if bias is None and bval is not None:
        bias = ctx.constant_of(bval)
    kshape = tuple(np.shape(kernel)) if kernel is not None else _shape(kval)
    groups = int(attr_value(op, "num_groups") or 1)
    out_maps = _shape(op.result)[1]
    if out_maps is None:
        out_maps = kshape[1] * groups if transposed else kshape[0]
    kw = ctx.weights(kernel, elem) if kernel is not None else ctx.empty_weights(elem)
    bw = ctx.weights(bias, elem) if bias is not None else None
    add = net.add_deconvolution_nd if transposed else net.add_convolution_nd
    layer = ctx.add(add(x, int(out_maps), tuple(int(k) for k in kshape[2:]), kw, bw))
    if kernel is None:
        layer.set_input(1, ctx.tensor(kval))
    if bias is None and bval is not None:
        layer.set_input(2, ctx.tensor(bval))
    layer.stride_nd = tuple(attr_value(op, "stride"))
    layer.pre_padding = tuple(attr_value(op, "pre_padding"))
    layer.post_padding = tuple(attr_value(op, "post_padding"))
    dilation = attr_value(op, "dilation")
    if dilation is not None:
        layer.dilation_nd = tuple(dilation)
    layer.num_groups = groups
    return [layer.get_output(0)]


def _convolution(net, op, ins, ctx):
    return _conv_like(net, op, ctx, transposed=False)


def _deconvolution(net, op, ins, ctx):
    return _conv_like(net, op, ctx, transposed=True)


def _pooling(net, op, ins, ctx):
    kind = trt_enum(ctx.trt.PoolingType, attr_value(op, "poolingType"))
    layer = ctx.add(net.add_pooling_nd(ins[0], kind, tuple(attr_value(op, "windowSize"))))
    layer.stride_nd = tuple(attr_value(op, "stride"))
    layer.pre_padding = tuple(attr_value(op, "prePadding"))
    layer.post_padding = tuple(attr_value(op, "postPadding"))
    blend = attr_value(op, "blendFactor")
    if blend is not None:
        layer.blend_factor = float(blend)
    excl = attr_value(op, "averageCountExcludesPadding")
    if excl is not None:
        layer.average_count_excludes_padding = bool(excl)
    return [layer.get_output(0)]


def _resize(mode: str) -> Callable:
    def build(net, op, ins, ctx):
        trt = ctx.trt
        layer = ctx.add(net.add_resize(ctx.tensor(op.input)))
        layer.resize_mode = trt_enum(trt.InterpolationMode, mode)
        scales = attr_value(op, "scales")
        if op.output_shape is not None:
            layer.set_input(1, ctx.tensor(op.output_shape))
        elif scales is not None:
            layer.scales = [float(s) for s in scales]
        else:
            out = _shape(op.result)
            if None in out:
                raise TripyException("A resize to a dynamic shape needs 'output_shape' or 'scales'.",
                                     [f"{op.result.type}"])
            layer.shape = tuple(out)
        layer.coordinate_transformation = trt_enum(trt.ResizeCoordinateTransformation,
                                                   attr_value(op, "coordinateTransformation"))  # fmt: skip
        layer.selector_for_single_pixel = trt_enum(trt.ResizeSelector, attr_value(op, "selectorForSinglePixel"))
        if mode == "kNEAREST":
            layer.nearest_rounding = trt_enum(trt.ResizeRoundMode, attr_value(op, "nearestRounding"))
        if mode == "kCUBIC":
            layer.cubic_coeff = float(attr_value(op, "cubicCoeff"))
        return [layer.get_output(0)]

    return build


def _top_k(net, op, ins, ctx):
    kind = trt_enum(ctx.trt.TopKOperation, attr_value(op, "topkOperation"))
    layer = ctx.add(net.add_topk(ins[0], kind, int(attr_value(op, "k")), axes_mask([attr_value(op, "axis")])))
    return [layer.get_output(0), layer.get_output(1)]


def _quant(dequantize: bool) -> Callable:
    def build(net, op, ins, ctx):
        dtype = trt_dtype(ctx.trt, _elem(op.result))
        add = net.add_dequantize if dequantize else net.add_quantize
        try:
            layer = add(ins[0], ins[1], dtype)
        except TypeError:  # older bindings: (input, scale) only, then set the type
            layer = add(ins[0], ins[1])
            layer.to_type = dtype
        ctx.add(layer)
        axis = attr_value(op, "axis")
        if axis is not None:
            layer.axis = int(axis)
        return [layer.get_output(0)]

    return build


def _plugin_fields(trt, params) -> list:
    """``creator_params`` (a DictionaryAttr) -> ``trt.PluginField`` list, types from the attributes."""
    from xdsl.dialects.builtin import DenseArrayBase, DenseIntOrFPElementsAttr, FloatAttr, IntegerAttr, StringAttr

    from tripy_lab.mlir.attrs import elements_to_numpy, to_python

    pft = trt.PluginFieldType
    by_dtype = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64", "float16": "FLOAT16",
                "float32": "FLOAT32", "float64": "FLOAT64", "bfloat16": "BF16", "uint8": "CHAR", "bool": "INT8"}
    fields = []
    for key, attr in params.data.items():
        if isinstance(attr, StringAttr):
            data, kind = np.frombuffer(attr.data.encode() + b"\0", dtype=np.int8).copy(), "CHAR"
        elif isinstance(attr, IntegerAttr):
            width = getattr(attr.type, "width", None)
            bits = width.data if width is not None else 64
            np_t = {1: np.int8, 8: np.int8, 16: np.int16, 32: np.int32}.get(bits, np.int64)
            data = np.asarray([int(attr.value.data)], dtype=np_t)
            kind = by_dtype[data.dtype.name]
        elif isinstance(attr, FloatAttr):
            np_t = {16: np.float16, 32: np.float32}.get(getattr(attr.type, "bitwidth", 32), np.float64)
            data = np.asarray([float(attr.value.data)], dtype=np_t)
            kind = by_dtype[data.dtype.name]
        elif isinstance(attr, DenseIntOrFPElementsAttr):
            data = np.ascontiguousarray(elements_to_numpy(attr)).reshape(-1)
            kind = by_dtype.get(data.dtype.name)
        elif isinstance(attr, DenseArrayBase):
            data = np.asarray(to_python(attr))
            data = data.astype(np.float32 if data.dtype.kind == "f" else np.int64)
            kind = by_dtype[data.dtype.name]
        else:
            raise TripyException(f"Plugin field '{key}' has an attribute kind tripy-lab cannot pass to TensorRT.",
                                 [f"{attr}"])
        if kind is None:
            raise TripyException(f"Plugin field '{key}' has an unsupported element type {data.dtype}.")
        fields.append(trt.PluginField(key, data, getattr(pft, kind)))
    return fields


def _opaque_plugin(net, op, ins, ctx):
    trt = ctx.trt
    name, version = attr_value(op, "plugin_name"), attr_value(op, "plugin_version")
    namespace = attr_value(op, "plugin_namespace") or ""
    registry = trt.get_plugin_registry()
    dso = attr_value(op, "dso_path")
    if attr_value(op, "creator_func") is not None:
        raise TripyException(f"Plugin '{name}': a 'creator_func' cannot be called from TensorRT's Python API.",
                             ["Register the plugin creator in the library instead (REGISTER_TENSORRT_PLUGIN)."])
    if dso is not None:
        registry.load_library(dso)
    creator = registry.get_creator(name, version, namespace)
    if creator is None:
        raise TripyException(f"TensorRT has no plugin '{name}' version '{version}' in namespace '{namespace}'.",
                             ["Load its library (dso_path) or register it before building."])
    fields = trt.PluginFieldCollection(_plugin_fields(trt, op.creator_params))
    v3 = getattr(trt, "IPluginCreatorV3One", None)
    if v3 is not None and isinstance(creator, v3):
        plugin = creator.create_plugin(name, fields, trt.TensorRTPhase.BUILD)
        layer = net.add_plugin_v3(list(ins), [], plugin)
    else:
        plugin = creator.create_plugin(name, fields)
        layer = net.add_plugin_v2(list(ins), plugin)
    if plugin is None:
        raise TripyException(f"Plugin '{name}' could not be created from its creator_params.")
    ctx.add(layer)
    return [layer.get_output(i) for i in range(len(op.results))]


def _shuffle(net, op, ins, ctx):
    layer = net.add_shuffle(ctx.tensor(op.input))
    layer.first_transpose = tuple(attr_value(op, "first_transpose"))
    if op.dynamic_reshape is not None:
        layer.set_input(1, ctx.tensor(op.dynamic_reshape))
    elif attr_value(op, "reshape") is not None:
        layer.reshape_dims = tuple(attr_value(op, "reshape"))
    layer.second_transpose = tuple(attr_value(op, "second_transpose"))
    layer.zero_is_placeholder = bool(attr_value(op, "zero_is_placeholder"))
    return [ctx.add(layer).get_output(0)]


def _yield(net, op, ins, ctx):
    raise TripyException("'tensorrt.yield' only ends the shapes region of a tensorrt.opaque_plugin.",
                         ["It cannot appear in the body of @main."])


TABLE: dict[str, Callable] = {
    "tensorrt.element_wise": _element_wise,
    "tensorrt.unary": _unary,
    "tensorrt.activation": _activation,
    "tensorrt.matrix_multiply": _matrix_multiply,
    "tensorrt.reduce": _reduce,
    "tensorrt.softmax": _softmax,
    "tensorrt.slice": _slice,
    "tensorrt.reshape": _reshape,
    "tensorrt.transpose": _transpose,
    "tensorrt.broadcast": _broadcast,
    "tensorrt.concatenation": _concatenation,
    "tensorrt.gather": _gather,
    "tensorrt.select": _select,
    "tensorrt.cast": _cast,
    "tensorrt.identity": _cast,
    "tensorrt.constant": _constant,
    "tensorrt.shape": _shape_op,
    "tensorrt.collapse_rank": _collapse_rank,
    "tensorrt.expand_rank": _expand_rank,
    "tensorrt.linspace": _linspace,
    "tensorrt.normalization": _normalization,
    "tensorrt.convolution": _convolution,
    "tensorrt.deconvolution": _deconvolution,
    "tensorrt.pooling": _pooling,
    "tensorrt.resize_nearest": _resize("kNEAREST"),
    "tensorrt.resize_linear": _resize("kLINEAR"),
    "tensorrt.resize_cubic": _resize("kCUBIC"),
    "tensorrt.top_k": _top_k,
    "tensorrt.quantize": _quant(dequantize=False),
    "tensorrt.dequantize": _quant(dequantize=True),
    "tensorrt.opaque_plugin": _opaque_plugin,
    "tensorrt.shuffle": _shuffle,
    "tensorrt.yield": _yield,
}
"""MLIR op name -> layer builder ``(net, op, inputs, ctx) -> list[ITensor]``."""


# =============================================================================================
# The walk


def _input_shape(value) -> tuple[int, ...]:
    return tuple(-1 if d is None else d for d in _shape(value))


def build_network(trt, net, program) -> NetworkContext:
    """Fill ``net`` (an empty INetworkDefinition) from ``program``: inputs, one entry per op, outputs."""
    ctx = NetworkContext(trt, net, program)
    main = program.main()
    names = list(program.arg_names)
    for i, arg in enumerate(main.body.block.args):
        name = names[i] if i < len(names) else f"arg{i}"
        t = net.add_input(name, trt_dtype(trt, _elem(arg)), _input_shape(arg))
        ctx.env[arg] = t
        ctx.inputs.append((name, t))
    missing = sorted({op.name for op in program.ops() if op.name not in TABLE})
    if missing:
        raise TripyException("The tensorrt engine has no layer for these ops.", [", ".join(missing)])
    for index, op in enumerate(program.ops()):
        ctx.op, ctx.index = op, index
        before = len(ctx.layers)
        try:
            outs = TABLE[op.name](net, op, [ctx.env[v] for v in op.operands], ctx)
        except TripyException:
            raise
        except Exception as exc:  # a TensorRT binding error: name the op and its origin
            origin = program.origin_of(op)
            raise TripyException(f"Building the TensorRT layer for '{op.name}' (op {index}) failed: {exc}",
                                 [f"Trace op: {origin.text}" if origin else ""],
                                 origin.location if origin else None) from exc
        if len(ctx.layers) == before:
            raise TripyException(f"The layer builder for '{op.name}' added no layer.")
        if len(outs) != len(op.results):
            raise TripyException(f"The layer builder for '{op.name}' returned {len(outs)} tensors for "
                                 f"{len(op.results)} results.")
        for res, t in zip(op.results, outs):
            ctx.env[res] = t
    ret = main.body.block.last_op
    out_names = list(program.output_names)
    marked: set[int] = set()
    inputs = {id(t) for _, t in ctx.inputs}
    for i, v in enumerate(ret.operands):
        t = ctx.env[v]
        if id(t) in marked or id(t) in inputs:  # an output twice, or an input returned as is: copy it
            layer = net.add_identity(t)
            layer.name = f"output_{i}.copy"
            ctx.layers.append(LayerInfo(layer, layer.name, -1, "copy"))
            t = layer.get_output(0)
        name = out_names[i] if i < len(out_names) else f"output_{i}"
        t.name = name
        net.mark_output(t)
        marked.add(id(t))
        ctx.outputs.append((name, t))
    ctx.op = None
    return ctx
