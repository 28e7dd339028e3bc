"""Checks for the tutorials that nbval's lax mode leaves out (``--nbval-lax`` re-runs every cell but compares no
outputs): a cell whose saved output shows something must show something when it runs again."""

import pytest

pytest_plugins = ["pytester"]  # tests/test_tutorial_outputs.py runs this check on a small notebook


def _shown(outputs) -> list:
    """Outputs a reader sees: text on a stream, a display or a result with data (not an empty stream)."""
    seen = []
    for out in outputs or ():
        kind = out.get("output_type")
        if kind == "stream" and str(out.get("text", "")).strip():
            seen.append(out)
        elif kind in ("display_data", "execute_result") and out.get("data"):
            seen.append(out)
        elif kind == "error":
            seen.append(out)
    return seen


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    cell, outs = getattr(item, "cell", None), getattr(item, "test_outputs", None)
    if cell is not None and outs is not None and _shown(cell.get("outputs")) and not _shown(outs):
        source = "".join(cell.get("source", ""))[:200]
        raise AssertionError(f"this tutorial cell showed output when it was saved and shows nothing now:\n{source}")
    return result


def pytest_configure(config):
    # pytest-xdist (-n 2): the groups set in tests/conftest.py (the browser tests on one worker with one
    # JupyterLab, a notebook's cells on one kernel) hold only under --dist loadgroup
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", "no") in ("no", "load"):
        config.option.dist = "loadgroup"
