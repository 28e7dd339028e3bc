"""Modules: registration, state_dict, load_state_dict, and each layer against numpy with the same weights."""

import math

import numpy as np
import pytest

import tripy_lab as tp

rng = np.random.default_rng(0)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


class Block(tp.Module):
    def __init__(self):
        super().__init__()
        self.norm = tp.LayerNorm(4)
        self.layers = [tp.Linear(4, 4), tp.Linear(4, 2, bias=False)]

    def forward(self, x):
        return self.layers[1](tp.relu(self.layers[0](self.norm(x))))


def test_state_dict_keys_and_placeholders():
    block = Block()
    assert sorted(block.state_dict()) == ["layers.0.bias", "layers.0.weight", "layers.1.weight", "norm.bias",
                                          "norm.weight"]
    assert block.state_dict()["layers.0.weight"].shape == (4, 4)
    assert [n for n, _ in block.named_children()] == ["norm", "layers.0", "layers.1"]
    with pytest.raises(tp.TripyException, match="Some parameters were never set"):
        block(tp.ones((2, 4)))


def test_load_state_dict_checks_and_reports():
    lin = tp.Linear(3, 2)
    with pytest.raises(tp.TripyException, match="state_dict is incompatible"):
        lin.load_state_dict({"weight": tp.Tensor(randn(2, 3))})
    missing, unexpected = lin.load_state_dict({"weight": tp.Tensor(randn(2, 3)), "extra": tp.ones((1,))},
                                              strict=False)
    assert missing == {"bias"}
    assert unexpected == {"extra"}
    with pytest.raises(tp.TripyException, match="new parameter is not compatible"):
        lin.weight = tp.Tensor(randn(3, 3))
    with pytest.raises(tp.TripyException, match="Unrecognized type for module parameter"):
        lin.weight = np.zeros((2, 3))


def test_block_matches_numpy():
    block = Block()
    w0, b0, w1 = randn(4, 4), randn(4), randn(2, 4)
    g, beta = randn(4), randn(4)
    block.load_state_dict({"norm.weight": tp.Tensor(g), "norm.bias": tp.Tensor(beta),
                           "layers.0.weight": tp.Tensor(w0), "layers.0.bias": tp.Tensor(b0),
                           "layers.1.weight": tp.Tensor(w1)})
    x = randn(3, 4)
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    h = (x - mu) / np.sqrt(var + 1e-5) * g + beta
    expected = np.maximum(h @ w0.T + b0, 0) @ w1.T
    np.testing.assert_allclose(np.asarray(block(tp.Tensor(x))), expected, rtol=1e-4, atol=1e-5)
    exe = tp.compile(block, args=[tp.InputInfo(((1, 3, 8), 4), tp.float32)])
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), expected, rtol=1e-4, atol=1e-5)


def test_embedding_and_sequential():
    emb = tp.Embedding(5, 3)
    table = randn(5, 3)
    emb.weight = tp.Tensor(table)
    idx = np.array([[0, 4], [2, 2]], dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(emb(tp.Tensor(idx))), table[idx])
    seq = tp.Sequential(tp.Linear(3, 3), tp.relu)
    seq[0].weight = tp.Tensor(np.eye(3, dtype=np.float32))
    seq[0].bias = tp.Tensor(np.array([-1.0, 0.0, 1.0], dtype=np.float32))
    assert len(seq) == 2
    assert sorted(seq.state_dict()) == ["0.bias", "0.weight"]
    np.testing.assert_array_equal(np.asarray(seq(tp.ones((1, 3)))), [[0.0, 1.0, 2.0]])
    with pytest.raises(tp.TripyException, match="Key: 'x' not found in modules."):
        seq["x"]


def test_module_str_and_dummy_parameters():
    lin = tp.Linear(2, 2)
    lin.initialize_dummy_parameters()
    assert np.asarray(lin(tp.ones((1, 2)))).tolist() == [[3.0, 3.0]]
    assert "weight: Parameter" in str(lin)
    assert math.isclose(tp.LayerNorm(2).eps, 1e-5)


def test_executable_save_and_load(tmp_path):
    lin = tp.Linear(3, 2)
    w, b = randn(2, 3), randn(2)
    lin.load_state_dict({"weight": tp.Tensor(w), "bias": tp.Tensor(b)})
    exe = tp.compile(lin, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)])
    path = tmp_path / "linear.json"
    exe.save(str(path))
    loaded = tp.Executable.load(str(path))
    x = randn(4, 3)
    np.testing.assert_allclose(np.asarray(loaded(tp.Tensor(x))), x @ w.T + b, rtol=1e-5, atol=1e-6)
    assert loaded.input_infos == exe.input_infos
    with pytest.raises(tp.TripyException, match="outside the bounds"):
        loaded(tp.Tensor(randn(5, 3)))
