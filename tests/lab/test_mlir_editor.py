"""The widget hooks: MLIR tab editor (edit, build, compare), Compare tab picker, Run tab hints."""

import html
import re

import numpy as np
import pytest

import tripy_lab as tp

pytest.importorskip("ipywidgets")


def red(a):
    return tp.sum(a, dim=1)


@pytest.fixture
def ui():
    """The widget %%tpcompile red_exe a=f32[1:2:3,4] --engine reference shows (no kernel needed)."""
    from tripy_lab.lab import spec as S
    from tripy_lab.lab.bounds_model import BoundsModel
    from tripy_lab.lab.session import Session
    from tripy_lab.lab.widget.bounds_editor import BoundsEditor
    from tripy_lab.lab.widget.ui import LabWidget

    parsed = S.parse_line("red_exe a=f32[1:2:3,4]")
    model = BoundsModel.from_values(["a"], {n: p.spec for n, p in parsed.params.items()})
    session = Session(red, model, exe_name="red_exe", namespace={}, engine="reference", debounce_seconds=0)
    editor = BoundsEditor(model, on_change=session.schedule)
    widget = LabWidget(session, editor, title="red")
    session.refresh()
    return widget


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def test_run_tab_hint_before_and_after_a_run(ui):
    assert ui.session.exe is not None  # auto-built
    assert "engine changed" not in ui.run_out.value  # nothing ran yet: no stale-result warning
    ui.point.value, ui.warmup.value, ui.iters.value = "opt", 0, 2
    ui.run_button.click()
    assert "(2,)" in ui.run_out.value
    ui.level.value = 2  # a rebuild: the shown result is the old engine's
    assert "engine changed: run or time again" in ui.run_out.value
    ui.level.value = 3


def test_edit_ksum_to_kprod_builds_and_compares(ui):
    editor = ui.mlir_editor
    editor.toggle.value = True
    assert editor.widget.layout.display == "flex" and ui.panes["mlir"].layout.display == "none"
    assert "<kSUM>" in editor.text.value and "__elided__" not in editor.text.value
    editor.text.value = editor.text.value.replace("<kSUM>", "<kPROD>")
    editor.build_button.click()
    out = text_of(editor.out.value)
    assert "outputs differ from the original" in out and "max abs err" in out
    edited = ui.session.namespace["red_exe_edited"]
    x = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(np.asarray(edited(x).tolist()), np.prod(x, axis=1))
    assert not editor.result.same and editor.result.comparison["max_abs_err"][0] > 0


def test_a_malformed_edit_shows_line_and_column_and_recovers(ui):
    editor = ui.mlir_editor
    editor.toggle.value = True
    editor.text.value = editor.text.value.replace("<kSUM>", "<kPRODUCT>")
    editor.build_button.click()
    assert 'data-line="4"' in editor.out.value and "line 4, column 27" in text_of(editor.out.value)
    marked = re.search(r'data-line="4" style="background:#fee2e2;[^"]*">(.*?)</div>', editor.out.value).group(1)
    assert "kPRODUCT" in text_of(marked)  # the failing line, marked, in the excerpt of the edited text
    caret = re.search(r'class="tripy-edit-caret"[^>]*>( *)\^', editor.out.value).group(1)
    assert len(caret) == 4 + 27  # under column 27, past the line-number gutter
    editor.reset_button.click()
    editor.build_button.click()
    assert "outputs match the original" in text_of(editor.out.value)
    editor.toggle.value = False
    assert ui.panes["mlir"].layout.display is None


def test_compare_tab_lists_builds_and_shows_the_diff(ui):
    ui.level.value = 2  # a second build of the same bounds, cached
    ui.level.value = 3
    ui.tabs.selected_index = ui.tabs.children.index(ui.compare.widget)
    labels = [label for label, _ in ui.compare.picker.options]
    assert labels[0] == "Compare with…" and "reference -O0" in labels
    assert any(label.startswith("built: reference -O2") for label in labels)  # the level-2 build above
    choice = dict(ui.compare.picker.options)["reference -O0"]
    ui.compare.picker.value = choice
    out = ui.compare.out.value
    assert "tripy-diff-mlir" in out and "tripy-diff-timing" in out
    assert ui.compare.result.labels[1] == "reference -O0"
    assert ("optimization level", "3", "0") in ui.compare.result.summary
    assert ui.compare.picker.value == choice


def test_two_bound_sets_from_the_picker_and_a_stale_edit_note(ui):
    editor = ui.mlir_editor
    editor.toggle.value = True
    editor.reset_button.click()
    ui.editor.rows[0].range.value = (1, 6)  # new bounds: re-trace and (fast) auto-build
    assert "max = [6, 4]" in text_of(ui.panes["mlir"].value)
    assert "original changed" in editor.note.value and "max = [3, 4]" in editor.text.value
    editor.build_button.click()  # builds against the module the text came from
    assert "outputs match the original" in text_of(editor.out.value)
    editor.toggle.value = False
    ui.tabs.selected_index = ui.tabs.children.index(ui.compare.widget)
    ui.compare.refresh()
    options = dict(ui.compare.picker.options)
    label = "built: reference -O3 a=[1:2:3,4]"
    assert label in options
    ui.compare.picker.value = options[label]
    d = ui.compare.result
    assert ("bounds", "a=[1:2:6,4]", "a=[1:2:3,4]") in d.summary
    assert d.section("MLIR").changed == 1 and d.section("Layers").changed == 0
    assert bool(d.outputs["allclose"].all())  # this build's opt shapes (2x4) fit the other's bounds
