"""What the lowering knows at build time about the small integer tensors shape arithmetic makes.

A shape vector is "partly known": ``tensorrt.shape`` of an [1, T, 768] tensor is [1, ?, 768] for every shape
of the profile (the MLIR type says which dims are static). Each ONNX node the lowering emits on such values
is evaluated here, element by element: a node whose result is fully known becomes an initializer instead of
a node onnxruntime runs on every call (``Shape -> Cast -> Slice -> Squeeze -> Concat -> Cast`` per reshape:
GPT-2 small had about 800 of them), and ``tensorrt.reshape`` to a vector with one unknown entry uses -1
for it (``reshape_target``). Only element-preserving and element-wise integer ops are evaluated; anything
else is simply not known, so the graph stays as the op table wrote it.

A partial value is ``(values, known, syms)``: numpy arrays of the tensor's shape (values int64 or bool;
syms: None or (``dims.DimClasses`` key, offset): the unknown entry is that dynamic dim + offset).
"""

from __future__ import annotations

import numpy as np

MAX_ELEMENTS = 64  # shape vectors, not data
_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Max": np.maximum, "Min": np.minimum,
           "Equal": np.equal, "Less": np.less, "Greater": np.greater, "And": np.logical_and,
           "Or": np.logical_or}
_ONNX_INT = {6: np.int32, 7: np.int64, 9: np.bool_}  # TensorProto INT32, INT64, BOOL


def _none(shape) -> np.ndarray:
    return np.full(shape, None, object)


def of_array(array: np.ndarray):
    """The partial value of a constant, or None for anything but a small integer or bool array."""
    if array.size > MAX_ELEMENTS or not (np.issubdtype(array.dtype, np.integer) or array.dtype == np.bool_):
        return None
    return (array.astype(np.int64 if array.dtype != np.bool_ else np.bool_), np.ones(array.shape, bool),
            _none(array.shape))


def of_shape(dims, syms=None):
    """``Shape`` of a tensor whose static dims are ints and dynamic ones None; ``syms``: what names each
    dynamic dim (``dims.DimClasses`` keys), carried through the ops that only move elements."""
    syms_arr = _none(len(dims))
    for d, s in enumerate(syms or ()):
        syms_arr[d] = None if s is None else (s, 0)
    return (np.asarray([d or 0 for d in dims], np.int64).reshape(-1),
            np.asarray([d is not None for d in dims], bool).reshape(-1), syms_arr)


def unknown_scalar_vector(sym):
    """A [1] vector of one dynamic dim named ``sym``."""
    syms = _none(1)
    syms[0] = (sym, 0)
    return np.zeros(1, np.int64), np.zeros(1, bool), syms


def full(partial) -> np.ndarray | None:
    return partial[0] if partial is not None and bool(np.all(partial[1])) else None


def _each(partial, fn):
    try:
        return tuple(fn(a) for a in partial)
    except (ValueError, IndexError):
        return None


def evaluate(op_type: str, ins: list, attrs: dict):
    """The partial value of the (single) output of ``op_type`` on inputs' partial values (None: unknown)."""
    if not ins or ins[0] is None:
        return None
    p, rest = ins[0], ins[1:]
    v = p[0]
    consts = [full(q) for q in rest]
    if op_type == "Identity":
        return p
    if op_type == "Cast" and attrs.get("to") in _ONNX_INT:
        return (v.astype(_ONNX_INT[attrs["to"]]).astype(np.bool_ if attrs["to"] == 9 else np.int64), p[1], p[2])
    if op_type in ("Squeeze", "Unsqueeze", "Reshape"):
        if any(c is None for c in consts):
            return None
        axes = [int(a) for a in (consts[0] if consts else attrs.get("axes", ()))]
        if op_type == "Reshape":
            shape = [d if d != 0 or attrs.get("allowzero") else v.shape[i] for i, d in enumerate(consts[0])]
        elif op_type == "Squeeze":
            shape = [d for i, d in enumerate(v.shape) if i not in {a % v.ndim for a in axes}] if axes else \
                [d for d in v.shape if d != 1]
        else:
            shape = list(v.shape)
            for a in sorted(a % (v.ndim + len(axes)) for a in axes):
                shape.insert(a, 1)
        return _each(p, lambda a: a.reshape(shape))
    if op_type == "Concat":
        if any(q is None for q in rest):
            return None
        axis = int(attrs.get("axis", 0))
        try:
            return tuple(np.concatenate([q[i] for q in [p, *rest]], axis) for i in range(3))
        except ValueError:
            return None
    if op_type == "Slice" and v.ndim == 1:
        if len(consts) < 2 or any(c is None for c in consts):
            return None
        starts, ends = consts[0], consts[1]
        steps = consts[3] if len(consts) > 3 else np.ones_like(starts)
        if len(starts) != 1 or (len(consts) > 2 and int(consts[2][0]) not in (0, -1)):
            return None
        s = slice(int(starts[0]), None if int(ends[0]) <= -(2**62) else int(ends[0]), int(steps[0]))
        return _each(p, lambda a: a[s])
    if op_type == "Gather" and v.ndim == 1 and consts and consts[0] is not None and int(attrs.get("axis", 0)) == 0:
        idx = consts[0]
        if np.any((idx >= len(v)) | (idx < -len(v))):
            return None
        return _each(p, lambda a: a[idx])
    if op_type in _BINARY and len(rest) == 1 and rest[0] is not None:
        w, j = rest[0][0], rest[0][1]
        try:
            shape = np.broadcast_shapes(v.shape, w.shape)
            out = _BINARY[op_type](v, w), np.broadcast_to(p[1] & j, shape), _none(shape)
        except ValueError:
            return None
        if op_type in ("Add", "Sub") and consts[0] is not None and consts[0].size == 1 and v.shape == shape:
            c = int(consts[0].reshape(-1)[0]) * (1 if op_type == "Add" else -1)  # dim + c: still that dim, offset
            for i, s in np.ndenumerate(p[2]):
                out[2][i] = None if s is None else (s[0], s[1] + c)
        return out
    if op_type == "Not":
        return ~v, p[1], _none(v.shape)
    return None


def reshape_target(partial) -> list[int] | None:
    """A Reshape shape with at most one unknown entry (-1) and no zeros, or None."""
    if partial is None or partial[0].ndim != 1:
        return None
    values, known = partial[0], partial[1]
    if int((~known).sum()) > 1 or np.any((values <= 0) & known):
        return None
    return [int(x) if kn else -1 for x, kn in zip(values, known)]
