"""The coverage table (docs/coverage.md) is generated from the package and up to date; every Tripy name is
implemented or unsupported with a reason; every engine table has an entry for every MLIR op our lowering emits."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import tripy_lab as tp

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def coverage():
    spec = importlib.util.spec_from_file_location("tripy_lab_coverage_script", ROOT / "scripts" / "coverage.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script runs
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def rows(coverage):
    return coverage.build_rows()


def test_coverage_doc_is_up_to_date(coverage, rows):
    doc = ROOT / "docs" / "coverage.md"
    assert doc.exists(), "docs/coverage.md is missing: run python scripts/coverage.py"
    assert doc.read_text() == coverage.render(rows), "docs/coverage.md is out of date: run python scripts/coverage.py"


def test_every_tripy_name_is_implemented_or_explained(rows):
    missing = [f"{r.name} ({r.status})" for r in rows if r.status.startswith("missing")]
    assert not missing, f"Tripy names neither implemented nor listed as unsupported with a reason: {missing}"
    for r in rows:
        if r.status.startswith("unsupported"):
            assert len(r.status.split(":", 1)[1].strip()) > 20, f"{r.name}: give a reason a user would accept"
    functions = {r.name.split(" ")[0] for r in rows if r.section == "Functions"}
    assert len(functions) == 66  # Tripy's 66 public function names (69 signatures with the overloads)


def test_examples_run_on_the_reference_engine(coverage, rows):
    """Each graph-building row's example evaluates on the reference engine (plugins give the clear error)."""
    for r in rows:
        if r.example is None or not r.status == "implemented":
            continue
        out = r.example(tp)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        if "tensorrt.opaque_plugin" in r.mlir_ops:
            with pytest.raises(tp.TripyException, match="plugins need TensorRT"):
                outs[0].eval()
            continue
        for t in outs:
            assert np.asarray(t.eval()).shape == tuple(t.trace_tensor.shape), r.name


def test_implemented_names_accept_every_nvtripy_parameter(coverage, rows):
    """The parameter check can fail (a stand-in lacking `dtype`), and every checked signature has a row."""
    assert coverage.lacking_params(lambda input: None, ["input", "dtype"]) == ["dtype"]
    assert coverage.lacking_params(lambda *a, **k: None, ["input", "dtype"]) == []
    assert coverage.lacking_params(lambda name, **k: None, ["name", "*modules", "**kwargs"]) == ["*modules"]
    names = {r.name for r in rows}
    assert set(coverage.PARAMS) <= names, sorted(set(coverage.PARAMS) - names)
    lin = next(r for r in rows if r.name == "Linear")
    assert lin.status == "implemented"  # quant_dtype / weight_quant_dim (issue 8)


@pytest.mark.parametrize("engine", ["reference", "xla", "tensorrt", "onnxruntime"])
def test_engine_tables_cover_every_emitted_mlir_op(coverage, rows, engine):
    """Lists the MLIR ops our lowering emits that the engine's table still lacks."""
    table = coverage.engine_tables()[engine]
    lacking = sorted(coverage.emitted_ops(rows) - table)
    assert not lacking, f"the {engine} engine table lacks entries for: {', '.join(lacking)}"


def test_behaviour_section_names_tests_that_exist():
    """Each rule of the behaviour section (issue 24) names our tests as `tests/...py::name` or `::name` (same
    file as the previous one): every one is a test function in that file."""
    import re

    text = (ROOT / "scripts" / "coverage_behaviour.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and "`tests/" in line]
    assert len(rows) >= 17
    for row in rows:
        ours = row.rstrip(" |").rsplit(" | ", 1)[1]
        path = None
        for ref in re.findall(r"`([^`]*::[^`]+)`", ours):
            file, name = ref.split("::")
            path = ROOT / file if file else path
            assert path is not None and path.exists(), ref
            assert re.search(rf"^def {re.escape(name)}\(", path.read_text(), re.M), f"{ref}: no such test"
