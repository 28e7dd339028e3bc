"""The lab layer: ``%%tpcompile``, the bounds editor, stage tabs, timing tables, compile diffs, snapshots
and reports.

``benchmark``, ``compare`` and ``diff`` work without widgets, ``profile`` gives the time per layer
(pandas is imported when they run). ``show(exe)`` displays the ``%%tpcompile`` view of an Executable;
``tune(f, args, space)`` sweeps build configs (here or on Dask); ``report(exe, path)`` and
``report_notebook(ipynb, path)`` write stand-alone HTML files (modules ``reports`` and ``tuning``: a submodule
named ``report`` or ``tune`` would replace that function on this package once imported).
"""

from tripy_lab.lab.measure.layer_time import profile
from tripy_lab.lab.measure.timing import benchmark, compare


def diff(exe_a, exe_b, labels=None, **options):
    """Compare two compiles stage by stage -> ``CompileDiff`` (shown as HTML in a notebook).

    See ``tripy_lab.lab.views.compile_diff.diff`` for the options (outputs, time, shapes, warmup, iters).
    """
    from tripy_lab.lab.views.compile_diff import diff as compile_diff

    return compile_diff(exe_a, exe_b, labels, **options)


def accuracy(exe, *args, against="reference", rtol=None, atol=None, max_bytes=None):
    """Per-op accuracy of ``exe`` on ``args`` against the float64 reference (or an engine, or another
    Executable) -> ``AccuracyReport`` (``first_divergent``, ``table()``, ``subgraph()``); see
    ``tripy_lab.lab.measure.accuracy_report``."""
    from tripy_lab.lab.measure.accuracy_report import accuracy as _accuracy

    return _accuracy(exe, *args, against=against, rtol=rtol, atol=atol, max_bytes=max_bytes)


def accuracy_sweep(func, args, variants=("float16",), **options):
    """Compile ``func`` at each precision variant ("float16", "bfloat16", "int8", ...) and compare each, op
    by op, with the fp32 program in the float64 reference -> ``SweepReport``."""
    from tripy_lab.lab.measure.accuracy_sweeps import accuracy_sweep as _sweep

    return _sweep(func, args, variants, **options)


def show(exe, name: str = "exe"):
    """Display ``exe`` as the lab widget with its static snapshot (one output); returns the LabWidget."""
    from tripy_lab.lab.widget.ui import show as _show

    return _show(exe, name)


def graph(obj, overlay=None, title: str = ""):
    """Display the folded trace graph of ``obj`` (an Executable, a ``Traced``, or a failed trace's exception)
    with ``overlay`` (``Overlay(title, {op name: value})``: node shading); returns its TraceView."""
    from tripy_lab.lab.views.trace_pane import show_graph

    return show_graph(obj, overlay, title)


def Overlay(title: str, values: dict, unit: str = "", aggregate: str = "sum"):  # noqa: N802 - a class to callers
    """Per-trace-op values drawn as node shading on the trace graph (``graph``, ``LabWidget.set_overlay``):
    ``values`` maps op names (``"%t5"``) to numbers; folded groups show the ``"sum"`` or ``"max"`` of theirs."""
    from tripy_lab.lab.views.graph_draw import Overlay as _Overlay

    return _Overlay(title, dict(values), unit, aggregate)


def report(exe, path, name: str | None = None, force: bool = False, footer: str | None = None):
    """Write every stage of ``exe`` to one self-contained HTML file; returns its Path. Its title names the program
    (function or module, and its file); ``name`` (e.g. the variable) heads the section, ``footer`` ends it.

    An existing file at ``path`` is replaced only if it is an earlier report (or ``force``)."""
    from tripy_lab.lab.cli.reports import report as _report

    return _report(exe, path, name, force=force, footer=footer)


def tune(func_or_module, args, space, **options):
    """Build, check against fp32 and time every config of ``space``, here or on a Dask cluster -> ``TuneResult``.

    See ``tripy_lab.lab.tuning.tune`` for the space, the accuracy gate, ``client=`` and ``wait=``.
    """
    from tripy_lab.lab.tuning import tune as _tune

    return _tune(func_or_module, args, space, **options)


def report_notebook(ipynb_path, out_path, force: bool = False):
    """Write every stage of every compile stored in a saved notebook to one self-contained HTML file.

    Never over the notebook; an existing ``out_path`` only if it is an earlier report (or ``force``)."""
    from tripy_lab.lab.cli.reports import report_notebook as _report_notebook

    return _report_notebook(ipynb_path, out_path, force=force)


__all__ = ["Overlay", "accuracy", "accuracy_sweep", "benchmark", "compare", "diff", "graph", "profile", "report",
           "report_notebook", "show", "tune"]
