"""lab.profile(exe).to_trace(path): a Chrome / Perfetto trace JSON of a timing run."""

import json

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.lab import profile

pytest.importorskip("pandas")


def chain(x, w):
    return tp.sum(tp.tanh(x @ w) * 0.5, dim=-1)


def test_a_timing_run_writes_a_trace_that_perfetto_reads(tmp_path):
    w = tp.Tensor(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32))
    exe = tp.compile(chain, args=[tp.InputInfo(((1, 4, 8), 16), tp.float32), w], engine="reference")
    df = profile(exe, calls=3, warmup=1)
    path = tmp_path / "run.json"
    path.write_text("old")  # replaced whole
    assert df.to_trace(path) == str(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    assert all({"ph", "pid", "name"} <= set(e) for e in events)
    calls = [e for e in events if e.get("cat") == "call"]
    layers = [e for e in events if e["ph"] == "X" and e.get("cat") != "call"]
    assert len(calls) == 3 and [c["args"]["compute_ms"] for c in calls] == pytest.approx(df.attrs["calls_ms"])
    ran = [name for name, t in zip(df["layer"], df["time_ms"]) if t > 0]
    assert [e["name"] for e in layers] == ran * 3  # every layer that ran, in each call, in table order
    for call in calls:  # each call's layers lie inside its span, after it starts
        inside = [e for e in layers if call["ts"] <= e["ts"] < call["ts"] + max(call["dur"], 1e-9) + 1e6]
        assert inside and all(e["dur"] > 0 for e in inside)
    assert calls == sorted(calls, key=lambda e: e["ts"]) and all(e["ts"] >= 0 for e in events if "ts" in e)
    assert "source_lines" in layers[0]["args"] and trace["displayTimeUnit"] == "ms"
    assert "median" in trace["otherData"]["note"]
