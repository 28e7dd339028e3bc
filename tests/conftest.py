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
