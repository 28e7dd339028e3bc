"""The browser tests here reuse tests/e2e's fixtures (a JupyterLab on loopback + Debian's Chromium)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_tripy_e2e_conftest", Path(__file__).parents[1] / "e2e" / "conftest.py")
_e2e = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_e2e)

browser_type_launch_args = _e2e.browser_type_launch_args
browser_context_args = _e2e.browser_context_args
jupyter_server = _e2e.jupyter_server
lab = _e2e.lab
put_notebook = _e2e.put_notebook
RESULTS = _e2e.RESULTS
