"""Layer-like ops: tril, triu, outer, iota_like, resize, maxpool, avgpool, and plugin."""

from __future__ import annotations

import numpy as np

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_init, ops_math, ops_shape, shapes
from tripy_lab.frontend.build import make, make1, scalar_constant
from tripy_lab.frontend.checks import (
    ALL9,
    FLOAT,
    NUMERIC_B,
    check_dtype,
    check_int,
    check_same_dtype,
    check_tensor,
)
from tripy_lab.frontend.tensor import DimensionSize, Tensor

POOL_DTYPES = (D.float32, D.bfloat16, D.float16, D.int8)
RESIZE_DTYPES = (D.float32, D.float16, D.int8)
RESIZE_MODES = ("nearest", "linear", "cubic")


def _overload_error(fn: str, param: str, expected: str, value) -> None:
    raise_error(f"Could not find an implementation for function: '{fn}'.",
                [f"For parameter: '{param}', expected an instance of type: '{expected}' "
                 f"but got argument of type: '{type(value).__name__}'."])


# ---- tril / triu ----
def _tri(fn: str, tensor, diagonal, lower: bool) -> Tensor:
    check_tensor(fn, "tensor", tensor)
    check_dtype(fn, "tensor", tensor, NUMERIC_B)
    diagonal = check_int(fn, "diagonal", diagonal)
    if tensor.rank < 2:
        raise_error(f"Input must have a rank of at least 2 for {fn}.", [f"Got rank: {tensor.rank}."])
    last2 = shapes.shape_dims(tensor)[-2:]
    rows = ops_init.iota(last2, 0, D.int32)
    cols = ops_init.iota(last2, 1, D.int32)
    shifted = ops_math.add(rows, diagonal)
    keep = ops_math.ge(shifted, cols) if lower else ops_math.le(shifted, cols)
    zero = scalar_constant(False if tensor.dtype is D.bool else 0, tensor.dtype)
    # ``where`` itself refuses bool data; select does not, so make the trace op directly.
    return make1("where", ops_math.match_ranks(keep, tensor, zero))


def tril(tensor, diagonal: int = 0) -> Tensor:
    """Keep elements on and below the ``diagonal``-th diagonal of the last two dims; zero the rest."""
    return _tri("tril", tensor, diagonal, lower=True)


def triu(tensor, diagonal: int = 0) -> Tensor:
    """Keep elements on and above the ``diagonal``-th diagonal of the last two dims; zero the rest."""
    return _tri("triu", tensor, diagonal, lower=False)


# ---- outer, iota_like ----
def outer(vec1, vec2) -> Tensor:
    """(m,) x (n,) -> (m, n): ``vec1[:, None] @ vec2[None, :]``."""
    check_tensor("outer", "vec1", vec1)
    check_tensor("outer", "vec2", vec2)
    check_dtype("outer", "vec1", vec1, FLOAT)
    check_same_dtype("outer", ("vec1", "vec2"), (vec1, vec2))
    if vec1.rank != 1 or vec2.rank != 1:
        raise_error("Expected input vectors to be 1D.", [f"Got ranks: {vec1.rank} and {vec2.rank}."])
    return ops_math.matmul(ops_shape.unsqueeze(vec1, -1), ops_shape.unsqueeze(vec2, 0))


def iota_like(input, dim: int = 0, dtype=None) -> Tensor:  # noqa: A002 - tripy's parameter name
    """0, 1, 2, ... along ``dim`` with ``input``'s shape (and dtype unless given)."""
    check_tensor("iota_like", "input", input)
    check_int("iota_like", "dim", dim)
    dtype = input.dtype if dtype is None else dtype
    if dtype not in ALL9:
        raise_error("Invalid inputs for function: 'iota_like'.",
                    [f"Expected: 'dtype' to be one of [{', '.join(d.name for d in ALL9)}], but got: {dtype!r}."])
    if input.rank == 0:
        raise_error("Input must have at least 1 dimension.", ["iota_like counts along one of the input's dims."])
    return ops_init.iota(shapes.shape_dims(input), dim, dtype)


# ---- resize ----
def _classify_resize_arg(value) -> str:
    """'output_shape', 'scales' or 'ambiguous' for a positional second argument of resize."""
    if isinstance(value, Tensor) and not isinstance(value, DimensionSize):
        return "output_shape"
    if not isinstance(value, (list, tuple)):
        _overload_error("resize", "output_shape", "Sequence[IntLike] | Sequence[Number]", value)
    if any(isinstance(v, DimensionSize) for v in value):
        return "output_shape"
    if any(isinstance(v, (float, np.floating)) for v in value):
        return "scales"
    return "ambiguous"


def resize(input, *args, **kwargs) -> Tensor:  # noqa: A002
    """Two overloads: ``resize(input, output_shape=..., mode="linear", align_corners=False)`` and
    ``resize(input, scales=..., mode="linear", align_corners=False)``; pass the keyword, since a list
    of ints matches both."""
    check_tensor("resize", "input", input)
    extra = set(kwargs) - {"output_shape", "scales", "mode", "align_corners"}
    if extra:
        raise_error("Could not find an implementation for function: 'resize'.",
                    [f"Unexpected keyword arguments: {sorted(extra)}."])
    if "output_shape" in kwargs and "scales" in kwargs:
        raise_error("Could not find an implementation for function: 'resize'.",
                    ["Pass either 'output_shape' or 'scales', not both."])
    args = list(args)
    if "output_shape" in kwargs or "scales" in kwargs:
        form = "output_shape" if "output_shape" in kwargs else "scales"
        target = kwargs[form]
    elif args:
        target = args.pop(0)
        form = _classify_resize_arg(target)
        if form == "ambiguous":
            raise_error("Ambiguous overload for function: 'resize'.",
                        [f"The argument {target!r} matches both 'output_shape: ShapeLike' and 'scales: "
                         "Sequence[Number]'.",
                         "Note: use keyword arguments to disambiguate: resize(input, output_shape=...) or "
                         "resize(input, scales=...)."])
    else:
        raise_error("Could not find an implementation for function: 'resize'.",
                    ["Missing argument: 'output_shape' or 'scales'."])
    names = ["mode", "align_corners"]
    if len(args) > len(names):
        raise_error("Could not find an implementation for function: 'resize'.", ["Too many positional arguments."])
    opts = {"mode": "linear", "align_corners": False}
    opts.update(dict(zip(names, args)))
    for k in names:
        if k in kwargs:
            if k in dict(zip(names, args)):
                raise_error("Could not find an implementation for function: 'resize'.",
                            [f"Got multiple values for argument: '{k}'."])
            opts[k] = kwargs[k]
    return _resize(input, form, target, opts["mode"], opts["align_corners"])


def _resize(input, form: str, target, mode, align_corners) -> Tensor:  # noqa: A002
    check_dtype("resize", "input", input, RESIZE_DTYPES)
    if not isinstance(mode, str):
        _overload_error("resize", "mode", "str", mode)
    if not isinstance(align_corners, bool):
        _overload_error("resize", "align_corners", "bool", align_corners)
    if mode not in RESIZE_MODES:
        raise_error("Unsupported resize mode.", [f"Got mode: {mode!r}; supported modes: {list(RESIZE_MODES)}."])
    if align_corners and mode == "nearest":
        raise_error("align_corners can only be set with `cubic` or `linear` mode.", [f"Got mode: {mode!r}."])
    inner = 2 if mode == "cubic" else 3
    if mode == "cubic" and input.rank < 2:
        raise_error("Cubic resize needs an input of rank at least 2.", [f"Got rank: {input.rank}."])
    static = input.trace_tensor.shape
    params = {"align_corners": align_corners, "scales": None}
    if form == "scales":
        if not isinstance(target, (list, tuple)) or not all(
                isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in target):
            _overload_error("resize", "scales", "Sequence[Number]", target)
        if len(target) != input.rank:
            raise_error("`scales` must have one entry per input dim.",
                        [f"Got {len(target)} scales for an input of rank {input.rank}."])
        if any(v <= 0 for v in target):
            raise_error("`scales` must be positive.", [f"Got: {list(target)}."])
        if any(float(v) != 1.0 for v in target[:max(0, input.rank - inner)]):
            raise_error(f"Resize in mode {mode!r} can only scale the innermost {inner} dims.",
                        [f"Got scales: {list(target)}; the leading entries must be 1."])
        params["scales"] = tuple(float(v) for v in target)
        return make1(f"resize_{mode}", [input], params)
    shape_t = shapes.shape_tensor(target, "output_shape")
    length = shape_t.trace_tensor.shape[0]
    if length != input.rank:
        raise_error("`output_shape` must have one entry per input dim.",
                    [f"Got {length} entries for an input of rank {input.rank}."])
    wanted = shape_t.trace_tensor.known or (
        tuple(int(v) for v in shape_t.trace_tensor.value) if shape_t.trace_tensor.value is not None else None)
    if wanted is not None:
        for i in range(max(0, input.rank - inner)):
            if wanted[i] is not None and static[i] is not None and wanted[i] != static[i]:
                raise_error(f"Resize in mode {mode!r} can only change the innermost {inner} dims.",
                            [f"Dim {i} would change from {static[i]} to {wanted[i]}."])
    return make1(f"resize_{mode}", [input, shape_t], params)


# ---- pooling ----
def _ints(fn: str, param: str, value) -> list[int]:
    if not isinstance(value, (list, tuple)):
        _overload_error(fn, param, "Sequence[int]", value)
    return [check_int(fn, param, v) for v in value]


def _pool(fn: str, kind: str, input, kernel_dims, stride, padding, count_include_pad: bool = True):  # noqa: A002
    check_tensor(fn, "input", input)
    check_dtype(fn, "input", input, POOL_DTYPES)
    kernel = _ints(fn, "kernel_dims", kernel_dims)
    n = len(kernel)
    if n not in (2, 3):
        raise_error("Unsupported kernel_dims, must be 2D or 3D.", [f"Got kernel_dims: {kernel}."])
    if input.rank != n + 2:
        raise_error(f"Input must have a rank of {n + 2} for {n}D pooling.",
                    [f"Expected (N, C, {', '.join('DHW'[3 - n:])}), got a tensor of rank {input.rank}."])
    strides = [1] * n if stride is None else _ints(fn, "stride", stride)
    if len(strides) != n:
        raise_error("Stride must have the same length as kernel_dims.",
                    [f"Got stride: {strides}, kernel_dims: {kernel}."])
    if any(s <= 0 for s in strides):
        raise_error("Stride must be positive.", [f"Got stride: {strides}."])
    if any(k <= 0 for k in kernel):
        raise_error("kernel_dims must be positive.", [f"Got kernel_dims: {kernel}."])
    pads = [(0, 0)] * n if padding is None else padding
    if not isinstance(pads, (list, tuple)) or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pads):
        _overload_error(fn, "padding", "Sequence[Tuple[int, int]]", padding)
    pads = [(check_int(fn, "padding", a), check_int(fn, "padding", b)) for a, b in pads]
    if len(pads) != n:
        raise_error("Padding must have the same length as kernel_dims.",
                    [f"Got padding: {pads}, kernel_dims: {kernel}."])
    if any(a < 0 or b < 0 for a, b in pads):
        raise_error("Padding must be non-negative.", [f"Got padding: {pads}."])
    if not isinstance(count_include_pad, bool):
        _overload_error(fn, "count_include_pad", "bool", count_include_pad)
    if kind == "avg_pool" and input.dtype is D.int8 and not count_include_pad:
        raise_error("`count_include_pad` must be `True` when input datatype is int8.")
    params = {"window": tuple(kernel), "stride": tuple(strides), "pre_padding": tuple(a for a, _ in pads),
              "post_padding": tuple(b for _, b in pads)}
    if kind == "avg_pool":
        params["exclude_padding"] = not count_include_pad
    return make1(kind, [input], params)


def maxpool(input, kernel_dims, stride=None, padding=None) -> Tensor:  # noqa: A002
    """Max over windows of the spatial dims of an (N, C, H, W) or (N, C, D, H, W) tensor."""
    return _pool("maxpool", "max_pool", input, kernel_dims, stride, padding)


def avgpool(input, kernel_dims, stride=None, padding=None, count_include_pad: bool = True) -> Tensor:  # noqa: A002
    """Average over windows; ``count_include_pad=False`` leaves padded cells out of the count."""
    return _pool("avgpool", "avg_pool", input, kernel_dims, stride, padding, count_include_pad)


# ---- plugin ----
def _field_ok(value) -> bool:
    if isinstance(value, (bool, int, float, str, np.integer, np.floating)):
        return True
    if isinstance(value, tuple):
        return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in value)
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in value)
    return False


def plugin(name, inputs, output_info=None, version: str = "1", namespace: str = "", **kwargs):
    """Call a TensorRT plugin: ``plugin(name, inputs, output_info, version="1", namespace="", **fields)``
    lowers to ``tensorrt.opaque_plugin``; only the tensorrt engine can run it. The quickly-deployable
    form ``plugin("namespace::name", inputs, **attrs)`` is not supported (its outputs come from
    TensorRT's plugin registry)."""
    if not isinstance(name, str):
        _overload_error("plugin", "name", "str", name)
    if not isinstance(inputs, (list, tuple)):
        _overload_error("plugin", "inputs", "Sequence[Tensor]", inputs)
    for i, t in enumerate(inputs):
        check_tensor("plugin", f"inputs[{i}]", t)
    if output_info is None:
        if "::" not in name:
            raise_error(f"Invalid plugin ID: '{name}'.",
                        ["Quickly deployable plugins are named '<namespace>::<name>'; TensorRT plugins need "
                         "`output_info`."])
        raise_error("Quickly deployable (QDP) plugins are not supported by tripy-lab.",
                    [f"Plugin: '{name}'. Their output ranks and dtypes come from TensorRT's Python plugin registry, "
                     "which tripy-lab does not consult.",
                     "Call plugin(name, inputs, output_info=[(rank, dtype), ...], ...) for a registered "
                     "TensorRT plugin instead; it runs on the tensorrt engine."])
    if not isinstance(output_info, (list, tuple)) or not output_info or not all(
            isinstance(o, (list, tuple)) and len(o) == 2 and isinstance(o[0], int) and o[0] >= 0
            and isinstance(o[1], D.dtype) for o in output_info):
        _overload_error("plugin", "output_info", "List[Tuple[int, tripy.dtype]]", output_info)
    for key, value in kwargs.items():
        if not _field_ok(value):
            raise_error(f"Plugin: {name} (version={version}, namespace={namespace}) Invalid value provided for "
                        f"field: {key}",
                        [f"Got: {value!r}. Fields take ints, floats, strings, tuples of ints (Dims) or lists of "
                         "numbers."])
    params = {"name": name, "version": str(version), "namespace": str(namespace),
              "output_info": tuple((int(r), dt) for r, dt in output_info), "fields": dict(kwargs)}
    outs = make("plugin", list(inputs), params)
    return outs[0] if len(outs) == 1 else list(outs)
