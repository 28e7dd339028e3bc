"""Real JupyterLab + Chromium: edit the MLIR (kSUM -> kPROD) and run it, a malformed edit, the Compare tab,
``lab.diff`` as a cell's HTML output, the styled timing table and the sweep plot.

Screenshots go to test-results/ (diff-edit-*.png).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e

CELLS = [
    "%load_ext tripy_lab\nimport os\nos.environ.setdefault('TRIPY_LAB_ENGINE', 'reference')",
    "%%tpcompile red_exe a=f32[1:2:3,4] --engine reference\ndef red(a):\n    return tp.sum(a, dim=1)\n",
    "from tripy_lab import lab\nlab.diff(red_exe, red_exe_edited, time=False)",
]
TIMEOUT = 60_000


@pytest.fixture
def lab(lab):
    yield lab
    errors = [e for e in lab.page_errors if "ResizeObserver loop" not in e]
    assert errors == [], errors


def tab(view, name: str):
    return view.locator(".widget-tab .lm-TabBar-tab", has_text=re.compile(rf"^{re.escape(name)}"))


def test_edit_mlir_build_compare_and_diff(lab):
    lab.put_notebook("diff_edit.ipynb", ["import tripy_lab as tp\n" + CELLS[0], *CELLS[1:]])
    nb = lab.open("diff_edit.ipynb")
    lab.run_cell(0)
    expect(nb.locator(".jp-Cell").nth(0).locator(".jp-InputPrompt")).to_contain_text("[1]", timeout=TIMEOUT)
    lab.run_cell(1)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    expect(view.locator(".tripy-status-ok")).to_contain_text("red_exe = Executable", timeout=TIMEOUT)
    expect(view.locator(".tripy-run-out")).not_to_contain_text("engine changed")

    # Engine and Log tabs: the layer and log tables in the lab's style (unit headers, no "None").
    tab(view, "Engine").click()
    expect(view.locator(".tripy-tab-engine table.tripy-table")).to_be_visible(timeout=TIMEOUT)
    tab(view, "Log").click()
    log = view.locator(".tripy-tab-log")
    expect(log.locator("th", has_text="time (ms)").first).to_be_visible(timeout=TIMEOUT)
    assert "None" not in log.inner_text()
    lab.screenshot("diff-edit-0-log.png", view)

    # MLIR tab -> Edit: the highlighted text gives way to an editor holding the module.
    tab(view, "MLIR").click()
    view.locator(".tripy-mlir-edit-toggle").click()
    area = view.locator(".tripy-mlir-editor textarea")
    expect(area).to_be_visible(timeout=TIMEOUT)
    expect(view.locator(".tripy-tab-mlir .tripy-mlir")).to_be_hidden()
    text = area.input_value()
    assert "<kSUM>" in text

    # A malformed edit: the error names line and column.
    area.fill(text.replace("<kSUM>", "<kSUMX>"))
    view.locator(".tripy-build-edited").click()
    error = view.locator(".tripy-edit-error")
    expect(error).to_contain_text("line 4, column 27", timeout=TIMEOUT)
    expect(error).to_contain_text("kPROD")  # what it expected instead
    lab.screenshot("diff-edit-1-malformed.png", view)

    # kSUM -> kPROD builds, runs beside the original and the comparison says they differ.
    area.fill(text.replace("<kSUM>", "<kPROD>"))
    view.locator(".tripy-build-edited").click()
    result = view.locator(".tripy-edit-result")
    expect(result).to_contain_text("outputs differ from the original", timeout=TIMEOUT)
    expect(result.locator("table.tripy-table th", has_text="max abs err")).to_have_count(1)
    lab.screenshot("diff-edit-2-edited.png", view)

    # Compare tab: pick another optimization level; the diff view shows every stage.
    tab(view, "Compare").click()
    picker = view.locator(".tripy-compare-picker select")
    expect(picker).to_be_visible(timeout=TIMEOUT)
    picker.select_option(label="reference -O0")
    diff = view.locator(".tripy-compare-out .tripy-diff")
    for key in ("trace", "mlir", "layers", "outputs", "timing"):
        expect(diff.locator(f".tripy-diff-{key}")).to_have_count(1, timeout=TIMEOUT)
    expect(diff.locator(".tripy-diff-summary")).to_contain_text("optimization level")
    expect(diff.locator(".tripy-diff-timing th", has_text="compute (ms)")).to_have_count(1)
    lab.screenshot("diff-edit-3-compare.png", view)

    # Run & time: a sweep draws the plot and a table whose label column is filled.
    tab(view, "Run & time").click()
    view.locator(".tripy-sweep-button").click()
    expect(view.locator("svg.tripy-sweep")).to_be_visible(timeout=TIMEOUT)
    table = view.locator(".tripy-timing table")
    labels = table.locator("tbody td:nth-child(1)").all_inner_texts()
    assert labels and all(label.startswith("sweep a=") for label in labels), labels
    lab.screenshot("diff-edit-4-sweep.png", view)

    # lab.diff(...) as a cell's own output: the same view, outside the widget.
    lab.run_cell(2)
    out = nb.locator(".jp-Cell").nth(2).locator(".jp-OutputArea-output .tripy-diff")
    expect(out).to_have_count(1, timeout=TIMEOUT)
    mlir = out.locator(".tripy-diff-mlir")
    expect(mlir).to_contain_text("1 changed line")
    expect(mlir.locator("tr.tripy-diff-replace span", has_text="SUM")).to_have_count(1)
    expect(mlir.locator("tr.tripy-diff-replace span", has_text="PROD")).to_have_count(1)
    expect(out.locator(".tripy-diff-outputs")).to_contain_text("differ")
    lab.screenshot("diff-edit-5-cell-diff.png", nb.locator(".jp-Cell").nth(2))
