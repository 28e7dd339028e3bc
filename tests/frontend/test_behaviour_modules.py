"""Modules as nvtripy 0.1.7 has them (issue 24 item 11): dataclasses, str(Conv) with the bias first, topk of a
0-d tensor; and issue 27 item 12: dotted attribute names and 1,200-deep trees in state_dict/load_state_dict."""

import dataclasses
import sys
from textwrap import dedent

import numpy as np
import pytest

import tripy_lab as tp


@pytest.mark.parametrize("cls, names", [
    (tp.Linear, ["dtype", "weight", "bias", "quant_dtype", "weight_scale", "input_scale", "weight_quant_dim"]),
    (tp.LayerNorm, ["dtype", "normalized_shape", "weight", "bias", "eps"]),
    (tp.Embedding, ["dtype", "weight"]),
    (tp.Conv, ["dtype", "weight", "padding", "stride", "groups", "dilation", "bias"]),
    (tp.ConvTranspose, ["dtype", "weight", "padding", "stride", "groups", "dilation", "bias"]),
    (tp.BatchNorm, ["num_features", "dtype", "eps", "weight", "bias", "running_mean", "running_var"]),
    (tp.GroupNorm, ["num_groups", "num_channels", "dtype", "weight", "bias", "eps"]),
    (tp.InstanceNorm, ["num_channels", "dtype", "weight", "bias", "eps"]),
])
def test_public_modules_are_dataclasses(cls, names):
    assert dataclasses.is_dataclass(cls)
    assert [f.name for f in dataclasses.fields(cls)] == names


def test_dataclass_modules_keep_identity_and_their_init():
    a, b = tp.Linear(2, 3), tp.Linear(2, 3)
    assert a != b and a == a and len({a, b}) == 2
    assert dataclasses.is_dataclass(tp.Sequential(a))
    with pytest.raises(tp.TripyException, match="is immutable"):
        a.dtype = tp.float16


def test_str_of_conv_in_a_sequential_lists_the_bias_first():
    net = tp.Sequential(tp.Conv(2, 2, (1, 1)), tp.Linear(2, 1))
    assert str(net) == dedent("""\
        Sequential(
            0: Module = Conv(
                bias: Parameter = (shape=(2,), dtype=float32),
                weight: Parameter = (shape=(2, 2, 1, 1), dtype=float32),
            ),
            1: Module = Linear(
                weight: Parameter = (shape=(1, 2), dtype=float32),
                bias: Parameter = (shape=(1,), dtype=float32),
            ),
        )""")
    assert list(tp.Conv(2, 2, (1, 1)).state_dict()) == ["bias", "weight"]


@pytest.mark.parametrize("dim", [0, -1])
def test_topk_of_a_scalar(engine, dim):
    values, indices = tp.topk(tp.Tensor(2.5), k=1, dim=dim)
    assert values.shape == () and indices.shape == ()
    assert values.numpy() == np.float32(2.5) and indices.numpy() == 0 and indices.dtype is tp.int32
    with pytest.raises(tp.TripyException, match="'k'"):
        tp.topk(tp.Tensor(2.5), k=2, dim=0)


def test_dotted_attribute_name_loads_its_own_keys():
    m = tp.Linear(2, 2)
    setattr(m, "a.b", tp.Linear(2, 2))
    keys = sorted(m.state_dict())
    assert keys == ["a.b.bias", "a.b.weight", "bias", "weight"]
    new = {k: tp.ones(v.shape) for k, v in m.state_dict().items()}
    missing, unexpected = m.load_state_dict(new)
    assert not missing and not unexpected
    assert getattr(m, "a.b").weight is new["a.b.weight"]
    with pytest.raises(tp.TripyException, match="new parameter is not compatible"):
        m.load_state_dict({**new, "a.b.weight": tp.ones((3, 3))})


class _Chain(tp.Module):
    def __init__(self, depth):
        super().__init__()
        node = self
        for _ in range(depth):
            child = tp.Module()
            child.w = tp.zeros((1,))
            node.child = child
            node = child


def test_deep_module_tree_state_dict_iterates():
    depth = 1200
    assert depth > sys.getrecursionlimit()  # recursing once per level cannot work
    root = _Chain(depth)
    sd = root.state_dict()
    assert len(sd) == depth
    deepest = ".".join(["child"] * depth) + ".w"
    assert deepest in sd
    new = {k: tp.ones((1,)) for k in sd}
    assert root.load_state_dict(new) == (set(), set())
    assert root.state_dict()[deepest] is new[deepest]


def test_a_module_containing_itself_does_not_loop():
    m = tp.Linear(2, 2)
    m.again = m
    assert sorted(m.state_dict()) == ["bias", "weight"]
