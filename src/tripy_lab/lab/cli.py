"""``tripy-lab``: open JupyterLab on the tutorial notebooks (``notebooks/``), quickstart first."""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

QUICKSTART = "01-quickstart.ipynb"


def find_notebooks(start: Path | None = None) -> Path | None:
    """``notebooks/`` in the current directory or a parent, else next to the source checkout, else a
    copy of the tutorials shipped in the wheel (made once in ``~/tripy-lab-notebooks``, so edits are the user's)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "notebooks").is_dir():
            return folder / "notebooks"
    repo = Path(__file__).resolve().parents[3] / "notebooks"  # src/tripy_lab/lab/cli.py -> repo root
    if repo.is_dir():
        return repo
    packaged = Path(__file__).resolve().parents[1] / "notebooks"  # installed wheel: tripy_lab/notebooks
    if not packaged.is_dir():
        return None
    copy = Path.home() / "tripy-lab-notebooks"
    if not copy.exists():
        shutil.copytree(packaged, copy)
    return copy


def build_command(notebooks: Path, port: int | None = None, browser: bool = True,
                  extra: list[str] | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={notebooks}"]
    if (notebooks / QUICKSTART).exists():
        cmd.append(f"--LabApp.default_url=/lab/tree/{QUICKSTART}")
    if port is not None:
        cmd.append(f"--port={port}")
    if not browser:
        cmd.append("--no-browser")
    return cmd + list(extra or [])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tripy-lab", description=__doc__,
                                     epilog="Other arguments are passed to `jupyter lab`.")
    parser.add_argument("--notebooks", type=Path, help="folder to open (default: the nearest notebooks/)")
    parser.add_argument("--port", type=int, help="port for JupyterLab")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--print-command", action="store_true", help="print the jupyter command and exit")
    args, extra = parser.parse_known_args(argv)
    notebooks = args.notebooks or find_notebooks()
    if notebooks is None or not notebooks.is_dir():
        print("tripy-lab: no notebooks/ folder found here or next to the package; pass --notebooks DIR.",
              file=sys.stderr)
        return 2
    cmd = build_command(notebooks.resolve(), args.port, not args.no_browser, extra)
    if args.print_command:
        print(shlex.join(cmd))
        return 0
    print(f"tripy-lab: opening JupyterLab on {notebooks.resolve()}", file=sys.stderr)
    try:
        return subprocess.call(cmd)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
