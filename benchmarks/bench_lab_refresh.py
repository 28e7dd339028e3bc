"""Latency of the lab's fast path: a slider move on a 100-op function -> new Trace graph + MLIR in the tabs.

Drives the real widgets (no browser): sets the max of the range slider, which runs the editor -> model ->
session (trace + lower, no build) -> tab rendering (graphviz SVG + highlighted MLIR). Every move uses
new bounds, so nothing comes from the stage cache. The debounce delay is reported separately: it is
waiting, not work.

    python benchmarks/bench_lab_refresh.py [--moves 40] [--ops 100]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TRIPY_LAB_ENGINE", "reference")

import tripy_lab as tp  # noqa: E402
from tripy_lab.lab import spec as S  # noqa: E402
from tripy_lab.lab.bounds_model import BoundsModel  # noqa: E402
from tripy_lab.lab.session import Session, settings  # noqa: E402
from tripy_lab.lab.widget.bounds_editor import BoundsEditor  # noqa: E402
from tripy_lab.lab.widget.ui import LabWidget  # noqa: E402


def make_func(n_ops: int):
    def chain(x, y):
        for _ in range(n_ops // 2):
            x = tp.relu(x + y)  # 2 trace ops per step
        return x

    return chain


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--moves", type=int, default=40)
    parser.add_argument("--ops", type=int, default=100)
    args = parser.parse_args()

    parsed = S.parse_line("x=f32[n=1:2:8,64] y=f32[n,64]")
    model = BoundsModel.from_values(["x", "y"], {k: v.spec for k, v in parsed.params.items()})
    session = Session(make_func(args.ops), model, exe_name="exe", engine="reference", auto_build_seconds=0.0,
                      debounce_seconds=0.0)
    editor = BoundsEditor(model, on_change=session.schedule)
    ui = LabWidget(session, editor, "bench")
    session.refresh()  # first trace + lower + build (not measured)
    n_ops = len(session.traced.trace.ops)
    row = editor.rows[0]

    totals, trace_ms, lower_ms, graph_ms, mlir_ms = [], [], [], [], []
    for k in range(args.moves):
        new_max = 9 + k  # fresh bounds every time: no cache hits
        start = time.perf_counter()
        row.range.value = (1, new_max)
        totals.append((time.perf_counter() - start) * 1e3)
        assert f"max = [{new_max}, 64]" in session.lowered.as_text(), "the MLIR did not follow the slider"
        trace_ms.append(session.traced.seconds * 1e3)
        lower_ms.append(session.lowered.seconds * 1e3)
        graph_ms.append(ui.render_times["trace"] * 1e3)
        mlir_ms.append(ui.render_times["mlir"] * 1e3)
    assert session.counts["build"] == 1, "the fast path must not build"

    def row_of(name, values):
        return (f"  {name:<28} median {statistics.median(values):7.1f} ms   p10 {percentile(values, 10):7.1f}"
                f"   p90 {percentile(values, 90):7.1f}")

    print(f"lab refresh: {n_ops}-op function, {args.moves} slider moves, graphviz dot: "
          f"{'yes' if __import__('shutil').which('dot') else 'no (text fallback)'}, {os.cpu_count()} cpus")
    print(row_of("slider move -> tabs updated", totals))
    print(row_of("  trace", trace_ms))
    print(row_of("  lower (MLIR)", lower_ms))
    print(row_of("  render Trace tab (dot SVG)", graph_ms))
    print(row_of("  render MLIR tab", mlir_ms))
    print(f"  + debounce wait (not work): {settings.debounce_seconds * 1e3:.0f} ms after the slider is released")
    median = statistics.median(totals)
    print(f"RESULT median {median:.1f} ms ({'<=' if median <= 100 else '>'} 100 ms target)")


if __name__ == "__main__":
    main()
