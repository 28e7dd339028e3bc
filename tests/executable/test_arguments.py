"""Run-time arguments are checked once, in the Executable, before any engine sees them: every engine refuses the
same inputs with the same TripyException (parameter, value, expected) at the caller's line, and nothing is
converted, wrapped or truncated (issue 8, finding 6)."""

import functools
import importlib.util
import re

import ml_dtypes
import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.base import cuda_device_count

ENGINES = ["reference", "xla"] + (["onnxruntime"] if importlib.util.find_spec("onnxruntime") else [])


@functools.cache
def executables(engine):
    pytest.importorskip("jax") if engine == "xla" else None
    f32 = tp.compile(lambda a: a * 2.0, args=[tp.InputInfo((2,), tp.float32)], engine=engine)
    i32 = tp.compile(lambda a: a + 1, args=[tp.InputInfo((2,), tp.int32)], engine=engine)
    dim = tp.compile(lambda x, s: tp.reshape(x, (-1, s)),
                     args=[tp.InputInfo((4, 6), tp.float32), tp.DimensionInputInfo((1, 2, 4))], engine=engine)
    return {"f32": f32, "i32": i32, "dim": dim}


# CUDA memory on a machine without a CUDA device; where one exists (the GPU machine) engines read CUDA memory,
# so the fake claims Vulkan memory there, which no engine reads.
FAKE_DEVICE, FAKE_KIND = ((7, 0), "vulkan") if cuda_device_count() else ((2, 0), "cuda")


class FakeCuda:
    """A DLPack producer that claims memory no engine here can read (its data is really on the host)."""

    shape, dtype = (2,), np.dtype(np.float32)

    def __dlpack__(self, stream=None, **kw):
        return np.ones(2, np.float32).__dlpack__()

    def __dlpack_device__(self):
        return FAKE_DEVICE


X = np.ones((4, 6), np.float32)
BAD = {
    "float64 for f32": ("f32", lambda: (np.array([1e300, 1.0]),), "float64"),
    "uint8 for f32": ("f32", lambda: (np.array([1, 2], np.uint8),), "uint8"),
    "int16 for f32": ("f32", lambda: (np.array([1, 2], np.int16),), "int16"),
    "bfloat16 for f32": ("f32", lambda: (np.array([1, 2], ml_dtypes.bfloat16),), "bfloat16"),
    "uint8 for i32": ("i32", lambda: (np.array([1, 2], np.uint8),), "uint8"),
    "int16 for i32": ("i32", lambda: (np.array([1, 2], np.int16),), "int16"),
    "int64 for i32": ("i32", lambda: (np.array([2**40, 1], np.int64),), "int64"),
    "np.int64(2**32+3) dim": ("dim", lambda: (X, np.int64(2**32 + 3)), "4294967299"),
    "python 2**32+3 dim": ("dim", lambda: (X, 2**32 + 3), "4294967299"),
    "np.float32(3.7) dim": ("dim", lambda: (X, np.float32(3.7)), "3.7"),
    "float 2.0 dim": ("dim", lambda: (X, 2.0), "2.0"),
    "bool dim": ("dim", lambda: (X, True), "True"),
    "float array dim": ("dim", lambda: (X, np.array(2.0)), "float64"),
    "fake cuda array": ("f32", lambda: (FakeCuda(),), FAKE_KIND),
}


def error_of(engine, case):
    kind, args, _ = BAD[case]
    exe = executables(engine)[kind]
    with pytest.raises(tp.TripyException) as info:
        exe(*args())  # the caller's line: every error points here
    return info.value


@pytest.mark.parametrize("case", sorted(BAD))
def test_every_engine_refuses_the_same_inputs_with_the_same_error(case):
    errors = [error_of(engine, case) for engine in ENGINES]
    ref = errors[0]
    name = "s" if BAD[case][0] == "dim" else "a"
    text = str(ref)
    assert f"'{name}'" in text or f"parameter {name}" in text
    assert BAD[case][2] in text
    assert ref.location is not None and ref.location.file.endswith("test_arguments.py")
    assert "exe(*args())" in ref.location.render()
    for engine, other in zip(ENGINES[1:], errors[1:]):
        assert other.summary == ref.summary
        assert [same_kinds(d.replace(f"'{engine}'", "'reference'")) for d in other.details] == [
            same_kinds(d) for d in ref.details]


def same_kinds(detail: str) -> str:
    # Engines read different memory on a CUDA machine (reference: host and CUDA; onnxruntime's CPU build:
    # host only), so the memory each lists as expected may differ there; everything else is the same.
    return re.sub(r"an array in [a-z ]+ memory \(", "an array in (...) memory (", detail)


@pytest.mark.parametrize("engine", ENGINES)
def test_good_inputs_still_run_unchanged(engine):
    exes = executables(engine)
    np.testing.assert_array_equal(np.asarray(exes["f32"](np.array([1.5, -2.0], np.float32))), [3.0, -4.0])
    np.testing.assert_array_equal(np.asarray(exes["i32"](np.array([2**31 - 2, 0], np.int32))), [2**31 - 1, 1])
    for s in (2, np.int64(2), np.int32(2), np.array(2, np.int64), tp.DimensionSize(2)):
        assert exes["dim"](X, s).shape == (12, 2)


def test_engines_never_see_a_refused_argument():
    """The check is in the Executable: the engine's run() is not reached."""
    exe = executables("reference")["f32"]
    calls = []
    original = exe._compiled.run
    exe._compiled.run = lambda args: calls.append(args) or original(args)
    try:
        with pytest.raises(tp.TripyException):
            exe(np.array([1.0, 2.0]))
        exe(np.array([1.0, 2.0], np.float32))
    finally:
        exe._compiled.run = original
    assert len(calls) == 1
