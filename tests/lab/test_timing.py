"""benchmark() and compare(): DataFrames of synchronized timings at generated inputs."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.lab import benchmark, compare
from tripy_lab.lab.measure import timing


def add(a, b):
    return a + b


def reshape(x, s):
    return tp.reshape(x, (-1, s))


@pytest.fixture(scope="module")
def exe():
    n = tp.NamedDimension("n", 1, 2, 4)
    return tp.compile(add, args=[tp.InputInfo((n, 3), tp.float32), tp.InputInfo((n, 3), tp.float32)],
                      engine="reference")


def test_shapes_at_points_and_explicit(exe):
    assert timing.shapes_at(exe.input_infos, "min") == {"a": (1, 3), "b": (1, 3)}
    assert timing.shapes_at(exe.input_infos, "max") == {"a": (4, 3), "b": (4, 3)}
    assert timing.shapes_at(exe.input_infos, {"a": [3, 3]}) == {"a": (3, 3), "b": (2, 3)}
    with pytest.raises(tp.TripyException, match="Invalid shape point"):
        timing.shapes_at(exe.input_infos, "middle")


def test_make_inputs_dtypes_and_dimension_values():
    infos = {"x": tp.InputInfo((2, 3), tp.float16), "i": tp.InputInfo((2,), tp.int32),
             "m": tp.InputInfo((2,), tp.bool), "s": tp.DimensionInputInfo((1, 2, 4))}
    shapes = timing.shapes_at(infos, "opt")
    inputs = timing.make_inputs(infos, shapes)
    assert inputs["x"].dtype == np.float16 and inputs["x"].shape == (2, 3)
    assert inputs["i"].dtype == np.int32 and inputs["m"].dtype == np.bool_
    assert inputs["s"] == 2


def test_benchmark_table(exe):
    df = benchmark(exe, warmup=2, iters=5)
    assert list(df.columns) == timing.COLUMNS
    assert list(df["label"]) == ["min", "opt", "max"]
    assert list(df["shape"]) == ["a=1x3 b=1x3", "a=2x3 b=2x3", "a=4x3 b=4x3"]
    for col in ("compute_ms", "latency_ms", "latency_p10_ms", "latency_p90_ms", "latency_mean_ms", "latency_std_ms",
                "back_to_back_ms", "throughput_per_s"):
        assert df[col].dtype.kind == "f" and (df[col] >= 0).all()
    assert (df["latency_p10_ms"] <= df["latency_p90_ms"]).all()
    assert (df["compute_method"] == "CPU: wall time of the interpreter, per MLIR op").all()
    assert (df["iters"] == 5).all() and (df["engine"] == "reference").all()


def test_benchmark_synchronizes_around_each_call(exe, monkeypatch):
    calls = []
    monkeypatch.setattr(type(exe), "synchronize", lambda self: calls.append("sync"))
    inputs = timing.make_inputs(exe.input_infos, timing.shapes_at(exe.input_infos, "opt"))
    timing.time_calls(exe, inputs, 1, 3)
    assert calls == ["sync"] * 4  # once after warm-up, then once per timed call


def test_benchmark_reports_run_errors_per_row():
    exe = tp.compile(reshape, args=[tp.InputInfo((3, 4), tp.float32), tp.DimensionInputInfo((1, 2, 5))],
                     engine="reference")
    df = benchmark(exe, shapes=["opt", {"s": 5}], warmup=0, iters=2)
    assert df.loc[0, "error"] == "" and df.loc[0, "iters"] == 2
    assert df.loc[1, "error"] != "" and np.isnan(df.loc[1, "compute_ms"])


def test_sweep_points_follow_the_first_dynamic_dim(exe):
    points, xlabel, xs, opt = timing.sweep_points(exe.input_infos, n=4)
    assert xlabel == "a[0]" and xs == [1, 2, 3, 4] and opt == 2
    assert all(p["a"] == p["b"] for p in points)  # NamedDimension "n" stays equal


def test_compare_configs_and_executables(exe):
    df = compare(("ref", exe), {"func": add, "args": [tp.InputInfo((2, 3), tp.float32)] * 2,
                                "engine": "reference", "optimization_level": 0, "label": "static"},
                 shapes=["opt"], warmup=1, iters=3)
    assert list(df["label"]) == ["ref opt", "static opt"]
    assert list(df["opt_level"]) == [3, 0]
    assert df["build_ms"].notna().all() and df["compute_ms"].notna().all()


class _Counting:
    """An executable stand-in that counts calls and synchronizes."""

    def __init__(self):
        self.calls, self.syncs = 0, 0

    def __call__(self, **kwargs):
        self.calls += 1

    def synchronize(self):
        self.syncs += 1


@pytest.mark.parametrize("per_call_s, per_batch", [(0.0, 10), (1e-2, 20), (1e-3, 100), (1e-6, 100), (0.5, 10)])
def test_back_to_back_batches_grow_for_short_calls_up_to_ten_times(per_call_s, per_batch):
    fake = _Counting()
    timing.time_back_to_back(fake, {}, 10, per_call_s)
    assert fake.calls == timing.BACK_TO_BACK_BATCHES * per_batch  # 200 ms batches, at most 10x the calls
    assert fake.syncs == 2 * timing.BACK_TO_BACK_BATCHES  # each batch starts and ends synchronized
