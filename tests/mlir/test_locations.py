"""Scopes carried into the MLIR (issue 25): every op's location names its module path the way MLIR-TensorRT
names ops, ``loc("%t5"("h.1.attn"("file.py":L:C)))`` (the trace op's name stays outermost: engines find origins
by it); ``as_text(locations=True)`` shows them, the default text does not change, and ``from_text`` keeps them."""

import os
import re
import sys

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.pipeline.stages import Lowered

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "core"))
from test_scopes import _SOFTMAX_LINE, GPT  # noqa: E402

_SCOPES_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "core", "test_scopes.py")


def _lowered():
    model = GPT()
    model.initialize_dummy_parameters()
    return pipeline.trace(model, args=[tp.InputInfo(((1, 2, 4),), tp.int32)]).lower()


def test_locations_name_module_paths_and_file_line_col():
    lowered = _lowered()
    text = lowered.as_text(locations=True)
    softmaxes = [ln for ln in text.splitlines() if "tensorrt.softmax" in ln]
    assert len(softmaxes) == 3
    for i, line in enumerate(softmaxes):
        m = re.search(r'loc\("(%t\d+)"\("(h\.\d\.attn)"\("([^"]+)":(\d+):(\d+)\)\)\)$', line)
        assert m, line
        assert m.group(2) == f"h.{i}.attn"
        assert os.path.samefile(m.group(3), _SCOPES_FILE) and int(m.group(4)) == _SOFTMAX_LINE
        assert int(m.group(5)) > 1  # the column of the call, 1-based
    # a Linear's matmul names the Linear, an Embedding's gather the Embedding
    assert re.search(r'tensorrt\.matrix_multiply .* loc\("%t\d+"\("h\.2\.mlp\.1"\(', text)
    assert re.search(r'tensorrt\.gather .* loc\("%t\d+"\("wte"\(', text)
    # the origins carry the module too (the engines' layer tables read it)
    origins = lowered.program.origins
    assert {o.module for o in origins.values()} >= {"wte", "h.0.attn", "h.1.mlp.0", "heads.lm"}


def test_default_text_has_no_locations_and_ops_outside_modules_keep_the_file_loc():
    def f(x):
        return tp.exp(x)

    lowered = pipeline.trace(f, args=[tp.InputInfo((2,), tp.float32)]).lower()
    assert "loc(" not in lowered.as_text()
    (line,) = [ln for ln in lowered.as_text(locations=True).splitlines() if "kEXP" in ln]
    assert re.search(r'loc\("%t\d+"\("[^"]+test_locations\.py":\d+:\d+\)\)$', line), line


def test_from_text_keeps_locations_with_and_without_the_original():
    lowered = _lowered()
    text = lowered.as_text(locations=True, elide=False)
    same = Lowered.from_text(text, like=lowered)
    assert same.as_text(locations=True) == lowered.as_text(locations=True)
    alone = Lowered.from_text(text)
    assert alone.as_text(locations=True) == lowered.as_text(locations=True)
    # without the original, the origins come from the locations themselves
    # (constants are emitted under the location of their first user: only the users' names are on the ops)
    original, parsed = lowered.program.origins, alone.program.origins
    assert len(parsed) > 40 and sum(bool(o.module) for o in parsed.values()) > 40
    for name, origin in parsed.items():
        assert origin.module == original[name].module
        loc, want = origin.location, original[name].location
        assert (loc.file, loc.line, loc.col) == (want.file, want.line, want.col or 0)
    layers = alone.build(engine="reference").layers
    assert {ly.module for ly in layers} >= {"wte", "h.1.attn.c_proj", "heads.lm"}


def test_tutorial_03_prints_the_loc_lines_it_promises():
    import json

    path = os.path.join(os.path.dirname(__file__), "..", "..", "notebooks", "03-debugging-compile-failures.ipynb")
    with open(path) as fh:
        cells = json.load(fh)["cells"]
    printed = ["".join(out.get("text", "")) for cell in cells if cell["cell_type"] == "code"
               and "as_text(locations=True)" in "".join(cell["source"]) for out in cell["outputs"]]
    assert len(printed) == 2
    assert re.search(r'tensorrt\.matrix_multiply +loc\("%t\d+"\("[^"]+":5:\d+\)\)', printed[0]), printed[0]
    assert re.search(r'tensorrt\.matrix_multiply +loc\("%t\d+"\("1\.fc"\("[^"]+":\d+:\d+\)\)\)', printed[1])
