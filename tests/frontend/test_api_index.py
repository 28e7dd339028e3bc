"""__getitem__ (every index form), split, flip, pad, repeat against numpy, on hypothesis-drawn shapes and values
(every engine: conftest.py), eager and compiled with dynamic shapes; plus their errors."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tripy_lab as tp

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)

# (tripy dtype, numpy dtype, element strategy): values exactly representable in every dtype.
DTYPES = {
    "float32": (tp.float32, np.float32), "float16": (tp.float16, np.float16),
    "bfloat16": (tp.bfloat16, ml_dtypes.bfloat16), "int32": (tp.int32, np.int32), "int64": (tp.int64, np.int64),
    "int8": (tp.int8, np.int8), "bool": (tp.bool, np.bool_),
}


def arrays(shape, dtype_name="float32"):
    np_dt = DTYPES[dtype_name][1]
    if dtype_name == "bool":
        return hnp.arrays(np.bool_, shape)
    return hnp.arrays(np.int32, shape, elements=st.integers(-50, 50)).map(lambda a: a.astype(np_dt))


def run(t):
    return np.asarray(t.eval())


def same(ours, ref):
    ours = np.asarray(ours)
    assert ours.shape == np.shape(ref), (ours.shape, np.shape(ref))
    np.testing.assert_array_equal(ours.astype(np.float64) if ours.dtype != np.bool_ else ours,
                                  np.asarray(ref).astype(ours.dtype).astype(np.float64)
                                  if ours.dtype != np.bool_ else ref)


# ---- __getitem__ ----
def index_items(shape):
    """One index item per dim (slices with any start/stop/step, ints, None), maybe with an Ellipsis."""
    def item(size):
        bound = st.none() | st.integers(-size - 2, size + 2)
        step = st.none() | st.integers(-3, 3).filter(lambda s: s != 0)
        return st.one_of(st.builds(slice, bound, bound, step), st.integers(-size, size - 1))

    per_dim = st.tuples(*[item(s) for s in shape]) if shape else st.just(())
    return per_dim.flatmap(lambda items: st.tuples(
        st.just(items), st.integers(0, len(items)), st.booleans(), st.integers(0, len(items)), st.booleans()))


def build_index(items, cut, use_ellipsis, none_pos, use_none):
    items = list(items)
    if use_ellipsis:
        items = items[:cut] + [Ellipsis]  # the rest of the dims are covered by ...
    if use_none:
        items.insert(min(none_pos, len(items)), None)
    return tuple(items)


@SETTINGS
@given(data=st.data())
def test_getitem_basic_indices(data):
    shape = data.draw(shapes)
    name = data.draw(st.sampled_from(sorted(DTYPES)))
    a = data.draw(arrays(shape, name))
    index = build_index(*data.draw(index_items(shape)))
    same(run(tp.Tensor(a)[index]), a[index])


@SETTINGS
@given(data=st.data())
def test_getitem_dimension_size_bounds(data):
    """DimensionSize indices and slice bounds (known only at run time when compiled), negatives included."""
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=5))
    a = data.draw(arrays(shape))
    i = data.draw(st.integers(-shape[0], shape[0] - 1))
    lo = data.draw(st.integers(-shape[1] - 1, shape[1] + 1))
    hi = data.draw(st.integers(-shape[1] - 1, shape[1] + 1))
    step = data.draw(st.sampled_from([1, 2, -1, -2]))

    def f(x, di, dlo, dhi):
        return x[di, dlo:dhi:step]

    eager = f(tp.Tensor(a), tp.DimensionSize(i), tp.DimensionSize(lo), tp.DimensionSize(hi))
    same(run(eager), a[i, lo:hi:step])

    # Compiled: the values (and their signs) are known only at run time.
    signs = [1 if v >= 0 else -1 for v in (i, lo, hi)]

    def g(x, di, dlo, dhi):
        di, dlo, dhi = (d if s > 0 else 0 - d for d, s in zip((di, dlo, dhi), signs))
        return f(x, di, dlo, dhi)

    infos = [tp.DimensionInputInfo((abs(v), abs(v), abs(v))) for v in (i, lo, hi)]
    exe = tp.compile(g, args=[tp.InputInfo(shape, tp.float32), *infos])
    out = exe(tp.Tensor(a).eval(), *(tp.DimensionSize(abs(v)).eval() for v in (i, lo, hi)))
    same(np.asarray(out), a[i, lo:hi:step])


def test_getitem_dynamic_input_shape():
    """Slicing a tensor whose dims are known only at run time (Python semantics on the run-time sizes)."""
    exe = tp.compile(lambda x: x[1:, ::-2, -1], args=[tp.InputInfo(((2, 3, 5), (1, 4, 6), 3), tp.float32)])
    for shape in [(2, 1, 3), (3, 4, 3), (5, 6, 3)]:
        a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        same(np.asarray(exe(tp.Tensor(a).eval())), a[1:, ::-2, -1])
    exe = tp.compile(lambda x: x[x.shape[0] - 1, : x.shape[1] // 2], args=[tp.InputInfo(((1, 2, 4), 6), tp.int32)])
    a = np.arange(18, dtype=np.int32).reshape(3, 6)
    same(np.asarray(exe(tp.Tensor(a).eval())), a[2, :3])


@SETTINGS
@given(data=st.data())
def test_getitem_tensor_index_gathers(data):
    shape = data.draw(shapes)
    a = data.draw(arrays(shape))
    dim = data.draw(st.integers(0, len(shape) - 1))
    idx = data.draw(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=3),
                               elements=st.integers(0, shape[dim] - 1)))
    index = (slice(None),) * dim + (tp.Tensor(idx),)
    same(run(tp.Tensor(a)[index]), a[(slice(None),) * dim + (idx,)])
    if dim == 0:
        same(run(tp.Tensor(a)[tp.Tensor(idx)]), a[idx])


def test_getitem_errors():
    t = tp.ones((2, 3))
    with pytest.raises(tp.TripyException, match="rank of 2 but was attempted to be sliced with 3 indices") as err:
        t[0, 0, 0]
    assert err.value.location.file == __file__
    with pytest.raises(tp.TripyException, match=r"single ellipsis \('...'\)"):
        t[..., 0, ...]
    with pytest.raises(tp.TripyException, match="Slice start must be an integer or a DimensionSize."):
        t[1.5:]
    with pytest.raises(tp.TripyException, match="Slice stop must be an integer or a DimensionSize."):
        t[:"a"]
    with pytest.raises(tp.TripyException, match="Slice step cannot be zero"):
        t[::0]
    with pytest.raises(tp.TripyException, match="Index out of range"):
        t[2]
    with pytest.raises(tp.TripyException, match="Only one Tensor may appear in an index"):
        t[tp.Tensor([0]), tp.Tensor([0])]
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'gather'"):
        t[tp.Tensor([0.5])]


# ---- split ----
@SETTINGS
@given(data=st.data())
def test_split(data):
    shape = data.draw(shapes)
    name = data.draw(st.sampled_from(sorted(DTYPES)))
    a = data.draw(arrays(shape, name))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    size = shape[dim]
    if data.draw(st.booleans()):
        n = data.draw(st.integers(1, 6))
        chunk = -(-size // n)
        edges = [min(chunk * i, size) for i in range(n + 1)]
        arg = n
    else:
        sizes = data.draw(st.lists(st.integers(0, size), min_size=1, max_size=4))
        edges = [0]
        for s in sizes:
            edges.append(edges[-1] + s)
        edges = [min(e, size) for e in edges]
        arg = sizes
    outs = tp.split(tp.Tensor(a), arg, dim)
    assert isinstance(outs, tuple) and len(outs) == len(edges) - 1
    for out, lo, hi in zip(outs, edges, edges[1:]):
        same(run(out), np.take(a, np.arange(lo, hi), axis=dim))


def test_split_errors():
    t = tp.ones((4,))
    with pytest.raises(tp.TripyException, match="Number of splits must be positive"):
        tp.split(t, 0)
    with pytest.raises(tp.TripyException, match="Split indices must not be empty"):
        tp.split(t, [])
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'split'"):
        tp.split(tp.cast(t, tp.float8), 2)


# ---- flip ----
@SETTINGS
@given(data=st.data())
def test_flip(data):
    shape = data.draw(shapes)
    name = data.draw(st.sampled_from(["float32", "float16", "bfloat16", "int32", "int64", "bool"]))
    a = data.draw(arrays(shape, name))
    dims = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1) |
                     st.lists(st.integers(0, len(shape) - 1), unique=True))
    axis = tuple(range(len(shape))) if dims is None else dims
    same(run(tp.flip(tp.Tensor(a), dim=dims)), np.flip(a, axis=axis))


def test_flip_errors():
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'flip'"):
        tp.flip(tp.ones((2,), dtype=tp.int8))
    with pytest.raises(tp.TripyException, match="Each dimension may only be specified once"):
        tp.flip(tp.ones((2, 2)), dim=[0, -2])
    with pytest.raises(tp.TripyException, match="Dimension argument is out of bounds"):
        tp.flip(tp.ones((2, 2)), dim=2)


# ---- repeat ----
@SETTINGS
@given(data=st.data())
def test_repeat(data):
    shape = data.draw(shapes)
    name = data.draw(st.sampled_from(["float32", "float16", "bfloat16", "int32", "int64", "bool"]))
    a = data.draw(arrays(shape, name))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    repeats = data.draw(st.integers(0, 3))
    same(run(tp.repeat(tp.Tensor(a), repeats, dim)), np.repeat(a, repeats, axis=dim))


def test_repeat_dimension_size_and_errors():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    exe = tp.compile(lambda x, r: tp.repeat(x, r, 1), args=[tp.InputInfo((2, 3), tp.float32),
                                                         tp.DimensionInputInfo((1, 2, 4))])
    same(np.asarray(exe(tp.Tensor(a).eval(), tp.DimensionSize(3).eval())), np.repeat(a, 3, axis=1))
    with pytest.raises(tp.TripyException, match="`repeats` value must be non-negative."):
        tp.repeat(tp.ones((2,)), -1, 0)
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'repeat'"):
        tp.repeat(tp.ones((2,), dtype=tp.int8), 2, 0)


# ---- pad ----
@SETTINGS
@given(data=st.data())
def test_pad(data):
    shape = data.draw(shapes)
    mode = data.draw(st.sampled_from(["constant", "reflect"]))
    name = data.draw(st.sampled_from(["float32", "float16", "int32", "int64"] + (["bool"] if mode == "constant"
                                                                                  else [])))
    a = data.draw(arrays(shape, name))
    limit = (lambda s: s - 1) if mode == "reflect" else (lambda s: 3)
    pads = [(data.draw(st.integers(0, limit(s))), data.draw(st.integers(0, limit(s)))) for s in shape]
    if mode == "constant":
        value = data.draw(st.integers(-5, 5)) if name != "bool" else data.draw(st.booleans())
        ref = np.pad(a, pads, constant_values=np.asarray(value).astype(a.dtype))
        out = tp.pad(tp.Tensor(a), pads, value=value)
    else:
        ref = np.pad(a, pads, mode="reflect")
        out = tp.pad(tp.Tensor(a), pads, mode="reflect")
    same(run(out), ref)


def test_pad_dynamic_and_errors():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    exe = tp.compile(lambda x: tp.pad(x, [(1, 2), (0, x.shape[0])], value=-1.0),
                     args=[tp.InputInfo(((1, 3, 5), 4), tp.float32)])
    same(np.asarray(exe(tp.Tensor(a).eval())), np.pad(a, [(1, 2), (0, 3)], constant_values=-1))
    with pytest.raises(tp.TripyException, match="`pad` length must equal to the rank of `input`."):
        tp.pad(tp.ones((2, 2)), [(1, 1)])
    with pytest.raises(tp.TripyException, match="Unsupported padding mode."):
        tp.pad(tp.ones((2,)), [(1, 1)], mode="edge")
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'pad'"):
        tp.pad(tp.ones((2,), dtype=tp.bfloat16), [(1, 1)])
