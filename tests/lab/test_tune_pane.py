"""The Tune tab of the %%tpcompile widget: a sweep over the cell's function, rows in the tab, a row's stages,
the tune table in the static snapshot."""

import re

import pytest

from tripy_lab.lab.views import snapshot
from tripy_lab.lab.widget import magic

IPython = pytest.importorskip("IPython")

CELL = "%%tpcompile tune_exe a=f32[1:2:3,4] --debounce-ms 0\ndef double(a):\n    return a * 2.0 + 1.0\n"


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "tripy_lab")
    shell.run_cell("import tripy_lab as tp")
    yield shell
    shell.set_custom_exc((), None)


def test_tune_tab_runs_the_cells_space_and_opens_a_row(ip):
    assert ip.run_cell(CELL).success
    ui = magic.last
    pane = ui.tune
    assert ui.tabs.titles[-1] == "Tune"
    assert 'class="tripy-snapshot-tune"' not in ui.snapshot_html()  # nothing tuned yet: no section
    pane.engines.value, pane.levels.value, pane.dtypes.value = ("reference",), (0, 3), ("float32",)
    pane.opt.value = "a=3x4"
    assert "2 configs" in pane.count.value
    pane.opt.value = "a=3x4; a=1x4"
    assert "4 configs" in pane.count.value
    pane.run_button.click()
    assert pane.run.wait(120)
    pane._draw()  # no event loop in this test: the last draw happens here
    assert pane.result is not None and len(pane.result.table) == 4 and pane.result.table["passed"].all()
    assert "opt a=1x4" in pane.out.value and "tripy-pareto" in pane.out.value
    labels = [label for label, value in pane.picker.options if value is not None]
    assert len(labels) == 4 and labels[0].startswith("#0 reference -O0 float32")
    pane.picker.value = 3
    stages = pane.stages.value
    assert "#3 reference -O3 float32 opt a=1x4" in stages and "tensorrt.shape_profile" in re.sub("<[^>]+>", "",
                                                                                                   stages)
    page = ui.snapshot_html()
    assert 'class="tripy-snapshot-tune"' in page and "best passing: #" in page
    assert snapshot.MARKER in page


def test_tune_tab_reports_a_bad_space_in_the_tab(ip):
    assert ip.run_cell(CELL).success
    pane = magic.last.tune
    pane.opt.value = "a=three"
    assert "tripy-status-error" in pane.count.value
    pane.opt.value = ""
    pane.levels.value = ()
    pane.run_button.click()
    assert pane.run is None and "tripy-error" in pane.out.value
    assert "optimization_level&#x27; is empty" in pane.out.value
