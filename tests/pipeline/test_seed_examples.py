"""Every example from the seed document, as a test (reference engine; the xla engine has its own run)."""

import inspect

import numpy as np
import pytest

import tripy_lab as tp


def add(a, b):
    return a + b


def test_compile_add_with_static_inputs():
    exe = tp.compile(add, args=[tp.InputInfo((2, 2), tp.float32), tp.InputInfo((2, 2), tp.float32)])
    a = tp.ones((2, 2), dtype=tp.float32).eval()
    b = tp.ones((2, 2), dtype=tp.float32).eval()
    out = exe(a, b)
    assert isinstance(out, tp.Tensor)
    host = np.from_dlpack(out) if out.device.kind == "cpu" else np.asarray(out)  # GPU outputs stay on the GPU
    np.testing.assert_array_equal(host, np.full((2, 2), 2.0, np.float32))
    assert list(inspect.signature(exe).parameters) == ["a", "b"]
    assert str(exe) == "Executable(a: Tensor, b: Tensor) -> Tensor"


def test_dynamic_bounds_accept_inside_and_reject_outside():
    info = tp.InputInfo(((1, 2, 3), 2), dtype=tp.float32)
    exe = tp.compile(add, args=[info, info])
    for rows in (1, 3):
        x = tp.Tensor(np.arange(rows * 2, dtype=np.float32).reshape(rows, 2))
        np.testing.assert_array_equal(np.asarray(exe(x, x)), 2 * np.arange(rows * 2, dtype=np.float32).reshape(rows, 2))
    big = tp.ones((4, 2)).eval()
    with pytest.raises(tp.TripyException, match="Unexpected tensor shape") as err:
        exe(big, big)
    assert "For parameter a, dimension 0 has size 4, outside the bounds [1, 3]" in str(err.value)


def test_named_dimension_used_twice_must_match():
    window = tp.NamedDimension("window", 3, 5, 7)
    exe = tp.compile(add, args=[tp.InputInfo((window, 2), tp.float32), tp.InputInfo((window, 2), tp.float32)])
    assert exe(tp.ones((4, 2)).eval(), tp.ones((4, 2)).eval()).shape == (4, 2)
    with pytest.raises(tp.TripyException, match="Mismatched sizes for named dimension 'window'") as err:
        exe(tp.ones((3, 2)).eval(), tp.ones((5, 2)).eval())
    assert "parameter b dim 0 has size 5" in str(err.value)


def dynamic_reshape(x, s):
    return tp.reshape(x, (-1, s))


def test_dynamic_reshape_with_dimension_input_info():
    exe = tp.compile(dynamic_reshape, args=[tp.InputInfo((3, 4), tp.float32), tp.DimensionInputInfo((1, 2, 4))])
    out = exe(tp.ones((3, 4)).eval(), tp.DimensionSize(2))
    assert out.shape == (6, 2)
    with pytest.raises(tp.TripyException, match="value 5 is outside the bounds \\[1, 4\\]"):
        exe(tp.ones((3, 4)).eval(), tp.DimensionSize(5))


class Model(tp.Module):
    def __init__(self):
        super().__init__()
        self.linear = tp.Linear(3, 4)

    def forward(self, x):
        return self.linear(x)


def test_module_with_linear_matches_numpy():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    model = Model()
    model.load_state_dict({"linear.weight": tp.Tensor(w), "linear.bias": tp.Tensor(b)})
    assert set(model.state_dict()) == {"linear.weight", "linear.bias"}
    exe = tp.compile(model, args=[tp.InputInfo(((1, 2, 8), 3), tp.float32)])
    x = rng.standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), x @ w.T + b, rtol=1e-5, atol=1e-6)
    # Weights are named by their state_dict keys in the trace.
    assert "linear.weight" in exe.stages["traced"].as_text()


def test_shape_bounds():
    info = tp.InputInfo(((1, 2, 3), 4), tp.float32)
    assert info.shape_bounds.min == (1, 4)
    assert info.shape_bounds.opt == (2, 4)
    assert info.shape_bounds.max == (3, 4)


def test_tensor_constant_is_baked_in():
    const = tp.Tensor([1.0, 2.0, 3.0])

    def f(x, c):
        return x * c

    exe = tp.compile(f, args=[tp.InputInfo((3,), tp.float32), const])
    assert list(inspect.signature(exe).parameters) == ["x"]
    assert np.asarray(exe(tp.Tensor([2.0, 2.0, 2.0]))).tolist() == [2.0, 4.0, 6.0]


@pytest.mark.parametrize("level", [0, 5])
def test_optimization_levels(level):
    exe = tp.compile(add, optimization_level=level, args=[tp.InputInfo((2,), tp.float32)] * 2)
    assert exe.stages["built"].optimization_level == level
    assert np.asarray(exe(tp.Tensor([1.0, 2.0]), tp.Tensor([3.0, 4.0]))).tolist() == [4.0, 6.0]


@pytest.mark.parametrize("level", [-1, 6, 2.0, "3"])
def test_bad_optimization_level(level):
    with pytest.raises(tp.TripyException, match="optimization_level") as err:
        tp.compile(add, optimization_level=level, args=[tp.InputInfo((2,), tp.float32)] * 2)
    assert repr(level) in str(err.value)


def test_timing_cache_path(tmp_path, monkeypatch, engine):
    path = tmp_path / "cache" / "timing.cache"
    monkeypatch.setattr(tp.config, "timing_cache_file_path", str(path))
    exe = tp.compile(add, args=[tp.InputInfo((2,), tp.float32)] * 2)
    report = exe.stages["built"].report
    assert report.engine == engine
    if engine == "reference":
        assert "none" in report.cache["timing_cache"]  # the reference engine has no cache, and says so
    else:
        # the engine's cache is AT the path the user names: the index of the xla engine's compiled entries
        assert report.cache["timing_cache"] == str(path) and path.is_file()
        assert not (tmp_path / "cache" / "timing.cache-xla").exists()
