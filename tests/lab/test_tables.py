"""The lab's one table style: unit headers, 3 significant digits, wrapping, full precision kept underneath."""

import math
import re

import numpy as np
import pandas as pd
import pytest

import tripy_lab as tp
from tripy_lab.lab import tables
from tripy_lab.lab.measure import timing
from tripy_lab.lab.views import draw as views


def cells(markup: str) -> list[str]:
    return re.findall(r"<td[^>]*>([^<]*)</td>", markup)


@pytest.mark.parametrize(
    "column, shown",
    [("median_ms", "median (ms)"), ("throughput_per_s", "throughput (1/s)"), ("build_ms", "build (ms)"),
     ("ms", "time (ms)"), ("opt_level", "opt level"), ("max_abs_err", "max abs err"), ("label", "label")],
)
def test_headers_carry_units(column, shown):
    assert tables.header(column) == shown


@pytest.mark.parametrize(
    "value, shown",
    [(50140.393096, "50100"), (9.996, "10.0"), (0.0123456, "0.0123"), (1.5, "1.50"), (123.456, "123"),
     (0.00099, "9.90e-04"), (1e6, "1.00e+06"), (0.0, "0"), (float("nan"), ""), (None, ""), (-2.345, "-2.35")],
)
def test_three_significant_digits(value, shown):
    assert tables.sig3(value) == shown


def test_styled_html_escapes_wraps_and_keeps_whole_numbers():
    df = pd.DataFrame({"label": ["<b>x</b>"], "opt_level": [3.0], "median_ms": [50140.393096], "iters": [10]})
    markup = tables.frame_html(df)
    assert cells(markup) == ["&lt;b&gt;x&lt;/b&gt;", "3", "50100", "10"]
    assert "median (ms)" in markup and "overflow:auto" in markup and "overflow-wrap: break-word" in markup
    assert df["median_ms"][0] == 50140.393096  # display only


@pytest.fixture(scope="module")
def exe():
    info = tp.InputInfo(shape=((1, 2, 4), 3), dtype=tp.float32)
    return tp.compile(lambda a: a * 2.0, args=[info], engine="reference")


def test_benchmark_frames_keep_precision_and_display_styled(exe):
    df = timing.benchmark(exe, ["opt", {"a": (4, 3)}], warmup=0, iters=3)
    assert isinstance(df, pd.DataFrame) and isinstance(df, tables.LabFrame)
    assert list(df["label"]) == ["opt", "a=4x3"]  # filled for explicit shapes too
    raw = df["latency_ms"][0]
    assert isinstance(raw, float) and tables.sig3(raw) != repr(raw)  # the frame keeps every digit
    shown = df._repr_html_()
    assert "latency p50 (ms)" in shown and tables.sig3(raw) in cells(shown)
    assert "latency p50 (ms)" in repr(df) and "latency_ms" in df.columns
    assert isinstance(df[df["iters"] > 0], tables.LabFrame)


def test_timing_tables_show_the_columns_people_read_and_the_method_as_a_footnote(exe):
    df = timing.benchmark(exe, ["min", "opt"], warmup=0, iters=3)
    assert list(df.columns) == timing.COLUMNS  # the frame keeps everything
    for markup in (df._repr_html_(), views.frame_html(df), views.frame_html(df.drop(columns=["error"]))):
        heads = re.findall(r"<th[^>]*>([^<]*)</th>", markup)
        assert heads == ["label", "shape", "compute (ms)", "latency p50 (ms)", "latency p90 (ms)",
                         "throughput (1/s)"], heads
        note = markup[markup.index("tripy-table-note"):]
        assert "compute: CPU: wall time of the interpreter" in note and "engine reference, opt level 3" in note
        assert ".full()" in note
        assert "wall time of the interpreter" not in markup[: markup.index("tripy-table-note")]  # not per row
    text = repr(df)
    assert text.splitlines()[0].split() == ["label", "shape", "compute", "(ms)", "latency", "p50", "(ms)", "latency",
                                            "p90", "(ms)", "throughput", "(1/s)"]
    full = df.full()
    assert isinstance(full, tables.LabFrame) and not isinstance(full, tables.TimingFrame)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", full._repr_html_())
    assert len(heads) == len(timing.COLUMNS) and "compute method" in heads and "iters" in heads


def test_compare_shows_engine_and_build_time_where_they_differ(exe):
    other = tp.compile(lambda a: a * 2.0, args=[tp.InputInfo(shape=((1, 2, 4), 3), dtype=tp.float32)],
                       engine="xla")
    df = timing.compare(("ref", exe), ("fast", other), warmup=0, iters=2)
    heads = re.findall(r"<th[^>]*>([^<]*)</th>", df._repr_html_())
    assert heads[:4] == ["label", "engine", "shape", "build (ms)"], heads
    named = timing.compare(("reference", exe), ("xla", other), warmup=0, iters=2)  # labels name the engines
    assert re.findall(r"<th[^>]*>([^<]*)</th>", named._repr_html_())[:3] == ["label", "shape", "build (ms)"]
    assert "opt level" not in heads and "compute method" not in heads
    note = df._repr_html_().split("tripy-table-note")[1]
    assert "compute (reference): CPU: wall time of the interpreter" in note and "compute (xla): " in note


def test_views_tables_go_through_the_one_style(exe):
    markup = views.frame_html(views.layers_frame(exe.stages["built"].layers))
    assert 'class="tripy-table"' in markup and "tripy-table-box" in markup


def test_sweep_plot_keeps_the_y_title_clear_of_its_ticks():
    for ys in ([0.1, 0.2, 0.4], [1234.5, 50140.4, 99000.0]):
        svg = views.sweep_svg([1, 2, 3], ys, opt_x=2, xlabel="a[0]")
        ticks = re.findall(r"class='tripy-ytick' x='([\d.]+)'[^>]*>([^<]*)<", svg)
        title_x = float(re.search(r"class='tripy-ytitle' x='([\d.]+)'", svg).group(1))
        widest = max(len(t) for _, t in ticks) * 6.6
        assert float(ticks[0][0]) - widest > title_x + 6  # tick labels end right of the title's line
        assert float(ticks[-1][1]) >= max(ys)  # the top tick covers the data
        assert all(math.isfinite(float(t)) for _, t in ticks)
    assert views.nice_ticks(0.37) == [0.0, 0.1, 0.2, 0.3, 0.4]
    assert np.allclose(views.nice_ticks(5014), [0, 2000, 4000, 6000])


def test_long_frames_display_truncated():
    df = tables.LabFrame({"x_ms": np.arange(1000, dtype=float)})
    with pd.option_context("display.max_rows", 20):
        assert cells(df._repr_html_()).__len__() == 20 and "980 more rows" in df._repr_html_()
        assert len(repr(df).splitlines()) < 30
    assert len(df) == 1000
