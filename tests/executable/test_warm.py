"""Executable.warm: shapes inside the profile compiled ahead of their first call, in the background, cancellable,
leaving no thread behind; the ladder it picks; engines that build every shape at once have nothing to do."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.executable.warm import ladder

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
