"""Device memory per engine (issue 29, item 10), each number checked against something the engine did not compute:
numpy's nbytes of the inputs, outputs and module parameters, and the parts of a total adding up to it."""

from __future__ import annotations

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.engine.memory import MemoryUse, array_bytes, fmt_bytes

IN, HIDDEN, OUT = 64, 128, 16


class MLP(tp.Module):
    def __init__(self):
        super().__init__()
        self.l1 = tp.Linear(IN, HIDDEN)
        self.l2 = tp.Linear(HIDDEN, OUT)

    def forward(self, x):
        return self.l2(tp.gelu(self.l1(x)))


@pytest.fixture(scope="module")
def mlp():
    """(traced MLP at x=f32[1:4:8, 64], its parameters' bytes by numpy, an opt input)."""
    rng = np.random.default_rng(0)
    m = MLP()
    params = {k: rng.standard_normal(tuple(v.shape)).astype(np.float32) for k, v in m.state_dict().items()}
    for k, v in params.items():
        m.load_state_dict({k: tp.Tensor(v)}, strict=False)
    traced = pipeline.trace(lambda x: m(x), args=[tp.InputInfo(((1, 4, 8), IN), tp.float32)])
    x = rng.standard_normal((4, IN)).astype(np.float32)
    return traced, sum(v.nbytes for v in params.values()), x


def _build(traced, engine):
    return traced.lower().build(engine)


def test_array_bytes_and_units():
    assert array_bytes((4, 64), "float32") == np.zeros((4, 64), np.float32).nbytes
    assert array_bytes((3,), "int4") == 2 and array_bytes((None, 4), "float32") is None
    assert array_bytes((2,), "no-such-type") is None
    assert [fmt_bytes(n) for n in (512, 41_536, 2_500_000, None)] == ["512 B", "41.5 kB", "2.5 MB", ""]
    use = MemoryUse("opt (x=4x64)", 30, {"weights": 10, "inputs": 20, "temporary": 0}, "test")
    assert use.line() == "opt (x=4x64): 30 B = weights 10 B + inputs 20 B"  # zero parts left out


def test_xla_memory_is_xlas_analysis_split_into_weights_inputs_and_outputs(mlp):
    pytest.importorskip("jax")
    traced, param_bytes, x = mlp
    built = _build(traced, "xla")
    uses = built.memory()
    assert [u.shape.split(" ")[0] for u in uses] == ["opt", "min", "max"]  # one per built signature, opt first
    for use, batch in zip(uses, (4, 1, 8)):
        parts = use.parts
        assert use.sums and use.total == sum(parts.values())
        assert parts["temporary"] >= 0 and parts["generated code"] >= 0
        assert parts["inputs"] == np.zeros((batch, IN), np.float32).nbytes
        assert parts["outputs"] == np.zeros((batch, OUT), np.float32).nbytes
        # the weights: big ones passed as arguments, small ones (the biases) embedded in the HLO
        assert parts["weights"] + parts["embedded constants"] == param_bytes
    out = np.asarray(built.executable()(tp.Tensor(x)))
    assert uses[0].parts["outputs"] == out.nbytes
    # per layer (the opt signature's optimized HLO): every weight read once, the last layer writes the output
    layers = built.layers
    assert sum(ly.weight_bytes for ly in layers) == param_bytes
    assert layers[-1].output_bytes == out.nbytes
    assert all(ly.output_bytes is not None and ly.output_bytes > 0 for ly in layers)
    assert "memory_analysis" in uses[0].source
    assert f"memory at {uses[0].line()}" in built.as_text()  # str(built) says it too


def test_onnxruntime_memory_is_what_onnxruntime_reports(mlp):
    pytest.importorskip("onnxruntime")
    traced, param_bytes, x = mlp
    built = _build(traced, "onnxruntime")
    compiled = built.compiled
    assert compiled.memory(measure=False) == []  # nothing ran yet: nothing measured
    assert all(ly.output_bytes is None for ly in built.layers)
    (use,) = built.memory()
    assert use.shape.startswith("opt (x=4x64)")
    assert use.parts["weights (initializers)"] == param_bytes  # the optimized model's weights, by their dims
    assert use.parts["inputs"] == x.nbytes
    layers = built.layers
    assert use.parts["layer outputs (summed)"] == sum(ly.output_bytes for ly in layers)
    out = compiled.run([x])[0]
    assert layers[-1].output_bytes == out.nbytes  # onnxruntime's output_size of the node writing the result
    if not use.sums:  # this onnxruntime reports its arena: the peak is the total
        assert use.total_name == "arena peak in use" and use.total > 0 and "arena" in use.source


def test_onnxruntime_timing_run_measures_memory_at_its_shapes(mlp):
    pytest.importorskip("onnxruntime")
    traced, _, _ = mlp
    compiled = _build(traced, "onnxruntime").compiled
    x = np.ones((8, IN), np.float32)
    prof = compiled.profile([x], calls=2)
    (use,) = compiled.memory(measure=False)  # from the timing run's profiled session, no other run
    assert use.shape.startswith("max (x=8x64)") and use.parts["inputs"] == x.nbytes
    assert prof.layers[-1].output_bytes == np.zeros((8, OUT), np.float32).nbytes


def test_reference_memory_is_numpy_nbytes_of_every_value(mlp):
    traced, param_bytes, x = mlp
    built = _build(traced, "reference")
    compiled = built.compiled
    assert compiled.memory(measure=False) == []
    (use,) = built.memory()
    assert use.total == sum(use.parts.values()) and use.shape.startswith("opt (x=4x64)")
    assert use.parts["inputs"] == x.nbytes
    layers = built.layers
    constants = [ly for ly in layers if ly.kind == "constant"]
    assert use.parts["weights (constants)"] == sum(ly.weight_bytes for ly in constants)
    assert use.parts["weights (constants)"] >= param_bytes  # the parameters, and the shapes reshapes read
    assert use.parts["op outputs"] == sum(ly.output_bytes for ly in layers)
    for ly in layers:  # a static result's bytes: its shape and dtype, as numpy counts them
        if ly.kind != "constant" and all(d is not None for s in ly.output_shapes for d in s):
            assert ly.output_bytes == sum(np.zeros(s, np.dtype(d)).nbytes
                                          for s, d in zip(ly.output_shapes, ly.output_dtypes)), ly.name
    out = compiled.run([x])[0]
    assert layers[-1].output_bytes == out.nbytes


def test_engines_agree_on_the_weights(mlp):
    pytest.importorskip("jax")
    pytest.importorskip("onnxruntime")
    traced, param_bytes, _ = mlp
    xla = _build(traced, "xla")
    ort = _build(traced, "onnxruntime")
    xla_weights = sum(ly.weight_bytes for ly in xla.layers)
    assert xla_weights == ort.memory()[0].parts["weights (initializers)"] == param_bytes


def test_layer_records_carry_memory_in_their_dict(mlp):
    pytest.importorskip("jax")
    row = _build(mlp[0], "xla").layers[0].as_dict()
    assert row["output_bytes"] > 0 and row["weight_bytes"] >= 0


@pytest.mark.parametrize("engine", ["reference", "xla", "onnxruntime"])
def test_memory_with_a_dimension_input(engine):
    pytest.importorskip({"xla": "jax", "onnxruntime": "onnxruntime"}.get(engine, "numpy"))
    f = lambda x, s: tp.reshape(x, (-1, s)) * 2.0  # noqa: E731
    args = [tp.InputInfo(((1, 2, 4), 6), tp.float32), tp.DimensionInputInfo((1, 2, 3))]
    built = pipeline.trace(f, args=args).lower().build(engine)
    use = built.memory()[0]
    assert use.shape == "opt (x=2x6, s=2)"
    x_bytes = np.zeros((2, 6), np.float32).nbytes
    # xla compiles s into the executable (a static value); the others take it as an int32 scalar argument
    assert use.parts["inputs"] == x_bytes + (0 if engine == "xla" else 4)
    out_bytes = np.zeros((6, 2), np.float32).nbytes
    assert built.layers[-1].output_bytes == out_bytes


def test_onnxruntime_without_arena_statistics_sums_its_parts():
    pytest.importorskip("onnxruntime")
    from tripy_lab.engine.onnx.memory import memory_use, node_memory

    events = [{"cat": "Session", "name": "model_run", "ts": 100, "dur": 50},
              {"cat": "Node", "name": "a_kernel_time", "ts": 110, "dur": 5,
               "args": {"output_size": "2048", "parameter_size": "512", "activation_size": "1024"}},
              {"cat": "Node", "name": "b_kernel_time", "ts": 120, "dur": 5, "args": {"output_size": "256"}},
              {"cat": "Node", "name": "a_kernel_time", "ts": 10, "dur": 5, "args": {"output_size": "9"}}]  # earlier run
    measured = node_memory(events)
    assert measured == {"nodes": {"a": {"output_size": 2048, "activation_size": 1024, "parameter_size": 512},
                                  "b": {"output_size": 256}}, "peak": None, "held": None}
    use = memory_use(measured, "opt (x=4x64)", weights=100, inputs=10)
    assert use.sums and use.total == 100 + 10 + 2048 + 256 == sum(use.parts.values())
    assert "no arena statistics" in use.source
