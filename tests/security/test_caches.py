"""Caches that can't be swapped: private folders, entries bound to their program, bad entries replaced."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.core import cache
from tripy_lab.engine.xla import cache as xla_cache

pytest.importorskip("jax")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OTHER_UID = 54321  # we run as root in CI: chown to a uid that is not ours


def plus_one(a):
    return a + 1.0


def times_three(a):
    return a * 3.0


@pytest.fixture
def caches(tmp_path, monkeypatch):
    root = tmp_path / "c"
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(root / "xla"))
    monkeypatch.setattr(tp.config, "timing_cache_file_path", str(root / "timing.cache"))
    return root


def compile_xla(func):
    exe = tp.compile(func, args=[tp.InputInfo((4,), tp.float32)], engine="xla")
    xla_cache.flush()  # entries are written behind the build: these tests read and edit the files
    return exe


def run(exe) -> np.ndarray:
    return np.asarray(exe(tp.Tensor(np.arange(4, dtype=np.float32))))


def entries(root) -> list:
    return sorted((root / "xla").glob("*.entry"))


def cache_report(exe) -> dict:
    return exe.stages["built"].report.cache


# -- folders -----------------------------------------------------------------------------------------
def test_default_folder_is_per_user_and_honours_xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.default_dir() == str(tmp_path / "xdg" / "tripy-lab")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache.default_dir() == str(tmp_path / "home" / ".cache" / "tripy-lab")
    made = cache.private_dir(cache.default_dir(), "compilation_cache_dir")
    assert os.stat(made).st_mode & 0o777 == 0o700


def test_foreign_owned_folder_is_refused(tmp_path, caches, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root (CI runs as root)")
    folder = caches / "xla"
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    with pytest.raises(tp.TripyException, match="owned by uid 54321") as err:
        compile_xla(plus_one)
    assert "tp.config.compilation_cache_dir" in str(err.value) and str(folder) in str(err.value)


@pytest.mark.parametrize("mode", [0o770, 0o707, 0o777])
def test_group_or_other_writable_folder_is_refused(caches, mode):
    folder = caches / "xla"
    folder.mkdir(parents=True)
    os.chmod(folder, mode)
    with pytest.raises(tp.TripyException, match="writable by") as err:
        compile_xla(plus_one)
    assert f"{mode:04o}" in str(err.value)


def test_folder_in_a_shared_non_sticky_parent_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)  # anyone may rename our folder away and put theirs in its place
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(shared / "xla"))
    with pytest.raises(tp.TripyException, match="parent"):
        compile_xla(plus_one)


def test_timing_cache_in_a_foreign_folder_is_refused(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root (CI runs as root)")
    folder = tmp_path / "theirs"
    folder.mkdir(mode=0o700)
    os.chown(folder, OTHER_UID, OTHER_UID)
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path / "mine"))
    monkeypatch.setattr(tp.config, "timing_cache_file_path", str(folder / "timing.cache"))
    with pytest.raises(tp.TripyException, match="tp.config.timing_cache_file_path"):
        compile_xla(plus_one)


# -- entries -----------------------------------------------------------------------------------------
def test_swapped_entries_never_return_the_other_programs_results(caches):
    a, b = compile_xla(plus_one), compile_xla(times_three)
    assert cache_report(a)["persistent_misses"] == 1 and cache_report(b)["persistent_misses"] == 1
    ea, eb = entries(caches)
    tmp = ea.with_suffix(".swap")
    ea.rename(tmp)
    eb.rename(ea)
    tmp.rename(eb)

    a2, b2 = compile_xla(plus_one), compile_xla(times_three)
    np.testing.assert_array_equal(run(a2), np.arange(4) + 1.0)
    np.testing.assert_array_equal(run(b2), np.arange(4) * 3.0)
    for exe in (a2, b2):
        rep = cache_report(exe)
        assert rep["persistent_hits"] == 0 and rep["persistent_misses"] == 1
        assert "another program" in rep["persistent_rejected"][0]["reason"]
        assert any("rejected" in n and "replaced" in n for n in exe.stages["built"].report.notes)
    # replaced: the next builds are verified hits with the right results
    a3, b3 = compile_xla(plus_one), compile_xla(times_three)
    assert cache_report(a3)["persistent_hits"] == 1 and cache_report(b3)["persistent_hits"] == 1
    np.testing.assert_array_equal(run(a3), np.arange(4) + 1.0)
    np.testing.assert_array_equal(run(b3), np.arange(4) * 3.0)


@pytest.mark.parametrize("damage, reason", [
    (lambda p: p.write_bytes(p.read_bytes()[:-7]), "truncated"),
    (lambda p: p.write_bytes(p.read_bytes()[:-1] + bytes([p.read_bytes()[-1] ^ 1])), "digest mismatch"),
    (lambda p: p.write_bytes(b"\x00garbage"), "not a tripy-lab cache entry"),
    (lambda p: p.write_bytes(cache.ENTRY_MAGIC + b"{not json"), "unreadable entry header"),
])  # fmt: skip
def test_damaged_entry_is_a_miss_with_its_reason_and_is_replaced(caches, damage, reason):
    compile_xla(plus_one)
    (entry,) = entries(caches)
    damage(entry)
    again = compile_xla(plus_one)
    rep = cache_report(again)
    assert rep["persistent_misses"] == 1 and reason in rep["persistent_rejected"][0]["reason"]
    np.testing.assert_array_equal(run(again), np.arange(4) + 1.0)
    assert not list((caches / "xla").glob(".tmp-*"))  # the atomic write left no temp file
    assert cache_report(compile_xla(plus_one))["persistent_hits"] == 1


def test_foreign_owned_entry_is_not_loaded(caches):
    if os.geteuid() != 0:
        pytest.skip("chown to another uid needs root (CI runs as root)")
    compile_xla(plus_one)
    (entry,) = entries(caches)
    os.chown(entry, OTHER_UID, OTHER_UID)
    rep = cache_report(compile_xla(plus_one))
    assert rep["persistent_hits"] == 0 and "owned by uid 54321" in rep["persistent_rejected"][0]["reason"]
    assert os.stat(entry).st_uid == os.geteuid()  # replaced by ours


# -- the timing cache file (issue 8 finding 5) -------------------------------------------------------
REUSE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import tripy_lab as tp
    tp.config.timing_cache_file_path = sys.argv[1]
    tp.config.compilation_cache_dir = sys.argv[2]
    exe = tp.compile(lambda a: a * 2.0 + 1.0, args=[tp.InputInfo((3,), tp.float32)], engine="xla")
    out = np.asarray(exe(tp.Tensor(np.ones(3, np.float32)))).tolist()
    print(json.dumps({**exe.stages["built"].report.cache, "out": out}))
""")


def test_timing_cache_file_is_at_the_named_path_and_reused_in_a_new_process(tmp_path):
    timing, folder = tmp_path / "my" / "timing.cache", tmp_path / "xla"
    paths = (os.path.join(REPO, "src"), os.environ.get("PYTHONPATH"))  # keep the caller's (GPU machine: xdsl)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}

    def once() -> dict:
        out = subprocess.run([sys.executable, "-c", REUSE_SCRIPT, str(timing), str(folder)], capture_output=True,
                             text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = once()
    assert first["out"] == [3.0, 3.0, 3.0] and first["timing_cache"] == str(timing)
    assert first["timing_cache_status"] == "created" and first["persistent_misses"] == 1
    doc = json.loads(timing.read_text())
    assert doc["format"] == cache.TIMING_FORMAT
    (row,) = doc["body"]["entries"].values()
    assert row["hits"] == 0 and row["label"] == "a=3" and os.path.exists(row["entry"])
    assert not list(tmp_path.glob("my/*-xla"))  # nothing "beside" the path any more

    second = once()
    assert second["out"] == [3.0, 3.0, 3.0] and second["timing_cache_status"] == "loaded"
    assert second["persistent_hits"] == 1 and second["persistent_misses"] == 0
    (row,) = json.loads(timing.read_text())["body"]["entries"].values()
    assert row["hits"] == 1


def test_damaged_timing_cache_file_is_reported_and_replaced(caches):
    compile_xla(plus_one)
    timing = caches / "timing.cache"
    doc = json.loads(timing.read_text())
    doc["body"]["entries"]["forged"] = {"hits": 99}  # the digest no longer matches
    timing.write_text(json.dumps(doc))
    rep = cache_report(compile_xla(plus_one))
    assert rep["timing_cache_status"].startswith("rejected") and rep["persistent_hits"] == 1
    body = json.loads(timing.read_text())["body"]
    assert "forged" not in body["entries"] and len(body["entries"]) == 1
    timing.write_text("")
    assert cache_report(compile_xla(plus_one))["timing_cache_status"].startswith("rejected")


def test_timing_cache_path_that_is_a_folder_is_an_error(caches):
    (caches / "timing.cache").mkdir(parents=True)
    with pytest.raises(tp.TripyException, match="is a folder"):
        compile_xla(plus_one)
    shutil.rmtree(caches / "timing.cache")


class FakeTrtConfig:
    """Just the IBuilderConfig calls attach_timing_cache makes (TensorRT itself is never installed here)."""

    def create_timing_cache(self, data):
        return bytes(data)

    def set_timing_cache(self, cache, ignore_mismatch):
        self.loaded = cache
        return True


def test_tensorrt_timing_cache_is_read_only_from_your_own_file(tmp_path):
    from tripy_lab.engine.tensorrt.profile import attach_timing_cache

    path = tmp_path / "trt" / "timing.cache"
    _, state = attach_timing_cache(FakeTrtConfig(), str(path))
    assert state.status == "created" and os.stat(path.parent).st_mode & 0o777 == 0o700
    path.write_bytes(b"tuned tactics")
    config = FakeTrtConfig()
    _, state = attach_timing_cache(config, str(path))
    assert state.status == "loaded" and config.loaded == b"tuned tactics"
    if os.geteuid() == 0:
        os.chown(path, OTHER_UID, OTHER_UID)
        config = FakeTrtConfig()
        _, state = attach_timing_cache(config, str(path))
        assert state.status == "rejected" and "owned by uid 54321" in state.error and config.loaded == b""
        os.chown(path.parent, OTHER_UID, OTHER_UID)
        with pytest.raises(tp.TripyException, match="tp.config.timing_cache_file_path"):
            attach_timing_cache(FakeTrtConfig(), str(path))


def test_timing_cache_index_keeps_the_most_recent_rows(tmp_path, monkeypatch):
    monkeypatch.setattr(cache.TimingCacheFile, "MAX_ROWS", 3)
    index = cache.TimingCacheFile(str(tmp_path / "t" / "timing.cache"))
    for i in range(5):
        index.record(f"k{i}", label=f"x={i}")
        index.body["entries"][f"k{i}"]["last_used"] = i
    index.save()
    again = cache.TimingCacheFile(str(tmp_path / "t" / "timing.cache"))
    assert again.status == "loaded" and sorted(again.body["entries"]) == ["k2", "k3", "k4"]


def test_timing_cache_writes_are_batched_and_flushed(tmp_path):
    index = cache.TimingCacheFile.open(str(tmp_path / "t" / "timing.cache"))
    index.record("k0", label="x=0")
    index.save()  # the first write is immediate
    index.record("k1", label="x=1")
    index.save()  # within SAVE_EVERY: deferred
    assert list(json.loads((tmp_path / "t" / "timing.cache").read_text())["body"]["entries"]) == ["k0"]
    index.flush()  # what runs at exit
    again = cache.TimingCacheFile.open(str(tmp_path / "t" / "timing.cache"))
    assert again is index and sorted(again.body["entries"]) == ["k0", "k1"]
    assert cache.TimingCacheFile(str(tmp_path / "t" / "timing.cache")).status == "loaded"


def test_gpu_autotune_folder_round_trips_nested_results_and_stays_inside(tmp_path):
    """XLA (jax 0.11, CUDA) writes per-fusion autotune results in sub-folders: the timing cache keeps them by
    relative path, restores them into a fresh folder, and never writes outside it."""
    from tripy_lab.engine.xla.cache import XlaStore

    timing = tmp_path / "timing.cache"
    store = XlaStore(str(tmp_path / "xla"), str(timing))
    folder = store.autotune_options("cuda")[xla_cache_option()]
    os.makedirs(os.path.join(folder, "ed0e56ab"), exist_ok=True)
    with open(os.path.join(folder, "ed0e56ab", "fusion.1.textproto"), "wb") as f:
        f.write(b"tuned-1")
    with open(os.path.join(folder, "top.textproto"), "wb") as f:
        f.write(b"tuned-0")
    store.record("k" * 64, label="opt", hit=False)
    blobs = store.timing.body["blobs"]["autotune"]
    assert sorted(blobs) == ["ed0e56ab/fusion.1.textproto", "top.textproto"]
    blobs["../escape"] = blobs["/abs"] = blobs["top.textproto"]  # a tampered file names paths outside

    fresh = XlaStore(str(tmp_path / "xla"), str(timing))
    fresh.timing.body["blobs"]["autotune"] = dict(blobs)
    again = fresh.autotune_options("cuda")[xla_cache_option()]
    assert open(os.path.join(again, "ed0e56ab", "fusion.1.textproto"), "rb").read() == b"tuned-1"
    assert open(os.path.join(again, "top.textproto"), "rb").read() == b"tuned-0"
    assert not os.path.exists(os.path.join(os.path.dirname(again), "escape"))
    assert sorted(os.listdir(again)) == ["ed0e56ab", "top.textproto"]
    assert XlaStore(str(tmp_path / "xla2"), str(tmp_path / "t2")).autotune_options("cpu") == {}


def xla_cache_option() -> str:
    from tripy_lab.engine.xla.cache import AUTOTUNE_OPTION

    return AUTOTUNE_OPTION


def test_the_gpu_autotune_folder_goes_with_its_store(tmp_path):
    """One temp folder per store that compiles for a GPU: removed when the store is (it held 40 leftovers of test
    and benchmark runs in /tmp before)."""
    import base64
    import gc

    from tripy_lab.engine.xla.cache import XlaStore

    store = XlaStore(str(tmp_path / "xla"), str(tmp_path / "timing.cache"))
    folder = store.autotune_options("cuda")[xla_cache_option()]
    with open(os.path.join(folder, "top.textproto"), "wb") as f:
        f.write(b"tuned")
    assert store.autotune_options("cuda")[xla_cache_option()] == folder  # one folder for the store's builds
    store.record("k" * 64, label="opt", hit=False)  # copied into the timing cache first
    del store
    gc.collect()
    assert not os.path.exists(folder)
    kept = XlaStore(str(tmp_path / "xla"), str(tmp_path / "timing.cache")).timing.body["blobs"]["autotune"]
    assert base64.b64decode(kept["top.textproto"]) == b"tuned"  # the results outlive the folder


# -- entries written behind the build ----------------------------------------------------------------
def test_an_entry_is_written_behind_its_build_and_a_reload_waits_for_it(caches, monkeypatch):
    gate, real = threading.Event(), xla_cache.XlaStore._store

    def held(self, *args):
        assert gate.wait(60)
        return real(self, *args)

    monkeypatch.setattr(xla_cache.XlaStore, "_store", held)
    exe = tp.compile(plus_one, args=[tp.InputInfo((4,), tp.float32)], engine="xla")  # returns, its write held
    np.testing.assert_allclose(run(exe), np.arange(4) + 1.0)
    assert entries(caches) == [] and cache_report(exe)["persistent_misses"] == 1
    threading.Timer(0.2, gate.set).start()
    again = compile_xla(plus_one)  # its load waits for the pending write of the same key: a hit, not a rebuild
    assert cache_report(again)["persistent_hits"] == 1 and len(entries(caches)) == 1
    np.testing.assert_allclose(run(again), np.arange(4) + 1.0)


def test_a_write_that_fails_behind_the_build_becomes_a_note_not_an_error(caches, monkeypatch, capsys):
    def broken(self, *args):
        raise RuntimeError("serializer exploded")

    monkeypatch.setattr(xla_cache.XlaStore, "_store", broken)
    exe = compile_xla(plus_one)
    np.testing.assert_allclose(run(exe), np.arange(4) + 1.0)
    text = "\n".join(exe.stages["built"].report.notes)
    assert "persistent cache: not stored: RuntimeError: serializer exploded" in text, text
    assert entries(caches) == []
    monkeypatch.undo()
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(caches / "xla"))
    monkeypatch.setattr(tp.config, "timing_cache_file_path", str(caches / "timing.cache"))
    assert cache_report(compile_xla(plus_one))["persistent_misses"] == 1 and len(entries(caches)) == 1
