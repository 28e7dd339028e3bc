"""`tripy-lab report` never loses a file and reads any notebook without a traceback (issue 27 items 2 and 7)."""

from __future__ import annotations

import json

import pytest

from tripy_lab.lab.cli import main as cli
from tripy_lab.lab.views import snapshot

pytest.importorskip("nbformat")


def notebook(outputs=None, **cell) -> dict:
    code = {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": 1, "source": "x = 1",
            "outputs": outputs if outputs is not None else [], **cell}
    return {"cells": [code], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def with_snapshot() -> dict:
    fragment = f'<div class="tripy-snapshot">{snapshot.MARKER}<pre>tensorrt.shape_profile</pre></div>'
    return notebook([{"output_type": "display_data", "metadata": {}, "data": {"text/html": fragment}}])


def run(capsys, *argv) -> tuple[int, str]:
    code = cli.main(["report", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.err


def test_report_never_writes_over_its_notebook(tmp_path, capsys):
    nb = tmp_path / "nb.ipynb"
    nb.write_text(json.dumps(with_snapshot()))
    before = nb.read_bytes()
    for argv in ([nb, "-o", nb], [nb, "-o", nb, "--force"], [nb, "-o", tmp_path / "." / "nb.ipynb"]):
        code, err = run(capsys, *argv)
        assert code == 1 and "over its input" in err and "Traceback" not in err, err
        assert nb.read_bytes() == before
    html_named = tmp_path / "x.html"  # a notebook named .html: the default output is itself
    html_named.write_text(json.dumps(with_snapshot()))
    code, err = run(capsys, html_named)
    assert code == 1 and "over its input" in err
    assert json.loads(html_named.read_text())["nbformat"] == 4


def test_report_overwrites_only_its_own_reports_unless_forced(tmp_path, capsys):
    nb = tmp_path / "nb.ipynb"
    nb.write_text(json.dumps(with_snapshot()))
    out = tmp_path / "out.html"
    out.write_text("<html>my own page</html>")
    code, err = run(capsys, nb, "-o", out)
    assert code == 1 and "not a tripy-lab report" in err and "--force" in err
    assert out.read_text() == "<html>my own page</html>"
    assert run(capsys, nb, "-o", out, "--force")[0] == 0 and snapshot.MARKER in out.read_text()
    assert run(capsys, nb, "-o", out)[0] == 0  # now it is one of ours: replaced without --force
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nb.ipynb", "out.html"]


def test_lab_report_refuses_a_file_that_is_not_a_report(tmp_path):
    import tripy_lab as tp
    import tripy_lab.lab

    exe = tp.compile(lambda a: a + 1.0, args=[tp.InputInfo((2,), tp.float32)], engine="reference")
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes")
    with pytest.raises(tp.TripyException, match="not a tripy-lab report"):
        tripy_lab.lab.report(exe, mine)
    assert mine.read_text() == "my notes"
    tripy_lab.lab.report(exe, mine, force=True)
    tripy_lab.lab.report(exe, mine)  # ours now
    assert "tripy-lab report" in mine.read_text()


DEEP = "[" * 100_000 + "]" * 100_000
MALFORMED = {
    "top-level list": "[]",
    "top-level string": '"a notebook"',
    "top-level number": "3",
    "empty object": "{}",
    "cells a string": json.dumps({**notebook(), "cells": "x"}),
    "a cell that is a string": json.dumps({**notebook(), "cells": ["x"]}),
    "a cell that is null": json.dumps({**notebook(), "cells": [None]}),
    "outputs a dict": json.dumps(notebook({})),
    "an output that is a string": json.dumps(notebook(["out"])),
    "text/html a list of ints": json.dumps(notebook([{"output_type": "display_data", "metadata": {},
                                                      "data": {"text/html": [1, 2, 3]}}])),
    "data a list": json.dumps(notebook([{"output_type": "display_data", "metadata": {}, "data": [1]}])),
    "NaN": json.dumps(notebook()).replace('"execution_count": 1', '"execution_count": NaN'),
    "100k-deep JSON": json.dumps(notebook()).replace('"metadata": {}', f'"metadata": {{"deep": {DEEP}}}', 1),
    "not UTF-8": b"\xff\xfe{}",
    "not JSON": "{not json",
}


@pytest.mark.parametrize("name", list(MALFORMED))
def test_malformed_notebooks_are_reported_without_a_traceback(tmp_path, capsys, name):
    nb = tmp_path / "bad.ipynb"
    data = MALFORMED[name]
    nb.write_bytes(data if isinstance(data, bytes) else data.encode())
    code, err = run(capsys, nb, "-o", tmp_path / "r.html")
    assert code == 1, err
    assert err.startswith("tripy-lab report: Cannot read the notebook") and "Traceback" not in err, err
    assert not (tmp_path / "r.html").exists()
