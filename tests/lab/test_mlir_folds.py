"""The MLIR tab folds per module (issue 25): the view model (``mlir_folds.folds``), its HTML (live and static, one
rendering through the sanitizer), and the saved snapshot of a compiled module."""

from __future__ import annotations

import re

import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.lab.html import sanitize
from tripy_lab.lab.views import mlir_folds, snapshot, tabs
from tripy_lab.lab.views.limits import Limits


class Block(tp.Module):
    def __init__(self):
        super().__init__()
        self.fc = tp.Linear(8, 8)
        self.proj = tp.Linear(8, 8)

    def forward(self, x):
        return x + self.proj(tp.relu(self.fc(x)))  # the add and relu are the block's own ops


class Net(tp.Module):
    def __init__(self):
        super().__init__()
        self.h = [Block(), Block(), Block()]  # a container of no op of its own: not a level (as the graph)
        self.head = tp.Linear(8, 4)

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return self.head(x)


INFO = tp.InputInfo(((1, 2, 4), 8), tp.float32)


@pytest.fixture(scope="module")
def stages():
    net = Net()
    net.initialize_dummy_parameters()
    traced = pipeline.trace(net, args=[INFO])
    return traced, traced.lower()


@pytest.fixture(scope="module")
def view(stages):
    traced, lowered = stages
    return tabs.stage_views(traced, lowered)["mlir"]


def module_of(traced) -> dict[str, str]:
    return {op.name: op.module for op in traced.trace.ops}


def test_folds_nest_by_module_like_the_graph(stages, view):
    traced, _ = stages
    top = [f.name for f in view.folds]
    assert top == ["h.0", "h.1", "h.2", "head"]  # no "h": the container is lifted, as in the Trace tab
    h1 = view.folds[1]
    assert {c.name for c in h1.children} == {"h.1.fc", "h.1.proj"}
    owner = module_of(traced)
    for fold in (f for top_fold in view.folds for f in top_fold.walk()):
        ops = [op for _, op in view.lines[fold.start:fold.end] if op is not None]
        # the fold's op count is its op lines, every one made by that module or one inside it
        assert fold.n_ops == len(ops) > 0
        assert all(owner[op] == fold.name or owner[op].startswith(fold.name + ".") for op in ops), fold.name
        for child in fold.children:  # children lie inside their parent, in order, without overlap
            assert fold.start <= child.start < child.end <= fold.end
        assert all(a.end <= b.start for a, b in zip(fold.children, fold.children[1:]))
    # every line of a block's own op (its relu, its add) is in that block's fold, none outside
    for k, fold in enumerate(view.folds[:3]):
        mine = [i for i, (_, op) in enumerate(view.lines) if op is not None and owner[op] == f"h.{k}"]
        assert mine and all(fold.start <= i < fold.end for i in mine)


def test_no_model_or_no_modules_means_no_folds(stages):
    traced, lowered = stages
    assert tabs.MlirView.of(lowered).folds == []  # without the trace's graph: the flat listing

    def flat(x):
        return tp.relu(x) + 1.0

    t = pipeline.trace(flat, args=[INFO])
    plain = tabs.stage_views(t, t.lower())["mlir"]
    assert plain.folds == [] and "<details" not in plain.html()


def summaries(markup: str) -> dict[str, str]:
    return dict(re.findall(r'<details class="tripy-mlir-fold" data-module="([^"]+)"[^>]*><summary[^>]*>([^<]*)'
                           "</summary>", markup))


def test_html_is_nested_details_with_path_and_op_count_and_survives_the_sanitizer(view):
    live = sanitize(view.html(tabs.LIVE))
    heads = summaries(live)
    assert list(heads)[:3] == ["h.0", "h.0.fc", "h.0.proj"]  # h.0.fc is inside h.0 (document order)
    assert heads["h.0"].startswith(f"h.0 · {view.folds[0].n_ops} ops · lines {view.folds[0].start + 1}–")
    # nesting: h.0.fc's <details> opens before h.0's closes
    h0 = live.index('<details class="tripy-mlir-fold" data-module="h.0"')
    fc = live.index('<details class="tripy-mlir-fold" data-module="h.0.fc"')
    h1 = live.index('<details class="tripy-mlir-fold" data-module="h.1"')
    assert h0 < fc < h1 and live.count("</details>", h0, h1) == 3  # fc, proj, then h.0 itself
    assert " open" not in live[h0:h0 + 80]  # collapsed at first sight
    # every line is drawn, inside its fold: h.0's lines sit between its summary and h.1's
    lines = re.findall(r'data-line="(\d+)"', live)
    assert [int(n) for n in lines] == list(range(1, len(view.lines) + 1))
    first = view.folds[0].start + 1
    assert h0 < live.index(f'data-line="{first}"') < h1


def test_the_failing_ops_fold_is_open(stages):
    traced, lowered = stages
    owner = module_of(traced)
    printed = {op for _, op in tabs.MlirView.of(lowered).lines}
    op = next(name for name, m in owner.items() if m == "h.1.proj" and name in printed)
    view = tabs.stage_views(traced, lowered, error_op=op)["mlir"]
    markup = view.html()
    opened = re.findall(r'<details class="tripy-mlir-fold" data-module="([^"]+)" open', markup)
    assert opened == ["h.1", "h.1.proj"]


def test_a_cut_keeps_every_fold_and_says_what_is_left_out(view):
    cut = view.folds[1].start - 1  # the snapshot's line limit falls before h.1
    markup = sanitize(view.html(Limits(mlir_lines=cut)))
    assert list(summaries(markup))[:3] == ["h.0", "h.0.fc", "h.0.proj"]
    assert {"h.1", "h.2", "head"} <= set(summaries(markup))  # folds past the cut keep their summary ...
    assert markup.count("lines left out here") >= 3  # ... and say their lines are left out
    assert f'data-line="{cut + 1}"' not in markup and "MLIR elided" in markup


def test_snapshot_and_report_of_a_compiled_module_fold_its_mlir(tmp_path):
    from tripy_lab.lab.cli import reports

    net = Net()
    net.initialize_dummy_parameters()
    exe = tp.compile(net, args=[INFO], engine="reference")
    html = snapshot.snapshot_html("net", snapshot.executable_panes(exe), snapshot.status_of(exe))
    mlir = html[html.index('class="tripy-snapshot-mlir"'):html.index('class="tripy-snapshot-engine"')]
    assert list(summaries(mlir))[:3] == ["h.0", "h.0.fc", "h.0.proj"]
    report = reports.report(exe, tmp_path / "r.html", "net").read_text()
    assert 'data-module="h.2"' in report and "<summary" in report


def test_lines_of_no_op_sit_at_the_level_their_neighbours_share(stages, view):
    model = tabs.TraceView.of(stages[0]).model
    ops = [op for _, op in view.lines]
    h0 = view.folds[0]
    k = h0.start + 1
    inside = mlir_folds.folds([*ops[:k], None, *ops[k:]], model)  # a line of no op within h.0's lines
    assert inside[0].name == "h.0" and inside[0].end == h0.end + 1 and inside[0].n_ops == h0.n_ops
    between = mlir_folds.folds([*ops[:h0.end], None, *ops[h0.end:]], model)  # ... between h.0 and h.1
    assert between[0].end == h0.end and between[1].start == h0.end + 1
    assert [f.name for f in mlir_folds.folds([op for op in ops if op is None], model)] == []


def test_crosswalk_bundle_carries_the_same_folds(stages, view):
    from tripy_lab.lab.views import crosswalk
    from tripy_lab.lab.views.crosswalk_schema import validate_bundle

    traced, lowered = stages
    trace = tabs.TraceView.of(traced)
    bundle = crosswalk.build_bundle(traced, lowered, None, dot=trace.dot, graph=trace.bundle(), model=trace.model)
    assert validate_bundle(bundle) == []
    assert bundle["folds"] == [mlir_folds.to_json(f) for f in view.folds]  # one view model: the tab's folds
    h0 = bundle["folds"][0]
    assert h0["name"] == "h.0" and [c["name"] for c in h0["children"]][:1] == ["h.0.fc"]
    assert all(bundle["mlir"][i]["op"] is None or bundle["mlir"][i]["op"] in
               {o for _, o in view.lines[h0["start"]:h0["end"]]} for i in range(h0["start"], h0["end"]))
    broken = dict(bundle, folds=[{**h0, "end": len(bundle["mlir"]) + 5}])
    assert any("outside" in e for e in validate_bundle(broken))
    nested = dict(bundle, folds=[{**h0, "children": [{**h0["children"][0], "start": h0["start"] - 1}]}])
    assert any(e.startswith("folds[0].children[0]") for e in validate_bundle(nested))
