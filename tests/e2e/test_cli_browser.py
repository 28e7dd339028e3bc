"""The lab as a user meets it, in Chromium: `tripy-lab` (the README's command, as root too) serving the
tutorials and stopping with no process left; a failing cell's error showing that cell's own line; a build
cancelled while the kernel stays responsive.

Screenshots go to test-results/ (cli-*.png).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e
TIMEOUT = 60_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_readme_command_serves_the_tutorials_and_stops_cleanly(page, tmp_path):
    """`tripy-lab` exactly as the README runs it (no --allow-root: as root the command adds it), plus only
    what a headless test needs (port, loopback, token); SIGTERM then stops JupyterLab and its kernel."""
    psutil = pytest.importorskip("psutil")
    exe = shutil.which("tripy-lab", path=os.path.dirname(sys.executable)) or shutil.which("tripy-lab")
    assert exe, "the tripy-lab console script is not installed (pip install .)"
    port, token = _free_port(), "tripy-cli"
    settings = tmp_path / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    cmd = [exe, "--no-browser", f"--port={port}", "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
           f"--LabApp.workspaces_dir={tmp_path}", f"--LabApp.user_settings_dir={tmp_path / 'settings'}"]
    # As in a checkout (the command finds ./notebooks), but a copy: the lab must not touch the repo's tutorials.
    checkout = tmp_path / "checkout"
    shutil.copytree(Path(__file__).resolve().parents[2] / "notebooks", checkout / "notebooks")
    log = open(tmp_path / "tripy-lab.log", "w")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=checkout)
    base = f"http://127.0.0.1:{port}"
    kids = []
    try:
        for _ in range(240):
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=1):
                    break
            except OSError:
                assert proc.poll() is None, (tmp_path / "tripy-lab.log").read_text()
                time.sleep(0.25)
        else:
            raise AssertionError("tripy-lab did not answer")
        # The lab opens on the quickstart, and its kernel starts.
        page.goto(f"{base}/?token={token}")  # what the browser tripy-lab opens gets: the default URL
        panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
        expect(panel).to_have_count(1, timeout=TIMEOUT)
        expect(page.get_by_role("tab", name=re.compile("01-quickstart"))).to_have_count(1, timeout=TIMEOUT)
        # The status bar: the kernel is up (the README's server does not expose window.jupyterapp).
        expect(page.locator(".jp-StatusBar-Widget")).to_contain_text(re.compile(r"\| Idle"), timeout=TIMEOUT)
        for _ in range(240):
            kids = psutil.Process(proc.pid).children(recursive=True)
            if any("ipykernel" in " ".join(k.cmdline()) for k in kids):
                break
            time.sleep(0.25)
        else:
            raise AssertionError("the quickstart's kernel never started")
        page.screenshot(path=str(_results("cli-1-readme-command.png")))
        server = next(k for k in kids if "jupyterlab" in " ".join(k.cmdline()))
        assert f"--ServerApp.root_dir={checkout / 'notebooks'}" in server.cmdline()
        if os.geteuid() == 0:
            assert "--allow-root" in server.cmdline()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
        log.close()
    assert code == 0, (tmp_path / "tripy-lab.log").read_text()
    _, alive = psutil.wait_procs(kids, timeout=15)
    assert alive == [], [p.cmdline() for p in alive]


def test_the_leak_check_sees_only_this_sessions_processes(own_jupyter_processes):
    """What the session fixture checks: a jupyter-like process started here counts, one without the mark not."""
    ours = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "ipykernel_launcher"])
    env = {k: v for k, v in os.environ.items() if k != "TRIPY_E2E_SESSION"}
    theirs = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "ipykernel_launcher"], env=env)
    try:
        time.sleep(0.2)
        pids = {p.pid for p in own_jupyter_processes()}
        assert ours.pid in pids and theirs.pid not in pids
    finally:
        for proc in (ours, theirs):
            proc.kill()
            proc.wait()
    assert ours.pid not in {p.pid for p in own_jupyter_processes()}


def _results(name: str):
    out = Path(__file__).resolve().parents[2] / "test-results"
    out.mkdir(exist_ok=True)
    return out / name


def _tab(view, name: str):
    return view.locator(".widget-tab .lm-TabBar-tab", has_text=re.compile(rf"^{re.escape(name)}"))


@pytest.fixture
def lab(lab):
    yield lab
    errors = [e for e in lab.page_errors if "ResizeObserver loop" not in e]  # benign browser noise
    assert errors == [], errors


def _open_and_run(lab, name: str, n: int):
    """Open ``name``, run its first ``n`` cells one after the other; the cells' locator."""
    cells = lab.open(name).locator(".jp-Cell")
    for i in range(n):
        lab.run_cell(i)
        expect(cells.nth(i).locator(".jp-InputPrompt")).to_contain_text(f"[{i + 1}]", timeout=TIMEOUT)
    return cells


SETUP = "%load_ext tripy_lab\nimport tripy_lab as tp\ntp.config.engine = 'reference'"


def test_a_failing_cell_shows_its_own_line(lab):
    lab.put_notebook("errors.ipynb", [
        SETUP,
        "%%tpcompile f_exe a=f32[2,3] --no-widgets\ndef f(a):\n    b = a + 1\n    return 3\n",
        "%%tpcompile g_exe a=f32[2,3]\ndef g(a):\n    c = tp.exp(a)\n    return c @ c\n",
    ])
    cells = _open_and_run(lab, "errors.ipynb", 3)

    # Plain output: the error names the cell and the line as the cell shows it (the magic line is line 1).
    error = cells.nth(1).locator(".jp-OutputArea-output")
    expect(error).to_contain_text("Function must return 1 or more Tensors.", timeout=TIMEOUT)
    text = error.inner_text()
    assert "--> In [2], line 4 in f()" in text and re.search(r"^ 4 \|\s+return 3$", text, re.M), text
    assert "interactiveshell" not in text and "tripy_lab/" not in text
    lab.screenshot("cli-2-error-plain.png", cells.nth(1))

    # The widget: the Error tab is selected and names the line; the Trace tab shows the partial trace.
    view = cells.nth(2).locator(".tripy-lab")
    expect(view.locator(".widget-tab .lm-TabBar-tab.lm-mod-current")).to_contain_text("Error", timeout=TIMEOUT)
    pane = view.locator(".tripy-tab-error")
    expect(pane).to_contain_text("Incompatible shapes for matrix multiplication", timeout=TIMEOUT)
    expect(pane).to_contain_text("--> In [3], line 4 in g()")
    expect(pane).to_contain_text("return c @ c")
    lab.screenshot("cli-3-error-tab.png", cells.nth(2))  # the cell: its output view may be re-created
    _tab(view, "Trace").click()
    trace = view.locator(".tripy-tab-trace")
    expect(trace.locator(".tripy-partial-trace")).to_contain_text("In [3], line 4")
    expect(trace.locator("svg g.node").first).to_be_visible(timeout=TIMEOUT)
    expect(trace).to_contain_text("exp")
    lab.screenshot("cli-4-partial-trace.png", cells.nth(2))


SLOW_BUILDS = """import time, tripy_lab.pipeline.stages as stages
_real_build = stages.Lowered.build
def _slow_build(self, *args, **kwargs):
    time.sleep(25)  # a slow engine build (the kind that used to block the kernel)
    return _real_build(self, *args, **kwargs)
stages.Lowered.build = _slow_build"""


def test_a_cancelled_build_leaves_the_widget_ready(lab):
    lab.put_notebook("cancel.ipynb", [
        SETUP,
        "%%tpcompile add_exe a=f32[1:2:3,4] --auto-build-ms 0\ndef add(a):\n    return a + a\n",
        SLOW_BUILDS,
        "print('kernel answers', 6 * 7)",
    ])
    cells = _open_and_run(lab, "cancel.ipynb", 3)
    view = cells.nth(1).locator(".tripy-lab")
    expect(view.locator(".tripy-status-ok")).to_contain_text("add_exe = Executable", timeout=TIMEOUT)

    # A bound edit re-traces and, in the kernel, starts a (now slow) build on its own, off the kernel's event loop
    # (issue 29: every settled edit builds in the background, however long builds take; no "press Build").
    handle = view.locator(".tripy-range .noUi-handle-upper").first
    handle.focus()
    handle.press("ArrowRight")
    status = view.locator(".tripy-status-busy")
    expect(status).to_contain_text(re.compile(r"building… [1-9]\d*\.\d s"), timeout=TIMEOUT)  # elapsed time
    cancel = view.locator(".tripy-cancel")
    expect(cancel).to_be_visible()
    expect(view.locator(".tripy-build")).to_be_disabled()

    # The kernel still runs cells while the engine builds.
    lab.run_cell(3)
    expect(cells.nth(3).locator(".jp-OutputArea-output")).to_contain_text("kernel answers 42", timeout=10_000)
    expect(status).to_be_visible()
    lab.screenshot("cli-5-building.png", cells.nth(1))

    cancel.click()
    expect(view.locator(".tripy-status-stale")).to_contain_text(re.compile(r"build cancelled after \d+\.\d s"),
                                                                timeout=10_000)
    expect(view.locator(".tripy-build")).to_be_enabled()
    expect(cancel).to_be_hidden()
    lab.screenshot("cli-6-cancelled.png", cells.nth(1))

    # Build again, then interrupt the kernel (what Kernel > Interrupt sends): the build stops the same way.
    view.locator(".tripy-build").click()
    expect(status).to_contain_text(re.compile(r"building… [1-9]\d*\.\d s"), timeout=TIMEOUT)
    lab.page.evaluate("() => window.jupyterapp.commands.execute('notebook:interrupt-kernel')")
    expect(view.locator(".tripy-status-stale")).to_contain_text(
        re.compile(r"build interrupted after \d+\.\d s: press Build"), timeout=10_000)
    expect(view.locator(".tripy-build")).to_be_enabled()
