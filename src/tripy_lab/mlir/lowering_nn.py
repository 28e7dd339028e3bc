"""Lowering of the op-table rows added with the full Tripy API (see trace/rules_nn.py).

Each entry is ``fn(ctx, op, ins) -> [SSA values]`` like the entries of ``lowering.LOWERING``; this
module only uses the lowering context it is handed, so it does not import ``lowering``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import StringAttr

from tripy_lab.mlir import dialect as trt
from tripy_lab.mlir.attrs import dense_array, dense_elements, f32_attr, int_attr


def _type(t):
    return trt.tensor_type(tuple(t.shape), t.dtype.mlir)


def _out(op, i: int = 0):
    return _type(op.outputs[i])


def _static(tt, v):
    """Known shape-tensor values become static lists (no SSA operand needed)."""
    return [int(x) for x in tt.value.reshape(-1)] if tt.value is not None and tt.value.size else v


def _padded_slice(mode: str):
    def lower(ctx, op, ins):
        start, size, stride = (_static(t, v) for t, v in zip(op.inputs[1:4], ins[1:4]))
        fill = ins[4] if mode == "kFILL" else None
        return [ctx.add(trt.SliceOp(ins[0], start, size, stride, _out(op), mode=mode, fill=fill)).results[0]]
    return lower


def _top_k(kind: str):
    def lower(ctx, op, ins):
        res = ctx.add(trt.TopKOp(ins[0], kind, op.params["k"], op.params["dim"]))
        # Keep the trace's result types (the op infers the same shapes, maybe with more static dims).
        return [res.results[0], res.results[1]]
    return lower


def _instance_norm(ctx, op, ins):
    p = op.params
    return [ctx.add(trt.NormalizationOp(ins[0], ins[1], ins[2], list(p["dims"]), eps=p["eps"],
                                        num_groups=p["num_groups"])).results[0]]


def _conv(cls):
    def lower(ctx, op, ins):
        p = op.params
        bias = ins[2] if len(ins) > 2 else None
        return [ctx.add(cls(ins[0], ins[1], _out(op), list(p["stride"]), list(p["pre_padding"]),
                            list(p["post_padding"]), bias=bias, num_groups=p["groups"],
                            dilation=list(p["dilation"]))).results[0]]
    return lower


def _pool(kind: str):
    def lower(ctx, op, ins):
        p = op.params
        excl = None if kind == "kMAX" else bool(p["exclude_padding"])
        return [ctx.add(trt.PoolingOp(ins[0], kind, list(p["window"]), list(p["stride"]), list(p["pre_padding"]),
                                      list(p["post_padding"]), _out(op),
                                      average_count_excludes_padding=excl)).results[0]]
    return lower


def _resize(ctx, op, ins):
    p = op.params
    shape = ins[1] if len(ins) > 1 else None
    scales = None if shape is not None else [float(s) for s in p["scales"]]
    coords = "kALIGN_CORNERS" if p["align_corners"] else "kHALF_PIXEL"
    if op.kind == "resize_nearest":
        new = trt.ResizeNearestOp(ins[0], _out(op), output_shape=shape, scales=scales)
    elif op.kind == "resize_linear":
        new = trt.ResizeLinearOp(ins[0], _out(op), output_shape=shape, coordinate_transformation=coords,
                                 scales=scales)
    else:
        new = trt.ResizeCubicOp(ins[0], _out(op), output_shape=shape, coordinate_transformation=coords,
                                cubic_coeff=-0.75, scales=scales)
    return [ctx.add(new).results[0]]


def _quant(cls):
    def lower(ctx, op, ins):
        return [ctx.add(cls(ins[0], ins[1], _out(op), axis=op.params["dim"])).results[0]]
    return lower


def creator_param(value):
    """A plugin field value as an MLIR attribute: int -> i32, float -> f32, str, tuple of ints (Dims) ->
    ``array<i64>``, list of ints / floats -> dense i32 / f32 elements."""
    if isinstance(value, bool):
        return int_attr(int(value), "i32")
    if isinstance(value, (int, np.integer)):
        return int_attr(int(value), "i32")
    if isinstance(value, (float, np.floating)):
        return f32_attr(float(value))
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, tuple) and all(isinstance(v, (int, np.integer)) for v in value):
        return dense_array([int(v) for v in value], "i64")
    if isinstance(value, (list, np.ndarray)):
        arr = np.asarray(value)
        if arr.dtype.kind in "iub":
            return dense_elements(arr.astype(np.int32), "i32")
        if arr.dtype.kind == "f":
            return dense_elements(arr.astype(np.float32), "f32")
    raise TypeError(f"unsupported plugin field value {value!r}")


def _plugin(ctx, op, ins):
    p = op.params
    params = {k: creator_param(v) for k, v in p["fields"].items()}
    new = trt.OpaquePluginOp(list(ins), [_out(op, i) for i in range(len(op.outputs))], p["name"],
                             plugin_version=p["version"], plugin_namespace=p["namespace"], creator_params=params)
    return list(ctx.add(new).results)


LOWERING_NN: dict[str, Callable] = {
    "slice_fill": _padded_slice("kFILL"),
    "slice_reflect": _padded_slice("kREFLECT"),
    "top_k_max": _top_k("kMAX"),
    "top_k_min": _top_k("kMIN"),
    "instance_norm": _instance_norm,
    "conv": _conv(trt.ConvolutionOp),
    "deconv": _conv(trt.DeconvolutionOp),
    "max_pool": _pool("kMAX"),
    "avg_pool": _pool("kAVERAGE"),
    "resize_nearest": _resize,
    "resize_linear": _resize,
    "resize_cubic": _resize,
    "quantize": _quant(trt.QuantizeOp),
    "dequantize": _quant(trt.DequantizeOp),
    "plugin": _plugin,
}
