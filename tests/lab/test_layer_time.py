"""True timing columns and per-layer time: compute (engine-measured) vs latency vs back-to-back, and the
layer table with a time per layer whose sum matches the compute time."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.lab import benchmark, profile
from tripy_lab.lab.measure import layer_time, timing
from tripy_lab.lab.views import tabs

pytest.importorskip("jax")
pytest.importorskip("pandas")

W = np.random.default_rng(0).standard_normal((192, 192)).astype(np.float32) / 14


def chain(x, w):
    h = tp.tanh(x @ w)
    h = tp.exp(h @ w) * 0.5
    return tp.sum(h @ w, dim=-1)


@pytest.fixture(scope="module")
def xla_exe():
    return tp.compile(chain, args=[tp.InputInfo(((64, 192, 256), 192), tp.float32), tp.Tensor(W)], engine="xla")


def test_xla_timing_columns_are_measured(xla_exe):
    df = benchmark(xla_exe, shapes=["min", "opt"], warmup=3, iters=30)
    assert list(df.columns) == timing.COLUMNS
    assert (df["error"] == "").all()
    assert (df["compute_method"].str.contains("XLA profiler")).all()
    assert (df["compute_ms"] > 0).all()
    # the computation's own events lie inside each synchronized call: compared on the same (profiled) calls of
    # the last row, since latency and compute come from separate batches that a loaded host can shift apart
    prof = xla_exe._compiled.last_profile
    assert df["compute_ms"].iloc[-1] == pytest.approx(float(np.median(prof.compute_s)) * 1e3)
    np.testing.assert_allclose(df["throughput_per_s"], 1e3 / df["back_to_back_ms"])


@pytest.mark.timing
def test_xla_compute_lies_inside_the_call(xla_exe):
    benchmark(xla_exe, shapes=["opt"], warmup=3, iters=30)
    prof = xla_exe._compiled.last_profile
    assert float(np.median(prof.compute_s)) <= float(np.median(prof.wall_s)), (prof.compute_s, prof.wall_s)


def _opt_profile(xla_exe):
    inputs = timing.resident_inputs(xla_exe, timing.make_inputs(xla_exe.input_infos,
                                                                timing.shapes_at(xla_exe.input_infos, "opt")))
    return timing.profile_engine(xla_exe, inputs, calls=8)


def test_profile_calls_have_a_compute_and_a_wall_time(xla_exe):
    prof = _opt_profile(xla_exe)
    assert len(prof.compute_s) == 8 and all(c > 0 for c in prof.compute_s)
    assert len(prof.wall_s) == 8 and all(w > 0 for w in prof.wall_s), prof


@pytest.mark.timing
def test_profile_calls_lie_inside_their_wall_time(xla_exe):
    prof = _opt_profile(xla_exe)
    assert all(0 < c <= w for c, w in zip(prof.compute_s, prof.wall_s)), prof


@pytest.mark.timing
def test_layer_times_sum_to_the_compute_time(xla_exe):
    df = profile(xla_exe, calls=15)
    assert abs(df.attrs["layers_ms"] - df.attrs["compute_ms"]) <= 0.15 * df.attrs["compute_ms"], (
        df.attrs, xla_exe._compiled.last_profile)


def test_layer_times_name_the_layers_and_the_lines(xla_exe):
    df = profile(xla_exe, calls=15)
    assert list(df.columns) == layer_time.COLUMNS
    assert df.attrs["compute_ms"] > 0
    assert df["time_ms"].sum() == pytest.approx(df.attrs["layers_ms"])
    # the GEMMs dominate and point at the user's lines
    top = df.sort_values("time_ms").iloc[-1]
    assert "test_layer_time.py" in top["source_lines"]
    assert set(xla_exe.stages["built"].layers[i].name for i in range(len(df))) <= set(df["layer"])


def test_the_layer_times_table_reads_like_the_labs_other_tables(xla_exe):
    """Tutorial 05 shows ``profile(exe)``: unit headers and 3 digits, not ``time_ms 1.175655``, and no index."""
    import re

    df = profile(xla_exe, calls=5)
    page, text = df._repr_html_(), repr(df)
    assert "time (ms)" in page and "time_ms" not in page and 'class="tripy-table"' in page
    assert not re.search(r">\s*\d+\.\d{5,}\s*<", page), "unrounded numbers in the table"
    assert "time (ms)" in text and not re.search(r"\d\.\d{5,}", text)
    assert df.to_trace  # still the frame that writes a trace


def test_engine_tab_shows_layer_times_and_shaded_source(xla_exe):
    profile(xla_exe, calls=5)
    page = tabs.EngineView.of(xla_exe.stages["built"]).html()
    assert "tripy-layer-time" in page and "time (ms)" in page
    assert "tripy-source-heat" in page and "h = tp.tanh(x @ w)" in page


def test_reference_engine_times_each_mlir_op():
    exe = tp.compile(chain, args=[tp.InputInfo((32, 192), tp.float32), tp.Tensor(W)], engine="reference")
    df = profile(exe, calls=3, warmup=1)
    assert len(df) == len(exe.stages["built"].layers)
    assert df.attrs["method"] == "CPU: wall time of the interpreter, per MLIR op"
    mm = df[df["kind"] == "matrix_multiply"]
    assert len(mm) == 3 and (mm["time_ms"] > 0).all()
    times = layer_time.line_times(exe._compiled.last_profile, exe._program)
    assert {line for _, line in times} >= {chain.__code__.co_firstlineno + k for k in (1, 2, 3)}


def test_command_buffer_kernels_are_attributed_by_name_and_schedule():
    from tripy_lab.engine.base import LayerRecord
    from tripy_lab.engine.xla.profile import _Event, attribute

    def layer(name, kind):
        return LayerRecord(name, kind, (), (), (), ())

    layers = [layer("loop_add_fusion.1", "loop fusion"), layer("cublas-lt-matmul.1", "GEMM (cuBLAS)"),
              layer("dot_product_attention_fwd.4", "attention (cuDNN)"), layer("gemm_fusion_dot.2", "GEMM (Triton)")]
    line = ("/device:GPU:0", "Stream #1")
    evs = [_Event("command_buffer_1", n, t, t + 1, line, None) for t, n in enumerate(
        ["loop_add_fusion_1", "sm90_xmma_gemm_f16", "Memset 3", "cudnn_generated_sdpa_kernel0", "gemm_fusion_dot_2"])]
    got = [name for name, _ in attribute(evs, layers)]
    assert got == ["loop_add_fusion.1", "cublas-lt-matmul.1", "dot_product_attention_fwd.4",
                   "dot_product_attention_fwd.4", "gemm_fusion_dot.2"]
    direct = [_Event("gemm_fusion_dot.2", "whatever", 0, 1, line, None)]
    assert [n for n, _ in attribute(direct, layers)] == ["gemm_fusion_dot.2"]


def test_a_reused_kernel_goes_to_the_next_identical_layer():
    from tripy_lab.engine.base import LayerRecord
    from tripy_lab.engine.xla.profile import _Event, attribute

    layers = [LayerRecord(f"loop_convert_fusion{s}", "loop fusion", (), (), ((8, 4),), ("float16",))
              for s in ("", ".1", ".2")]
    line = ("/device:GPU:0", "Stream #1")
    evs = [_Event("command_buffer_1", "loop_convert_fusion", t, t + 1, line, None) for t in range(3)]
    assert [n for n, _ in attribute(evs, layers)] == ["loop_convert_fusion", "loop_convert_fusion.1",
                                                      "loop_convert_fusion.2"]


def test_twins_run_out_of_table_order_each_get_one_kernel():
    """One kernel shared by identical fusions that run after the kernels of later layers (the layer table's
    order is not the launch order): each twin still gets one launch, none is left at zero."""
    from tripy_lab.engine.base import LayerRecord
    from tripy_lab.engine.xla.profile import _Event, attribute

    twins = [LayerRecord(f"loop_slice_fusion{s}", "loop fusion", (), (), ((768, 768),), ("float16",))
             for s in ("", ".1", ".2")]
    others = [LayerRecord(f"loop_add_fusion.{k}", "loop fusion", (), (), ((8, 768),), ("float16",)) for k in (4, 5)]
    line = ("/device:GPU:0", "Stream #1")  # each weight slice launched next to the layer that reads it
    kernels = ["loop_slice_fusion", "loop_add_fusion_4", "loop_slice_fusion", "loop_add_fusion_5", "loop_slice_fusion"]
    evs = [_Event("command_buffer_0", n, t, t + 1, line, None) for t, n in enumerate(kernels)]
    got = [name for name, _ in attribute(evs, [*twins, *others])]
    assert got == ["loop_slice_fusion", "loop_add_fusion.4", "loop_slice_fusion.1", "loop_add_fusion.5",
                   "loop_slice_fusion.2"], got


def test_library_kernels_go_to_a_call_of_their_own_library():
    """cuBLAS kernels go to GEMM layers and cuDNN kernels to the attention layer even when the launches
    come in another order than the table's; a split-K reduction stays with its GEMM; memsets go with the
    kernel after them."""
    from tripy_lab.engine.base import LayerRecord
    from tripy_lab.engine.xla.profile import _Event, attribute

    def layer(name, kind):
        return LayerRecord(name, kind, (), (), (), ())

    layers = [layer("custom-call.1", "GEMM (cuBLAS)"), layer("dot_product_attention_fwd.2", "attention (cuDNN)"),
              layer("custom-call.3", "GEMM (cuBLAS)"), layer("custom-call.4", "GEMM (cuBLAS)")]
    line = ("/device:GPU:0", "Stream #1")
    kernels = ["nvjet_sm90_hsh_112x64_TNN", "nvjet_sm90_hsh_112x64_TNN", "Memset 0",
               "cudnn_generated_fort_native_sdpa_sm90_flash_fprop", "nvjet_sm90_hsh_64x32_splitK_bias_TNT",
               "cublasLt::splitKreduce_kernel<32, 16>"]
    evs = [_Event("command_buffer_1", n, t, t + 1, line, None) for t, n in enumerate(kernels)]
    got = [name for name, _ in attribute(evs, layers)]
    assert got == ["custom-call.1", "custom-call.3", "dot_product_attention_fwd.2", "dot_product_attention_fwd.2",
                   "custom-call.4", "custom-call.4"], got


def test_a_surplus_library_kernel_stays_with_its_library():
    """A cuBLAS kernel with no GEMM layer left (a call that launched two) goes to the GEMM before it, so
    the cuDNN kernel after it still reaches the attention layer."""
    from tripy_lab.engine.base import LayerRecord
    from tripy_lab.engine.xla.profile import _Event, attribute

    layers = [LayerRecord("custom-call.1", "GEMM (cuBLAS)", (), (), (), ()),
              LayerRecord("dot_product_attention_fwd.2", "attention (cuDNN)", (), (), (), ())]
    line = ("/device:GPU:0", "Stream #1")
    kernels = ["nvjet_sm90_hsh_144x128_TNN", "nvjet_sm90_hsh_144x128_TNN", "cudnn_generated_sdpa_fprop"]
    evs = [_Event("command_buffer_1", n, t, t + 1, line, None) for t, n in enumerate(kernels)]
    assert [n for n, _ in attribute(evs, layers)] == ["custom-call.1", "custom-call.1",
                                                      "dot_product_attention_fwd.2"]


def test_back_to_back_calls_are_cut_by_their_kernel_count():
    """Calls queued back to back leave no gap between them in the trace: the last ``keep`` calls are cut off
    by the count of their kernels, and only when each of them launched the same kernels in the same order."""
    from tripy_lab.engine.xla.profile import _Event, _split_back_to_back

    line = ("/device:GPU:0", "Stream #1")
    names = ["loop_add_fusion", "nvjet_sm90_TNN", "cudnn_sdpa_fprop"]
    evs = [_Event("command_buffer_0", names[i % 3], i, i + 1, line, None) for i in range(12)]
    groups = _split_back_to_back(list(reversed(evs)), 4, 2)  # 2 warm calls, then the 2 kept
    assert [[e.start for e in g] for g in groups] == [[6, 7, 8], [9, 10, 11]]
    assert _split_back_to_back(evs[:11], 4, 2) is None  # a call lost a kernel
    assert _split_back_to_back(evs, 4, 5) is None  # more kept calls than ran
    other = [*evs[:6], *evs[7:9], evs[6], *evs[9:]]  # same count, but a kept call's kernels in another order
    other = [_Event(e.op, e.name, t, t + 1, line, None) for t, e in enumerate(other)]
    assert _split_back_to_back(other, 4, 2) is None


def test_a_wait_between_the_body_and_the_head_is_noted():
    """A split signature's device idles between its body and its head when the host launches the head later than
    the body ends: compute time holds the wait, no layer does, so the profile says how long it was."""
    from tripy_lab.engine.xla.profile import _call_times, _Event, _head_wait

    line = ("/device:GPU:0", "Stream #1")

    def call(t0, wait):  # body: two kernels of 10 ns; the head's kernel (100 ns) ``wait`` ns after them
        return [_Event("fusion", "k1", t0, t0 + 10, line, None), _Event("dot", "k2", t0 + 10, t0 + 20, line, None),
                _Event("head/dot", "k3", t0 + 20 + wait, t0 + 120 + wait, line, None)]

    groups = [call(0, 40), call(1000, 30), call(2000, 50)]
    assert _head_wait(groups) == pytest.approx(40e-9)
    assert _head_wait([[e for e in g if not e.op.startswith("head/")] for g in groups]) is None
    times = _call_times(groups, 3, [], [], [], True)
    assert any("the device waited 0 us a call between the body" in n for n in times.notes), times.notes
    assert sum(times.op_s.values()) == pytest.approx(120e-9) and np.median(times.compute_s) == pytest.approx(160e-9)
    quiet = _call_times([call(0, 2), call(1000, 2)], 2, [], [], [], True)  # 2 ns of 122: under 5 %
    assert not any("waited" in n for n in quiet.notes)


def _sustained_times(xla_exe):
    from tripy_lab.engine.xla import profile as xla_profile

    compiled = xla_exe._compiled
    args = xla_exe.engine_args(x=np.ones((64, 192), np.float32))
    compiled.run(args)
    compiled.synchronize()
    layers = compiled.layers
    return xla_profile.profile_calls(lambda: compiled.run(args), compiled.synchronize, 6, layers, sustain_s=0.05)


def test_sustained_profile_times_back_to_back_calls(xla_exe):
    """The GPU path (calls back to back after sustained work), run on this machine's device: each kept call
    is cut from the trace whole, with a compute and a period of its own."""
    times = _sustained_times(xla_exe)
    assert times is not None and times.back_to_back, times
    assert len(times.compute_s) == 6 and len(times.wall_s) == 6
    assert all(c > 0 and w > 0 for c, w in zip(times.compute_s, times.wall_s)), times


@pytest.mark.timing
def test_sustained_profile_compute_lies_inside_its_period_and_the_layers_sum_up(xla_exe):
    times = _sustained_times(xla_exe)
    assert all(0 < c <= w * 1.0001 for c, w in zip(times.compute_s[:-1], times.wall_s[:-1])), times
    compute = float(np.median(times.compute_s))
    assert abs(sum(times.op_s.values()) - compute) <= 0.15 * compute, times


def test_a_failing_call_is_not_taken_for_a_missing_profiler():
    """The sustained path starts its profiler session, then runs the calls: their own error reaches the user
    (a None here would read as "no profiler events" and time something else)."""
    from tripy_lab.core.errors import TripyException
    from tripy_lab.engine.xla import profile as xla_profile

    def call():
        raise TripyException("Argument 'x' has dtype float64, expected float32.")

    with pytest.raises(TripyException, match="dtype float64"):
        xla_profile.profile_calls(call, lambda: None, 3, sustain_s=0.01)
