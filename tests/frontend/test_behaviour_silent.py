"""Issue 24's three silently-wrong results, and issue 27 item 11's odd inputs, on every engine (the ``engine``
fixture): keyword constants bind by name, big-endian arrays are read right, a scalar's variance is 0, a 1-D input
to Linear gives (1, out); a DLPack-only producer (bfloat16 too) is read, a masked array is refused."""

import numpy as np
import pytest

import tripy_lab as tp


def _scaled(x, a=1.0, b=2.0):
    return x * a + b


@pytest.mark.parametrize("kwargs, want", [({"b": 10.0}, 11.0), ({"a": 3.0}, 5.0), ({"b": 10.0, "a": 3.0}, 13.0)])
def test_compile_kwargs_bind_by_name(engine, kwargs, want):
    exe = tp.compile(_scaled, args=[tp.InputInfo((2,), tp.float32)], kwargs=kwargs, engine=engine)
    np.testing.assert_array_equal(exe(np.ones(2, np.float32)).numpy(), [want, want])


def test_compile_kwargs_input_by_name_after_a_defaulted_constant(engine):
    def f(x, scale=2.0, y=None):
        return x * scale + y

    info = tp.InputInfo((2,), tp.float32)
    exe = tp.compile(f, args=[info], kwargs={"y": info}, engine=engine)
    assert list(exe.input_infos) == ["x", "y"]
    out = exe(np.full(2, 3.0, np.float32), np.full(2, 1.0, np.float32))
    np.testing.assert_array_equal(out.numpy(), [7.0, 7.0])


@pytest.mark.parametrize("dtype", [">f4", ">i4"])
def test_big_endian_arguments_read_right(engine, dtype):
    tp_dtype = tp.float32 if dtype == ">f4" else tp.int32
    exe = tp.compile(lambda a: a + 1, args=[tp.InputInfo((4,), tp_dtype)], engine=engine)
    big = np.arange(1, 5, dtype=dtype)
    assert not big.dtype.isnative
    out = exe(big).numpy()
    np.testing.assert_array_equal(out, np.arange(2, 6))
    assert out.dtype == np.dtype(dtype).newbyteorder("=")
    np.testing.assert_array_equal(exe(big).numpy(), out)  # again: a remembered signature reads it right too
    np.testing.assert_array_equal(exe(np.arange(1, 5, dtype=dtype[1:])).numpy(), out)


def test_big_endian_tensor_data_read_right(engine):
    t = tp.Tensor(np.array([[1.5, -2.0]], dtype=">f4"))
    np.testing.assert_array_equal((t * 2).numpy(), [[3.0, -4.0]])


@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_of_a_scalar_is_zero(engine, correction):
    out = tp.var(tp.Tensor(3.5), correction=correction)
    assert out.shape == ()
    assert out.numpy() == 0.0
    exe = tp.compile(lambda x: tp.var(x, correction=correction), args=[tp.InputInfo((), tp.float32)], engine=engine)
    assert exe(np.float32(-7.25)).numpy() == 0.0


def test_var_of_rank1_keeps_the_correction(engine):
    x = np.array([1.0, 2.0, 4.0], np.float32)
    np.testing.assert_allclose(tp.var(tp.Tensor(x)).numpy(), x.var(ddof=1), rtol=1e-6)
    np.testing.assert_allclose(tp.var(tp.Tensor(x[:1]), correction=0).numpy(), 0.0)


def test_linear_on_a_1d_input_gives_1_by_out(engine):
    lin = tp.Linear(3, 2)
    w, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([0.5, -1.0], np.float32)
    lin.load_state_dict({"weight": tp.Tensor(w), "bias": tp.Tensor(b)})
    x = np.array([1.0, 2.0, 3.0], np.float32)
    out = lin(tp.Tensor(x))
    assert out.shape == (1, 2)
    np.testing.assert_allclose(out.numpy(), (x @ w.T + b)[None], rtol=1e-6)
    no_bias = tp.Linear(3, 2, bias=False)
    no_bias.weight = tp.Tensor(w)
    assert no_bias(tp.Tensor(x)).shape == (2,)  # nvtripy: only the bias is unsqueezed
    assert lin(tp.Tensor(x[None].repeat(4, 0))).shape == (4, 2)


class _DLPackOnly:
    """An object that speaks only DLPack (no dtype, no shape, no __array__)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def _bf16(values):
    jnp = pytest.importorskip("jax.numpy")
    return jnp.asarray(np.asarray(values, np.float32)).astype(jnp.bfloat16)


@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16"])
def test_dlpack_only_arguments_are_read(engine, dtype):
    values = np.array([1.0, 2.0, -3.0, 0.5], np.float32)
    if dtype == "bfloat16":
        producer = _DLPackOnly(_bf16(values))
    else:
        producer = _DLPackOnly(values.astype(dtype))
    tp_dtype = getattr(tp, dtype)
    exe = tp.compile(lambda a: a * 2, args=[tp.InputInfo((4,), tp_dtype)], engine=engine)
    out = exe(producer)
    assert out.dtype is tp_dtype
    np.testing.assert_array_equal(np.asarray(out.numpy(), np.float32), (values.astype(dtype) * 2).astype(np.float32))


def test_bfloat16_from_dlpack_is_a_view_not_a_float32_copy(engine):
    src = _bf16([[1.0, 1.5], [-2.0, 3.0]])
    t = tp.Tensor(_DLPackOnly(src))
    assert t.dtype is tp.bfloat16 and t.shape == (2, 2)
    from tripy_lab.core.arrays import from_dlpack

    host = from_dlpack(_DLPackOnly(src))
    assert host.dtype.name == "bfloat16" and host.dtype.itemsize == 2 and not host.flags.owndata
    np.testing.assert_array_equal((t * 2).numpy().astype(np.float32), [[2.0, 3.0], [-4.0, 6.0]])


def test_masked_arrays_are_refused(engine):
    masked = np.ma.masked_array(np.arange(4, dtype=np.float32), mask=[0, 1, 0, 0])
    exe = tp.compile(lambda a: a + 1, args=[tp.InputInfo((4,), tp.float32)], engine=engine)
    for _ in range(2):  # also once a plain array of the same signature has been remembered
        with pytest.raises(tp.TripyException, match=r"(?s)parameter: 'a'.*masked array"):
            exe(masked)
        exe(np.zeros(4, np.float32))
    with pytest.raises(tp.TripyException, match="masked array"):
        tp.Tensor(masked)
