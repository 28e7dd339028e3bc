"""The Linear + epilogue kernel (engine/xla/pallas.py, Pallas's interpreter on the CPU), its rewrite of
``gelu(Linear(x))`` and of a packed q/k/v projection (engine/xla/linear.py, xla_attention.packed_qkv), and
the size rule of attention fusion under "auto" (xla_attention.FUSE_MIN_SCORES)."""

import math

import numpy as np
import pytest
from scipy.special import erfc
from test_xla_attention import packed_attention_of

import tripy_lab as tp
from tripy_lab.engine.xla import attention as xla_attention
from tripy_lab.engine.xla import linear as xla_linear
from tripy_lab.engine.xla import pallas as xla_pallas

jax = pytest.importorskip("jax")
jnp = jax.numpy


@pytest.fixture
def modes():
    old = xla_linear.MODE, xla_attention.MODE
    yield
    xla_linear.MODE, xla_attention.MODE = old


def test_gelu_erf_keeps_relative_accuracy_in_both_tails():
    x = np.linspace(-12, 12, 24001).astype(np.float32)
    got = np.asarray(xla_pallas.gelu_erf(jnp.asarray(x)), np.float64)
    want = 0.5 * x.astype(np.float64) * erfc(-x.astype(np.float64) / math.sqrt(2))
    big = np.abs(want) > 1e-30
    assert np.max(np.abs(got[big] - want[big]) / np.abs(want[big])) < 1e-4  # f16 ulp: 1e-3
    assert np.max(np.abs(got[~big] - want[~big])) < 1e-30


@pytest.mark.parametrize("w_nk", [True, False])
@pytest.mark.parametrize("parts", [1, 3])
def test_kernel_matches_numpy(w_nk, parts):
    rng = np.random.default_rng(0)
    m, k, n = 48, 64, 96
    x = rng.standard_normal((m, k)).astype(np.float16)
    w = (rng.standard_normal((n, k)) * 0.1).astype(np.float16)
    b = rng.standard_normal(n).astype(np.float16)
    act = "gelu_erf" if parts == 1 else "none"
    out = xla_pallas.linear(jnp.asarray(x), jnp.asarray(w if w_nk else w.T.copy()), jnp.asarray(b), w_nk=w_nk,
                            act=act, parts=parts, interpret=True)
    y = x.astype(np.float64) @ w.T.astype(np.float64) + b
    if act == "gelu_erf":
        y = 0.5 * y * erfc(-y / math.sqrt(2))
    got = np.concatenate([np.asarray(o, np.float64) for o in (out if parts > 1 else [out])], axis=1)
    assert got.shape == (m, n)
    np.testing.assert_allclose(got, y, rtol=2e-3, atol=2e-3)  # one f16 rounding of an f32 result


def test_tiles_are_halved_to_divide_and_refused_when_none_does():
    t = xla_pallas.tiles_for(48, 96, 64)
    assert (48 % t.bm, 96 % t.bn, 64 % t.bk) == (0, 0, 0) and min(t.bm, t.bn, t.bk) >= 16
    assert xla_pallas.tiles_for(8, 96, 64) is None  # M below Triton's smallest dot
    assert xla_pallas.tiles_for(48, 96, 24) is None  # K = 24: no power of two >= 16 divides it
    assert xla_pallas.tiles_for(48, 100, 64, parts=3) is None  # N not split evenly


W = (np.random.default_rng(1).standard_normal((128, 64)) * 0.1).astype(np.float16)
BIAS = np.random.default_rng(2).standard_normal(128).astype(np.float16)


def mlp(x):
    fc = tp.Linear(64, 128, dtype=tp.float16)
    fc.weight, fc.bias = tp.Tensor(W), tp.Tensor(BIAS)
    return tp.gelu(fc(x))


def compile_mlp(mode, shape=(2, 16, 64)):
    xla_linear.MODE = mode
    return tp.compile(mlp, args=[tp.InputInfo(shape, tp.float16)], engine="xla")


def test_linear_gelu_rewrite_gives_the_unfused_numbers(modes):
    x = np.random.default_rng(3).standard_normal((2, 16, 64)).astype(np.float16)
    fused, unfused = compile_mlp("interpret"), compile_mlp("off")
    notes = " ".join(fused.stages["built"].report.notes)
    assert "linear + GELU 1 of 1 pattern(s) fused (pallas interpreted)" in notes, notes
    assert "linear + GELU" not in " ".join(unfused.stages["built"].report.notes)
    a, b = np.asarray(fused(x)).astype(np.float32), np.asarray(unfused(x)).astype(np.float32)
    np.testing.assert_allclose(a, b, rtol=4e-3, atol=4e-3)  # the unfused program rounds twice more
    ref = tp.compile(mlp, args=[tp.InputInfo((2, 16, 64), tp.float16)], engine="reference")
    np.testing.assert_allclose(a, np.asarray(ref(x)).astype(np.float32), rtol=4e-3, atol=4e-3)


def test_linear_gelu_stays_unfused_when_no_tile_divides(modes):
    exe = compile_mlp("interpret", shape=(2, 3, 64))  # M = 6
    assert "linear + GELU 0 of 1 pattern(s) fused" in " ".join(exe.stages["built"].report.notes)


def test_linear_gelu_is_not_matched_when_the_pre_activation_has_another_use(modes):
    def leaky(x):
        fc = tp.Linear(64, 128, dtype=tp.float16)
        fc.weight, fc.bias = tp.Tensor(W), tp.Tensor(BIAS)
        y = fc(x)
        return tp.gelu(y), y

    xla_linear.MODE = "interpret"
    exe = tp.compile(leaky, args=[tp.InputInfo((2, 16, 64), tp.float16)], engine="xla")
    assert not any("linear + GELU" in n for n in exe.stages["built"].report.notes)


def test_off_by_default_and_auto_fuses_on_gpus_only(modes):
    assert xla_linear.MODE == "off"
    exe = compile_mlp("auto", shape=(1, 32, 64))  # batch 1: emitted natively where nothing is fused
    notes = " ".join(exe.stages["built"].report.notes)
    if jax.default_backend() == "cpu":
        assert "linear + GELU" not in notes and "traced through jax" not in notes, notes
    else:
        assert "linear + GELU 1 of 1 pattern(s) fused (pallas)" in notes, notes


H, D, T = 2, 16, 16
WQKV = (np.random.default_rng(4).standard_normal((3 * H * D, 32)) / 5).astype(np.float32)
BQKV = np.random.default_rng(5).standard_normal(3 * H * D).astype(np.float32)
CAUSAL = np.tril(np.ones((T, T), np.float32))
packed_attention = packed_attention_of(WQKV, BQKV, H, D, CAUSAL)


def test_packed_qkv_by_one_kernel_with_three_outputs(modes):
    x = np.random.default_rng(6).standard_normal((2, T, 32)).astype(np.float32)
    xla_attention.MODE = "xla"
    xla_linear.MODE = "interpret"
    fused = tp.compile(packed_attention, args=[tp.InputInfo((2, T, 32), tp.float32)], engine="xla")
    xla_attention.MODE = xla_linear.MODE = "off"
    unfused = tp.compile(packed_attention, args=[tp.InputInfo((2, T, 32), tp.float32)], engine="xla")
    notes = " ".join(fused.stages["built"].report.notes)
    assert "attention 1 of 1 pattern(s) fused (xla, split qkv (kernel), causal)" in notes, notes
    np.testing.assert_allclose(np.asarray(fused(x)), np.asarray(unfused(x)), rtol=1e-5, atol=1e-5)
    kinds = {r.kind for r in fused.stages["built"].layers}
    assert "custom call" not in kinds, kinds


def _match_and_env(dtype, batch):
    """The attention match of ``packed_attention`` and an env with stand-in q, k, v of ``dtype``."""
    from tripy_lab import pipeline

    lowered = pipeline.trace(packed_attention, args=[tp.InputInfo((batch, T, 32), tp.float32)]).lower()
    program = lowered.program
    (m,) = xla_attention.find(program.ops())
    env = {v: jnp.zeros((batch, H, T, D), dtype) for v in (m.q, m.k, m.v)}
    return m, env, program


def test_auto_fuses_attention_only_when_the_scores_are_big_enough(modes, monkeypatch):
    m, env, program = _match_and_env(jnp.float16, batch=4)
    assert xla_attention.scores_size(m, lambda v: env[v].shape) == 4 * H * T * T
    xla_attention.MODE = "auto"
    assert xla_attention.plan(m, env, "gpu", program=program) is None  # 2048 scores < FUSE_MIN_SCORES
    monkeypatch.setattr(xla_attention, "FUSE_MIN_SCORES", 4 * H * T * T)
    how = xla_attention.plan(m, env, "gpu", program=program)
    assert how == {"scale": pytest.approx(1 / math.sqrt(D)), "causal": True, "implementation": "cudnn"}
    assert xla_attention.plan(m, env, "cpu", program=program) is None
    assert xla_attention.plan(m, env, "gpu", mode="cudnn", program=program) is not None  # explicit: any size
    monkeypatch.setattr(xla_attention, "FUSE_MIN_SCORES", 4 * H * T * T + 1)
    assert xla_attention.plan(m, env, "gpu", program=program) is None


def test_direct_emission_refuses_scores_big_enough_to_fuse(monkeypatch):
    """On a GPU under "auto", StableHLO is emitted op by op unless an attention would be fused (then the
    emitter raises Fallback and jax's path fuses it)."""
    from tripy_lab.engine.xla.direct import emit_stablehlo
    from tripy_lab.engine.xla.emit import Fallback

    def half_attention(q, k, v):
        s = tp.masked_fill((q @ tp.transpose(k, -1, -2)) * 0.25, tp.Tensor(CAUSAL) == 0, float("-inf"))
        return tp.softmax(s, dim=-1) @ v

    info = tp.InputInfo((4, H, T, D), tp.float16)
    exe = tp.compile(half_attention, args=[info, info, info], engine="xla")
    engine = exe._compiled
    op_at = {p.index: p.op for p in engine._plans}
    small = {op_at[i].results[0]: m for m in engine._attention.values() for i in m.ops
             if op_at[i].name == "tensorrt.softmax"}
    assert len(small) == 1
    shapes, pnames = [(4, H, T, D)] * 3, ["q", "k", "v"]
    text, _ = emit_stablehlo(engine, shapes, [], pnames, small)
    assert "stablehlo.exponential" in text
    monkeypatch.setattr(xla_attention, "FUSE_MIN_SCORES", 4 * H * T * T)
    with pytest.raises(Fallback, match="FUSE_MIN_SCORES"):
        emit_stablehlo(engine, shapes, [], pnames, small)


def test_a_transposed_operand_weight_is_read_as_n_by_k(modes):
    """``matrix_multiply`` with op1 = kTRANSPOSE (as an edited MLIR may have it) and a non-square W."""
    from tripy_lab import pipeline
    from tripy_lab.pipeline import Lowered

    def f(x, w, b):
        return tp.gelu(x @ tp.transpose(w, 0, 1) + b)

    infos = [tp.InputInfo((32, 64), tp.float16), tp.InputInfo((128, 64), tp.float16), tp.InputInfo((128,), tp.float16)]
    lowered = pipeline.trace(f, args=infos).lower()
    text = lowered.as_text()
    old = ("op1 = #tensorrt.matrix_operation<kNONE>} ins(%arg0, %0 : tensor<32x64xf16>, tensor<64x128xf16>)")
    assert old in text
    edited = Lowered.from_text(text.replace(old, "op1 = #tensorrt.matrix_operation<kTRANSPOSE>} "
                                                 "ins(%arg0, %arg1 : tensor<32x64xf16>, tensor<128x64xf16>)"))
    xla_linear.MODE = "interpret"
    built = edited.build(engine="xla", shapes="opt")
    assert any("linear + GELU 1 of 1 pattern(s) fused (pallas interpreted)" in n for n in built.report.notes)
    rng = np.random.default_rng(7)
    args = [rng.standard_normal((32, 64)).astype(np.float16), (rng.standard_normal((128, 64)) * 0.1).astype(np.float16),
            rng.standard_normal(128).astype(np.float16)]
    got = np.asarray(built.executable()(*args)).astype(np.float32)
    want = np.asarray(edited.build(engine="reference").executable()(*args)).astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=4e-3, atol=4e-3)
