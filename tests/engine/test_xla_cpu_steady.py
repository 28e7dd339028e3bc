"""What the xla engine emits for a GPT on CPU (issue 31 item 4, CPU steady state), pinned without timing:
f32 dots at DEFAULT precision on CPU (XLA computes them in f32 either way; HIGHEST cost 7-9 % on small
GEMMs) with the same bits as the jax path's HIGHEST dots. ``benchmarks/bench_cpu_steady.py`` measures the speed."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tripy_lab as tp

jax = pytest.importorskip("jax")

from tripy_lab.engine import xla  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_store(tmp_path, monkeypatch):
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path / "xla"))


def _gpt_exe(direct: bool, monkeypatch):
    import bench_onnx as bench  # benchmarks/ (tests/engine/conftest.py)
    model = bench.GPT(vocab=50, ctx=16, d=32, heads=4, layers=2)
    bench.randomize(model)
    monkeypatch.setattr(xla, "DIRECT_STABLEHLO", direct)
    return tp.compile(model, args=[tp.InputInfo((1, 8), tp.int32)], engine="xla")


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="the CPU's emission")
def test_cpu_f32_dots_default_precision_same_bits(monkeypatch):
    ids = tp.Tensor(np.random.default_rng(0).integers(0, 50, (1, 8)).astype(np.int32))
    direct = _gpt_exe(True, monkeypatch)
    built = list(direct.stages["built"].compiled.executables().values())
    assert [b.path for b in built] == ["direct"]
    text = built[0].lowered.as_text()
    dots = re.findall(r"dot_general.*", text)
    assert len(dots) >= 9, len(dots)  # 4 Linears per block, 2 attention matmuls per block, the head
    assert "HIGHEST" not in text and all("DEFAULT" in d for d in dots if "precision" in d)
    out = np.asarray(direct(ids))
    traced = _gpt_exe(False, monkeypatch)  # the jax path keeps Precision.HIGHEST
    assert "HIGHEST" in list(traced.stages["built"].compiled.executables().values())[0].lowered.as_text()
    np.testing.assert_array_equal(out.view(np.uint32), np.asarray(traced(ids)).view(np.uint32))
