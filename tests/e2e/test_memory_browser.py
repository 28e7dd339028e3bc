"""Issue 29, item 10 in a real JupyterLab + Chromium: the Engine tab shows the engine's device memory (a total line
with its breakdown above the layer table, a memory column in it), live in the widget and in the saved report.

Screenshots go to test-results/ (memory-*.png).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e

CELLS = [
    "%load_ext tripy_lab\nimport numpy as np\nimport tripy_lab as tp\nw = np.ones((64, 32), np.float32) / 64",
    "%%tpcompile m_exe x=f32[1:4:8,64] --engine xla\ndef mlp(x):\n    return tp.relu(x @ tp.Tensor(w)) * 2.0\n",
    # what the engine reports, printed by the kernel: the browser checks the tab against it, not a number we wrote
    "from tripy_lab.engine.memory import fmt_bytes\nfrom tripy_lab.lab import report\n"
    "use = m_exe.stages['built'].memory()[0]\nreport(m_exe, 'memory-report.html')\n"
    "print('TOTAL', use.shape, '|', fmt_bytes(use.total), '|', fmt_bytes(use.parts['outputs']))",
]
TIMEOUT = 90_000


@pytest.fixture
def lab(lab):
    yield lab
    errors = [e for e in lab.page_errors if "ResizeObserver loop" not in e]  # benign browser noise
    assert errors == [], errors


def test_the_engine_tab_shows_device_memory_live_and_in_the_report(lab):
    lab.put_notebook("memory.ipynb", CELLS)
    nb = lab.open("memory.ipynb")
    lab.run_cell(0)
    expect(nb.locator(".jp-Cell").nth(0).locator(".jp-InputPrompt")).to_contain_text("[1]", timeout=TIMEOUT)
    lab.run_cell(1)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    expect(view.locator(".tripy-status-ok")).to_contain_text("m_exe = Executable", timeout=TIMEOUT)
    lab.run_cell(2)
    printed = nb.locator(".jp-Cell").nth(2).locator(".jp-OutputArea-output")
    expect(printed).to_contain_text("TOTAL", timeout=TIMEOUT)
    m = re.search(r"TOTAL (.*?) \| (.*?) \| (.*)", printed.inner_text())
    assert m, printed.inner_text()
    shape, total, outputs = (g.strip() for g in m.groups())
    assert shape.startswith("opt (x=4x64)") and outputs == "512 B"  # f32[4, 32]: 4 * 32 * 4 bytes

    # live: the widget's Engine tab
    view.locator(".widget-tab .lm-TabBar-tab", has_text=re.compile(r"^Engine")).click()
    engine = view.locator(".tripy-tab-engine")
    line = engine.locator(".tripy-memory")
    expect(line).to_be_visible(timeout=TIMEOUT)
    expect(line).to_contain_text(f"memory at {shape}: {total} = ")
    expect(line).to_contain_text(f"outputs {outputs}")
    heads = [h.strip() for h in engine.locator(".tripy-layers thead th").all_inner_texts()]
    assert "memory" in heads, heads
    column = heads.index("memory")
    cells = [c.strip() for c in engine.locator(f".tripy-layers tbody tr td:nth-child({column + 1})").all_inner_texts()]
    assert cells and all(re.fullmatch(r"[\d.]+ (B|kB|MB)", c) for c in cells), cells
    # the line sits above the table and fits the pane (narrow panes: it wraps, it does not widen the output)
    assert line.evaluate("l => l.getBoundingClientRect().bottom <= "
                         "l.parentElement.querySelector('.tripy-layers').getBoundingClientRect().top + 1")
    assert line.evaluate("l => l.scrollWidth <= l.closest('.tripy-lab').getBoundingClientRect().width")
    line.scroll_into_view_if_needed()
    lab.screenshot("memory-engine-tab.png", nb)

    # static: the saved report renders the same view
    page = lab.page
    page.goto((Path(lab.server["root"]) / "memory-report.html").as_uri())
    static = page.locator(".tripy-snapshot-engine .tripy-memory")
    expect(static).to_contain_text(f"memory at {shape}: {total} = ", timeout=TIMEOUT)
    expect(page.locator(".tripy-snapshot-engine .tripy-layers thead")).to_contain_text("memory")
    static.scroll_into_view_if_needed()
    lab.screenshot("memory-report.png")
