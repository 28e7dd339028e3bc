"""lab.tune: a build-config sweep in this process and on a real Dask LocalCluster of 2 worker processes."""

import sys
import time

import cloudpickle
import numpy as np
import psutil
import pytest

import tripy_lab as tp
from tripy_lab import lab
from tripy_lab.lab import tune_view, tuning

distributed = pytest.importorskip("distributed")  # the `distributed` extra (in `all`, which CI installs)

QUICK = {"warmup": 1, "iters": 3, "max_seconds": 0.5, "profile_calls": 2}
ARGS = [tp.InputInfo(shape=((1, 4, 8), 16), dtype=tp.float32)]
EIGHT = {"engine": ["reference", "xla"], "optimization_level": [0, 3], "opt": [None, {"x": (8, 16)}]}


class MLP(tp.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = tp.Linear(16, 32)
        self.fc2 = tp.Linear(32, 4)
        rng = np.random.default_rng(0)
        for name, p in self.state_dict().items():
            self.load_state_dict({name: tp.Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32))},
                                 strict=False)

    def forward(self, x):
        return self.fc2(tp.relu(self.fc1(x)))


# The workers cannot import this test file: the model's class travels by value, as a notebook's would.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _children() -> list:
    """Our child processes, less multiprocessing's resource tracker (one per interpreter, started by the first
    spawned process and meant to outlive it)."""
    out = []
    for p in psutil.Process().children(recursive=True):
        try:
            if "resource_tracker" not in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:  # exited meanwhile
            pass
    return out


@pytest.fixture(scope="module")
def client():
    before = {p.pid for p in _children()}
    # the dashboard on a free port: two xdist workers' clusters would otherwise both ask for 8787
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0")
    c = distributed.Client(cluster)
    try:
        yield c
    finally:
        c.close()
        cluster.close()
        deadline = time.time() + 20
        left = [p for p in _children() if p.pid not in before]
        while left and time.time() < deadline:
            time.sleep(0.2)
            left = [p for p in left if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
        assert not left, f"processes left behind: {left}"


def _executing(client) -> int:
    return sum(client.run(lambda dask_worker: len(dask_worker.state.executing)).values())


# -- on the cluster ---------------------------------------------------------------------------------------
def test_eight_configs_give_eight_rows_from_both_workers(client):
    result = lab.tune(MLP(), ARGS, EIGHT, client=client, timing=QUICK, progress=False)
    df = result.table
    assert len(df) == 8 and set(df["error"]) == {""}, df[["config", "error"]]
    assert len(set(df["worker"])) == 2, df["worker"]  # the sweep really ran on both processes
    assert df["passed"].all()
    assert (df.loc[df["engine"] == "reference", "max_abs_err"] == 0).all()  # the reference is the reference
    assert (df.loc[df["engine"] == "xla", "max_abs_err"] < 1e-4).all()
    assert (df["compute_ms"] > 0).all() and (df["build_s"] > 0).all()
    assert sorted(df["config"]) == sorted(tuning.label(c) for c in tuning.expand(EIGHT))
    assert "x:8x16" in " ".join(r["trtexec"] for r in result.rows)  # the opt point reached the build


def test_a_failing_build_is_a_row_with_its_error(client):
    from tripy_lab.engine import engine_class

    bad = "tensorrt" if not engine_class("tensorrt").available()[0] else "onnxruntime"
    space = [{"engine": "reference"}, {"engine": bad, "opt": {"x": (8, 16)}}, {"engine": "reference", "opt": {"x": 5}}]
    result = lab.tune(MLP(), ARGS, space, client=client, timing=QUICK, progress=False)
    errors = list(result.table["error"])
    assert errors[0] == ""
    assert errors[1].startswith("build: The 'tensorrt' engine is not available") or bad != "tensorrt"
    assert errors[2].startswith("build: Invalid value for parameter: 'opt'"), errors[2]  # rank 1 for a rank-2 x
    assert list(result.table["passed"]) == [True, False, False]
    assert result.best_index == 0


def test_fp16_config_fails_a_strict_gate(client):
    space = [{"engine": "reference"}, {"engine": "reference", "dtype": tp.float16},
             {"engine": "reference", "quantize": "int8"}]
    result = lab.tune(MLP(), ARGS, space, client=client, accuracy={"atol": 1e-5, "rtol": 0.0}, timing=QUICK,
                      progress=False)
    df = result.table
    assert list(df["error"]) == ["", "", ""] and list(df["passed"]) == [True, False, False]
    assert df["max_abs_err"][0] == 0
    assert 1e-5 < df["max_abs_err"][1] < 0.1  # ran in fp16: off by fp16 rounding, not garbage
    assert 1e-5 < df["max_abs_err"][2] < 0.2 and df["max_abs_err"][2] != df["max_abs_err"][1]  # int8 weights
    assert result.best_index == 0
    loose = lab.tune(MLP(), ARGS, space[1:], client=client, accuracy={"atol": 0.2, "rtol": 0.0}, timing=QUICK,
                     progress=False)
    assert loose.table["passed"].all()  # the same variants pass a loose gate
    assert 'variant(model, args, dtype="float16")' in loose.snippet(0)
    assert 'quantize="int8"' in loose.snippet(1)


def test_cancel_stops_the_remaining_tasks(client):
    space = {"engine": ["xla"], "optimization_level": [0, 1, 2, 3, 4, 5], "opt": [None, {"x": (8, 16)}]}
    run = lab.tune(MLP(), ARGS, space, client=client, wait=False, timing={**QUICK, "max_seconds": 3.0,
                                                                         "iters": 200})
    deadline = time.time() + 120
    while run.finished == 0 and time.time() < deadline:
        time.sleep(0.05)
    run.cancel()
    result = run.result()
    errors = list(result.table["error"])
    assert len(errors) == 12 and errors.count("cancelled") >= 6, errors
    while _executing(client) and time.time() < deadline:  # the running ones stop at their next step
        time.sleep(0.1)
    assert _executing(client) == 0
    assert not client.processing() or not any(client.processing().values())


def test_program_as_an_importable_path(client):
    result = lab.tune("tripy_lab.frontend.ops:relu", [tp.InputInfo(shape=((1, 2, 4),), dtype=tp.float32)],
                      {"engine": ["reference", "xla"]}, client=client, timing=QUICK, progress=False)
    assert list(result.table["error"]) == ["", ""] and result.table["passed"].all()
    assert "from tripy_lab.frontend.ops import relu" in result.snippet()


# -- in this process --------------------------------------------------------------------------------------
def test_in_process_sweep_keeps_executables_and_its_snippet_builds_the_best(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the snippet exports model.onnx beside it
    result = lab.tune(MLP(), ARGS, {"engine": ["reference"], "optimization_level": [0, 3],
                                    "opt": [{"x": (2, 16)}]}, timing=QUICK, progress=False)
    assert len(result.table) == 2 and result.table["passed"].all() and set(result.table["worker"]) == {"local"}
    exe = result.executable(1)
    assert exe is result.rows[1]["executable"]  # kept from the sweep, not rebuilt
    assert exe.optimization_level == 3 and exe.input_infos["x"].shape_bounds.opt == (2, 16)
    namespace = {"model": MLP()}
    exec(result.snippet(), namespace)  # noqa: S102 - the generated code is the thing under test
    built = namespace["exe"]
    assert built.input_infos["x"].shape_bounds.opt == (2, 16)
    assert (tmp_path / "model.onnx").stat().st_size > 0
    x = np.ones((3, 16), np.float32)
    np.testing.assert_allclose(np.asarray(built(x)), np.asarray(result.executable()(x)), rtol=1e-6)
    html = result._repr_html_()
    best = result.best_index
    assert result.rows[best]["compute_ms"] == min(result.table["compute_ms"])
    assert "tripy-pareto" in html and f"best passing: #{best}" in html and "tp.compile(model" in html
    assert f"optimization_level={result.configs[best]['optimization_level']}" in result.snippet()


def test_in_process_cancel_and_failed_reference():
    run = lab.tune(MLP(), ARGS, {"engine": ["reference"], "optimization_level": [0, 1, 2, 3, 4, 5]}, wait=False,
                   timing={**QUICK, "max_seconds": 2.0, "iters": 500})
    while run.finished == 0:
        time.sleep(0.02)
    run.cancel()
    errors = list(run.result().table["error"])
    assert errors[0] == "" and errors.count("cancelled") >= 4, errors

    class Unset(tp.Module):
        def __init__(self):
            super().__init__()
            self.fc = tp.Linear(16, 4)

        def forward(self, x):
            return self.fc(x)

    result = lab.tune(Unset(), ARGS, {"engine": ["reference", "xla"]}, timing=QUICK, progress=False)
    assert all(e.startswith("reference: Some parameters were never set") for e in result.table["error"])
    assert result.best is None and "no config passed" in result.html()


@pytest.mark.parametrize("space, match", [
    ({"precision": ["float16"]}, "Invalid key in parameter: 'space': 'precision'"),
    ({"dtype": ["float8"]}, "'dtype'"),
    ({"quantize": ["int4"]}, "'quantize'"),
    ({"optimization_level": [7]}, "'optimization_level'"),
    ({"engine": ["tensorflow"]}, "'engine'"),
    ({"opt": [[8, 16]]}, "'opt'"),
    ({"engine": []}, "'engine' is empty"),
    (42, "'space'"),
])
def test_bad_spaces_raise_naming_the_parameter(space, match):
    with pytest.raises(tp.TripyException, match=match):
        lab.tune(MLP(), ARGS, space)


def test_space_expansion_labels_and_pareto_front():
    configs = tuning.expand({"dtype": [tp.float16, "bfloat16"], "quantize": [None, "int8"], "engine": "xla"})
    assert [tuning.label(c) for c in configs] == ["xla -O3 float16", "xla -O3 float16 int8-wo",
                                                  "xla -O3 bfloat16", "xla -O3 bfloat16 int8-wo"]
    rows = [{"compute_ms": 1.0, "max_abs_err": 1e-2}, {"compute_ms": 2.0, "max_abs_err": 1e-3},
            {"compute_ms": 3.0, "max_abs_err": 1e-2}, {"compute_ms": 4.0, "max_abs_err": 0.0},
            {"compute_ms": float("nan"), "max_abs_err": 0.0, "error": "build: no"}]
    assert tune_view.pareto(rows) == [0, 1, 3]
