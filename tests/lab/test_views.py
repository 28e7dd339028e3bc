"""Pure view functions: MLIR text/HTML, graph SVG (and its fallback), tables, the sweep plot."""

import html
import re

import pytest

from tripy_lab.lab.views import draw as views


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


PRETTY = """#profile = #tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>
#profile1 = #tensorrt.shape_profile<min = [1], opt = [2], max = [4]>
#map = affine_map<(d0) -> (d0)>
module @m {
  func.func @main(%arg0: tensor<?x4xf32> {tensorrt.shape_profile = #profile}, ARG1) -> tensor<?x4xf32> {
    return %arg0 : tensor<?x4xf32>
  }
}
""".replace("ARG1", "%arg1: tensor<i32> {tensorrt.value_bounds = #profile1}")


def test_inline_aliases_puts_profiles_back_on_their_arguments():
    out = views.inline_aliases(PRETTY)
    assert "tensorrt.shape_profile = #tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>" in out
    assert "tensorrt.value_bounds = #tensorrt.shape_profile<min = [1], opt = [2], max = [4]>" in out
    assert "#profile1 =" not in out and "#profile =" not in out
    assert out.startswith("#map = ")  # other aliases stay


def test_mlir_html_has_line_numbers_and_highlights():
    text = views.inline_aliases(PRETTY)
    markup = views.mlir_html(text, {3})
    lines = re.findall(r'<div class="tripy-mlir-line" data-line="(\d+)" style="([^"]*)"', markup)
    assert [int(n) for n, _ in lines] == list(range(1, len(text.splitlines()) + 1))
    assert "background:#fee2e2" in lines[2][1] and "background" not in lines[1][1]
    plain = text_of(markup)
    assert "tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>" in plain
    assert plain.startswith("1 #map = affine_map")


def test_mlir_lexer_has_no_error_tokens():
    from pygments.token import Error

    tokens = list(views.MlirLexer().get_tokens(PRETTY))
    assert not [t for t in tokens if t[0] is Error]


DOT = "\n".join(['digraph g {', '  "n_t1" [id="op-%t1", label="x"];', '  "n_t2" [shape=box, label="y"];',
                 '  "n_t1" -> "n_t2";', "}"])


def test_add_node_ids_only_where_missing():
    out = views.add_node_ids(DOT.replace("n_t2", "%t2"), ["%t1", "%t2"])
    assert '"%t2" [id="op-%t2", shape=box' in out
    assert out.count('id="op-%t1"') == 1


def test_render_svg_and_fallback(monkeypatch):
    if views.has_dot():
        svg, note = views.render_svg(DOT)
        assert svg.startswith("<svg") and note == ""
        assert 'id="op&#45;%t1"' in svg or 'id="op-%t1"' in svg
    monkeypatch.setattr(views.shutil, "which", lambda name: None)
    svg, note = views.render_svg(DOT)
    assert svg is None and "not installed" in note
    page = views.graph_html(svg, DOT, note)
    assert "apt-get install graphviz" in page and "digraph g" in text_of(page)


def test_layers_frame_columns():
    from tripy_lab.engine.base import LayerRecord

    layer = LayerRecord("fusion_0", "loop fusion", ("%t1", "%t2"), ("cell:2",), ((None, 4),), ("float32",),
                        "fusion.1", (0, 1), "h.3.attn")
    df = views.layers_frame([layer])
    columns = ["layer", "kind", "module", "source ops", "user lines", "shapes", "dtype", "memory", "kernel",
               "mlir ops"]
    assert list(df.columns) == columns
    assert df.iloc[0].to_dict() == {"layer": "fusion_0", "kind": "loop fusion", "module": "h.3.attn",
                                    "source ops": "%t1 %t2",
                                    "user lines": "cell:2", "shapes": "[?, 4]", "dtype": "float32", "memory": "",
                                    "kernel": "fusion.1", "mlir ops": "0,1"}


def test_sweep_svg_marks_opt():
    svg = views.sweep_svg([1, 2, 3], [0.1, 0.2, 0.4], opt_x=2, xlabel="a[0]")
    assert svg.startswith("<svg") and svg.count("<circle") == 3
    assert ">opt</text>" in svg and ">a[0]</text>" in svg
    assert "<svg" in views.sweep_svg([], [])


@pytest.mark.parametrize("kind", ["info", "busy", "error", "ok", "stale"])
def test_status_html(kind):
    assert f"tripy-status-{kind}" in views.status_html("x <y>", kind)
    assert "x &lt;y&gt;" in views.status_html("x <y>", kind)


def test_error_html_names_the_op():
    out = views.error_html("Bad shapes.", ["detail"], "--> cell:3", "%t5")
    assert "Bad shapes." in out and "%t5" in out and "cell:3" in out
