"""Notebook cells are named by their execution count (``In [5]``) in errors and trace text, also before
``%load_ext tripy_lab``: a reader of tutorial 03 saw ``--> cell, line 3`` and ``# __matmul__ @ cell:5``."""

import sys
import types

from tripy_lab.core import source

CELL_FILE = "/tmp/ipykernel_4242/2716453.py"


def test_a_cell_is_named_by_its_execution_count_in_ipython_without_the_extension(monkeypatch):
    shell = types.SimpleNamespace(compile=types.SimpleNamespace(_filename_map={CELL_FILE: 5}))
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake)
    monkeypatch.setattr(source, "cell_lookup", None)  # %load_ext not run
    loc = source.SourceLocation(CELL_FILE, 3, "project", 11, 16)
    assert loc.short == "In [5]:3"
    assert loc.where == "In [5], line 3"
    assert source.SourceLocation("/x/model.py", 12, "f").short == "model.py:12"


def test_outside_ipython_a_cell_file_is_just_a_cell(monkeypatch):
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: None  # IPython imported, but no shell running
    monkeypatch.setitem(sys.modules, "IPython", fake)
    monkeypatch.setattr(source, "cell_lookup", None)
    assert source.SourceLocation(CELL_FILE, 3, "project").short == "cell:3"
    monkeypatch.delitem(sys.modules, "IPython")
    assert source.SourceLocation(CELL_FILE, 3, "project").where == "cell, line 3"


def test_mlir_locations_name_a_cell_as_the_trace_does(monkeypatch):
    """Tutorial 03's MLIR named the kernel's temp file where its trace said ``In [4]:5``; every re-save of the
    shared notebook changed it."""
    import tripy_lab as tp
    from tripy_lab import pipeline
    from tripy_lab.core.source import SourceLocation

    monkeypatch.setattr(source, "cell_lookup", {CELL_FILE: 4}.get)
    cell = SourceLocation(CELL_FILE, 5, "f", 4, 9)
    module = SourceLocation("/x/model.py", 12, "f", 0, 3)

    def f(x):
        return tp.relu(x) + 1.0

    traced = pipeline.trace(f, args=[tp.InputInfo((2, 3), tp.float32)])
    ops = traced.trace.ops
    for op in ops:
        op.location = cell if op.kind == "add" else module  # a constant is located at its user
    text = traced.lower().as_text(locations=True)
    assert '"In [4]":5:5' in text
    assert '"/x/model.py":12:1' in text
    assert "ipykernel" not in text
    assert "In [4]:5" in str(traced.trace)
