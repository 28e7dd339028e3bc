"""Profile builds on GPUs tune GEMMs at opt only (``xla.TUNE_OPT_ONLY``): min and max compile with
``xla_gpu_autotune_level=0``. The device check is GPU-only, so on CPU the plumbing is driven by patching
``XlaCompiled._untuned``; ``tests/gpu/test_gpu_xla.py`` checks the real decision on the H200."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.engine import xla
from tripy_lab.engine.xla import build as xla_build

pytest.importorskip("jax")


def f(x):
    return tp.tanh(x) * 2.0 + x


def lowered():
    return pipeline.trace(f, args=[tp.InputInfo(((1, 4, 8), 3), tp.float32)]).lower()


def untuned_notes(built) -> list[str]:
    return [n for n in built.report.notes if "without GEMM autotuning" in n]


def test_cpu_builds_tune_every_point():
    built = lowered().build(engine="xla", shapes="profile")
    gpu = built.compiled.device.platform != "cpu"
    assert built.compiled._untuned("min", 3) is gpu  # XLA's CPU compiler has no GEMM autotuning to skip
    assert built.compiled._untuned("opt", 3) is False and built.compiled._untuned("min", 1) is False
    assert len(untuned_notes(built)) == (2 if gpu else 0)


def test_min_and_max_untuned_opt_tuned_and_the_store_keeps_them_apart(monkeypatch, tmp_path):
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path))
    seen = []
    real = xla_build.XlaCompiled._untuned

    def untuned(self, why, n):
        seen.append(why)
        return why in ("min", "max") and n > 1

    monkeypatch.setattr(xla_build.XlaCompiled, "_untuned", untuned)
    low = lowered()
    built = low.build(engine="xla", shapes="profile")
    assert sorted(set(seen)) == ["max", "min", "opt"]
    notes = untuned_notes(built)
    assert sorted(n.split(":")[0] for n in notes) == ["x=1x3", "x=8x3"], notes  # min and max, not opt (4x3)
    exe = built.executable()
    for n in (1, 4, 8):
        x = np.linspace(-2, 2, n * 3, dtype=np.float32).reshape(n, 3)
        np.testing.assert_allclose(np.asarray(exe(x).eval()), np.tanh(x) * 2 + x, rtol=1e-6)
    assert built.report.cache["persistent_misses"] == 3

    # a tuned build of the same signatures must not load the untuned entries (the option is part of the key)
    monkeypatch.setattr(xla_build.XlaCompiled, "_untuned", real)
    monkeypatch.setattr(xla, "TUNE_OPT_ONLY", False)  # every point tuned, on a GPU too
    again = low.build(engine="xla", shapes="profile")
    assert again.report.cache["persistent_hits"] == 1 and again.report.cache["persistent_misses"] == 2


def test_a_profile_point_requested_by_shape_is_tuned(monkeypatch):
    monkeypatch.setattr(xla_build.XlaCompiled, "_untuned", lambda self, why, n: why in ("min", "max") and n > 1)
    built = lowered().build(engine="xla", shapes=[{"x": (8, 3)}, {"x": (2, 3)}])
    assert [n.split(":")[0] for n in untuned_notes(built)] == ["x=1x3"]  # max (8x3) was asked for: tuned
    assert any("(max, requested)" in n for n in built.report.notes), built.report.notes
    assert len(built.report.cache["shapes_built"]) == 4


def test_tuned_points_lower_first_then_the_biggest(monkeypatch):
    """The tuned compile is the longest (GEMM autotuning), so its signature is lowered, and starts compiling, first;
    the untuned ones follow, biggest first."""
    monkeypatch.setattr(xla_build.XlaCompiled, "_untuned", lambda self, why, n: why in ("min", "max") and n > 1)
    lowered_order = []
    real = xla_build.XlaCompiled._lower

    def lower(self, shapes, dims):
        lowered_order.append(tuple(shapes[0]))
        return real(self, shapes, dims)

    monkeypatch.setattr(xla_build.XlaCompiled, "_lower", lower)
    built = lowered().build(engine="xla", shapes="profile")
    assert lowered_order == [(4, 3), (8, 3), (1, 3)]  # opt, then max, then min
    assert built.report.cache["shapes_built"][0].startswith("x=4x3")  # registered in the order asked: opt first
    monkeypatch.setattr(xla_build.XlaCompiled, "_untuned", lambda self, why, n: False)  # all tuned (CPU): biggest first
    lowered_order.clear()
    lowered().build(engine="xla", shapes="profile")
    assert lowered_order == [(8, 3), (4, 3), (1, 3)]
