"""Executable.save -> Executable.load keeps every constant's bits and every result (issue 8, finding 2):
a causal mask of -inf must still be -inf after a reload, for inline constants and dense_resource blobs."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tripy_lab as tp

DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, np.int8, np.int32, np.int64,
          ml_dtypes.int4, np.bool_]


def bits(a) -> bytes:
    return np.ascontiguousarray(np.asarray(a)).view(np.uint8).tobytes()


def constants(exe) -> list[np.ndarray]:
    prog = exe._program
    return [prog.constant_value(op) for op in prog.ops() if op.name == "tensorrt.constant"]


def draw_array(data, dt) -> np.ndarray:
    dt = np.dtype(dt)
    n = data.draw(st.sampled_from([1, 3, 40, 1100]))  # 1100 > inline_constant_limit: a dense_resource blob
    if dt == np.bool_:
        return np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    if dt == ml_dtypes.int4:
        return np.array(data.draw(st.lists(st.integers(-8, 7), min_size=n, max_size=n)), np.int8).astype(dt)
    seed = data.draw(st.integers(0, 2**32 - 1))
    raw = np.random.default_rng(seed).integers(0, 2 ** (8 * dt.itemsize), size=n, dtype=np.uint64)
    arr = raw.astype(f"u{dt.itemsize}").view(dt)
    if dt.kind != "i":  # a few special values at the front: -inf, nan, -0.0, the smallest subnormal
        with np.errstate(over="ignore", invalid="ignore"):
            special = np.array([-np.inf, np.nan, -0.0, 1e-45, np.inf], dtype=np.float32).astype(dt)
        arr[: min(n, 5)] = special[: min(n, 5)]
    return arr


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_save_load_keeps_constant_bits_and_results(dt, data, tmp_path_factory):
    array = draw_array(data, dt)
    exe = tp.compile(lambda x: (x + 1.0, tp.Tensor(array)), args=[tp.InputInfo((2,), tp.float32)],
                     engine="reference")
    path = tmp_path_factory.mktemp("exe") / "exe.json"
    exe.save(str(path))
    loaded = tp.Executable.load(str(path), engine="reference")
    before, after = constants(exe), constants(loaded)
    assert [bits(c) for c in after] == [bits(c) for c in before]
    x = tp.ones((2,)).eval()
    out0, out1 = exe(x)[1], loaded(x)[1]
    assert bits(out1) == bits(out0)
    expect = array.astype(np.int8) != 0 if np.dtype(dt) == np.bool_ else array
    assert bits(np.asarray(out1).astype(expect.dtype)) == bits(expect)


def test_causal_mask_survives_a_reload(tmp_path):
    """The finding: -inf became 4.29e9 after a reload, so every masked softmax was wrong."""
    mask = np.triu(np.full((4, 4), -np.inf, np.float32), k=1)

    def attend(scores):
        return tp.softmax(scores + tp.Tensor(mask), dim=-1)

    exe = tp.compile(attend, args=[tp.InputInfo((4, 4), tp.float32)], engine="reference")
    exe.save(str(tmp_path / "a.json"))
    loaded = tp.Executable.load(str(tmp_path / "a.json"), engine="reference")
    scores = tp.Tensor(np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32))
    got = np.asarray(loaded(scores))
    np.testing.assert_array_equal(got, np.asarray(exe(scores)))
    assert np.all(got[np.triu_indices(4, 1)] == 0)
