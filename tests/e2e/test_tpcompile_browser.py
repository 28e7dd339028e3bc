"""%%tpcompile in a real JupyterLab + Chromium: tabs, trace SVG, MLIR bounds, slider, invalid bounds, timing.

Screenshots go to test-results/ (tpcompile-*.png).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e

PROFILE = "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [{}, 4]>"
CELLS = [
    # tp.config, not the environment: `%load_ext` has already read TRIPY_LAB_ENGINE
    "%load_ext tripy_lab\nimport tripy_lab as tp\ntp.config.engine = 'reference'",
    "%%tpcompile add_exe a=f32[1:2:3,4]\ndef add(a):\n    return a + a\n",
    "print(add_exe)",
]
TIMEOUT = 60_000


@pytest.fixture
def lab(lab):
    yield lab
    errors = [e for e in lab.page_errors if "ResizeObserver loop" not in e]  # benign browser noise
    assert errors == [], errors


def tab(view, name: str):
    return view.locator(".widget-tab .lm-TabBar-tab", has_text=re.compile(rf"^{re.escape(name)}"))


def pane(view, key: str):
    return view.locator(f".tripy-tab-{key}")


def test_tpcompile_cell_in_the_browser(lab):
    lab.put_notebook("tpcompile.ipynb", CELLS)
    nb = lab.open("tpcompile.ipynb")
    lab.run_cell(0)
    expect(nb.locator(".jp-Cell").nth(0).locator(".jp-InputPrompt")).to_contain_text("[1]", timeout=TIMEOUT)
    lab.run_cell(1)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    expect(view).to_have_count(1, timeout=TIMEOUT)

    # The tabs render, the Trace tab (selected first) holds graphviz's SVG.
    expect(view.locator(".widget-tab .lm-TabBar-tab")).to_have_count(9)
    for name in ("Trace", "MLIR", "Engine", "Run & time", "Log", "Error", "Crosswalk", "Compare", "Tune"):
        expect(tab(view, name)).to_have_count(1)
    expect(pane(view, "trace").locator("svg g.node").first).to_be_visible(timeout=TIMEOUT)
    expect(view.locator(".tripy-status-ok")).to_contain_text("add_exe = Executable(a: Tensor)", timeout=TIMEOUT)
    lab.screenshot("tpcompile-1-trace.png", view)

    # The MLIR tab shows the bounds as a shape profile.
    tab(view, "MLIR").click()
    mlir = pane(view, "mlir")
    expect(mlir).to_contain_text(PROFILE.format(3), timeout=TIMEOUT)
    # The crosswalk's stylesheet (flex lines) must not reach the lab's own MLIR pane: its tokens overlapped.
    assert mlir.locator(".tripy-mlir-line").first.evaluate("e => getComputedStyle(e).display") == "block"
    lab.screenshot("tpcompile-2-mlir.png", view)

    # Moving the max slider (keyboard on its upper handle) re-traces and changes that text.
    handle = view.locator(".tripy-range .noUi-handle-upper").first
    handle.focus()
    handle.press("ArrowRight")
    expect(mlir).to_contain_text(PROFILE.format(4), timeout=TIMEOUT)
    expect(view.locator(".tripy-bounds-text input").first).to_have_value("1:2:4")
    lab.screenshot("tpcompile-3-max-moved.png", view)

    # An invalid bound is flagged in the editor; the widget keeps working afterwards.
    text = view.locator(".tripy-bounds-text input").first
    text.fill("3:5:2")
    text.press("Enter")
    problems = view.locator(".tripy-problems")
    expect(problems).to_contain_text("min 3 > max 2", timeout=TIMEOUT)
    expect(view.locator(".tripy-status-error")).to_contain_text("invalid bounds")
    lab.screenshot("tpcompile-4-invalid.png", view)
    text.fill("1:2:3")
    text.press("Enter")
    expect(problems).to_have_count(0, timeout=TIMEOUT)
    expect(mlir).to_contain_text(PROFILE.format(3), timeout=TIMEOUT)
    handle.press("ArrowRight")  # the slider still drives the loop
    expect(mlir).to_contain_text(PROFILE.format(4), timeout=TIMEOUT)

    # Engine tab: the layer table.
    tab(view, "Engine").click()
    expect(pane(view, "engine").locator("table.tripy-table")).to_be_visible(timeout=TIMEOUT)

    # Run & time: the timing table appears with numeric cells.
    tab(view, "Run & time").click()
    view.locator(".tripy-time").click()
    table = view.locator(".tripy-timing table")
    expect(table).to_be_visible(timeout=TIMEOUT)
    headers = [h.strip() for h in table.locator("thead th").all_inner_texts()]
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    for column in ("compute (ms)", "latency p50 (ms)", "latency p90 (ms)", "throughput (1/s)"):  # the brief table
        i = headers.index(column)
        values = [float(c) for c in rows.locator(f"td:nth-child({i + 1})").all_inner_texts()]
        assert len(values) == 3 and all(v >= 0 for v in values), (column, values)
    assert [s.strip() for s in rows.locator(f"td:nth-child({headers.index('shape') + 1})").all_inner_texts()] == [
        "a=1x4", "a=2x4", "a=4x4"]
    lab.screenshot("tpcompile-5-timing.png", view)

    # The crosswalk tab is drawn by the tripy-lab renderer when the extension is installed.
    tab(view, "Crosswalk").click()
    cross = view.locator(".tripy-crosswalk")
    expect(cross).to_have_count(1, timeout=TIMEOUT)
    cross.locator('[data-tripy-pane="mlir"] .tripy-mlir-line[data-op-id]').first.click()
    expect(cross.locator('[data-tripy-pane="graph"] g.node.tripy-selected')).to_have_count(1)
    lab.screenshot("tpcompile-6-crosswalk.png", view)

    # The Executable is in the kernel's namespace.
    lab.run_cell(2)
    expect(nb.locator(".jp-Cell").nth(2).locator(".jp-OutputArea-output")).to_contain_text(
        "Executable(a: Tensor) -> Tensor", timeout=TIMEOUT)
