"""The xla engine's split signatures (``xla_split``): a GEMM with unaligned rows at the end of the program (a GPT's
lm head) compiled as an executable of its own. On CPU ``MODE = "always"`` takes the same path as CUDA's "auto"
(without the GPU-only XLA options): the two executables must give the one executable's numbers, name the head's
kernels in the layer table and the profile, and go through the persistent store like any other."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.base import BuildOptions
from tripy_lab.engine.xla import split as xla_split

jax = pytest.importorskip("jax")

D, V = 16, 1027  # V: not a multiple of 8, at least MIN_COLUMNS
RNG = np.random.default_rng(5)
EMB = (RNG.standard_normal((V, D)) * 0.3).astype(np.float16)
W1 = (RNG.standard_normal((D, D)) * 0.3).astype(np.float16)


def lm(x):  # a tied lm head after one layer, like GPT-2's
    h = tp.relu(x @ tp.Tensor(W1))
    return h @ tp.transpose(tp.Tensor(EMB), 0, 1)


def lm_two_outputs(x):
    h = tp.relu(x @ tp.Tensor(W1))
    logits = h @ tp.transpose(tp.Tensor(EMB), 0, 1)
    return h, tp.reshape(logits, (x.shape[0] * x.shape[1], V))  # a shape read from a data argument, in the head


def numpy_lm(x):
    h = np.maximum(x.astype(np.float32) @ W1.astype(np.float32), 0).astype(np.float16)
    return h.astype(np.float32) @ EMB.T.astype(np.float32)


@pytest.fixture
def split_on(monkeypatch):
    monkeypatch.setattr(xla_split, "MODE", "always")
    monkeypatch.setattr(xla_split, "MIN_ROWS", 8)


def build(fn, shape=((1, 2, 4), (1, 8, 16), D), mode="always", cache_dir=None):
    old = xla_split.MODE
    xla_split.MODE = mode
    try:
        return tp.compile(fn, args=[tp.InputInfo(shape, tp.float16)], engine="xla",
                          **({"cache_dir": cache_dir} if cache_dir else {}))
    finally:
        xla_split.MODE = old


def notes(exe) -> str:
    return "\n".join(exe.stages["built"].report.notes)


def test_find_cuts_before_the_last_unaligned_gemm(split_on):
    exe = build(lm)
    engine = exe.stages["built"].compiled
    split = engine._split_plan()
    plans = {p.index: p for p in engine._plans}
    assert plans[split.gemm].op.name == "tensorrt.matrix_multiply"
    assert plans[split.gemm].infos[0][0][-1] == V
    head_ops = sorted(plans[i].op.name for i in split.head)
    assert "tensorrt.transpose" in head_ops and "tensorrt.constant" in head_ops  # the weight's constant-only ops
    assert [v.owner.name for v in split.crossing] == ["tensorrt.activation"]  # relu(x @ W1): the head's input
    assert "two executables" in notes(exe)


@pytest.mark.parametrize("vocab, dtype", [(1024, np.float16), (1000, np.float16), (1027, np.float32)])
def test_no_cut_for_aligned_narrow_or_f32_gemms(split_on, vocab, dtype):
    emb = EMB[:vocab].astype(dtype)
    w1 = W1.astype(dtype)

    def other(x):
        return tp.relu(x @ tp.Tensor(w1)) @ tp.transpose(tp.Tensor(emb), 0, 1)

    exe = tp.compile(other, args=[tp.InputInfo((2, 8, D), tp.float16 if dtype == np.float16 else tp.float32)],
                     engine="xla")
    assert exe.stages["built"].compiled._split_plan() is None
    assert "two executables" not in notes(exe)


def test_split_gives_the_one_executables_numbers(split_on):
    split, whole = build(lm), build(lm, mode="off")
    assert "two executables" in notes(split) and "two executables" not in notes(whole)
    for shape in ((1, 8, D), (2, 16, D), (2, 11, D)):
        x = RNG.standard_normal(shape).astype(np.float16)
        a, b = np.asarray(split(x)), np.asarray(whole(x))
        assert a.shape == shape[:2] + (V,) and a.dtype == np.float16
        np.testing.assert_array_equal(a.view(np.uint16), b.view(np.uint16))  # same ops, same bits
        np.testing.assert_allclose(a.astype(np.float32), numpy_lm(x), rtol=2e-2, atol=2e-2)


def test_small_signatures_stay_one_executable(monkeypatch):
    monkeypatch.setattr(xla_split, "MODE", "always")
    monkeypatch.setattr(xla_split, "MIN_ROWS", 20)  # opt (2 x 8 = 16 rows) below, max (4 x 16 = 64) above
    exe = build(lm)
    text = notes(exe)
    assert "x=2x8x16: one executable" in text and "has 16 rows, fewer than xla_split.MIN_ROWS = 20" in text
    assert "x=4x16x16: two executables" in text
    built = exe.stages["built"].compiled
    kinds = {b.label: isinstance(b.compiled, xla_split.SplitCompiled) for b in built._execs.values()}
    assert kinds["x=2x8x16"] is False and kinds["x=4x16x16"] is True
    x = RNG.standard_normal((4, 16, D)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(exe(x)).astype(np.float32), numpy_lm(x), rtol=2e-2, atol=2e-2)


def test_two_outputs_and_a_shape_from_the_data_cross_the_cut(split_on):
    split, whole = build(lm_two_outputs), build(lm_two_outputs, mode="off")
    assert "two executables" in notes(split)
    x = RNG.standard_normal((2, 16, D)).astype(np.float16)
    (h1, l1), (h2, l2) = split(x), whole(x)
    np.testing.assert_array_equal(np.asarray(h1), np.asarray(h2))
    assert np.asarray(l1).shape == (32, V)
    np.testing.assert_array_equal(np.asarray(l1), np.asarray(l2))


def test_layer_table_and_profile_name_the_heads_kernels(split_on):
    from tripy_lab.lab import profile

    exe = build(lm)
    layers = exe.stages["built"].layers
    head = [r for r in layers if r.name.startswith(xla_split.HEAD_PREFIX)]
    body = [r for r in layers if not r.name.startswith(xla_split.HEAD_PREFIX)]
    assert head and body
    line = lm.__code__.co_firstlineno + 2  # the lm head's line
    assert any(f"test_xla_split.py:{line}" in r.source_lines for r in head), [r.as_dict() for r in head]
    assert "jit_main_head" in exe.stages["built"].report.extra_stages["hlo"]
    df = profile(exe, calls=5)
    rows = df[df["layer"].str.startswith(xla_split.HEAD_PREFIX)]
    assert len(rows) == len(head) and rows["time_ms"].sum() > 0, df.to_dict("records")
    assert (df["kind"] == "unlisted").sum() == 0  # every event was joined to a row of the table


def test_split_signatures_hit_the_persistent_store(split_on, tmp_path):
    from tripy_lab import pipeline

    lowered = pipeline.trace(lm, args=[tp.InputInfo((2, 16, D), tp.float16)]).lower()
    opts = BuildOptions(compilation_cache_dir=str(tmp_path / "store"))
    from tripy_lab.engine.xla.build import XlaEngine

    first = XlaEngine().build(lowered.program, opts)
    second = XlaEngine().build(lowered.program, opts)
    assert first.report.cache["persistent_misses"] == 1, first.report.notes
    assert second.report.cache["persistent_hits"] == 1, second.report.notes
    assert isinstance(next(iter(second._execs.values())).compiled, xla_split.SplitCompiled)
    x = RNG.standard_normal((2, 16, D)).astype(np.float16)
    np.testing.assert_array_equal(np.asarray(first.run([x])[0]), np.asarray(second.run([x])[0]))


def test_a_foreign_payload_is_refused_by_the_split_loader(split_on, tmp_path):
    exe = build(lm)
    built = next(b for b in exe.stages["built"].compiled._execs.values()
                 if isinstance(b.compiled, xla_split.SplitCompiled))
    with pytest.raises(ValueError, match="not a split executable"):
        built.lowered.load(b"some other executable", jax.devices()[0])
    payload = built.compiled.serialize()
    again = built.lowered.load(payload, jax.devices()[0])
    assert isinstance(again, xla_split.SplitCompiled)


def test_body_options_only_on_gpus():
    assert xla_split.body_options("cpu") == {} and xla_split.head_options("cpu") == {}
    assert xla_split.body_options("gpu") == xla_split.BODY_OPTIONS


def test_an_unknown_body_option_is_dropped_with_a_note(split_on, monkeypatch, tmp_path):
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path))  # a real compile, not a stored one
    monkeypatch.setattr(xla_split, "body_options", lambda platform: {"xla_no_such_option_here": True})
    exe = build(lm)
    assert "dropped XLA option xla_no_such_option_here (unknown to this jaxlib)" in notes(exe)
    x = RNG.standard_normal((2, 16, D)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(exe(x)).astype(np.float32), numpy_lm(x), rtol=2e-2, atol=2e-2)


def test_the_split_options_are_part_of_the_store_key(split_on, monkeypatch, tmp_path):
    from tripy_lab import pipeline
    from tripy_lab.engine.xla.build import XlaEngine

    program = pipeline.trace(lm, args=[tp.InputInfo((2, 16, D), tp.float16)]).lower().program
    opts = BuildOptions(compilation_cache_dir=str(tmp_path / "store"))
    assert XlaEngine().build(program, opts).report.cache["persistent_misses"] == 1
    monkeypatch.setattr(xla_split, "body_options", lambda platform: {"xla_cpu_enable_fast_math": False})
    other = XlaEngine().build(program, opts)
    assert other.report.cache["persistent_hits"] == 0 and other.report.cache["persistent_misses"] == 1


@pytest.mark.parametrize("untuned", [False, True])
def test_untuned_splits_compile_body_and_head_at_once(split_on, monkeypatch, tmp_path, untuned):
    """Without autotuning (the profile's min and max on a GPU) the head compiles on a thread beside the body; with
    it, one after the other (two autotuners on one GPU would time each other's kernels)."""
    import threading

    from tripy_lab.engine.xla import build as xla

    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path))  # a real compile, not a stored one
    monkeypatch.setattr(xla.XlaCompiled, "_untuned", lambda self, why, n: untuned)
    threads = {}
    real = xla_split.SplitLowered._compile

    def compile_part(self, part, extra):
        threads[part] = threading.current_thread()
        return real(self, part, extra)

    monkeypatch.setattr(xla_split.SplitLowered, "_compile", compile_part)
    old = xla_split.MODE
    xla_split.MODE = "always"
    try:
        from tripy_lab import pipeline

        built = pipeline.trace(lm, args=[tp.InputInfo((2, 16, D), tp.float16)]).lower().build(engine="xla")
    finally:
        xla_split.MODE = old
    assert set(threads) == {"body", "head"}
    assert (threads["head"] is not threads["body"]) is untuned
    x = RNG.standard_normal((2, 16, D)).astype(np.float16)
    np.testing.assert_allclose(np.asarray(built.executable()(x)).astype(np.float32), numpy_lm(x), rtol=2e-2,
                               atol=2e-2)


@pytest.fixture
def n_major(split_on, monkeypatch):
    monkeypatch.setattr(xla_split, "HEAD_LAYOUT", "n_major")


def test_head_layout_is_n_major_on_cuda_only():
    assert xla_split.HEAD_LAYOUT == "auto"
    assert xla_split.head_layout("cpu") == "rows" and xla_split.head_layout("cuda") == "n_major"


def test_n_major_logits_hold_the_row_major_numbers(n_major):
    split, whole = build(lm_two_outputs), build(lm_two_outputs, mode="off")
    assert "output(s) 1 laid out with the last dimension major" in notes(split)
    x = RNG.standard_normal((2, 16, D)).astype(np.float16)
    (h1, l1), (h2, l2) = split(x), whole(x)
    last = split.stages["built"].compiled._last
    assert last[1].format.layout.major_to_minor == (1, 0)  # the logits: N major
    assert last[0].format.layout.major_to_minor == (0, 1, 2)  # h: the body's output, row-major as always
    np.testing.assert_array_equal(np.asarray(l1).view(np.uint16), np.asarray(l2).view(np.uint16))
    np.testing.assert_array_equal(np.asarray(h1), np.asarray(h2))
    assert np.from_dlpack(l1).strides == (2, 2 * 32)  # handed on as a strided view, not copied
    np.testing.assert_allclose(np.asarray(l1).astype(np.float32), numpy_lm(x).reshape(32, V), rtol=2e-2, atol=2e-2)


def test_n_major_logits_feed_another_executable_and_eager_ops(n_major):
    _, logits = build(lm_two_outputs)(RNG.standard_normal((2, 16, D)).astype(np.float16))
    want = np.asarray(logits).astype(np.float32)

    def scale(a):
        return a * 2.0

    after = tp.compile(scale, args=[tp.InputInfo((32, V), tp.float16)], engine="xla")
    for _ in range(2):  # the miss and the cached call both copy the argument to row-major
        np.testing.assert_array_equal(np.asarray(after(logits)).astype(np.float32), want * 2)
    np.testing.assert_allclose(np.asarray(logits + 1.0).astype(np.float32), want + 1, rtol=1e-3, atol=1e-3)

    def rows_of(a, n):  # a dimension argument: the call path that picks the data arguments out
        return tp.reshape(a, (n, -1)) * 2.0

    with_dim = tp.compile(rows_of, args=[tp.InputInfo((32, V), tp.float16), tp.DimensionInputInfo((16, 32, 64))],
                          engine="xla")
    for _ in range(2):
        got = np.asarray(with_dim(logits, tp.DimensionSize(16))).astype(np.float32)
        np.testing.assert_array_equal(got, (want * 2).reshape(16, -1))


def test_a_call_error_that_is_not_about_layouts_is_raised_again():
    from tripy_lab.engine.xla.running import _call_relaid

    calls = []
    with pytest.raises(ValueError, match="something else"):
        _call_relaid(ValueError("something else"), lambda *a: calls.append(a), [np.zeros(2)], ())
    assert calls == []


def test_the_head_layout_is_part_of_the_store_key(split_on, monkeypatch, tmp_path):
    from tripy_lab import pipeline
    from tripy_lab.engine.xla.build import XlaEngine

    program = pipeline.trace(lm, args=[tp.InputInfo((2, 16, D), tp.float16)]).lower().program
    opts = BuildOptions(compilation_cache_dir=str(tmp_path / "store"))
    rows = XlaEngine().build(program, opts)
    monkeypatch.setattr(xla_split, "HEAD_LAYOUT", "n_major")
    other = XlaEngine().build(program, opts)
    assert other.report.cache["persistent_hits"] == 0 and other.report.cache["persistent_misses"] == 1
    x = RNG.standard_normal((2, 16, D)).astype(np.float16)
    a, b = rows.run([x])[0], other.run([x])[0]
    assert a.format.layout.major_to_minor == (0, 1, 2) and b.format.layout.major_to_minor == (2, 0, 1)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
