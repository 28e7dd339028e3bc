"""The tensorrt engine around THE TABLE: profile, builder options, timing cache, inspector JSON,
progress, result arrays, and the whole build/run orchestration against stand-ins.

TensorRT is not installable here: ``make_fake_trt()`` (from test_tensorrt_table) plus the builder,
runtime, engine and execution-context stand-ins below drive ``TensorRTEngine.build`` and ``run``, and a
host-memory stand-in of cuda-python's runtime plays the GPU. They check our side of every call, not
TensorRT's behaviour. Tests marked ``tensorrt`` need the real TensorRT and a CUDA GPU and are skipped
without them.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import json
import math
import os
import sys
import types

import numpy as np
import pytest
from test_tensorrt_table import FakeNetwork, Prog, make_fake_trt

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.base import BuildOptions
from tripy_lab.engine.tensorrt import build as E
from tripy_lab.engine.tensorrt import cuda as C
from tripy_lab.engine.tensorrt import layers as LY
from tripy_lab.engine.tensorrt import profile as P
from tripy_lab.mlir import dialect as d

HAS_TENSORRT = importlib.util.find_spec("tensorrt") is not None
real_tensorrt = pytest.mark.skipif(not HAS_TENSORRT or not E.TensorRTEngine.available()[0],
                                   reason="needs TensorRT and a CUDA GPU")


# =============================================================================================
# Stand-ins for the builder side of TensorRT and for cuda-python


class FakeProfile:
    def __init__(self):
        self.calls = []

    def set_shape(self, name, lo, mid, hi):
        self.calls.append(("set_shape", name, lo, mid, hi))

    def set_shape_input(self, name, lo, mid, hi):
        self.calls.append(("set_shape_input", name, lo, mid, hi))


class FakeTimingCache:
    def __init__(self, data: bytes):
        self.data = bytes(data)

    def serialize(self):
        return memoryview(self.data + b"|timed")


class FakeConfig:
    def __init__(self):
        self.builder_optimization_level = None
        self.profiling_verbosity = None
        self.progress_monitor = None
        self.profiles = []
        self.cache = None

    def add_optimization_profile(self, profile):
        self.profiles.append(profile)
        return len(self.profiles) - 1

    def create_timing_cache(self, data):
        return FakeTimingCache(data)

    def set_timing_cache(self, cache, ignore_mismatch):
        if cache.data.startswith(b"BAD"):
            return False
        self.cache = cache
        return True

    def get_timing_cache(self):
        return self.cache


_PW = {"add_elementwise", "add_unary", "add_activation"}


def _inspector_json(net) -> str:
    """What our stand-in engine reports: pointwise runs fused into one row, the rest one row each."""
    rows, run = [], []

    def flush():
        if run:
            rows.append({"Name": "PWN(" + ", ".join(x.name for x in run) + ")", "LayerType": "PointWiseV2",
                         "Metadata": "\x1e".join(x.metadata for x in run),
                         "Outputs": [{"Name": "t", "Dimensions": [-1, 3], "Format/Datatype": "Row major linear FP32"}],
                         "TacticName": "pointwise_kernel"})
            run.clear()

    for layer in net.layers:
        if layer.kind in _PW:
            run.append(layer)
            continue
        flush()
        rows.append({"Name": layer.name, "LayerType": layer.type.name.title(), "Metadata": layer.metadata,
                     "Outputs": [], "TacticValue": "0x0000000000000000"})
    flush()
    return json.dumps({"Layers": rows, "Bindings": [t.name for t in net.inputs + net.outputs]})


class FakeContext:
    def __init__(self, engine):
        self.engine = engine
        self.shapes: dict = {}
        self.addresses: dict = {}
        self.streams: list = []

    def set_input_shape(self, name, shape):
        self.shapes[name] = tuple(shape)
        return True

    def set_tensor_address(self, name, ptr):
        self.addresses[name] = int(ptr)
        return True

    def get_tensor_shape(self, name):
        return self.engine.output_shape(self, name)

    def execute_async_v3(self, stream):
        self.streams.append(stream)
        self.engine.compute(self)
        return True


class FakeEngine:
    def __init__(self, trt, net):
        self.trt, self.net = trt, net
        self.contexts = []
        self.output_shape = lambda ctx, name: next(iter(ctx.shapes.values()))
        self.compute = lambda ctx: None
        self.device_memory_size_v2 = 512 * len(net.layers)  # a stand-in's number: the test reads it back

    def create_engine_inspector(self):
        info = _inspector_json(self.net)
        return types.SimpleNamespace(get_engine_information=lambda fmt: info)

    def create_execution_context(self):
        self.contexts.append(FakeContext(self))
        return self.contexts[-1]

    def get_tensor_location(self, name):
        t = next(t for t in self.net.inputs + self.net.outputs if t.name == name)
        return self.trt.TensorLocation.HOST if t.is_shape_tensor else self.trt.TensorLocation.DEVICE


def make_full_fake_trt():
    """``make_fake_trt()`` plus Builder, Runtime, ILogger and IProgressMonitor stand-ins."""
    trt = make_fake_trt()
    trt.ILogger = type("ILogger", (), {"__init__": lambda self: None})
    trt.ILogger.Severity = types.SimpleNamespace(**{n: types.SimpleNamespace(name=n) for n in
                                                    ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")})
    trt.IProgressMonitor = type("IProgressMonitor", (), {"__init__": lambda self: None})
    trt.built = []

    class Network(FakeNetwork):
        def add_input(self, name, dtype, shape):
            t = super().add_input(name, dtype, shape)
            t.is_shape_tensor = dtype is trt.DataType.INT32 and tuple(shape) == ()
            return t

    class Builder:
        def __init__(self, logger):
            self.logger = logger

        def create_network(self, flags):
            return Network(trt, flags)

        def create_builder_config(self):
            return FakeConfig()

        def create_optimization_profile(self):
            return FakeProfile()

        def build_serialized_network(self, net, config):
            mon = config.progress_monitor
            mon.phase_start("Building engine", None, 2)
            mon.phase_start("Tactic selection", "Building engine", 3)
            for i in range(3):
                assert mon.step_complete("Tactic selection", i) is True
            mon.phase_finish("Tactic selection")
            mon.step_complete("Building engine", 1)
            mon.phase_finish("Building engine")
            self.logger.log(trt.ILogger.Severity.WARNING, "fake warning")
            self.logger.log(trt.ILogger.Severity.INFO, "chatter")
            trt.built.append((net, config))
            return b"PLAN" + bytes(len(net.layers))

    class Runtime:
        def __init__(self, logger):
            self.logger = logger

        def deserialize_cuda_engine(self, plan):
            assert plan.startswith(b"PLAN")
            return FakeEngine(trt, trt.built[-1][0])

    trt.Builder, trt.Runtime = Builder, Runtime
    return trt


class FakeCudart:
    """cuda-python's runtime API over host memory."""

    cudaMemcpyKind = types.SimpleNamespace(cudaMemcpyHostToDevice=1, cudaMemcpyDeviceToHost=2)

    def __init__(self, count=1):
        self.count = count
        self.mem: dict[int, np.ndarray] = {}
        self.syncs = 0
        self.copies = []

    def cudaGetDeviceCount(self):
        return (0, self.count)

    def cudaMalloc(self, n):
        buf = np.zeros(n, np.uint8)
        self.mem[buf.ctypes.data] = buf
        return (0, buf.ctypes.data)

    def cudaFree(self, ptr):
        self.mem.pop(int(ptr), None)
        return (0,)

    def cudaMemcpy(self, dst, src, n, kind):
        self.copies.append(kind)
        ctypes.memmove(dst, src, n)
        return (0,)

    def cudaStreamCreate(self):
        return (0, 77)

    def cudaStreamSynchronize(self, stream):
        assert stream == 77
        self.syncs += 1
        return (0,)

    def cudaGetDeviceProperties(self, i):
        return (0, types.SimpleNamespace(name=b"Fake GPU\0\0"))


@pytest.fixture
def fake_env(monkeypatch):
    trt = make_full_fake_trt()
    cudart = FakeCudart()
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setitem(sys.modules, "cupy", None)  # results as DeviceArrays, whatever is installed
    monkeypatch.setitem(sys.modules, "torch", None)
    monkeypatch.setattr(C, "import_cudart", lambda: cudart)
    return trt, cudart


def _exp_add_program(tp):
    from tripy_lab import pipeline

    return pipeline.trace(lambda x: tp.exp(x) + x, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)]).lower().program


# =============================================================================================
# availability


def test_available_is_false_here_with_a_reason():
    ok, why = E.TensorRTEngine.available()
    if HAS_TENSORRT:
        pytest.skip("TensorRT is installed here")
    assert ok is False
    assert "TensorRT is not installed" in why


def test_available_needs_cuda_python_and_a_gpu(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorrt", make_fake_trt())
    monkeypatch.setattr(C, "import_cudart", lambda: None)
    ok, why = E.TensorRTEngine.available()
    assert not ok and "TensorRT 10.fake is importable" in why and "cuda-python is not installed" in why
    monkeypatch.setattr(C, "import_cudart", lambda: FakeCudart(count=0))
    ok, why = E.TensorRTEngine.available()
    assert not ok and "no CUDA GPU" in why
    monkeypatch.setattr(C, "import_cudart", lambda: FakeCudart(count=2))
    assert E.TensorRTEngine.available() == (True, "TensorRT 10.fake with 2 CUDA GPU(s)")


def test_build_without_tensorrt_says_so(tp):
    if HAS_TENSORRT:
        pytest.skip("TensorRT is installed here")
    with pytest.raises(TripyException, match="TensorRT is not installed"):
        E.TensorRTEngine().build(_exp_add_program(tp), BuildOptions())


def test_registry_knows_the_engine():
    from tripy_lab.engine.registry import engine_class

    assert engine_class("tensorrt") is E.TensorRTEngine and E.TensorRTEngine.name == "tensorrt"


# =============================================================================================
# optimization profile


def test_profile_records_from_arg_attributes(tp):
    from tripy_lab import pipeline

    def f(x, y, n):
        return tp.reshape(x + y, (n, -1))

    prog = pipeline.trace(f, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32), tp.InputInfo((2, 3), tp.float32),
                                   tp.DimensionInputInfo((1, 2, 3))]).lower().program
    recs = P.profile_records(prog)
    assert [r.as_tuple() for r in recs] == [("x", (1, 3), (2, 3), (4, 3), False),
                                            ("y", (2, 3), (2, 3), (2, 3), False),
                                            ("n", (1,), (2,), (3,), True)]
    profile = FakeProfile()
    notes = P.apply_profile(profile, recs)
    assert profile.calls == [("set_shape", "x", (1, 3), (2, 3), (4, 3)),
                             ("set_shape_input", "n", [1], [2], [3])]  # static y needs no profile
    assert len(notes) == 2 and "'x'" in notes[0]


def test_profile_records_fall_back_to_input_infos_then_static_types():
    p = Prog()
    x = p.input("x", (None, 2), info=InputInfo([(1, 4, 8), 2], dtypes.float32))
    n = p.input("n", (), "i32", info=DimensionInputInfo((0, 5, 9)))
    z = p.input("z", (3,))
    prog = p.program(p.add(d.UnaryOp(x, "kNEG")), n, z)
    assert [r.as_tuple() for r in P.profile_records(prog)] == [
        ("x", (1, 2), (4, 2), (8, 2), False), ("n", (0,), (5,), (9,), True), ("z", (3,), (3,), (3,), False)]


def test_dynamic_input_without_bounds_is_an_error():
    p = Prog()
    x = p.input("x", (None, 2))
    with pytest.raises(TripyException, match="dynamic dimensions but no bounds"):
        P.profile_records(p.program(x))


def test_profile_that_contradicts_the_type_is_an_error():
    p = Prog()
    x = p.input("x", (3, 2), info=InputInfo([(1, 2, 4), 2], dtypes.float32))
    with pytest.raises(TripyException, match="contradicts its type"):
        P.profile_records(p.program(x))


def test_reconcile_shape_tensors_trusts_the_network():
    recs = [P.ProfileRecord("n", (1,), (2,), (3,), True), P.ProfileRecord("x", (1, 2), (2, 2), (3, 2))]
    out, notes = P.reconcile_shape_tensors(recs, {"n": False, "x": False})
    assert out[0].is_shape_tensor is False and out[0].is_static and out[1] == recs[1]
    assert "used as data" in notes[0]
    assert P.apply_profile(FakeProfile(), out[:1]) == []
    with pytest.raises(TripyException, match="shape tensor"):
        P.reconcile_shape_tensors(recs, {"x": True})


# =============================================================================================
# builder options


@pytest.mark.parametrize("level", [0, 1, 2, 3, 4, 5])
def test_optimization_levels_0_to_5_are_applied(level):
    trt = make_fake_trt()
    settings = P.builder_settings(BuildOptions(optimization_level=level))
    config = FakeConfig()
    notes = P.configure_builder(trt, config, settings)
    assert config.builder_optimization_level == level
    assert config.profiling_verbosity is trt.ProfilingVerbosity.DETAILED
    assert f"builder_optimization_level={level}" in notes[0] and "strongly typed" in notes[1]


@pytest.mark.parametrize("level", [-1, 6, 3.0, True, "3", None])
def test_bad_optimization_levels_are_rejected(level):
    with pytest.raises(TripyException, match="Invalid optimization level"):
        P.builder_settings(BuildOptions(optimization_level=level))


def test_timing_cache_path_must_be_a_file(tmp_path):
    with pytest.raises(TripyException, match="timing cache path"):
        P.builder_settings(BuildOptions(timing_cache_path=str(tmp_path)))
    path = str(tmp_path / "c")
    assert P.builder_settings(BuildOptions(timing_cache_path=path)).timing_cache_path == path


def test_networks_are_strongly_typed():
    trt = make_fake_trt()
    flags = P.network_flags(trt, P.BuilderSettings())
    assert flags == 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED) == 2


# =============================================================================================
# timing cache


def test_timing_cache_created_then_loaded(tmp_path):
    path = str(tmp_path / "sub" / "trt.cache")
    config = FakeConfig()
    cache, state = P.attach_timing_cache(config, path)
    assert state.status == "created" and not state.hit and config.cache is cache
    P.finish_timing_cache(config, state)
    assert open(path, "rb").read() == b"|timed" and state.bytes_saved == 6
    config2 = FakeConfig()
    _, state2 = P.attach_timing_cache(config2, path)
    assert state2.status == "loaded" and state2.hit and state2.bytes_loaded == 6
    assert config2.cache.data == b"|timed"
    report = state2.as_report()
    assert report["timing_cache"] == path and report["hit"] is True


def test_timing_cache_rejected_file_starts_empty(tmp_path):
    path = tmp_path / "trt.cache"
    path.write_bytes(b"BAD old cache")
    config = FakeConfig()
    _, state = P.attach_timing_cache(config, str(path))
    assert state.status == "rejected" and "did not match" in state.error and config.cache.data == b""


def test_no_timing_cache_path():
    cache, state = P.attach_timing_cache(FakeConfig(), None)
    assert cache is None and state.as_report()["timing_cache"] == "none"
    assert P.finish_timing_cache(FakeConfig(), state) is state


def test_timing_cache_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "trt.cache"
    path.write_bytes(b"old")
    real_replace = os.replace
    seen = []

    def replace(src, dst):
        seen.append((os.path.dirname(src), open(src, "rb").read(), dst))
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(TripyException, match="disk full") as info:  # the project's atomic writer names the path
        P.save_timing_cache(str(path), b"new bytes")
    assert str(path) in str(info.value)
    assert path.read_bytes() == b"old"  # untouched
    assert seen == [(str(tmp_path), b"new bytes", str(path))]  # written next to the target first
    assert sorted(os.listdir(tmp_path)) == ["trt.cache"]  # no temp file left behind
    monkeypatch.setattr(os, "replace", real_replace)
    assert P.save_timing_cache(str(path), memoryview(b"new bytes")) == 9
    assert path.read_bytes() == b"new bytes" and sorted(os.listdir(tmp_path)) == ["trt.cache"]


# =============================================================================================
# inspector JSON -> layer records

# Shaped like TensorRT's documented IEngineInspector JSON (ProfilingVerbosity.DETAILED): a "Layers"
# list of objects with Name, LayerType, Inputs/Outputs (Name, Location, Dimensions, Format/Datatype),
# tactic (TacticName or TacticValue) and Metadata; -1 marks a dynamic dim.
INSPECTOR_SAMPLE = {
    "Layers": [
        {"Name": "Reformatting CopyNode for Input Tensor 0 to matrix_multiply_2", "LayerType": "Reformat",
         "Inputs": [{"Name": "x", "Location": "Device", "Dimensions": [-1, 16],
                     "Format/Datatype": "Row major linear FP32"}],
         "Outputs": [{"Name": "Reformatted x", "Location": "Device", "Dimensions": [-1, 16],
                      "Format/Datatype": "Row major linear FP16 format"}],
         "ParameterType": "Reformat", "Origin": "REFORMAT", "TacticValue": "0x00000000000003e8", "StreamId": 0,
         "Metadata": ""},
        {"Name": "matrix_multiply_2", "LayerType": "CaskGemmMatrixMultiply",
         "Inputs": [{"Name": "Reformatted x", "Location": "Device", "Dimensions": [-1, 16],
                     "Format/Datatype": "Row major linear FP16 format"}],
         "Outputs": [{"Name": "t2", "Location": "Device", "Dimensions": [-1, 32],
                      "Format/Datatype": "Row major linear FP16 format"}],
         "ParameterType": "MatrixMultiply", "TacticName": "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n", "StreamId": 0,
         "Metadata": "%t2"},
        {"Name": "PWN(PWN(element_wise_3, activation_4), element_wise_6)", "LayerType": "PointWiseV2",
         "Inputs": [{"Name": "t2", "Location": "Device", "Dimensions": [-1, 32], "Format/Datatype": "Half"}],
         "Outputs": [{"Name": "t6", "Location": "Device", "Dimensions": [-1, 32], "Format/Datatype": "Float"}],
         "TacticName": "PointWiseV2", "Metadata": "%t3\x1e%t4\x1e%t6"},
        {"Name": "{ForeignNode[constant_7...reduce_10]}", "LayerType": "Myelin",
         "Outputs": [{"Name": "t10", "Dimensions": [-1], "Format/Datatype": "Row major linear Int32"}],
         "TacticValue": "0x0000000000000000", "Metadata": "%t7%t10"},
        {"Name": "shape_11 + shape_11.i32", "LayerType": "NoOp", "Outputs": [], "TacticValue": "0x0"},
    ],
    "Bindings": ["x", "t6", "t10"],
}

SAMPLE_INDEX = LY.ProgramIndex(
    op_kinds=("constant", "constant", "matrix_multiply", "element_wise", "activation", "constant",
              "element_wise", "constant", "slice", "unary", "reduce", "shape"),
    op_locs=("%t0", "%t1", "%t2", "%t3", "%t4", "%t5", "%t6", "%t7", "%t8", "%t9", "%t10", "%t11"),
    lines={"%t2": "cell:3", "%t3": "cell:3", "%t4": "cell:4", "%t6": "cell:5", "%t7": "cell:6", "%t9": "cell:7",
           "%t10": "cell:7", "%t11": "cell:8"},
)


def test_inspector_json_to_layer_records():
    rows = LY.layer_records(json.dumps(INSPECTOR_SAMPLE), SAMPLE_INDEX)
    assert [r.name for r in rows] == [layer["Name"] for layer in INSPECTOR_SAMPLE["Layers"]]
    reformat, gemm, pw, myelin, noop = rows
    assert reformat.kind == "copy (Reformat)" and reformat.kernel == "0x00000000000003e8"
    assert reformat.mlir_ops == (2,)  # names the layer it feeds; metadata is empty
    assert reformat.output_dtypes == ("float16",) and reformat.output_shapes == ((None, 16),)
    assert gemm.kind == "GEMM (CaskGemmMatrixMultiply)" and gemm.kernel.startswith("sm90_xmma_gemm")
    assert (gemm.source_ops, gemm.source_lines, gemm.mlir_ops) == (("%t2",), ("cell:3",), (2,))
    assert pw.kind == "pointwise fusion (PointWiseV2)"
    assert pw.source_ops == ("%t3", "%t4", "%t6") and pw.source_lines == ("cell:3", "cell:4", "cell:5")
    assert pw.mlir_ops == (3, 4, 6) and pw.output_dtypes == ("float32",) and pw.output_shapes == ((None, 32),)
    assert myelin.kind == "fused subgraph (Myelin)"
    assert myelin.mlir_ops == (7, 8, 9, 10)  # "a...b" is a range of layers
    assert myelin.source_ops == ("%t7", "%t10", "%t8", "%t9")  # metadata first, then the range's ops
    assert myelin.source_lines == ("cell:6", "cell:7") and myelin.output_dtypes == ("int32",)
    assert noop.kind == "no-op (NoOp)" and noop.mlir_ops == (11,) and noop.source_lines == ("cell:8",)
    assert all(set(r.as_dict()) >= {"name", "kind", "source_ops", "source_lines", "output_shapes",
                                    "output_dtypes", "kernel", "mlir_ops"} for r in rows)


def test_inspector_rows_carry_output_and_weight_bytes():
    from tripy_lab.engine.memory import array_bytes

    layers = {"Layers": [
        {"Name": "matrix_multiply_2", "LayerType": "CaskGemmMatrixMultiply",
         "Outputs": [{"Name": "y", "Dimensions": [4, 32], "Format/Datatype": "Row major linear FP16"}],
         "Weights": {"Type": "Half", "Count": 16 * 32}, "Bias": {"Type": "Float", "Count": 32}},
        {"Name": "element_wise_3", "LayerType": "PointWiseV2",
         "Outputs": [{"Name": "z", "Dimensions": [-1, 32], "Format/Datatype": "Row major linear FP32"}]}]}
    gemm, pw = LY.layer_records(layers, SAMPLE_INDEX)
    assert gemm.output_bytes == array_bytes((4, 32), "float16") == 4 * 32 * 2
    assert gemm.weight_bytes == 16 * 32 * 2 + 32 * 4
    assert (pw.output_bytes, pw.weight_bytes) == (None, None)  # a dynamic dimension, no weights listed


def test_memory_is_tensorrts_device_memory_size_and_the_plan(fake_env, tp):
    prog = _exp_add_program(tp)
    compiled = E.TensorRTEngine().build(prog, BuildOptions())
    (use,) = compiled.memory()
    scratch = compiled._engine.device_memory_size_v2
    assert use.parts == {"activations and scratch": scratch, "engine plan (weights, kernels)": len(compiled.plan)}
    assert use.total == scratch + len(compiled.plan) and "device_memory_size" in use.source


def test_inspector_names_only_format():
    rows = LY.layer_records({"Layers": ["matrix_multiply_2", "PWN(element_wise_3, activation_4)"],
                            "Bindings": []}, SAMPLE_INDEX)
    assert [r.mlir_ops for r in rows] == [(2,), (3, 4)]
    assert rows[1].source_ops == ("%t3", "%t4") and rows[0].kind == "unknown" and rows[0].output_shapes == ()


def test_layer_names_that_do_not_match_the_program_are_ignored():
    rows = LY.layer_records({"Layers": [{"Name": "unary_2 + element_wise_99 + my_element_wise_3", "LayerType": "x"}]},
                           SAMPLE_INDEX)
    assert rows[0].mlir_ops == ()  # op 2 is not a unary, 99 does not exist, the third is another name


@pytest.mark.parametrize("text,dtype", [("Row major linear FP32", "float32"), ("Half", "float16"),
                                        ("Thirty-two wide channel vectorized row major Int8 format.", "int8"),
                                        ("Row major linear BFloat16 format", "bfloat16"), ("Bool", "bool"),
                                        ("Row major linear Int64", "int64"), ("N/A due to dynamic shapes", "")])
def test_parse_datatype(text, dtype):
    assert LY.parse_datatype(text) == dtype


def test_layer_name_convention():
    assert LY.layer_name("tensorrt.element_wise", 3) == "element_wise_3"
    assert LY.layer_name("tensorrt.broadcast", 4, "expand") == "broadcast_4.expand"


# =============================================================================================
# progress


def test_progress_log_records_nested_phases_and_can_cancel():
    ticks = iter(range(100))
    events = []
    log = P.ProgressLog(lambda ev, rec: events.append((ev, rec.name)), clock=lambda: float(next(ticks)))
    log.phase_start("Building engine", None, 2)
    log.phase_start("Tactic selection", "Building engine", 4)
    assert log.step_complete("Tactic selection", 0) is True
    assert log.step_complete("Tactic selection", 3) is True
    log.phase_finish("Tactic selection")
    log.cancel()
    assert log.step_complete("Building engine", 0) is False
    assert log.notes() == ["build phase: Building engine (1/2 steps, unfinished)",
                           "build phase:   Tactic selection (4/4 steps, 1.000s)"]
    log.phase_finish("Building engine")
    assert events[0] == ("start", "Building engine") and events[-1] == ("finish", "Building engine")
    assert log.step_complete("never started", 0) is False  # cancelled


# =============================================================================================
# result arrays


def test_device_array_on_cuda_exposes_cuda_array_interface_and_copies_to_host():
    cudart = FakeCudart()
    cuda = C.Cuda(cudart)
    buf = C.DeviceBuffer(cuda, 12)
    np.frombuffer(cudart.mem[buf.ptr], np.float32)[:] = [1, 2, 3]
    arr = C.DeviceArray(buf, (3,), np.float32, cuda=cuda)
    cai = arr.__cuda_array_interface__
    assert cai == {"shape": (3,), "typestr": "<f4", "data": (buf.ptr, False), "version": 3, "strides": None}
    assert C._cuda_array(arr, np.dtype(np.float32)) == (buf.ptr, (3,))
    assert C._cuda_array(arr, np.dtype(np.int32)) is None  # dtype mismatch: copy instead
    assert arr.get().tolist() == [1.0, 2.0, 3.0] and np.asarray(arr).tolist() == [1.0, 2.0, 3.0]
    assert repr(arr) == "DeviceArray(shape=(3,), dtype=float32, device=cuda:0)"
    from tripy_lab.core.arrays import to_host

    assert to_host(arr).tolist() == [1.0, 2.0, 3.0]  # no __dlpack__: falls through to .get()
    ptr = buf.ptr
    del arr, buf
    gc.collect()
    assert ptr not in cudart.mem  # freed with its last reference


def test_host_device_array_and_strided_cuda_arrays():
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    arr = C.DeviceArray(types.SimpleNamespace(ptr=src.ctypes.data, keep=src), (2, 3), np.float32, device=(1, 0))
    np.testing.assert_array_equal(arr.get(), src)
    with pytest.raises(AttributeError):
        arr.__cuda_array_interface__  # noqa: B018
    f32 = np.dtype(np.float32)
    contiguous = types.SimpleNamespace(__cuda_array_interface__={
        "shape": (2, 3), "typestr": "<f4", "data": (1000, False), "strides": (12, 4), "version": 3})
    strided = types.SimpleNamespace(__cuda_array_interface__={
        "shape": (2, 3), "typestr": "<f4", "data": (1000, False), "strides": (4, 8), "version": 3})
    assert C._cuda_array(contiguous, f32) == (1000, (2, 3))
    assert C._cuda_array(strided, f32) is None
    assert C._cuda_array(np.zeros(3, np.float32), f32) is None


def test_jax_gpu_arrays_are_used_in_place_and_cpu_ones_are_not():
    class Dev:
        def __init__(self, platform):
            self.platform = platform

    class JaxLike:
        def __init__(self, platform):
            self.dtype, self.shape, self._p, self.ready = np.dtype(np.float32), (4,), platform, False

        def devices(self):
            return {Dev(self._p)}

        def block_until_ready(self):
            self.ready = True
            return self

        def unsafe_buffer_pointer(self):
            return 4096

    gpu = JaxLike("gpu")
    assert C._cuda_array(gpu, np.dtype(np.float32)) == (4096, (4,)) and gpu.ready
    assert C._cuda_array(JaxLike("cpu"), np.dtype(np.float32)) is None


def test_output_allocator_prefers_cupy(monkeypatch):
    made = []

    def empty(shape, dtype):
        arr = types.SimpleNamespace(shape=shape, dtype=dtype, data=types.SimpleNamespace(ptr=5000 + len(made)))
        made.append(arr)
        return arr

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(empty=empty))
    kind, alloc = C.output_allocator(C.Cuda(FakeCudart()))
    arr, ptr = alloc((2, 3), np.dtype(np.float16))
    assert kind == "cupy" and arr is made[0] and ptr == 5000 and arr.shape == (2, 3)


def test_output_allocator_falls_back_to_device_arrays(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import fails
    monkeypatch.setitem(sys.modules, "torch", None)
    cudart = FakeCudart()
    kind, alloc = C.output_allocator(C.Cuda(cudart))
    arr, ptr = alloc((2, 2), np.dtype(np.int32))
    assert kind == "tripy_lab DeviceArray" and isinstance(arr, C.DeviceArray) and ptr in cudart.mem
    assert cudart.mem[ptr].nbytes == 16


# =============================================================================================
# the whole build and run against the stand-ins


def test_build_orchestration_with_stand_ins(fake_env, tp, tmp_path):
    trt, cudart = fake_env
    prog = _exp_add_program(tp)
    cache = tmp_path / "trt.cache"
    compiled = E.TensorRTEngine().build(prog, BuildOptions(optimization_level=5, timing_cache_path=str(cache)))
    net, config = trt.built[-1]
    assert net.flags == 2  # STRONGLY_TYPED
    assert config.builder_optimization_level == 5 and config.profiling_verbosity is trt.ProfilingVerbosity.DETAILED
    assert config.profiles[0].calls == [("set_shape", "x", (1, 3), (2, 3), (4, 3))]
    assert [layer.name for layer in net.layers] == ["unary_0", "element_wise_1"]
    report = compiled.report
    assert report.engine == "tensorrt" and report.device == "gpu:0 (Fake GPU)"
    assert report.cache["status"] == "created" and report.cache["hit"] is False
    assert cache.read_bytes() == b"|timed" and report.cache["bytes_saved"] == 6
    notes = "\n".join(report.notes)
    assert "build phase: Building engine (2/2 steps" in notes and "build phase:   Tactic selection (3/3 steps" in notes
    assert "TensorRT warning: fake warning" in notes and "chatter" not in notes
    assert "builder_optimization_level=5" in notes
    assert "unary_0" in report.extra_stages["tensorrt_network"]
    engine_layers = json.loads(report.extra_stages["tensorrt_engine_layers"])["Layers"]
    assert engine_layers[0]["Name"] == "PWN(unary_0, element_wise_1)"
    (row,) = compiled.layers
    assert row.kind == "pointwise fusion (PointWiseV2)" and row.mlir_ops == (0, 1)
    assert row.source_ops == tuple(op_name for op_name in prog.origins)
    assert row.source_lines and all(line.startswith("test_tensorrt_engine.py:") for line in row.source_lines)
    assert compiled.plan == b"PLAN\0\0" and compiled.output_kind == "tripy_lab DeviceArray"
    assert "results are tripy_lab DeviceArray arrays on the GPU" in notes
    # a second build finds the timing cache
    again = E.TensorRTEngine().build(prog, BuildOptions(timing_cache_path=str(cache)))
    assert again.report.cache["status"] == "loaded" and again.report.cache["hit"] is True
    assert again.report.cache["bytes_loaded"] == 6


def test_run_plumbing_with_stand_ins(fake_env, tp):
    trt, cudart = fake_env
    prog = _exp_add_program(tp)
    compiled = E.TensorRTEngine().build(prog, BuildOptions())
    engine = compiled._engine
    out_name = prog.output_names[0]

    def compute(ctx):  # what the engine would do: read x from "device", write exp(x) + x
        shape = ctx.shapes["x"]
        n = math.prod(shape)
        x = np.frombuffer(ctypes.string_at(ctx.addresses["x"], n * 4), np.float32).reshape(shape)
        out = (np.exp(x) + x).astype(np.float32)
        ctypes.memmove(ctx.addresses[out_name], out.ctypes.data, out.nbytes)

    engine.compute = compute
    x = np.arange(6, dtype=np.float32).reshape(2, 3) / 10
    (out,) = compiled.run([x])
    ctx = engine.contexts[0]
    assert ctx.shapes == {"x": (2, 3)} and ctx.streams == [77]
    assert isinstance(out, C.DeviceArray) and out.shape == (2, 3) and out.dtype == np.float32
    assert cudart.syncs >= 1  # the stream is synchronized before run returns
    np.testing.assert_allclose(out.get(), np.exp(x) + x, rtol=1e-6)
    from tripy_lab.core.arrays import to_host

    np.testing.assert_allclose(to_host(out), np.exp(x) + x, rtol=1e-6)
    # an output fed back in is used in place (no host round trip)
    copies = len(cudart.copies)
    (out2,) = compiled.run([out])
    assert ctx.addresses["x"] == out.ptr and len(cudart.copies) == copies
    np.testing.assert_allclose(out2.get(), np.exp(out.get()) + out.get(), rtol=1e-6)
    with pytest.raises(TripyException, match="Expected 1 arguments"):
        compiled.run([])


def test_shape_tensor_inputs_are_passed_on_the_host(fake_env, tp):
    trt, cudart = fake_env
    from tripy_lab import pipeline

    def f(x, n):
        return tp.reshape(x, (n, -1))

    prog = pipeline.trace(f, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32),
                                   tp.DimensionInputInfo((1, 2, 3))]).lower().program
    compiled = E.TensorRTEngine().build(prog, BuildOptions())
    net, config = trt.built[-1]
    assert ("set_shape_input", "n", [1], [2], [3]) in config.profiles[0].calls
    engine = compiled._engine
    seen = {}
    engine.output_shape = lambda ctx, name: (3, 2)

    def compute(ctx):
        seen["n"] = np.frombuffer(ctypes.string_at(ctx.addresses["n"], 4), np.int32)[0]
        seen["n on device"] = ctx.addresses["n"] in cudart.mem
        seen["x on device"] = ctx.addresses["x"] in cudart.mem

    engine.compute = compute
    x = np.ones((2, 3), np.float32)
    (out,) = compiled.run([x, np.asarray(3, np.int32)])
    ctx = engine.contexts[0]
    assert seen["n"] == 3 and "n" not in ctx.shapes  # host value, no set_input_shape
    assert seen["x on device"] and not seen["n on device"]
    assert ctx.addresses["x"] not in cudart.mem  # the input's device copy is freed after the run
    assert out.shape == (3, 2)


def test_shape_tensor_outputs_are_returned_on_the_host(fake_env):
    trt, cudart = fake_env
    p = Prog()
    x = p.input("x", (None, 3), info=InputInfo([(1, 2, 4), 3], dtypes.float32))
    prog = p.program(p.add(d.ShapeOp(x)))
    compiled = E.TensorRTEngine().build(prog, BuildOptions())
    engine = compiled._engine
    engine.net.outputs[0].is_shape_tensor = True  # what TensorRT would decide for a shape output
    engine.output_shape = lambda ctx, name: (2,)

    def compute(ctx):
        np.frombuffer((ctypes.c_int32 * 2).from_address(ctx.addresses["out0"]), np.int32)[:] = ctx.shapes["x"]

    engine.compute = compute
    (out,) = compiled.run([np.zeros((4, 3), np.float32)])
    assert isinstance(out, np.ndarray) and out.tolist() == [4, 3]


def test_build_failure_reports_tensorrt_errors(fake_env, tp):
    trt, _ = fake_env
    real = trt.Builder.build_serialized_network

    def fail(self, net, config):
        self.logger.log(trt.ILogger.Severity.ERROR, "no implementation for layer unary_0")
        return None

    trt.Builder.build_serialized_network = fail
    try:
        with pytest.raises(TripyException, match="could not build") as err:
            E.TensorRTEngine().build(_exp_add_program(tp), BuildOptions())
        assert "no implementation for layer unary_0" in str(err.value)
    finally:
        trt.Builder.build_serialized_network = real


# =============================================================================================
# the real thing (skipped unless TensorRT and a CUDA GPU are present)


@pytest.mark.tensorrt
@real_tensorrt
def test_real_tensorrt_matches_reference(tp, tmp_path):
    from tripy_lab.engine.reference.build import ReferenceEngine

    prog = _exp_add_program(tp)
    compiled = E.TensorRTEngine().build(prog, BuildOptions(timing_cache_path=str(tmp_path / "c")))
    x = np.random.default_rng(0).standard_normal((3, 3)).astype(np.float32)
    (out,) = compiled.run([x])
    compiled.synchronize()
    (ref,) = ReferenceEngine().build(prog, BuildOptions()).run([x])
    np.testing.assert_allclose(out.get(), ref, rtol=1e-5, atol=1e-5)
    assert compiled.layers and any(r.source_ops for r in compiled.layers)
    again = E.TensorRTEngine().build(prog, BuildOptions(timing_cache_path=str(tmp_path / "c")))
    assert again.report.cache["hit"] is True


@pytest.mark.tensorrt
@real_tensorrt
def test_real_tensorrt_dimension_input_and_broadcast(tp):
    from tripy_lab import pipeline
    from tripy_lab.engine.reference.build import ReferenceEngine

    def f(x, n):
        return tp.reshape(x + tp.ones((3,)), (n, -1))

    prog = pipeline.trace(f, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32),
                                   tp.DimensionInputInfo((1, 2, 3))]).lower().program
    compiled = E.TensorRTEngine().build(prog, BuildOptions())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    n = np.asarray(3, np.int32)
    (out,) = compiled.run([x, n])
    (ref,) = ReferenceEngine().build(prog, BuildOptions()).run([x, n])
    np.testing.assert_allclose(np.asarray(out), ref)
