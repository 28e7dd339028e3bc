"""print_module -> parse_module keeps every element's bits: special floats (+-inf, nan with payloads, -0.0,
subnormals) of every float type, int4/bool, and integers at their extremes (issue 8, finding 2)."""

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp

from tripy_lab.mlir import text
from tripy_lab.mlir.attrs import NUMPY_DTYPES, dense_elements, elements_to_numpy
from tripy_lab.mlir.dialect import ConstantOp

FLOATS = ["f32", "f16", "bf16", "f8E4M3FN", "f64"]
INTS = {"i1": (0, 1), "i4": (-8, 7), "i8": (-128, 127), "i32": (-2**31, 2**31 - 1), "i64": (-2**63, 2**63 - 1)}
SPECIAL = [np.inf, -np.inf, np.nan, -np.nan, 0.0, -0.0, 1.0, -1.5, 3.4e38, 1e-45, 6e-8, 1e-40]


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).view(np.uint8).tobytes()


def round_trip(array: np.ndarray, elem: str, generic: bool) -> np.ndarray:
    module = ModuleOp([ConstantOp(dense_elements(array, elem))])
    printed = text.print_module(module, generic=generic)
    parsed = text.parse_module(printed, verify=elem != "f64")  # f64 constants are MLIR, not TensorRT
    (op,) = [o for o in parsed.walk() if o.name == "tensorrt.constant"]
    out = elements_to_numpy(op.properties["weights"])
    # printing the parsed module again gives the same text (the printer is a function of the bits)
    assert text.print_module(parsed, generic=generic) == printed
    return out


def float_arrays(elem):
    dt = NUMPY_DTYPES[elem]
    width = dt.itemsize * 8
    raw = st.integers(0, 2**width - 1)  # every bit pattern: nan payloads, signalling nans, subnormals, inf
    with np.errstate(over="ignore"):  # 3.4e38 is inf in f16 (and nan in f8): special values too
        special = st.sampled_from([int(np.array(v).astype(dt).view(f"u{dt.itemsize}")) for v in SPECIAL])
    sizes = st.sampled_from([0, 1, 2, 5, 100, 101, 130])  # <= 100 prints a list, more prints hex
    return sizes.flatmap(lambda n: st.lists(st.one_of(raw, special), min_size=n, max_size=n)).map(
        lambda v: np.array(v, dtype=f"u{dt.itemsize}").view(dt))


@pytest.mark.parametrize("elem", FLOATS)
@pytest.mark.parametrize("generic", [False, True])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_float_elements_round_trip_bit_exactly(elem, generic, data):
    array = data.draw(float_arrays(elem))
    shape = data.draw(st.sampled_from([(array.size,), (1, array.size)]))
    array = array.reshape(shape)
    out = round_trip(array, elem, generic)
    assert out.dtype == array.dtype and out.shape == array.shape
    assert bits(out) == bits(array)


@pytest.mark.parametrize("elem", sorted(INTS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_integer_elements_round_trip_exactly(elem, data):
    lo, hi = INTS[elem]
    values = data.draw(st.lists(st.one_of(st.integers(lo, hi), st.sampled_from([lo, hi, 0, -1 if lo else 0])),
                                min_size=0, max_size=120))
    array = np.array(values, dtype=np.int64).astype(NUMPY_DTYPES[elem])
    for generic in (False, True):
        out = round_trip(array, elem, generic)
        assert out.dtype == array.dtype
        assert np.array_equal(out.astype(np.int64), array.astype(np.int64))


@pytest.mark.parametrize("value, elem, spelled", [
    (-np.inf, "f32", "0xFF800000"), (np.inf, "f16", "0x7C00"), (-np.inf, "bf16", "0xFF80"),
    (np.nan, "f8E4M3FN", "0x7F")])
def test_splat_special_values_parse_as_bits_not_integers(value, elem, spelled):
    """The printer writes ``dense<0xFF800000>``; it used to parse back as the integer 4286578688."""
    array = np.full((3, 4), value).astype(NUMPY_DTYPES[elem])
    printed = text.print_module(ModuleOp([ConstantOp(dense_elements(array, elem))]))
    assert f"dense<{spelled}>" in printed
    out = elements_to_numpy(next(o for o in text.parse_module(printed).walk()
                                 if o.name == "tensorrt.constant").properties["weights"])
    assert bits(out) == bits(array)


def test_signalling_nan_payload_survives():
    array = np.array([0x7F800001, 0xFFBFFFFF, 0x7FC12345], dtype=np.uint32).view(np.float32)
    assert bits(round_trip(array, "f32", True)) == bits(array)


def test_decimal_literals_round_once_to_the_element_type():
    """A decimal is rounded straight to the element type, as MLIR does, not through a Python float first."""
    # 1 + 2**-11 + 2**-60 is just above the f16 halfway point between 1 and 1 + 2**-10; through f64 it
    # becomes exactly the halfway point and rounds to even (1.0).
    value = "1.00048828125000000086736173798840354720596694946289062500001"
    parsed = text.parse_module(f'"tensorrt.constant"() <{{weights = dense<{value}> : tensor<f16>}}> : () -> '
                               f"tensor<f16>")
    out = elements_to_numpy(next(o for o in parsed.walk() if o.name == "tensorrt.constant").properties["weights"])
    assert out.view(np.uint16) == np.array(1.0009765625, np.float16).view(np.uint16)


def test_hex_literals_out_of_range_are_rejected():
    from xdsl.utils.exceptions import ParseError

    with pytest.raises(ParseError, match="does not fit"):
        text.parse_module('"tensorrt.constant"() <{weights = dense<0x1FF800000> : tensor<f32>}> : () -> '
                          "tensor<f32>")


def test_bf16_and_f8_extremes():
    for elem, dt in (("bf16", ml_dtypes.bfloat16), ("f8E4M3FN", ml_dtypes.float8_e4m3fn)):
        info = ml_dtypes.finfo(dt)
        array = np.array([info.max, -info.max, info.tiny, info.smallest_subnormal, -0.0], dtype=dt)
        assert bits(round_trip(array, elem, False)) == bits(array)


@pytest.mark.parametrize("elem", ["f32", "f16", "bf16"])
@settings(max_examples=40, deadline=None)
@given(value=st.fractions(min_value=-70000, max_value=70000, max_denominator=10**12))
def test_decimals_parse_to_the_nearest_value_like_mlir(elem, value):
    """Any decimal (not only what the printer writes) parses to the correctly rounded value of the type."""
    from fractions import Fraction

    from xdsl.utils.exceptions import ParseError

    spelled = f"{float(value):.17e}"  # a decimal the f64 fast path and the exact path must agree on
    source = f'"tensorrt.constant"() <{{weights = dense<{spelled}> : tensor<{elem}>}}> : () -> tensor<{elem}>'
    q = Fraction(spelled)
    exact = text._round_to(abs(q), elem) if q else Fraction(0)
    if exact is None:  # beyond the type's largest value: refused, as MLIR refuses it
        with pytest.raises(ParseError, match="out of range"):
            text.parse_module(source)
        return
    out = elements_to_numpy(next(o for o in text.parse_module(source).walk()
                                 if o.name == "tensorrt.constant").properties["weights"])
    want = np.array(float(exact) * (1 if q >= 0 else -1), dtype=NUMPY_DTYPES[elem])
    assert bits(out) == bits(want) or (float(out) == 0 and float(want) == 0)
