"""The lab layer: ``%%tpcompile``, the bounds editor, stage tabs, timing tables, compile diffs.

``benchmark``, ``compare`` and ``diff`` work without widgets (pandas is imported when they run).
"""

from tripy_lab.lab.timing import benchmark, compare


def diff(exe_a, exe_b, labels=None, **options):
    """Compare two compiles stage by stage -> ``CompileDiff`` (shown as HTML in a notebook).

    See ``tripy_lab.lab.compile_diff.diff`` for the options (outputs, time, shapes, warmup, iters).
    """
    from tripy_lab.lab.compile_diff import diff as compile_diff

    return compile_diff(exe_a, exe_b, labels, **options)


__all__ = ["benchmark", "compare", "diff"]
