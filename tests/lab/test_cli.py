"""The tripy-lab command: finds notebooks/ and starts JupyterLab on it."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from tripy_lab.lab import cli


def test_print_command_opens_the_quickstart(tmp_path, capsys):
    nb = tmp_path / "notebooks"
    nb.mkdir()
    (nb / cli.QUICKSTART).write_text("{}")
    assert cli.main(["--notebooks", str(nb), "--print-command", "--no-browser", "--port", "8899"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(sys.executable) and "-m jupyterlab" in out
    assert f"--ServerApp.root_dir={nb}" in out and "--LabApp.default_url=/lab/tree/01-quickstart.ipynb" in out
    assert "--port=8899" in out and "--no-browser" in out


def test_finds_notebooks_in_a_parent(tmp_path, monkeypatch):
    (tmp_path / "notebooks").mkdir()
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert cli.find_notebooks(deep) == tmp_path / "notebooks"


def test_repo_notebooks_found_from_anywhere(tmp_path, monkeypatch):
    # From a checkout: the repo's notebooks/; from an installed wheel: a home copy of the packaged ones.
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    found = cli.find_notebooks(tmp_path)
    assert found is not None and (found / cli.QUICKSTART).exists()


def test_missing_folder_is_an_error(tmp_path, capsys):
    assert cli.main(["--notebooks", str(tmp_path / "nope")]) == 2
    assert "no notebooks/" in capsys.readouterr().err


def test_extra_arguments_pass_through(tmp_path, capsys):
    assert cli.main(["--notebooks", str(tmp_path), "--print-command", "--ServerApp.token=x"]) == 0
    assert "--ServerApp.token=x" in capsys.readouterr().out


@pytest.mark.slow
def test_tripy_lab_starts_jupyterlab_on_the_notebooks(tmp_path):
    """The real command: JupyterLab answers on loopback and lists the quickstart."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cmd = [sys.executable, "-c", "from tripy_lab.lab.cli import main; raise SystemExit(main())", "--no-browser",
           "--port", str(port), "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=t",
           f"--LabApp.workspaces_dir={tmp_path}", *(["--allow-root"] if os.geteuid() == 0 else [])]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents?token=t", timeout=1) as r:
                    names = [item["name"] for item in json.load(r)["content"]]
                break
            except OSError:
                assert proc.poll() is None, "tripy-lab exited early"
                time.sleep(0.25)
        else:
            raise AssertionError("JupyterLab did not answer")
        assert cli.QUICKSTART in names
    finally:
        proc.terminate()
        proc.wait(10)
