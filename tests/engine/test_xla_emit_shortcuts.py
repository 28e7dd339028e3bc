"""The direct StableHLO path's shortcuts (engine/xla/direct.py, xla_emit.py) compute what the translations do.

Constants sharing one weights attribute are read once, static reshapes of them are reused, a read-only constant
is emitted once however many ops use it, attribute values are remembered per attribute object and per op class
(absent ones), and the report's StableHLO/HLO texts are printed when first read. Each test compares the direct
path with the jax-traced path (bits) or numpy, on programs built so that a wrong shortcut gives other numbers or
another error."""

from __future__ import annotations

import numpy as np
import pytest
from test_xla_programs import ProgramBuilder, build, run_np

from tripy_lab.core.errors import TripyException
from tripy_lab.mlir import dialect as d
from tripy_lab.mlir.attrs import tensor_type

jax = pytest.importorskip("jax")

from tripy_lab.engine import xla  # noqa: E402


def both_paths(prog, args, monkeypatch) -> tuple[list, list, object]:
    """(direct outputs, jax-traced outputs, the direct build)."""
    monkeypatch.setattr(xla, "DIRECT_STABLEHLO", True)
    direct = build(prog)
    assert {b.path for b in direct.executables().values()} == {"direct"}, direct.report.notes
    monkeypatch.setattr(xla, "DIRECT_STABLEHLO", False)
    traced = build(prog)
    return run_np(direct, *args), run_np(traced, *args), direct


def same_bits(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))


def shared(b: ProgramBuilder, source, value, elem: str):
    """A constant op whose weights attribute is the very object of ``source``'s op (as the lowering shares them)."""
    op = d.ConstantOp(np.asarray(value), elem)
    op.properties["weights"] = source.owner.properties["weights"]
    return b.add(op)


def emitted(compiled) -> str:
    (built,) = compiled.executables().values()
    return built.lowered.as_text()


def test_constants_sharing_an_attribute_and_their_reshapes_give_each_ops_value(monkeypatch):
    b = ProgramBuilder()
    x = b.input("x", (2, 2))
    c = b.const(np.array([1.5, -2.0, 3.25, 4.0], np.float32))
    c2 = shared(b, c, np.zeros(4, np.float32), "f32")  # the value is the attribute's, not these zeros
    s22, s41 = b.const(np.array([2, 2], np.int32)), b.const(np.array([4, 1], np.int32))
    s22b = shared(b, s22, np.zeros(2, np.int32), "i32")
    r1 = b.add(d.ReshapeOp(c, tensor_type((2, 2), "f32"), s22))
    r2 = b.add(d.ReshapeOp(c2, tensor_type((2, 2), "f32"), s22b))  # same array, same shape: the reused view
    r3 = b.add(d.ReshapeOp(c2, tensor_type((4, 1), "f32"), s41))  # same array, another shape
    y = b.add(d.ElementWiseOp(b.add(d.ElementWiseOp(x, r1, "kPROD")), r2, "kSUM"))
    z = b.add(d.ElementWiseOp(b.add(d.ReshapeOp(x, tensor_type((4, 1), "f32"), s41)), r3, "kSUB"))
    prog = b.program(y, z)
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    got, want, compiled = both_paths(prog, [a], monkeypatch)
    same_bits(got, want)
    k = np.array([[1.5, -2.0], [3.25, 4.0]], np.float32)
    np.testing.assert_array_equal(got[0], a * k + k)
    np.testing.assert_array_equal(got[1], a.reshape(4, 1) - k.reshape(4, 1))
    # one stablehlo.constant for the shared 2x2 value (both reshapes read the same read-only array), one 4x1
    text = emitted(compiled)
    assert text.count("stablehlo.constant") == 2, text


def test_a_writable_static_result_is_not_taken_for_another_by_identity(monkeypatch):
    """Static values computed in numpy (writable arrays) are emitted by value, never by object identity."""
    b = ProgramBuilder()
    x = b.input("x", (3,))
    c = b.const(np.array([1.0, 2.0, 3.0], np.float32))
    neg = b.add(d.UnaryOp(c, "kNEG"))  # folded in numpy: a new writable array
    twice = b.add(d.ElementWiseOp(c, c, "kSUM"))
    prog = b.program(b.add(d.ElementWiseOp(b.add(d.ElementWiseOp(x, neg, "kPROD")), twice, "kSUM")))
    a = np.array([0.5, -1.0, 2.0], np.float32)
    got, want, _ = both_paths(prog, [a], monkeypatch)
    same_bits(got, want)
    np.testing.assert_array_equal(got[0], a * -np.array([1, 2, 3], np.float32) + np.array([2, 4, 6], np.float32))


def test_static_reshape_errors_and_inferred_dims_are_the_translations(monkeypatch):
    b = ProgramBuilder()
    x = b.input("x", (2, 2))
    c = b.const(np.arange(4, dtype=np.float32))
    r = b.add(d.ReshapeOp(c, tensor_type((2, 2), "f32"), b.const(np.array([-1, 2], np.int32))))
    prog = b.program(b.add(d.ElementWiseOp(x, r, "kSUM")))
    a = np.ones((2, 2), np.float32)
    got, want, _ = both_paths(prog, [a], monkeypatch)
    same_bits(got, want)
    np.testing.assert_array_equal(got[0], a + np.arange(4, dtype=np.float32).reshape(2, 2))

    b = ProgramBuilder()
    x = b.input("x", (2, 2))
    c = b.const(np.arange(4, dtype=np.float32))
    bad = b.add(d.ReshapeOp(c, tensor_type((None, None), "f32"), b.const(np.array([5, 5], np.int32))))
    prog = b.program(b.add(d.ElementWiseOp(x, bad, "kSUM")))
    errors = []
    for direct in (True, False):
        monkeypatch.setattr(xla, "DIRECT_STABLEHLO", direct)
        with pytest.raises(TripyException) as info:
            build(prog)
        errors.append(info.value.summary)
    assert errors[0] == errors[1] and "cannot reshape (4,) to (5, 5)" in errors[0], errors


def test_attribute_values_are_each_ops_own(monkeypatch):
    """Ops of one class with other attribute values (and an absent one, read as the class's default)."""
    b = ProgramBuilder()
    x = b.input("x", (2, 3))
    outs = [b.add(d.ActivationOp(x, "kLEAKY_RELU", alpha=0.1)), b.add(d.ActivationOp(x, "kLEAKY_RELU", alpha=0.3)),
            b.add(d.ActivationOp(x, "kRELU")), b.add(d.ActivationOp(x, "kLEAKY_RELU", alpha=0.1)),
            b.add(d.ElementWiseOp(x, x, "kMAX")), b.add(d.ElementWiseOp(x, x, "kSUM"))]
    prog = b.program(*outs)
    a = np.array([[-2.0, -0.5, 0.0], [0.5, 1.0, -3.0]], np.float32)
    got, want, _ = both_paths(prog, [a], monkeypatch)
    same_bits(got, want)
    leaky = [np.where(a >= 0, a, np.float32(al) * a) for al in (0.1, 0.3)]
    for g, w in zip(got, [leaky[0], leaky[1], np.maximum(a, 0), leaky[0], a, a + a]):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_report_texts_are_printed_when_first_read(monkeypatch):
    calls = []
    real = jax.stages.Lowered.as_text

    def counted(self, *a, **k):
        calls.append(True)
        return real(self, *a, **k)

    monkeypatch.setattr(jax.stages.Lowered, "as_text", counted)
    monkeypatch.setattr(xla, "DIRECT_STABLEHLO", True)
    b = ProgramBuilder()
    x = b.input("x", (2, 3))
    compiled = build(b.program(b.add(d.UnaryOp(x, "kEXP"))))
    assert calls == []  # the build printed no module
    stages = compiled.report.extra_stages
    assert sorted(stages) == ["hlo", "stablehlo"] and len(stages) == 2
    assert "stablehlo.exponential" in stages["stablehlo"] and "func.func" in stages["stablehlo"]
    assert stages["hlo"].startswith("HloModule") and len(calls) == 1
    assert dict(stages) == {"stablehlo": stages["stablehlo"], "hlo": stages["hlo"]} and len(calls) == 1  # kept


def test_the_program_digest_tells_op_sequences_apart_with_any_names():
    from types import SimpleNamespace

    from tripy_lab.engine.xla.cache import XlaStore

    prog = SimpleNamespace(arg_names=["x"], resources={})
    digest = XlaStore.program_digest
    seqs = [[("tensorrt.a", "%t0"), ("tensorrt.b", "%t1")], [("tensorrt.a", "%t0\x00tensorrt.b"), ("%t1", "")],
            [("tensorrt.a", "%t0\x00tensorrt.b\x00%t1"), ("", "")], [("tensorrt.a", ""), ("", "%t0")],
            [("tensorrt.a", "%t0"), ("tensorrt.b", "%t1"), ("", "")], []]
    digests = [digest(prog, s) for s in seqs]
    assert len(set(digests)) == len(seqs), digests  # NULs inside names fall back to the unambiguous form
    assert digest(prog, list(seqs[0])) == digests[0]
    assert digest(SimpleNamespace(arg_names=["y"], resources={}), seqs[0]) != digests[0]
