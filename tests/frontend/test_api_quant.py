"""quantize / dequantize (int8, float8, int4; per-tensor, per-channel, block-wise) and casts to and from int4 /
float8, against numpy + ml_dtypes on hypothesis-drawn shapes and values (every engine: conftest.py; exact emulation)."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import tripy_lab as tp

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5)
REAL = {tp.float32: np.float32, tp.float16: np.float16, tp.bfloat16: ml_dtypes.bfloat16}
QUANT = {tp.int8: (np.int8, -128, 127), tp.int4: (ml_dtypes.int4, -8, 7),
         tp.float8: (ml_dtypes.float8_e4m3fn, -448.0, 448.0)}


def run(t):
    return np.asarray(t.eval())


def quantize_ref(x, scale, qdt):
    np_q, lo, hi = QUANT[qdt]
    q = x.astype(np.float64) / scale.astype(np.float64)
    q = np.clip(np.rint(q), lo, hi) if qdt is not tp.float8 else np.clip(q, lo, hi)
    return q.astype(np_q)


def scale_layout(data, shape, qdt):
    """(scale array, dim, broadcastable scale) for a per-tensor, per-channel or (int4, 2-D) block-wise layout."""
    kinds = ["tensor", "channel"] + (["block"] if qdt is tp.int4 and len(shape) == 2 else [])
    kind = data.draw(st.sampled_from(kinds))
    positive = st.sampled_from([0.125, 0.25, 0.5, 1.0, 2.0, 3.0])
    if kind == "tensor":
        s = np.asarray(data.draw(positive))
        return s, None, s
    if kind == "channel":
        dim = data.draw(st.integers(0, len(shape) - 1))
        s = np.asarray(data.draw(st.lists(positive, min_size=shape[dim], max_size=shape[dim])))
        return s, dim, s.reshape([-1 if i == dim else 1 for i in range(len(shape))])
    divisors = [b for b in range(1, shape[0] + 1) if shape[0] % b == 0]
    blocks = data.draw(st.sampled_from(divisors))
    s = np.asarray(data.draw(st.lists(positive, min_size=blocks * shape[1], max_size=blocks * shape[1])))
    s = s.reshape(blocks, shape[1])
    return s, None, np.repeat(s, shape[0] // blocks, axis=0)


@SETTINGS
@given(data=st.data())
def test_quantize_dequantize(data):
    rdt = data.draw(st.sampled_from(sorted(REAL, key=str)))
    qdt = data.draw(st.sampled_from(sorted(QUANT, key=str)))
    shape = data.draw(shapes)
    x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-300, 300, width=32))).astype(REAL[rdt])
    scale, dim, full_scale = scale_layout(data, shape, qdt)
    scale_t = scale.astype(REAL[rdt])
    use_tensor = data.draw(st.booleans())
    scale_arg = tp.Tensor(scale_t) if use_tensor else scale.tolist()
    q = tp.quantize(tp.Tensor(x), scale_arg, qdt, dim=dim)
    assert q.dtype is qdt
    ref_q = quantize_ref(x, full_scale.astype(REAL[rdt]), qdt)
    ours_q = run(q)
    assert ours_q.dtype == np.dtype(QUANT[qdt][0])
    np.testing.assert_array_equal(ours_q.astype(np.float64), ref_q.astype(np.float64))

    d = tp.dequantize(q, scale_arg, rdt, dim=dim)
    assert d.dtype is rdt
    ref_d = (ref_q.astype(np.float64) * full_scale.astype(REAL[rdt]).astype(np.float64)).astype(REAL[rdt])
    np.testing.assert_array_equal(run(d).astype(np.float64), ref_d.astype(np.float64))


@SETTINGS
@given(data=st.data())
def test_cast_to_and_from_int4_float8(data):
    shape = data.draw(shapes)
    src = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int32, tp.bool]))
    qdt = data.draw(st.sampled_from([tp.int4, tp.float8]))
    if src is tp.bool:
        x = data.draw(hnp.arrays(np.bool_, shape))
    else:
        np_src = {tp.int32: np.int32, **REAL}[src]
        x = data.draw(hnp.arrays(np.float32, shape, elements=st.floats(-20, 20, width=32))).astype(np_src)
    q = tp.cast(tp.Tensor(x), qdt)
    assert q.dtype is qdt
    ref = quantize_ref(x.astype(np.float64), np.asarray(1.0), qdt)
    np.testing.assert_array_equal(run(q).astype(np.float64), ref.astype(np.float64))
    dst = data.draw(st.sampled_from([tp.float32, tp.float16, tp.bfloat16, tp.int32, tp.bool]
                                    + ([tp.int64] if qdt is tp.float8 else [])))
    back = tp.cast(q, dst)
    assert back.dtype is dst
    want = ref.astype(np.float64)
    want = (want != 0) if dst is tp.bool else np.trunc(want) if dst in (tp.int32, tp.int64) else want
    np.testing.assert_array_equal(run(back).astype(np.float64), np.asarray(want, dtype=np.float64))


def test_cast_rank0_and_int8_to_bool():
    assert tp.cast(tp.Tensor(2.6), tp.int4).tolist() == 3
    assert tp.cast(tp.cast(tp.Tensor(1.3), tp.float8), tp.float32).tolist() == pytest.approx(1.25)
    assert tp.cast(tp.Tensor(np.array([0, 3, -1], np.int8)), tp.bool).tolist() == [False, True, True]


@pytest.mark.parametrize("src, dst", [(tp.float8, tp.int4), (tp.float8, tp.int8), (tp.int8, tp.float8),
                                      (tp.int4, tp.float8), (tp.int4, tp.int8), (tp.int4, tp.int64)])
def test_refused_casts(src, dst):
    x = tp.cast(tp.ones((2,)), src)
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'cast'") as err:
        tp.cast(x, dst)
    assert f"from {src} to {dst}" in str(err.value)


def test_quantize_errors():
    x = tp.ones((4, 6))
    with pytest.raises(tp.TripyException, match="`scale` argument must be a constant in CPU memory.") as err:
        tp.quantize(x, tp.ones(()) * 2.0, tp.int8)
    assert err.value.location.file == __file__
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'quantize'"):
        tp.quantize(tp.ones((2,), dtype=tp.int32), 1.0, tp.int8)
    with pytest.raises(tp.TripyException, match="Unsupported data type in quantize op."):
        tp.quantize(x, 1.0, tp.int32)
    with pytest.raises(tp.TripyException, match="Scale dtype does not match expected dtype"):
        tp.quantize(x, tp.Tensor(np.float16(1.0)), tp.int8)
    with pytest.raises(tp.TripyException, match="If dim is given, scale must be a 1-D tensor"):
        tp.quantize(x, 1.0, tp.int8, dim=0)
    with pytest.raises(tp.TripyException, match="one entry per channel"):
        tp.quantize(x, [1.0, 2.0], tp.int8, dim=1)
    with pytest.raises(tp.TripyException, match="Scale must be a scalar tensor in per-tensor"):
        tp.quantize(x, [1.0] * 6, tp.int8)
    with pytest.raises(tp.TripyException, match="Unsupported data type in block-wise"):
        tp.quantize(x, [[1.0] * 6] * 2, tp.int8)
    with pytest.raises(tp.TripyException, match="Input must be a 2-D tensor in block-wise"):
        tp.quantize(tp.ones((2, 2, 6)), [[1.0] * 6] * 2, tp.int4)
    with pytest.raises(tp.TripyException, match="Scale dim 0 must divide input dim 0"):
        tp.quantize(x, [[1.0] * 6] * 3, tp.int4)


def test_dequantize_errors():
    q = tp.quantize(tp.ones((2, 3)), 1.0, tp.int8)
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'dequantize'"):
        tp.dequantize(tp.ones((2,)), 1.0, tp.float32)
    with pytest.raises(tp.TripyException, match="Unsupported data type in dequantize op."):
        tp.dequantize(q, 1.0, tp.int32)
    with pytest.raises(tp.TripyException, match="Scale dtype does not match expected dtype"):
        tp.dequantize(q, tp.Tensor(np.float32(1.0)), tp.float16)


def test_quantized_linear_style_graph_compiles():
    """Per-channel weight quantization as in Tripy's quantized Linear: q -> dq -> matmul, with a dynamic batch."""
    w = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], np.float32)
    scale = np.abs(w).max(axis=1) / 127

    def f(x):
        wq = tp.dequantize(tp.quantize(tp.Tensor(w), scale.tolist(), tp.int8, dim=0), scale.tolist(), tp.float32,
                           dim=0)
        return x @ tp.transpose(wq, 0, 1)

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)])
    x = np.ones((3, 3), np.float32)
    ref_w = np.clip(np.rint(w / scale[:, None]), -128, 127) * scale[:, None]
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x).eval())), x @ ref_w.T, rtol=1e-6)


@pytest.mark.parametrize("shape", [(1, 1), (2, 3)])
def test_block_quantize_with_blocks_of_one(shape):
    """A block scale of the input's own shape (blocks of one element; hypothesis found (1, 1) failing on onnxruntime,
    whose lowering looked for the one dim where input and scale differ)."""
    x = np.linspace(-20, 20, int(np.prod(shape)), dtype=np.float32).reshape(shape).astype(ml_dtypes.bfloat16)
    scale = np.full(shape, 0.125, np.float32).astype(ml_dtypes.bfloat16)
    q = tp.quantize(tp.Tensor(x), tp.Tensor(scale), tp.int4)
    ref = quantize_ref(x, scale, tp.int4)
    np.testing.assert_array_equal(run(q).astype(np.float64), ref.astype(np.float64))
    d = tp.dequantize(q, tp.Tensor(scale), tp.bfloat16)
    np.testing.assert_array_equal(run(d).astype(np.float64), (ref.astype(np.float64) * 0.125))
