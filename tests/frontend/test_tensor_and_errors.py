"""Tensor construction, printing, DLPack, and the errors bad arguments get (type, message, user line)."""

import numpy as np
import pytest

import tripy_lab as tp


def test_tensor_from_python_data():
    t = tp.Tensor([[1, 2, 3], [4, 5, 6]])
    assert t.dtype is tp.int32
    assert t.shape == (2, 3)
    assert t.rank == 2
    assert t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert tp.Tensor(2**40).dtype is tp.int64
    assert tp.Tensor([True, False]).dtype is tp.bool
    assert tp.Tensor([1.5]).dtype is tp.float32
    assert tp.Tensor([], dtype=tp.int32).dtype is tp.int32


def test_tensor_from_numpy_and_dlpack_roundtrip():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = tp.Tensor(a)
    assert t.dtype is tp.float32
    np.testing.assert_array_equal(np.from_dlpack(t), a)
    np.testing.assert_array_equal(np.asarray(t + 1.0), a + 1)
    assert tp.Tensor(np.zeros(3, np.float16)).dtype is tp.float16
    assert str(t.device) == "cpu:0"


def test_float64_data_follows_nvtripy():
    """nvtripy has no float64: a float64 array raises there (no tripy dtype for it), so it raises here instead
    of being narrowed to float32, where 1e300 became inf. Python floats become float32 as in nvtripy; one that
    float32 cannot hold is an error naming the value and the dtype, never inf."""
    for data in (np.array([1e300]), np.array([1.0, 2.5]), np.zeros((2, 2))):
        with pytest.raises(tp.TripyException, match="Unsupported data type: 'float64'") as err:
            tp.Tensor(data)
        assert "astype(np.float32)" in str(err.value)
        assert err.value.location.file == __file__
    converted = tp.Tensor(np.array([1.0, 2.5]).astype(np.float32))  # the way nvtripy takes it: convert on purpose
    assert converted.dtype is tp.float32 and converted.tolist() == [1.0, 2.5]
    t = tp.Tensor([0.1, 2.5, 3.4e38, float("inf"), -float("inf"), float("nan"), 1e-50])
    assert t.dtype is tp.float32
    np.testing.assert_array_equal(np.asarray(t), np.array([0.1, 2.5, 3.4e38, np.inf, -np.inf, np.nan, 0.0],
                                                          np.float32))  # infs and nans in the data stay
    for data, value in ((1e300, "1e+300"), ([1.0, -1e39], "-1e+39"), ([[2.0], [10**39]], str(10**39)),
                        ([0.5, 10**400], "10000000000000000000... (401 digits)")):
        with pytest.raises(tp.TripyException) as err:
            tp.Tensor(data)
        assert err.value.summary == f"Value {value} is not representable in float32: it would become inf."
        assert "3.402823e+38" in str(err.value)
        assert err.value.location.file == __file__


def test_python_ints_beyond_int64_raise():
    assert tp.Tensor([1, 2**40]).dtype is tp.int64 and tp.Tensor([1, 2**40]).tolist() == [1, 2**40]
    assert tp.Tensor([-(2**63), 2**63 - 1]).tolist() == [-(2**63), 2**63 - 1]
    for data, value in (([2**63], 2**63), ([1, -(2**63) - 1], -(2**63) - 1), (2**70, 2**70)):
        with pytest.raises(tp.TripyException) as err:
            tp.Tensor(data)
        assert err.value.summary == f"Value {value} does not fit in int64."
        assert err.value.location.file == __file__


def test_python_number_operands_never_overflow_silently():
    """A Python number next to a tensor becomes that tensor's dtype: an int that does not fit or a finite float
    beyond float32 is a TripyException (it was a raw OverflowError / inf); narrower floats overflow like a cast."""
    i8, f32 = tp.ones((2,), dtype=tp.int8), tp.ones((2,))
    for make, summary in ((lambda: i8 + 300, "Value 300 does not fit in int8."),
                          (lambda: tp.ones((2,), dtype=tp.int32) * 2**40, f"Value {2**40} does not fit in int32."),
                          (lambda: f32 * 1e300, "Value 1e+300 is not representable in float32: it would become inf."),
                          (lambda: tp.full((2,), -1e39), "Value -1e+39 is not representable in float32: it would "
                                                          "become inf.")):
        with pytest.raises(tp.TripyException) as err:
            make()
        assert err.value.summary == summary
        assert err.value.location.file == __file__
    assert (i8 + 100).tolist() == [101, 101] and (f32 * -3.4e38).tolist() == [np.float32(-3.4e38)] * 2
    assert (f32 * float("-inf")).tolist() == [-np.inf, -np.inf]
    assert np.isinf(np.asarray(tp.ones((2,), dtype=tp.float16) * 1e6)).all()  # f16 overflow: inf, as a cast


def test_repr_shows_values():
    assert repr(tp.Tensor([1, 2, 3])) == "tensor([1, 2, 3], dtype=int32, loc=cpu:0, shape=(3,))"
    assert "dtype=float32" in repr(tp.ones((2, 2)))


def test_lazy_until_eval():
    t = tp.ones((2,)) + 1.0
    assert t.trace_tensor.producer.kind == "add"
    t.eval()
    assert t.trace_tensor.producer.kind == "constant"
    assert t.tolist() == [2.0, 2.0]


def test_bool_and_iter():
    assert bool(tp.Tensor([1.0]))
    with pytest.raises(tp.TripyException, match="ambiguous"):
        bool(tp.Tensor([1.0, 2.0]))
    with pytest.raises(TypeError, match="Iterating over tensors is not supported"):
        iter(tp.Tensor([1.0]))


@pytest.mark.parametrize("make, message", [
    (lambda: tp.Tensor(None), "Data argument to Tensor must not be None."),
    (lambda: tp.Tensor(tp.Tensor([1])), "Cannot initialize Tensor with another Tensor."),
    (lambda: tp.Tensor([[1, 2], [3]]), "Mismatched dimension sizes in provided sequence."),
    (lambda: tp.Tensor([1], dtype=tp.float32), "Data type can only be specified for empty lists."),
    (lambda: tp.Tensor(["a"]), "Unsupported element type."),
])
def test_bad_tensor_construction(make, message):
    with pytest.raises(tp.TripyException) as err:
        make()
    assert err.value.summary == message
    assert err.value.location.file == __file__  # points at the user's line, not ours


def test_error_points_at_user_line_with_marker():
    a = tp.ones((2,), dtype=tp.int32)
    with pytest.raises(tp.TripyException) as err:
        a + 1.5  # noqa: B018
    text = str(err.value)
    assert "Refusing to automatically cast 'float32' argument to 'int32'." in text
    assert "a + 1.5" in text
    assert "^" in text.splitlines()[-1]


def test_dtype_contract_violations():
    with pytest.raises(tp.TripyException, match="Invalid inputs for function: 'exp'") as err:
        tp.exp(tp.ones((2,), dtype=tp.int32))
    assert "float32, float16, bfloat16" in str(err.value)
    with pytest.raises(tp.TripyException, match="to have the same data type"):
        tp.ones((2,)) + tp.ones((2,), dtype=tp.float16)


def test_dimension_and_shape_errors():
    t = tp.ones((2, 3))
    with pytest.raises(tp.TripyException, match="Dimension argument is out of bounds") as err:
        tp.sum(t, dim=2)
    assert "[-2, 2)" in str(err.value)
    with pytest.raises(tp.TripyException, match="at most one inferred dimension"):
        tp.reshape(t, (-1, -1))
    with pytest.raises(tp.TripyException, match="volumes differ"):
        tp.reshape(t, (4, 2))
    with pytest.raises(tp.TripyException, match="Invalid permutation"):
        tp.permute(t, (0, 0))
    with pytest.raises(tp.TripyException, match="Shapes are not broadcastable"):
        tp.ones((2, 3)) + tp.ones((4, 3))
    with pytest.raises(tp.TripyException, match="Incompatible shapes for matrix multiplication"):
        tp.ones((2, 3)) @ tp.ones((2, 3))
    with pytest.raises(tp.TripyException, match="at least 1 dimension"):
        tp.Tensor(1.0) @ tp.ones((1,))
    with pytest.raises(tp.TripyException, match="rank of 2 but was attempted to be sliced with 3 indices"):
        t[0, 0, 0]
    with pytest.raises(tp.TripyException, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(tp.TripyException, match="Concatenated tensors must have equal ranks"):
        tp.concatenate([t, tp.ones((2,))], dim=0)


def test_wrong_argument_type_names_parameter():
    with pytest.raises(tp.TripyException) as err:
        tp.sum(tp.ones((2,)), dim=1.0)
    expected = "For parameter: 'dim', expected an instance of type: 'int' but got argument of type: 'float'."
    assert expected in str(err.value)


def test_input_info_validation():
    with pytest.raises(tp.TripyException, match="Invalid bounds for dimension 0") as err:
        tp.InputInfo(((3, 2, 1), 4), tp.float32)
    assert "min=3, opt=2, max=1" in str(err.value)
    with pytest.raises(tp.TripyException, match="'dtype' of InputInfo"):
        tp.InputInfo((2,), "float32")
    with pytest.raises(tp.TripyException, match="value_bounds"):
        tp.DimensionInputInfo((1, 2))
    assert str(tp.DimensionInputInfo((1, 2, 3))) == "DimensionInputInfo(min=(1,), opt=(2,), max=(3,))"
    assert tp.DimensionInputInfo((1, 2, 3)).value_bounds.min == (1,)
    nd = tp.NamedDimension("batch", 1, 2, 3)
    assert str(nd) == "NamedDimension<name: 'batch', bounds: (1, 2, 3)>"
    info = tp.InputInfo((nd, 4), tp.float16)
    assert info.dimension_names == {0: "batch"}
    assert str(info) == ("InputInfo<Bounds(min=(1, 4), opt=(2, 4), max=(3, 4)), dimension names: {0: 'batch'}, "
                         "dtype: float16>")


def test_unknown_dtype_suggests():
    with pytest.raises(AttributeError, match="Did you mean: tripy_lab.float32"):
        tp.float64  # noqa: B018


def test_executable_argument_errors():
    exe = tp.compile(lambda a, b: a + b, args=[tp.InputInfo((2,), tp.float32), tp.InputInfo((2,), tp.float32)])
    x = tp.ones((2,)).eval()
    with pytest.raises(tp.TripyException, match="Missing argument: b"):
        exe(x)
    with pytest.raises(tp.TripyException, match="Incorrect number of arguments"):
        exe(x, x, x)
    with pytest.raises(tp.TripyException, match="Extra keyword arguments: \\['c'\\]"):
        exe(x, x, c=x)
    with pytest.raises(tp.TripyException, match="expected data type: float32 but got: float16"):
        exe(x, tp.ones((2,), dtype=tp.float16).eval())
    with pytest.raises(tp.TripyException, match="Unexpected tensor rank"):
        exe(x, tp.ones((2, 1)).eval())
    with pytest.raises(tp.TripyException, match="Tensor `b` is not evaluated"):
        exe(x, tp.ones((2,)))
    assert np.asarray(exe(b=x, a=x)).tolist() == [2.0, 2.0]


def test_compile_rejects_non_tensor_return_and_eval_inside():
    with pytest.raises(tp.TripyException, match="Function must return 1 or more Tensors"):
        tp.compile(lambda a: 3, args=[tp.InputInfo((2,), tp.float32)])

    def peek(a):
        print(a)
        return a

    with pytest.raises(tp.TripyException, match="Cannot evaluate a tensor while compiling"):
        tp.compile(peek, args=[tp.InputInfo((2,), tp.float32)])
