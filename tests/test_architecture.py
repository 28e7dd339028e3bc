"""The layering rules: imports point down (import-linter), and `import tripy_lab` stays light."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint), "--no-cache", str(ROOT / "pyproject.toml")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Contracts: 4 kept, 0 broken" in proc.stdout


def test_import_tripy_lab_is_light():
    code = ("import sys, tripy_lab\n"
            "heavy = [m for m in ('jax', 'jaxlib', 'IPython', 'ipywidgets', 'pandas', 'graphviz', 'tensorrt', "
            "'onnx', 'onnxruntime') "
            "if m in sys.modules]\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"import tripy_lab imported: {out}"


def test_every_op_has_an_entry_in_every_stage_table():
    from tripy_lab.engine.reference.ops import TABLE as REFERENCE
    from tripy_lab.mlir.lowering import LOWERING
    from tripy_lab.trace import OPS

    assert set(OPS) == set(LOWERING), set(OPS) ^ set(LOWERING)
    emitted = {f"tensorrt.{row.tensorrt_op}" for row in OPS.values()}
    emitted |= {"tensorrt.cast", "tensorrt.shape", "tensorrt.collapse_rank"}  # helpers the lowering also emits
    assert emitted <= set(REFERENCE), emitted - set(REFERENCE)


def test_ruff_is_clean():
    ruff = Path(sys.executable).parent / "ruff"
    proc = subprocess.run([str(ruff), "check", "src", "tests", "benchmarks", "scripts"], capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
