"""An Executable remembers each argument signature it has checked and skips the checks on the next call of the
same signature (the call-overhead goal of issue 12). A remembered signature must never admit a value that the
full checks refuse: these tests make good calls first (so the fast path is there), then bad ones of the same or a
different signature, and expect the same TripyException at the caller's line as on a first call."""

import functools

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.base import cuda_device_count
from tripy_lab.executable import arguments

jax = pytest.importorskip("jax")

ENGINES = ["reference", "xla"]
# CUDA memory where no CUDA device is; Vulkan memory (which no engine reads) on the GPU machine
FAKE_DEVICE, FAKE_KIND = ((7, 0), "vulkan") if cuda_device_count() else ((2, 0), "cuda")


class Producer:
    """A DLPack producer (like a torch tensor): its memory is a property of the instance, not of its class. Its data
    is really on the host; ``device`` is the memory it claims."""

    shape, dtype = (2,), np.dtype(np.float32)

    def __init__(self, device=(1, 0)):
        self.device = device

    def __dlpack__(self, stream=None, **kw):
        return np.ones(2, np.float32).__dlpack__()

    def __dlpack_device__(self):
        return self.device


@functools.cache
def exes(engine):
    n = tp.NamedDimension("n", 1, 2, 4)
    return {
        "dyn": tp.compile(lambda a: a * 2.0, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)], engine=engine),
        "named": tp.compile(lambda a, b: a + b, args=[tp.InputInfo((n, 3), tp.float32),
                                                      tp.InputInfo((n, 3), tp.float32)], engine=engine),
        "dim": tp.compile(lambda x, s: tp.reshape(x, (-1, s)),
                          args=[tp.InputInfo((4, 6), tp.float32), tp.DimensionInputInfo((1, 2, 4))], engine=engine),
        "two_out": tp.compile(lambda a: (a + 1.0, a * 3.0), args=[tp.InputInfo((2,), tp.float32)], engine=engine),
    }


def f32(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def refused(exe, *args, **kwargs) -> tp.TripyException:
    """The error of a refused call, which no engine call saw (neither ``run`` nor a remembered signature's call)."""
    seen = []
    fast, run = dict(exe._fast), exe._compiled.run
    exe._fast.update({k: (lambda args, c=c: seen.append(args) or c(args)) for k, c in fast.items()})
    exe._compiled.run = lambda args: seen.append(args) or run(args)
    try:
        with pytest.raises(tp.TripyException) as info:
            exe(*args, **kwargs)  # the caller's line
    finally:
        exe._fast.update(fast)
        del exe._compiled.run
    assert seen == [], "a refused argument reached the engine"
    err = info.value
    assert err.location is not None and err.location.file.endswith("test_call_fast_path.py")
    assert "exe(*args, **kwargs)" in err.location.render()
    return err


def warm(exe, *args, fast=True, **kwargs):
    """Two good calls: the second runs on the remembered signature (asserted, so the refusals below test it; jax
    arrays are trusted by class only where the engine vouches for them: xla, not the reference interpreter)."""
    exe(*args, **kwargs)
    checked = []
    original = exe._checked_arg
    exe._checked_arg = lambda spec, value: checked.append(spec[0]) or original(spec, value)
    try:
        out = exe(*args, **kwargs)
    finally:
        del exe._checked_arg
    assert (checked == []) == fast, f"the second call of a checked signature was checked: {checked}"
    return out


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kind", ["numpy", "jax"])
def test_remembered_signature_still_refuses_wrong_dtype_rank_and_bounds(engine, kind):
    exe = exes(engine)["dyn"]
    put = jax.device_put if kind == "jax" else np.asarray
    good = put(f32(2, 3))
    fast = kind == "numpy" or engine == "xla"
    np.testing.assert_array_equal(np.asarray(warm(exe, good, fast=fast)), f32(2, 3) * 2)
    assert isinstance(exe(good), tp.Tensor)
    # same shape, other dtype: the key's dtype differs, the check runs and refuses it
    err = refused(exe, put(f32(2, 3).astype(np.float16)))
    assert err.summary == "Unexpected tensor data type." and "float16" in str(err)
    err = refused(exe, put(f32(5, 3)))  # same type and dtype, a dim past its bound
    assert err.summary == "Unexpected tensor shape." and "dimension 0 has size 5" in str(err)
    err = refused(exe, put(f32(2, 4)))  # a static dim of another size
    assert err.summary == "Unexpected tensor shape." and "dimension 1 has size 4" in str(err)
    err = refused(exe, put(f32(2, 3, 1)))
    assert err.summary == "Unexpected tensor rank."
    err = refused(exe, a=put(f32(5, 3)))  # keywords take the same path
    assert err.summary == "Unexpected tensor shape."
    # a second good signature, then the first again: both still run (and the bad ones still fail)
    np.testing.assert_array_equal(np.asarray(warm(exe, put(f32(4, 3)), fast=fast)), f32(4, 3) * 2)
    np.testing.assert_array_equal(np.asarray(exe(a=good)), f32(2, 3) * 2)
    assert refused(exe, put(f32(0, 3))).summary == "Unexpected tensor shape."


@pytest.mark.parametrize("engine", ENGINES)
def test_tensor_arguments_are_checked_as_the_arrays_they_hold(engine):
    exe = exes(engine)["dyn"]
    out = exe(f32(2, 3))
    twice = warm(exe, out)  # another call's output, then the same signature again
    np.testing.assert_array_equal(np.asarray(twice), f32(2, 3) * 4)
    np.testing.assert_array_equal(np.asarray(exe(exe(twice))), f32(2, 3) * 16)
    np.testing.assert_array_equal(np.asarray(warm(exe, tp.Tensor(f32(1, 3)))), f32(1, 3) * 2)
    assert refused(exe, tp.Tensor(f32(5, 3))).summary == "Unexpected tensor shape."
    assert refused(exe, tp.Tensor(f32(2, 3).astype(np.float16))).summary == "Unexpected tensor data type."
    assert refused(exe, tp.Tensor(f32(2, 3)) * 2.0).summary == "Tensor `a` is not evaluated."
    assert refused(exe, exes(engine)["two_out"](f32(2))[0]).summary == "Unexpected tensor rank."


@pytest.mark.parametrize("engine", ENGINES)
def test_remembered_signatures_still_check_named_dims(engine):
    exe = exes(engine)["named"]
    warm(exe, f32(2, 3), f32(2, 3))
    warm(exe, f32(4, 3), f32(4, 3))
    err = refused(exe, f32(2, 3), f32(4, 3))  # each shape was fine in a remembered signature, not together
    assert err.summary == "Mismatched sizes for named dimension 'n'."
    err = refused(exe, b=f32(4, 3), a=f32(2, 3))
    assert err.summary == "Mismatched sizes for named dimension 'n'."


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("make", [int, np.int64, lambda v: np.array(v, np.int64), lambda v: jax.numpy.asarray(v),
                                  tp.DimensionSize], ids=["int", "np.int64", "0-d numpy", "0-d jax", "DimensionSize"])
def test_dimension_size_values_are_checked_on_every_call(engine, make):
    """A DimensionSize is remembered by its value, and only as a plain int; every other kind is checked each call."""
    exe = exes(engine)["dim"]
    x = f32(4, 6)
    warm(exe, x, make(2), fast=make is int)
    for s in (1, 2, 4, 2):
        out = exe(x, make(s))
        assert isinstance(out, tp.Tensor) and out.shape == (24 // s, s)
        np.testing.assert_array_equal(np.asarray(out), x.reshape(-1, s))
    err = refused(exe, x, make(8))
    assert err.summary == "Unexpected DimensionSize value." and "value 8 is outside the bounds [1, 4]" in str(err)
    err = refused(exe, x, make(0))
    assert "value 0 is outside the bounds" in str(err)
    assert refused(exe, f32(4, 5), make(2)).summary == "Unexpected tensor shape."
    if make is int:
        assert refused(exe, x, True).summary == "Unexpected DimensionSize value."  # a bool is not an int here
        assert refused(exe, x, 2.0).summary == "Unexpected DimensionSize value."


def test_plain_int_dimension_sizes_past_int32_are_refused():
    with pytest.raises(tp.TripyException, match="2147483647"):  # wider bounds are refused at construction
        tp.DimensionInputInfo((1, 2, 2**40))
    exe = tp.compile(lambda x, s: tp.reshape(x, (-1, s)),
                     args=[tp.InputInfo((4, 6), tp.float32), tp.DimensionInputInfo((1, 2, 2**31 - 1))],
                     engine="reference")
    assert exe(f32(4, 6), 3).shape == (8, 3)
    err = refused(exe, f32(4, 6), 2**35)
    assert err.summary == "Unexpected DimensionSize value." and "int32" in str(err)


@pytest.mark.parametrize("engine", ENGINES)
def test_memory_the_engine_cannot_read_is_refused_after_good_calls(engine):
    exe = exes(engine)["two_out"]
    good = np.array([1.0, 2.0], np.float32)
    a, b = warm(exe, good)
    assert isinstance(a, tp.Tensor) and isinstance(b, tp.Tensor)
    np.testing.assert_array_equal(np.asarray(a), [2.0, 3.0])
    np.testing.assert_array_equal(np.asarray(b), [3.0, 6.0])
    err = refused(exe, Producer(FAKE_DEVICE))  # the same shape and dtype as the remembered numpy signature
    assert err.summary == "Invalid device for parameter: 'a'." and FAKE_KIND in str(err)
    # a class whose instances may live anywhere: a good one does not vouch for the next
    assert [np.asarray(t).tolist() for t in exe(Producer())] == [[2.0, 2.0], [3.0, 3.0]]
    assert [np.asarray(t).tolist() for t in exe(Producer())] == [[2.0, 2.0], [3.0, 3.0]]
    err = refused(exe, Producer(FAKE_DEVICE))
    assert err.summary == "Invalid device for parameter: 'a'." and FAKE_KIND in str(err)

    class Sub(np.ndarray):  # a numpy subclass could carry anything: never trusted from its type
        pass

    sub = good.view(Sub)
    assert not arguments.always_readable(Sub, exe._devices)
    assert [np.asarray(t).tolist() for t in exe(sub)] == [[2.0, 3.0], [3.0, 6.0]]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_deleted_jax_array_is_a_tripy_error_not_a_jax_one(engine):
    exe = exes(engine)["dyn"]
    warm(exe, jax.device_put(f32(2, 3)), fast=engine == "xla")
    dead = jax.device_put(f32(2, 3))
    dead.delete()
    with pytest.raises(tp.TripyException) as info:  # the engine may see it (and fail): then it is checked
        exe(dead)
    err = info.value
    assert "parameter" in str(err) and "'a'" in str(err)


def test_fast_calls_count_hits_and_synchronize_waits_for_them():
    exe = exes("xla")["dyn"]
    cache = exe._compiled.report.cache
    x = jax.device_put(f32(1, 3))
    before = cache["hits"] + cache["misses"]
    outs = [exe(x) for _ in range(5)]
    assert cache["hits"] + cache["misses"] == before + 5
    exe.synchronize()
    assert exe._compiled._last[0] is outs[-1]._array  # synchronize blocks on the newest call's outputs


def test_engines_are_still_reached_through_run_on_a_remembered_signature():
    """Engines without a caller of their own are called through ``run`` on every call (a patched run sees it)."""
    exe = exes("reference")["dyn"]
    good = f32(1, 3)
    warm(exe, good)
    calls = []
    original = exe._compiled.run
    exe._compiled.run = lambda args: calls.append(args) or original(args)
    try:
        exe(good)
        with pytest.raises(tp.TripyException):
            exe(good.astype(np.float64))
    finally:
        exe._compiled.run = original
    assert len(calls) == 1


def test_a_remembered_dimension_size_reaches_the_engine_as_the_checked_int32():
    exe = exes("reference")["dim"]
    warm(exe, f32(4, 6), 3)
    seen = []
    inner = exe._compiled.run
    exe._compiled.run = lambda args: seen.append(args[1]) or inner(args)
    try:
        assert exe(f32(4, 6), 3).shape == (8, 3)
    finally:
        del exe._compiled.run
    assert len(seen) == 1 and isinstance(seen[0], np.ndarray) and seen[0].dtype == np.int32 and seen[0] == 3


def test_jax_arrays_are_trusted_by_type_only_when_each_backend_has_one_device(monkeypatch):
    compiled = exes("xla")["dyn"]._compiled
    devices = frozenset({"cpu"})
    x = jax.device_put(f32(2))
    probes = compiled.device_probes()
    one_device = all(len(c.devices()) == 1 for c in jax.extend.backend.backends().values())
    assert (probes is not None) == one_device
    # one probe per backend (cpu, and cuda on a GPU machine): trusted only when every backend's memory is listed
    kinds = frozenset(arguments.device_kind(p) for p in probes or [])
    assert arguments.always_readable(type(x), kinds | devices, probes) == one_device
    assert arguments.always_readable(type(x), devices, probes) == (one_device and kinds <= devices)
    assert arguments.always_readable(type(x), frozenset({"cuda"}), probes) == (one_device and kinds <= {"cuda"})
    assert not arguments.always_readable(type(x), devices, None)
    assert arguments.always_readable(np.ndarray, devices)
    assert not arguments.always_readable(np.ndarray, frozenset({"cuda"}))
    assert not arguments.always_readable(int, devices, probes)

    class TwoDevices:
        def devices(self):
            return [object(), object()]

    monkeypatch.setattr(jax.extend.backend, "backends", lambda: {"fake": TwoDevices()})
    assert compiled.device_probes() is None
