"""tril, triu, outer, iota_like, arange (both overloads), resize (both overloads, every mode), maxpool, avgpool,
plugin and copy: numpy-checked on hypothesis-drawn shapes and values (every engine: conftest.py), plus their errors."""

import itertools
import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tripy_lab as tp

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)
NP = {tp.float32: np.float32, tp.float16: np.float16, tp.bfloat16: ml_dtypes.bfloat16, tp.int8: np.int8,
      tp.int32: np.int32, tp.int64: np.int64, tp.bool: np.bool_}
TOL = {tp.float32: 1e-5, tp.float16: 2e-3, tp.bfloat16: 2e-2, tp.int8: 0}


def run(t):
    return np.asarray(t.eval())


def values(shape, dt, lo=-20, hi=20):
    if dt is tp.bool:
        return hnp.arrays(np.bool_, shape)
    return hnp.arrays(np.int32, shape, elements=st.integers(lo, hi)).map(lambda a: a.astype(NP[dt]))


def floats(shape, dt, lo=-4.0, hi=4.0):
    return hnp.arrays(np.float32, shape, elements=st.floats(lo, hi, width=32)).map(lambda a: a.astype(NP[dt]))


def close(ours, ref, dt):
    tol = TOL.get(dt, 0)
    np.testing.assert_allclose(np.asarray(ours).astype(np.float64), np.asarray(ref, dtype=np.float64),
                               rtol=tol * 4, atol=tol * 8)


# ---- tril / triu ----
@pytest.mark.parametrize("fn", ["tril", "triu"])
@SETTINGS
@given(data=st.data())
def test_tril_triu(fn, data):
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64, tp.bool]))
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=5))
    a = data.draw(values(shape, dt))
    diagonal = data.draw(st.integers(-5, 5))
    out = getattr(tp, fn)(tp.Tensor(a), diagonal)
    assert out.dtype is dt
    np.testing.assert_array_equal(run(out), getattr(np, fn)(a, diagonal))


def test_tril_errors():
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'tril'"):
        tp.tril(tp.cast(tp.ones((2, 2)), tp.float8))
    with pytest.raises(tp.TripyException, match="rank of at least 2"):
        tp.triu(tp.ones((2,)))


# ---- outer ----
@SETTINGS
@given(data=st.data())
def test_outer(data):
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16]))
    a = data.draw(floats(data.draw(st.integers(1, 6)), dt))
    b = data.draw(floats(data.draw(st.integers(1, 6)), dt))
    out = tp.outer(tp.Tensor(a), tp.Tensor(b))
    assert out.dtype is dt
    close(run(out), np.outer(a.astype(np.float64), b.astype(np.float64)), dt)


def test_outer_errors():
    with pytest.raises(tp.TripyException, match="Expected input vectors to be 1D."):
        tp.outer(tp.ones((2, 2)), tp.ones((2,)))
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'outer'"):
        tp.outer(tp.ones((2,), dtype=tp.int32), tp.ones((2,), dtype=tp.int32))
    with pytest.raises(tp.TripyException, match="to have the same data type"):
        tp.outer(tp.ones((2,)), tp.ones((2,), dtype=tp.float16))


# ---- iota_like, arange ----
@SETTINGS
@given(data=st.data())
def test_iota_like(data):
    shape = data.draw(shapes)
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int8, tp.int32, tp.int64]))
    out_dt = data.draw(st.sampled_from([None, tp.float32, tp.int32, tp.int64]))
    dim = data.draw(st.integers(-len(shape), len(shape) - 1))
    out = tp.iota_like(tp.Tensor(np.zeros(shape, NP[dt])), dim, out_dt)
    assert out.dtype is (out_dt or dt)
    ref = np.broadcast_to(np.arange(shape[dim]).reshape([-1 if i == dim % len(shape) else 1
                                                         for i in range(len(shape))]), shape)
    np.testing.assert_array_equal(run(out).astype(np.int64), ref)


@SETTINGS
@given(start=st.integers(-10, 10), length=st.integers(1, 10), step=st.sampled_from([1, 2, 3, -1, -2]),
       dt=st.sampled_from([tp.float32, tp.int32, tp.int64, tp.float16]))
def test_arange_overloads(start, length, step, dt):
    stop = start + length * step
    np.testing.assert_array_equal(run(tp.arange(start, stop, step, dtype=dt)),
                                  np.arange(start, stop, step).astype(NP[dt]))
    np.testing.assert_array_equal(run(tp.arange(start=start, stop=stop, step=step, dtype=dt)),
                                  np.arange(start, stop, step).astype(NP[dt]))
    out = tp.arange(length, dt)  # overload 2: arange(stop, dtype)
    assert out.dtype is dt
    np.testing.assert_array_equal(run(out), np.arange(length).astype(NP[dt]))
    assert tp.arange(length).dtype is tp.float32
    np.testing.assert_array_equal(run(tp.arange(stop=length, dtype=dt)), np.arange(length).astype(NP[dt]))


def test_arange_float_and_dimension_size():
    np.testing.assert_allclose(run(tp.arange(0.5, 2.0, 0.25)), np.arange(0.5, 2.0, 0.25, dtype=np.float32))
    exe = tp.compile(lambda x: tp.arange(x.shape[0], dtype=tp.int32), args=[tp.InputInfo(((1, 3, 6),), tp.float32)])
    np.testing.assert_array_equal(np.asarray(exe(tp.ones((5,)).eval())), np.arange(5))
    with pytest.raises(tp.TripyException, match="Step in arange cannot be 0."):
        tp.arange(0, 4, 0)
    with pytest.raises(tp.TripyException, match="Arange tensor is empty."):
        tp.arange(4, 0)
    with pytest.raises(tp.TripyException, match="expected an instance of type: 'Number | DimensionSize'"):
        tp.arange("a")


# ---- resize ----
def interp_matrix(n_in, n_out, mode, align_corners, scale=None):
    """(n_out, n_in) weights of one dim, written from the coordinate formulas, one output index at a time."""
    w = np.zeros((n_out, n_in))
    ratio = 1.0 / scale if scale else n_in / n_out
    for y in range(n_out):
        if mode == "nearest":
            w[y, min(int(math.floor(y * ratio)), n_in - 1)] = 1
            continue
        if align_corners:
            x = y * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
        else:
            x = (y + 0.5) * ratio - 0.5
        if mode == "linear":
            x = min(max(x, 0.0), n_in - 1)
            x0 = int(math.floor(x))
            w[y, x0] += 1 - (x - x0)
            w[y, min(x0 + 1, n_in - 1)] += x - x0
        else:  # cubic, A = -0.75, edge indices clamped
            x0, a = int(math.floor(x)), -0.75
            for k in range(-1, 3):
                d = abs(x - (x0 + k))
                coeff = ((a + 2) * d - (a + 3)) * d * d + 1 if d <= 1 else ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
                w[y, min(max(x0 + k, 0), n_in - 1)] += coeff
    return w


def resize_ref(a, out_shape, mode, align_corners, scales=None):
    y = a.astype(np.float64)
    for d, (n_in, n_out) in enumerate(zip(a.shape, out_shape)):
        s = scales[d] if scales else None
        if n_in == n_out and (s is None or s == 1):
            continue
        y = np.moveaxis(np.tensordot(interp_matrix(n_in, n_out, mode, align_corners, s), np.moveaxis(y, d, 0),
                                     axes=(1, 0)), 0, d)
    return y


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@SETTINGS
@given(data=st.data())
def test_resize_output_shape(mode, data):
    dt = data.draw(st.sampled_from([tp.float32, tp.float16] + ([tp.int8] if mode == "nearest" else [])))
    rank = data.draw(st.integers(2, 4))
    shape = data.draw(hnp.array_shapes(min_dims=rank, max_dims=rank, min_side=1, max_side=5))
    inner = 2 if mode == "cubic" else 3
    out_shape = [s if i < rank - inner else data.draw(st.integers(1, 8)) for i, s in enumerate(shape)]
    a = data.draw(floats(shape, dt) if dt is not tp.int8 else values(shape, dt))
    align = mode != "nearest" and data.draw(st.booleans())
    out = tp.resize(tp.Tensor(a), output_shape=out_shape, mode=mode, align_corners=align)
    assert out.dtype is dt
    ref = resize_ref(a, out_shape, mode, align)
    close(run(out), ref, dt)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@SETTINGS
@given(data=st.data())
def test_resize_scales(mode, data):
    shape = data.draw(hnp.array_shapes(min_dims=3, max_dims=4, min_side=1, max_side=5))
    scales = [1.0] * (len(shape) - 2) + [data.draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0])) for _ in range(2)]
    a = data.draw(floats(shape, tp.float32))
    out = tp.resize(tp.Tensor(a), scales=scales, mode=mode)
    out_shape = [int(math.floor(d * s)) for d, s in zip(shape, scales)]
    if 0 in out_shape:
        return
    close(run(out), resize_ref(a, out_shape, mode, False, scales), tp.float32)


def test_resize_positional_forms_and_dynamic_shape():
    a = np.arange(8, dtype=np.float32).reshape(1, 2, 4)
    # A positional list with a float is scales; one with a DimensionSize is an output shape.
    np.testing.assert_allclose(run(tp.resize(tp.Tensor(a), [1, 1, 2.0], "nearest")), a.repeat(2, axis=2))
    t = tp.Tensor(a)
    np.testing.assert_allclose(run(tp.resize(t, [1, tp.DimensionSize(2), 8], mode="nearest")), a.repeat(2, axis=2))
    exe = tp.compile(lambda x: tp.resize(x, output_shape=[1, 2, x.shape[2] * 2], mode="linear"),
                     args=[tp.InputInfo((1, 2, (2, 4, 6)), tp.float32)])
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(a).eval())), resize_ref(a, (1, 2, 8), "linear", False),
                               rtol=1e-5)


def test_resize_errors():
    t = tp.ones((1, 1, 2, 2))
    with pytest.raises(tp.TripyException, match="Ambiguous overload for function: 'resize'.") as err:
        tp.resize(t, [1, 1, 4, 4])
    assert "keyword" in str(err.value)
    assert err.value.location.file == __file__
    with pytest.raises(tp.TripyException, match="Unsupported resize mode."):
        tp.resize(t, output_shape=[1, 1, 4, 4], mode="area")
    with pytest.raises(tp.TripyException, match="align_corners can only be set with `cubic` or `linear` mode."):
        tp.resize(t, output_shape=[1, 1, 4, 4], mode="nearest", align_corners=True)
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'resize'"):
        tp.resize(tp.ones((1, 1, 2, 2), dtype=tp.int32), scales=[1, 1, 2, 2])
    with pytest.raises(tp.TripyException, match="innermost 2 dims"):
        tp.resize(t, scales=[1, 2.0, 2, 2], mode="cubic")
    with pytest.raises(tp.TripyException, match="one entry per input dim"):
        tp.resize(t, output_shape=[4, 4])


# ---- pooling ----
def pool_ref(a, kernel, stride, padding, kind, count_include_pad=True):
    n = len(kernel)
    lead = a.shape[:-n]
    spatial = a.shape[-n:]
    out_sp = [(d + p0 + p1 - k) // s + 1 for d, k, s, (p0, p1) in zip(spatial, kernel, stride, padding)]
    out = np.zeros(lead + tuple(out_sp))
    for pos in itertools.product(*[range(o) for o in out_sp]):
        cells, count = [], 0
        for off in itertools.product(*[range(k) for k in kernel]):
            idx = [p * s + o - pad[0] for p, s, o, pad in zip(pos, stride, off, padding)]
            inside = all(0 <= i < d for i, d in zip(idx, spatial))
            count += 1
            if inside:
                cells.append(a[(Ellipsis, *idx)].astype(np.float64))
        if kind == "max":
            out[(Ellipsis, *pos)] = np.max(cells, axis=0)
        else:
            total = np.sum(cells, axis=0) if cells else 0
            out[(Ellipsis, *pos)] = total / (count if count_include_pad else len(cells))
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@SETTINGS
@given(data=st.data())
def test_pooling(kind, data):
    n = data.draw(st.sampled_from([2, 3]))
    dt = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16] + ([tp.int8] if kind == "max" else [])))
    kernel = [data.draw(st.integers(1, 3)) for _ in range(n)]
    stride = [data.draw(st.integers(1, 3)) for _ in range(n)]
    padding = [(data.draw(st.integers(0, k - 1)), data.draw(st.integers(0, k - 1))) for k in kernel]
    spatial = [data.draw(st.integers(k, k + 4)) for k in kernel]
    a = data.draw(values([data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)), *spatial], dt, -8, 8))
    use_defaults = data.draw(st.booleans())
    if kind == "max":
        out = tp.maxpool(tp.Tensor(a), kernel, None if use_defaults else stride, None if use_defaults else padding)
        include = True
    else:
        include = data.draw(st.booleans())
        out = tp.avgpool(tp.Tensor(a), kernel, None if use_defaults else stride, None if use_defaults else padding,
                         count_include_pad=include)
    if use_defaults:
        stride, padding = [1] * n, [(0, 0)] * n
    assert out.dtype is dt
    close(run(out), pool_ref(a, kernel, stride, padding, kind, include), dt)


def test_pooling_int8_average_and_errors():
    a = np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4)
    out = tp.avgpool(tp.Tensor(a), [2, 2], stride=[2, 2])
    np.testing.assert_array_equal(run(out), np.rint(pool_ref(a, [2, 2], [2, 2], [(0, 0)] * 2, "avg")))
    t = tp.ones((1, 1, 4, 4))
    with pytest.raises(tp.TripyException, match="Unsupported kernel_dims, must be 2D or 3D."):
        tp.maxpool(tp.ones((1, 1, 4)), [2])
    with pytest.raises(tp.TripyException, match="`count_include_pad` must be `True` when input datatype is int8."):
        tp.avgpool(tp.Tensor(a), [2, 2], count_include_pad=False)
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'maxpool'"):
        tp.maxpool(tp.ones((1, 1, 4, 4), dtype=tp.int32), [2, 2])
    with pytest.raises(tp.TripyException, match="Stride must be positive"):
        tp.maxpool(t, [2, 2], stride=[0, 1])
    with pytest.raises(tp.TripyException, match="Padding must be non-negative"):
        tp.avgpool(t, [2, 2], padding=[(0, -1), (0, 0)])
    with pytest.raises(tp.TripyException, match="Stride must have the same length as kernel_dims"):
        tp.maxpool(t, [2, 2], stride=[1])


# ---- plugin ----
def test_plugin_lowers_to_opaque_plugin_and_needs_tensorrt():
    from tripy_lab import pipeline

    def f(x):
        return tp.plugin("CustomGeluPluginDynamic", [x], output_info=[(2, tp.float32)], version="1",
                         type_id=0, bias=1.5, name_field="g", dims=(2, 3), weights=[1.0, 2.0])

    traced = pipeline.trace(f, args=[tp.InputInfo((2, 3), tp.float32)])
    text = traced.lower().as_text()
    assert "tensorrt.opaque_plugin" in text and 'plugin_name = "CustomGeluPluginDynamic"' in text
    assert "type_id = 0 : i32" in text and "bias = 1.500000e+00 : f32" in text
    two = tp.plugin("P", [tp.ones((2,))], [(1, tp.float32), (2, tp.int32)])
    assert isinstance(two, list) and [t.dtype for t in two] == [tp.float32, tp.int32]
    with pytest.raises(tp.TripyException, match="plugins need TensorRT") as err:
        f(tp.ones((2, 3))).eval()
    assert "engine='tensorrt'" in str(err.value)


def test_plugin_errors():
    x = tp.ones((2,))
    with pytest.raises(tp.TripyException, match="Invalid plugin ID: 'Gelu'."):
        tp.plugin("Gelu", [x])
    with pytest.raises(tp.TripyException, match="Quickly deployable"):
        tp.plugin("example::gelu", [x], alpha=1.0)
    with pytest.raises(tp.TripyException, match="Invalid value provided for field: alpha"):
        tp.plugin("Gelu", [x], [(1, tp.float32)], alpha={"a": 1})
    with pytest.raises(tp.TripyException, match="'output_info'"):
        tp.plugin("Gelu", [x], [(1, "float32")])


# ---- copy ----
def test_copy_to_cpu_and_errors():
    computed = tp.ones((2, 2)) + 1.0
    assert computed.device.kind == "gpu"
    host = tp.copy(computed, tp.device("cpu"))
    assert host.device.kind == "cpu" and host.tolist() == [[2.0, 2.0], [2.0, 2.0]]
    # The Tensor method, on a fresh computed tensor: after eval, where `computed` lives depends on the engine
    # (the reference engine leaves results in host memory, GPU engines on the GPU).
    assert (tp.ones((2,)) * 3.0).copy(tp.device("cpu")).tolist() == [3.0, 3.0]
    with pytest.raises(tp.TripyException, match="Copying within the same device kind is not currently supported."):
        tp.copy(tp.Tensor([1.0]), tp.device("cpu"))
    with pytest.raises(tp.TripyException, match="expected an instance of type: 'tripy.device'"):
        tp.copy(tp.Tensor([1.0]), "gpu")


def test_gpu_placement_without_a_gpu_library_is_a_clear_error(monkeypatch):
    import importlib

    real_import = importlib.import_module

    def no_gpu_libraries(name, *args, **kwargs):
        if name in ("cupy", "torch"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", no_gpu_libraries)
    with pytest.raises(tp.TripyException, match="Placing data on the GPU needs a CUDA GPU and cupy or torch."):
        tp.copy(tp.Tensor([1.0]), tp.device("gpu"))
    with pytest.raises(tp.TripyException, match="Placing data on the GPU needs"):
        tp.Tensor([1.0], device=tp.device("gpu"))
