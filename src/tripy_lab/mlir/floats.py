"""MLIR's float spelling: ``format_float(value, elem)`` writes a float exactly as llvm::APFloat::toString and
mlir::printFloatValue do (``9.99999974E-6``), for every float element type of the dialect."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import ml_dtypes
import numpy as np
from xdsl.ir import Attribute

from .attrs import NUMPY_DTYPES, element_name

# ---------------------------------------------------------------------------------------------
# floats, exactly as llvm::APFloat::toString + mlir::printFloatValue spell them

# element type -> (significand bits incl. the integer bit, minimum normal exponent, largest finite)
_FLOAT_SEMANTICS = {
    "f64": (53, -1022, float(np.finfo(np.float64).max)),
    "f32": (24, -126, float(np.finfo(np.float32).max)),
    "f16": (11, -14, 65504.0),
    "bf16": (8, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    "f8E4M3FN": (4, -6, 448.0),
    "f4E2M1FN": (2, 0, 6.0),
}


def _to_decimal(mant: int, exp2: int, precision: int, max_padding: int, truncate_zero: bool) -> str:
    """Decimal spelling of ``mant * 2**exp2`` (> 0), following APFloat::toString."""
    tz = (mant & -mant).bit_length() - 1
    mant, exp2 = mant >> tz, exp2 + tz
    exp = 0
    if exp2 >= 0:
        sig = mant << exp2
    else:  # N * 2^-e == N * 5^e * 10^-e
        sig, exp = mant * 5 ** (-exp2), exp2
    # drop decimal digits the requested precision cannot show (truncating, like APFloat)
    bits, needed = sig.bit_length(), (precision * 196 + 58) // 59
    if bits > needed and (tens := (bits - needed) * 59 // 196):
        sig //= 10**tens
        exp += tens
    digits = str(sig)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    if len(digits) > precision:  # round half up to `precision` digits
        n = len(digits)
        if digits[precision] < "5":
            digits = digits[:precision].rstrip("0")
        else:
            kept = digits[:precision].rstrip("9")
            digits = "1" if not kept else kept[:-1] + str(int(kept[-1]) + 1)
        exp += n - len(digits)
    nd = len(digits)
    if not max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or nd + exp > precision
    else:
        msd = exp + nd - 1
        scientific = msd < 0 and -msd > max_padding
    if scientific:
        e10 = exp + nd - 1
        s = digits[0] + "." + ("0" if nd == 1 and truncate_zero else digits[1:])
        if not truncate_zero and precision > nd - 1:
            s += "0" * (precision - nd + 1)
        e = str(abs(e10))
        if not truncate_zero and len(e) < 2:
            e = "0" + e
        return s + ("E" if truncate_zero else "e") + ("+" if e10 >= 0 else "-") + e
    if exp >= 0:
        return digits + "0" * exp
    whole = exp + nd
    if whole > 0:
        return digits[:whole] + "." + digits[whole:]
    return "0." + "0" * (-whole) + digits


def _round_to(q: Fraction, elem: str) -> Fraction | None:
    """``q`` (> 0) rounded to nearest-even in ``elem``; None on overflow."""
    p, emin, largest = _FLOAT_SEMANTICS[elem]
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    n, rem = divmod(q, ulp)
    if rem * 2 > ulp or (rem * 2 == ulp and n % 2):
        n += 1
    r = n * ulp
    return None if r > largest else r


def _hex_bits(value: float, elem: str) -> str:
    bits = int(np.array([value], dtype=NUMPY_DTYPES[elem]).view(f"u{NUMPY_DTYPES[elem].itemsize}")[0])
    return f"0x{bits:X}"


def format_float(value: float, elem: str | Attribute = "f32") -> str:
    """``value`` (already representable in ``elem``) as MLIR prints it: ``1.000000e+00``,
    ``9.99999974E-6``, ``0x7FC00000``..."""
    value = float(value)
    # the sign bit is part of the key: -0.0 == 0.0 would share a cache entry
    return _format_float(value, math.copysign(1.0, value), elem if isinstance(elem, str) else element_name(elem))


@functools.lru_cache(maxsize=1 << 16)
def _format_float(value: float, sign: float, elem: str) -> str:
    p = _FLOAT_SEMANTICS[elem][0]
    if value != value or value in (float("inf"), float("-inf")):
        return _hex_bits(value, elem)
    sign = "-" if np.signbit(value) else ""
    if value == 0:
        return sign + "0.000000e+00"
    mant, den = abs(value).as_integer_ratio()
    exp2 = -(den.bit_length() - 1)
    s = _to_decimal(mant, exp2, 6, 0, False)
    if _round_to(Fraction(s), elem) == Fraction(abs(value)):
        return sign + s
    s = _to_decimal(mant, exp2, 2 + p * 59 // 196, 3, True)
    return sign + s if "." in s else _hex_bits(value, elem)
