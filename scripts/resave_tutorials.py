"""Re-run every tutorial top to bottom in a real kernel and save it with its outputs (the shipped notebooks).

    PYTHONPATH=src python scripts/resave_tutorials.py [NOTEBOOK ...] [--check]

Each notebook runs from notebooks/ (its own folder) in a fresh kernel whose environment keeps nothing of the
author's: HOME is an empty temporary folder (so the cache starts cold and paths read ``~/.cache/...``), no
XDG_* folders, a fixed hash seed, time zone and locale. The lab's ``%%tpcompile`` output is saved as it settles:
its snapshot is re-sent a moment after the last change (``snapshot.SnapshotDisplay``), so after each cell the
script waits, inside the kernel, until no snapshot update is pending. Widget state is not stored: the saved
output shows the static snapshot (the extension's fallback, or the ``text/html`` without it).

Before writing, each notebook must validate (``nbformat.validate``), hold no error output (tutorial 03's cells
that fail on purpose are tagged ``raises-exception``), leak no home, checkout, user or host name
(``leaks``), and stay under 1.5 MB. Files are written atomically; nothing is written if any check fails.
``--check`` runs and checks without writing.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
MAX_BYTES = 1_500_000
KERNEL = "python3"
# Run after a cell in the kernel: wait (letting the kernel's loop run) until no lab snapshot update is pending.
SETTLE = """\
import asyncio as _tl_asyncio, gc as _tl_gc
from tripy_lab.lab.views.snapshot import SnapshotDisplay as _TlSnap
for _tl_i in range(1200):
    await _tl_asyncio.sleep(0.25)
    if not any(isinstance(_tl_o, _TlSnap) and _tl_o.debouncer.pending for _tl_o in _tl_gc.get_objects()):
        break
del _tl_i, _tl_asyncio, _tl_gc, _TlSnap
"""


def clean_env(home: str) -> dict[str, str]:
    """The kernel's environment: the interpreter's PATH and PYTHONPATH, nothing else of the caller's."""
    env = {"HOME": home, "USER": "user", "LOGNAME": "user", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TZ": "UTC",
           "PYTHONHASHSEED": "0", "TMPDIR": "/tmp", "HOSTNAME": "localhost",
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), "/usr/local/bin", "/usr/bin", "/bin"])}
    for name in ("PYTHONPATH", "TRIPY_LAB_ENGINE", "JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def _patterns() -> list[tuple[str, re.Pattern]]:
    pats = [("a home folder", re.compile(r"/root\b|/home/[A-Za-z0-9_.-]+|/Users/[A-Za-z0-9_.-]+|[A-Z]:\\\\Users")),
            ("the checkout", re.compile(re.escape(str(ROOT)))),
            ("a site-packages path", re.compile(r"/[^\s\"']*site-packages/"))]
    words = {getpass.getuser(), socket.gethostname(), socket.getfqdn()} - {"root", "user", "localhost", ""}
    for word in sorted(w for w in words if len(w) >= 4):  # a 2-letter host name would match half the text
        pats.append((f"the name {word!r}", re.compile(rf"(?<![\w.-]){re.escape(word)}(?![\w-])")))
    return pats


def leaks(nb) -> list[str]:
    """Where the saved outputs show the author's home, checkout, user or host name: 'cell N: what: text'."""
    import json

    found = []
    for k, cell in enumerate(nb.cells):
        text = json.dumps(cell.get("outputs", []))
        for what, pat in _patterns():
            m = pat.search(text)
            if m:
                found.append(f"cell {k}: {what}: ...{text[max(0, m.start() - 40):m.end() + 20]}...")
    return found


def errors(nb) -> list[str]:
    """Error outputs in cells not tagged raises-exception."""
    out = []
    for k, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "raises-exception" in cell.metadata.get("tags", []):
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"cell {k}: {o.get('ename')}: {o.get('evalue', '')[:200]}")
    return out


def _has_widget(nb) -> bool:
    return any("application/vnd.jupyter.widget-view+json" in o.get("data", {})
               for c in nb.cells for o in c.get("outputs", []))


def run(path: Path, timeout: int = 900):
    """Execute ``path`` top to bottom from its folder in a clean kernel; returns the executed notebook."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="tutorial-home-") as home:
        client = NotebookClient(nb, timeout=timeout, kernel_name=KERNEL, store_widget_state=False,
                                record_timing=False, resources={"metadata": {"path": str(path.parent)}})
        with client.setup_kernel(env=clean_env(home), cwd=str(path.parent)):
            cells = list(nb.cells)
            for index, cell in enumerate(cells):
                client.execute_cell(cell, index)
                if cell.cell_type == "code" and _has_widget(nb):
                    settle = nbformat.v4.new_code_cell(SETTLE)
                    nb.cells.append(settle)
                    try:
                        client.execute_cell(settle, len(nb.cells) - 1, store_history=False)
                    finally:
                        nb.cells.pop()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nb.metadata.pop("widgets", None)
    return nb


def main(argv: list[str] | None = None) -> int:
    import nbformat

    from tripy_lab.core import files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebooks/*.ipynb")
    parser.add_argument("--check", action="store_true", help="run and check, write nothing")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per cell")
    args = parser.parse_args(argv)
    paths = [p.resolve() for p in args.notebooks] or sorted(NOTEBOOKS.glob("*.ipynb"))
    done, failed = [], []
    for path in paths:
        t0 = time.perf_counter()
        nb = run(path, args.timeout)
        nbformat.validate(nb)
        text = nbformat.writes(nb) + "\n"
        problems = errors(nb) + leaks(nb)
        if len(text.encode()) > MAX_BYTES:
            problems.append(f"{len(text.encode())} bytes, over {MAX_BYTES}")
        secs = time.perf_counter() - t0
        if problems:
            failed.append(path.name)
            print(f"{path.name}: NOT saved ({secs:.0f} s):\n  " + "\n  ".join(problems), file=sys.stderr)
            continue
        done.append((path, text))
        print(f"{path.name}: ran in {secs:.0f} s, {len(text.encode()) / 1e3:.0f} kB, checks passed")
    if failed:
        print(f"not saved (nothing written): {', '.join(failed)}", file=sys.stderr)
        return 1
    if not args.check:
        for path, text in done:
            files.write_atomic(path, text, what="the tutorial")
            print(f"wrote {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
