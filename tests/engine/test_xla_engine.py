"""The xla engine as a whole: shape specialisation cache, layer table, persistent cache, options, devices."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from test_xla_programs import ProgramBuilder, build, run_np

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo, NamedDimension
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.base import BuildOptions
from tripy_lab.engine.xla import cache as xla_cache
from tripy_lab.engine.xla.build import XlaEngine
from tripy_lab.mlir import dialect as d
from tripy_lab.mlir.attrs import tensor_type

jax = pytest.importorskip("jax")
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def dynamic_program():
    """y = exp(x) + 1 with x: [(1, 2, 8), 4]."""
    b = ProgramBuilder()
    x = b.input("x", InputInfo([(1, 2, 8), 4], dtypes.float32))
    e = b.add(d.UnaryOp(x, "kEXP"))
    one = b.const(np.ones((1, 1), np.float32))
    return b.program(b.add(d.ElementWiseOp(e, one, "kSUM")))


def mlp_program(seed: int = 0):
    """tanh(x @ W + b) * 2, the layer-table example, with W and b as constants."""
    rng = np.random.default_rng(seed)
    b = ProgramBuilder()
    x = b.input("x", (8, 16))
    w = b.const(rng.standard_normal((16, 32)).astype(np.float32))
    bias = b.const(rng.standard_normal((1, 32)).astype(np.float32))
    mm = b.add(d.MatrixMultiplyOp(x, w, "kNONE", "kNONE"), "%mm", line=3)
    add = b.add(d.ElementWiseOp(mm, bias, "kSUM"), "%add", line=3)
    th = b.add(d.ActivationOp(add, "kTANH"), "%tanh", line=3)
    two = b.const(np.full((1, 1), 2.0, np.float32))
    out = b.add(d.ElementWiseOp(th, two, "kPROD"), "%mul", line=4)
    return b.program(out)


def test_profile_points_built_eagerly_others_on_first_use_and_cached():
    c = build(dynamic_program())
    assert c.report.cache["shapes_built"] == ["x=2x4", "x=1x4", "x=8x4"]  # opt, min, max
    assert c.report.cache["misses"] == 0
    assert any("3 signatures compiled concurrently" in n for n in c.report.notes)
    for n in (1, 5, 8):
        a = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        (out,) = run_np(c, a)
        np.testing.assert_allclose(out, np.exp(a) + 1, rtol=1e-6)
    assert c.report.cache["shapes_built"] == ["x=2x4", "x=1x4", "x=8x4", "x=5x4"]
    assert c.report.cache["misses"] == 1 and c.report.cache["hits"] == 2
    for n in (1, 5, 8, 2):
        run_np(c, np.zeros((n, 4), np.float32))
    assert c.report.cache["misses"] == 1 and c.report.cache["hits"] == 6
    assert len(c.built_signatures) == 4
    assert any("first use" in n for n in c.report.notes)


def test_build_shapes_opt_only_or_requested_list():
    c = XlaEngine().build(dynamic_program(), BuildOptions(build_shapes="opt"))
    assert c.report.cache["shapes_built"] == ["x=2x4"]
    c = XlaEngine().build(dynamic_program(), BuildOptions(build_shapes=[{"x": (5, 4)}, {"x": (8, 4)}]))
    assert c.report.cache["shapes_built"] == ["x=2x4", "x=1x4", "x=8x4", "x=5x4"]
    (out,) = run_np(c, np.ones((5, 4), np.float32))
    assert c.report.cache["misses"] == 0 and np.allclose(out, np.e + 1)
    with pytest.raises(TripyException, match="outside its bounds"):
        XlaEngine().build(dynamic_program(), BuildOptions(build_shapes=[{"x": (9, 4)}]))


def test_shapes_outside_bounds_and_wrong_dtype_are_rejected():
    c = build(dynamic_program())
    with pytest.raises(TripyException, match=r"dim 0 is 9, outside its bounds \[1, 8\]"):
        c.run([np.zeros((9, 4), np.float32)])
    with pytest.raises(TripyException, match="rank"):
        c.run([np.zeros((4,), np.float32)])
    with pytest.raises(TripyException, match="dtype"):
        c.run([np.zeros((3, 4), np.int32)])


def test_named_dimensions_must_agree():
    b = ProgramBuilder()
    n = NamedDimension("n", 1, 2, 4)
    x = b.input("x", InputInfo([n, 3], dtypes.float32))
    y = b.input("y", InputInfo([n, 3], dtypes.float32))
    c = build(b.program(b.add(d.ElementWiseOp(x, y, "kSUM"))))
    with pytest.raises(TripyException, match="Dimension 'n' must be equal"):
        c.run([np.zeros((2, 3), np.float32), np.zeros((3, 3), np.float32)])


def test_dimension_input_values_key_the_cache():
    b = ProgramBuilder()
    x = b.input("x", InputInfo([(1, 4, 16)], dtypes.float32))
    n = b.input("n", DimensionInputInfo((1, 2, 4)))
    s = b.add(d.ShapeOp(x))
    n1 = b.add(d.ExpandRankOp(n, tensor_type((1,), "i32")))
    q = b.add(d.ElementWiseOp(s, n1, "kDIV"))
    shape = b.add(d.ConcatenationOp([n1, q], 0))
    y = b.add(d.ReshapeOp(x, tensor_type((None, None), "f32"), shape=shape))
    c = build(b.program(y))
    assert c.report.cache["shapes_built"] == ["x=4, n=2", "x=1, n=1", "x=16, n=4"]  # opt, min, max
    a = np.arange(8, dtype=np.float32)
    (o,) = run_np(c, a, np.array(4, np.int32))
    np.testing.assert_array_equal(o, a.reshape(4, 2))
    (o,) = run_np(c, a, np.array(2, np.int32))
    np.testing.assert_array_equal(o, a.reshape(2, 4))
    run_np(c, a, np.array(4, np.int32))
    assert c.report.cache["shapes_built"] == ["x=4, n=2", "x=1, n=1", "x=16, n=4", "x=8, n=4", "x=8, n=2"]
    assert c.report.cache["hits"] == 1
    with pytest.raises(TripyException, match="outside"):
        c.run([a, np.array(5, np.int32)])


def test_layer_table_fuses_the_elementwise_tail():
    c = build(mlp_program())
    rows = c.layers
    assert rows, c.report.extra_stages["hlo"]
    fused = [r for r in rows if {"%add", "%tanh", "%mul"} <= set(r.source_ops)]
    assert len(fused) == 1, [(r.name, r.kind, r.source_ops) for r in rows]
    row = fused[0]
    assert "fusion" in row.kind
    assert row.source_lines and all(ln.startswith("cell:") for ln in row.source_lines)
    assert row.output_shapes == ((8, 32),) and row.output_dtypes == ("float32",)
    ops = [op.name for op in c.program.ops()]
    assert all(ops[i] in ("tensorrt.element_wise", "tensorrt.activation", "tensorrt.matrix_multiply")
               for i in row.mlir_ops)
    gemm = [r for r in rows if "%mm" in r.source_ops]
    assert gemm and "GEMM" in gemm[0].kind or "%mm" in row.source_ops
    for r in rows:
        assert r.as_dict()["name"] == r.name
    # numbers are right too
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    consts = [c.program.constant_value(op) if hasattr(c.program, "constant_value") else None
              for op in c.program.ops() if op.name == "tensorrt.constant"]
    from tripy_lab.engine.xla.ops import constant_value

    w, bias, two = [constant_value(op, c.program) for op in c.program.ops() if op.name == "tensorrt.constant"]
    np.testing.assert_allclose(run_np(c, x)[0], np.tanh(x @ w + bias) * two, rtol=1e-5, atol=1e-6)
    del consts


def test_extra_stages_and_report():
    c = build(mlp_program())
    r = c.report
    assert r.engine == "xla" and r.device == "cpu"
    assert "stablehlo." in r.extra_stages["stablehlo"] and "func.func" in r.extra_stages["stablehlo"]
    assert r.extra_stages["hlo"].startswith("HloModule")
    assert "__op" in r.extra_stages["hlo"]  # named scopes made it into the metadata
    assert any(n.startswith("optimization_level=3") for n in r.notes)


@pytest.mark.parametrize("level", range(6))
def test_optimization_levels(level):
    from tripy_lab.engine.xla import OPT_LEVEL_OPTIONS

    c = build(mlp_program(), level=level)
    x = np.ones((8, 16), np.float32)
    ref = run_np(build(mlp_program()), x)[0]
    np.testing.assert_allclose(run_np(c, x)[0], ref, rtol=1e-5, atol=1e-6)
    note = next(n for n in c.report.notes if n.startswith(f"optimization_level={level}"))
    for k in OPT_LEVEL_OPTIONS[level]:
        assert k in note


def test_invalid_optimization_level():
    with pytest.raises(TripyException, match="optimization_level"):
        build(mlp_program(), level=7)


COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")


def int64_program():
    b = ProgramBuilder()
    x = b.input("x", InputInfo([(1, 2, 4)], dtypes.int64))
    one = b.const(np.array([2**40], np.int64))
    return b.program(b.add(d.ElementWiseOp(x, one, "kSUM")))


def dims_program():
    b = ProgramBuilder()
    x = b.input("x", InputInfo([(1, 4, 16)], dtypes.float32))
    n = b.input("n", DimensionInputInfo((1, 2, 4)))
    n1 = b.add(d.ExpandRankOp(n, tensor_type((1,), "i32")))
    shape = b.add(d.ConcatenationOp([n1, b.const(np.array([-1], np.int32))], 0))
    return b.program(b.add(d.ReshapeOp(x, tensor_type((None, None), "f32"), shape=shape)))


@pytest.mark.parametrize("which", ["plain", "int64", "dims", "large_constant"])
def test_calls_reuse_the_built_executable_without_retracing(which):
    events = []
    jax.monitoring.register_event_duration_secs_listener(
        lambda e, dur, **kw: events.append(e) if e in COMPILE_EVENTS else None)
    if which == "plain":
        c, args = build(dynamic_program()), [np.ones((2, 4), np.float32)]
    elif which == "int64":
        c, args = build(int64_program()), [np.ones((2,), np.int64)]
    elif which == "dims":
        c, args = build(dims_program()), [np.ones((4,), np.float32), np.array(2, np.int32)]
    else:
        b = ProgramBuilder()
        x = b.input("x", (64, 64))
        w = b.const(np.ones((64, 64), np.float32))
        c, args = build(b.program(b.add(d.ElementWiseOp(x, w, "kSUM")))), [np.ones((64, 64), np.float32)]
    n0 = len(events)
    first = run_np(c, *args)
    for _ in range(3):
        again = run_np(c, *args)
    assert len(events) == n0, events[n0:]
    for a, b_ in zip(first, again):
        np.testing.assert_array_equal(a, b_)
    assert c.report.cache["hits"] == 4 and c.report.cache["misses"] == 0


def test_run_returns_jax_arrays_and_accepts_jax_and_dlpack_inputs():
    c = build(dynamic_program())
    a = np.ones((3, 4), np.float32)
    out = c.run([jax.numpy.asarray(a)])
    assert isinstance(out[0], jax.Array)
    c.synchronize()

    class Producer:  # a DLPack producer that is not a numpy/jax array (like a torch or cupy tensor)
        def __init__(self, arr):
            self.arr = arr

        def __dlpack__(self, **kw):
            return self.arr.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.arr.__dlpack_device__()

        @property
        def shape(self):
            return self.arr.shape

    out2 = c.run([Producer(a)])
    np.testing.assert_allclose(np.asarray(out2[0]), np.exp(a) + 1, rtol=1e-6)
    out3 = c.run([Producer(np.ones((4, 4), np.float32))])  # a miss through the same path
    assert np.asarray(out3[0]).shape == (4, 4)


def test_importing_tripy_lab_and_the_engine_module_does_not_import_jax():
    code = ("import sys, tripy_lab, tripy_lab.engine.xla.build, tripy_lab.engine.xla.ops, tripy_lab.engine.xla.layers; "
            "print('jax' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.path.join(REPO, "src")})
    assert out.stdout.strip() == "False", out.stderr


def test_available():
    from tripy_lab.engine.xla.build import XlaEngine

    ok, why = XlaEngine.available()
    assert ok and "jax" in why


PERSIST_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {here!r})
    from test_xla_engine import mlp_program
    from test_xla_programs import build
    c = build(mlp_program(seed=7), cache_dir={cache!r})
    print(json.dumps({{"persistent": [n for n in c.report.notes if "persistent cache" in n],
                      "hits": c.report.cache["persistent_hits"], "misses": c.report.cache["persistent_misses"],
                      "dir": c.report.cache["persistent_dir"], "layers": [list(r.source_ops) for r in c.layers]}}))
""")


def test_persistent_cache_hit_in_a_new_process(tmp_path):
    cache = str(tmp_path / "xla-cache")
    script = PERSIST_SCRIPT.format(here=HERE, cache=cache)
    env = {**os.environ, "PYTHONPATH": os.path.join(REPO, "src") + os.pathsep + HERE}

    def once():
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = once()
    assert first["misses"] == 1 and first["hits"] == 0 and first["dir"] == cache
    assert os.listdir(cache)
    second = once()
    assert second["hits"] == 1 and second["misses"] == 0, second
    assert "persistent cache hit" in second["persistent"][0]
    assert second["layers"] == first["layers"]  # a cached executable still maps back to the trace ops


def test_persistent_cache_in_process_switches_dirs(tmp_path):
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    c1 = build(mlp_program(seed=11), cache_dir=a)
    assert c1.report.cache["persistent_misses"] == 1
    c2 = build(mlp_program(seed=11), cache_dir=a)
    assert c2.report.cache["persistent_hits"] == 1
    c3 = build(mlp_program(seed=11), cache_dir=b)
    xla_cache.flush()  # entries are written behind the build
    assert c3.report.cache["persistent_misses"] == 1 and os.listdir(b)


@pytest.mark.gpu
def test_runs_on_the_gpu_and_keeps_outputs_there():
    if jax.default_backend() != "gpu":
        pytest.skip("no CUDA GPU for jax")
    c = build(mlp_program())
    assert c.report.device.startswith("gpu")
    x = np.ones((8, 16), np.float32)
    out = c.run([x])
    assert out[0].devices().pop().platform == "gpu"
    c.synchronize()
    ref = np.asarray(out[0])
    xd = jax.device_put(x)
    np.testing.assert_allclose(np.asarray(c.run([xd])[0]), ref, rtol=1e-6)
    kinds = {r.kind for r in c.layers}
    assert any("GEMM" in k for k in kinds), kinds


@pytest.mark.gpu
def test_gpu_accepts_torch_and_cupy_through_dlpack():
    if jax.default_backend() != "gpu":
        pytest.skip("no CUDA GPU for jax")
    c = build(dynamic_program())
    tried = 0
    try:
        import torch

        t = torch.ones((3, 4), device="cuda")
        out = c.run([t])[0]
        assert out.devices().pop().platform == "gpu"
        np.testing.assert_allclose(np.asarray(out), np.exp(1.0) + 1, rtol=1e-6)
        tried += 1
    except ImportError:
        pass
    try:
        import cupy

        out = c.run([cupy.ones((3, 4), dtype=cupy.float32)])[0]
        np.testing.assert_allclose(np.asarray(out), np.exp(1.0) + 1, rtol=1e-6)
        tried += 1
    except ImportError:
        pass
    if not tried:
        pytest.skip("neither torch nor cupy is installed")
