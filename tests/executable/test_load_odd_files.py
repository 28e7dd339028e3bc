"""Executable.load of things that are not files (issue 27 item 6): checked before reading, read bounded.

Each case runs in a child process with a time limit and an address-space limit: today's reader blocks forever
on a FIFO and reads /dev/zero until memory runs out.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LOAD = """
    import resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # 3 GB: reading a 2 GB file whole would exceed it
    import tripy_lab as tp
    try:
        tp.Executable.load(sys.argv[1])
        print("LOADED")
    except tp.TripyException as exc:
        print("REFUSED", str(exc).splitlines()[0])
"""


def load_in_child(path: str) -> str:
    paths = (os.path.join(REPO, "src"), os.environ.get("PYTHONPATH"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    try:
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(LOAD), path], capture_output=True, text=True,
                             env=env, timeout=60)
    except subprocess.TimeoutExpired:
        return "BLOCKED"
    return out.stdout.strip() or f"CRASHED rc={out.returncode}: {out.stderr.strip().splitlines()[-1:]}"


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "exe.json"
    os.mkfifo(fifo)
    result = load_in_child(str(fifo))
    assert result.startswith("REFUSED") and "FIFO" in result, result


def test_dev_zero_is_refused_without_reading_it(tmp_path):
    result = load_in_child("/dev/zero")
    assert result.startswith("REFUSED") and "character device" in result, result


def test_a_huge_sparse_file_is_refused_without_reading_it_whole(tmp_path):
    path = tmp_path / "exe.json"
    with open(path, "wb") as f:
        f.truncate(2 << 30)  # 2 GB of zeros, no disk used
    result = load_in_child(str(path))
    assert result.startswith("REFUSED") and "not a JSON object" in result, result


def test_a_file_larger_than_the_format_allows_is_refused_by_its_size(tmp_path, monkeypatch):
    import tripy_lab as tp
    from tripy_lab.executable import serialize

    path = tmp_path / "exe.json"
    path.write_bytes(b'{"format": "tripy-lab-executable/2", "pad": "' + b"x" * 5000 + b'"}')
    monkeypatch.setattr(serialize, "MAX_BYTES", 4096)
    with pytest.raises(tp.TripyException, match="more than an Executable file holds"):
        tp.Executable.load(str(path))
    with pytest.raises(tp.TripyException, match="(?i)directory|folder"):
        tp.Executable.load(str(tmp_path))
    with pytest.raises(tp.TripyException, match="empty"):
        tp.Executable.load("")
