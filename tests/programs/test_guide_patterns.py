"""Patterns from Tripy's introduction, compiler and quantization guides and its SDPA perf test: keyword calls,
a GEGLU module with `tp.split(proj, 2, proj.rank - 1)`, NamedDimensions shared across inputs and repeated in
one InputInfo, `tp.compile(..., kwargs={...})`, manual quantize -> dequantize, the pure-function pitfall."""

import numpy as np
import pytest

import tripy_lab as tp

from .weights import randn


def _gelu(x):
    from math import erf, sqrt

    return x * 0.5 * (1 + np.vectorize(erf)(x / sqrt(2)))


class GEGLU(tp.Module):
    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.proj = tp.Linear(dim_in, dim_out * 2)
        self.dim_out = dim_out

    def forward(self, x):
        proj = self.proj(x)
        x, gate = tp.split(proj, 2, proj.rank - 1)
        return x * tp.gelu(gate)


def test_introduction_basics():
    c = tp.ones((2, 3)) + tp.ones((2, 3))
    assert tp.equal(c, tp.full((2, 3), 2.0))
    inp = tp.iota(shape=(1, 2), dim=1, dtype=tp.float32)
    assert inp.tolist() == [[0.0, 1.0]]


def test_compiler_guide_geglu_dynamic_then_saved(check_program):
    rng = np.random.default_rng(4)
    layer = GEGLU(2, 8)
    w, b = randn(rng, 16, 2), randn(rng, 16)
    layer.proj.weight, layer.proj.bias = tp.Tensor(w), tp.Tensor(b)

    def want(x):
        p = x @ w.T + b
        return p[:, :8] * _gelu(p[:, 8:])

    x1, x2 = np.array([[1.0, 2.0]], np.float32), np.array([[1.0, 2.0], [2.0, 3.0]], np.float32)
    check_program(layer, [tp.InputInfo(shape=((1, 2, 4), 2), dtype=tp.float32)],
                  [((x1,), want(x1)), ((x2,), want(x2))])


def test_named_dimensions_shared_and_repeated(check_program):
    batch = tp.NamedDimension("batch", 1, 2, 4)
    check_program(lambda a, b: a + b, [tp.InputInfo(shape=(batch, 2), dtype=tp.float32)] * 2,
                  [((np.ones((3, 2), np.float32), np.ones((3, 2), np.float32)), np.full((3, 2), 2.0, np.float32))])
    window = tp.NamedDimension("window_size", 3, 5, 7)
    inp = tp.InputInfo((1, window, window), dtype=tp.float32)
    assert inp.dimension_names == {1: "window_size", 2: "window_size"} and inp.shape_bounds.max == (1, 7, 7)
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 4)
    check_program(lambda t: tp.transpose(t, 1, 2), [inp], [((x,), x.transpose(0, 2, 1))])


class SDPA(tp.Module):
    def forward(self, query, key, value):
        embedding_dim = query.shape[-1]
        qk = query @ (tp.transpose(key, -2, -1) / tp.sqrt(tp.cast(embedding_dim, query.dtype)))
        return tp.cast(tp.softmax(qk, -1), query.dtype) @ value


@pytest.mark.parametrize("dtype", [tp.float32, tp.float16])
def test_sdpa_compiled_from_a_kwargs_dict(check_program, dtype):
    batch = tp.NamedDimension("batch", 1, 2, 2)
    infos = {name: tp.InputInfo(shape=(batch, 1, 8, 4), dtype=dtype) for name in ("query", "key", "value")}
    rng = np.random.default_rng(6)
    q, k, v = (randn(rng, 2, 1, 8, 4).astype(np.float16 if dtype is tp.float16 else np.float32) for _ in range(3))
    qf, kf, vf = (a.astype(np.float32) for a in (q, k, v))
    att = qf @ kf.transpose(0, 1, 3, 2) / 2.0
    att = np.exp(att - att.max(-1, keepdims=True))
    want = (att / att.sum(-1, keepdims=True)) @ vf
    tol = 2e-2 if dtype is tp.float16 else 1e-5
    exe = check_program(SDPA(), [], [((q, k, v), want)], rtol=tol, atol=tol, kwargs=infos)
    assert list(exe.input_infos) == ["query", "key", "value"]


def test_quantization_guide_manual_qdq(check_program):
    rng = np.random.default_rng(9)
    w, b = randn(rng, 6, 4), randn(rng, 6)
    input_scale = np.float32(0.01)
    weight_scale = (np.abs(w).max(axis=1) / 127).astype(np.float32)

    def qlinear(x):
        x = tp.dequantize(tp.quantize(x, tp.Tensor(input_scale), dtype=tp.int8), tp.Tensor(input_scale),
                          dtype=tp.float32)
        weight = tp.quantize(tp.Tensor(w), tp.Tensor(weight_scale), dtype=tp.int8, dim=0)
        weight = tp.dequantize(weight, tp.Tensor(weight_scale), dtype=tp.float32, dim=0)
        return x @ tp.transpose(weight, 0, 1) + tp.Tensor(b)

    x = randn(rng, 1, 4)
    xq = np.clip(np.rint(x / input_scale), -128, 127) * input_scale
    wq = np.clip(np.rint(w / weight_scale[:, None]), -128, 127) * weight_scale[:, None]
    check_program(qlinear, [tp.InputInfo((1, 4), tp.float32)], [((x,), xq @ wq.T + b)], rtol=1e-5, atol=1e-5)


def test_pure_function_pitfall_is_a_clear_error():
    def add_times_two(a, b):
        c = a + b
        print(f"c : {c}")
        return c + a + b

    info = tp.InputInfo(shape=(1, 2), dtype=tp.float32)
    with pytest.raises(tp.TripyException, match="Cannot evaluate a tensor while compiling"):
        tp.compile(add_times_two, args=[info, info])
