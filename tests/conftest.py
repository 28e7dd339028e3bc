import os

import pytest

import tripy_lab

# Tests choose engines explicitly; eager eval in tests defaults to the reference interpreter. Set in this
# process only (not the environment), so notebooks under nbval run on the user's default engine (xla).
tripy_lab.config.engine = os.environ.get("TRIPY_LAB_ENGINE") or "reference"

# Property tests draw the same examples on every run ("ci", the default), so a red run is a change, not a draw;
# HYPOTHESIS_PROFILE=explore draws new ones (and keeps failures in .hypothesis/) to look for bugs. Two bugs found
# by random draws in CI are explicit @example cases now (test_dot_quoting, test_render_browser).
try:
    from hypothesis import settings as _hypothesis_settings

    _hypothesis_settings.register_profile("ci", derandomize=True, database=None)
    _hypothesis_settings.register_profile("explore")
    _hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # hypothesis is in the test extra; a bare install still collects the rest
    pass


@pytest.fixture
def tp():
    import tripy_lab

    return tripy_lab


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite tests/golden/*.mlir from the current lowering")
