"""compile(): kwargs, containers of InputInfos, large constants, DLPack producers, eager eval on the pipeline."""

import inspect

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.mlir import text as mlir_text


def test_kwargs_and_keyword_only_parameters():
    def f(x, *, scale, bias=None):
        return x * scale + bias

    exe = tp.compile(f, args=[tp.InputInfo((2,), tp.float32)],
                     kwargs={"scale": tp.InputInfo((2,), tp.float32), "bias": tp.Tensor([1.0, 1.0])})
    assert list(inspect.signature(exe).parameters) == ["x", "scale"]
    out = exe(tp.Tensor([1.0, 2.0]), scale=tp.Tensor([3.0, 3.0]))
    assert np.asarray(out).tolist() == [4.0, 7.0]


def test_container_of_input_infos_is_flattened():
    def f(pair, table):
        return pair[0] + pair[1] + table["k"]

    info = tp.InputInfo((2,), tp.float32)
    exe = tp.compile(f, args=[[info, info], {"k": info}])
    assert list(exe.input_infos) == ["pair[0]", "pair[1]", "table.k"]
    assert list(inspect.signature(exe).parameters) == ["pair", "table"]
    one = tp.ones((2,)).eval()
    assert np.asarray(exe([one, one], {"k": one})).tolist() == [3.0, 3.0]
    with pytest.raises(tp.TripyException, match="Missing runtime tensor for input `table.k`."):
        exe([one, one], {"j": one})


def test_returning_a_sequence_gives_a_tuple():
    exe = tp.compile(lambda a: [a + a], args=[tp.InputInfo((1,), tp.float32)])
    out = exe(tp.ones((1,)).eval())
    assert isinstance(out, tuple) and len(out) == 1


def test_large_constants_are_elided_for_people_but_kept_in_the_module():
    weights = np.arange(64, dtype=np.float32)
    lowered = pipeline.trace(lambda x: x + tp.Tensor(weights), args=[tp.InputInfo((64,), tp.float32)]).lower()
    shown = lowered.as_text()
    assert "dense_resource<__elided__> : tensor<64xf32>" in shown
    full = lowered.as_text(elide=False)
    assert "dense<[0.000000e+00, 1.000000e+00" in full
    exe = lowered.build().executable()
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(np.ones(64, np.float32)))), weights + 1)


def test_weights_above_the_inline_limit_live_in_resource_blobs(monkeypatch):
    monkeypatch.setattr(tp.config, "inline_constant_limit", 16)
    weights = np.arange(32, dtype=np.float32).reshape(4, 8)
    lowered = pipeline.trace(lambda x: x @ tp.Tensor(weights), args=[tp.InputInfo((2, 4), tp.float32)]).lower()
    assert lowered.program.resources  # held as bytes beside the IR
    full = lowered.as_text(elide=False)
    assert "dialect_resources" in full  # the full text carries the blobs, so it parses back with its data
    resources = {}
    reparsed = mlir_text.parse_module(full, resources=resources)
    assert mlir_text.print_module(reparsed, resources=resources) == full
    x = np.ones((2, 4), np.float32)
    np.testing.assert_array_equal(np.asarray(lowered.build().executable()(tp.Tensor(x))), x @ weights)


def test_tensor_from_a_dlpack_producer():
    jnp = pytest.importorskip("jax.numpy")
    t = tp.Tensor(jnp.arange(6, dtype=jnp.float32).reshape(2, 3))
    assert t.dtype is tp.float32
    assert (t * 2.0).tolist() == [[0.0, 2.0, 4.0], [6.0, 8.0, 10.0]]


def test_eval_goes_through_the_stages():
    t = tp.ones((2, 3)) * 2.0
    t.eval()
    assert t.tolist() == [[2.0] * 3] * 2
    assert t.trace_tensor.producer.kind == "constant"


def test_stage_objects_have_text_and_timing():
    traced = pipeline.trace(lambda a: tp.relu(a), args=[tp.InputInfo((2,), tp.float32)])
    lowered = traced.lower()
    built = lowered.build(engine="reference", optimization_level=1)
    exe = built.executable()
    for stage in (traced, lowered, built):
        assert stage.as_text()
        assert stage.seconds >= 0
    assert "tensorrt.activation" in lowered.as_text()
    assert "engine: reference (requested by the caller (engine=...))" in built.as_text()
    assert built.layers[0].kind == "activation"
    assert built.layers[0].source_lines[0].startswith("test_compile_inputs.py:")
    assert exe.stages["built"] is built


@pytest.mark.parametrize("index", [np.s_[1:], np.s_[::-1], np.s_[-2:, ::-1], np.s_[1:-1:2, 0], np.s_[None, :2]])
def test_slicing_dynamic_dims_matches_numpy(index):
    exe = tp.compile(lambda x: x[index], args=[tp.InputInfo(((2, 3, 5), 2), tp.float32)])
    for rows in (2, 3, 5):
        a = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2)
        np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(a))), a[index])


def test_runtime_failure_names_the_trace_op_and_user_line():
    def f(a, b):
        return a + b  # dims agree only when both dynamic dims are equal at run time

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 3),), tp.float32), tp.InputInfo(((1, 2, 3),), tp.float32)])
    with pytest.raises(tp.TripyException) as err:
        exe(tp.ones((2,)).eval(), tp.ones((3,)).eval())
    assert err.value.op == "%t0"
    assert err.value.location.file == __file__
    assert "%t0" in str(err.value)
