"""binder/ sets up a working lab: a fresh venv built only from binder/'s files has the extension enabled,
JupyterLab opens on the quickstart, and the quickstart executes in that venv's kernel."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BINDER = REPO / "binder"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def test_binder_files_are_complete():
    assert (BINDER / "apt.txt").read_text().split() == ["graphviz"]
    assert os.access(BINDER / "postBuild", os.X_OK)
    assert "01-quickstart.ipynb" in (BINDER / "postBuild").read_text()
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.11"  # jax 0.10.2's newest Python


@pytest.mark.slow
def test_binder_install_opens_the_quickstart_and_runs_it(tmp_path):
    venv = tmp_path / "venv"
    home = tmp_path / "home"
    home.mkdir()
    config = home / ".jupyter"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    bindir = venv / "bin"
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")},
        "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
        "VIRTUAL_ENV": str(venv),
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(config),
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    run = lambda *cmd, **kw: subprocess.run(cmd, env=env, cwd=REPO, check=True, capture_output=True, text=True, **kw)
    run(str(bindir / "python"), "-m", "pip", "install", "-q", "-r", str(BINDER / "requirements.txt"))
    run("bash", str(BINDER / "postBuild"))

    listing = run(str(bindir / "jupyter"), "labextension", "list")
    text = listing.stdout + listing.stderr
    assert any("tripy-lab" in line and "enabled" in line and "OK" in line for line in text.splitlines()), text

    port = _free_port()
    cmd = [str(bindir / "jupyter"), "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           "--IdentityProvider.token=t", f"--ServerApp.root_dir={REPO}",
           *(["--allow-root"] if os.geteuid() == 0 else [])]  # fmt: skip
    log = open(tmp_path / "lab.log", "w")
    proc = subprocess.Popen(cmd, env=env, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token=t", timeout=1)
                break
            except OSError:
                assert proc.poll() is None, (tmp_path / "lab.log").read_text()
                time.sleep(0.25)
        else:
            raise AssertionError("JupyterLab from the binder venv did not answer")
        # The landing page is the quickstart (postBuild's default_url).
        opener = urllib.request.build_opener(_NoRedirect)
        with pytest.raises(urllib.error.HTTPError) as redirect:
            opener.open(f"{base}/?token=t", timeout=10)
        assert redirect.value.code in (301, 302)
        assert redirect.value.headers["Location"].startswith("/lab/tree/notebooks/01-quickstart.ipynb")
        page = urllib.request.urlopen(f"{base}/lab?token=t", timeout=10).read().decode()
        start = page.index(">", page.index('id="jupyter-config-data"')) + 1
        page_config = json.loads(page[start : page.index("</script>", start)])
        assert "tripy-lab" in {ext["name"] for ext in page_config["federated_extensions"]}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()

    executed = tmp_path / "quickstart-run.ipynb"
    run(str(bindir / "jupyter"), "nbconvert", "--to", "notebook", "--execute",
        "--ExecutePreprocessor.timeout=300", f"--output={executed}", str(REPO / "notebooks" / "01-quickstart.ipynb"))
    nb = json.loads(executed.read_text())
    errors = [out for cell in nb["cells"] for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors, errors
    assert any(cell.get("outputs") for cell in nb["cells"] if cell["cell_type"] == "code")
