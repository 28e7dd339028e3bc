"""Reference (numpy) meaning of the layer ops: convolution, deconvolution, pooling, resize, quantize,
dequantize, shuffle, and opaque_plugin (which needs TensorRT). Entries have the signature of
``reference.TABLE``: ``(op, operand arrays, env, program) -> array or list of arrays``.

These are the test oracle, so each one is written for clarity: loops over kernel offsets, float64
accumulation, then one cast to the result type.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import ml_dtypes
import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.errors import TripyException
from tripy_lab.mlir.dialect import attr_value


def _np_dtype(op, i: int = 0) -> np.dtype:
    return dtypes.to_numpy(dtypes.BY_MLIR[str(op.results[i].type.element_type)])


def _operand_or_static(op, env, prog, operand: str, static: str):
    v = getattr(op, operand, None)
    if v is not None:
        return env[v]
    return attr_value(op, static, getattr(prog, "resources", None))


def _to_result(values: np.ndarray, dt) -> np.ndarray:
    if np.dtype(dt) == np.dtype(ml_dtypes.int4):
        return np.clip(np.rint(values), -8, 7).astype(dt)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        return np.clip(np.rint(values), info.min, info.max).astype(dt)
    return values.astype(dt)


# ---- convolution / deconvolution ----
def _conv_params(op, nsp):
    stride = tuple(attr_value(op, "stride"))
    pre = tuple(attr_value(op, "pre_padding"))
    post = tuple(attr_value(op, "post_padding"))
    dil = tuple(attr_value(op, "dilation") or (1,) * nsp)
    groups = int(attr_value(op, "num_groups") or 1)
    return stride, pre, post, dil, groups


def convolution(op, a, env, prog):
    x = a[0].astype(np.float64)
    w = np.asarray(_operand_or_static(op, env, prog, "kernel", "kernelStatic")).astype(np.float64)
    b = _operand_or_static(op, env, prog, "bias", "biasStatic")
    nsp = x.ndim - 2
    stride, pre, post, dil, g = _conv_params(op, nsp)
    n, c = x.shape[:2]
    k, ks = w.shape[0], w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(max(p, 0), max(q, 0)) for p, q in zip(pre, post)])
    # Negative padding crops.
    xp = xp[(slice(None), slice(None)) + tuple(slice(-min(p, 0), xp.shape[2 + i] + min(q, 0))
                                              for i, (p, q) in enumerate(zip(pre, post)))]
    out_sp = [(xp.shape[2 + i] - dil[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    xg = xp.reshape((n, g, c // g) + xp.shape[2:])
    wg = w.reshape((g, k // g, c // g) + ks)
    out = np.zeros((n, g, k // g) + tuple(out_sp))
    for kidx in np.ndindex(*ks):
        window = tuple(slice(kk * d, kk * d + s * (o - 1) + 1, s) for kk, d, s, o in zip(kidx, dil, stride, out_sp))
        patch = xg[(slice(None),) * 3 + window]
        out += np.einsum("ngc...,gkc->ngk...", patch, wg[(slice(None),) * 3 + kidx])
    out = out.reshape((n, k) + tuple(out_sp))
    if b is not None:
        out = out + np.asarray(b).astype(np.float64).reshape((1, k) + (1,) * nsp)
    return _to_result(out, _np_dtype(op))


def deconvolution(op, a, env, prog):
    x = a[0].astype(np.float64)
    w = np.asarray(_operand_or_static(op, env, prog, "kernelWeights", "kernelWeightsStatic")).astype(np.float64)
    b = _operand_or_static(op, env, prog, "biasWeights", "biasWeightsStatic")
    nsp = x.ndim - 2
    stride, pre, post, dil, g = _conv_params(op, nsp)
    n, c = x.shape[:2]
    kg, ks = w.shape[1], w.shape[2:]
    sp = x.shape[2:]
    full_sp = [(sp[i] - 1) * stride[i] + dil[i] * (ks[i] - 1) + 1 for i in range(nsp)]
    xg = x.reshape((n, g, c // g) + sp)
    wg = w.reshape((g, c // g, kg) + ks)
    full = np.zeros((n, g, kg) + tuple(full_sp))
    for kidx in np.ndindex(*ks):
        window = tuple(slice(kk * d, kk * d + s * (i - 1) + 1, s) for kk, d, s, i in zip(kidx, dil, stride, sp))
        full[(slice(None),) * 3 + window] += np.einsum("ngc...,gck->ngk...", xg, wg[(slice(None),) * 3 + kidx])
    out = full[(slice(None),) * 3 + tuple(slice(p, f - q) for p, q, f in zip(pre, post, full_sp))]
    out = out.reshape((n, g * kg) + out.shape[3:])
    if b is not None:
        out = out + np.asarray(b).astype(np.float64).reshape((1, g * kg) + (1,) * nsp)
    return _to_result(out, _np_dtype(op))


# ---- pooling ----
def pooling(op, a, env, prog):
    x = a[0]
    kind = attr_value(op, "poolingType")
    win = tuple(attr_value(op, "windowSize"))
    stride = tuple(attr_value(op, "stride"))
    pre, post = tuple(attr_value(op, "prePadding")), tuple(attr_value(op, "postPadding"))
    nsp = len(win)
    lead = x.ndim - nsp
    pads = [(0, 0)] * lead + list(zip(pre, post))
    xf = x.astype(np.float64)
    mask = np.pad(np.ones(x.shape), pads)
    axes = tuple(range(lead, x.ndim))

    def windows(arr):
        view = np.lib.stride_tricks.sliding_window_view(arr, win, axis=axes)
        return view[(slice(None),) * lead + tuple(slice(None, None, s) for s in stride)]

    def pmax():
        return windows(np.pad(xf, pads, constant_values=-np.inf)).max(axis=tuple(range(-nsp, 0)))

    def pavg():
        total = windows(np.pad(xf, pads)).sum(axis=tuple(range(-nsp, 0)))
        if attr_value(op, "averageCountExcludesPadding") in (None, True):  # TensorRT's default: True
            return total / windows(mask).sum(axis=tuple(range(-nsp, 0)))
        return total / math.prod(win)

    if kind == "kMAX":
        res = pmax()
    elif kind == "kAVERAGE":
        res = pavg()
    else:  # kMAX_AVERAGE_BLEND
        blend = attr_value(op, "blendFactor")
        res = blend * pmax() + (1 - blend) * pavg()
    return _to_result(res, _np_dtype(op))


# ---- resize ----
def _coords(op, n_in: int, n_out: int, scale: float | None) -> np.ndarray:
    """Input coordinate of each output index along one dim."""
    y = np.arange(n_out, dtype=np.float64)
    if n_out == 1 and attr_value(op, "selectorForSinglePixel") == "kUPPER":
        return np.zeros(1)
    mode = attr_value(op, "coordinateTransformation")
    ratio = 1.0 / scale if scale else n_in / n_out
    if mode == "kALIGN_CORNERS":
        return y * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(1)
    if mode == "kASYMMETRIC":
        return y * ratio
    return (y + 0.5) * ratio - 0.5


def _cubic_weights(t: np.ndarray, coeff: float) -> list[np.ndarray]:
    def near(s):
        return ((coeff + 2) * s - (coeff + 3)) * s * s + 1

    def far(s):
        return ((coeff * s - 5 * coeff) * s + 8 * coeff) * s - 4 * coeff

    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _resize(method: str):
    def run(op, a, env, prog):
        x = a[0]
        shape_v = getattr(op, "output_shape", None)
        scales = attr_value(op, "scales")
        if shape_v is not None:
            out_shape, scales = tuple(int(v) for v in env[shape_v].reshape(-1)), None
        elif scales:
            out_shape = tuple(int(math.floor(d * s)) for d, s in zip(x.shape, scales))
        else:
            out_shape = tuple(op.results[0].type.get_shape())
        y = x.astype(np.float64)
        for d, (n_in, n_out) in enumerate(zip(x.shape, out_shape)):
            scale = float(scales[d]) if scales else None
            if n_in == n_out and (scale is None or scale == 1.0):
                continue
            c = _coords(op, n_in, n_out, scale)
            shape = [1] * y.ndim
            shape[d] = n_out
            if method == "nearest":
                rnd = attr_value(op, "nearestRounding")
                i = {"kFLOOR": np.floor, "kCEIL": np.ceil, "kHALF_UP": lambda v: np.floor(v + 0.5),
                     "kHALF_DOWN": lambda v: np.ceil(v - 0.5)}[rnd](c)
                y = np.take(y, np.clip(i, 0, n_in - 1).astype(np.int64), axis=d)
            elif method == "linear":
                c = np.clip(c, 0, n_in - 1)
                i0 = np.floor(c).astype(np.int64)
                i1 = np.minimum(i0 + 1, n_in - 1)
                f = (c - i0).reshape(shape)
                y = np.take(y, i0, axis=d) * (1 - f) + np.take(y, i1, axis=d) * f
            else:
                i0 = np.floor(c).astype(np.int64)
                weights = _cubic_weights(c - i0, float(attr_value(op, "cubicCoeff")))
                y = sum(np.take(y, np.clip(i0 + k, 0, n_in - 1), axis=d) * w.reshape(shape)
                        for k, w in zip(range(-1, 3), weights))
        return _to_result(y, _np_dtype(op))
    return run


# ---- quantize / dequantize ----
def _expand_scale(op, x_shape, scale: np.ndarray) -> np.ndarray:
    """The scale broadcast against the input: per-tensor, per-channel (``axis``) or block-wise."""
    scale = scale.astype(np.float64)
    axis = attr_value(op, "axis")
    if scale.ndim == 0:
        return scale
    if axis is not None:
        return scale.reshape(tuple(-1 if d == axis else 1 for d in range(len(x_shape))))
    for d, n in enumerate(x_shape):  # block-wise: each scale entry covers n // scale.shape[d] elements
        if scale.shape[d] != n:
            scale = np.repeat(scale, n // scale.shape[d], axis=d)
    return scale


_QRANGE = {"i8": (-128, 127), "i4": (-8, 7)}


def quantize(op, a, env, prog):
    x, scale = a[0], a[1]
    q = x.astype(np.float64) / _expand_scale(op, x.shape, scale)
    elem = str(op.results[0].type.element_type)
    if elem in _QRANGE:
        lo, hi = _QRANGE[elem]
        q = np.where(np.isnan(q), 0.0, np.clip(np.rint(q), lo, hi))  # nan -> 0 (docs/SEMANTICS.md)
    else:  # f8E4M3FN saturates at +-448 and rounds to nearest even
        q = np.clip(q, -448.0, 448.0)
    return q.astype(_np_dtype(op))


def dequantize(op, a, env, prog):
    x, scale = a[0], a[1]
    return (x.astype(np.float64) * _expand_scale(op, x.shape, scale)).astype(_np_dtype(op))


# ---- shuffle, plugin ----
def shuffle(op, a, env, prog):
    x = np.transpose(a[0], attr_value(op, "first_transpose"))
    dyn = getattr(op, "dynamic_reshape", None)
    target = env[dyn].reshape(-1).tolist() if dyn is not None else attr_value(op, "reshape")
    if target is not None:
        zero_copy = attr_value(op, "zero_is_placeholder")
        target = [x.shape[i] if (v == 0 and zero_copy) else int(v) for i, v in enumerate(target)]
        x = x.reshape(target)
    return np.transpose(x, attr_value(op, "second_transpose")).copy()


def opaque_plugin(op, a, env, prog):
    name = attr_value(op, "plugin_name")
    raise TripyException(f"plugins need TensorRT: the reference engine cannot run TensorRT plugin '{name}'.",
                         ["Plugins are compiled TensorRT code; build this program with engine='tensorrt' on a "
                          "machine with TensorRT and a CUDA GPU."])


TABLE_NN: dict[str, Callable] = {
    "tensorrt.convolution": convolution,
    "tensorrt.deconvolution": deconvolution,
    "tensorrt.pooling": pooling,
    "tensorrt.resize_nearest": _resize("nearest"),
    "tensorrt.resize_linear": _resize("linear"),
    "tensorrt.resize_cubic": _resize("cubic"),
    "tensorrt.quantize": quantize,
    "tensorrt.dequantize": dequantize,
    "tensorrt.shuffle": shuffle,
    "tensorrt.opaque_plugin": opaque_plugin,
}
