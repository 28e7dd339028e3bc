"""Every error of a %%tpcompile cell names the cell (``In [N]``) and the line as the cell shows it (the magic
line is line 1), never IPython's machinery; library frames are hidden unless tp.config asks for them."""

import re

import pytest

import tripy_lab as tp
from tripy_lab.core import config
from tripy_lab.lab.widget import magic

IPython = pytest.importorskip("IPython")

MODULE = (
    "class M(tp.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        self.linear = tp.Linear(3, 4)\n    def forward(self, x):\n        return self.linear(x)\n"
)
# (name, magic line, cell body, summary fragment, line in the cell (1 = the magic line), text on that line)
CASES = [
    ("returns int", "f a=f32[2,3]", "def f(a):\n    b = a + 1\n    return 3\n",
     "must return 1 or more Tensors", 4, "return 3"),
    ("returns None", "f a=f32[2,3]", "def f(a):\n    b = a + 1\n",
     "must return 1 or more Tensors", 3, "b = a + 1"),
    ("module parameter not set", "lin x=f32[2,3]", "model = M()\n",
     "never set in the module", 2, "model = M()"),
    ("matmul shapes", "mm a=f32[2,3] b=f32[4,5]", "def mm(a, b):\n    c = a + 1.0\n    return c @ b\n",
     "Incompatible shapes for matrix multiplication", 4, "return c @ b"),
    ("dtype mismatch", "mix a=f32[2] b=f16[2]", "def mix(a, b):\n    return a * b\n",
     "Invalid inputs for function: '__mul__'", 3, "return a * b"),
    ("bad reshape", "rs a=f32[2,3]", "def rs(a):\n    y = tp.exp(a)\n    return tp.reshape(y, (4, 5))\n",
     "Cannot reshape", 4, "return tp.reshape(y, (4, 5))"),
    ("bad bounds", "b a=f32[1:3:2,4]", "def b(a):\n    return a\n",
     "Invalid dimension bounds", 1, "%%tpcompile b a=f32[1:3:2,4]"),
    ("unknown parameter", "u a=f32[2] zz=f32[2]", "def u(a):\n    return a\n",
     "no parameter 'zz'", 1, "%%tpcompile u a=f32[2] zz=f32[2]"),
    ("missing spec", "m a=f32[2]", "def m(a, b):\n    return a + b\n",
     "No spec for parameter", 1, "%%tpcompile m a=f32[2]"),
    ("nothing to compile", "n", "x = 1\n",
     "defines no function", 1, "%%tpcompile n"),
    ("engine missing", "e a=f32[2] --engine tensorrt", "def e(a):\n    return a + a\n",
     "", 2, "def e(a):"),
]


@pytest.fixture(scope="module")
def ip():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or get_ipython()  # one global test shell per process
    magic.load_ipython_extension(shell)
    shell.run_cell("import tripy_lab as tp")
    shell.run_cell(MODULE)
    yield shell
    magic.unload_ipython_extension(shell)


def run(ip, cell):
    result = ip.run_cell(cell, store_history=True)
    return result.execution_count, result


@pytest.mark.parametrize("name,line,body,summary,lineno,code", CASES, ids=[c[0] for c in CASES])
def test_error_names_the_cell_and_its_line(ip, capsys, name, line, body, summary, lineno, code):
    n, result = run(ip, f"%%tpcompile {line} --no-widgets\n{body}")
    exc = result.error_in_exec
    assert isinstance(exc, tp.TripyException), exc
    out = capsys.readouterr().out
    assert summary in out
    assert f"--> In [{n}], line {lineno}" in out, out
    if lineno == 1:  # the magic line itself, quoted with a caret under the bad part
        assert f"{code} --no-widgets" in out
    else:
        assert re.search(rf"^ {lineno} \| *{re.escape(code)}$", out, re.M), out
    assert "interactiveshell" not in out and "site-packages" not in out and "tripy_lab/" not in out


def test_python_errors_in_the_cell_give_ipython_the_cells_own_line(ip, capsys):
    n, result = run(ip, "%%tpcompile u a=f32[2] --no-widgets\ndef u(a):\n    b = a\n    return a + nope\n")
    assert isinstance(result.error_in_exec, NameError)
    out = capsys.readouterr().out
    assert f"Cell In[{n}], line 4, in u(a)" in out and "----> 4     return a + nope" in out, out
    assert "tracing.py" not in out


def test_internal_frames_are_shown_when_config_asks(ip, capsys, monkeypatch):
    cell = "%%tpcompile f a=f32[2,3] --no-widgets\ndef f(a):\n    return 3\n"
    run(ip, cell)
    short = capsys.readouterr().out
    assert "frames of tripy-lab, IPython and jax hidden" in short and "tracing.py" not in short
    monkeypatch.setattr(config, "show_internal_frames", True)
    run(ip, cell)
    full = capsys.readouterr().out
    assert "tracing.py" in full and "frames of tripy-lab" not in full and "In [" in full


def test_widget_session_errors_point_into_the_cell(ip):
    n, result = run(ip, "%%tpcompile f a=f32[2,3]\ndef f(a):\n    b = tp.exp(a)\n    return 3\n")
    assert result.success  # the widget shows the error; the cell itself does not fail
    ui = magic.last
    s = ui.session
    assert s.error_stage == "trace" and "must return" in s.error.summary
    info = s.error_info()
    assert info["location"].startswith(f"--> In [{n}], line 4 in f()")
    # The Error tab is selected; the Trace tab shows the partial trace (the exp op) and where it stopped.
    assert ui.tabs.selected_index == 5 and ui.tabs.titles[5] == "Error ●"
    trace_html = ui.panes["trace"].value
    assert "Tracing stopped at" in trace_html and f"In [{n}], line 4" in trace_html
    assert "partial trace" in trace_html and "exp" in trace_html and "<svg" in trace_html
    ui.tabs.selected_index = 4  # the Log renders when shown: no stage has run, and no cell says None
    log = re.sub(r"<[^>]+>", " ", ui.panes["log"].value)
    assert "Current stages" in log and "trace" in log and "None" not in log and "nan" not in log.lower()


def test_widget_error_tab_shows_every_frame_when_config_asks(ip, monkeypatch):
    run(ip, "%%tpcompile f a=f32[2,3]\ndef f(a):\n    return 3\n")
    assert "tracing.py" not in "\n".join(magic.last.session.error_info()["details"])
    monkeypatch.setattr(config, "show_internal_frames", True)
    details = "\n".join(magic.last.session.error_info()["details"])
    assert "Traceback (most recent call last)" in details and "tripy_lab/pipeline/tracing.py" in details


def test_widget_error_for_a_python_error_names_the_line(ip):
    n, _ = run(ip, "%%tpcompile g a=f32[2,3]\ndef g(a):\n    return a + nope\n")
    info = magic.last.session.error_info()
    assert info["summary"].startswith("NameError") and info["location"].startswith(f"--> In [{n}], line 3")


def test_fixing_the_error_returns_to_the_tab_shown_before(ip):
    from tripy_lab.lab.widget.ui import _KEYS

    run(ip, "%%tpcompile h a=f32[2,3]\ndef h(a):\n    return a @ a\n")
    ui = magic.last
    assert ui.tabs.selected_index == _KEYS.index("error")
    ui.session.model.set_bounds("a", 0, 3, 3, 3)  # now a is [3, 3]: a @ a is fine
    ui.session.schedule()
    ui.session.flush()
    assert ui.session.error is None and ui.tabs.selected_index == 0
