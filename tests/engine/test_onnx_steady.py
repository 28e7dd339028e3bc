"""What the onnxruntime engine hands onnxruntime for a GPT (issue 31 item 4, CPU steady state): structure that
decides its per-call speed, pinned without timing. ``benchmarks/bench_cpu_steady.py`` measures the speed."""


import numpy as np
import pytest

import tripy_lab as tp

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import bench_onnx as bench  # noqa: E402 - benchmarks/ (tests/engine/conftest.py)
from onnx import numpy_helper  # noqa: E402

CFG = dict(vocab=50, ctx=16, d=32, heads=4, layers=2)


@pytest.fixture(scope="module")
def gpt():
    model = bench.GPT(**CFG)
    weights = bench.randomize(model)
    exe = tp.compile(model, args=[tp.InputInfo((1, (1, 8, 16)), tp.int32)], engine="onnxruntime")
    return exe, weights


def _initializers(model):
    return {i.name: i for i in model.graph.initializer}


def test_linear_weights_reach_matmul_as_2d_constants(gpt, tmp_path):
    """onnxruntime prepacks a MatMul's B only when it is a 2-D constant; tp.Linear's weight arrives as
    [1, K, N] (broadcast to x's rank) and was left 3-D, which cost GPT-2 small 1.6x in its MatMuls."""
    exe, weights = gpt
    # the engine keeps the optimized graph without its initializers' data: a session of the same options writes
    # the model and its weights file here, and onnx.load reads both
    exe._compiled._session(optimized=str(tmp_path / "optimized.onnx"))
    opt = onnx.load(str(tmp_path / "optimized.onnx"))
    assert [n.name for n in opt.graph.node] == [n.name for n in exe._compiled.optimized_model.graph.node]
    inits = _initializers(opt)
    bs = [inits[n.input[1]] for n in opt.graph.node if n.op_type == "MatMul" and n.input[1] in inits]
    assert len(bs) == 4 * CFG["layers"] + 1, [tuple(b.dims) for b in bs]  # qkv, proj, fc, out per block + head
    assert all(len(b.dims) == 2 for b in bs), [tuple(b.dims) for b in bs]
    head = next(b for b in bs if tuple(b.dims) == (CFG["d"], CFG["vocab"]))
    np.testing.assert_array_equal(numpy_helper.to_array(head), weights["wte.weight"].T)


@pytest.mark.parametrize("shape", [(2, 3, 8), (2, 2, 3, 8), (3, 8)])
def test_linear_on_batched_inputs_matches_numpy(shape):
    """The [K, N] weight broadcasts over every batch dim of x as the [1, .., K, N] one did."""
    lin = tp.Linear(8, 5)
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((5, 8)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    lin.load_state_dict({"weight": tp.Tensor(w), "bias": tp.Tensor(b)})
    x = rng.standard_normal(shape).astype(np.float32)
    exe = tp.compile(lin, args=[tp.InputInfo(shape, tp.float32)], engine="onnxruntime")
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), x @ w.T + b, rtol=1e-5, atol=1e-5)


def _op_types(exe) -> list[str]:
    return [n.op_type for n in exe._compiled.lowering.model.graph.node]


def test_reshape_with_one_dynamic_dim_takes_a_constant_shape():
    """[1, T, 32] -> (x.shape[0], x.shape[1], 4, 8): the shape vector is [1, ?, 4, 8] at every T, so the
    Reshape takes [1, -1, 4, 8] and no Shape/Slice/Concat/Cast runs per call."""
    f = lambda x: tp.reshape(x, (x.shape[0], x.shape[1], 4, 8)) * 2.0  # noqa: E731
    exe = tp.compile(f, args=[tp.InputInfo((1, (1, 8, 16), 32), tp.float32)], engine="onnxruntime")
    ops = _op_types(exe)
    assert "Shape" not in ops and "Concat" not in ops and "Cast" not in ops, ops
    model = exe._compiled.lowering.model
    inits = _initializers(model)
    reshape = next(n for n in model.graph.node if n.op_type == "Reshape" and n.input[0] == "x")
    assert numpy_helper.to_array(inits[reshape.input[1]]).tolist() == [1, -1, 4, 8]
    for t in (1, 5, 16):
        x = np.random.default_rng(t).standard_normal((1, t, 32)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x))), x.reshape(1, t, 4, 8) * 2)


def test_two_dynamic_dims_keep_their_shape_nodes():
    """Two unknown entries cannot both be -1: the shape is computed per call, and right at every shape."""
    f = lambda x: tp.reshape(x, (x.shape[0], x.shape[1], 4, 8)) + 1.0  # noqa: E731
    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 3), (1, 8, 16), 32), tp.float32)], engine="onnxruntime")
    assert "Shape" in _op_types(exe)
    for b, t in ((1, 1), (3, 7), (2, 16)):
        x = np.random.default_rng(t).standard_normal((b, t, 32)).astype(np.float32)
        np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x))), x.reshape(b, t, 4, 8) + 1)


def test_static_shape_arithmetic_is_folded():
    """Shapes the MLIR types fix are numbers in the model, not nodes (and still right)."""
    f = lambda x: tp.reshape(x, (x.shape[0] * x.shape[1], x.shape[2] // 2, 2))  # noqa: E731
    exe = tp.compile(f, args=[tp.InputInfo((2, 3, 4), tp.float32)], engine="onnxruntime")
    assert _op_types(exe) == ["Reshape"], _op_types(exe)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x))), x.reshape(6, 2, 2))


@pytest.mark.parametrize("cpus, spins", [(2, False), (16, True)])
def test_worker_threads_spin_only_on_bigger_machines(monkeypatch, cpus, spins):
    """A shared 2-core notebook: idle workers sleep; a 16-core machine keeps onnxruntime's spinning."""
    from tripy_lab.engine.onnx import build as onnx_build

    monkeypatch.setattr(onnx_build.os, "cpu_count", lambda: cpus)
    exe = tp.compile(lambda x: x * 2.0, args=[tp.InputInfo((2, 3), tp.float32)], engine="onnxruntime")
    options = exe._compiled.session.get_session_options()
    try:
        entry = options.get_session_config_entry("session.intra_op.allow_spinning")
    except RuntimeError:  # not set: onnxruntime's default, spinning
        entry = "1"
    assert (entry != "0") is spins


def _optimized_nodes(layers: int) -> list[str]:
    model = bench.GPT(**{**CFG, "layers": layers})
    bench.randomize(model)
    exe = tp.compile(model, args=[tp.InputInfo((1, (1, 8, 16)), tp.int32)], engine="onnxruntime")
    return [n.op_type for n in exe._compiled.optimized_model.graph.node]


def test_gpt_blocks_share_their_shape_arithmetic():
    """Each block reads T from its own residual stream (the mask ``tril(ones((t, t)))``, the q/k/v slices):
    every dynamic dim is now read from the first tensor of its class (engine/onnx/dims.py), so the blocks' shape
    and mask computations are equal and onnxruntime keeps one. Was ~98 nodes per block (torch's export: 28)."""
    one, three = _optimized_nodes(1), _optimized_nodes(3)
    assert one.count("Shape") == three.count("Shape") == 1, (one.count("Shape"), three.count("Shape"))
    assert (len(three) - len(one)) / 2 <= 30, (len(one), len(three))
    assert three.count("Range") == one.count("Range")  # the causal mask's iotas: once, not once per block


def test_unrelated_dynamic_dims_stay_apart():
    """x + y of two inputs whose first dims are not known equal (1 broadcasts against 4 at run time): the sum's
    dim is read from the sum, not from x or y, and the reshape is right at every pairing."""

    def f(x, y):
        s = x + y
        return tp.reshape(s, (s.shape[0] * 3,)) * 1.0

    info = tp.InputInfo(((1, 2, 4), 3), tp.float32)
    exe = tp.compile(f, args=[info, info], engine="onnxruntime")
    for a, b in ((1, 4), (4, 1), (3, 3)):
        x, y = np.ones((a, 3), np.float32), np.full((b, 3), 2.0, np.float32)
        np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x), tp.Tensor(y))), (x + y).reshape(-1))
