"""Lowered.from_text: edited MLIR is parsed, verified (errors at line/column) and built by an engine."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.pipeline import Lowered


def reduce_sum(a):
    return tp.sum(a, dim=1)


@pytest.fixture(scope="module")
def lowered():
    return pipeline.trace(reduce_sum, args=[tp.InputInfo(shape=((1, 2, 3), 4), dtype=tp.float32)]).lower()


def text_of(lowered):
    from tripy_lab.lab.widget.mlir_editor import editable_text

    return editable_text(lowered)


@pytest.mark.parametrize("engine", ["reference", "xla"])
def test_an_edit_from_ksum_to_kprod_computes_products(lowered, engine):
    text = text_of(lowered)
    assert text.count("<kSUM>") == 1
    edited = Lowered.from_text(text.replace("<kSUM>", "<kPROD>"), like=lowered)
    assert edited.program.arg_names == ["a"] and edited.program.input_infos == lowered.program.input_infos
    exe = edited.build(engine=engine).executable()
    x = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(np.asarray(exe(x).tolist()), np.prod(x, axis=1))
    original = lowered.build(engine=engine).executable()
    np.testing.assert_allclose(np.asarray(original(x).tolist()), x.sum(1))


def test_an_unchanged_text_round_trips(lowered):
    again = Lowered.from_text(text_of(lowered), like=lowered)
    assert again.as_text() == lowered.as_text() and again.traced is lowered.traced


def test_without_like_the_inputs_come_from_main(lowered):
    edited = Lowered.from_text(text_of(lowered).replace("max = [3, 4]", "max = [9, 4]"))
    assert edited.program.arg_names == ["arg0"]
    assert edited.program.input_infos["arg0"] == tp.InputInfo(shape=((1, 2, 9), 4), dtype=tp.float32)


@pytest.mark.parametrize(
    "old, new, kind, line, column, words",
    [
        ("<kSUM>", "<kSUMX>", "parse", 4, 27, "kPROD"),  # an unknown enum: the caret is on it
        ("reduce <kSUM> %arg0", "reduce <kSUM> %arg9", "parse", 4, 33, "%arg9"),  # an undefined value, at its use
        ("array<i64: 1>", "array<i64: 7>", "verify", 4, 5, "out of range"),  # the op's first column
        ("tensorrt.reduce", "tensorrt.reduc", "parse", 4, 10, "unknown operation 'tensorrt.reduc'"),
    ],
)
def test_malformed_edits_name_line_and_column(lowered, old, new, kind, line, column, words):
    text = text_of(lowered)
    assert old in text
    with pytest.raises(tp.TripyException) as info:
        Lowered.from_text(text.replace(old, new, 1), like=lowered)
    exc = info.value
    assert (exc.kind, exc.line, exc.column) == (kind, line, column), str(exc)
    assert f"line {line}, column {column}" in exc.summary and words in str(exc)
    assert "^" in exc.details[-1]  # a caret under the column


def test_a_changed_signature_is_refused(lowered):
    text = text_of(lowered)
    two = text.replace("%arg0: tensor<?x4xf32> {", "%arg1: tensor<4xf32>, %arg0: tensor<?x4xf32> {", 1)
    with pytest.raises(tp.TripyException, match="takes 2 arguments; the original takes 1"):
        Lowered.from_text(two, like=lowered)


def test_elided_or_unknown_constant_data_is_refused_at_its_line():
    weights = np.arange(2000, dtype=np.float32).reshape(500, 4)
    lowered = pipeline.trace(lambda a: a + tp.Tensor(weights),
                             args=[tp.InputInfo(shape=(500, 4), dtype=tp.float32)]).lower()
    text = lowered.as_text()  # the constant is a dense_resource handle: its bytes come from `like`
    exe = Lowered.from_text(text, like=lowered).build(engine="reference").executable()
    np.testing.assert_array_equal(np.asarray(exe(weights)), weights * 2)
    with pytest.raises(tp.TripyException, match="no data for dense_resource<tripy_const_0>") as info:
        Lowered.from_text(text)  # no `like`, no trailer: the data is nowhere
    assert info.value.line == text.splitlines().index(next(
        ln for ln in text.splitlines() if "tensorrt.constant" in ln)) + 1
    elided = text.replace("dense_resource<tripy_const_0>", "dense_resource<__elided__>")
    with pytest.raises(tp.TripyException, match="elide"):
        Lowered.from_text(elided, like=lowered)


def add(a, b):
    return a + b


def test_an_edit_keeps_named_dimensions_and_calls_still_check_them():
    n = tp.NamedDimension("n", 1, 2, 4)
    lowered = pipeline.trace(add, args=[tp.InputInfo((n, 3), tp.float32), tp.InputInfo((n, 3), tp.float32)]).lower()
    edited = Lowered.from_text(text_of(lowered).replace("max = [4, 3]", "max = [5, 3]"), like=lowered)
    assert [info.shape_bounds.max for info in edited.program.input_infos.values()] == [(5, 3), (5, 3)]
    assert all(info.dimension_names == {0: "n"} for info in edited.program.input_infos.values())
    exe = edited.build(engine="reference").executable()
    with pytest.raises(tp.TripyException, match="Mismatched sizes for named dimension 'n'"):
        exe(np.ones((2, 3), np.float32), np.ones((3, 3), np.float32))
    bad = text_of(lowered).replace('{"0" = "n"}', '{"7" = "n"}', 1)
    assert bad != text_of(lowered)
    with pytest.raises(tp.TripyException, match="dimension_names"):
        Lowered.from_text(bad, like=lowered)
