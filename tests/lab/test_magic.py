"""%load_ext tripy_lab and %%tpcompile, through IPython's InteractiveShell (no kernel, no browser)."""

import html
import re

import pytest

import tripy_lab as tp
from tripy_lab.lab.widget import magic

IPython = pytest.importorskip("IPython")


@pytest.fixture(scope="module")
def ip():
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or get_ipython()  # one global test shell per process
    magic.load_ipython_extension(shell)
    shell.run_cell("import tripy_lab as tp")
    yield shell
    magic.unload_ipython_extension(shell)


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


ADD = "def add(a, b):\n    return a + b\n"


def test_no_widgets_compiles_into_the_namespace(ip, capsys):
    result = ip.run_cell(f"%%tpcompile add_exe a=f32[1:2:3,4] b=f32[1:2:3,4] --no-widgets -O 2\n{ADD}")
    assert result.success
    exe = ip.user_ns["add_exe"]
    assert isinstance(exe, tp.Executable) and exe.stages["built"].optimization_level == 2
    assert exe.input_infos["a"] == tp.InputInfo(((1, 2, 3), 4), tp.float32)
    assert "add_exe = Executable(a: Tensor, b: Tensor) -> Tensor" in capsys.readouterr().out
    assert callable(ip.user_ns["add"])  # the cell's own definitions stay


def test_default_name_and_python_expression_specs(ip):
    ip.run_cell("info = tp.InputInfo((2, 2), tp.float32)")
    result = ip.run_cell(f"%%tpcompile a=info b=tp.InputInfo((2, 2), tp.float32) --no-widgets\n{ADD}")
    assert result.success and ip.user_ns["add_exe"].input_infos["b"].shape_bounds.max == (2, 2)


def test_module_instance_and_dimension_input_info(ip):
    cell = ("class M(tp.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.linear = tp.Linear(3, 4)\n"
            "    def forward(self, x):\n        return self.linear(x)\n"
            "model = M()\n"
            "model.load_state_dict({'linear.weight': tp.ones((4, 3)), 'linear.bias': tp.ones((4,))})\n")
    assert ip.run_cell(f"%%tpcompile lin x=f32[batch=1:2:8,3] --no-widgets\n{cell}").success
    assert ip.user_ns["lin"].input_infos["x"].dimension_names == {0: "batch"}
    cell = "def rs(x, s):\n    return tp.reshape(x, (-1, s))\n"
    assert ip.run_cell(f"%%tpcompile rs_exe x=f32[3,4] s=dim[1:2:4] --no-widgets\n{cell}").success
    out = ip.user_ns["rs_exe"](tp.ones((3, 4)).eval(), tp.DimensionSize(2))
    assert out.shape == (6, 2)


def test_bad_spec_shows_a_caret_and_the_kernel_keeps_working(ip, capsys):
    result = ip.run_cell(f"%%tpcompile bad a=f32[1:3:2,4] --no-widgets\n{ADD}")
    assert not result.success and isinstance(result.error_in_exec, tp.TripyException)
    out = capsys.readouterr().out
    assert "Invalid dimension bounds: min=1, opt=3, max=2." in out
    lines = out.splitlines()
    i = next(k for k, line in enumerate(lines) if line.strip().startswith("%%tpcompile bad"))
    line, carets = lines[i], lines[i + 1]
    assert line[carets.index("^"):carets.rindex("^") + 1] == "1:3:2"
    assert "Traceback" not in out and "frames of tripy-lab, IPython and jax hidden" in out
    assert ip.run_cell("1 + 1").success


def test_user_errors_show_the_users_line_without_internal_frames(ip, capsys):
    cell = "def mm(a, b):\n    c = a + 1.0\n    return c @ b\n"
    result = ip.run_cell(f"%%tpcompile mm_exe a=f32[2,3] b=f32[4,5] --no-widgets\n{cell}")
    assert not result.success
    out = capsys.readouterr().out
    assert "Incompatible shapes for matrix multiplication" in out
    n = ip.execution_count  # the line counts the %%tpcompile line, as the cell shows it
    assert "return c @ b" in out and f"In [{n}], line 4 in mm()" in out and f"In [{n}]:4 in mm()" in out
    assert "tripy_lab/pipeline" not in out and "interactiveshell.py" not in out


def test_python_errors_in_the_cell_hide_tripy_lab_frames(ip, capsys):
    result = ip.run_cell("%%tpcompile u a=f32[2] --no-widgets\ndef u(a):\n    return a + undefined_name\n")
    assert isinstance(result.error_in_exec, NameError)
    out = capsys.readouterr().out
    assert "undefined_name" in out and "tripy_lab/pipeline" not in out and "tracing.py" not in out


@pytest.mark.parametrize(("line", "message"), [
    ("x=f32[2] --no-widgets", "no parameter 'x'"),
    ("a=f32[2] --no-widgets", "No spec for parameter: b"),
    ("a=f33[2] b=f32[2] --no-widgets", "Did you mean the compact form f32[...]"),
])
def test_spec_errors_against_the_function(ip, capsys, line, message):
    result = ip.run_cell(f"%%tpcompile {line}\n{ADD}")
    assert isinstance(result.error_in_exec, tp.TripyException)
    assert message in capsys.readouterr().out


def test_cell_without_a_function(ip, capsys):
    result = ip.run_cell("%%tpcompile a=f32[2]\nx = 1\n")
    assert "defines no function or tp.Module" in str(result.error_in_exec)


def test_help_documents_the_syntax(ip):
    doc = ip.find_cell_magic("tpcompile").__doc__
    for needle in ("a=f32[1:2:3,4]", "x=f16[batch=1:8:32,seq=1:128:512]", "s=dim[1:2:4]", "--no-widgets",
                   "-O N", "--engine", "Examples"):
        assert needle in doc


def test_widgets_mode_refreshes_mlir_when_the_max_slider_moves(ip):
    result = ip.run_cell(f"%%tpcompile w_exe a=f32[1:2:3,4] b=f32[1:2:3,4] --debounce-ms 0\n{ADD}")
    assert result.success
    ui = magic.last
    assert ip.user_ns["w_exe"] is ui.session.exe
    mlir = text_of(ui.panes["mlir"].value)
    assert "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>" in mlir
    assert "<svg" in ui.panes["trace"].value or "digraph" in ui.panes["trace"].value
    row = ui.editor.rows[0]
    row.range.value = (1, 6)
    mlir = text_of(ui.panes["mlir"].value)
    assert "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [6, 4]>" in mlir
    assert ip.user_ns["w_exe"].input_infos["a"].shape_bounds.max == (6, 4)
    # An invalid bound is flagged in the editor; the tabs keep the last good stages.
    row.text.value = "5:1:2"
    assert "min 5 &gt; max 2" in ui.editor.problems.value
    assert "invalid bounds" in ui.status.value
    row.text.value = "1:2:3"
    assert "max = [3, 4]" in text_of(ui.panes["mlir"].value)
    assert ui.session.error is None


def test_widgets_mode_tabs_render_on_demand(ip):
    ip.run_cell(f"%%tpcompile t_exe a=f32[1:2:3,4] b=f32[1:2:3,4]\n{ADD}")
    ui = magic.last
    for index, key in enumerate(("engine", "log", "error")):
        ui.tabs.selected_index = [2, 4, 5][index]
        assert ui.panes[key].value
    assert "reference" in ui.panes["engine"].value
    ui.tabs.selected_index = 6
    data = ui.crosswalk.outputs[0]["data"]
    from tripy_lab.lab.views.crosswalk_schema import MIME_TYPE, validate_bundle

    assert validate_bundle(data[MIME_TYPE]) == []
    ui.generic.value = True
    assert '"tensorrt.element_wise"' in text_of(ui.panes["mlir"].value)
    ui.point.value = "min, opt, max"
    ui.warmup.value, ui.iters.value = 1, 3
    ui.time_button.click()
    assert ui.run_out.value.count("<tr") == 4  # header + min/opt/max
    ui.sweep_button.click()
    assert "<svg" in ui.run_out.value and "opt</text>" in ui.run_out.value
    # the plotted values are the compute column: the y title says so
    assert re.search(r"class=.tripy-ytitle.[^>]*>compute \(ms, median\)<", ui.run_out.value)
    ui.point.value = "custom"
    ui.custom.value = "a=2x4 b=2x4"
    ui.run_button.click()
    assert "(2, 4)" in ui.run_out.value
    ui.custom.value = "a=9x4 b=9x4"
    ui.run_button.click()
    assert "Unexpected tensor shape" in ui.run_out.value  # shown, widget alive


def test_missing_specs_get_an_editor(ip):
    cell = "def f(a, b, scale=2.0):\n    return a * b\n"
    result = ip.run_cell(f"%%tpcompile m_exe a=f32[2] --debounce-ms 0\n{cell}")
    assert result.success
    ui = magic.last
    assert list(ui.editor.model.params) == ["a", "b"]  # `scale` has a default: a constant
    assert "b" in ui.editor.editable_rank
    # b defaults to a dynamic 1-D float32 tensor, which broadcasts against a: traced and built.
    assert ui.session.error is None and ip.user_ns["m_exe"] is not None


def test_trace_errors_land_in_the_error_tab(ip):
    cell = "def mm(a, b):\n    c = a + 1.0\n    return c @ b\n"
    ip.run_cell(f"%%tpcompile mm2 a=f32[2,3] b=f32[3,5] --debounce-ms 0\n{cell}")
    ui = magic.last
    assert ui.session.error is None
    ui.editor.rows[2].text.value = "4"
    assert "Error ●" in ui.tabs.titles
    ui.tabs.selected_index = 5
    assert "matrix multiplication" in ui.panes["error"].value
    assert "return c @ b" in ui.panes["error"].value
    op = ui.session.error_op
    assert op and "#dc2626" in ui.panes["trace"].value  # failing op highlighted in the graph
