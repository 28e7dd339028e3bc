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


def _resave():
    """scripts/resave_tutorials.py as a module (scripts/ is not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("resave_tutorials", ROOT / "scripts" / "resave_tutorials.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_shipped_tutorials_show_nothing_of_the_authors_machine(path):
    """No home folder (/root, /home/NAME), checkout path, user or host name in a saved output, every output
    valid, and the file small enough to open quickly (scripts/resave_tutorials.py writes them so)."""
    import nbformat

    resave = _resave()
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert resave.leaks(nb) == []
    assert resave.errors(nb) == []
    assert path.stat().st_size < resave.MAX_BYTES
    assert "widgets" not in nb.metadata  # the static snapshot is what a reader without a kernel sees


def test_the_leak_check_finds_homes_checkouts_and_site_packages():
    import nbformat

    resave = _resave()
    texts = ["cache /root/.cache/tripy-lab/xla", "in /home/alice/x.py", f"file {ROOT}/src/a.py",
             "at /usr/lib/python3/site-packages/jax/x.py"]
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output("stream", text=t)]) for t in texts
        + ["cache ~/.cache/tripy-lab/xla", "loc(\"%t0\"(\"cell:5\":5:20))"]])
    found = resave.leaks(nb)
    # one finding or more per leaking cell (a checkout under /home/NAME is also a home folder and NAME): cells 0-3
    assert sorted({f.split(":")[0] for f in found}) == ["cell 0", "cell 1", "cell 2", "cell 3"], found
    assert any(f.startswith("cell 2: the checkout:") for f in found), found
