"""The onnxruntime engine in the lab's timing machinery (issue 11 part 3, issue 12 part 2): compute time
measured by the engine, per-layer time from onnxruntime's profiler joined to the layer table by node name,
shaded source lines in the Engine tab."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.onnx.profile import median_node_s, trace_runs
from tripy_lab.lab import benchmark, layer_time, profile, tabs, timing

pytest.importorskip("onnxruntime")
pytest.importorskip("pandas")

# nodes big enough (~0.1-0.3 ms each on 2 CPU cores) that the profiler's bookkeeping per node stays small
W = np.random.default_rng(0).standard_normal((384, 384)).astype(np.float32) / 20


def mlp(x, w):
    a = tp.gelu(x @ w)
    b = tp.softmax(a @ w, dim=-1)
    return tp.sum(b @ w + x, dim=1)


@pytest.fixture(scope="module")
def exe():
    return tp.compile(mlp, args=[tp.InputInfo(((32, 128, 256), 384), tp.float32), tp.Tensor(W)],
                      engine="onnxruntime")


def test_timing_columns_exist_and_are_ordered(exe):
    # compute and latency come from separate batches: enough of each that a shared CPU's drift between the
    # two phases averages out (30 + 20 calls once read compute 0.79 ms against a p90 latency of 0.71 ms)
    df = benchmark(exe, shapes=["min", "opt"], warmup=3, iters=60, profile_calls=40)
    assert list(df.columns) == timing.COLUMNS
    assert (df["error"] == "").all(), df["error"]
    assert df["compute_method"].str.contains("InferenceSession.run").all()
    assert df["compute_method"].str.contains("onnxruntime profiler").all()
    assert (df["compute_ms"] > 0).all()
    # the engine's run lies inside each synchronized call (p90: a shared CPU preempts some calls)
    assert (df["compute_ms"] <= df["latency_p90_ms"]).all(), df[["compute_ms", "latency_ms", "latency_p90_ms"]]
    assert df.loc[0, "compute_ms"] < df.loc[1, "compute_ms"]  # 32 rows vs 128 rows


def test_layer_times_sum_to_the_compute_time_and_name_the_layer_table(exe):
    # at the profile's max (256 rows) the profiler's ~27 µs per node is a smaller share of each node than at
    # opt, where a loaded CI machine read the layers 19 % above the compute time
    df = profile(exe, shapes="max", calls=20)
    assert list(df.columns) == layer_time.COLUMNS
    attrs = df.attrs
    assert attrs["compute_ms"] > 0 and "onnxruntime profiler" in attrs["method"]
    assert abs(attrs["layers_ms"] - attrs["compute_ms"]) <= 0.15 * attrs["compute_ms"], (
        attrs, exe._compiled.last_profile.notes)
    assert df["time_ms"].sum() == pytest.approx(attrs["layers_ms"])
    # every node that ran is a row of the layer table (no "unlisted" rows), and every row ran
    table = [ly.name for ly in exe.stages["built"].layers]
    assert list(df["layer"]) == table
    assert (df["time_ms"] > 0).all(), df[["layer", "time_ms"]]
    # the three GEMMs dominate and point at this file's lines
    top = df.sort_values("time_ms").tail(3)
    assert all("MatMul" in k or "Gemm" in k for k in top["kind"]), top
    assert top["source_lines"].str.contains("test_onnx_profile.py:").all()
    lines = {n for (f, n) in layer_time.line_times(exe._compiled.last_profile, exe._program)
             if f.endswith("test_onnx_profile.py")}
    assert lines == {mlp.__code__.co_firstlineno + k for k in (1, 2, 3)}


def test_engine_tab_shows_layer_times_and_shaded_source(exe):
    profile(exe, calls=5, warmup=1)
    page = tabs.EngineView.of(exe.stages["built"]).html()
    assert "tripy-layer-time" in page and "onnxruntime profiler" in page and "time (ms)" in page
    assert "of the median compute time" in page  # the profile's notes: how much of it the layers cover
    assert "tripy-source-heat" in page and "a = tp.gelu(x @ w)" in page


def test_layer_times_counts_the_profiled_runs_only(exe):
    rows = exe._compiled.layer_times(iters=4)
    assert {r["name"] for r in rows} == {ly.name for ly in exe.layers}
    assert all(r["calls"] == 4 and r["mean_ms"] == pytest.approx(r["total_ms"] / 4) for r in rows)
    assert exe._compiled.sessions_built == 1


def _node(name, ts, dur, tid=1):
    return {"cat": "Node", "name": f"{name}_kernel_time", "ts": ts, "dur": dur, "tid": tid,
            "args": {"op_name": name.upper(), "provider": "CPUExecutionProvider"}}


def test_trace_runs_groups_nodes_by_run_and_counts_subgraph_nodes_once():
    events = [
        {"cat": "Session", "name": "session_initialization", "ts": 0, "dur": 50},
        _node("a", 100, 10), _node("loop", 112, 30), _node("body", 115, 20), _node("b", 145, 5),
        {"cat": "Session", "name": "SequentialExecutor::Execute", "ts": 99, "dur": 52},
        {"cat": "Session", "name": "model_run", "ts": 98, "dur": 60},
        _node("a", 200, 12), _node("loop", 213, 40), _node("body", 220, 10), _node("b", 254, 6),
        {"cat": "Session", "name": "model_run", "ts": 199, "dur": 70},
    ]
    trace = trace_runs(events)
    assert len(trace.runs) == 2
    first, second = trace.runs
    assert first.run_s == pytest.approx(60e-6) and first.span_s == pytest.approx(50e-6)
    assert first.node_s == pytest.approx({"a": 10e-6, "loop": 30e-6, "b": 5e-6})  # "body" lies inside "loop"
    assert second.node_s == pytest.approx({"a": 12e-6, "loop": 40e-6, "b": 6e-6})
    assert trace.node_info["loop"] == {"op_name": "LOOP", "provider": "CPUExecutionProvider"}
    assert median_node_s(trace.runs) == pytest.approx({"a": 11e-6, "loop": 35e-6, "b": 5.5e-6})


def test_tiny_nodes_say_that_the_profiler_inflates_them():
    # 16 nodes on a dozen elements: each node's real work is far below the profiler's own cost per node
    f = lambda x, s: tp.reshape(x, (-1, s))  # noqa: E731
    tiny = tp.compile(f, args=[tp.InputInfo(((1, 2, 4), 6), tp.float32), tp.DimensionInputInfo((1, 2, 3))],
                      engine="onnxruntime")
    df = profile(tiny, calls=5, warmup=1)
    assert df.attrs["layers_ms"] > 1.15 * df.attrs["compute_ms"], df.attrs
    assert any("bookkeeping adds about" in n for n in tiny._compiled.last_profile.notes)
