"""The static snapshot: one output {widget view, text/html snapshot}, updated in place; escaping and nh3
sanitizing; elision of big panes; show(exe), report(exe), report_notebook()."""

from __future__ import annotations

import json
import re

import pytest

import tripy_lab as tp
import tripy_lab.lab
from tripy_lab import pipeline
from tripy_lab.core.errors import TripyException
from tripy_lab.lab import html as H
from tripy_lab.lab.cli import reports
from tripy_lab.lab.views import snapshot, tabs
from tripy_lab.lab.widget import magic

IPython = pytest.importorskip("IPython")


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()  # None when another module started it
    shell.run_line_magic("load_ext", "tripy_lab")
    shell.run_cell("import tripy_lab as tp")
    yield shell
    shell.set_custom_exc((), None)


@pytest.fixture
def published(monkeypatch):
    """Every bundle the lab displays or updates: (data, update?)."""
    import IPython.display as D

    sent: list[tuple[dict, bool]] = []

    class Handle:
        def update(self, data, raw=False):
            sent.append((data, True))

    def fake_display(data, raw=False, display_id=None):
        assert raw and display_id
        sent.append((data, False))
        return Handle()

    monkeypatch.setattr(D, "display", fake_display)
    return sent


def text_of(markup: str) -> str:
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", markup))


PROFILE = "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [{}, 4]>"
CELL = "%%tpcompile snap_exe a=f32[1:2:3,4] --debounce-ms 0\ndef add(a):\n    return a + a\n"


def test_tpcompile_is_one_output_with_widget_and_snapshot(ip, published):
    assert ip.run_cell(CELL).success
    assert len(published) == 1
    data, update = published[0]
    assert not update
    assert set(data) == {snapshot.WIDGET_MIME, "text/html", "text/plain"}
    assert data[snapshot.WIDGET_MIME]["model_id"] == magic.last.widget.model_id
    assert len(data["text/plain"]) < 200 and "snap_exe" in data["text/plain"]  # not the VBox(...) dump
    page = data["text/html"]
    assert snapshot.MARKER in page
    assert "<script" not in page and "<style" not in page and "<input" not in page
    assert 'src="data:image/svg+xml,' in page  # the trace graph, as an image (survives untrusted sanitizers)
    assert PROFILE.format(3) in text_of(page)
    assert "element_wise" in text_of(page) and '<div class="tripy-layers">' in page
    for key, _ in snapshot.PANES:
        assert (f'class="tripy-snapshot-{key}"' in page) is (key not in snapshot.OPTIONAL)


def test_snapshot_is_updated_in_place_when_the_lab_changes(ip, published):
    ip.run_cell(CELL)
    ui = magic.last
    ui.display.debouncer.delay = 0  # no event loop here: updates go out at once anyway
    ui.editor.rows[0].range.value = (1, 5)
    updates = [d for d, update in published if update]
    assert updates and PROFILE.format(5) in text_of(updates[-1]["text/html"])
    assert updates[-1][snapshot.WIDGET_MIME]["model_id"] == ui.widget.model_id
    n = len(updates)
    ui.tabs.selected_index = 3  # activity without a change: nothing re-sent
    assert len([d for d, u in published if u]) == n
    ui.warmup.value, ui.iters.value = 0, 2
    ui.time_button.click()
    last = [d for d, u in published if u][-1]["text/html"]
    assert "compute (ms)" in text_of(last) and 'class="tripy-timing"' in last and "<table" in last
    # the live pane and the snapshot pane come from the same view model
    assert ui.run_out.value == H.sanitize(ui.views["run"].html()) and ui.views["run"].kind == "time"


def test_live_panes_and_snapshot_render_the_same_views(ip, published):
    ip.run_cell(CELL)
    ui = magic.last
    trace, mlir = ui.views["trace"], ui.views["mlir"]
    assert ui.panes["mlir"].value == H.sanitize(mlir.html(tabs.LIVE))
    assert ui.panes["trace"].value == H.sanitize(trace.html(tabs.LIVE))
    assert "<svg" in ui.panes["trace"].value  # live: inline SVG (the crosswalk highlights its nodes)
    snap = ui.snapshot_html()
    assert H.sanitize(mlir.html(tabs.SNAPSHOT)) in snap


def test_crosswalk_output_has_a_static_fallback(ip, published):
    from tripy_lab.lab.views.crosswalk_schema import MIME_TYPE

    ip.run_cell(CELL)
    ui = magic.last
    ui.tabs.selected_index = 6
    data = ui.crosswalk.outputs[0]["data"]
    assert MIME_TYPE in data and snapshot.MARKER in data["text/html"]
    assert PROFILE.format(3) in text_of(data["text/html"])


EVIL = '<img src=x onerror="alert(1)"><script>alert(2)</script>'


def test_user_text_is_escaped_and_fragments_sanitized(ip, published):
    cell = ("%%tpcompile evil_exe a=f32[2,3] b=f32[3,5] --debounce-ms 0\n"
            "def mm(a, b):\n    raise ValueError('" + EVIL + "')\n")
    ip.run_cell(cell)
    ui = magic.last
    assert ui.session.error is not None
    page = published[-1][0]["text/html"]
    assert re.search(r'<details class="tripy-snapshot-error" open', page)  # the error pane is open
    assert "alert(1)" in text_of(page)  # shown as text ...
    for markup in (page, ui.panes["error"].value, ui.status.value):  # ... never as markup
        assert "<script" not in markup and "<img src=x" not in markup
        assert not re.search(r"<[^>]*\sonerror=", markup)


@pytest.mark.parametrize("markup, kept, gone", [
    ('<div onclick="x()" style="color:red;position:fixed">t</div>', ['style="color:red"', ">t<"],
     ["onclick", "position"]),
    ("<style>*{display:none}</style><script>alert(1)</script>ok", ["ok"], ["<style", "<script", "alert"]),
    ('<a href="javascript:alert(1)">x</a>', ["<a>x</a>"], ["javascript"]),
    ('<svg viewBox="0 0 1 1"><a xlink:href="javascript:alert(1)"><text x="1">t</text></a></svg>',
     ['viewBox="0 0 1 1"', "<text"], ["javascript", "href"]),
    ('<img src="data:text/html,<b>x</b>"><img src="data:image/svg+xml,%3Csvg%3E">',
     ['<img src="data:image/svg+xml,%3Csvg%3E">'], ["text/html"]),
    ('<details open><summary>s</summary><table><tr><td colspan="2">c</td></tr></table></details>',
     ["<details open", "<summary>s</summary>", 'colspan="2"'], []),
])
def test_sanitize_allowlist(markup, kept, gone):
    out = H.sanitize(markup)
    for needle in kept:
        assert needle in out, out
    for needle in gone:
        assert needle not in out, out


def test_esc():
    assert H.esc('<a href="x">&\'') == "&lt;a href=&quot;x&quot;&gt;&amp;&#x27;"


def _chain(n):
    def chain(x, y):
        for _ in range(n // 2):
            x = tp.relu(x + y)
        return x
    return chain


@pytest.fixture(scope="module")
def big():
    info = tp.InputInfo(((1, 2, 8), 64), tp.float32)
    traced = pipeline.trace(_chain(100), args=[info, info])
    lowered = traced.lower()
    return traced, lowered, lowered.build(engine="reference")


def test_big_panes_are_elided_with_a_note(big):
    traced, lowered, built = big
    views = tabs.stage_views(traced, lowered, built)
    tight = tabs.Limits(svg_chars=1000, text_chars=500, mlir_lines=20, table_rows=10, svg_image=True)
    trace_html = views["trace"].html(tight)
    assert "Graph elided" in trace_html and "<img" not in trace_html and "listing cut" in trace_html
    mlir_html = views["mlir"].html(tight)
    assert mlir_html.count('class="tripy-mlir-line"') == 20 and "MLIR elided" in mlir_html
    assert "Layer table elided: 90 more layers" in views["engine"].html(tight)
    # the default snapshot keeps a 100-op graph and all its MLIR, within ~200 kB
    page = snapshot.snapshot_html("big", views)
    assert "Graph elided" not in page and "MLIR elided" not in page and len(page) < 200_000


def test_show_displays_an_executable_compiled_in_python(published, big):
    traced, lowered, built = big
    exe = built.executable()
    ui = tripy_lab.lab.show(exe, "chain_exe")
    data, _ = published[-1]
    assert data[snapshot.WIDGET_MIME]["model_id"] == ui.widget.model_id
    assert "tensorrt.shape_profile" in text_of(data["text/html"]) and "<svg" in ui.panes["trace"].value
    ui.engine.value = "xla"  # the engine can be rebuilt; the bounds are fixed
    assert ui.session.built.report.engine == "xla" and ui.session.error is None


def test_report_of_an_executable_is_self_contained(tmp_path, big):
    exe = big[2].executable()
    out = tripy_lab.lab.report(exe, tmp_path / "r.html", "chain_exe")
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<script" not in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # nothing fetched
    assert "tensorrt.shape_profile" in text_of(page) and "data:image/svg+xml," in page


def _nb(outputs_per_cell):
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "source": src, "metadata": {}, "outputs": outs, "execution_count": 1}
        for src, outs in outputs_per_cell]}


def test_report_notebook_collects_and_resanitizes_snapshots(tmp_path, big):
    page = snapshot.snapshot_html("chain", tabs.stage_views(*big))
    hostile = page.replace("</div>", "<script>alert(1)</script></div>", 1)  # a notebook can hold anything
    nb = _nb([("%%tpcompile a\ndef f(): ...", [{"output_type": "display_data", "metadata": {},
                                                 "data": {"text/html": hostile.splitlines(True)}}]),
              ("print(1)", [{"output_type": "stream", "name": "stdout", "text": "1\n"}])])
    src = tmp_path / "n.ipynb"
    src.write_text(json.dumps(nb))
    out = tripy_lab.lab.report_notebook(src, tmp_path / "n.html").read_text()
    assert "<script" not in out and "tensorrt.shape_profile" in text_of(out)
    assert "%%tpcompile a" in text_of(out) and out.count(snapshot.MARKER) == 1


def test_report_notebook_errors(tmp_path):
    empty = tmp_path / "e.ipynb"
    empty.write_text(json.dumps(_nb([("print(1)", [])])))
    with pytest.raises(reports.NothingToReport, match="No %%tpcompile cell in e.ipynb: nothing to report"):
        tripy_lab.lab.report_notebook(empty, tmp_path / "e.html")
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{not json")
    with pytest.raises(TripyException, match="Cannot read the notebook"):
        tripy_lab.lab.report_notebook(bad, tmp_path / "b.html")


def test_report_function_is_not_shadowed_by_its_module():
    assert callable(tripy_lab.lab.report) and tripy_lab.lab.report is not reports
    assert tripy_lab.lab.report_notebook.__name__ == "report_notebook"


def test_big_constants_are_elided_in_the_snapshot():
    import numpy as np

    weights = tp.Tensor(np.arange(4096, dtype=np.float32).reshape(64, 64))

    def f(x):
        return x @ weights

    traced = pipeline.trace(f, args=[tp.InputInfo((2, 64), tp.float32)])
    page = snapshot.snapshot_html("f", tabs.stage_views(traced, traced.lower()))
    assert "dense_resource<tripy_const_0>" in text_of(page) and "4095" not in page and len(page) < 30_000


def test_updates_wait_for_the_lab_to_settle():
    """With a running event loop (the kernel's), a burst of changes sends one update, after the quiet delay."""
    import asyncio

    sent = []

    class Handle:
        def update(self, data, raw=False):
            sent.append(data["text/html"])

    state = {"html": "v0"}
    display = snapshot.SnapshotDisplay(None, lambda: (state["html"], "summary"), delay=0.05)
    display.handle, display.sent_html = Handle(), "v0"

    async def burst():
        for k in range(1, 6):
            state["html"] = f"v{k}"
            display.changed()
            await asyncio.sleep(0.01)
        assert sent == []  # still busy: nothing re-sent (JupyterLab would re-create the widget view)
        await asyncio.sleep(0.15)
        display.changed()  # activity without a change: no second update
        await asyncio.sleep(0.15)

    asyncio.run(burst())
    assert sent == ["v5"] and display.updates == 1


def test_a_failing_snapshot_says_so(ip, published, monkeypatch):
    ip.run_cell(CELL)
    ui = magic.last
    monkeypatch.setattr(tabs.LogView, "html", lambda self, limits=tabs.LIVE: 1 / 0)
    page = ui.snapshot_html()
    assert "could not draw the static snapshot" in page and "ZeroDivisionError" in page
    assert snapshot.MARKER not in page
