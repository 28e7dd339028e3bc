"""Every frontend test runs on each engine (issues 3 and 4): eager ``.eval()`` uses ``tp.config.engine``.

* ``reference``: the numpy interpreter (the oracle).
* ``xla``: the xla engine as users get it. Eagerly evaluated tensors are built from small constants, which
  the engine folds in numpy while tracing (``xla_ops``' static path); compiled functions run in XLA.
* ``onnxruntime``: the program lowered to ONNX and run by one onnxruntime session (``engine/onnx_*.py``).
* ``xla-traced``: the xla engine with ``xla.FOLD_CONSTANTS = False`` and ``xla.DIRECT_STABLEHLO = False``, so
  the same eager programs are traced through the jax translations (``xla_ops``: the path of programs the
  StableHLO emitter does not take, e.g. fused attention on GPUs) and run by XLA. The ``xla`` param's compiled
  functions take the direct path (``xla_emit_ops``), so every op is checked on both.

The ``engine`` fixture's value is the engine name (``"reference"`` or ``"xla"``). XLA compiles one
executable per eager evaluation, so on the xla params hypothesis runs a fraction of each test's examples
(every test, hence every op and module, still runs on every param). ``TRIPY_LAB_XLA_EXAMPLES=2`` (a factor)
runs more, for a deeper engine-agreement sweep than CI's.
"""

import math
import os

import pytest
from hypothesis import settings

XLA_EXAMPLE_FRACTION = float(os.environ.get("TRIPY_LAB_XLA_EXAMPLES", "0.3"))
MIN_EXAMPLES = 5


def _scale_examples(test, monkeypatch):
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if current is None or not getattr(test, "is_hypothesis_test", False):
        return
    n = max(MIN_EXAMPLES, math.ceil(current.max_examples * XLA_EXAMPLE_FRACTION))
    if n != current.max_examples:
        monkeypatch.setattr(test, "_hypothesis_internal_use_settings", settings(current, max_examples=n))


@pytest.fixture(params=["reference", "xla", "xla-traced", "onnxruntime"], autouse=True)
def engine(request, monkeypatch):
    import tripy_lab as tp

    name = request.param.split("-")[0]
    if name == "xla":
        pytest.importorskip("jax")
        from tripy_lab.engine import xla

        monkeypatch.setattr(xla, "FOLD_CONSTANTS", request.param != "xla-traced")
        monkeypatch.setattr(xla, "DIRECT_STABLEHLO", request.param != "xla-traced")
        _scale_examples(request.function, monkeypatch)
    if name == "onnxruntime":  # one InferenceSession per eager evaluation: a fraction of the examples too
        pytest.importorskip("onnxruntime")
        _scale_examples(request.function, monkeypatch)
    monkeypatch.setattr(tp.config, "engine", name)
    return name
