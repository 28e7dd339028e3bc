"""Shape and layout ops: reshape, permute, transpose, flatten, squeeze, unsqueeze, expand,
concatenate, stack and gather (``__getitem__`` is in ops_index.py)."""

from __future__ import annotations

import math

import numpy as np

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import shapes
from tripy_lab.frontend.build import make1
from tripy_lab.frontend.checks import ALL9, check_dtype, check_sequence, check_tensor, norm_dim, norm_dims
from tripy_lab.frontend.tensor import Tensor
from tripy_lab.trace.optable import record

_tensor = Tensor._wrap

NOT_F8 = tuple(d for d in ALL9 if d is not D.float8)
BASIC = (D.float32, D.float16, D.bfloat16, D.int8, D.int32, D.int64, D.bool)


def dims_of(t: Tensor) -> list:
    return shapes.shape_dims(t)


def _product(values):
    # Start from the first value, not 1, so a DimensionSize product has no `1 *` op.
    values = list(values)
    if not values:
        return 1
    out = values[0]
    for v in values[1:]:
        out = out * v
    return out


def _reshape_raw(t: Tensor, dims) -> Tensor:
    return make1("reshape", [t, shapes.shape_tensor(list(dims))])


def prepend_ones(t: Tensor, count: int) -> Tensor:
    tt = t.trace_tensor
    op = tt.producer
    if (op is not None and op.kind == "constant" and not tt.is_shape and tt.name.startswith("%t")
            and isinstance(op.params.get("value"), np.ndarray) and op.params["value"].size == 1):
        # a number made into a 0-d constant (``x * tp.Tensor(2.0)``, or ``2.0`` by the general path): one constant
        # of the new rank, as ``scalar_constant`` makes for ``x * 2.0``, not a constant and a reshape
        value = op.params["value"].reshape((1,) * (count + tt.rank))
        return _tensor(record("constant", [], value.shape, tt.dtype, {"value": value, "dtype": tt.dtype},
                              op.location))
    return _reshape_raw(t, [1] * count + dims_of(t))


def reshape(input, shape) -> Tensor:  # noqa: A002 - tripy's parameter name
    """Same data, new shape; one -1 is inferred from the volume."""
    check_tensor("reshape", "input", input)
    check_dtype("reshape", "input", input, NOT_F8)
    if not isinstance(shape, (list, tuple)):
        raise_error("Invalid value for parameter: 'shape' of 'reshape'.",
                    [f"Expected a sequence of ints or DimensionSizes, but got: {shape!r}."])
    shape = list(shape)
    inferred = [i for i, v in enumerate(shape) if isinstance(v, int) and not isinstance(v, bool) and v == -1]
    if len(inferred) > 1:
        raise_error("The new shape can have at most one inferred dimension (denoted by -1)",
                    [f"Got shape: {shape}."])
    if inferred:
        others = [v for i, v in enumerate(shape) if i != inferred[0]]
        rest = _product(others)
        old = input.trace_tensor.shape
        static = math.prod(d for d in old if d is not None)
        unknown = [i for i, d in enumerate(old) if d is None]
        if len(unknown) == 1 and isinstance(rest, int) and rest and rest == static:
            dynamic = [shapes.DimOf(input, unknown[0])]  # (?, 4, 8) -> (-1, 32): the -1 is that dim, read once
        else:
            dynamic = [shapes.dim(input, i) for i in unknown]
        if not dynamic and isinstance(rest, int):
            if rest == 0 or static % rest:
                raise_error("Cannot reshape: the volume is not divisible by the other dims.",
                            [f"Input shape {input.shape} has volume {static}; new shape {shape}."])
            shape[inferred[0]] = static // rest
        elif isinstance(rest, int) and rest and static % rest == 0:
            # (?, 4, 8) -> (-1, 16): the dynamic dims times 32 // 16, with no `* 4 * 8 // 16` ops to trace and lower
            factor = static // rest
            shape[inferred[0]] = _product(dynamic + ([factor] if factor != 1 else []))
        else:
            shape[inferred[0]] = _product(dynamic + ([static] if static != 1 else [])) // rest
    known = [int(v) for v in shape if isinstance(v, int)]
    if any(v < 0 for v in known):
        raise_error("Invalid value for parameter: 'shape' of 'reshape'.",
                    [f"Dims must be non-negative (or a single -1), but got: {shape}."])
    old = input.trace_tensor.shape
    if all(isinstance(v, int) for v in shape) and None not in old and math.prod(old) != math.prod(shape):
        raise_error("Cannot reshape: volumes differ.",
                    [f"Input shape {tuple(old)} has {math.prod(old)} elements; shape {tuple(shape)} has "
                     f"{math.prod(shape)}."])
    return _reshape_raw(input, shape)


def permute(input, perm) -> Tensor:  # noqa: A002
    """Reorder dims: result dim i is input dim perm[i]."""
    check_tensor("permute", "input", input)
    check_dtype("permute", "input", input, NOT_F8)
    perm = check_sequence("permute", "perm", perm)
    if sorted(perm) != list(range(input.rank)):
        raise_error("Invalid permutation.", [f"Expected a permutation of [0, {input.rank}), but got: {perm}."])
    return make1("permute", [input], {"perm": tuple(perm)})


def transpose(input, dim0: int, dim1: int) -> Tensor:  # noqa: A002
    check_tensor("transpose", "input", input)
    check_dtype("transpose", "input", input, BASIC)
    if input.rank < 2:
        raise_error("Transpose input must have at least 2 dimensions.", [f"Got rank: {input.rank}."])
    a = norm_dim("transpose", dim0, input.rank, "dim0")
    b = norm_dim("transpose", dim1, input.rank, "dim1")
    perm = list(range(input.rank))
    perm[a], perm[b] = perm[b], perm[a]
    return permute(input, perm)


def flatten(input, start_dim: int = 0, end_dim: int = -1) -> Tensor:  # noqa: A002
    check_tensor("flatten", "input", input)
    if input.rank == 0:
        return reshape(input, (1,))
    start = norm_dim("flatten", start_dim, input.rank, "start_dim")
    end = norm_dim("flatten", end_dim, input.rank, "end_dim")
    if start > end:
        raise_error("`start_dim` cannot be larger than `end_dim`.", [f"Got start_dim={start}, end_dim={end}."])
    dims = dims_of(input)
    return _reshape_raw(input, dims[:start] + [_product(dims[start:end + 1])] + dims[end + 1:])


def squeeze(input, dims) -> Tensor:  # noqa: A002
    check_tensor("squeeze", "input", input)
    check_dtype("squeeze", "input", input, BASIC)
    drop = norm_dims("squeeze", dims, input.rank) if dims not in ((), []) else []
    for d in drop:
        size = input.trace_tensor.shape[d]
        if size is not None and size != 1:
            raise_error("Cannot squeeze a dimension whose size is not 1.", [f"Dim {d} has size {size}."])
    if not drop:
        return input
    return _reshape_raw(input, [v for i, v in enumerate(dims_of(input)) if i not in drop])


def unsqueeze(input, dim: int) -> Tensor:  # noqa: A002
    check_tensor("unsqueeze", "input", input)
    check_dtype("unsqueeze", "input", input, BASIC)
    d = norm_dim("unsqueeze", dim, input.rank + 1)
    dims = dims_of(input)
    return _reshape_raw(input, dims[:d] + [1] + dims[d:])


def expand(input, sizes) -> Tensor:  # noqa: A002
    """Broadcast size-1 dims to ``sizes`` (-1 keeps a dim; extra leading entries add dims)."""
    check_tensor("expand", "input", input)
    check_dtype("expand", "input", input, (D.float32, D.float16, D.bfloat16, D.int32, D.int64, D.bool))
    sizes = check_sequence("expand", "sizes", sizes, "IntLike", intlike=True)
    if len(sizes) < input.rank:
        raise_error("The length of `sizes` must be greater or equal to input tensor's rank.",
                    [f"Got {len(sizes)} sizes for a tensor of rank {input.rank}."])
    extra = len(sizes) - input.rank
    dims = dims_of(input)
    out = []
    for i, s in enumerate(sizes):
        if isinstance(s, int) and s == -1:
            if i < extra:
                raise_error("Cannot use -1 for prepended dimension.", [f"Got sizes: {sizes}."])
            out.append(dims[i - extra])
        else:
            out.append(s)
    x = prepend_ones(input, extra) if extra else input
    return make1("broadcast", [x, shapes.shape_tensor(out)])


def broadcast_to(t: Tensor, dims) -> Tensor:
    return make1("broadcast", [t, shapes.shape_tensor(list(dims))])


def concatenate(tensors, dim: int) -> Tensor:
    """Join along ``dim``."""
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise_error("Expected a non-empty list of tensors for parameter: 'tensors'.", [f"Got: {tensors!r}."])
    for i, t in enumerate(tensors):
        check_tensor("concatenate", f"tensors[{i}]", t)
    if len(tensors) == 1:
        return tensors[0]
    if len({t.rank for t in tensors}) != 1:
        raise_error("Concatenated tensors must have equal ranks.", [f"Got ranks: {[t.rank for t in tensors]}."])
    if len({t.dtype for t in tensors}) != 1:
        raise_error("Invalid inputs for function: 'concatenate'.",
                    [f"Expected all tensors to have the same data type, but got: {[str(t.dtype) for t in tensors]}."])
    d = norm_dim("concatenate", dim, tensors[0].rank)
    return make1("concatenate", list(tensors), {"dim": d})


def stack(tensors, dim: int = 0) -> Tensor:
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise_error("Expected a non-empty list of tensors for parameter: 'tensors'.", [f"Got: {tensors!r}."])
    for i, t in enumerate(tensors):
        check_tensor("stack", f"tensors[{i}]", t)
    if len({t.rank for t in tensors}) != 1:
        raise_error("Expected all input tensors to have the same rank.", [f"Got ranks: {[t.rank for t in tensors]}."])
    d = norm_dim("stack", dim, tensors[0].rank + 1)
    return concatenate([unsqueeze(t, d) for t in tensors], d)


def gather(input, dim: int, index) -> Tensor:  # noqa: A002
    """Like numpy.take: out shape = input.shape[:dim] + index.shape + input.shape[dim+1:]."""
    check_tensor("gather", "input", input)
    check_tensor("gather", "index", index)
    check_dtype("gather", "input", input, NOT_F8)
    check_dtype("gather", "index", index, (D.int32, D.int64))
    d = norm_dim("gather", dim, input.rank)
    return make1("gather", [input, index], {"dim": d})
