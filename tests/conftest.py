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
    # pytest-xdist groups: the root conftest.py (it also sees the notebooks when tests/ is not collected)
