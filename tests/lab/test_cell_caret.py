"""Issue 24 item 12: a %%tpcompile cell's error without a column (an unset module parameter, a cell with nothing
to compile) points at the line that built the target, with a caret as long as that line's text."""

import re

import pytest

import tripy_lab as tp
from tripy_lab.lab import magic

IPython = pytest.importorskip("IPython")


@pytest.fixture(scope="module")
def ip():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or get_ipython()
    magic.load_ipython_extension(shell)
    shell.run_cell("import tripy_lab as tp")
    yield shell
    magic.unload_ipython_extension(shell)


def _caret_under(out: str, lineno: int, code: str) -> str:
    m = re.search(rf"^ {lineno} \| (?P<code>{re.escape(code)})\n +\| (?P<caret>[ ^]*)$", out, re.M)
    assert m, out
    return m.group("caret")


@pytest.mark.parametrize("widgets", [False, True])
def test_unset_module_parameter_points_at_the_module_line(ip, capsys, widgets):
    code = "model = tp.Linear(4, 3)"
    cell = f"%%tpcompile model x=f32[2,4]{'' if widgets else ' --no-widgets'}\nimport math\n{code}  \n"
    result = ip.run_cell(cell, store_history=True)
    if widgets:
        info = magic.last.session.error_info()
        assert "never set in the module" in info["summary"]
        out = info["location"]
    else:
        assert isinstance(result.error_in_exec, tp.TripyException)
        out = capsys.readouterr().out
    assert f"In [{result.execution_count}], line 3" in out
    assert _caret_under(out, 3, code + "  ") == "^" * len(code)


def test_an_error_on_the_magic_line_underlines_the_whole_line(ip, capsys):
    result = ip.run_cell("%%tpcompile n --no-widgets\nx = 1\n", store_history=True)
    assert "defines no function" in str(result.error_in_exec)
    out = capsys.readouterr().out
    assert _caret_under(out, 1, "%%tpcompile n --no-widgets") == "^" * len("%%tpcompile n --no-widgets")
