"""Checks for the tutorials that nbval's lax mode leaves out (``--nbval-lax`` re-runs every cell but compares no
outputs): a cell whose saved output shows something must show something when it runs again."""

import os

import pytest

LOADGROUP = "TRIPY_TESTS_XDIST_LOADGROUP"
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
    # pytest-xdist (-n 2): the groups set below (the browser tests on one worker with one JupyterLab, a notebook's
    # cells on one kernel) hold only under --dist loadgroup. Workers read --dist from the command line, so the
    # controller tells them through the environment they inherit.
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", "no") in ("no", "load"):
        config.option.dist = "loadgroup"
        os.environ[LOADGROUP] = "1"
    if hasattr(config, "workerinput") and os.environ.get(LOADGROUP) == "1":
        config.option.loadgroup = True


@pytest.hookimpl(tryfirst=True)  # before xdist's worker turns the groups into node ids
def pytest_collection_modifyitems(session, config, items):
    # pytest-xdist (-n 2, loadgroup): the browser tests share one worker, so one JupyterLab serves them all and no
    # asyncio test runs after them in that process (tests/conftest.py puts them last); a notebook's cells share one
    # kernel, so one worker each.
    for item in items:
        group = "browser" if "page" in getattr(item, "fixturenames", ()) else \
            "notebook-" + item.path.stem if str(item.path).endswith(".ipynb") else None
        if group is None:
            continue
        item.add_marker(pytest.mark.xdist_group(group))
