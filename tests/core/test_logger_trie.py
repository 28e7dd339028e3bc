"""tp.logger as nvtripy 0.1.7 has it (issue 24 item 10): verbosity reads back as a per-path trie, a file's path
silences that file, and indent() indents after the ``[I]`` prefix."""

import os

import pytest

import tripy_lab as tp

DEFAULT = {"info", "warning", "error"}


@pytest.mark.parametrize("verbosity, expected", [
    ("info", {"": DEFAULT}),
    ({"info", "trace"}, {"": DEFAULT | {"trace"}}),
    ({"frontend": "error"}, {"frontend": {"": {"error"}}, "": DEFAULT}),
    ({"frontend": {"error", "timing"}}, {"frontend": {"": {"error", "timing"}}, "": DEFAULT}),
    ({"frontend/ops_math.py": "verbose", "": "error"},
     {"frontend": {"ops_math": {"": {"verbose"} | DEFAULT}}, "": {"error"}}),
])
def test_verbosity_reads_back_as_a_trie(verbosity, expected):
    assert tp.logger.verbosity == {"": DEFAULT}
    with tp.logger.use_verbosity(verbosity):
        assert tp.logger.verbosity == expected
    assert tp.logger.verbosity == {"": DEFAULT}


def test_per_path_levels_pick_the_longest_prefix():
    with tp.logger.use_verbosity({"frontend": "error", "frontend.ops_math": "verbose"}):
        assert tp.logger.enabled("verbose", "tripy_lab.frontend.ops_math")
        assert not tp.logger.enabled("info", "tripy_lab.frontend.ops_shape")
        assert tp.logger.enabled("info", "tripy_lab.pipeline.compile")


def test_a_file_path_key_silences_that_file(capsys):
    # nvtripy's tests name a file by its path relative to the package, resolved against the working directory
    nvtripy_style = os.path.realpath(os.path.relpath(__file__, tp.__path__[0]))
    for key in (nvtripy_style, __file__):
        with tp.logger.use_verbosity({key: "warning"}):
            tp.logger.info("must not be logged")
            tp.logger.warning("still logged")
    out = capsys.readouterr().out
    assert "must not be logged" not in out and out.count("[W] still logged") == 2
    with tp.logger.use_verbosity({"frontend": "warning"}):  # another path: this file keeps the default
        tp.logger.info("logged here")
    assert "[I] logged here" in capsys.readouterr().out


def test_indent_goes_after_the_prefix(capsys):
    with tp.logger.indent():
        tp.logger.info("indented\nsecond line")
    tp.logger.info("not indented")
    out = capsys.readouterr().out
    assert "[I]     indented\n    second line" in out
    assert "[I] not indented" in out and "    not indented" not in out
