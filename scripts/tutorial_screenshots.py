"""Run All on each tutorial in a real JupyterLab + Chromium and screenshot it (test-results/tutorial-*.png).

    python scripts/tutorial_screenshots.py [--width 1280] [--split 01-quickstart.ipynb] [NOTEBOOK ...]

A look at the tutorials as a reader meets them after Run All (not a test: it asserts nothing but that every cell
ran without an error output). After ``--split``'s notebook (default: tutorial 01) has run, a Markdown file opens
split-right in a 1000 px window, so the notebook gets a ~480 px pane, and each of its lab widgets is shot
there (tutorial-split-W-K.png: widget W, tab K). JupyterLab runs on a copy of notebooks/ in a temporary folder
and stops at the end.
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
CELL_IN_VIEW = ("e => { const r = e.getBoundingClientRect(); return [...e.querySelectorAll('.jp-Cell')].some(c =>"
                " { const b = c.getBoundingClientRect(); return b.height > 0 && b.bottom > r.top + 40"
                " && b.top < r.bottom; }); }")


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def shoot(page, out: Path, stem: str, close_left: bool = True) -> Path:
    """The open notebook at its own width (file browser closed), scrolled 800 px a shot: out/STEM-K.png."""
    page.evaluate("() => { window.jupyterapp.commands.execute('application:toggle-left-area'); return 1; }")
    page.wait_for_timeout(1000)
    scroller = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer").first
    bottom = scroller.evaluate("e => e.scrollHeight - e.clientHeight")  # no blank shot past the last cell
    tops = list(range(0, max(bottom, 0), 800)) + [max(bottom, 0)]
    for k, top in enumerate(tops):
        scroller.evaluate("(e, y) => { e.scrollTop = y; }", top)
        page.wait_for_timeout(700)
        if k and not scroller.evaluate(CELL_IN_VIEW):
            break  # the notebook's space past its last cell
        shot = out / f"{stem}-{k}.png"
        page.screenshot(path=str(shot))
    if close_left:
        page.evaluate("() => { window.jupyterapp.commands.execute('application:toggle-left-area'); return 1; }")
    return shot


def split_shots(page, work: Path, out: Path, width: int) -> None:
    """The current notebook in a ~480 px split pane: each lab widget, one shot per tab."""
    (work / "notes.md").write_text("# Notes\n\nA second document, to split the main area.\n")
    page.set_viewport_size({"width": 1000, "height": 900})
    page.evaluate("() => { window.jupyterapp.commands.execute('docmanager:open', {path: 'notes.md',"
                  " factory: 'Editor', options: {mode: 'split-right'}}); return 1; }")
    page.wait_for_function("() => document.querySelectorAll('.jp-FileEditor').length > 0", timeout=60_000)
    page.wait_for_timeout(1000)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").first
    print(f"split pane: {panel.bounding_box()['width']:.0f} px wide")
    for w, view in enumerate(panel.locator(".jp-OutputArea .tripy-lab").all()):
        tabs = view.locator(".widget-tab > .lm-TabBar .lm-TabBar-tab")
        names = [t.strip() for t in tabs.all_inner_texts()] or [""]
        for k, tab_name in enumerate(names):
            if tab_name:
                tabs.nth(k).click()
                page.wait_for_timeout(800)
                tabs.nth(k).evaluate("e => e.scrollIntoView({block: 'start'})")  # the tab bar at the top
            else:
                view.scroll_into_view_if_needed()
            page.wait_for_timeout(300)
            page.screenshot(path=str(out / f"tutorial-split-{w}-{k}.png"))
    page.evaluate("() => { window.jupyterapp.commands.execute('application:close'); return 1; }")  # notes.md
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_timeout(500)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", help="default: every notebooks/*.ipynb")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--timeout", type=int, default=600, help="seconds per notebook")
    parser.add_argument("--split", default="01-quickstart.ipynb", help="the notebook shot in a narrow split pane"
                        " ('' for none)")
    parser.add_argument("--saved", action="store_true", help="shoot the saved outputs (no kernel, no Run All)")
    parser.add_argument("--out", type=Path, default=ROOT / "test-results", help="default: test-results/")
    args = parser.parse_args(argv)
    names = args.notebooks or sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tripy-shots-"))
    for name in names:
        shutil.copy(ROOT / "notebooks" / name, work / name)
    notif = work / ".settings" / "@jupyterlab" / "apputils-extension"  # no news toast over the shots
    notif.mkdir(parents=True)
    (notif / "notification.jupyterlab-settings").write_text('{"fetchNews": "false", "checkForUpdates": false}')
    tracker = work / ".settings" / "@jupyterlab" / "notebook-extension"  # every cell drawn: no blank shots
    tracker.mkdir(parents=True)
    (tracker / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port = _port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
           f"--IdentityProvider.token={TOKEN}", f"--ServerApp.root_dir={work}", "--LabApp.news_url=None",
           "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={work / '.ws'}",
           f"--LabApp.user_settings_dir={work / '.settings'}"]
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
                if args.saved:
                    page.wait_for_selector(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Cell", timeout=60_000)
                    print(f"{name}: {shoot(page, out, f'saved-{Path(name).stem}')}")
                    continue
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
                shot = shoot(page, out, f"tutorial-{Path(name).stem}", close_left=False)
                if name == args.split:
                    split_shots(page, work, out, args.width)
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
