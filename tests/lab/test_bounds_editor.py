"""The ipywidgets bounds editor, driven like a user would (trait changes), no browser."""

import pytest

from tripy_lab.lab import spec as S
from tripy_lab.lab.bounds_model import BoundsModel
from tripy_lab.lab.widget.bounds_editor import BoundsEditor, parse_bounds_text

pytest.importorskip("ipywidgets")


def editor(line: str, missing=()):
    parsed = S.parse_line(line)
    names = list(parsed.params) + list(missing)
    m = BoundsModel.from_values(names, {n: p.spec for n, p in parsed.params.items()})
    calls = []
    return BoundsEditor(m, on_change=lambda: calls.append(1), editable_rank=set(missing)), calls


def test_range_slider_keeps_opt_slider_inside():
    ed, calls = editor("a=f32[1:4:8,4]")
    row = ed.rows[0]
    row.range.value = (1, 3)
    assert (row.opt.min, row.opt.max, row.opt.value) == (1, 3, 3)
    assert ed.model.params["a"].dims[0].opt == 3
    assert row.text.value == "1:3:3"
    assert calls


def test_named_dims_move_together_in_the_widgets():
    ed, _ = editor("x=f32[n=1:2:4] y=f32[n]")
    x_row, y_row = ed.rows
    x_row.range.value = (2, 6)
    assert y_row.range.value == (2, 6)
    assert "(n)" in y_row.label.value


def test_static_toggle_disables_the_range():
    ed, _ = editor("a=f32[1:2:4]")
    row = ed.rows[0]
    row.toggle.value = False
    assert row.range.disabled and row.toggle.description == "static"
    assert ed.model.params["a"].dims[0].static
    row.opt.value = 5
    assert ed.model.spec_of("a").dims[0] == S.DimSpec(5, 5, 5)


def test_invalid_text_is_flagged_and_the_widget_recovers():
    ed, calls = editor("a=f32[1:2:3,4]")
    row = ed.rows[0]
    row.text.value = "3:5:2"
    assert "min 3 &gt; max 2" in ed.problems.value
    assert row.range.value == (1, 3)  # sliders untouched by the bad bounds
    row.text.value = "x"
    assert "cannot read" in ed.problems.value
    row.range.value = (1, 4)  # a slider move fixes it
    assert ed.problems.value == ""
    assert ed.model.is_valid()


def test_slider_scale_grows_when_max_reaches_the_end():
    ed, _ = editor("a=f32[1:2:3]")
    row = ed.rows[0]
    limit = row.range.max
    row.range.value = (1, limit)
    assert row.range.max > limit


def test_dtype_and_code_view():
    ed, _ = editor("a=f32[1:2:3,4]")
    assert ed.code_toggle.description == "show Tripy code"
    ed.code_toggle.value = True
    assert ed.code_toggle.description == "hide Tripy code"
    assert "tp.InputInfo(shape=((1, 2, 3), 4), dtype=tp.float32)" in ed.code.value
    ed.params_box.children[0].children[0].children[1].value = "float16"
    assert "dtype=tp.float16" in ed.code.value
    ed.code_toggle.value = False
    assert ed.code_toggle.description == "show Tripy code" and ed.code.value == ""


def test_missing_param_can_change_rank_and_kind():
    ed, _ = editor("a=f32[2]", missing=["b"])
    assert len(ed.rows) == 2
    head = ed.params_box.children[1].children[0].children
    add = next(w for w in head if getattr(w, "description", "") == "+ dim")
    add.click()
    assert len(ed.model.params["b"].dims) == 2 and len(ed.rows) == 3
    kind = head[1]
    kind.value = "dim"
    assert ed.model.params["b"].kind == "dim"


@pytest.mark.parametrize(("text", "out"), [("4", (4, 4, 4)), (" 1 : 2 : 3 ", (1, 2, 3))])
def test_parse_bounds_text(text, out):
    assert parse_bounds_text(text) == out


@pytest.mark.parametrize("text", ["1:2", "a", "", "1:2:3:4"])
def test_parse_bounds_text_rejects(text):
    with pytest.raises(ValueError, match="expected N or min:opt:max"):
        parse_bounds_text(text)
