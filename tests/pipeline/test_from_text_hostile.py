"""Lowered.from_text of hostile text (issue 27 item 9): a TripyException with the line and column, never a
RecursionError or a raw xDSL VerifyException, and no value silently wrapped (2**63 read as a negative)."""

from __future__ import annotations

import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.pipeline.stages import Lowered

PROFILE = "min = [1, 3], opt = [2, 3], max = [4, 3]"


@pytest.fixture(scope="module")
def lowered():
    return pipeline.trace(lambda a: a + 1.0, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)]).lower()


def refused(text: str, like) -> tp.TripyException:
    with pytest.raises(tp.TripyException) as info:
        Lowered.from_text(text, like=like)
    exc = info.value
    assert isinstance(exc.line, int) and exc.line >= 1 and isinstance(exc.column, int) and exc.column >= 1
    assert exc.__cause__ is None or isinstance(exc.__cause__, tp.TripyException)
    return exc


def at(text: str, needle: str) -> int:
    """The 1-based line holding ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


CASES = {
    "profile min > opt": (PROFILE, "min = [5, 3], opt = [2, 3], max = [4, 3]",
                          "min=5 should be less than or equal to opt=2"),
    "profile value 2**63": (PROFILE, f"min = [1, 3], opt = [2, 3], max = [{2**63}, 3]", str(2**63)),
    "profile value 2**64 + 5": (PROFILE, f"min = [1, 3], opt = [2, 3], max = [{2**64 + 5}, 3]", str(2**64 + 5)),
    "profile value 2**31 (past the bound rule)": (PROFILE, f"min = [1, 3], opt = [2, 3], max = [{2**31}, 3]",
                                                 "2147483647"),
    "profile value negative": (PROFILE, "min = [-1, 3], opt = [2, 3], max = [4, 3]", "out of range"),
    "profile ranks differ": (PROFILE, "min = [1], opt = [2, 3], max = [4, 3]",
                             "min/opt/max arrays should have equal size"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_bad_profiles_are_errors_at_their_line(lowered, name):
    old, new, says = CASES[name]
    text = lowered.as_text()
    assert old in text
    edited = text.replace(old, new)
    exc = refused(edited, lowered)
    assert says in str(exc) and exc.line == at(edited, new), str(exc)
    assert "-9223372036854775808" not in str(exc)


def test_an_i64_overflowing_attribute_is_an_error_at_its_line(lowered):
    text = lowered.as_text()
    edited = text.replace("tensorrt.shape_profile =", f"x.big = {2**70} : i64, tensorrt.shape_profile =", 1)
    exc = refused(edited, lowered)
    assert str(2**70) in str(exc) and exc.line == at(edited, "x.big")


@pytest.mark.parametrize("what", ["attribute", "type", "tuple type"])
def test_deep_nesting_is_an_error_not_a_recursion_error(lowered, what):
    text = lowered.as_text()
    if what == "attribute":
        edited = text.replace("tensorrt.shape_profile =", "x.deep = " + "[" * 50_000 + "]" * 50_000
                              + ", tensorrt.shape_profile =", 1)
    elif what == "type":
        edited = text.replace("tensor<?x3xf32>", "tensor<" * 20_000 + "f32" + ">" * 20_000, 1)
    else:
        edited = text.replace("tensor<?x3xf32>", "tuple<" * 20_000 + ">" * 20_000, 1)
    exc = refused(edited, lowered)
    assert "nested too deeply" in str(exc) and exc.line == at(edited, "func.func @main")


def test_the_largest_bound_still_builds(lowered):
    text = lowered.as_text().replace(PROFILE, "min = [1, 3], opt = [2, 3], max = [2147483647, 3]")
    again = Lowered.from_text(text, like=lowered)
    assert again.program.input_infos["a"].shape_bounds.max == (2147483647, 3)
