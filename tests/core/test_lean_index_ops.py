"""Index arithmetic that the trace no longer spells out op by op (issue 31, the front half): a Python number is
one constant of the matched rank, slice bounds known at trace time are computed in Python, a ``-1`` is
inferred from the static dims, and ``t.shape[i]`` used as a shape entry is one ``get_dim`` (keepdim). Each
keeps the numbers: the programs below run on every engine against numpy."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.trace import optable

BATCH = tp.InputInfo(((1, 3, 5), 8), tp.float32)  # dynamic batch, static 8
ENGINES = ["xla", "onnxruntime", "reference"]


def _made_and_kept(fn, args):
    """(ops the trace recorded, ops the Trace kept): the difference is work done for nothing."""
    captured = []

    class Recorder(list):
        def append(self, made):
            captured.append(made)
            super().append(made)

    saved = optable.recording
    optable.recording = Recorder()
    try:
        traced = pipeline.trace(fn, args=args)
    finally:
        optable.recording = saved
    return captured[0], traced.trace.ops


def _kinds(ops):
    return [op.kind for op in ops]


def halves(x):
    n = x.shape[1] // 2  # a DimensionSize whose value (4) is known now
    return tp.concatenate([x[:, n:], x[:, :n]], dim=1)


def halves_int(x):
    return tp.concatenate([x[:, 4:], x[:, :4]], dim=1)


def test_a_known_dimension_size_bound_slices_like_an_int():
    made, kept = _made_and_kept(halves, [BATCH])
    _, kept_int = _made_and_kept(halves_int, [BATCH])
    assert _kinds(kept) == _kinds(kept_int)
    # before: each bound went through max/min/wrap as folded DimensionSize constants (17 dead ops a slice)
    dead = [op for op in made if op not in set(kept)]
    # left: x.shape's two sizes and `// 2`'s constants (a full `:` reads its size as one shape entry)
    assert len(dead) <= 4, _kinds(dead)
    assert "maximum" not in _kinds(kept) and "minimum" not in _kinds(kept)


def test_minus_one_is_inferred_from_the_static_dims():
    def f(x):
        return tp.reshape(tp.reshape(x, (-1, 2, 4)), (-1, 8))

    made, kept = _made_and_kept(f, [BATCH])
    assert "mul" not in _kinds(kept) and "floor_div" not in _kinds(kept)
    assert _kinds(kept).count("get_dim") == 2 and len(made) == len(kept)


def test_minus_one_over_two_dynamic_dims_multiplies_them():
    info = tp.InputInfo(((1, 2, 3), (1, 3, 4), 4), tp.float32)

    def f(x):
        return tp.reshape(x, (-1, 2))

    _, kept = _made_and_kept(f, [info])
    assert _kinds(kept).count("mul") == 2  # rows * cols, then * 2 (4 // 2)
    exe = tp.compile(f, args=[info], engine="reference")
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    np.testing.assert_array_equal(np.asarray(exe(tp.Tensor(x)).numpy()), x.reshape(-1, 2))


def test_a_shape_entry_is_one_get_dim_with_keepdim():
    def f(x):
        return tp.reshape(x, (x.shape[0], 2, 4))

    _, kept = _made_and_kept(f, [BATCH])
    dims = [op for op in kept if op.kind == "get_dim"]
    assert len(dims) == 1 and dims[0].params == {"dim": 0, "keepdim": True}
    assert dims[0].outputs[0].shape == (1,)
    text = pipeline.trace(f, args=[BATCH]).lower().as_text()
    assert "collapse_rank" not in text and "tensorrt.shape" in text


def test_a_python_number_is_one_constant_of_the_matched_rank():
    def f(x):
        return x * 2.0 + tp.Tensor(1.0)

    _, kept = _made_and_kept(f, [BATCH])
    assert _kinds(kept) == ["constant", "mul", "constant", "add"]
    assert [op.outputs[0].shape for op in kept if op.kind == "constant"] == [(1, 1), (1, 1)]


def test_a_negative_dimension_size_bound_still_wraps():
    def f(x):
        return x[:, : x.shape[1] - 10]  # -2: counts from the end, as Python's

    assert pipeline.trace(f, args=[BATCH]).trace.outputs[0].shape == (None, 6)


@pytest.mark.parametrize("engine", ENGINES)
def test_lean_programs_give_numpy_numbers(engine):
    def f(x):
        a = halves(x) * 0.5
        b = tp.reshape(tp.reshape(a, (-1, 2, 4)), (x.shape[0], 8))
        return b[:, : x.shape[1] - 10] + 1.0

    exe = tp.compile(f, args=[BATCH], engine=engine)
    for rows in (1, 4, 5):
        x = np.random.default_rng(rows).standard_normal((rows, 8)).astype(np.float32)
        want = np.concatenate([x[:, 4:], x[:, :4]], axis=1)[:, :6] * 0.5 + 1.0
        np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x)).numpy()), want, rtol=1e-6, atol=1e-6)


MASK = np.tril(np.ones((6, 6), np.float32))
SEQ = tp.InputInfo(((1, 2, 3), (2, 4, 8)), tp.float32)  # the sequence dim may pass the mask's 6


def causal_mask(x):
    t = x.shape[1]  # a dim's size: never negative
    return tp.Tensor(MASK)[:t, :t] + x[:1, :1] * 0.0


def test_a_dim_size_bound_needs_no_wrap_and_no_clamp_at_zero():
    """GPT's ``mask[:t, :t]`` was 32 trace ops (wrap, clamp at 0 and at the size, count >= 0, per dim)."""
    def mask_only(x):
        t = x.shape[1]
        return tp.Tensor(MASK)[:t, :t]

    _, kept = _made_and_kept(mask_only, [SEQ])
    kinds = _kinds(kept)
    assert kinds.count("minimum") == 2  # the clamp to the mask's size stays: t may be 8
    assert "maximum" not in kinds and "floor_div" not in kinds and "sub" not in kinds, kinds
    assert len(kept) <= 20, kinds


def test_a_bound_that_may_be_negative_keeps_the_wrap():
    def f(x):
        return x[:, : x.shape[1] - 3]  # negative for short rows: counts from the end

    _, kept = _made_and_kept(f, [SEQ])
    assert "floor_div" in _kinds(kept) and "maximum" in _kinds(kept)


@pytest.mark.parametrize("engine", ENGINES)
def test_dim_size_bounds_give_numpy_numbers(engine):
    def f(x):
        t = x.shape[1]
        a = causal_mask(x)
        b = x[:, t // 2 : t + 1]         # a start and a stop from dim sizes; the stop clamps
        c = x[:, : x.shape[1] - 3]       # may be negative: wraps
        return a, b, c

    exe = tp.compile(f, args=[SEQ], engine=engine)
    for cols in (2, 5, 8):
        x = np.random.default_rng(cols).standard_normal((2, cols)).astype(np.float32)
        a, b, c = (np.asarray(o.numpy()) for o in exe(tp.Tensor(x)))
        np.testing.assert_array_equal(a, MASK[:cols, :cols] + x[:1, :1] * 0.0)
        np.testing.assert_array_equal(b, x[:, cols // 2 : cols + 1])
        np.testing.assert_array_equal(c, x[:, : cols - 3])


def test_a_quotient_by_a_runtime_divisor_keeps_the_wrap():
    """``t // d`` is >= 0 only for d > 0; a divisor known only at run time might be 0 (engines differ there)."""
    info = tp.InputInfo(((1, 2, 3), (2, 4, 8)), tp.float32)

    def by_half(x):
        return x[:, : x.shape[1] // 2]

    def by_dim(x):
        return x[:, : x.shape[1] // x.shape[0]]

    _, kept = _made_and_kept(by_half, [info])
    assert "maximum" not in _kinds(kept)
    _, kept = _made_and_kept(by_dim, [info])
    assert "maximum" in _kinds(kept)
