"""A Linear layer and its GELU, run as one GPU kernel (``pallas.linear``) instead of XLA's GEMM + pass.

The pattern, as ``tp.Linear`` followed by ``tp.gelu`` lowers::

    wt = tensorrt.transpose W                              -- optional (W [N, K]; or matrix_multiply op1)
    w  = tensorrt.reshape wt -> [1, .., K, N]              -- optional, leading 1s only
    y  = tensorrt.matrix_multiply x, w                     -- x [..., K]
    y  = tensorrt.element_wise <kSUM> (y, b)               -- b [.., N] (leading 1s)
    o  = tensorrt.activation {kGELU_ERF} y

Every intermediate must have one use. ``find`` matches the structure; ``plan`` decides while tracing, with
the values known: CUDA, f16 or bf16, a tile configuration dividing M x N x K. Otherwise the ops run one by
one, so the rewrite changes how, never what (the kernel rounds once, after the f32 bias add and GELU,
where XLA rounds the GEMM's and the add's results to f16 first: differences within an f16 ulp).

``MODE``: "off" (the default), "auto" (Pallas on GPUs), or "interpret" (Pallas's interpreter, on any
backend: the CPU tests check the rewrite with it). Off by default because it does not win: on the H200,
GPT-2 small at B8 T1024 (``benchmarks/gpt_options.py``, ``pallas_linear`` vs ``defaults``) ran 5.67 vs
5.30 ms with the first tile table and 5.31 vs 5.30 ms with the swept one: the Triton GEMM reaches
300-450 TFLOP/s where cuBLAS reaches 700, which costs what the GELU pass and the q/k/v slice copies it
saves cost. At B1 T128 it gained over cuDNN attention (0.53 vs 0.58 ms), but XLA's own fusions of the
unfused attention, emitted natively, do better still (0.50 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tripy_lab.engine.xla.patterns import attr, producer

MODE = "off"


@dataclass
class Match:
    ops: list[int]  # indices into program.ops() of the matmul, the add and the activation
    removed: list[int]  # the matmul and the add (their results only feed the pattern)
    shape_read: list[int]  # always empty: a pattern whose values a tensorrt.shape reads is not matched
    x: object
    w: object  # the weight the kernel reads: W [N, K] (``w_nk``) or the matmul's [.., K, N] operand
    w_nk: bool
    bias: object
    act: str
    out: object


def applies(platform: str, mode: str | None = None) -> bool:
    """Whether ``mode`` (default ``MODE``) runs the kernel on ``platform``: "auto" on GPUs, "interpret"
    anywhere."""
    mode = MODE if mode is None else mode
    return mode == "interpret" or (mode == "auto" and platform == "gpu")


def dtypes_fit(mode: str, x, *others) -> bool:
    """x's element type is one the kernel takes and every other operand has it too."""
    from tripy_lab.engine.xla import pallas as xla_pallas

    dt = np.dtype(x.dtype)
    return dt in xla_pallas.dtypes(mode) and all(np.dtype(o.dtype) == dt for o in others)


def _one_use(value) -> bool:
    return len(list(value.uses)) == 1


def weight_source(w):
    """W [N, K] when ``w`` is ``reshape(transpose(W))`` (or ``transpose(W)``) adding only leading 1s."""
    op = producer(w)
    if op is not None and op.name == "tensorrt.reshape":
        shape = tuple(w.type.get_shape())
        inner = tuple(op.input.type.get_shape())
        if len(inner) != 2 or shape[-2:] != inner or any(d != 1 for d in shape[:-2]):
            return None
        op = producer(op.input)
    if op is None or op.name != "tensorrt.transpose" or tuple(attr(op, "permutation", ())) != (1, 0):
        return None
    return op.input


def find(ops: list) -> list[Match]:
    index = {id(op): i for i, op in enumerate(ops)}
    out = []
    for op in ops:
        if op.name != "tensorrt.activation" or str(attr(op, "activationType", "")) != "kGELU_ERF":
            continue
        add = producer(op.input)
        if add is None or add.name != "tensorrt.element_wise" or attr(add, "elementwiseOperation") != "kSUM" \
                or not _one_use(op.input):
            continue
        a, b = add.input1, add.input2
        mm = producer(a)
        if mm is None or mm.name != "tensorrt.matrix_multiply":
            mm, a, b = producer(b), b, a
        if mm is None or mm.name != "tensorrt.matrix_multiply" or not _one_use(a) \
                or attr(mm, "op0", "kNONE") != "kNONE" or attr(mm, "op1", "kNONE") not in ("kNONE", "kTRANSPOSE"):
            continue
        x, w = mm.input0, mm.input1
        xs, ws, bs = (tuple(v.type.get_shape()) for v in (x, w, b))
        if len(ws) < 2 or any(d != 1 for d in ws[:-2]) or len(xs) < 2 or any(d != 1 for d in bs[:-1]):
            continue
        if attr(mm, "op1", "kNONE") == "kTRANSPOSE":  # the operand is W [N, K] itself
            if len(ws) != 2:
                continue
            w_nk = True
        else:  # read W [N, K] from before its transpose (no transposed copy of W), else the operand
            src = weight_source(w)
            w, w_nk = (src, True) if src is not None else (w, False)
        out.append(Match(sorted(index[id(o)] for o in (mm, add, op)), sorted([index[id(mm)], index[id(add)]]), [],
                         x, w, w_nk, b, "gelu_erf", op.results[0]))
    return out


def plan(m: Match, env: dict, device_platform: str, mode: str | None = None) -> dict | None:
    """Keyword arguments for ``run`` with the values in ``env``, or None: run the ops one by one."""
    from tripy_lab.engine.xla import pallas as xla_pallas

    mode = MODE if mode is None else mode
    if not applies(device_platform, mode):
        return None
    x, w, b = env[m.x], env[m.w], env[m.bias]
    if isinstance(x, np.ndarray) or not dtypes_fit(mode, x, w, b):  # numpy: folded while tracing
        return None
    k, n = (int(w.shape[-1]), int(w.shape[-2])) if m.w_nk else (int(w.shape[-2]), int(w.shape[-1]))
    if int(x.shape[-1]) != k or int(np.prod(b.shape)) != n:
        return None
    rows = int(np.prod(x.shape[:-1]))
    if xla_pallas.tiles_for(rows, n, k) is None:
        return None
    return {"act": m.act, "interpret": mode == "interpret"}


def run(m: Match, env: dict, act: str, interpret: bool):
    import jax.numpy as jnp

    from tripy_lab.engine.xla import pallas as xla_pallas

    x, w, b = env[m.x], env[m.w], env[m.bias]
    y = xla_pallas.linear(jnp.asarray(x).reshape(-1, x.shape[-1]), jnp.asarray(w).reshape(w.shape[-2:]),
                          jnp.asarray(b).reshape(-1), w_nk=m.w_nk, act=act, interpret=interpret)
    return y.reshape((*x.shape[:-1], y.shape[-1]))
