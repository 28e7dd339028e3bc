import os

import pytest

# Tests choose engines explicitly; the default engine for eager eval in tests is the reference interpreter.
os.environ.setdefault("TRIPY_LAB_ENGINE", "reference")


@pytest.fixture
def tp():
    import tripy_lab

    return tripy_lab


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.mlir from the current lowering")
