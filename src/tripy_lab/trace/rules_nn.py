"""Shape rules for the op-table rows added with the full Tripy API: padded slices, top-k, normalization,
convolution, pooling, resize, quantization and plugins. Each rule maps (inputs, params) to
[(shape, dtype), ...]; None in a shape is a dim known only at run time.
"""

from __future__ import annotations

import math

from tripy_lab.core import dtypes


def _shape_value(t) -> tuple:
    """A 1-D shape tensor's entries where known (folded value or partly-known entries), else all None."""
    if t.value is not None:
        return tuple(int(v) for v in t.value.reshape(-1))
    if t.known is not None:
        return tuple(t.known)
    return (None,) * (t.shape[0] or 0)


def padded_slice(ins, p):
    return [(_shape_value(ins[2]), ins[0].dtype)]


def top_k(ins, p):
    shape = list(ins[0].shape)
    shape[p["dim"]] = p["k"]
    return [(tuple(shape), ins[0].dtype), (tuple(shape), dtypes.int32)]


def same(ins, p):
    return [(ins[0].shape, ins[0].dtype)]


def _window(d, k, stride, pre, post, dil=1, transposed=False):
    if d is None or k is None:
        return None
    if transposed:
        return (d - 1) * stride - pre - post + dil * (k - 1) + 1
    return (d + pre + post - dil * (k - 1) - 1) // stride + 1


def conv(ins, p):
    x, w = ins[0].shape, ins[1].shape
    spatial = tuple(_window(d, k, s, a, b, dl) for d, k, s, a, b, dl in
                    zip(x[2:], w[2:], p["stride"], p["pre_padding"], p["post_padding"], p["dilation"]))
    return [((x[0], w[0]) + spatial, ins[0].dtype)]


def deconv(ins, p):
    x, w = ins[0].shape, ins[1].shape
    spatial = tuple(_window(d, k, s, a, b, dl, transposed=True) for d, k, s, a, b, dl in
                    zip(x[2:], w[2:], p["stride"], p["pre_padding"], p["post_padding"], p["dilation"]))
    out_c = None if w[1] is None else w[1] * p["groups"]
    return [((x[0], out_c) + spatial, ins[0].dtype)]


def pool(ins, p):
    x = ins[0].shape
    spatial = tuple(_window(d, k, s, a, b) for d, k, s, a, b in
                    zip(x[2:], p["window"], p["stride"], p["pre_padding"], p["post_padding"]))
    return [(x[:2] + spatial, ins[0].dtype)]


def resize(ins, p):
    if len(ins) > 1:
        return [(_shape_value(ins[1]), ins[0].dtype)]
    scales = p["scales"]
    return [(tuple(None if d is None else int(math.floor(d * s)) for d, s in zip(ins[0].shape, scales)),
             ins[0].dtype)]


def quant(ins, p):
    return [(ins[0].shape, p["dtype"])]


def plugin(ins, p):
    return [((None,) * rank, dt) for rank, dt in p["output_info"]]
