"""The Tune tab in a real JupyterLab + Chromium: pick a space, press Tune, rows arrive, open a row's stages.

Screenshots go to test-results/ (tune-*.png).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e

CELLS = [
    "%load_ext tripy_lab\nimport tripy_lab as tp\ntp.config.engine = 'reference'",
    "%%tpcompile mlp_exe x=f32[1:4:8,64] w=f32[64,64]\ndef mlp(x, w):\n    return tp.relu(x @ w) @ w + x\n",
    # a real model's space is picked with the widgets; here the test sets the engines to the quick one
    "from tripy_lab.lab.widget import magic\npane = magic.last.tune\npane.engines.value = ('reference',)\n"
    "pane.levels.value = (0, 3)\npane.dtypes.value = ('float32', 'float16')\npane.opt.value = 'x=2x64; x=8x64'",
]
TIMEOUT = 120_000


def tab(view, name: str):
    return view.locator(".widget-tab .lm-TabBar-tab", has_text=re.compile(rf"^{re.escape(name)}"))


def test_tune_tab_in_the_browser(lab):
    lab.put_notebook("tune.ipynb", CELLS)
    nb = lab.open("tune.ipynb")
    for i in range(3):
        lab.run_cell(i)
        expect(nb.locator(".jp-Cell").nth(i).locator(".jp-InputPrompt")).to_contain_text(f"[{i + 1}]",
                                                                                        timeout=TIMEOUT)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    tab(view, "Tune").click()
    pane = view.locator(".tripy-tab-tune")
    expect(pane).to_contain_text("8 configs", timeout=TIMEOUT)
    pane.locator(".tripy-tune-run").click()
    table = pane.locator(".tripy-tune-out .tripy-tune-table table")
    expect(table.locator("tbody tr")).to_have_count(8, timeout=TIMEOUT)
    expect(pane.locator(".tripy-tune-out svg.tripy-pareto")).to_have_count(1)
    expect(pane.locator(".tripy-tune-snippet")).to_contain_text("tp.compile(mlp")
    lab.screenshot("tune-1-table.png", view)

    picker = pane.locator(".tripy-tune-picker select")
    expect(picker.locator("option")).to_have_count(9, timeout=TIMEOUT)  # the prompt and the 8 rows
    options = [o.replace("\xa0", " ") for o in picker.locator("option").all_inner_texts()]  # ipywidgets: nbsp
    row = next(i for i, o in enumerate(options) if "float16 opt x=8x64" in o)
    picker.select_option(index=row)
    expect(pane.locator(".tripy-snapshot-mlir")).to_contain_text("f16", timeout=TIMEOUT)
    expect(pane.locator(".tripy-snapshot-trace")).to_be_visible()
    lab.screenshot("tune-2-stages.png", view)
    assert [e for e in lab.page_errors if "ResizeObserver loop" not in e] == []
