"""The Engine tab as a reader meets it: no author's home path, cache internals on one line."""

import os

import pytest

import tripy_lab as tp
from tripy_lab.lab.views import tabs

pytest.importorskip("pandas")


def test_the_engine_tab_shows_the_home_directory_as_a_tilde_and_the_cache_on_one_line(monkeypatch, tmp_path):
    home = tmp_path / "home" / "author"
    monkeypatch.setenv("HOME", str(home))
    exe = tp.compile(lambda a: a * 2.0, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)], engine="reference")
    report = exe.stages["built"].report
    monkeypatch.setattr(report, "cache", {"persistent_dir": str(home / ".cache" / "tripy-lab" / "xla"),
                                          "persistent_hits": 3, "persistent_misses": 0, "persistent_rejected": [],
                                          "shapes_built": ["a=2x3", "a=1x3"], "hits": 0})
    monkeypatch.setattr(report, "notes", [f"persistent cache: {home}/.cache/tripy-lab/xla/abc"])
    view = tabs.EngineView.of(exe.stages["built"])
    cache_rows = [(k, v) for k, v in view.info if k.startswith("cache")]
    assert cache_rows == [("cache", "~/.cache/tripy-lab/xla · persistent hits 3, persistent misses 0, "
                                    "shapes built 2, hits 0")]
    page = view.html()
    assert str(home) not in page and "~/.cache/tripy-lab/xla/abc" in page


def test_tilde_leaves_other_paths_alone(monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    assert tabs.tilde("/home/u/.cache/x") == "~/.cache/x"
    assert tabs.tilde("/home/user2/.cache/x") == "/home/user2/.cache/x"
    assert tabs.tilde("/tmp/a") == "/tmp/a" and os.sep == "/"


def test_the_engine_tab_lists_the_compiled_shapes_and_a_warm_up_adds_to_them(tmp_path, monkeypatch):
    pytest.importorskip("jax")
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path / "xla"))
    exe = tp.compile(lambda a: a * 2.0, args=[tp.InputInfo(((1, 2, 8), 3), tp.float32)], engine="xla")

    def compiled():
        rows = dict(tabs.EngineView.of(exe.stages["built"]).info)
        return rows["compiled shapes"].split("; ")

    before = compiled()
    assert "a=2x3" in before and "a=5x3" not in before
    exe.warm([{"a": (5, 3)}], background=False)
    assert compiled() == [*before, "a=5x3"]


def test_the_engine_facts_are_left_aligned_next_to_their_names_in_a_saved_notebook():
    """A saved notebook's snapshot has no lab CSS and JupyterLab right-aligns table cells: each value carries its
    own alignment, so `xla` stays next to `engine` instead of at the far edge of the output."""
    import re

    exe = tp.compile(lambda a: a * 2.0, args=[tp.InputInfo((2, 3), tp.float32)], engine="reference")
    page = tabs.EngineView.of(exe.stages["built"]).html()
    cells = re.findall(r"<th style='text-align:left;padding-right:12px'>[^<]*</th>(<td[^>]*>)", page)
    assert cells and all("text-align:left" in td for td in cells), cells
