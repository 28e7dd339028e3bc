"""A Linear layer with its epilogue in one GPU kernel (Pallas, Triton backend): ``act(x @ W + b)``.

XLA runs ``x @ W + b`` as a GEMM and then a separate pass for the bias (and the exact-erf GELU after it),
unless cuBLASLt's epilogue takes them, which it does not for the erf GELU or for a bias added after a
slice. This kernel accumulates in f32, adds the bias and applies the activation in f32, and rounds once to
the output type; with ``parts > 1`` it writes the N columns as ``parts`` separate arrays (q, k, v of a
packed projection), each contiguous, so no slice copies follow.

Tiles must divide the problem (``tiles_for`` returns None otherwise, and the caller keeps XLA's GEMM).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

ACTIVATIONS = ("none", "gelu_erf")


@dataclass(frozen=True)
class Tiles:
    bm: int
    bn: int
    bk: int
    warps: int
    stages: int
    group: int = 8  # programs along M that share a column band of W (L2 reuse), as Triton's tutorial does


# The best of a tile sweep on the H200 for GPT-2 small's c_fc and q/k/v projections (docs/perf-history.md, sixth
# session; big M: 128 x 128 tiles; small M: narrow row tiles, so the grid still covers the 132 SMs).
TILE_TABLE = [
    # (min M, Tiles)
    (4096, Tiles(128, 128, 64, 8, 3)),
    (512, Tiles(128, 64, 64, 4, 4)),
    (16, Tiles(32, 64, 64, 4, 3)),
]


def dtypes(mode: str) -> tuple:
    """The element types the kernel takes: f16 and bf16 (tensor cores, f32 accumulation); the interpreter
    (CPU tests) also f32, whose GPU dot would round to TF32."""
    low = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
    return low + (np.dtype(np.float32),) if mode == "interpret" else low


def _fit(dim: int, tile: int) -> int | None:
    """The largest power of two <= ``tile`` dividing ``dim``, at least 16 (Triton's smallest dot)."""
    while tile >= 16 and dim % tile:
        tile //= 2
    return tile if tile >= 16 else None


def tiles_for(m: int, n: int, k: int, parts: int = 1, tiles: Tiles | None = None) -> Tiles | None:
    """The tiles for an [m, k] x [k, n] problem (n split into ``parts``): the table's entry for m, each
    tile halved until it divides its dim; None when a dim has no such tile (the caller keeps XLA's GEMM)."""
    if n % parts:
        return None
    t = tiles or next((t for lo, t in TILE_TABLE if m >= lo), None)
    if t is None:
        return None
    bm, bn, bk = _fit(m, t.bm), _fit(n // parts, t.bn), _fit(k, t.bk)
    if None in (bm, bn, bk):
        return None
    return Tiles(bm, bn, bk, t.warps, t.stages, t.group)


# erfc(z) = t * exp(-z*z + P(t)), t = 1 / (1 + z/2), z >= 0: the Chebyshev fit of Numerical Recipes
# (section 6.2), fractional error < 1.2e-7 everywhere -- f32-exact for an f16 or bf16 result. Pallas's
# Triton lowering has no erf, and this form keeps its relative accuracy in the tail (GELU at x << 0).
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
           1.48851587, -0.82215223, 0.17087277)


def erfc_nonneg(z):
    """erfc(z) for z >= 0 (f32), from exp, multiply-adds and one division."""
    import jax.numpy as jnp

    t = 1.0 / (1.0 + 0.5 * z)
    poly = jnp.float32(_ERFC_P[-1])
    for c in reversed(_ERFC_P[:-1]):
        poly = poly * t + jnp.float32(c)
    return t * jnp.exp(poly - z * z)


def gelu_erf(y):
    """x * Phi(x) = x/2 * erfc(-x / sqrt 2), from erfc of |x| / sqrt 2 on both sides of 0."""
    import jax.numpy as jnp

    z = jnp.abs(y) * jnp.float32(1.0 / math.sqrt(2.0))
    c = erfc_nonneg(z)
    return 0.5 * y * jnp.where(y >= 0, 2.0 - c, c)


def _activate(y, act: str):
    return gelu_erf(y) if act == "gelu_erf" else y


def linear(x, w, bias=None, *, w_nk: bool, act: str = "none", parts: int = 1, tiles: Tiles | None = None,
           interpret: bool = False):
    """``act(x @ W + bias)`` for x [M, K] and W given as [N, K] (``w_nk``: a torch/tripy Linear weight) or
    [K, N]; bias [N] or None. Returns [M, N], or a tuple of ``parts`` arrays [M, N / parts]."""
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl

    if act not in ACTIVATIONS:
        raise ValueError(f"activation {act!r}: expected one of {ACTIVATIONS}")
    m, k = x.shape
    n = w.shape[0] if w_nk else w.shape[1]
    t = tiles_for(m, n, k, parts, tiles)
    if t is None:
        raise ValueError(f"no tiles divide M={m}, N={n}, K={k} (parts={parts})")
    n_part = n // parts
    grid_m, grid_n = m // t.bm, n_part // t.bn
    out_dtype = x.dtype
    has_bias = bias is not None
    # f32 (the interpreter only): exact products, not the GPU's TF32 default
    precision = jax.lax.Precision.HIGHEST if np.dtype(x.dtype) == np.float32 else None

    def kernel(x_ref, w_ref, *rest):
        b_ref = rest[0] if has_bias else None
        outs = rest[1:] if has_bias else rest
        pid = pl.program_id(0)
        part = pl.program_id(1)
        # grouped order: ``group`` row blocks walk the same column band before moving on
        in_group = t.group * grid_n
        first_m = (pid // in_group) * t.group
        rows = jnp.minimum(grid_m - first_m, t.group)
        i = first_m + (pid % in_group) % rows
        j = (pid % in_group) // rows
        r0, c0 = i * t.bm, part * n_part + j * t.bn

        def step(s, acc):
            a = x_ref[pl.ds(r0, t.bm), pl.ds(s * t.bk, t.bk)]
            if w_nk:
                b = w_ref[pl.ds(c0, t.bn), pl.ds(s * t.bk, t.bk)]
                dims = (((1,), (1,)), ((), ()))
            else:
                b = w_ref[pl.ds(s * t.bk, t.bk), pl.ds(c0, t.bn)]
                dims = (((1,), (0,)), ((), ()))
            return acc + jax.lax.dot_general(a, b, dims, preferred_element_type=jnp.float32, precision=precision)

        acc = jax.lax.fori_loop(0, k // t.bk, step, jnp.zeros((t.bm, t.bn), jnp.float32))
        if has_bias:
            acc = acc + b_ref[pl.ds(c0, t.bn)].astype(jnp.float32)[None, :]
        y = _activate(acc, act).astype(out_dtype)
        if parts == 1:
            outs[0][pl.ds(r0, t.bm), pl.ds(j * t.bn, t.bn)] = y
            return
        for p, o in enumerate(outs):
            @pl.when(part == p)
            def _store(o=o):
                o[pl.ds(r0, t.bm), pl.ds(j * t.bn, t.bn)] = y

    out_shape = [jax.ShapeDtypeStruct((m, n_part), out_dtype) for _ in range(parts)]
    params = {}
    if not interpret:
        from jax.experimental.pallas import triton as plgpu

        params["compiler_params"] = plgpu.CompilerParams(num_warps=t.warps, num_stages=t.stages)
    call = pl.pallas_call(kernel, out_shape=out_shape, grid=(grid_m * grid_n, parts), interpret=interpret,
                          name=f"linear_{act}", **params)
    args = (x, w, bias) if has_bias else (x, w)
    outs = call(*args)
    return outs[0] if parts == 1 else tuple(outs)
