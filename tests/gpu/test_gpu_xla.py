"""GPU path of the xla engine: runs on the GPU machine with `pytest -m gpu tests/gpu`.

Executables take numpy, cupy, torch and jax arrays through DLPack and return tensors that stay on the GPU.
"""

import numpy as np
import pytest

import tripy_lab as tp

pytestmark = pytest.mark.gpu
jax = pytest.importorskip("jax")


def mlp(x, w, b):
    return tp.tanh(x @ w + b) * 2.0


W = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
B = np.random.default_rng(1).standard_normal(8).astype(np.float32)


def expected(x):
    return np.tanh(x @ W + B) * 2.0


@pytest.fixture(scope="module")
def exe():
    return tp.compile(mlp, args=[tp.InputInfo(((1, 4, 64), 16), tp.float32), tp.Tensor(W), tp.Tensor(B)],
                      engine="xla")


def test_engine_builds_for_the_gpu(exe):
    assert "gpu" in exe.stages["built"].report.device
    rows = exe.stages["built"].layers
    assert any(len(r.source_ops) >= 2 for r in rows), [r.as_dict() for r in rows]


def test_numpy_in_gpu_out(exe):
    x = np.random.default_rng(2).standard_normal((5, 16)).astype(np.float32)
    out = exe(tp.Tensor(x))
    assert out.device.kind == "gpu"
    np.testing.assert_allclose(np.asarray(out), expected(x), rtol=1e-5, atol=1e-5)


def test_cupy_in_cupy_out(exe):
    cp = pytest.importorskip("cupy")
    x = cp.random.standard_normal((7, 16), dtype=cp.float32)
    out = exe(x)
    y = cp.from_dlpack(out)
    assert isinstance(y, cp.ndarray)
    np.testing.assert_allclose(y.get(), expected(x.get()), rtol=1e-5, atol=1e-5)


def test_torch_in_torch_out(exe):
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 16, device="cuda", dtype=torch.float32)
    y = torch.from_dlpack(exe(x))
    assert y.is_cuda
    np.testing.assert_allclose(y.cpu().numpy(), expected(x.cpu().numpy()), rtol=1e-5, atol=1e-5)


def test_jax_in_jax_out(exe):
    x = jax.device_put(np.ones((4, 16), np.float32), jax.devices("gpu")[0])
    y = jax.dlpack.from_dlpack(exe(x))
    assert next(iter(y.devices())).platform == "gpu"
    np.testing.assert_allclose(np.asarray(y), expected(np.ones((4, 16), np.float32)), rtol=1e-5, atol=1e-5)


def test_dynamic_shapes_and_bounds_on_gpu(exe):
    for rows in (1, 33, 64):
        x = np.full((rows, 16), 0.1, np.float32)
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), expected(x), rtol=1e-5, atol=1e-5)
    with pytest.raises(tp.TripyException, match="outside the bounds"):
        exe(tp.Tensor(np.ones((65, 16), np.float32)))


def test_gpu_matches_reference_engine():
    x = np.random.default_rng(3).standard_normal((6, 16)).astype(np.float32)
    ref = tp.compile(mlp, args=[tp.InputInfo((6, 16), tp.float32), tp.Tensor(W), tp.Tensor(B)], engine="reference")
    gpu = tp.compile(mlp, args=[tp.InputInfo((6, 16), tp.float32), tp.Tensor(W), tp.Tensor(B)], engine="xla")
    np.testing.assert_allclose(np.asarray(gpu(tp.Tensor(x))), np.asarray(ref(tp.Tensor(x))), rtol=1e-5, atol=1e-5)


def test_timing_with_cuda_events(exe):
    cp = pytest.importorskip("cupy")
    x = cp.ones((64, 16), dtype=cp.float32)
    exe(x)
    exe.synchronize()
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(20):
        out = exe(x)
    exe.synchronize()
    stop.record()
    stop.synchronize()
    ms = cp.cuda.get_elapsed_time(start, stop) / 20
    assert 0 < ms < 50
    assert cp.from_dlpack(out).shape == (64, 8)


def test_profile_build_tunes_gemms_at_opt_only():
    """On the GPU, min and max compile without GEMM autotuning (xla.TUNE_OPT_ONLY) and still compute right."""
    from tripy_lab import pipeline

    low = pipeline.trace(mlp, args=[tp.InputInfo(((1, 4, 64), 16), tp.float32), tp.Tensor(W), tp.Tensor(B)]).lower()
    built = low.build(engine="xla", shapes="profile")
    notes = [n for n in built.report.notes if "without GEMM autotuning" in n]
    assert sorted(n.split(":")[0] for n in notes) == ["x=1x16", "x=64x16"], built.report.notes
    exe = built.executable()
    for n in (1, 4, 64):
        x = np.random.default_rng(n).standard_normal((n, 16)).astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(x)), expected(x), rtol=1e-5, atol=1e-5)


def test_untuned_profile_points_run_their_gemms_on_cublas():
    """Untuned, XLA's Triton GEMMs run a default tiling that is far off (docs/perf-history.md, eighth session), so
    the profile's min and max (compiled without autotuning) take cuBLAS; opt keeps XLA's choice."""
    from tripy_lab import pipeline

    w = (np.random.default_rng(3).standard_normal((512, 512)) * 0.05).astype(np.float16)

    def f(x):
        return x @ tp.Tensor(w)

    low = pipeline.trace(f, args=[tp.InputInfo(((1, 256, 2048), 512), tp.float16)]).lower()
    built = low.build(engine="xla", shapes="profile")
    texts = {b.label: b.compiled.as_text() for b in built.compiled._execs.values()}
    assert sorted(texts) == ["x=1x512", "x=2048x512", "x=256x512"], sorted(texts)
    for label in ("x=1x512", "x=2048x512"):  # (XLA may write the 1-row product as a reduction)
        assert "__triton_gemm" not in texts[label], texts[label][-2000:]
    assert "cublas" in texts["x=2048x512"], texts["x=2048x512"][-2000:]
    exe = built.executable()
    for n in (1, 256, 2048):
        x = np.random.default_rng(n).standard_normal((n, 512)).astype(np.float16)
        want = x.astype(np.float32) @ w.astype(np.float32)
        np.testing.assert_allclose(np.asarray(exe(x)).astype(np.float32), want, rtol=2e-2, atol=2e-2)
