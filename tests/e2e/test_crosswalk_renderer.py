"""The tripy-lab JupyterLab extension renders the crosswalk bundle in a real JupyterLab + Chromium."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from playwright.sync_api import expect

from tripy_lab.lab.views.crosswalk_schema import MIME_TYPE, validate_bundle

pytestmark = pytest.mark.e2e

DOT = """digraph trace {
  rankdir=TB; node [fontname="monospace"];
  "a" [shape=box]; "b" [shape=box];
  "t5" [id="op-%t5", label="%t5 = add(a, b)"];
  "t6" [id="op-%t6", label="%t6 = relu(%t5)"];
  "t7" [id="op-%t7", label="%t7 = mul(%t6, b)"];
  "a" -> "t5"; "b" -> "t5"; "t5" -> "t6"; "t6" -> "t7"; "b" -> "t7";
}"""


def make_bundle(svg: str | None) -> dict:
    return {
        "version": 1,
        "title": "add_relu_mul",
        "svg": svg,
        "dot": DOT,
        "ops": [
            {"id": "%t5", "label": "%t5 = add(a, b)", "line": "cell:3", "mlir": [1], "layers": ["layer0"]},
            {"id": "%t6", "label": "%t6 = relu(%t5)", "line": "cell:4", "mlir": [2], "layers": ["layer0"]},
            {"id": "%t7", "label": "%t7 = mul(%t6, b)", "line": "cell:5", "mlir": [3], "layers": ["layer1"]},
        ],
        "mlir": [
            {"line": 1, "text": "func.func @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {",
             "op": None},
            {"line": 2, "text": "  %0 = tensorrt.element_wise <kSUM>(%a, %b : ...)", "op": "%t5"},
            {"line": 3, "text": "  %1 = tensorrt.activation {activationType = kRELU} %0", "op": "%t6"},
            {"line": 4, "text": "  %2 = tensorrt.element_wise <kPROD>(%1, %b : ...)", "op": "%t7"},
            {"line": 5, "text": "  return %2 : tensor<4xf32>", "op": None},
            {"line": 6, "text": "}", "op": None},
        ],
        "layers": [
            {"id": "layer0", "name": "fusion.add_relu", "kind": "fusion", "ops": ["%t5", "%t6"],
             "lines": ["cell:3", "cell:4"], "shapes": "[4]", "dtypes": "float32", "kernel": "loop_fusion"},
            {"id": "layer1", "name": "multiply", "kind": "elementwise", "ops": ["%t7"],
             "lines": ["cell:5"], "shapes": "[4]", "dtypes": "float32", "kernel": "multiply"},
        ],
        "error": {"message": "mul: shape mismatch (demo error)", "op": "%t7"},
    }  # fmt: skip


def display_cell(bundle: dict) -> str:
    assert validate_bundle(bundle) == []
    text = json.dumps(bundle)
    return (
        "import json\nfrom IPython.display import display\n"
        f"bundle = json.loads({text!r})\n"
        f"display({{{MIME_TYPE!r}: bundle, 'text/plain': 'crosswalk: ' + bundle['title']}}, raw=True)\n"
    )


def render(lab, name: str, bundle: dict):
    assert "tripy-lab" in {e["name"] for e in lab.page_config()["federated_extensions"]}, (
        "the tripy-lab labextension is not installed: run `pip install .` (see extension/README.md)"
    )
    lab.put_notebook(name, [display_cell(bundle)])
    lab.open(name)
    lab.run_cell(0)
    view = lab.notebook.locator(".jp-OutputArea .tripy-crosswalk")
    expect(view).to_have_count(1, timeout=30_000)
    for pane in ("graph", "mlir", "layers"):
        expect(view.locator(f'[data-tripy-pane="{pane}"]')).to_be_visible()
    return view


def stroke_rgb(locator) -> tuple[int, ...]:
    css = locator.evaluate("el => getComputedStyle(el).stroke")
    return tuple(int(v) for v in re.findall(r"\d+", css)[:3])


@pytest.fixture
def lab(lab):
    yield lab
    errors = [e for e in lab.page_errors if "ResizeObserver loop" not in e]  # benign browser noise
    assert errors == [], errors


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` is not installed")
def test_linked_panes_with_server_svg(lab):
    svg = subprocess.run(["dot", "-Tsvg"], input=DOT, capture_output=True, text=True, check=True).stdout
    view = render(lab, "crosswalk_svg.ipynb", make_bundle(svg))
    graph, mlir, layers = (view.locator(f'[data-tripy-pane="{p}"]') for p in ("graph", "mlir", "layers"))

    expect(graph).to_have_attribute("data-tripy-renderer", "dot")
    expect(graph.locator("svg")).to_have_count(1)
    expect(graph.locator("g.node[data-op-id]")).to_have_count(3)  # a and b are inputs, not ops
    expect(mlir.locator(".tripy-mlir-line")).to_have_count(6)
    expect(mlir.locator(".tripy-mlir-line").first.locator(".tripy-lineno")).to_have_text("1")
    expect(layers.locator("tr.tripy-layer-row")).to_have_count(2)

    # the error op is red in all three panes and its message is shown
    bad = graph.locator('g.node[data-op-id="%t7"]')
    expect(bad).to_have_class(re.compile(r"\btripy-error\b"))
    r, g, b = stroke_rgb(bad.locator("ellipse"))
    assert r > 150 and g < 100 and b < 100, (r, g, b)
    expect(mlir.locator('[data-op-id="%t7"]')).to_have_class(re.compile(r"\btripy-error\b"))
    expect(layers.locator('[data-layer-id="layer1"]')).to_have_class(re.compile(r"\btripy-error\b"))
    expect(view.locator(".tripy-crosswalk-errormsg")).to_contain_text("shape mismatch")
    lab.screenshot("crosswalk-error.png", view)

    # clicking an MLIR line selects its op everywhere
    selected = re.compile(r"\btripy-selected\b")
    mlir.locator('.tripy-mlir-line[data-op-id="%t5"]').click()
    expect(graph.locator('g.node[data-op-id="%t5"]')).to_have_class(selected)
    expect(mlir.locator('.tripy-mlir-line[data-op-id="%t5"]')).to_have_class(selected)
    expect(layers.locator('tr[data-layer-id="layer0"]')).to_have_class(selected)
    expect(view.locator(".tripy-selected")).to_have_count(3)
    expect(view.locator(".tripy-crosswalk-status")).to_contain_text("%t5 = add(a, b)")
    lab.screenshot("crosswalk-selected-mlir.png", view)

    # clicking it again clears the selection
    mlir.locator('.tripy-mlir-line[data-op-id="%t5"]').click()
    expect(view.locator(".tripy-selected")).to_have_count(0)

    # a graph node selects its MLIR line and layer; a fused layer row selects both of its ops
    graph.locator('g.node[data-op-id="%t6"]').click()
    expect(mlir.locator(".tripy-selected")).to_have_attribute("data-line", "3")
    expect(layers.locator(".tripy-selected")).to_have_attribute("data-layer-id", "layer0")
    layers.locator('tr[data-layer-id="layer0"]').click()
    expect(graph.locator("g.node.tripy-selected")).to_have_count(2)
    expect(mlir.locator(".tripy-selected")).to_have_count(2)
    lab.screenshot("crosswalk-selected-layer.png", view)


def test_wasm_graphviz_fallback_when_svg_is_null(lab):
    view = render(lab, "crosswalk_wasm.ipynb", make_bundle(None))
    graph = view.locator('[data-tripy-pane="graph"]')
    expect(graph).to_have_attribute("data-tripy-renderer", "wasm", timeout=30_000)
    expect(graph.locator("svg")).to_have_count(1)
    expect(graph.locator("g.node[data-op-id]")).to_have_count(3)
    expect(graph.locator('g.node[data-op-id="%t7"]')).to_have_class(re.compile(r"\btripy-error\b"))

    graph.locator('g.node[data-op-id="%t5"]').click()
    expect(view.locator('[data-tripy-pane="mlir"] .tripy-selected')).to_have_attribute("data-line", "2")
    expect(view.locator('[data-tripy-pane="layers"] .tripy-selected')).to_have_attribute(
        "data-layer-id", "layer0"
    )
    lab.screenshot("crosswalk-wasm.png", view)


def long_bundle() -> dict:
    """The demo bundle with a long MLIR line, long layer names and a wide graph."""
    bundle = make_bundle(None)
    long_line = "  %3 = tensorrt.element_wise <kSUM>(" + ", ".join(f"%arg{i}" for i in range(40)) + ")"
    bundle["mlir"].insert(4, {"line": 5, "text": long_line, "op": None})
    for i, row in enumerate(bundle["mlir"]):
        row["line"] = i + 1
    bundle["layers"][0]["name"] = "fusion.add_relu_" + "x" * 90
    bundle["layers"][0]["kernel"] = "loop_fusion_kernel_with_a_very_long_name_" * 3
    wide = "".join(f'"w{i}" [id="op-w{i}", label="{"w" * 12}{i}"]; "w{i}" -> "t5";' for i in range(14))
    bundle["dot"] = DOT.replace('"a" -> "t5";', '"a" -> "t5"; ' + wide)
    return bundle


CLIPPED_JS = """(pane) => {
  // text is clipped when a box cuts its content off with no way to scroll or wrap to it
  const body = pane.querySelector('.tripy-pane-body');
  const cells = [...pane.querySelectorAll('.tripy-code, td')];
  const cut = cells.filter(c => c.scrollWidth > c.clientWidth + 1 && getComputedStyle(c).overflowX === 'hidden');
  return {cut: cut.length, bodyScroll: body.scrollWidth - body.clientWidth, overflow: getComputedStyle(body).overflow};
}"""


def test_panes_resize_stack_zoom_and_show_all_text(lab):
    bundle = long_bundle()
    view = render(lab, "crosswalk_layout.ipynb", bundle)
    graph, mlir, layers = (view.locator(f'[data-tripy-pane="{p}"]') for p in ("graph", "mlir", "layers"))
    expect(graph.locator("g.node[data-op-id]")).to_have_count(3, timeout=30_000)

    # MLIR wraps by default: the long line is fully visible without sideways scrolling, nothing cut
    long_row = mlir.locator(".tripy-mlir-line").nth(4)
    assert long_row.bounding_box()["height"] > 2 * mlir.locator(".tripy-mlir-line").first.bounding_box()["height"]
    state = mlir.evaluate(CLIPPED_JS)
    assert state["cut"] == 0 and state["bodyScroll"] <= 1, state
    assert layers.evaluate(CLIPPED_JS)["cut"] == 0
    mlir.get_by_role("button", name="wrap").click()  # unwrapped: one line, reachable by scrolling
    assert mlir.evaluate(CLIPPED_JS)["bodyScroll"] > 50
    mlir.get_by_role("button", name="wrap").click()

    # zoom: readable by default (1:1, or the pane's width but not below 60%); + / Fit / 1:1 resize it
    svg = graph.locator("svg")
    z0 = float(graph.get_attribute("data-tripy-zoom"))
    assert 0.6 <= z0 <= 1.0
    w0 = svg.bounding_box()["width"]
    graph.get_by_role("button", name="+").click()
    assert svg.bounding_box()["width"] > 1.2 * w0
    graph.get_by_role("button", name="1:1").click()
    expect(graph).to_have_attribute("data-tripy-zoom", "1.000")
    graph.get_by_role("button", name="Fit").click()
    body = graph.locator(".tripy-pane-body").bounding_box()
    box = svg.bounding_box()
    assert box["width"] <= body["width"] and box["height"] <= body["height"] + 1
    lab.screenshot("crosswalk-layout-wide.png", view)

    # drag the splitter between MLIR and layers: MLIR gets wider by about the drag
    bar = view.locator(".tripy-splitter").nth(1)
    before = mlir.bounding_box()["width"]
    b = bar.bounding_box()
    lab.page.mouse.move(b["x"] + b["width"] / 2, b["y"] + 20)
    lab.page.mouse.down()
    lab.page.mouse.move(b["x"] + 120, b["y"] + 20, steps=5)
    lab.page.mouse.up()
    assert mlir.bounding_box()["width"] == pytest.approx(before + 120 - b["width"] / 2, abs=12)

    # narrow output: the panes stack, each as wide as the output
    lab.page.set_viewport_size({"width": 700, "height": 900})
    lab.page.wait_for_timeout(300)
    g, m, ly = (p.bounding_box() for p in (graph, mlir, layers))
    assert g["y"] + g["height"] <= m["y"] and m["y"] + m["height"] <= ly["y"]
    out = view.bounding_box()
    for pane in (g, m, ly):
        assert abs(pane["width"] - out["width"]) < 4 and pane["x"] >= out["x"] - 1
    lab.screenshot("crosswalk-layout-narrow.png", view)
