"""Every file tripy-lab writes is whole or untouched (issue 27 items 1 and 8).

A full disk is simulated with RLIMIT_FSIZE in a child process (no root, no mounts; the limit holds for root
too): a write past it fails with EFBIG, as a full disk fails with ENOSPC.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tripy_lab as tp

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def child_env() -> dict:
    paths = (os.path.join(REPO, "src"), os.environ.get("PYTHONPATH"))
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}


def run_child(script: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(script), *args], capture_output=True, text=True,
                         env=child_env(), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def leftovers(folder) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith((".tmp", ".part")) or n.startswith((".tmp", "tmp")))


# Each writer runs once with no limit (the file it leaves is the "old" file), then again under a file-size
# limit smaller than its output: the old file must be unchanged, no temp file left, a TripyException naming
# the path and EFBIG.
FULL_DISK = """
    import json, os, resource, sys
    import numpy as np
    import tripy_lab as tp
    import tripy_lab.lab
    folder = sys.argv[1]
    exe = tp.compile(lambda a: tp.exp(a) * 2.0, args=[tp.InputInfo(((1, 2, 4), 8), tp.float32)], engine="reference")
    writers = {
        "save": lambda p: exe.save(p),
        "export_onnx": lambda p: exe.export_onnx(p),
        "report": lambda p: tripy_lab.lab.report(exe, p),
    }
    suffix = {"save": ".json", "export_onnx": ".onnx", "report": ".html"}
    for name, write in writers.items():
        write(os.path.join(folder, name + suffix[name]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))  # every file above 200 bytes fails: EFBIG
    out = {}
    for name, write in writers.items():
        path = os.path.join(folder, name + suffix[name])
        before = open(path, "rb").read()
        try:
            write(path)
            out[name] = {"raised": None}
        except BaseException as exc:
            kind = "TripyException" if isinstance(exc, tp.TripyException) else type(exc).__name__
            out[name] = {"raised": kind, "message": str(exc)}
        out[name]["unchanged"] = open(path, "rb").read() == before
        out[name]["size"] = len(before)
    out["listing"] = sorted(os.listdir(folder))
    print(json.dumps(out))
"""


def test_a_full_disk_leaves_every_old_file_whole_and_says_why(tmp_path):
    pytest.importorskip("onnx")
    result = run_child(FULL_DISK, str(tmp_path))
    for name in ("save", "export_onnx", "report"):
        got = result[name]
        assert got["size"] > 200, got  # the limit really cuts this writer's output
        assert got["raised"] == "TripyException", (name, got)
        assert "EFBIG" in got["message"] and str(tmp_path) in got["message"], (name, got["message"])
        assert got["unchanged"], f"{name}: the old file was changed by a failed write"
    assert result["listing"] == ["export_onnx.onnx", "report.html", "save.json"]  # no temp file left


def exe_reference():
    return tp.compile(lambda a: a + 1.0, args=[tp.InputInfo((2,), tp.float32)], engine="reference")


@pytest.mark.parametrize("writer", ["save", "export_onnx", "report"])
@pytest.mark.parametrize("bad", ["", "nul", "folder", "missing-folder-file", "parent-is-a-file"])
def test_bad_paths_are_a_tripy_exception_before_anything_is_written(tmp_path, monkeypatch, writer, bad):
    if writer == "export_onnx":
        pytest.importorskip("onnx")
    import tripy_lab.lab

    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    (tmp_path / "a-file").write_text("x")
    path = {"": "", "nul": str(tmp_path / "a\x00b"), "folder": str(tmp_path),
            "missing-folder-file": str(tmp_path / "no" / "such" / "f"),
            "parent-is-a-file": str(tmp_path / "a-file" / "f")}[bad]
    exe = exe_reference()
    write = {"save": exe.save, "export_onnx": exe.export_onnx, "report": lambda p: tripy_lab.lab.report(exe, p)}
    before = sorted(p.name for p in tmp_path.iterdir())
    if writer == "save" and bad == "missing-folder-file":  # save makes the folder it writes into (as before)
        write[writer](path)
        assert os.path.isfile(path)
        return
    with pytest.raises(tp.TripyException) as info:
        write[writer](path)
    message = str(info.value)
    assert "Traceback" not in message and ("path" in message or repr(os.path.abspath(path)) in message), message
    assert sorted(p.name for p in tmp_path.iterdir()) == before and os.listdir(work) == []  # "" wrote nothing
    if bad == "":
        assert "empty" in message
    if bad == "nul":
        assert "NUL" in message


def test_save_to_a_symlink_writes_the_file_it_points_to(tmp_path):
    exe = exe_reference()
    real = tmp_path / "real.json"
    real.write_text("old")
    (tmp_path / "link.json").symlink_to(real)
    exe.save(str(tmp_path / "link.json"))
    assert (tmp_path / "link.json").is_symlink() and json.loads(real.read_text())["format"].startswith("tripy-lab")
    np.testing.assert_allclose(np.asarray(tp.Executable.load(str(real))(tp.Tensor(np.ones(2, np.float32)))), [2, 2])


def test_write_atomic_keeps_the_mode_of_a_replaced_file_and_cleans_up_after_a_failing_writer(tmp_path):
    from tripy_lab.core import files

    path = tmp_path / "f.txt"
    path.write_text("old")
    os.chmod(path, 0o640)

    def half_then_fail(f):
        f.write(b"half")
        raise OSError(28, "No space left on device")

    with pytest.raises(files.WriteError, match="ENOSPC") as info:
        files.write_atomic(path, half_then_fail)
    assert info.value.errno == 28 and info.value.path == str(path)
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["f.txt"]
    files.write_atomic(path, "new")
    assert path.read_text() == "new" and os.stat(path).st_mode & 0o777 == 0o640
    with pytest.raises(KeyboardInterrupt):  # an interrupt mid-write: still no temp file
        files.write_atomic(path, lambda f: (_ for _ in ()).throw(KeyboardInterrupt()))
    assert os.listdir(tmp_path) == ["f.txt"] and path.read_text() == "new"


def test_big_onnx_models_write_model_and_data_whole(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    from tripy_lab.engine.onnx import export as onnx_export

    monkeypatch.setattr(onnx_export, "EXTERNAL_DATA_ABOVE", 0)  # every model takes the external-data path
    weight = np.arange(4096, dtype=np.float32)  # above onnx's 1 KB threshold for external data
    exe = tp.compile(lambda a: a + tp.Tensor(weight), args=[tp.InputInfo((4096,), tp.float32)], engine="reference")
    path = tmp_path / "m.onnx"
    exe.export_onnx(str(path))
    assert sorted(os.listdir(tmp_path)) == ["m.onnx", "m.onnx.data"]
    import onnx

    onnx.checker.check_model(str(path), full_check=True)
    assert os.path.getsize(tmp_path / "m.onnx.data") >= weight.nbytes


def test_cache_files_skip_the_fsyncs_that_user_files_keep(tmp_path, monkeypatch):
    """Compiled entries and the timing cache are read back through a digest check, so they are written without
    fsyncs (~9 ms a write on the VM, two per xla build); a user's file keeps both (data, then the rename)."""
    from tripy_lab.core import cache, files

    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    files.write_atomic(str(tmp_path / "user.json"), "{}")
    assert len(synced) == 2
    synced.clear()

    store = cache.EntryStore(str(tmp_path / "entries"), "compilation_cache_dir")
    path = store.write("k1", b"payload", engine="xla")
    timing = cache.TimingCacheFile.open(str(tmp_path / "timing.cache"))
    timing.record("k1", label="x", hit=False)
    timing._write()
    assert synced == []
    assert store.read("k1") == (b"payload", "") and os.stat(path).st_mode & 0o777 == 0o600
    assert cache.TimingCacheFile(timing.path).status == "loaded"
    # what a power cut may leave of a file whose data never reached the disk: empty or short. Each is a miss
    # with its reason (then rebuilt), never data.
    for cut in (b"", open(path, "rb").read()[:-3]):
        with open(path, "wb") as f:
            f.write(cut)
        payload, why = store.read("k1")
        assert payload is None and why, why
    with open(timing.path, "wb"):
        pass
    assert cache.TimingCacheFile(timing.path).status.startswith("rejected")
