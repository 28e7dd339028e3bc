"""What reports and `tripy-lab explain` say to a reader (issue 29 item 8): cells named as JupyterLab names them,
a notebook without a compile told so, a terminal user's next steps, the program in the title, one build time."""

from __future__ import annotations

import json
import re

import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.lab.cli import main as cli
from tripy_lab.lab.views import snapshot, tabs

pytest.importorskip("nbformat")

MODEL = """
import tripy_lab as tp

def mlp(x, w):
    h = tp.relu(x @ w)
    return h * 2.0
"""
SPEC = "x=f32[1:2:8,4] w=f32[4,3]"


def text_of(markup: str) -> str:
    import html

    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", markup)))


def code_cell(source: str, count, outputs=()) -> dict:
    return {"cell_type": "code", "metadata": {}, "execution_count": count, "source": source, "outputs": list(outputs)}


def snapshot_output(title: str) -> dict:
    return {"output_type": "display_data", "metadata": {}, "data": {"text/html": snapshot.snapshot_html(title, {})}}


def write_nb(path, cells) -> None:
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 4}))


def test_report_headings_name_cells_by_their_execution_count(tmp_path, capsys):
    # The 20th cell of the notebook, run as In [12] (the graph's lines say In [12]:3): its heading says In [12].
    cells = [{"cell_type": "markdown", "metadata": {}, "source": f"text {i}"} for i in range(19)]
    cells.append(code_cell("%%tpcompile add_exe a=f32[4]\ndef add(a):\n    return a + a\n", 12,
                           [snapshot_output("add_exe")]))
    cells.append(code_cell("%%tpcompile sub_exe a=f32[4]\ndef sub(a):\n    return a - a\n", None,
                           [snapshot_output("sub_exe")]))  # saved with its output, then its count cleared
    nb, out = tmp_path / "nb.ipynb", tmp_path / "nb.html"
    write_nb(nb, cells)
    assert cli.main(["report", str(nb), "-o", str(out)]) == 0
    headings = re.findall(r"<h2>(.*?)</h2>", out.read_text())
    assert headings == ["In [12]", "In [ ] (not run)"], headings


def test_report_on_a_notebook_without_tpcompile_says_there_is_nothing_to_report(tmp_path, capsys):
    nb, out = tmp_path / "plain.ipynb", tmp_path / "plain.html"
    write_nb(nb, [code_cell("print(1)", 1, [{"output_type": "stream", "name": "stdout", "text": "1\n"}]),
                  code_cell("x = 2", 2)])
    assert cli.main(["report", str(nb), "-o", str(out)]) == cli.NOTHING_TO_REPORT == 3
    err = capsys.readouterr().err
    assert "No %%tpcompile cell in plain.ipynb: nothing to report." in err, err
    assert "2 code cells, 1 with saved outputs" in err and "run the notebook" not in err.lower()
    assert not out.exists()
    # Its %%tpcompile cells were saved without outputs: then running the notebook is the advice (an error, 1).
    write_nb(nb, [code_cell("%%tpcompile f_exe a=f32[4]\ndef f(a):\n    return a\n", None)])
    assert cli.main(["report", str(nb), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "1 %%tpcompile cell has no saved outputs" in err and "Run the notebook" in err and not out.exists()
    # Saved with outputs, but none is a snapshot (it failed, or an old tripy-lab saved it): run it again.
    write_nb(nb, [code_cell("%%tpcompile f_exe a=f32[4]\ndef f(a):\n    return a\n", 1,
                            [{"output_type": "stream", "name": "stderr", "text": "TripyException: ...\n"}])])
    assert cli.main(["report", str(nb), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "its %%tpcompile cells' outputs carry none" in err and "run them again" in err and not out.exists()


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def test_explain_ends_with_what_a_terminal_user_can_do_next(model_file, tmp_path, capsys):
    assert cli.main(["explain", f"{model_file}:mlp", "--args", SPEC, "--engine", "reference"]) == 0
    out = capsys.readouterr().out
    assert "why reference: requested with --engine reference" in out and "engine=..." not in out
    assert "mlp (model.py) compiled to Executable(x: Tensor, w: Tensor) -> Tensor" in out
    tail = out[out.index("\nNext:"):]
    command = f"tripy-lab explain {model_file}:mlp --args '{SPEC}' --engine reference"
    assert f"{command} --html mlp.html" in tail and f"{command} --json" in tail
    assert "run the cell" not in out and "%%tpcompile" in tail


def test_explain_html_report_names_the_program_and_how_it_was_made(model_file, tmp_path, capsys):
    page_path = tmp_path / "mlp.html"
    assert cli.main(["explain", f"{model_file}:mlp", "--args", SPEC, "--engine", "reference",
                     "--html", str(page_path)]) == 0
    out = capsys.readouterr().out
    assert "--html mlp.html" not in out and f"wrote {page_path}" in out  # written already: not suggested again
    page = page_path.read_text()
    assert "<title>tripy-lab report: mlp (model.py)</title>" in page and "report: exe" not in page
    text = text_of(page)
    assert "run the cell" not in text and "has not run" not in text  # no notebook advice, no empty Run/Log panes
    assert f"Written by: tripy-lab explain {model_file}:mlp --args '{SPEC}' --engine reference --html" in text


class Scale(tp.Module):
    def __init__(self):
        super().__init__()
        self.weight = tp.Tensor([2.0, 3.0])

    def forward(self, x):
        return x * self.weight


def test_lab_report_title_names_a_module_and_its_file(tmp_path):
    exe = tp.compile(Scale(), args=[tp.InputInfo((2, 2), dtype=tp.float32)], engine="reference")
    page = tp.lab.report(exe, tmp_path / "r.html", "lin_exe").read_text()
    assert "<title>tripy-lab report: Scale (test_report_text.py)</title>" in page, page[:600]
    assert "<h2>lin_exe</h2>" in page


def test_the_engine_pane_shows_one_build_time_in_ms_and_says_what_it_covers():
    def add(a):
        return tp.exp(a) + a

    built = pipeline.trace(add, kwargs={"a": tp.InputInfo((2, 4), dtype=tp.float32)}).lower().build(engine="xla")
    r = built.report
    assert not any("build took" in n for n in r.notes), r.notes  # the engine's span is data, not a second number
    assert isinstance(r.seconds, float) and 0 < r.seconds <= built.seconds
    r.seconds = built.seconds - 1.25  # as on a process's first xla build: 1.25 s importing jax
    r.notes.append("built x=2x4 (opt): lower 0.035s, compile 0.336s")
    page = text_of(tabs.EngineView.of(built).html())
    total = f"{built.seconds * 1e3:.1f} ms"
    assert (f"build time {total} (from MLIR to a runnable engine; 1250.0 ms of it loading the xla engine's "
            "libraries, once per process)") in page, page
    assert "lower 35.0 ms, compile 336.0 ms" in page and not re.search(r"\d\.\d+ ?s\b", page), page
    assert f"build time: {total} (from MLIR" in built.as_text()
    r.seconds = built.seconds  # nothing outside the engine's own span: no clause about start-up
    assert built.time_text() == f"{total} (from MLIR to a runnable engine)"
