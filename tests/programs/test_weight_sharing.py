"""Weights are not duplicated on the way to the engine (issue 8, finding 10): a tied weight (nanoGPT's
wte / lm_head) is one IR constant, and a large constant's dense_resource blob is a view of the array the
trace holds, not a copy. benchmarks/bench_memory.py measures the effect on GPT-2 small."""

import numpy as np

import tripy_lab as tp


def test_tied_weight_is_one_constant_and_its_blob_is_not_a_copy(engine, tmp_path):
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    a, b = tp.Tensor(w), tp.Tensor(w)  # the example's tying: two Tensors over one buffer
    other = tp.Tensor(w.T.copy())

    def f(x):
        return x @ a + x @ b + x @ other

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 4), 64), tp.float32)], engine=engine)
    program = exe.stages["lowered"].program
    assert len(program.resources) == 2  # w once, w.T once
    blobs = list(program.resources.values())
    assert np.shares_memory(np.frombuffer(blobs[0], np.uint8), w)
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    want = x @ w + x @ w + x @ w.T
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x).eval())), want, rtol=1e-4, atol=1e-4)
    exe.save(str(tmp_path / "tied.json"))
    loaded = tp.Executable.load(str(tmp_path / "tied.json"), engine=engine)
    np.testing.assert_allclose(np.asarray(loaded(tp.Tensor(x).eval())), want, rtol=1e-4, atol=1e-4)
