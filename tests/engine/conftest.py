"""benchmarks/ on the path for the engine tests: bench_onnx.py's nanoGPT (causal attention, MLP, tied embedding) is
the model several of them check, and the benchmark keeps the one copy of it."""

import sys
from pathlib import Path

BENCHMARKS = str(Path(__file__).resolve().parents[2] / "benchmarks")
if BENCHMARKS not in sys.path:
    sys.path.append(BENCHMARKS)  # appended: a benchmark never shadows an installed module
