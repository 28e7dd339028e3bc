"""Run All on each tutorial in a real JupyterLab + Chromium and screenshot it (test-results/tutorial-*.png).

    python scripts/tutorial_screenshots.py [--width 1280] [NOTEBOOK ...]

A look at the tutorials as a reader meets them after Run All (not a test: it asserts nothing but that every cell
ran without an error output). JupyterLab runs on a copy of notebooks/ in a temporary folder and stops at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "tripy-shots"


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="default: every notebooks/*.ipynb")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per notebook")
    parser.add_argument("--out", type=Path, default=ROOT / "test-results", help="default: test-results/")
    args = parser.parse_args(argv)
    names = args.notebooks or sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tripy-shots-"))
    for name in names:
        shutil.copy(ROOT / "notebooks" / name, work / name)
    port = _port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={work}", "--LabApp.news_url=None",
           "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={work / '.ws'}"]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    server = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=1)
                break
            except OSError:
                time.sleep(0.25)
        from playwright.sync_api import sync_playwright

        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium",
                                         args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            page = browser.new_page(viewport={"width": args.width, "height": 900})
            for name in names:
                page.goto(f"{base}/lab/tree/{name}?reset&token={TOKEN}")
                page.wait_for_function("() => window.jupyterapp && window.jupyterapp.shell.currentWidget"
                                       " && window.jupyterapp.shell.currentWidget.sessionContext", timeout=60_000)
                page.evaluate("async () => { const w = window.jupyterapp.shell.currentWidget;"
                              " await w.sessionContext.ready; }")
                page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); return 1; }")
                # done: no cell waits ("[*]") and the kernel is idle
                page.wait_for_function(
                    "() => { const w = window.jupyterapp.shell.currentWidget; const k = w.sessionContext.session"
                    " && w.sessionContext.session.kernel; const busy = [...w.node.querySelectorAll("
                    "'.jp-InputPrompt')].some(p => p.textContent.includes('*'));"
                    " return k && k.status === 'idle' && !busy; }", timeout=args.timeout * 1000, polling=1000)
                errors = page.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
                tracebacks = page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']")
                page.evaluate("() => { window.jupyterapp.commands.execute('application:toggle-left-area');"
                              " return 1; }")  # the file browser closed: the notebook's own width
                page.wait_for_timeout(1000)
                scroller = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer").first
                height = scroller.evaluate("e => e.scrollHeight")
                for k, top in enumerate(range(0, height, 800)):
                    scroller.evaluate("(e, y) => { e.scrollTop = y; }", top)
                    page.wait_for_timeout(700)
                    shot = out / f"tutorial-{Path(name).stem}-{k}.png"
                    page.screenshot(path=str(shot))
                page.evaluate("() => { window.jupyterapp.commands.execute('application:toggle-left-area');"
                              " return 1; }")
                n_err = tracebacks.count()
                print(f"{name}: {shot} ({n_err} error outputs, {errors.count()} stderr outputs)")
            browser.close()
    finally:
        server.terminate()
        try:
            server.wait(20)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(work, ignore_errors=True)
    return 0  # a look, not a test (tutorial 03 shows errors on purpose)


if __name__ == "__main__":
    raise SystemExit(main())
