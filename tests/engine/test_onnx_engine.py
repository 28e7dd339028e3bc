"""The onnxruntime engine and ONNX export (issue 11): one session for the whole profile, checked export that
a plain onnxruntime session runs with the reference's numbers, symbolic dims, shared initializers, node
names that map back to user lines, layer table and per-layer times, errors at the user's line."""

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

import tripy_lab as tp

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

F32 = tp.float32
rng = np.random.default_rng(0)


import bench_onnx as bench  # noqa: E402 - benchmarks/ (tests/engine/conftest.py)

MODEL_FILE = "bench_onnx.py:"


@pytest.fixture(scope="module")
def gpt():
    model = bench.GPT(vocab=50, ctx=16, d=32, heads=4, layers=2)
    bench.randomize(model)
    info = tp.InputInfo((tp.NamedDimension("batch", 1, 2, 3), (1, 8, 16)), tp.int32)
    return model, info


def ids(b, t, seed=0):
    return tp.Tensor(np.random.default_rng(seed).integers(0, 50, size=(b, t)).astype(np.int32))


def test_one_session_serves_twenty_shapes(monkeypatch):
    built = []
    real = ort.InferenceSession

    def counting(*a, **k):
        built.append(1)
        return real(*a, **k)

    monkeypatch.setattr(ort, "InferenceSession", counting)
    info = tp.InputInfo(((1, 4, 5), (1, 8, 12)), F32)
    w = tp.Tensor(rng.standard_normal((1, 1)).astype(np.float32))
    f = lambda x: tp.softmax(x * w, dim=-1) + tp.sum(x, dim=0)  # noqa: E731
    exe = tp.compile(f, args=[info], engine="onnxruntime")
    ref = tp.compile(f, args=[info], engine="reference")
    assert built == [1]
    shapes = [(a, b) for a in range(1, 6) for b in (1, 5, 9, 12)]
    assert len(shapes) >= 20
    for shape in shapes:
        x = tp.Tensor(rng.standard_normal(shape).astype(np.float32))
        np.testing.assert_allclose(np.asarray(exe(x)), np.asarray(ref(x)), rtol=1e-5, atol=1e-6)
    assert built == [1], "a new shape inside the bounds built another session"
    assert exe._compiled.sessions_built == 1
    assert exe._compiled.report.cache["shapes_run"] == len(shapes)


def test_export_checks_and_runs_outside_tripy_lab(gpt, tmp_path):
    model, info = gpt
    exe = tp.compile(model, args=[info], engine="onnxruntime")
    ref = tp.compile(model, args=[info], engine="reference")
    path = exe.export_onnx(str(tmp_path / "gpt.onnx"))
    loaded = onnx.load(path)
    onnx.checker.check_model(loaded, full_check=True)
    # symbolic dims: the NamedDimension's name and <param>_<i>
    (inp,) = loaded.graph.input
    assert [d.dim_param for d in inp.type.tensor_type.shape.dim] == ["batch", "idx_1"]
    # the tied embedding is one initializer, used by the gather and the final matmul
    sizes = [tuple(i.dims) for i in loaded.graph.initializer]
    assert sizes.count((50, 32)) == 1
    # a plain onnxruntime session in a fresh interpreter that never imports tripy_lab
    cases = {f"x{t}": np.asarray(ids(b, t, seed=t)) for b, t in ((1, 1), (2, 8), (3, 16))}  # min, opt, max
    np.savez(tmp_path / "in.npz", **cases)
    script = ("import sys, numpy as np, onnxruntime as ort\n"
              f"s = ort.InferenceSession({path!r}, providers=['CPUExecutionProvider'])\n"
              f"ins = np.load({str(tmp_path / 'in.npz')!r})\n"
              f"np.savez({str(tmp_path / 'out.npz')!r}, **{{k: s.run(None, {{'idx': ins[k]}})[0] for k in ins}})\n"
              "assert 'tripy_lab' not in sys.modules\n")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=tmp_path, env={**os.environ, "PYTHONPATH": ""})
    outs = np.load(tmp_path / "out.npz")
    for b, t in ((1, 1), (2, 8), (3, 16)):
        x = tp.Tensor(cases[f"x{t}"])
        out = outs[f"x{t}"]
        want = np.asarray(ref(x))
        assert out.shape == want.shape == (b, t, 50)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(np.asarray(exe(x)), want, rtol=1e-4, atol=1e-4)


def test_lowered_to_onnx_with_dimension_input(tmp_path):
    f = lambda x, s: tp.reshape(x, (-1, s))[1:, ::-1] * 2.0  # noqa: E731
    args = [tp.InputInfo(((1, 2, 4), 6), F32), tp.DimensionInputInfo((1, 2, 3))]
    lowered = tp.pipeline.trace(f, args=args).lower()
    path = lowered.to_onnx(str(tmp_path / "m.onnx"))
    model = onnx.load(path)
    s = model.graph.input[1]
    assert s.name == "s" and s.type.tensor_type.elem_type == onnx.TensorProto.INT32
    assert len(s.type.tensor_type.shape.dim) == 0  # a scalar int input
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref = lowered.build(engine="reference").executable()
    for n, v in ((1, 1), (2, 2), (4, 3), (3, 2)):
        x = rng.standard_normal((n, 6)).astype(np.float32)
        (out,) = sess.run(None, {"x": x, "s": np.asarray(v, np.int32)})
        np.testing.assert_allclose(out, np.asarray(ref(tp.Tensor(x), tp.DimensionSize(v))), rtol=1e-6)
    # node names carry the trace op, the MLIR op and the user's file:line
    assert all(" @ test_onnx_engine.py:" in n.name for n in model.graph.node if not n.name.startswith("output"))


def test_trtexec_and_polygraphy_commands():
    args = [tp.InputInfo(((1, 2, 4), 6), F32), tp.DimensionInputInfo((1, 2, 3))]
    exe = tp.compile(lambda x, s: tp.reshape(x, (-1, s)), args=args, engine="onnxruntime")
    assert exe.trtexec_command("m.onnx") == ("trtexec --onnx=m.onnx --minShapes=x:1x6,s:1 --optShapes=x:2x6,s:2 "
                                             "--maxShapes=x:4x6,s:3")
    cmd = exe.polygraphy_command("m.onnx")
    assert cmd.startswith("polygraphy run m.onnx --trt --onnxrt --trt-min-shapes 'x:[1,6]' 's:[1]'")
    assert "--trt-max-shapes 'x:[4,6]' 's:[3]'" in cmd


def test_optimization_levels_and_layer_table(gpt):
    model, info = gpt
    exes = {lvl: tp.compile(model, args=[info], engine="onnxruntime", optimization_level=lvl) for lvl in (0, 3)}
    notes = {lvl: " ".join(e._compiled.report.notes) for lvl, e in exes.items()}
    assert "ORT_DISABLE_ALL" in notes[0] and "ORT_ENABLE_ALL" in notes[3]
    unfused, fused = exes[0].layers, exes[3].layers
    assert len(fused) < len(unfused)  # onnxruntime fused nodes at level 3
    # every layer maps back to trace ops and this file's lines; fused nodes to several MLIR ops
    assert all(layer.source_lines and all(MODEL_FILE in s for s in layer.source_lines)
               for layer in fused if not layer.name.startswith("output"))
    assert any(len(layer.mlir_ops) > 1 and "Fusion" in layer.name
               for layer in fused)
    x = ids(2, 8)
    np.testing.assert_allclose(np.asarray(exes[0](x)), np.asarray(exes[3](x)), rtol=1e-4, atol=1e-4)


def test_layer_times_join_the_layer_table(gpt):
    model, info = gpt
    exe = tp.compile(model, args=[info], engine="onnxruntime")
    times = exe._compiled.layer_times(iters=3)
    names = {layer.name for layer in exe.layers}
    assert times and all(r["name"] in names and r["calls"] == 3 and r["total_ms"] >= 0 for r in times)
    assert times == sorted(times, key=lambda r: -r["total_ms"])
    assert any(r["source_lines"] for r in times)
    assert exe._compiled.sessions_built == 1  # the profiling session is a separate one


def test_run_time_error_names_the_user_line():
    f = lambda x, s: tp.reshape(x, (-1, s))  # noqa: E731  (6 * n elements do not split into s=4 columns)
    args = [tp.InputInfo(((1, 2, 3), 6), F32), tp.DimensionInputInfo((1, 2, 4))]
    exe = tp.compile(f, args=args, engine="onnxruntime")
    with pytest.raises(tp.TripyException, match="onnxruntime engine: run failed") as err:
        exe(tp.Tensor(np.ones((1, 6), np.float32)), tp.DimensionSize(4))
    assert "test_onnx_engine.py" in str(err.value)
    # the Executable's own argument checks come first, as on every engine
    with pytest.raises(tp.TripyException, match="outside the bounds"):
        exe(tp.Tensor(np.ones((5, 6), np.float32)), tp.DimensionSize(2))


def test_plugin_is_a_build_error_at_the_user_line():
    def f(x):
        return tp.plugin("CustomGeluPluginDynamic", [x], output_info=[(2, F32)], version="1")

    with pytest.raises(tp.TripyException, match="plugins need TensorRT") as err:
        tp.compile(f, args=[tp.InputInfo((2, 3), F32)], engine="onnxruntime")
    assert "test_onnx_engine.py" in str(err.value) and "engine='tensorrt'" in str(err.value)


def test_table_has_a_row_for_every_mlir_op():
    """Every op of the tensorrt dialect (but the loop terminator) has a lowering; the two that cannot be
    expressed raise at build time with the reason (plugins; gather numBroadcastDims != 0)."""
    from tripy_lab.engine.onnx import ops as onnx_ops
    from tripy_lab.engine.reference.ops import TABLE as REFERENCE
    from tripy_lab.mlir.dialect import TENSORRT_OPS

    assert set(TENSORRT_OPS) - {"tensorrt.yield"} == set(onnx_ops.TABLE)
    assert set(REFERENCE) <= set(onnx_ops.TABLE)


def test_named_dimensions_share_one_dim_param(tmp_path):
    n = tp.NamedDimension("n", 1, 3, 6)
    args = [tp.InputInfo((n, 4), F32), tp.InputInfo((n, (2, 3, 5)), F32)]
    exe = tp.compile(lambda a, b: tp.sum(a, dim=1) + tp.sum(b, dim=1), args=args, engine="onnxruntime")
    model = onnx.load(exe.export_onnx(str(tmp_path / "n.onnx")))
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input]
    assert dims == [["n", 4], ["n", "b_1"]]


def test_tensorrt_provider_gets_the_profile_as_its_options(monkeypatch):
    """Not runnable here (no TensorRT): the provider list and the documented profile options."""
    from tripy_lab.engine.onnx import build as onnx_runtime

    monkeypatch.setattr(ort, "get_available_providers",
                        lambda: ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"])
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "tensorrt" else real(name, *a))
    args = [tp.InputInfo(((1, 2, 4), 6), F32), tp.InputInfo((3, (1, 5, 9)), F32)]
    program = tp.pipeline.trace(lambda x, y: x, args=args).lower().program
    providers = onnx_runtime.choose_providers(program)
    assert providers == [("TensorrtExecutionProvider", {"trt_profile_min_shapes": "x:1x6,y:3x1",
                                                        "trt_profile_opt_shapes": "x:2x6,y:3x5",
                                                        "trt_profile_max_shapes": "x:4x6,y:3x9"}),
                         "CUDAExecutionProvider", "CPUExecutionProvider"]
