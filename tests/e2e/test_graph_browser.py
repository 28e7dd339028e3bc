"""The folded trace graph in a real JupyterLab + Chromium, at real-model size (issue 25).

A GPT-2-small-sized tp.Module (random weights, reference engine, a small sequence bound) opens on its top-level
modules; h.0 then h.0.attn open in place; a source line is found by search; a timing run shades the nodes; a
failing matmul is drawn red; a SAM2-style conv/attention stack and a 20,000-op program are drawn folded.
No timings asserted here (benchmarks/bench_lab_scale.py measures them). Screenshots: test-results/graph-*.png.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
SETUP = ("%load_ext tripy_lab\nimport sys\nsys.path.insert(0, {bench!r})\nimport tripy_lab as tp\n"
         "from tripy_lab import lab, pipeline\nimport lab_programs as P\ntp.config.engine = 'reference'")
TIMEOUT = 120_000


@pytest.fixture
def lab(lab):
    yield lab
    errors = [e for e in lab.page_errors if "ResizeObserver loop" not in e]
    assert errors == [], errors


def softmax_line() -> str:
    """``gpt.py:N``: the line of the GPT's softmax call (what the Trace shows as that op's user line)."""
    lines = (BENCH / "gpt.py").read_text().splitlines()
    n = next(i for i, line in enumerate(lines, 1) if "tp.softmax(att" in line)
    return f"gpt.py:{n}"


def node(scope, node_id: str):
    return scope.locator(f'g.node[data-node-id="{node_id}"]')


def tab(view, name: str):
    return view.locator(".widget-tab .lm-TabBar-tab", has_text=re.compile(rf"^{re.escape(name)}"))


def test_gpt_graph_folds_expands_searches_and_shades(lab):
    # xla: the reference interpreter takes seconds per GPT call, too slow for a timing run here
    cells = [SETUP.format(bench=str(BENCH)),
             "model, args = P.gpt_small()\nexe = tp.compile(model, args=args, engine='xla')\nui = lab.show(exe, 'gpt')"]
    lab.put_notebook("graph-gpt.ipynb", cells)
    nb = lab.open("graph-gpt.ipynb")
    lab.run_cell(0)
    lab.run_cell(1)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    graph = view.locator(".tripy-tab-trace [data-tripy-graph]")
    # opens collapsed on the top-level modules
    expect(node(graph, "m:h.0")).to_be_visible(timeout=TIMEOUT)
    for name in ("m:wte", "m:wpe", "m:h.11", "m:ln_f"):
        expect(node(graph, name)).to_have_count(1)
    assert graph.locator("g.node").count() < 60, "the top level is folded"
    # the static picture below is hidden while the live graph draws; the listing stays
    expect(view.locator(".tripy-trace-static .tripy-graph").first).to_be_hidden()
    # taller than the box: the box keeps the stylesheet's height (70vh) and scrolls
    tall = graph.locator(".tripy-graph-body").bounding_box()["height"]
    vh = lab.page.viewport_size["height"]
    assert 0.7 * vh <= tall <= 0.7 * vh + 16, tall  # its content height plus padding and border
    lab.screenshot("graph-gpt-1-collapsed.png", view)

    # h.0, then h.0.attn, open in place (clusters) with their children drawn
    node(graph, "m:h.0").click()
    expect(graph.locator('g.cluster[data-node-id="m:h.0"]')).to_have_count(1, timeout=TIMEOUT)
    expect(node(graph, "m:h.0.attn")).to_be_visible()
    node(graph, "m:h.0.attn").click()
    expect(graph.locator('g.cluster[data-node-id="m:h.0.attn"]')).to_have_count(1, timeout=TIMEOUT)
    expect(node(graph, "m:h.0.attn.c_attn")).to_be_visible()
    expect(graph.locator("[data-tripy-crumbs]")).to_contain_text("h.0 › attn")
    # selecting a node marks its inputs and users
    node(graph, "m:h.0.attn.c_attn").click()
    expect(graph.locator("g.cluster.tripy-selected, g.node.tripy-selected")).not_to_have_count(0)
    lab.screenshot("graph-gpt-2-expanded.png", view)

    # breadcrumbs: back to the top level
    graph.locator(".tripy-crumb", has_text=re.compile("^top$")).click()
    expect(graph.locator("g.cluster")).to_have_count(0, timeout=TIMEOUT)
    expect(node(graph, "m:h.0")).to_be_visible()

    # search by source line: the softmax of the first block is opened and selected
    line = softmax_line()
    box = graph.locator("input[data-tripy-search]")
    box.fill(line)
    box.press("Enter")
    selected = graph.locator("g.node.tripy-selected")
    expect(selected).to_have_count(1, timeout=TIMEOUT)
    expect(selected).to_contain_text(line)
    expect(graph.locator("g.node.tripy-input")).not_to_have_count(0)
    expect(graph.locator("g.node.tripy-user")).not_to_have_count(0)
    # zoom: Fit changes the scale
    before = graph.get_attribute("data-tripy-zoom")
    graph.locator("[data-tripy-zoom-action='Fit']").click()
    expect(graph).not_to_have_attribute("data-tripy-zoom", before or "")
    lab.screenshot("graph-gpt-3-search.png", view)

    # a timing run shades the nodes, with a legend
    tab(view, "Run & time").click()
    view.locator(".tripy-tab-run select").first.select_option("min")
    for k, value in ((1, "0"), (2, "1")):  # warm-up, iterations
        field = view.locator(".tripy-tab-run input").nth(k)
        field.fill(value)
        field.press("Enter")
    view.locator(".tripy-time").click()
    expect(view.locator(".tripy-timing")).to_be_visible(timeout=TIMEOUT)
    tab(view, "Trace").click()
    graph = view.locator(".tripy-tab-trace [data-tripy-graph]")
    expect(graph.locator(".tripy-graph-legend")).to_contain_text("engine time per call", timeout=TIMEOUT)
    expect(node(graph, "m:h.0")).to_contain_text(" ms")
    fill = node(graph, "m:h.0").locator("path, polygon").first.get_attribute("fill")
    assert fill not in (None, "#e0e7ff"), fill  # shaded, not the plain module colour
    lab.screenshot("graph-gpt-4-timing.png", view)

    # the crosswalk draws the same folded graph: selecting h.0.attn selects its MLIR lines and layers
    # the output is re-displayed (its static snapshot updated) once the lab has been quiet for 2 s after the
    # timing run, which re-creates the widget's DOM and drops a selection made before it: let that happen first
    lab.page.wait_for_timeout(4000)
    tab(view, "Crosswalk").click()
    walk = view.locator(".tripy-crosswalk")
    cgraph = walk.locator('[data-tripy-pane="graph"] [data-tripy-graph]')
    node(cgraph, "m:h.0").click()
    node(cgraph, "m:h.0.attn").click()
    expect(walk.locator(".tripy-mlir-line.tripy-selected")).not_to_have_count(0, timeout=TIMEOUT)
    expect(walk.locator("tr.tripy-layer-row.tripy-selected")).not_to_have_count(0)
    expect(walk.locator(".tripy-mlir-region[data-module='h.0']")).to_have_count(1)  # MLIR folds by module
    # ... nested as the MLIR tab (lab/views/mlir_folds.py): h.0's region holds h.0.attn's
    expect(walk.locator(".tripy-mlir-region[data-module='h.0'] > .tripy-mlir-region[data-module='h.0.attn']")
           ).not_to_have_count(0)
    lab.screenshot("graph-gpt-5-crosswalk.png", view)


def test_gpt_mlir_tab_folds_per_module(lab):
    cells = [SETUP.format(bench=str(BENCH)),
             "model, args = P.gpt_small()\nexe = tp.compile(model, args=args)\nui = lab.show(exe, 'gpt')"]
    lab.put_notebook("graph-gpt-mlir.ipynb", cells)
    nb = lab.open("graph-gpt-mlir.ipynb")
    lab.run_cell(0)
    lab.run_cell(1)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    expect(tab(view, "MLIR")).to_be_visible(timeout=TIMEOUT)
    tab(view, "MLIR").click()
    pane = view.locator(".tripy-tab-mlir")
    h0 = pane.locator('details.tripy-mlir-fold[data-module="h.0"]')
    expect(h0).to_have_count(1, timeout=TIMEOUT)
    # the top level is folded: h.0 ... h.11 closed, each summary naming its path and op count
    expect(pane.locator('pre.tripy-mlir > details.tripy-mlir-fold[data-module^="h."]')).to_have_count(12)
    expect(pane.locator("pre.tripy-mlir > details.tripy-mlir-fold[open]")).to_have_count(0)
    head = h0.locator("> summary")
    expect(head).to_contain_text(re.compile(r"^h\.0 · \d+ ops · lines \d+–\d+"))
    inner = h0.locator("> .tripy-mlir-line").first  # a line of h.0's own (its first ones are h.0.attn's)
    expect(inner).to_be_hidden()
    lab.screenshot("graph-gpt-mlir-1-folded.png", pane)

    head.click()  # h.0 opens: its lines, and its own folds (h.0.attn, h.0.mlp) closed inside it
    expect(inner).to_be_visible()
    expect(inner).to_contain_text("tensorrt.")
    attn = h0.locator('> details.tripy-mlir-fold[data-module="h.0.attn"]').first
    expect(attn.locator("> summary")).to_be_visible()
    expect(h0.locator('> details.tripy-mlir-fold[data-module="h.0.mlp"]')).to_have_count(1)
    expect(attn.locator(".tripy-mlir-line").first).to_be_hidden()
    attn.locator("> summary").click()
    expect(attn.locator(".tripy-mlir-line").first).to_be_visible()
    expect(pane.locator('details.tripy-mlir-fold[data-module="h.1"] .tripy-mlir-line').first).to_be_hidden()
    lab.screenshot("graph-gpt-mlir-2-h0-open.png", pane)


def test_failing_matmul_is_drawn_red(lab):
    cells = [SETUP.format(bench=str(BENCH)),
             "%%tpcompile bad_exe x=f32[2,3] w=f32[4,5]\ndef bad(x, w):\n    y = tp.relu(x)\n    return y @ w\n"]
    lab.put_notebook("graph-fail.ipynb", cells)
    nb = lab.open("graph-fail.ipynb")
    lab.run_cell(0)
    lab.run_cell(1)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    expect(tab(view, "Error")).to_contain_text("●", timeout=TIMEOUT)
    tab(view, "Trace").click()
    graph = view.locator(".tripy-tab-trace [data-tripy-graph]")
    failed = node(graph, "failed")
    expect(failed).to_be_visible(timeout=TIMEOUT)
    expect(failed).to_contain_text("matmul")
    expect(failed).to_contain_text("tensor<2x3xf32>")
    expect(failed).to_contain_text(re.compile(r"In \[\d+\]:4"))  # the user's line
    assert "tripy-error" in (failed.get_attribute("class") or "")
    expect(graph.locator(".tripy-graph-errormsg")).to_contain_text("Incompatible shapes")
    # a three-op graph gets a box its size, not the stylesheet's 70vh (most of it was empty)
    body = graph.locator(".tripy-graph-body")
    expect(body).to_have_attribute("style", re.compile(r"height: \d+px"), timeout=TIMEOUT)
    box, drawing = body.bounding_box(), body.locator("svg").bounding_box()
    assert drawing["height"] <= box["height"] <= drawing["height"] + 48, (box, drawing)
    assert box["height"] < 0.7 * lab.page.viewport_size["height"] - 40, box
    lab.screenshot("graph-fail-1-trace.png", view)
    graph.scroll_into_view_if_needed()
    lab.screenshot("graph-fail-2-graph.png", graph)
    # the other tabs say what exists instead of going blank
    tab(view, "MLIR").click()
    expect(view.locator(".tripy-tab-mlir .tripy-missing")).to_contain_text("No MLIR for this program")
    tab(view, "Engine").click()
    expect(view.locator(".tripy-tab-engine .tripy-missing")).to_contain_text("recorded before the error")


def test_sam2_stack_and_20k_ops_drawn_folded(lab):
    cells = [SETUP.format(bench=str(BENCH)),
             "f, args = P.sam2_stack()\nlab.graph(pipeline.trace(f, args=args), title='sam2')",
             "f, args = P.many_ops(20_000)\ntraced = pipeline.trace(f, args=args)\nprint(len(traced.trace.ops))\n"
             "lab.graph(traced, title='long')"]
    lab.put_notebook("graph-scale.ipynb", cells)
    nb = lab.open("graph-scale.ipynb")
    for i in range(3):
        lab.run_cell(i)
    outputs = nb.locator(".jp-Cell .jp-OutputArea")
    sam = outputs.nth(1).locator("[data-tripy-graph]")
    expect(node(sam, "m:stage2.3")).to_be_visible(timeout=TIMEOUT)
    for name in ("m:patch_embed", "m:stage1.0", "m:downsample", "m:neck"):
        expect(node(sam, name)).to_have_count(1)
    node(sam, "m:stage1.0").click()
    expect(node(sam, "m:stage1.0.attn")).to_be_visible(timeout=TIMEOUT)
    sam.evaluate("e => e.scrollIntoView()")
    lab.screenshot("graph-sam2.png")

    long = outputs.nth(2).locator("[data-tripy-graph]")
    expect(outputs.nth(2)).to_contain_text(re.compile(r"2\d{4}"), timeout=TIMEOUT)  # the op count printed
    expect(long.locator("g.node").first).to_be_visible(timeout=TIMEOUT)
    assert long.locator("g.node").count() <= 64, "drawn folded: one level of a few dozen nodes"
    expect(outputs.nth(2)).not_to_contain_text("too many to draw")
    runs = long.locator('g.node[data-node-id^="r:"]')
    runs.first.click()
    expect(long.locator('g.cluster[data-node-id^="r:"]')).to_have_count(1, timeout=TIMEOUT)
    long.evaluate("e => e.scrollIntoView()")
    lab.screenshot("graph-20k.png")


NET = """import tripy_lab as tp
from tripy_lab import lab

class Block(tp.Module):
    def __init__(self):
        super().__init__()
        self.fc = tp.Linear(8, 8)

    def forward(self, x):
        return x + tp.relu(self.fc(x))

class Net(tp.Module):
    def __init__(self):
        super().__init__()
        self.h = [Block(), Block()]

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return x

net = Net()
net.initialize_dummy_parameters()
exe = tp.compile(net, args=[tp.InputInfo(((1, 2, 4), 8), tp.float32)], engine="reference")
ui = lab.show(exe, "net")
ui.display.publish()"""


def test_saved_notebook_folds_its_mlir_untrusted_without_a_kernel(lab):
    """The static snapshot's MLIR folds survive JupyterLab's own sanitizer (an untrusted notebook, no kernel)."""
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(NET)]
    root = Path(lab.server["root"])
    NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=False,
                   resources={"metadata": {"path": str(root)}}).execute()
    nbformat.write(nb, root / "net-folds.ipynb")
    page = lab.page
    page.route("**/api/sessions**", lambda route: route.abort() if route.request.method == "POST"
               else route.continue_())
    page.goto(f"{lab.server['base']}/lab/tree/net-folds.ipynb?reset&token={lab.server['token']}")
    page.get_by_role("dialog").filter(has_text="Error Starting Kernel").get_by_role("button", name="Ok").click(
        timeout=TIMEOUT)
    page.get_by_role("dialog").filter(has_text="Select Kernel").get_by_role("button", name="No Kernel").click(
        timeout=TIMEOUT)
    mlir = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .tripy-snapshot .tripy-snapshot-mlir")
    # JupyterLab's sanitizer keeps <details>, <summary> and classes (it drops data-* attributes)
    tops = mlir.locator("pre.tripy-mlir > details.tripy-mlir-fold")
    expect(tops).to_have_count(2, timeout=TIMEOUT)
    h0 = tops.first
    head = h0.locator("> summary")
    expect(head).to_contain_text(re.compile(r"^h\.0 · \d+ ops · lines \d+–\d+"))
    expect(tops.nth(1).locator("> summary")).to_contain_text(re.compile(r"^h\.1 · "))
    line = h0.locator("> .tripy-mlir-line").first
    expect(line).to_be_hidden()
    head.click()
    expect(line).to_be_visible()
    expect(h0.locator("> details.tripy-mlir-fold > summary")).to_contain_text(re.compile(r"^h\.0\.fc · "))
    lab.screenshot("graph-net-mlir-untrusted.png", mlir)
    # the refused kernel session is the one page error expected here
    lab.page_errors[:] = [e for e in lab.page_errors if "reading 'kernel'" not in e]
