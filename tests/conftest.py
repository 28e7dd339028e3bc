import os

import pytest

import tripy_lab

# Tests choose engines explicitly; eager eval in tests defaults to the reference interpreter. Set in this
# process only (not the environment), so notebooks under nbval run on the user's default engine (xla).
tripy_lab.config.engine = os.environ.get("TRIPY_LAB_ENGINE") or "reference"


@pytest.fixture
def tp():
    import tripy_lab

    return tripy_lab


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.mlir from the current lowering")


def pytest_collection_modifyitems(session, config, items):
    # Playwright's sync API leaves an asyncio loop running on the main thread, and tests that start their
    # own loop (asyncio.run, the lab's debouncer and background builds) fail after it: browser tests go last.
    browser = {id(item) for item in items if "page" in getattr(item, "fixturenames", ())}
    items[:] = [item for item in items if id(item) not in browser] + [item for item in items if id(item) in browser]
    # pytest-xdist (-n 2 --dist loadgroup): the browser tests share one worker, so one JupyterLab serves them all
    # and no asyncio test runs after them in that process; a notebook's cells share one kernel, so one worker.
    for item in items:
        if id(item) in browser:
            item.add_marker(pytest.mark.xdist_group("browser"))
        elif str(item.path).endswith(".ipynb"):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
