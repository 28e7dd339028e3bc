"""The Engine tab's memory line and column (issue 29, item 10), live and in the static snapshot: one renderer."""

from __future__ import annotations

import html
import re

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.memory import fmt_bytes, layer_bytes
from tripy_lab.lab.views import snapshot, tabs

pytest.importorskip("pandas")


def _compile(engine: str):
    w = np.arange(12 * 5, dtype=np.float32).reshape(12, 5) / 60

    def f(x):
        return tp.relu(x @ tp.Tensor(w)) * 2.0

    return tp.compile(f, args=[tp.InputInfo(((1, 3, 6), 12), tp.float32)], engine=engine)


def _memory_text(page: str) -> str:
    m = re.search(r"<div class=['\"]tripy-memory['\"][^>]*>(.*?)<div class=['\"]tripy-layers", page, re.S)
    assert m, "no memory line"
    return html.unescape(re.sub(r"<[^>]+>", " ", m.group(1)))


def test_xla_engine_tab_shows_the_total_live_and_in_the_snapshot():
    pytest.importorskip("jax")
    exe = _compile("xla")
    built = exe.stages["built"]
    uses = built.memory()
    opt = uses[0]
    view = tabs.EngineView.of(built)
    live = _memory_text(view.html(tabs.LIVE))
    static = _memory_text(snapshot.snapshot_html("exe", snapshot.executable_panes(exe)))
    for text in (live, static):
        assert f"memory at opt (x=3x12): {fmt_bytes(opt.total)} = " in text
        assert all(f"{name} {fmt_bytes(n)}" in text for name, n in opt.parts.items() if n)
        assert f"outputs {fmt_bytes(3 * 5 * 4)}" in text  # numpy's bytes of the f32[3, 5] result
        for other in uses[1:]:  # the other built shapes' totals
            assert f"{other.shape} {fmt_bytes(other.total)}" in text
        assert "memory_analysis()" in text
    # the narrow table's one memory column: a layer's outputs + the weights it reads, in kB/MB
    column = list(view.layers["memory"])
    assert column == [fmt_bytes(layer_bytes(ly)) for ly in built.layers] and all(column)
    assert all(re.fullmatch(r"[\d.]+ (B|kB|MB|GB)", c) for c in column)


def test_onnxruntime_engine_tab_says_how_to_measure_then_shows_what_onnxruntime_reported():
    pytest.importorskip("onnxruntime")
    exe = _compile("onnxruntime")
    built = exe.stages["built"]
    before = _memory_text(tabs.EngineView.of(built).html())
    assert "not measured yet" in before and "built.memory()" in before
    (use,) = built.memory()
    after_view = tabs.EngineView.of(built)
    after = _memory_text(after_view.html())
    assert f"memory at opt (x=3x12): {use.total_name + ' ' if use.total_name else ''}{fmt_bytes(use.total)}" in after
    assert f"inputs {fmt_bytes(3 * 12 * 4)}" in after and "onnxruntime's profiler" in after
    assert any(after_view.layers["memory"])


def test_an_engine_without_memory_shows_no_line(monkeypatch):
    exe = _compile("reference")
    built = exe.stages["built"]
    from tripy_lab.engine.base import CompiledEngine

    monkeypatch.setattr(type(built.compiled), "memory", CompiledEngine.memory)
    page = tabs.EngineView.of(built).html()
    assert "tripy-memory" not in page and "tripy-layers" in page


def test_after_a_timing_run_the_engine_tab_keeps_the_memory_line_and_column():
    pytest.importorskip("onnxruntime")
    from tripy_lab.lab import profile

    exe = _compile("onnxruntime")
    built = exe.stages["built"]
    frame = profile(exe, calls=2, warmup=1)  # onnxruntime's profiled runs also report memory: nothing else runs
    assert built.compiled.last_profile is not None
    view = tabs.EngineView.of(built)
    assert list(view.layers.columns) == list(frame.columns) and "memory" in frame.columns
    assert all(view.layers["memory"]) and all(frame["memory"])
    (use,) = built.compiled.memory(measure=False)
    assert "memory at opt (x=3x12): " in _memory_text(view.html()) and use.parts["inputs"] == 3 * 12 * 4
