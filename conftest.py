"""The whole run's rules (this file also sees the notebooks):

- the tutorials' check that nbval's lax mode leaves out (``--nbval-lax`` re-runs every cell but compares no
  outputs): a cell whose saved output shows something must show something when it runs again;
- how pytest-xdist splits the run (``-n auto`` in pyproject.toml's addopts) and the order it runs in."""

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


def work_unit(nodeid: str) -> str:
    """What pytest-xdist keeps on one worker: all browser tests (one JupyterLab and one Chromium serve them, and no
    asyncio test may run after Playwright in that process), a notebook's cells (they share one kernel); any other
    test is a unit of its own."""
    path = nodeid.split("::", 1)[0]
    if "/e2e/" in path or path.endswith("_browser.py"):
        return "browser"
    return path if path.endswith(".ipynb") else nodeid


@pytest.hookimpl(optionalhook=True)  # a run with -p no:xdist has no such hook
def pytest_xdist_make_scheduler(config, log):
    # xdist's own --dist loadgroup does not group under pytest 9 (it renames ``item._nodeid``, which pytest 9 no
    # longer reads), so the units are cut here, from the node ids the controller sees.
    from xdist.scheduler import LoadScopeScheduling

    class ByWorkUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # the order pytest_collection_modifyitems gives
    return ByWorkUnit(config, log)


def pytest_collection_modifyitems(session, config, items):
    # Order of the run, and of the units pytest-xdist hands out: the notebooks and the tests marked slow (the binder
    # install: minutes of pip and npm) first, as long units started early keep the workers even; the browser tests
    # last (Playwright's sync API leaves an asyncio loop running on the main
    # thread, and tests that start their own loop fail after it).
    for item in items:
        if "page" in getattr(item, "fixturenames", ()) and work_unit(item.nodeid) != "browser":
            # the rule reads paths only (the controller never collects): a browser test elsewhere is an error
            raise pytest.UsageError(f"{item.nodeid} uses the browser: put it under tests/e2e/ or in a *_browser.py "
                                    "file, so pytest-xdist runs it on the browser tests' worker")
    rank = {"browser": 2}

    def first(item) -> bool:
        return item.nodeid.split("::")[0].endswith(".ipynb") or item.get_closest_marker("slow") is not None

    items.sort(key=lambda item: rank.get(work_unit(item.nodeid), 0 if first(item) else 1))
