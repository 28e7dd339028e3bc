"""tp.Linear with quant_dtype / weight_quant_dim: weight_scale and input_scale parameters, quantize -> dequantize
in the trace and the MLIR, state_dict keys as nvtripy names them (issue 8, finding 1)."""

import numpy as np
import pytest

import tripy_lab as tp

RNG = np.random.default_rng(8)


def _q(a, scale, lo=-128, hi=127):
    return np.clip(np.rint(a / scale), lo, hi) * scale


def _linear(quant_dtype=tp.int8, dim=0, bias=True):
    w = RNG.standard_normal((4, 6)).astype(np.float32)
    lin = tp.Linear(6, 4, bias=bias, quant_dtype=quant_dtype, weight_quant_dim=dim)
    lin.weight = tp.Tensor(w)
    if bias:
        lin.bias = tp.Tensor(RNG.standard_normal(4).astype(np.float32))
    return lin, w


def test_float_linear_exposes_quant_fields_as_none():
    lin = tp.Linear(3, 2)
    assert lin.quant_dtype is None and lin.weight_quant_dim is None
    assert lin.weight_scale is None and lin.input_scale is None
    assert sorted(lin.state_dict()) == ["bias", "weight"]


def test_state_dict_keys_and_placeholders():
    lin = tp.Linear(6, 4, quant_dtype=tp.int8, weight_quant_dim=0)
    sd = lin.state_dict()
    assert sorted(sd) == ["bias", "input_scale", "weight", "weight_scale"]
    assert sd["weight_scale"].shape == (4,) and sd["input_scale"].shape == ()
    # input_scale is optional (weight-only quantization): a strict load without it is fine.
    w = tp.Tensor(np.ones((4, 6), np.float32))
    missing, unexpected = lin.load_state_dict({"weight": w, "bias": tp.Tensor(np.ones(4, np.float32)),
                                               "weight_scale": tp.Tensor(np.ones(4, np.float32))})
    assert not missing and not unexpected
    with pytest.raises(tp.TripyException, match="state_dict is incompatible"):
        lin.load_state_dict({"weight": w})
    with pytest.raises(tp.TripyException, match="not compatible"):
        lin.weight_scale = tp.Tensor(np.ones(6, np.float32))  # per-channel along dim 0: 4 scales
    # Per-tensor (weight_quant_dim=None) takes any scale shape: scalar or 2-D block scales.
    per_tensor = tp.Linear(6, 4, quant_dtype=tp.int8)
    per_tensor.weight_scale = tp.Tensor(np.float32(0.1))
    assert "weight_scale" in str(per_tensor)


def test_weight_only_int8_matches_numpy():
    lin, w = _linear()
    scale = (np.abs(w).max(axis=1) / 127).astype(np.float32)
    lin.weight_scale = tp.Tensor(scale)
    x = RNG.standard_normal((3, 6)).astype(np.float32)
    out = lin(tp.Tensor(x)).numpy()
    want = x @ _q(w, scale[:, None]).T + np.asarray(lin.bias)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert np.abs(out - (x @ w.T + np.asarray(lin.bias))).max() > 1e-5  # the quantization is really applied


def test_input_and_weight_quantization_compiles_with_qdq_in_trace_and_mlir():
    lin, w = _linear(dim=0, bias=False)
    scale = (np.abs(w).max(axis=1) / 127).astype(np.float32)
    lin.weight_scale = tp.Tensor(scale)
    lin.input_scale = tp.Tensor(np.float32(0.02))
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 2, 5), 6), tp.float32)])
    trace_text, mlir = exe.stages["traced"].as_text(), exe.stages["lowered"].as_text()
    assert trace_text.count("= quantize(") == 2 and trace_text.count("= dequantize(") == 2
    assert mlir.count("tensorrt.quantize") == 2 and mlir.count("tensorrt.dequantize") == 2
    assert "weight_scale" in trace_text and "input_scale" in trace_text
    x = RNG.standard_normal((5, 6)).astype(np.float32)
    want = _q(x, np.float32(0.02)) @ _q(w, scale[:, None]).T
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x).eval())), want, rtol=1e-5, atol=1e-5)


def test_per_tensor_float8_and_int4_block_scales():
    lin, w = _linear(quant_dtype=tp.float8, dim=None, bias=False)
    lin.weight_scale = tp.Tensor(np.float32(np.abs(w).max() / 448))
    x = RNG.standard_normal((2, 6)).astype(np.float32)
    out = lin(tp.Tensor(x)).numpy()
    assert out.shape == (2, 4) and np.all(np.isfinite(out))
    np.testing.assert_allclose(out, x @ w.T, rtol=0.2, atol=0.2)  # f8 keeps ~2 significant digits
    lin4, w4 = _linear(quant_dtype=tp.int4, dim=None, bias=False)
    block = (np.abs(w4).reshape(2, 2, 6).max(axis=1) / 7).astype(np.float32)  # 2 blocks of 2 rows
    lin4.weight_scale = tp.Tensor(block)
    want = x @ (np.clip(np.rint(w4 / np.repeat(block, 2, axis=0)), -8, 7) * np.repeat(block, 2, axis=0)).T
    np.testing.assert_allclose(lin4(tp.Tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)


def test_quantization_errors():
    lin, _ = _linear(dim=1)
    lin.weight_scale = tp.Tensor(np.ones(6, np.float32))
    lin.input_scale = tp.Tensor(np.float32(1.0))
    with pytest.raises(tp.TripyException, match="Unsupported quantization parameters for Linear module"):
        lin(tp.ones((1, 6)))
    with pytest.raises(tp.TripyException, match="immutable"):
        lin.quant_dtype = tp.float8
    with pytest.raises(tp.TripyException, match="quant_dtype"):
        tp.Linear(2, 2, quant_dtype=tp.int32)
    with pytest.raises(tp.TripyException, match="weight_quant_dim"):
        tp.Linear(2, 2, quant_dtype=tp.int8, weight_quant_dim=2)
    unset = tp.Linear(2, 2, quant_dtype=tp.int8)
    unset.weight = tp.ones((2, 2))
    unset.bias = tp.ones((2,))
    with pytest.raises(tp.TripyException, match="never set"):
        unset(tp.ones((1, 2)))  # weight_scale is required


@pytest.mark.parametrize("seed", [18, 21, 26, 31])
def test_int8_inputs_and_weights_over_their_full_range_match_numpy(seed):
    """Inputs and weights quantized over the whole int8 range: onnxruntime's fused integer MatMul (u8s8 on x86
    CPUs without VNNI) saturated its 16-bit pair sums here and returned wrong numbers (these seeds did)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((4, 6)).astype(np.float32)
    lin = tp.Linear(6, 4, bias=False, quant_dtype=tp.int8, weight_quant_dim=0)
    lin.weight = tp.Tensor(w)
    scale = (np.abs(w).max(axis=1) / 127).astype(np.float32)
    lin.weight_scale = tp.Tensor(scale)
    lin.input_scale = tp.Tensor(np.float32(0.02))
    x = np.random.default_rng(100 + seed).standard_normal((5, 6)).astype(np.float32)
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 2, 5), 6), tp.float32)])
    want = _q(x, np.float32(0.02)) @ _q(w, scale[:, None]).T
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x).eval())), want, rtol=1e-5, atol=1e-5)
