"""tp.logger: tripy's verbosity levels; `trace`, `mlir` and `timing` print those stages of a compile."""

import pytest

import tripy_lab as tp


def test_stage_levels_print_the_stages(capsys):
    with tp.logger.use_verbosity({"trace", "mlir", "timing"}):
        tp.compile(lambda a: tp.exp(a), args=[tp.InputInfo((2,), tp.float32)])
    out = capsys.readouterr().out
    assert "==== Trace IR ====" in out and "= exp(a" in out
    assert "==== MLIR ====" in out and "tensorrt.unary {unaryOperation = #tensorrt.unary_operation<kEXP>}" in out
    assert "==== Timing ====" in out and "build (" in out


def test_default_is_info_and_levels_imply_lower_ones(capsys):
    assert tp.logger.verbosity == {"": {"info", "warning", "error"}}  # nvtripy's trie (issue 24 item 10)
    tp.compile(lambda a: a + a, args=[tp.InputInfo((2,), tp.float32)])
    assert capsys.readouterr().out == ""
    with tp.logger.use_verbosity("verbose"):
        assert tp.logger.enabled("info") and tp.logger.enabled("warning")
        tp.logger.verbose("hello")
        tp.logger.log("once", "info", mode="once")
        tp.logger.log("once", "info", mode="once")
    out = capsys.readouterr().out
    assert out.count("[I] once") == 1 and "[V] hello" in out
    with pytest.raises(ValueError, match="Unknown verbosity"):
        tp.logger.verbosity = "loud"
