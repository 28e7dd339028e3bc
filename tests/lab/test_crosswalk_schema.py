"""validate_bundle: the contract between the lab's Python side and the crosswalk renderer."""

import copy
import json
import shutil
import subprocess

import pytest

from tripy_lab.lab.views.crosswalk_schema import MIME_TYPE, validate_bundle

DOT = """digraph trace {
  "t5" [id="op-%t5", label="%t5 = add(a, b)"];
  "t6" [id="op-%t6", label="%t6 = relu(%t5)"];
  "a" -> "t5"; "b" -> "t5"; "t5" -> "t6";
}"""
SVG = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<!DOCTYPE svg PUBLIC "-//W3C//DTD SVG 1.1//EN" "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">
<svg xmlns="http://www.w3.org/2000/svg"><g id="graph0" class="graph">
<g id="op&#45;%t5" class="node"><title>t5</title></g>
<g id="op&#45;%t6" class="node"><title>t6</title></g>
<g id="node3" class="node"><title>a</title></g>
</g></svg>"""


def make_bundle():
    return {
        "version": 1,
        "title": "add",
        "svg": None,
        "dot": DOT,
        "ops": [
            {"id": "%t5", "label": "%t5 = add(a, b)", "line": "cell:3", "mlir": [1], "layers": ["layer0"]},
            {"id": "%t6", "label": "%t6 = relu(%t5)", "line": None, "mlir": [2, 3], "layers": ["layer0"]},
        ],
        "mlir": [
            {"line": 1, "text": "func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) {", "op": None},
            {"line": 2, "text": "  %0 = tensorrt.element_wise <kSUM>(%a, %b)", "op": "%t5"},
            {"line": 3, "text": "  %1 = tensorrt.activation {type = kRELU} %0", "op": "%t6"},
            {"line": 4, "text": "  // relu", "op": "%t6"},
            {"line": 5, "text": "}", "op": None},
        ],
        "layers": [
            {
                "id": "layer0",
                "name": "fused add+relu",
                "kind": "fusion",
                "ops": ["%t5", "%t6"],
                "lines": ["cell:3"],
                "shapes": "[2]",
                "dtypes": "float32",
                "kernel": "xla:fusion",
            },
        ],
        "error": None,
    }


def test_mime_type():
    assert MIME_TYPE == "application/vnd.tripy-lab.crosswalk+json"


def test_valid_bundle():
    bundle = make_bundle()
    assert validate_bundle(bundle) == []
    assert validate_bundle(json.loads(json.dumps(bundle))) == []


def test_valid_with_svg_error_and_optional_layer_fields():
    bundle = make_bundle()
    bundle["svg"] = SVG
    bundle["error"] = {"message": "shape mismatch", "op": "%t6"}
    for key in ("lines", "shapes", "dtypes", "kernel"):
        del bundle["layers"][0][key]
    assert validate_bundle(bundle) == []
    bundle["error"] = {"message": "failed before tracing", "op": None}
    assert validate_bundle(bundle) == []


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` is not installed")
def test_real_graphviz_svg_keeps_op_ids():
    bundle = make_bundle()
    bundle["svg"] = subprocess.run(["dot", "-Tsvg"], input=DOT, capture_output=True, text=True).stdout
    assert validate_bundle(bundle) == []


def test_percent_node_names_are_not_enough():
    # graphviz renames nodes named "%..." (anonymous ids), so op nodes need id="op-X"
    bundle = make_bundle()
    bundle["dot"] = 'digraph trace { "%t5"; "%t6"; "%t5" -> "%t6"; }'
    assert validate_bundle(bundle) == ['dot: no node with id="op-%t5"', 'dot: no node with id="op-%t6"']


def test_empty_compile_is_valid():
    bundle = make_bundle()
    bundle.update(ops=[], mlir=[], layers=[])
    assert validate_bundle(bundle) == []


@pytest.mark.parametrize("bundle", [None, [], "x"])
def test_not_an_object(bundle):
    assert validate_bundle(bundle) == [f"bundle: expected an object, got {type(bundle).__name__}"]


def _set(path, value):
    def mutate(b):
        *head, last = path
        target = b
        for key in head:
            target = target[key]
        if value is KeyError:
            del target[last]
        else:
            target[last] = value

    return mutate


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (_set(["version"], 2), "bundle.version: bad value 2"),
        (_set(["dot"], KeyError), "bundle: missing key 'dot'"),
        (_set(["dot"], ""), "bundle.dot: bad value ''"),
        (_set(["svg"], "not svg"), "bundle.svg: bad value 'not svg'"),
        (_set(["ops", 0, "label"], KeyError), "ops[0]: missing key 'label'"),
        (_set(["ops", 0, "mlir"], [1.0]), "ops[0].mlir: bad value [1.0]"),
        (_set(["mlir", 0, "op"], "%t9"), "mlir[0].op: unknown op '%t9'"),
        (_set(["mlir", 4, "line"], "5"), "mlir[4].line: bad value '5'"),
        (_set(["ops", 0, "mlir"], [1, 7]), "op '%t5': mlir index 7 out of range (0..4)"),
        (_set(["ops", 1, "mlir"], [2]), "op '%t6': mlir [2] != its lines [2, 3]"),
        (_set(["ops", 0, "layers"], ["layer9"]), "op '%t5': unknown layer 'layer9'"),
        (
            _set(["ops", 0, "layers"], []),
            "layer 'layer0' lists op '%t5', but that op does not list the layer",
        ),
        (
            _set(["layers", 0, "ops"], ["%t5"]),
            "op '%t6' lists layer 'layer0', but that layer does not list the op",
        ),
        (_set(["layers", 0, "kernel"], 3), "layers[0].kernel: bad value 3"),
        (_set(["error"], {"message": "boom", "op": "%t9"}), "error.op: unknown op '%t9'"),
        (_set(["error"], {"op": "%t5"}), "error: missing key 'message'"),
        (_set(["ops", 1, "id"], "%t5"), "duplicate op id '%t5'"),
        (_set(["svg"], SVG.replace("op&#45;%t6", "node2")), 'svg: no <g class="node" id="op-%t6">'),
        (_set(["svg"], "<svg><g></svg>"), "svg: not well-formed XML"),
    ],
)
def test_invalid(mutate, expected):
    bundle = copy.deepcopy(make_bundle())
    mutate(bundle)
    errors = validate_bundle(bundle)
    assert expected in errors, errors
