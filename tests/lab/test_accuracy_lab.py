"""Accuracy in the lab: the Run & time action, MLIR shading, the snapshot table, the precision column."""

import re

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.lab import html as H
from tripy_lab.lab.measure.accuracy_report import accuracy
from tripy_lab.lab.views import tabs
from tripy_lab.lab.views.accuracy_views import precision_of, with_precision
from tripy_lab.lab.widget import magic
from tripy_lab.pipeline import trace

IPython = pytest.importorskip("IPython")


def naive_softmax(x):
    e = tp.exp(x)
    return e / tp.sum(e, dim=-1, keepdim=True)


def _exe(dtype=tp.float16):
    return trace(naive_softmax, args=[tp.InputInfo((2, 8), dtype)]).lower().build(engine="reference").executable()


def test_engine_layer_table_has_the_precision_each_op_computes_in():
    def f(x):
        return tp.cast(x, tp.float32) > 0.5

    built = trace(f, args=[tp.InputInfo((2, 3), tp.float16)]).lower().build(engine="reference")
    view = tabs.EngineView.of(built)
    ops = built.lowered.program.ops()
    assert list(view.layers.columns).index("precision") == list(view.layers.columns).index("dtype") + 1
    by_kind = dict(zip(view.layers["kind"], view.layers["precision"]))
    assert by_kind["cast"] == "float16"  # reads f16 (writes f32)
    assert by_kind["element_wise"] == "float32"  # compares f32 values; writes bool
    assert [precision_of(op) for op in ops if op.name == "tensorrt.element_wise"] == ["float32"]
    assert with_precision(view.layers, built.layers[:1], built.lowered.program) is view.layers  # mismatch: as is


def test_mlir_view_shades_lines_by_error_and_marks_the_first_divergent():
    exe = _exe()
    x = np.zeros((2, 8), np.float16)
    x[0, 0] = 12.0
    report = accuracy(exe, x)
    view = tabs.MlirView.of(exe.stages["lowered"])
    plain = view.html()
    view.accuracy = report
    shaded = H.sanitize(view.html())
    exp_line = next(i + 1 for i, (t, _) in enumerate(view.lines) if "kEXP" in t)
    row = re.search(rf'data-line="{exp_line}" style="([^"]*)"', shaded).group(1)
    assert "rgba(239, 68, 68" in row and "border-left" in row  # shaded (inf error) and marked first
    assert "rgba(239, 68, 68" not in plain and "tripy-accuracy-legend" in shaded


def test_run_view_accuracy_table_goes_into_the_snapshot():
    exe = _exe()
    x = np.zeros((2, 8), np.float16)
    x[1, 1] = 12.0
    view = tabs.RunView("accuracy", report=accuracy(exe, x))
    page = H.sanitize(view.html(tabs.SNAPSHOT))
    assert "first divergent" in page and "unary &lt;kEXP&gt;" in page and "<table" in page
    assert "max rel" in page and "test_accuracy_lab.py:20" in page


@pytest.fixture(scope="module")
def ip():
    from IPython.testing import globalipapp

    shell = globalipapp.start_ipython() or globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "tripy_lab")
    shell.run_cell("import tripy_lab as tp")
    yield shell
    shell.set_custom_exc((), None)


def test_accuracy_button_runs_on_random_inputs_and_shades_the_mlir_pane(ip, monkeypatch):
    import IPython.display as D

    monkeypatch.setattr(D, "display", lambda *a, **k: type("H", (), {"update": lambda *a, **k: None})())
    ip.run_cell("%%tpcompile acc_exe a=f16[2,8] --debounce-ms 0\ndef f(a):\n    e = tp.exp(a * 20.0)\n"
                "    return e / tp.sum(e, dim=-1, keepdim=True)\n")
    ui = magic.last
    ui.accuracy_button.click()
    run = ui.views["run"]
    assert run.kind == "accuracy", ui.run_out.value
    first = run.report.first_divergent  # randn * 20 overflows exp in f16 somewhere in 16 draws
    assert first is not None and first.op == "unary <kEXP>", run.report.summary()
    assert "first divergent" in ui.run_out.value
    assert "tripy-accuracy-legend" in ui.panes["mlir"].value
    assert "first divergent" in ui.snapshot_html()
    # the Trace tab's graph is shaded by error too: the exp's trace op carries the worst value
    assert ui.overlay is not None and "error" in ui.overlay.title
    assert max(ui.overlay.values, key=ui.overlay.values.get) == first.trace_op
    assert "error against the reference" in ui.panes["trace"].value
