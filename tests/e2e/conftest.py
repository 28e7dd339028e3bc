"""Real-browser fixtures: a JupyterLab server on loopback and Debian's Chromium (no playwright download).

Tests use the ``lab`` fixture (a ``Lab``: server + pytest-playwright ``page``)::

    lab.put_notebook("x.ipynb", ["print(1)"])
    nb = lab.open("x.ipynb")        # fresh workspace, waits for a connected, idle kernel
    lab.run_cell(0)                 # Shift+Enter in cell 0
    lab.screenshot("x.png")         # -> test-results/x.png

Helpers are fixtures, not imports, so other conftest.py files cannot shadow them.
``TRIPY_CHROMIUM`` overrides the browser binary (default: ``chromium`` on PATH, /usr/bin/chromium).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

SESSION_MARK = "TRIPY_E2E_SESSION"  # in the environment of every process this test session starts
CHROMIUM = os.environ.get("TRIPY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
TOKEN = "tripy-e2e"
RESULTS = Path(__file__).resolve().parents[2] / "test-results"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _jupyter_processes(mark: str) -> list:
    """Live jupyter/ipykernel processes whose environment carries ``mark`` (started by this session)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(proc.info["cmdline"] or [])
            if ("jupyter" in cmd or "ipykernel" in cmd or "tripy-lab" in cmd) and \
                    proc.environ().get(SESSION_MARK) == mark:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def no_process_left_behind():
    """The e2e suite leaves no jupyter/ipykernel process behind: only the ones it started are checked (they
    carry a mark in their environment), so other people's servers on a shared machine do not count."""
    psutil = pytest.importorskip("psutil")
    mark = f"{os.getpid()}-{time.time_ns()}"
    os.environ[SESSION_MARK] = mark
    yield mark
    left = _jupyter_processes(mark)
    _, left = psutil.wait_procs(left, timeout=15)  # a server's kernels take a moment to shut down
    for proc in left:
        proc.kill()
    assert not left, "e2e tests left processes behind: " + "; ".join(" ".join(p.cmdline()) for p in left)


@pytest.fixture
def own_jupyter_processes(no_process_left_behind):
    """``own_jupyter_processes()``: the live jupyter/ipykernel processes this session started."""
    return lambda: _jupyter_processes(no_process_left_behind)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    # pytest-playwright hook: Debian's chromium instead of a downloaded build
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-quic",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="session")
def browser_context_args(browser_context_args):
    return {**browser_context_args, "viewport": {"width": 1280, "height": 900}}


@pytest.fixture(scope="session")
def jupyter_server(tmp_path_factory):
    """A headless JupyterLab on 127.0.0.1 with isolated settings (no news toast) and workspaces."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    root = tmp_path_factory.mktemp("nbroot")
    settings = tmp_path_factory.mktemp("lab-settings")
    notif = settings / "@jupyterlab" / "apputils-extension"
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    workspaces = tmp_path_factory.mktemp("lab-workspaces")
    port = _free_port()
    log_path = root.parent / "jupyter-server.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={root}",
        "--LabApp.extension_manager=readonly", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",
        f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={workspaces}",
    ]  # fmt: skip
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=1)
                break
            except Exception:
                if proc.poll() is not None:
                    raise RuntimeError(f"jupyter lab exited early; see {log_path}") from None
                time.sleep(0.25)
        else:
            raise RuntimeError(f"jupyter lab did not start; see {log_path}")
        yield {"base": base, "token": TOKEN, "root": root, "log": log_path}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def lab_page_config(server) -> dict:
    """The lab's page config (``jupyter-config-data``), e.g. to list the federated extensions."""
    html = urllib.request.urlopen(f"{server['base']}/lab?token={server['token']}", timeout=10).read()
    text = html.decode()
    start = text.index('id="jupyter-config-data"')
    start = text.index(">", start) + 1
    return json.loads(text[start : text.index("</script>", start)])


def put_notebook(server, name: str, cells: list[str]) -> None:
    nb = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
        },
        "cells": [
            {"cell_type": "code", "metadata": {}, "source": c, "outputs": [], "execution_count": None,
             "id": f"c{i}"}
            for i, c in enumerate(cells)
        ],
    }  # fmt: skip
    (Path(server["root"]) / name).write_text(json.dumps(nb))


WAIT_KERNEL_JS = """
async () => {
  const w = window.jupyterapp.shell.currentWidget;
  await w.context.ready;
  await w.sessionContext.ready;
  for (let i = 0; i < 600; i++) {
    const k = w.sessionContext.session && w.sessionContext.session.kernel;
    if (k && k.connectionStatus === 'connected' && k.status === 'idle') return true;
    await new Promise(r => setTimeout(r, 100));
  }
  return false;
}
"""


def wait_kernel_ready(page, timeout: int = 60_000) -> None:
    # "Idle" can show before the kernel exists, and Shift+Enter then runs nothing.
    page.wait_for_function(
        "() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
        " && window.jupyterapp.shell.currentWidget.sessionContext",
        timeout=timeout,
    )
    assert page.evaluate(WAIT_KERNEL_JS), "kernel never became connected+idle"


def open_notebook(page, server, name: str):
    """Open ``name`` with a fresh workspace (``?reset``); return the visible notebook panel locator."""
    page.goto(f"{server['base']}/lab/tree/{name}?reset&token={server['token']}")
    wait_kernel_ready(page)
    return page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")


def screenshot(page_or_locator, name: str) -> Path:
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / name
    page_or_locator.screenshot(path=str(path))
    return path


class Lab:
    """One test's handle on the session's JupyterLab and its own browser page."""

    def __init__(self, server, page):
        self.server, self.page = server, page
        self.page_errors: list[str] = []
        page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))

    def page_config(self) -> dict:
        return lab_page_config(self.server)

    def put_notebook(self, name: str, cells: list[str]) -> None:
        put_notebook(self.server, name, cells)

    def open(self, name: str):
        self.notebook = open_notebook(self.page, self.server, name)
        return self.notebook

    def run_cell(self, index: int) -> None:
        self.notebook.locator(".jp-Cell .jp-InputArea-editor").nth(index).click()
        self.page.keyboard.press("Shift+Enter")

    def screenshot(self, name: str, locator=None) -> Path:
        return screenshot(locator or self.page, name)


@pytest.fixture
def lab(jupyter_server, page):
    return Lab(jupyter_server, page)
