"""diff(exe_a, exe_b): per-stage side-by-side diffs, outputs on the same inputs, timing, one HTML fragment."""

import re

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import lab
from tripy_lab.lab.views import compile_diff


def f(a):
    return tp.sum(a * 2.0, dim=1)


def info(hi):
    return tp.InputInfo(shape=((1, 2, hi), 4), dtype=tp.float32)


@pytest.fixture(scope="module")
def exes():
    a = tp.compile(f, args=[info(3)], engine="reference")
    return {
        "a": a,
        "bounds": tp.compile(f, args=[info(6)], engine="reference"),
        "engine": tp.compile(f, args=[info(3)], engine="xla", optimization_level=1),
        "same": tp.compile(f, args=[info(3)], engine="reference"),
    }


def test_line_rows_pair_changes_and_fold_unchanged_runs():
    a = [f"line {i}" for i in range(20)]
    b = list(a)
    b[10] = "line ten"
    del b[15]
    rows = compile_diff.line_rows(a, b, context=2)
    kinds = [r.kind for r in rows]
    assert kinds.count("replace") == 1 and kinds.count("delete") == 1 and "fold" in kinds
    rep = next(r for r in rows if r.kind == "replace")
    assert (rep.left, rep.right, rep.left_no, rep.right_no) == ("line 10", "line ten", 11, 11)
    assert next(r for r in rows if r.kind == "delete").left == "line 15"


def test_identical_compiles_have_no_changed_lines(exes):
    d = lab.diff(exes["a"], exes["same"], time=False)
    assert [s.changed for s in d.sections] == [0, 0, 0]
    assert bool(d.outputs["allclose"].all()) and d.outputs["max_abs_err"][0] == 0
    assert d.labels == ("A: reference -O3", "B: reference -O3")


def test_two_bound_sets_differ_in_the_profile_only(exes):
    d = lab.diff(exes["a"], exes["bounds"], time=False)
    mlir = d.section("MLIR")
    changed = [r for r in mlir.rows if r.kind != "equal" and r.kind != "fold"]
    assert len(changed) == 1 and "max = [3, 4]" in changed[0].left and "max = [6, 4]" in changed[0].right
    assert d.section("Layers").changed == 0
    assert ("bounds", "a=[1:2:3,4]", "a=[1:2:6,4]") in d.summary


def test_two_engines_diff_layers_outputs_and_timing(exes):
    d = lab.diff(exes["a"], exes["engine"], iters=3, warmup=1)
    assert d.labels == ("reference -O3", "xla -O1")
    assert d.section("Trace ops").changed == 0 and d.section("MLIR").changed == 0
    assert d.section("Layers").changed > 0  # xla fuses what the interpreter runs op by op
    assert bool(d.outputs["allclose"].all()) and d.outputs["max_rel_err"][0] < 1e-6
    assert list(d.timing["engine"]) == ["reference", "xla"] and (d.timing["iters"] == 3).all()
    markup = d.to_html()
    for key in ("trace", "mlir", "layers", "outputs", "timing"):
        assert f"tripy-diff-{key}" in markup
    assert "compute (ms)" in markup and "B/A compute" in markup
    assert markup == d._repr_html_()
    # layer rows that differ are marked as whole rows: no highlighted fragments of layer names ("con|stant")
    layers = markup[markup.index("tripy-diff-layers"):markup.index("tripy-diff-outputs")]
    assert "tripy-diff-replace" in layers or "tripy-diff-delete" in layers
    assert compile_diff.COLORS["mark_a"] not in layers and compile_diff.COLORS["mark_b"] not in layers


def test_html_escapes_and_marks_changed_characters():
    d = compile_diff.CompileDiff(("<a>", "b"), [("engine", "x<y", "x<y")],
                                 [compile_diff.Section("MLIR", compile_diff.line_rows(["%0 = <kSUM>"],
                                                                                      ["%0 = <kPROD>"]))])
    markup = compile_diff.diff_html(d)
    assert "<a>" not in markup and "&lt;a&gt;" in markup and "x&lt;y" in markup
    marked = re.findall(r'<span style="background:[^"]+">([^<]*)</span>', markup)
    assert marked and all(m in "kSUMkPROD" for m in marked)


def test_outputs_that_differ_are_measured(exes):
    g = tp.compile(lambda a: tp.sum(a * 3.0, dim=1), args=[info(3)], engine="reference")
    frame, where = compile_diff.compare_outputs(exes["a"], g)
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    assert where == "a=2x4" and not frame["allclose"][0]
    expected = np.abs(x.sum(1) * 2 - x.sum(1) * 3).max()
    assert frame["max_abs_err"][0] == pytest.approx(expected, rel=1e-5)
    assert frame["max_rel_err"][0] == pytest.approx(0.5, rel=1e-5)


def test_inputs_outside_the_other_bounds_are_reported_not_raised(exes):
    d = lab.diff(exes["bounds"], exes["a"], time=False, shapes="max")  # a=6x4 is outside a's max 3
    assert d.outputs is None and "could not run both" in d.outputs_note
