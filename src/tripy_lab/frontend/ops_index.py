"""Indexing and slicing-based ops: the full ``__getitem__``, split, flip, pad, repeat.

``t[index]`` becomes one ``slice`` (start/size/stride shape tensors, Python's rules: negative indices
wrap, out-of-range bounds clamp, negative steps walk backwards) followed by a reshape that drops
integer-indexed dims and inserts ``None`` dims; a Tensor index becomes a ``gather``.
"""

from __future__ import annotations

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_math, ops_shape, shapes
from tripy_lab.frontend.build import make1, scalar_constant, shape_constant
from tripy_lab.frontend.checks import check_dtype, check_int, check_tensor, norm_dim, norm_dims
from tripy_lab.frontend.tensor import DimensionSize, Tensor

FLIP_DTYPES = (D.float32, D.float16, D.bfloat16, D.int32, D.int64, D.bool)
PAD_DTYPES = (D.float32, D.float16, D.bool, D.int32, D.int64)
_BIG = 1 << 30  # |index| < _BIG: ``v // _BIG`` is -1 for negative v and 0 otherwise


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _max(a, b):
    return max(a, b) if _is_int(a) and _is_int(b) else ops_math.maximum(a, b)


def _min(a, b):
    return min(a, b) if _is_int(a) and _is_int(b) else ops_math.minimum(a, b)


def _wrap(v, size):
    """Python's negative-index wrap, also for DimensionSizes whose sign is known only at run time."""
    if _is_int(v):
        return v + size if v < 0 else v
    return v - (v // _BIG) * size


_NONNEG_KINDS = ("add", "mul", "minimum", "maximum")


def _nonneg(v) -> bool:
    """Whether ``v`` is >= 0 whatever the inputs: an int >= 0, a dim's size (``get_dim``), sums, products, minima
    and maxima of such, and such a value floor-divided by a known positive number (a few ops deep). Such a slice
    bound needs no negative-index wrap and no clamp at 0: ``mask[:t, :t]`` with ``t = x.shape[1]`` is one
    ``minimum`` a dim, not seven ops."""
    if _is_int(v):
        return v >= 0
    return isinstance(v, DimensionSize) and _nonneg_value(v.trace_tensor, 4)


def _nonneg_value(tt, depth: int) -> bool:
    if tt.value is not None:
        return bool((tt.value >= 0).all())
    op = tt.producer
    if op is None or depth == 0:
        return False
    if op.kind == "floor_div":  # by a known positive divisor (an integer divided by 0 is the engine's choice)
        d = op.inputs[1].value
        return d is not None and bool((d > 0).all()) and _nonneg_value(op.inputs[0], depth - 1)
    return op.kind == "get_dim" or (op.kind in _NONNEG_KINDS and all(_nonneg_value(t, depth - 1) for t in op.inputs))


def _bound(v, size, low: int):
    """A slice bound clamped to [low, size + low] after Python's negative-index wrap (low: 0 for a forward slice,
    -1 for a backward one); a bound known to be >= 0 needs neither the wrap nor, going forward, the low clamp."""
    if low == 0 and _nonneg(v):
        return _min(v, size)
    return _min(_max(_wrap(v, size), low), size if low == 0 else size - 1)


def _static_step(step) -> int:
    """A slice step as an int; a DimensionSize step (nvtripy allows one) must have a value known now."""
    if isinstance(step, DimensionSize):
        tt = step.trace_tensor
        if tt.value is None and tt.is_compile_tracer:
            raise_error("Slice step must be known when the program is built.",
                        [f"For parameter: 'step', expected an int or a DimensionSize with a known value, but got "
                         f"one computed from a runtime input ({tt.name}).",
                         "The sign and size of a step decide the slice's layout; a dynamic step is not supported."])
        return int(tt.value) if tt.value is not None else int(step)
    return check_int("__getitem__", "step", step)


def _known(v):
    """A DimensionSize whose value is known now (``x.shape[1] // 2`` of a static dim) as that int: its bounds are
    then computed in Python, not by a dozen folded trace constants that nothing uses. Anything else as it is."""
    if isinstance(v, DimensionSize):
        value = shapes.value_now(v)
        return v if value is None else value
    return v


def _slice_bounds(size, s: slice):
    """(start, count, step) of one dim for a Python slice; size and bounds may be DimensionSizes."""
    step = 1 if s.step is None else _static_step(s.step)
    if step == 0:
        raise_error("Slice step cannot be zero.", [f"Got: {s!r}."])
    for name, v in (("start", s.start), ("stop", s.stop)):
        if v is not None and not shapes.is_intlike(v):
            raise_error(f"Slice {name} must be an integer or a DimensionSize.", [f"Got: {v!r}."])
    s = slice(_known(s.start), _known(s.stop), s.step)
    if _is_int(size) and all(v is None or _is_int(v) for v in (s.start, s.stop)):
        start, stop, step = slice(s.start, s.stop, step).indices(size)
        count = len(range(start, stop, step))
        return (start if count else 0), count, step
    if step > 0:
        start = 0 if s.start is None else _bound(s.start, size, 0)
        stop = size if s.stop is None else _bound(s.stop, size, 0)
        count = (stop - start + (step - 1)) // step
        if not (_is_int(start) and start == 0):  # from 0, a stop clamped to [0, size] counts >= 0 already
            count = _max(count, 0)
    else:
        start = size - 1 if s.start is None else _bound(s.start, size, -1)
        stop = -1 if s.stop is None else _bound(s.stop, size, -1)
        count = _max((start - stop + (-step - 1)) // (-step), 0)
    return start, count, step


def _is_full(s: slice) -> bool:
    """``:`` (or ``0::1``); compared by identity, since DimensionSize bounds compare as tensors."""
    return ((s.start is None or (_is_int(s.start) and s.start == 0)) and s.stop is None
            and (s.step is None or (_is_int(s.step) and s.step == 1)))


def _is_tensor_index(item) -> bool:
    return isinstance(item, Tensor) and not isinstance(item, DimensionSize)


def getitem(t: Tensor, index) -> Tensor:
    """ints / DimensionSizes, slices, None, one Ellipsis, sequences of those, and a Tensor index (gather)."""
    items = list(index) if isinstance(index, (tuple, list)) else [index]
    if sum(1 for i in items if i is Ellipsis) > 1:
        raise_error("Slicing index can only have a single ellipsis ('...')", [f"Got index: {index!r}."])
    used = sum(1 for i in items if i is not None and i is not Ellipsis)
    if used > t.rank:
        raise_error(f"Input tensor has a rank of {t.rank} but was attempted to be sliced with {used} indices",
                    [f"Got index: {index!r}."])
    if any(i is Ellipsis for i in items):
        pos = next(k for k, i in enumerate(items) if i is Ellipsis)
        items = items[:pos] + [slice(None)] * (t.rank - used) + items[pos + 1:]
    items += [slice(None)] * (t.rank - sum(1 for i in items if i is not None))
    gathers = [k for k, i in enumerate(items) if _is_tensor_index(i)]
    if len(gathers) > 1:
        raise_error("Only one Tensor may appear in an index.", [f"Got {len(gathers)} Tensor indices in: {index!r}."])
    tensor_index = items[gathers[0]] if gathers else None
    if gathers:
        items[gathers[0]] = slice(None)

    starts, counts, steps, out_dims = [], [], [], []
    trivial, gather_dim, d = True, None, 0
    for k, item in enumerate(items):
        if item is None:
            out_dims.append(1)
            continue
        if isinstance(item, slice):
            if _is_full(item):  # the size as it is: read as a shape entry, no 0-d size made first
                start, count, step = 0, shapes.dim_or_marker(t, d), 1
            else:
                size = shapes.dim(t, d)
                start, count, step = _slice_bounds(size, item)
                trivial = False
            if gathers and k == gathers[0]:
                gather_dim = len(out_dims)
            out_dims.append(count)
        elif shapes.is_intlike(item):
            size = shapes.dim(t, d)
            item = _known(item)
            if _is_int(item) and _is_int(size) and not -size <= item < size:
                raise_error("Index out of range.", [f"Index {item} is out of range for dim {d} of size {size}."])
            start, count, step = _wrap(int(item) if _is_int(item) else item, size), 1, 1
            trivial = False
        else:
            raise_error("Invalid index type.",
                        [f"Expected an int, DimensionSize, slice, None, ... or Tensor, but got: {item!r}."])
        starts.append(start)
        counts.append(count)
        steps.append(step)
        d += 1
    out = t
    if not trivial:
        out = make1("slice", [t, shapes.shape_tensor(starts), shapes.shape_tensor(counts), shape_constant(steps)])
    if any(item is None or shapes.is_intlike(item) for item in items):
        out = ops_shape._reshape_raw(out, out_dims)
    if tensor_index is not None:
        out = ops_shape.gather(out, gather_dim, tensor_index)
    return out


def split(input, num_split_or_sizes, dim: int = 0) -> tuple:  # noqa: A002 - tripy's parameter name
    """Chunks along ``dim``: an int n gives n chunks of ceil(size / n) (the last ones may be smaller or
    empty); a sequence gives chunks of those sizes. Always a tuple."""
    check_tensor("split", "input", input)
    check_dtype("split", "input", input, ops_shape.NOT_F8)
    d = norm_dim("split", dim, input.rank)
    size = shapes.dim(input, d)
    lead = (slice(None),) * d
    if shapes.is_intlike(num_split_or_sizes) and not isinstance(num_split_or_sizes, DimensionSize):
        n = int(num_split_or_sizes)
        if n <= 0:
            raise_error("`num_split_or_sizes` must be positive", [f"Got num_split_or_sizes: {n}."])
        if n == 1:
            return (input,)
        chunk = (size + n - 1) // n
        bounds = [(chunk * i, chunk * (i + 1)) for i in range(n)]
    elif isinstance(num_split_or_sizes, (list, tuple)):
        sizes = list(num_split_or_sizes)
        if not sizes:
            raise_error("Split indices must not be empty",
                        ["For parameter: 'num_split_or_sizes', expected a non-empty sequence of ints or "
                         "DimensionSizes but got: []."])
        for v in sizes:
            if not shapes.is_intlike(v):
                raise_error("Invalid value for parameter: 'num_split_or_sizes' of 'split'.",
                            [f"Expected ints or DimensionSizes, but got: {v!r}."])
            if _is_int(v) and v < 0:
                raise_error("Split sizes must be non-negative.", [f"Got: {sizes}."])
        bounds, start = [], 0
        for v in sizes:
            bounds.append((start, start + v))
            start = start + v
    else:
        raise_error("Could not find an implementation for function: 'split'.",
                    ["For parameter: 'num_split_or_sizes', expected an instance of type: 'int | Sequence[IntLike]' "
                     f"but got argument of type: '{type(num_split_or_sizes).__name__}'."])
    return tuple(getitem(input, lead + (slice(a, b),)) for a, b in bounds)


def flip(input, dim=None) -> Tensor:  # noqa: A002
    """Reverse the order of elements along ``dim`` (every dim when None)."""
    check_tensor("flip", "input", input)
    check_dtype("flip", "input", input, FLIP_DTYPES)
    if input.rank == 0:
        if dim not in (None, [], ()):
            raise_error("Dimension argument must be `None` for scalars.", [f"Got dim: {dim!r}."])
        return input
    dims = norm_dims("flip", dim, input.rank)
    if not dims:
        return input
    return getitem(input, tuple(slice(None, None, -1) if i in dims else slice(None) for i in range(input.rank)))


def repeat(input, repeats, dim: int) -> Tensor:  # noqa: A002
    """Repeat each element ``repeats`` times in place along ``dim`` (like numpy.repeat)."""
    check_tensor("repeat", "input", input)
    check_dtype("repeat", "input", input, FLIP_DTYPES)
    if not shapes.is_intlike(repeats):
        raise_error("Could not find an implementation for function: 'repeat'.",
                    ["For parameter: 'repeats', expected an instance of type: 'int | DimensionSize' "
                     f"but got argument of type: '{type(repeats).__name__}'."])
    if _is_int(repeats) and repeats < 0:
        raise_error("`repeats` value must be non-negative.", [f"Got: {repeats}."])
    if input.rank == 0:
        input = ops_shape.reshape(input, (1,))
    d = norm_dim("repeat", dim, input.rank)
    dims = shapes.shape_dims(input)
    x = ops_shape._reshape_raw(input, dims[:d + 1] + [1] + dims[d + 1:])
    x = make1("broadcast", [x, shapes.shape_tensor(dims[:d + 1] + [repeats] + dims[d + 1:])])
    return ops_shape._reshape_raw(x, dims[:d] + [dims[d] * repeats] + dims[d + 1:])


def pad(input, pad, mode: str = "constant", value=0) -> Tensor:  # noqa: A002
    """Pad each dim by (low, high): ``constant`` fills with ``value``, ``reflect`` mirrors the input."""
    check_tensor("pad", "input", input)
    check_dtype("pad", "input", input, PAD_DTYPES)
    if not isinstance(pad, (list, tuple)) or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(shapes.is_intlike(v) for v in p) for p in pad):
        raise_error("Could not find an implementation for function: 'pad'.",
                    ["For parameter: 'pad', expected an instance of type: 'Sequence[Tuple[IntLike, IntLike]]' "
                     f"but got: {pad!r}."])
    if len(pad) != input.rank:
        raise_error("`pad` length must equal to the rank of `input`.",
                    [f"Got {len(pad)} (low, high) pairs for a tensor of rank {input.rank}."])
    if mode not in ("constant", "reflect"):
        raise_error("Unsupported padding mode.", [f"Got mode: {mode!r}; supported modes: 'constant', 'reflect'."])
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        if not (isinstance(value, bool) and input.dtype is D.bool):
            raise_error("Invalid value for parameter: 'value' of 'pad'.",
                        [f"Expected an int or float, got: {value!r}."])
    dims = shapes.shape_dims(input)
    starts = [0 - lo if not _is_int(lo) else -lo for lo, _ in pad]
    sizes = [d + lo + hi for d, (lo, hi) in zip(dims, pad)]
    args = [input, shapes.shape_tensor(starts), shapes.shape_tensor(sizes), shape_constant([1] * input.rank)]
    if mode == "reflect":
        return make1("slice_reflect", args)
    fill = scalar_constant(bool(value) if input.dtype is D.bool else value, input.dtype)
    return make1("slice_fill", args + [fill])
