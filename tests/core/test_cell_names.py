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
