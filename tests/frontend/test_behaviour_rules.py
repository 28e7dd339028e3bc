"""nvtripy 0.1.7's pinned behaviour (issue 24 items 4, 5, 9) on every engine: bfloat16 from a torch-like DLPack
producer, DimensionSize rules, argument-count errors and the missing-attribute hint."""

import numpy as np
import pytest

import tripy_lab as tp


class _TorchLikeBf16:
    """What a CPU ``torch.bfloat16`` tensor offers tripy: DLPack (bfloat16 type code), a non-numpy dtype, a shape,
    and a ``.numpy()`` that refuses bfloat16 (torch's "Got unsupported ScalarType BFloat16")."""

    def __init__(self, values):
        jnp = pytest.importorskip("jax.numpy")
        self._array = jnp.asarray(np.asarray(values, np.float32)).astype(jnp.bfloat16)
        self.dtype = "torch.bfloat16"
        self.shape = tuple(self._array.shape)

    def __dlpack__(self, *args, **kwargs):
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        raise TypeError("Got unsupported ScalarType BFloat16")


def test_bfloat16_from_a_torch_like_tensor(engine):
    values = [[1.0, -2.5], [0.375, 4.0]]
    t = tp.Tensor(_TorchLikeBf16(values))
    assert t.dtype is tp.bfloat16 and t.shape == (2, 2)
    out = tp.cast(t * 2, tp.float32).numpy()
    np.testing.assert_array_equal(out, np.asarray(values, np.float32) * 2)
    exe = tp.compile(lambda a: a + 1, args=[tp.InputInfo((2, 2), tp.bfloat16)], engine=engine)
    np.testing.assert_array_equal(exe(_TorchLikeBf16(values)).numpy().astype(np.float32),
                                  np.asarray(values, np.float32) + 1)


def test_slice_step_may_be_a_dimension_size(engine):
    a = tp.Tensor(np.arange(10, dtype=np.float32))
    np.testing.assert_array_equal(a[::tp.DimensionSize(2)].numpy(), np.arange(10)[::2])
    np.testing.assert_array_equal(a[8:1:-tp.DimensionSize(3)].numpy(), np.arange(10)[8:1:-3])
    exe = tp.compile(lambda x: x[1::tp.DimensionSize(2)], args=[tp.InputInfo(((2, 5, 9),), tp.float32)],
                     engine=engine)
    np.testing.assert_array_equal(exe(np.arange(7, dtype=np.float32)).numpy(), np.arange(7)[1::2])


def test_a_dynamic_slice_step_is_a_clear_error(engine):
    with pytest.raises(tp.TripyException, match="Slice step must be known"):
        tp.compile(lambda x: x[::x.shape[0]], args=[tp.InputInfo(((2, 5, 9),), tp.float32)], engine=engine)


def test_dimension_size_arithmetic_and_where_give_dimension_sizes(engine):
    def f(x):
        total = x.shape[0] + x.shape[1]
        picked = tp.where(x.shape[0] > 2, x.shape[0], x.shape[1])
        assert isinstance(total, tp.DimensionSize) and isinstance(picked, tp.DimensionSize)
        assert all(isinstance(d, tp.DimensionSize) for d in x.shape[0:1])
        return tp.ones((total,)) * tp.cast(picked, tp.float32)

    exe = tp.compile(f, args=[tp.InputInfo(((1, 2, 4), 3), tp.float32)], engine=engine)
    np.testing.assert_array_equal(exe(np.zeros((4, 3), np.float32)).numpy(), np.full(7, 4.0))
    np.testing.assert_array_equal(exe(np.zeros((1, 3), np.float32)).numpy(), np.full(4, 3.0))
    chosen = tp.where(tp.Tensor(False), tp.DimensionSize(2), tp.DimensionSize(5))
    assert isinstance(chosen, tp.DimensionSize) and int(chosen) == 5


@pytest.mark.parametrize("value", [2**31, 2**32 + 2, 2**63, -(2**31) - 1])
def test_dimension_size_out_of_int32_is_a_tripy_exception(value):
    with pytest.raises(tp.TripyException, match=rf"(?s)Value {value} does not fit in int32.*parameter: 'data'"):
        tp.DimensionSize(value)
    assert int(tp.DimensionSize(2**31 - 1)) == 2**31 - 1


def test_wrong_argument_counts_are_tripy_exceptions():
    a = tp.ones((2, 3))
    with pytest.raises(tp.TripyException, match="Function expects 3 parameters, but 4 arguments were provided."):
        tp.transpose(a, 1, 2, 3)
    with pytest.raises(tp.TripyException, match=r"(?s)'transpose'.*[Mm]issing a required argument: 'dim1'"):
        a.transpose(0)
    with pytest.raises(tp.TripyException, match=r"(?s)'relu'.*[Uu]nexpected keyword argument 'foo'"):
        tp.relu(a, foo=1)
    assert tp.transpose(a, 0, 1).shape == (3, 2)  # the wrapper passes good calls through


def test_missing_tensor_attribute_suggests(engine):
    a = tp.Tensor([1, 2])
    with pytest.raises(AttributeError, match=r"Did you mean: 'tripy_lab.ones_like'\?"):
        getattr(a, "ones_like")  # noqa: B009
    with pytest.raises(AttributeError, match=r"Did you mean: 'shape'\?"):
        getattr(a, "shpe")  # noqa: B009
    assert not hasattr(a, "no_way_this_will_ever_be_a_real_tensor_attr_name")


def test_non_canonical_strides_are_copied_with_a_note(engine, capsys):
    """Decision for issue 24 item 8: nvtripy refuses these (test_stride.py) because MLIR-TensorRT's memrefs need
    canonical strides; a tp.Tensor's data is copied into the program anyway, so it is made contiguous, noted once.
    Executable arguments of any strides are read right on every engine."""
    transposed = np.arange(12, dtype=np.float32).reshape(3, 4).T
    t = tp.Tensor(transposed)
    assert t._data().flags.c_contiguous
    np.testing.assert_array_equal((t + 0).numpy(), transposed)
    out = capsys.readouterr().out
    assert out.count("non-canonical strides") <= 1  # once per process
    exe = tp.compile(lambda a: a * 2, args=[tp.InputInfo((4, 3), tp.float32)], engine=engine)
    np.testing.assert_array_equal(exe(transposed).numpy(), transposed * 2)
    np.testing.assert_array_equal(exe(np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]).numpy(),
                                  np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2] * 2)


def _ready(module):
    module.initialize_dummy_parameters()
    return module


@pytest.mark.parametrize("make, message", [
    (lambda: tp.split(tp.ones((4,)), []), "Split indices must not be empty"),
    (lambda: _ready(tp.LayerNorm(3))(tp.ones((3,))), "Input must have a rank of at least 2, but got input of rank: 1"),
    (lambda: _ready(tp.InstanceNorm(2))(tp.ones((1, 2))),
     "Input must have a rank of at least 3, but got input of rank: 2"),
    (lambda: _ready(tp.GroupNorm(1, 2))(tp.ones((1, 3, 2))), "Expected 2 channels in the input, but got 3 channels"),
    (lambda: tp.masked_fill(tp.ones((2,)), tp.ones((2,)), 0.0), "Invalid inputs for function: 'masked_fill'"),
])
def test_messages_say_what_nvtripys_say(make, message):
    module_made = None
    try:
        module_made = make()
    except tp.TripyException as exc:
        text = str(exc)
        assert text.startswith(message), text
        assert "-->" in text and "test_behaviour_rules.py" in text  # our extra lines: the user's line
    else:
        raise AssertionError(f"no error: {module_made}")


@pytest.mark.parametrize("kwargs, message", [
    ({"padding": ((2, 2),)}, "Padding must have the same length as kernel_dims."),
    ({"padding": ((2, 2, 2), (2, 2, 2))}, "For parameter: 'padding', expected an instance of type: "
                                          "'Sequence[Tuple[int, int]] | None'"),
    ({"padding": ((1, 2), (-3, 1))}, "Negative padding is not supported."),
    ({"stride": (-1, 0)}, "Non-positive stride is not supported."),
    ({"stride": (2, 2, 2)}, "Stride must have the same length as kernel_dims."),
    ({"dilation": (-1, 0)}, "Non-positive dilation is not supported."),
    ({"dilation": (2, 2, 2)}, "Dilation must have the same length as kernel_dims."),
])
@pytest.mark.parametrize("cls", [tp.Conv, tp.ConvTranspose])
def test_conv_parameter_messages_are_nvtripys(cls, kwargs, message):
    with pytest.raises(tp.TripyException) as info:
        cls(3, 16, (5, 5), **kwargs)
    assert str(info.value).startswith(message)
    assert f"of '{cls.__name__}'" in str(info.value)  # our line naming the parameter and the layer


def test_conv_rank_mismatch_message(engine):
    conv = tp.Conv(3, 16, (5,))
    conv.initialize_dummy_parameters()
    with pytest.raises(tp.TripyException, match="Input and weight should have the same number of spatial dim"):
        conv(tp.ones((4, 3, 8, 8)))
