"""The tutorials' extra check (conftest.py at the root): nbval's lax mode re-runs cells without comparing outputs,
so a cell that printed when saved and prints nothing now (tutorial 03's MLIR locations, once) must fail."""

import json
from pathlib import Path

import pytest

pytest.importorskip("nbval")
ROOT = Path(__file__).resolve().parents[1]


def notebook(cells: list[tuple[str, list]]) -> str:
    return json.dumps({
        "nbformat": 4, "nbformat_minor": 5,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "cells": [{"cell_type": "code", "metadata": {}, "source": src, "outputs": outs, "execution_count": k + 1,
                   "id": f"c{k}"} for k, (src, outs) in enumerate(cells)],
    })  # fmt: skip


def test_a_cell_that_printed_when_saved_must_print_again(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    printed = [{"output_type": "stream", "name": "stdout", "text": "loc(...)\n"}]
    pytester.path.joinpath("t.ipynb").write_text(notebook([
        ("print('still here')", printed),  # prints: passes
        ("x = 1  # printed once, prints nothing now", printed),  # fails
        ("y = 2", []),  # printed nothing when saved either: passes
    ]))
    result = pytester.runpytest_subprocess("--nbval-lax", "-p", "no:cacheprovider", "-p", "no:xdist", "t.ipynb")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*showed output when it was saved and shows nothing now*", "*printed once*"])
