"""Executable.warm: shapes inside the profile compiled ahead of their first call, in the background, cancellable,
leaving no thread behind; the ladder it picks; engines that build every shape at once have nothing to do."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.executable.warm import ladder, neighbours

pytest.importorskip("jax")


@pytest.fixture(autouse=True)
def fresh_store(tmp_path, monkeypatch):
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path / "xla"))


def mlp(x):
    return tp.tanh(x @ tp.Tensor(np.full((4, 4), 0.25, np.float32))) + 1.0


def warm_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "tripy-lab-warm"]


def test_the_ladder_moves_each_dynamic_dim_then_all_together_without_the_profile_points():
    infos = {"x": tp.InputInfo(((1, 4, 16), (2, 8, 8)), tp.float32), "n": tp.DimensionInputInfo((1, 2, 5))}
    sigs = ladder(infos)
    assert {"x": (2, 8), "n": 2} in sigs  # a batch rung (power of two) with the rest at opt
    assert {"x": (8, 8), "n": 2} in sigs and {"x": (16, 8), "n": 2} in sigs  # up to max, the others at opt
    assert {"x": (4, 8), "n": 4} in sigs  # the DimensionInputInfo's rung
    assert {"x": (4, 8), "n": 2} not in sigs  # opt: built at compile time
    assert {"x": (1, 8), "n": 1} not in sigs and {"x": (16, 8), "n": 5} not in sigs  # min and max corners too
    assert all(1 <= s["x"][0] <= 16 and 2 <= s["x"][1] <= 8 and 1 <= s["n"] <= 5 for s in sigs)
    assert {"x": (4, 2), "n": 2} in sigs and {"x": (4, 4), "n": 2} in sigs  # the second dim on its own
    assert len(sigs) == len({tuple(sorted(s.items())) for s in sigs})


def test_dims_that_share_a_name_or_bounds_move_together():
    b = tp.NamedDimension("b", 1, 2, 8)
    infos = {"x": tp.InputInfo((b, 3), tp.float32), "y": tp.InputInfo((b, 5), tp.float32)}
    sigs = ladder(infos)
    assert sigs and all(s["x"][0] == s["y"][0] for s in sigs)
    assert ladder(infos, limit=1) == sigs[:1]


def test_warm_compiles_in_the_background_and_the_first_call_is_a_hit():
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 16), 4), tp.float32)], engine="xla")
    report = exe.stages["built"].report
    before = len(report.cache["shapes_built"])
    w = exe.warm()
    assert w.wait(timeout=300) and not warm_threads()
    assert w.built and not w.skipped, w
    assert len(report.cache["shapes_built"]) == before + len(w.built)
    misses = report.cache["misses"]
    x = np.ones((8, 4), np.float32)
    np.testing.assert_allclose(np.asarray(exe(x)), np.tanh(x @ np.full((4, 4), 0.25, np.float32)) + 1, rtol=1e-6)
    assert report.cache["misses"] == misses  # 8 rows: on the ladder, so warm; no compile on this call
    again = exe.warm(background=False)
    assert not again.built and len(again.already) == len(w.built)  # nothing left to compile


def test_cancel_stops_the_warm_up_and_leaves_no_thread():
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 1024), 4), tp.float32)], engine="xla")
    w = exe.warm(limit=32)
    w.cancel()
    assert w.done and w.cancelled and not warm_threads()
    assert len(w.built) + len(w.already) < len(w.signatures)  # stopped before the end of an 11-rung ladder
    assert "cancelled" in repr(w)


def test_listed_shapes_outside_the_profile_are_skipped_with_the_reason():
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 4), 4), tp.float32)], engine="xla")
    w = exe.warm([{"x": (3, 4)}, {"x": (9, 4)}], background=False)
    assert w.built == [{"x": (3, 4)}]
    assert len(w.skipped) == 1 and w.skipped[0][0] == {"x": (9, 4)}


@pytest.mark.parametrize("engine", ["reference", "onnxruntime"])
def test_engines_that_build_every_shape_at_once_have_nothing_to_warm(engine):
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 16), 4), tp.float32)], engine=engine)
    w = exe.warm(background=False)
    assert not w.built and len(w.already) == len(w.signatures) > 0


def test_warm_refuses_a_bad_shapes_argument():
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 4), 4), tp.float32)], engine="reference")
    with pytest.raises(tp.TripyException, match="shapes"):
        exe.warm("all")


def test_warm_up_calls_each_shape_as_a_user_would_so_the_first_call_skips_every_check():
    import jax

    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 16), 4), tp.float32)], engine="xla")
    engine, report = exe._compiled, exe.stages["built"].report
    w = exe.warm([{"x": (8, 4)}], background=False)
    assert w.built == [{"x": (8, 4)}] and w.called == [{"x": (8, 4)}]
    host, device = np.full((8, 4), 0.5, np.float32), jax.device_put(np.full((8, 4), 0.5, np.float32))
    # the per-shape state the first call needs is there before it: the Executable's checked signature, for numpy
    # and for device arrays, and the engine's caller for each
    assert ((np.ndarray, (8, 4), np.dtype(np.float32)),) in exe._fast
    assert ((type(device), (8, 4), np.dtype(np.float32)),) in exe._fast
    assert engine.caller_for([host]) is not None and engine.caller_for([device]) is not None
    slow = []
    real_checked, real_miss, real_build = exe._call_checked, engine._run_miss, engine._build_many
    exe._call_checked = lambda *a: slow.append("checks") or real_checked(*a)
    engine._run_miss = lambda *a: slow.append("engine miss") or real_miss(*a)
    engine._build_many = lambda *a: slow.append("compile") or real_build(*a)
    misses = report.cache["misses"]
    want = np.tanh(host @ np.full((4, 4), 0.25, np.float32)) + 1
    np.testing.assert_allclose(np.asarray(exe(host)), want, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(exe(device)), want, rtol=1e-6)
    assert slow == [] and report.cache["misses"] == misses  # both first calls: the remembered fast path
    np.testing.assert_allclose(np.asarray(exe(np.ones((3, 4), np.float32))), np.tanh(np.ones((3, 4)) * 1.0) + 1,
                               rtol=1e-6)
    assert slow == ["checks", "engine miss", "compile"]  # a shape nobody warmed: all of it (the hooks work)


def test_warm_up_leaves_the_users_last_outputs_for_synchronize():
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 16), 4), tp.float32)], engine="xla")
    out = exe(np.ones((2, 4), np.float32))
    last = exe._compiled._last
    exe.warm([{"x": (4, 4)}], background=False)
    assert exe._compiled._last is last and np.asarray(out).shape == (2, 4)


def test_where_a_compile_undoes_earlier_first_calls_every_built_shape_is_called_after_the_last_compile(monkeypatch):
    """On GPUs XLA drops every executable's recorded CUDA graph when it makes a new one (``evicts_on_build``): the
    warm-up then calls each built signature again once its last compile is done. Here the flag is forced on."""
    import tripy_lab.executable.warm as warm_module

    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 16), 4), tp.float32)], engine="xla")
    engine = exe._compiled
    events = []
    real_build, real_call = engine._build_many, warm_module._call_as_user
    engine._build_many = lambda wanted: events.append(("compile", wanted[0][0][0])) or real_build(wanted)
    monkeypatch.setattr(warm_module, "_call_as_user", lambda e, args: events.append(("call", args[0].shape))
                        or real_call(e, args))
    monkeypatch.setattr(type(engine), "evicts_on_build", True)
    w = exe.warm([{"x": (4, 4)}, {"x": (8, 4)}], background=False)
    last_compile = max(i for i, e in enumerate(events) if e[0] == "compile")
    called_after = {e[1] for e in events[last_compile:] if e[0] == "call"}
    built = {p["x"] for p in engine.built_points()}
    assert built == {(1, 4), (2, 4), (16, 4), (4, 4), (8, 4)} and called_after == built
    assert {p["x"] for p in w.replayed} == built
    monkeypatch.setattr(type(engine), "evicts_on_build", False)  # on CPUs: nothing to call again
    assert not exe.warm([{"x": (3, 4)}], background=False).replayed


def test_cancel_without_waiting_returns_at_once_and_the_thread_ends_on_its_own():
    exe = tp.compile(mlp, args=[tp.InputInfo(((1, 2, 1024), 4), tp.float32)], engine="xla")
    ended = []
    w = exe.warm(limit=32, on_done=ended.append)
    w.cancel(wait=False)
    assert w.cancelled
    assert w.wait(timeout=300) and not warm_threads() and ended == [w]
    assert len(w.built) + len(w.already) < len(w.signatures)


def test_neighbours_are_the_rungs_next_to_opt_without_the_profile_points():
    infos = {"x": tp.InputInfo(((1, 4, 16), (2, 8, 8)), tp.float32), "n": tp.DimensionInputInfo((1, 2, 5))}
    assert neighbours(infos) == [{"x": (2, 8), "n": 2}, {"x": (8, 8), "n": 2}, {"x": (4, 4), "n": 2},
                                 {"x": (4, 8), "n": 1}, {"x": (4, 8), "n": 4}]
    assert neighbours({"x": tp.InputInfo(((1, 1, 2), 4), tp.float32)}) == []  # min and max only: all built
