"""Conv, ConvTranspose, BatchNorm, GroupNorm, InstanceNorm: Tripy's parameter names, shapes and defaults, and each
layer against a numpy implementation with the same weights (hypothesis-drawn configurations; every engine:
conftest.py)."""

import itertools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tripy_lab as tp

SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
NP = {tp.float32: np.float32, tp.float16: np.float16, tp.bfloat16: ml_dtypes.bfloat16}
TOL = {tp.float32: 1e-4, tp.float16: 1e-2, tp.bfloat16: 6e-2}


def run(t):
    return np.asarray(t.eval())


def load(module, rng, dt):
    """Random weights for every parameter; returns them as float64 numpy arrays by key."""
    weights = {}
    for key, p in module.state_dict().items():
        w = rng.standard_normal(p.shape).astype(NP[dt])
        if key.endswith("running_var"):
            w = (np.abs(w) + 0.5).astype(NP[dt])
        weights[key] = w
    module.load_state_dict({k: tp.Tensor(v) for k, v in weights.items()})
    return {k: v.astype(np.float64) for k, v in weights.items()}


def conv_ref(x, w, b, stride, padding, dilation, groups):
    """Cross-correlation straight from the definition, one output element at a time."""
    n, c = x.shape[:2]
    k_out, ks = w.shape[0], w.shape[2:]
    nsp = len(ks)
    xp = np.pad(x, [(0, 0), (0, 0)] + list(padding))
    out_sp = [(xp.shape[2 + i] - dilation[i] * (ks[i] - 1) - 1) // stride[i] + 1 for i in range(nsp)]
    out = np.zeros((n, k_out, *out_sp))
    cg, kg = c // groups, k_out // groups
    for o in range(k_out):
        g = o // kg
        for pos in itertools.product(*[range(s) for s in out_sp]):
            acc = np.zeros(n)
            for ci in range(cg):
                for kk in itertools.product(*[range(k) for k in ks]):
                    idx = tuple(p * s + q * d for p, s, q, d in zip(pos, stride, kk, dilation))
                    acc += xp[(slice(None), g * cg + ci, *idx)] * w[(o, ci, *kk)]
            out[(slice(None), o, *pos)] = acc + (b[o] if b is not None else 0)
    return out


def deconv_ref(x, w, b, stride, padding, dilation, groups):
    """Transposed convolution: each input element scatters weight * value (then the padding is cropped)."""
    n, c = x.shape[:2]
    kg, ks = w.shape[1], w.shape[2:]
    sp = x.shape[2:]
    full = [(sp[i] - 1) * stride[i] + dilation[i] * (ks[i] - 1) + 1 for i in range(len(sp))]
    out = np.zeros((n, kg * groups, *full))
    cg = c // groups
    for ci in range(c):
        g = ci // cg
        for pos in itertools.product(*[range(s) for s in sp]):
            for kk in itertools.product(*[range(k) for k in ks]):
                idx = tuple(p * s + q * d for p, s, q, d in zip(pos, stride, kk, dilation))
                for o in range(kg):
                    out[(slice(None), g * kg + o, *idx)] += x[(slice(None), ci, *pos)] * w[(ci, o, *kk)]
    out = out[(slice(None), slice(None), *[slice(p0, f - p1) for (p0, p1), f in zip(padding, full)])]
    if b is not None:
        out = out + b.reshape((1, -1) + (1,) * len(sp))
    return out


def conv_config(data, transposed):
    nsp = data.draw(st.integers(1, 3))
    groups = data.draw(st.integers(1, 2))
    cin, cout = groups * data.draw(st.integers(1, 2)), groups * data.draw(st.integers(1, 2))
    kernel = [data.draw(st.integers(1, 3)) for _ in range(nsp)]
    stride = [data.draw(st.integers(1, 2)) for _ in range(nsp)]
    dilation = [data.draw(st.integers(1, 2)) for _ in range(nsp)]
    padding = [(data.draw(st.integers(0, 1)), data.draw(st.integers(0, 1))) for _ in range(nsp)]
    spatial = [data.draw(st.integers(d * (k - 1) + 1 + (2 if transposed else 0), d * (k - 1) + 3 if not transposed
                                     else d * (k - 1) + 4)) for k, d in zip(kernel, dilation)]
    return nsp, groups, cin, cout, kernel, stride, dilation, padding, spatial


@pytest.mark.parametrize("transposed", [False, True], ids=["Conv", "ConvTranspose"])
@SETTINGS
@given(data=st.data())
def test_conv_layers_match_numpy(transposed, data):
    dt = data.draw(st.sampled_from([tp.float32, tp.float16] + ([] if transposed else [tp.bfloat16])))
    nsp, groups, cin, cout, kernel, stride, dilation, padding, spatial = conv_config(data, transposed)
    bias = data.draw(st.booleans())
    cls = tp.ConvTranspose if transposed else tp.Conv
    layer = cls(cin, cout, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias,
                dtype=dt)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    weights = load(layer, rng, dt)
    x = rng.standard_normal((data.draw(st.integers(1, 2)), cin, *spatial)).astype(NP[dt])
    ref = (deconv_ref if transposed else conv_ref)(x.astype(np.float64), weights["weight"], weights.get("bias"),
                                                   stride, padding, dilation, groups)
    out = layer(tp.Tensor(x))
    assert out.dtype is dt
    np.testing.assert_allclose(run(out).astype(np.float64), ref, rtol=TOL[dt], atol=TOL[dt] * 10)


def test_conv_parameters_and_defaults():
    conv = tp.Conv(4, 6, (3, 3), groups=2)
    assert conv.weight.shape == (6, 2, 3, 3) and conv.bias.shape == (6,)
    assert conv.stride == [1, 1] and conv.padding == [(0, 0), (0, 0)] and conv.dilation == [1, 1]
    assert conv.groups == 2 and conv.dtype is tp.float32
    assert sorted(conv.state_dict()) == ["bias", "weight"]
    assert tp.Conv(2, 2, (3,), bias=False).bias is None
    deconv = tp.ConvTranspose(4, 6, (2, 3), groups=2, dtype=tp.float16)
    assert deconv.weight.shape == (4, 3, 2, 3) and deconv.weight.dtype is tp.float16 and deconv.bias.shape == (6,)


def test_conv_dynamic_batch_and_errors():
    conv = tp.Conv(2, 3, (2, 2))
    conv.initialize_dummy_parameters()
    exe = tp.compile(conv, args=[tp.InputInfo(((1, 2, 3), 2, 4, 4), tp.float32)])
    assert np.asarray(exe(tp.ones((3, 2, 4, 4)).eval())).shape == (3, 3, 3, 3)
    with pytest.raises(tp.TripyException, match="Feature group count must divide both"):
        tp.Conv(3, 4, (3, 3), groups=2)
    with pytest.raises(tp.TripyException, match="Feature group count must be a positive integer"):
        tp.Conv(2, 2, (3, 3), groups=0)
    with pytest.raises(tp.TripyException, match=r"(?s)Stride must have the same length.*'stride' of 'Conv'"):
        tp.Conv(2, 2, (3, 3), stride=(1,))
    with pytest.raises(tp.TripyException, match=r"(?s)Padding must have the same length.*'padding' of 'Conv'"):
        tp.Conv(2, 2, (3, 3), padding=((1, 1),))
    with pytest.raises(tp.TripyException, match=r"(?s)same number of spatial dimensions.*Input must have a rank of 4"):
        conv(tp.ones((2, 4, 4)))
    with pytest.raises(tp.TripyException, match="Expected 2 channels in the input, but got 3"):
        conv(tp.ones((1, 3, 4, 4)))
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'Conv'"):
        conv(tp.ones((1, 2, 4, 4), dtype=tp.int32))
    with pytest.raises(tp.TripyException, match="to have the same data type"):
        conv(tp.ones((1, 2, 4, 4), dtype=tp.float16))
    deconv = tp.ConvTranspose(2, 2, (2, 2), dtype=tp.bfloat16)
    deconv.initialize_dummy_parameters()
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'ConvTranspose'"):
        deconv(tp.ones((1, 2, 4, 4), dtype=tp.bfloat16))


NORM_SHAPES = st.lists(st.integers(1, 4), min_size=1, max_size=3)


@SETTINGS
@given(data=st.data())
def test_batch_norm(data):
    dt = data.draw(st.sampled_from(sorted(NP, key=str)))
    c = data.draw(st.integers(1, 4))
    spatial = data.draw(st.lists(st.integers(1, 4), max_size=3))
    eps = data.draw(st.sampled_from([1e-5, 1e-3]))
    layer = tp.BatchNorm(c, dtype=dt, eps=eps)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    w = load(layer, rng, dt)
    x = rng.standard_normal((2, c, *spatial)).astype(NP[dt])
    view = (1, c) + (1,) * len(spatial)
    ref = ((x.astype(np.float64) - w["running_mean"].reshape(view)) / np.sqrt(w["running_var"].reshape(view) + eps)
           * w["weight"].reshape(view) + w["bias"].reshape(view))
    np.testing.assert_allclose(run(layer(tp.Tensor(x))).astype(np.float64), ref, rtol=TOL[dt], atol=TOL[dt] * 10)


@SETTINGS
@given(data=st.data())
def test_instance_and_group_norm(data):
    dt = data.draw(st.sampled_from(sorted(NP, key=str)))
    groups = data.draw(st.integers(1, 3))
    c = groups * data.draw(st.integers(1, 3))
    spatial = data.draw(NORM_SHAPES)
    eps = data.draw(st.sampled_from([1e-5, 1e-2]))
    use_group = data.draw(st.booleans())
    layer = tp.GroupNorm(groups, c, dtype=dt, eps=eps) if use_group else tp.InstanceNorm(c, dtype=dt, eps=eps)
    g = groups if use_group else c
    rng = np.random.default_rng(data.draw(st.integers(0, 2**16)))
    w = load(layer, rng, dt)
    x = (rng.standard_normal((2, c, *spatial)) * 3 + 1).astype(NP[dt])
    xg = x.astype(np.float64).reshape(2, g, -1)
    normed = ((xg - xg.mean(axis=2, keepdims=True)) / np.sqrt(xg.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    view = (1, c) + (1,) * len(spatial)
    ref = normed * w["weight"].reshape(view) + w["bias"].reshape(view)
    tol = TOL[dt] * (1 if dt is tp.float32 else 3)
    np.testing.assert_allclose(run(layer(tp.Tensor(x))).astype(np.float64), ref, rtol=tol, atol=tol * 10)


def test_norm_parameters_and_errors():
    bn = tp.BatchNorm(3)
    assert sorted(bn.state_dict()) == ["bias", "running_mean", "running_var", "weight"]
    assert all(p.shape == (3,) for p in bn.state_dict().values()) and bn.eps == 1e-5
    gn = tp.GroupNorm(2, 4, dtype=tp.float16)
    assert gn.weight.shape == (4,) and gn.weight.dtype is tp.float16 and gn.num_groups == 2
    inorm = tp.InstanceNorm(5)
    assert sorted(inorm.state_dict()) == ["bias", "weight"] and inorm.weight.shape == (5,)
    with pytest.raises(tp.TripyException, match="Number of groups must divide number of channels evenly."):
        tp.GroupNorm(3, 4)
    inorm.initialize_dummy_parameters()
    with pytest.raises(tp.TripyException, match="Expected 5 channels in the input, but got 4"):
        inorm(tp.ones((1, 4, 2)))
    with pytest.raises(tp.TripyException, match=r"(?s)rank of at least 3, but got input of rank: \d.*InstanceNorm"):
        inorm(tp.ones((1, 5)))
    gn.initialize_dummy_parameters()
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'GroupNorm'"):
        gn(tp.ones((1, 4, 2), dtype=tp.int32))
    bn.initialize_dummy_parameters()
    with pytest.raises(tp.TripyException, match=r"(?s)rank of at least 2, but got input of rank: \d.*BatchNorm"):
        bn(tp.ones((3,)))


def test_norms_with_dynamic_shapes():
    gn = tp.GroupNorm(2, 4)
    gn.initialize_dummy_parameters()
    exe = tp.compile(gn, args=[tp.InputInfo(((1, 2, 3), 4, (1, 3, 5)), tp.float32)])
    x = np.random.default_rng(1).standard_normal((3, 4, 5)).astype(np.float32)
    xg = x.reshape(3, 2, -1)
    ref = ((xg - xg.mean(axis=2, keepdims=True)) / np.sqrt(xg.var(axis=2, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x).eval())), ref + 1, rtol=1e-4, atol=1e-4)
