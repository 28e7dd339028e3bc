"""A cache is an accelerator, never a reason to fail; the timing cache is never someone else's file, and
concurrent writers keep every row (issue 27 items 3, 4 and 5)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.core import cache
from tripy_lab.engine.xla import cache as xla_cache

pytest.importorskip("jax")
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_env() -> dict:
    paths = (os.path.join(REPO, "src"), os.environ.get("PYTHONPATH"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def run_child(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                          env=child_env(), timeout=300)


def notes(exe) -> str:
    return "\n".join(exe.stages["built"].report.notes)


# -- item 5: the cache cannot be written -------------------------------------------------------------
@pytest.mark.parametrize("which", ["compilation_cache_dir", "timing_cache_file_path"])
def test_a_cache_path_under_a_regular_file_costs_the_cache_not_the_compile(tmp_path, monkeypatch, capsys, which):
    """root ignores permission bits, so "cannot be written" is a path whose parent is a regular file (ENOTDIR)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path / "ok" / "xla"))
    monkeypatch.setattr(tp.config, "timing_cache_file_path", str(tmp_path / "ok" / "timing.cache"))
    monkeypatch.setattr(tp.config, which, str(blocker / "cache" / ("t" if "timing" in which else "")))
    exe = tp.compile(lambda a: a * 2.0 + float(len(which)), args=[tp.InputInfo((4,), tp.float32)], engine="xla")
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(np.ones(4, np.float32)))), 2.0 + len(which))
    assert str(blocker) in notes(exe) and "ENOTDIR" in notes(exe), notes(exe)
    out = capsys.readouterr().out
    assert out.count("[W]") == 1 and str(blocker) in out and "ENOTDIR" in out, out
    tp.compile(lambda a: a * 3.0, args=[tp.InputInfo((4,), tp.float32)], engine="xla")
    assert "[W]" not in capsys.readouterr().out  # one warning, not one per compile


FULL_CACHE = """
    import json, resource, sys
    import numpy as np
    import tripy_lab as tp
    tp.config.compilation_cache_dir = sys.argv[1]
    tp.config.timing_cache_file_path = sys.argv[2]
    import jax  # imported before the limit: nothing of its own is written after
    resource.setrlimit(resource.RLIMIT_FSIZE, (300, 300))  # every cache file is bigger: EFBIG, as a full disk
    exe = tp.compile(lambda a: tp.exp(a) + 1.0, args=[tp.InputInfo(((1, 2, 8), 4), tp.float32)], engine="xla")
    out = [np.asarray(exe(tp.Tensor(np.zeros((n, 4), np.float32)))).tolist() for n in (2, 5)]  # 5: a new shape
    from tripy_lab.engine.xla import cache
    cache.flush()  # entries are written behind their builds; a failed write adds its note when it happens
    print(json.dumps({"out": out, "notes": exe.stages["built"].report.notes}))
"""


def test_a_full_disk_costs_the_cache_not_the_compile_or_the_run(tmp_path):
    folder, timing = tmp_path / "xla", tmp_path / "t" / "timing.cache"
    proc = run_child(FULL_CACHE, str(folder), str(timing))
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["out"] == [[[2.0] * 4] * 2, [[2.0] * 4] * 5]
    text = "\n".join(result["notes"])
    assert "EFBIG" in text and str(folder) in text and str(timing) in text, text
    assert proc.stdout.count("[W]") >= 1 and "EFBIG" in proc.stdout
    leftover = [n for d in (folder, timing.parent) for n in os.listdir(d) if n.endswith((".part", ".tmp"))]
    assert leftover == []


def test_a_cache_folder_removed_while_running_does_not_break_a_live_executable(tmp_path, monkeypatch, capsys):
    root = tmp_path / "c"
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(root / "xla"))
    monkeypatch.setattr(tp.config, "timing_cache_file_path", str(root / "timing.cache"))
    monkeypatch.setattr(cache.TimingCacheFile, "SAVE_EVERY", 0.0)
    exe = tp.compile(lambda a: a - 0.5, args=[tp.InputInfo(((1, 2, 8), 3), tp.float32)], engine="xla")
    xla_cache.flush()  # the build's entries are written (behind it) before the folder goes
    shutil.rmtree(root)  # e.g. a temporary folder cleaned up under a running kernel
    out = exe(tp.Tensor(np.ones((5, 3), np.float32)))  # 5 is no profile point: compiled now
    np.testing.assert_allclose(np.asarray(out), 0.5)
    xla_cache.flush()  # that compile's entry write (behind it) is the one that meets the missing folder
    assert "ENOENT" in capsys.readouterr().out


# -- item 3: a file that is not ours -----------------------------------------------------------------
def test_a_timing_cache_path_holding_another_tools_file_is_never_overwritten(tmp_path, monkeypatch, capsys):
    theirs = tmp_path / "t" / "trt.cache"
    theirs.parent.mkdir(mode=0o700)
    blob = b"\x00\x01\x02 a TensorRT timing cache " + bytes(range(256)) * 4
    theirs.write_bytes(blob)
    with pytest.raises(tp.TripyException, match="not a tripy-lab timing cache") as info:
        cache.TimingCacheFile(str(theirs))
    assert "tp.config.timing_cache_file_path" in str(info.value)
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path / "xla"))
    monkeypatch.setattr(tp.config, "timing_cache_file_path", str(theirs))
    monkeypatch.setattr(cache.TimingCacheFile, "SAVE_EVERY", 0.0)
    exe = tp.compile(lambda a: a + 7.0, args=[tp.InputInfo((2,), tp.float32)], engine="xla")
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(np.zeros(2, np.float32)))), 7.0)
    assert theirs.read_bytes() == blob
    assert "not a tripy-lab timing cache" in notes(exe) and "not a tripy-lab timing cache" in capsys.readouterr().out


def test_tensorrt_never_writes_over_the_xla_index(tmp_path):
    from tripy_lab.engine.tensorrt.profile import attach_timing_cache, finish_timing_cache

    index = cache.TimingCacheFile(str(tmp_path / "t" / "timing.cache"))
    index.record("k", label="a=2")
    index._write()
    before = (tmp_path / "t" / "timing.cache").read_bytes()

    class Config:
        def create_timing_cache(self, data):
            return bytes(data)

        def set_timing_cache(self, c, ignore):
            return not c  # TensorRT cannot read our JSON: only an empty cache is accepted

        def get_timing_cache(self):
            return type("C", (), {"serialize": lambda self: b"trt tactics"})()

    _, state = attach_timing_cache(Config(), index.path)
    assert state.status == "rejected" and "left as it is" in state.error
    finish_timing_cache(Config(), state)
    assert (tmp_path / "t" / "timing.cache").read_bytes() == before


# -- item 4: concurrent writers ----------------------------------------------------------------------
WRITER = """
    import sys, time
    from tripy_lab.core import cache
    path, who, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cache.TimingCacheFile.SAVE_EVERY = 0.0
    while not __import__("os").path.exists(path + ".go"):  # start together
        time.sleep(0.005)
    index = cache.TimingCacheFile.open(path)
    for i in range(n):
        index.record(f"{who}-{i}", label=f"x={i}")
        index.record("shared", label="s", hit=True)
        index.save()
        index = cache.TimingCacheFile.open(path)
"""


def test_concurrent_processes_keep_every_row_and_every_hit(tmp_path):
    path = tmp_path / "t" / "timing.cache"
    path.parent.mkdir(mode=0o700)
    writers, n = 4, 15
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(path), f"p{w}", str(n)],
                              env=child_env(), stderr=subprocess.PIPE, text=True) for w in range(writers)]
    (tmp_path / "t" / "timing.cache.go").write_text("")
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read()
    body = json.loads(path.read_text())["body"]
    rows = body["entries"]
    assert sorted(rows) == sorted([f"p{w}-{i}" for w in range(writers) for i in range(n)] + ["shared"])
    assert rows["shared"]["hits"] == writers * n
    assert cache.TimingCacheFile(str(path)).status == "loaded"


COMPILER = """
    import sys
    import numpy as np
    import tripy_lab as tp
    tp.config.compilation_cache_dir, tp.config.timing_cache_file_path = sys.argv[1], sys.argv[2]
    for i in range(int(sys.argv[4])):
        c = float(sys.argv[3]) * 100 + i
        exe = tp.compile(lambda a: a * 2.0 + c, args=[tp.InputInfo((3,), tp.float32)], engine="xla")
        assert np.asarray(exe(tp.Tensor(np.zeros(3, np.float32)))).tolist() == [c] * 3
"""


def test_two_processes_compiling_into_one_timing_cache_keep_all_rows(tmp_path):
    folder, timing = tmp_path / "xla", tmp_path / "t" / "timing.cache"
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(COMPILER), str(folder), str(timing), str(w),
                               "5"], env=child_env(), stderr=subprocess.PIPE, text=True) for w in range(2)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()[-3000:]
    rows = json.loads(timing.read_text())["body"]["entries"]
    assert len(rows) == 10 and len(list(folder.glob("*.entry"))) == 10
