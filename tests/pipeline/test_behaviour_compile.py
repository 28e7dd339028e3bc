"""nvtripy 0.1.7's compile behaviour (issue 24 items 6, 7): the Executable's return annotation names each
output; evaluating a tensor the result does not use is a warning, not an error."""

import inspect
from typing import Tuple  # noqa: UP035 - nvtripy annotates with typing.Tuple

import numpy as np
import pytest

import tripy_lab as tp

INFO = tp.InputInfo((2, 2), tp.float32)


def test_return_annotation_per_output():
    single = tp.compile(lambda a: tp.relu(a), args=[INFO])
    assert inspect.signature(single).return_annotation is tp.Tensor
    as_list = tp.compile(lambda a: [tp.relu(a)], args=[INFO])
    assert inspect.signature(as_list).return_annotation == Tuple[tp.Tensor]  # noqa: UP006
    (out,) = as_list(np.full((2, 2), -1.0, np.float32))
    assert out.numpy().tolist() == [[0.0, 0.0], [0.0, 0.0]]
    pair = tp.compile(lambda a, b: (a + b, a - b), args=[INFO, INFO])
    assert inspect.signature(pair).return_annotation == Tuple[tp.Tensor, tp.Tensor]  # noqa: UP006
    assert str(pair) == "Executable(a: Tensor, b: Tensor) -> Tuple[Tensor, Tensor]"


def test_eval_of_an_unused_tensor_warns(capsys):
    def func(a):
        c = a - 2
        print(c)
        print(tp.sum(a).tolist())
        return a

    exe = tp.compile(func, args=[tp.InputInfo(((1, 2, 3), 3), tp.int32)])
    out = capsys.readouterr().out
    assert out.count("Tensor was evaluated while compiling here:") == 2
    assert "print(c)" in out
    assert "[[-1, -1, -1],\n        [-1, -1, -1]]" in out  # stand-ins: ones at the opt shape (2, 3), as nvtripy
    assert "\n6\n" in out
    np.testing.assert_array_equal(exe(np.full((3, 3), 7, np.int32)).numpy(), np.full((3, 3), 7))


def test_eval_of_a_used_tensor_is_an_error_at_the_eval_line():
    def func(a):
        b = a + 1
        print(b)
        return b * 2

    with pytest.raises(tp.TripyException, match="Cannot evaluate a tensor while compiling") as info:
        tp.compile(func, args=[INFO])
    assert "print(b)" in str(info.value)


def test_eval_with_a_dimension_input_uses_its_opt_value(capsys):
    def func(a, n):
        print(n + 1)
        return a

    tp.compile(func, args=[INFO, tp.DimensionInputInfo((1, 5, 9))])
    assert "\n6\n" in capsys.readouterr().out
