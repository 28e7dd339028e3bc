"""Value rules every engine follows where IEEE / two's complement leave a choice (docs/SEMANTICS.md).

``xp`` is ``numpy`` or ``jax.numpy``: the reference engine and the xla engine (static and traced values) call
the same functions, so they give the same bits.

    float_to_int(xp, x, dtype)      # truncate toward 0; nan -> 0; saturate at the target's min/max
    int_divide(xp, a, b, kind)      # kDIV truncates, kFLOOR_DIV floors; x / 0 == x // 0 == 0
    float_floor_divide(xp, a, b)    # floor(a / b), exact where b divides a even if the division is not
"""

from __future__ import annotations

import ml_dtypes
import numpy as np


def is_float(dt) -> bool:
    """f64/f32/f16 and the ml_dtypes floats (bf16, f8...: numpy kind "V")."""
    d = np.dtype(dt)
    if d.kind == "f":
        return True
    try:
        ml_dtypes.finfo(d)
        return True
    except (ValueError, TypeError):
        return False


def is_int(dt) -> bool:
    d = np.dtype(dt)
    if d.kind in "iu":
        return True
    try:
        ml_dtypes.iinfo(d)
        return True
    except (ValueError, TypeError):
        return False


def float_to_int(xp, x, dtype):
    """Cast float ``x`` to the integer ``dtype`` the way TensorRT's saturating cast does: truncate toward zero,
    values beyond the type's range become its min / max (so do +-inf), nan becomes 0."""
    dt = np.dtype(dtype)
    info = ml_dtypes.iinfo(dt)
    wide = np.float64 if np.dtype(x.dtype).itemsize >= 8 else np.float32  # exact for every narrower float
    xf = x.astype(wide)
    hi = xf >= wide(info.max + 1)  # max + 1 and min are powers of two: exact in f32 and f64
    lo = xf < wide(info.min)
    nan = xf != xf
    mid = xp.where(hi | lo | nan, wide(0), xp.trunc(xf)).astype(dt)
    return xp.where(hi, xp.asarray(info.max, dt), xp.where(lo, xp.asarray(info.min, dt), mid))


def int_divide(xp, a, b, kind: str):
    """Integer ``a / b`` (kDIV: truncates toward zero, as TensorRT) or ``a // b`` (kFLOOR_DIV: floors).
    Division by zero gives 0 (so ``a % 0 == a``, since tripy's ``%`` is ``a - (a // b) * b``);
    ``INT_MIN // -1`` wraps to ``INT_MIN``."""
    zero = b == 0
    safe = xp.where(zero, xp.ones_like(b), b)
    q = xp.floor_divide(a, safe)
    if kind == "kDIV":
        r = a - q * safe
        q = q + ((r != 0) & ((a < 0) != (safe < 0))).astype(q.dtype)
    return xp.where(zero, xp.zeros_like(q), q)


def float_floor_divide(xp, a, b):
    """``floor(a / b)`` for floats (TensorRT's kFLOOR_DIV). CUDA divides f32 to within 2 ulp, not correctly
    rounded, so an exact integer quotient can land just below it (``x // x == 0`` was seen on an H200): where
    the remainder is exactly 0 the quotient is that integer. With IEEE division (CPUs) this is ``floor``."""
    q = xp.divide(a, b)
    return xp.where(xp.fmod(a, b) == 0, xp.round(q), xp.floor(q))
