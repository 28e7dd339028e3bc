"""Scaled-dot-product attention in the MLIR, run as one fused kernel (``jax.nn.dot_product_attention``).

The pattern, as the frontend lowers ``softmax(q @ k^T * scale [masked]) @ v``::

    kt = tensorrt.transpose k (last two dims swapped)      -- or matrix_multiply op1 = kTRANSPOSE
    s  = tensorrt.matrix_multiply q, kt
    s  = tensorrt.element_wise <kPROD|kDIV> (s, c)          -- optional; c a scalar constant
    s  = tensorrt.select (mask, fill, s) | (mask, s, fill)  -- optional; fill all -inf (or <= -1e4)
    s  = tensorrt.cast s to f32                             -- optional, with the cast back below
    p  = tensorrt.softmax {axis = last} s
    p  = tensorrt.cast p to s's dtype                       -- (softmax in f32 of f16/bf16 scores)
    o  = tensorrt.matrix_multiply p, v

Each intermediate must have no other use that reads its data (``tensorrt.shape`` may read its shape:
the engine gives such a value an abstract stand-in, ``jax.eval_shape`` of its op). ``find`` matches the
pattern on the program (structure only); whether a match runs fused is decided while tracing, when the
values are known: the scale and mask must be static (the mask is evaluated in numpy through constants
and shape values), the mask causal (lower triangular) or absent, q/k/v of one rank with equal batch and
head dims; with ``implementation="cudnn"`` also f16/bf16 on a GPU with head dim <= 128. Anything else
runs the original ops one by one (``plan`` returns None), so the rewrite changes how, never what.

When q, k and v are slices of one packed projection (``x @ W + b`` reshaped to [B, T, 3, H, D] and
transposed, or split along its last dim by ``tp.split`` and each reshaped and transposed), they are computed as
one GEMM each, in the [B, T, H, D] layout the kernel reads
(``SPLIT_PACKED``), instead of slicing copies out of the packed result. XLA merges those three GEMMs into one
again (its dot merger), unless their weights are separate arrays and the merger is off: ``QKV_APART``.

``MODE``: "auto" (cuDNN on GPUs for f16/bf16 when the scores have at least ``FUSE_MIN_SCORES``
elements, otherwise unfused), "cudnn", "xla" (jax's own implementation: fused at the jax level; the CPU
tests use it to check the rewrite), or "off".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tripy_lab.engine.xla.patterns import attr, producer

MODE = "auto"
# q, k, v sliced out of one packed projection (GPT-2's c_attn) are computed as three GEMMs that write the
# fused kernel's layout directly (the packed GEMM and its slice copies are then dead code for XLA)
SPLIT_PACKED = True
# From QKV_APART_MIN_ROWS rows (B x T) on, the three GEMMs of a packed projection whose weight (and bias) are
# constants run on copies of W's (and b's) parts cut apart at build time, passed as device-resident arguments,
# with XLA's dot merger off for that executable (``apart_options``): each is a cuBLASLt GEMM with its bias epilogue
# writing its part straight in the kernel's layout, with no per-call slice copies of W or of the packed result.
# The copies cost memory (W and b once more: 3.4 MB a layer for GPT-2 small). GPT-2 small on the H200
# (docs/perf-history.md, seventeenth session), back to back: with q/k/v from three Linears, merged vs apart, B8
# T1024 4.82 vs 4.69 ms, B4 T1024 2.54 vs 2.54, B2 T1024 1.44 vs 1.45 ms (so from 8192 rows); with the merger off
# but W sliced per call, B8 T1024 read 4.98 ms; benchmarks/bench_gpu.py, packed spelling, B8 T1024 4.80 ms before,
# 4.66 ms after.
# "auto": CUDA only; "always": any platform (the CPU tests); "off".
QKV_APART = "auto"
QKV_APART_MIN_ROWS = 8192
_SWAP_LAST = {2: (1, 0), 3: (0, 2, 1), 4: (0, 1, 3, 2), 5: (0, 1, 2, 4, 3)}
# "auto" fuses only attention whose scores (batch x heads x T x S) have at least this many elements. Below
# it XLA's own fusions of the unfused ops are as fast or faster, and the whole program stays in one CUDA
# graph (a cuDNN call splits XLA's command buffer). GPT-2 small on the H200 (docs/perf-history.md, back-to-
# back calls, unfused vs cuDNN): B1 T128 (0.2 M scores) 0.52 vs 0.58-0.79 ms, B1 T256 (0.8 M) 0.57 vs
# 0.67 ms, B4 T256 and B1 T512 (3.1 M) equal, B8 T512 (25 M) 3.44 vs 2.71 ms.
FUSE_MIN_SCORES = 1 << 21


def scores_size(m: Match, shapes) -> int:
    """Elements of the attention scores of ``m``, given the shapes of q and k (``shapes[value]``)."""
    q, k = shapes(m.q), shapes(m.k)
    return int(np.prod(q[:-1], dtype=np.int64)) * int(k[-2])


def auto_fuses(mode: str, platform: str) -> bool:
    """Whether ``mode`` may fuse attention on ``platform`` (then by size, for "auto")."""
    return mode != "off" and not (mode == "auto" and platform == "cpu")


@dataclass
class Match:
    ops: list[int]  # indices into program.ops() of the pattern's ops (in program order)
    removed: list[int]  # the ones whose results only the pattern uses (not run on their own)
    shape_read: list[int]  # removed ops that need abstract values (a tensorrt.shape reads one of the chain)
    q: object
    k: object
    v: object
    k_transposed_by: str  # "transpose" (k is the transpose's input) or "op1"
    scale: object | None  # SSA value of the scale constant
    scale_op: str  # "kPROD" / "kDIV" / ""
    mask: object | None
    fill: object | None
    keep_when: bool  # the mask keeps a score where it is True (select(mask, s, fill)) or False
    out: object


def _single_use(value) -> bool:
    """One use that reads the data (``tensorrt.shape`` users only read the static shape)."""
    return sum(1 for u in value.uses if u.operation.name != "tensorrt.shape") == 1


def _shape_read(op) -> bool:
    return any(u.operation.name == "tensorrt.shape" for r in op.results for u in r.uses)


def _element(value) -> str:
    return str(value.type.element_type)


def find(ops: list) -> list[Match]:
    """Every attention pattern in ``ops`` (``program.ops()``), matched backwards from ``p @ v``."""
    index = {id(op): i for i, op in enumerate(ops)}
    out = []
    for op in ops:
        m = _match_at(op, index)
        if m is not None:
            out.append(m)
    return out


def _match_at(op, index) -> Match | None:
    if op.name != "tensorrt.matrix_multiply" or attr(op, "op0", "kNONE") != "kNONE" \
            or attr(op, "op1", "kNONE") != "kNONE":
        return None
    p, v = op.input0, op.input1
    rank = len(p.type.get_shape())
    chain = []
    # softmax in f32 of f16/bf16 scores (``softmax(s.float()).half()``): the fused kernel's softmax is f32 too
    narrow = producer(p)
    if narrow is not None and narrow.name == "tensorrt.cast" and _single_use(p):
        chain.append(narrow)
        p = narrow.input
    else:
        narrow = None
    sm = producer(p)
    if sm is None or sm.name != "tensorrt.softmax" or not _single_use(p) or int(attr(sm, "axis", -1)) != rank - 1:
        return None
    chain.append(sm)
    s = sm.input
    widen = producer(s)
    if narrow is not None:
        if widen is None or widen.name != "tensorrt.cast" or not _single_use(s) \
                or _element(widen.input) != _element(narrow.results[0]) or _element(s) != "f32":
            return None
        chain.append(widen)
        s = widen.input
    mask = fill = None
    keep_when = True
    sel = producer(s)
    if sel is not None and sel.name == "tensorrt.select" and _single_use(s):
        then_, else_ = sel.thenInput, sel.elseInput
        then_is_scores = producer(then_) is not None and producer(then_).name in (
            "tensorrt.element_wise", "tensorrt.matrix_multiply") and _single_use(then_)
        s, fill, keep_when = (then_, else_, True) if then_is_scores else (else_, then_, False)
        mask = sel.condition
        chain.append(sel)
    scale = None
    scale_op = ""
    ew = producer(s)
    if ew is not None and ew.name == "tensorrt.element_wise" and _single_use(s) \
            and attr(ew, "elementwiseOperation") in ("kPROD", "kDIV"):
        kind = attr(ew, "elementwiseOperation")
        a, b = ew.input1, ew.input2
        a_mm = producer(a) is not None and producer(a).name == "tensorrt.matrix_multiply"
        if a_mm:
            s, scale = a, b
        elif kind == "kPROD" and producer(b) is not None and producer(b).name == "tensorrt.matrix_multiply":
            s, scale = b, a
        else:
            return None
        if any(d != 1 for d in scale.type.get_shape()):
            return None
        scale_op = kind
        chain.append(ew)
    mm = producer(s)
    if mm is None or mm.name != "tensorrt.matrix_multiply" or not _single_use(s) \
            or attr(mm, "op0", "kNONE") != "kNONE":
        return None
    chain.append(mm)
    q, kt = mm.input0, mm.input1
    if attr(mm, "op1", "kNONE") == "kTRANSPOSE":
        k, how = kt, "op1"
    elif attr(mm, "op1", "kNONE") == "kNONE":
        tr = producer(kt)
        if tr is None or tr.name != "tensorrt.transpose" or tuple(attr(tr, "permutation", ())) != _SWAP_LAST.get(
                rank):
            return None
        k, how = tr.input, "transpose"
        if _single_use(kt):
            chain.append(tr)
    else:
        return None
    if not (len(q.type.get_shape()) == len(k.type.get_shape()) == len(v.type.get_shape()) == rank >= 3):
        return None
    ops = sorted([index[id(o)] for o in chain] + [index[id(op)]])
    removed = [index[id(o)] for o in chain]
    shape_read = sorted(removed) if any(_shape_read(o) for o in chain) else []  # the chain up to it, too
    return Match(ops, removed, shape_read, q, k, v, how, scale, scale_op, mask, fill, keep_when, op.results[0])


STATIC_EVAL_LIMIT = 1 << 24  # elements: larger values are not evaluated in numpy to inspect a mask


def _static(value, env, program=None, depth: int = 0) -> np.ndarray | None:
    """The numpy value of ``value`` if it depends on constants and shapes only, else None.

    Values the trace folded are in ``env``; a broadcast of a static value that only adds leading dims is
    looked through (large broadcasts are traced, not folded); large constants (passed to XLA as device
    arguments, so traced) and the ops on them are evaluated here by the engine's own translations in numpy
    (the ops it folds while tracing, ``STATIC_OK``), without the size limit of the trace's folding.
    """
    v = env.get(value)
    if isinstance(v, (np.ndarray, np.generic)):
        return np.asarray(v)
    op = producer(value)
    if op is None or depth > 16:
        return None
    if op.name == "tensorrt.broadcast":
        x = _static(op.input, env, program, depth + 1)
        if x is not None:
            out_rank = len(value.type.get_shape())
            dims = tuple(int(d) for d in (attr(op, "broadcast_dims", ()) or ()))
            if dims == tuple(range(out_rank - x.ndim, out_rank)):
                return x
    if program is None or op.name == "tensorrt.broadcast":  # a broadcast may be huge: not materialized here
        return None
    if op.name == "tensorrt.constant":
        return np.asarray(program.constant_value(op))
    from tripy_lab.engine.xla.ops import STATIC_OK, TABLE, OpContext

    fn = TABLE.get(op.name) if op.name in STATIC_OK else None
    if fn is None:
        return None
    vals = []
    for o in op.operands:  # the first operand that is data (or too big) settles it: a walk from a data value
        x = _static(o, env, program, depth + 1)  # reading every operand went down each path (2^depth of them)
        if x is None or x.size > STATIC_EVAL_LIMIT:
            return None
        vals.append(x)
    ctx = OpContext(op, -1, dict(zip(op.operands, vals)), np, program)
    try:
        with np.errstate(all="ignore"):
            outs = list(fn(op, vals, ctx))
    except Exception:  # not evaluable in numpy here: treat it as data
        return None
    i = list(op.results).index(value)
    result = np.asarray(outs[i]).astype(ctx.result_dtype(i), copy=False)
    return result if result.size <= STATIC_EVAL_LIMIT else None


def _causal(keep: np.ndarray, t: int, s: int) -> bool:
    if keep.shape[-2:] != (t, s) and keep.shape[-2:] not in ((1, s), (t, 1), (1, 1)):
        return False
    keep = np.broadcast_to(keep, keep.shape[:-2] + (t, s))
    first = keep.reshape(-1, t, s)
    return t == s and all(np.array_equal(m, np.tril(np.ones((t, s), bool))) for m in first)


def plan(m: Match, env: dict, device_platform: str, mode: str | None = None, program=None) -> dict | None:
    """How to run a match with the values in ``env`` (keyword arguments for ``run``), or None: unfused."""
    mode = MODE if mode is None else mode
    if mode == "off":
        return None
    q, k, v = env[m.q], env[m.k], env[m.v]
    if any(isinstance(x, np.ndarray) for x in (q, k, v)):
        return None  # folded in numpy while tracing: nothing to fuse
    dt = np.dtype(q.dtype)
    low = dt in (np.dtype(np.float16), np.dtype("bfloat16"))
    impl = mode
    if mode == "auto":
        if device_platform == "cpu" or not low or scores_size(m, lambda v: env[v].shape) < FUSE_MIN_SCORES:
            return None
        impl = "cudnn"
    if impl == "cudnn" and (not low or device_platform == "cpu"):
        return None
    if impl == "xla" and low and device_platform == "cpu":  # XLA:CPU has no f16 dot with f32 accumulation
        return None
    if not (np.dtype(k.dtype) == np.dtype(v.dtype) == dt):
        return None
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2] or k.shape[-2] != v.shape[-2] \
            or q.shape[-1] != k.shape[-1]:
        return None
    if impl == "cudnn" and (q.shape[-1] > 128 or q.shape[-1] % 8 or v.shape[-1] != q.shape[-1]):
        return None
    scale = 1.0
    if m.scale is not None:
        c = _static(m.scale, env, program)
        if c is None:
            return None
        c = float(np.asarray(c, np.float64).reshape(-1)[0])
        if m.scale_op == "kDIV":
            if c == 0:
                return None
            c = 1.0 / c
        scale = c
    causal = False
    if m.mask is not None:
        cond, fill = _static(m.mask, env, program), _static(m.fill, env, program)
        if cond is None or fill is None:
            return None
        fillv = np.asarray(fill, np.float64)
        if fillv.size == 0 or not (np.all(fillv == fillv.reshape(-1)[0]) and fillv.reshape(-1)[0] <= -1e4):
            return None
        keep = cond.astype(bool) if m.keep_when else ~cond.astype(bool)
        if not _causal(keep, q.shape[-2], k.shape[-2]):
            return None
        causal = True
    return {"scale": scale, "causal": causal, "implementation": impl}


def _packed_projection(value, env, program):
    """If ``value`` (q, k or v: [B, H, T, D]) is part ``i`` of a packed projection ``y = x @ W (+ b)`` -- ``y``
    reshaped to [B, T, 3, H, D], transposed (2, 0, 3, 1, 4) and sliced, as GPT-2's ``c_attn`` is, or ``y`` sliced
    along its last dim, reshaped to [B, T, H, D] and transposed (0, 2, 1, 3), as ``tp.split`` of it is -- return
    (matmul op, x, W as [Din, 3, H, D], bias as [3, H, D] or None, i); else None."""
    src = _packed_slice(value, env, program) or _split_slice(value, env, program)
    if src is None:
        return None
    y, (b, t, three, h, d), i = src
    return _projection(y, env, b, t, three, h, d, i)


def _static_slice(sl, env, program):
    """The start of a default-mode ``tensorrt.slice`` (a list of ints) when it and the stride are static and the
    stride is 1s, else None."""
    if sl is None or sl.name != "tensorrt.slice" or str(attr(sl, "mode", "kDEFAULT")) != "kDEFAULT":
        return None
    start = attr(sl, "static_start")
    if start is None:
        start = _static(sl.start, env, program)
    stride = attr(sl, "static_stride")
    if stride is None and sl.stride is not None:
        stride = _static(sl.stride, env, program)
    if start is None or (stride is not None and any(int(x) != 1 for x in stride)):
        return None
    return [int(x) for x in start]


def _packed_slice(value, env, program):
    """(y, (B, T, 3, H, D), i) for ``reshape(slice(transpose(reshape(y, [B, T, 3, H, D]))))``, else None."""
    r = producer(value)
    if r is None or r.name not in ("tensorrt.reshape", "tensorrt.collapse_rank"):
        return None
    sl = producer(r.input)
    start = _static_slice(sl, env, program)
    tr = producer(sl.input) if start is not None else None
    if tr is None or tr.name != "tensorrt.transpose" or tuple(attr(tr, "permutation", ())) != (2, 0, 3, 1, 4):
        return None
    rs = producer(tr.input)
    if rs is None or rs.name != "tensorrt.reshape" or not hasattr(env.get(tr.input), "shape"):
        return None
    full, part = env[sl.input].shape, env[sl.results[0]].shape
    if part[0] != 1 or tuple(part[1:]) != tuple(full[1:]) or any(x != 0 for x in start[1:]):
        return None
    return rs.input, tuple(env[tr.input].shape), start[0]


def _split_slice(value, env, program):
    """(y, (B, T, 3, H, D), i) for ``transpose(reshape(slice(y, last dim: part i), [B, T, H, D]), (0, 2, 1, 3))``
    (``tp.split`` of the packed projection into three), else None."""
    tr = producer(value)
    if tr is None or tr.name != "tensorrt.transpose" or tuple(attr(tr, "permutation", ())) != (0, 2, 1, 3):
        return None
    r = producer(tr.input)
    if r is None or r.name != "tensorrt.reshape" or not hasattr(env.get(tr.input), "shape"):
        return None
    sl = producer(r.input)
    start = _static_slice(sl, env, program)
    if start is None or not hasattr(env.get(sl.input), "shape"):
        return None
    b, t, h, d = env[tr.input].shape
    full, part = env[sl.input].shape, env[sl.results[0]].shape
    c = h * d
    if len(full) != 3 or tuple(part) != (full[0], full[1], c) or full[-1] != 3 * c or any(start[:2]) \
            or start[2] % c:
        return None
    return sl.input, (b, t, 3, h, d), start[2] // c


def _projection(y, env, b, t, three, h, d, i):
    """The tuple ``_packed_projection`` returns, for ``y = x @ W (+ b)`` of [B, T, three * H * D]; else None."""
    bias = None
    add = producer(y)
    if add is not None and add.name == "tensorrt.element_wise" and attr(add, "elementwiseOperation") == "kSUM":
        a1, a2 = add.input1, add.input2
        mm_first = producer(a1) is not None and producer(a1).name == "tensorrt.matrix_multiply"
        y, bias = (a1, env.get(a2)) if mm_first else (a2, env.get(a1))
        if bias is None or int(np.prod(bias.shape)) != three * h * d:
            return None
        bias = bias.reshape(three, h, d)
    mm = producer(y)
    if mm is None or mm.name != "tensorrt.matrix_multiply" or attr(mm, "op0", "kNONE") != "kNONE":
        return None
    x, w = env.get(mm.input0), env.get(mm.input1)
    if x is None or w is None or len(x.shape) != 3 or tuple(x.shape[:2]) != (b, t):
        return None
    op1 = attr(mm, "op1", "kNONE")
    if op1 not in ("kNONE", "kTRANSPOSE") or any(s != 1 for s in w.shape[:-2]):
        return None
    w = w.reshape(w.shape[-2:])
    if op1 == "kTRANSPOSE":
        w = w.T
    if w.shape != (x.shape[-1], three * h * d):
        return None
    return mm, x, w.reshape(x.shape[-1], three, h, d), bias, int(i)


def apart_applies(platform: str) -> bool:
    """Whether q/k/v weights are cut apart at build time on ``platform`` (``QKV_APART``)."""
    return SPLIT_PACKED and (QKV_APART == "always" or (QKV_APART == "auto" and platform in ("gpu", "cuda")))


def apart_options(options: dict) -> dict:
    """``options`` with XLA's dot merger off (added to a pass list already given), which would merge the three
    GEMMs again."""
    passes = ",".join(p for p in (options.get("xla_disable_hlo_passes"), "dot-merger") if p)
    return {**options, "xla_disable_hlo_passes": passes}


class _BuildEnv(dict):
    """What ``_packed_projection`` reads, before any trace: the numpy value of a value computed from constants
    only (``_static``), else a stand-in with the shape of the value's type (dynamic dims -1)."""

    def __init__(self, program):
        super().__init__()
        self.program = program

    def __missing__(self, value):
        v = _static(value, {}, self.program)
        if v is None:
            v = _Shaped(tuple(value.type.get_shape()))
        self[value] = v
        return v

    def get(self, value, default=None):
        return self[value]


@dataclass
class _Shaped:
    shape: tuple


def apart_weights(matches, program) -> dict:
    """{(id(matmul op), part): (W's part [Din, H*D], b's part [H*D] or None)} in numpy, for each match whose q, k
    and v are the three parts of one packed projection with a constant weight (and a constant bias or none)."""
    out: dict = {}
    env = _BuildEnv(program)
    for m in matches:
        try:
            found = [_packed_projection(x, env, program) for x in (m.q, m.k, m.v)]
        except (AttributeError, TypeError, ValueError):  # a stand-in where a constant was needed: not a case
            continue
        if any(f is None for f in found) or len({id(f[0]) for f in found}) != 1 \
                or sorted(f[4] for f in found) != [0, 1, 2]:
            continue
        _, _, w, bias, _ = found[0]
        if not isinstance(w, np.ndarray) or not (bias is None or isinstance(bias, np.ndarray)):
            continue
        din, _, h, d = w.shape
        flat_w, flat_b = w.reshape(din, -1), None if bias is None else bias.reshape(-1)
        for mm, _, _, _, i in found:
            part = slice(i * h * d, (i + 1) * h * d)
            out[(id(mm), i)] = (np.ascontiguousarray(flat_w[:, part]),
                                None if flat_b is None else np.ascontiguousarray(flat_b[part]))
    return out


def packed_qkv(m: Match, env, program, platform: str = "cpu", apart: dict | None = None):
    """(q, k, v as [B, T, H, D] computed straight from a packed projection, how: "kernel", "apart" or
    "einsums"), or None when they do not come from one. ``apart``: {(id(matmul op), part): (W's part, b's part)},
    the traced arguments ``apart_weights`` made (used from ``QKV_APART_MIN_ROWS`` rows on).

    Where the Linear kernel applies (``linear.MODE``: CUDA, f16/bf16, tiles that divide), one kernel
    computes the three with their bias, each into its own array ("kernel"); otherwise three einsums, which
    XLA's dot merger merges into one GEMM again, followed by a bias-add and slice copy for each. (Kept apart
    with the dot merger off, XLA runs them as Triton GEMMs, which take no bias epilogue: the bias adds stay
    and the GPT is no faster; docs/perf-history.md, fourth session.)"""
    import jax.numpy as jnp

    found = [_packed_projection(x, env, program) for x in (m.q, m.k, m.v)]
    if any(f is None for f in found) or len({id(f[0]) for f in found}) != 1:
        return None
    fused = _packed_by_kernel(found, env, platform)
    if fused is not None:
        return fused, "kernel"
    out = []
    prec = "highest" if np.dtype(found[0][1].dtype) == np.float32 else None
    b, t, _ = found[0][1].shape
    cut = apart is not None and b * t >= QKV_APART_MIN_ROWS and all((id(f[0]), f[4]) in apart for f in found)
    for mm, x, w, bias, i in found:  # 2-D GEMMs with a 1-D bias: the shape cuBLASLt's bias epilogue takes
        b, t, c = x.shape
        _, _, h, d = w.shape
        if cut:
            w_part, b_part = apart[(id(mm), i)]
        else:
            w_part = w.reshape(c, -1)[:, i * h * d:(i + 1) * h * d]
            b_part = None if bias is None else bias.reshape(-1)[i * h * d:(i + 1) * h * d]
        y = jnp.matmul(x.reshape(b * t, c), w_part, precision=prec)
        if bias is not None:
            y = y + b_part
        out.append(y.reshape(b, t, h, d))
    return out, "apart" if cut else "einsums"


def _packed_by_kernel(found, env, platform):
    """q, k, v from one ``pallas.linear`` call with ``parts=3``, or None where it does not apply."""
    import jax.numpy as jnp

    from tripy_lab.engine.xla import linear as xla_linear
    from tripy_lab.engine.xla import pallas as xla_pallas

    mode = xla_linear.MODE
    if not xla_linear.applies(platform, mode):
        return None
    mm, x, w, bias, _ = found[0]
    din, three, h, d = w.shape
    if bias is None or sorted(f[4] for f in found) != list(range(three)) or not xla_linear.dtypes_fit(mode, x, w, bias):
        return None
    rows, n = int(np.prod(x.shape[:-1])), three * h * d
    if xla_pallas.tiles_for(rows, n, din, parts=three) is None:
        return None
    src = xla_linear.weight_source(mm.input1) if attr(mm, "op1", "kNONE") == "kNONE" else mm.input1
    src = env.get(src) if src is not None else None
    if src is not None and tuple(src.shape[-2:]) == (n, din):  # W [N, K] as given: no transposed copy of W
        wk, w_nk = jnp.asarray(src).reshape(n, din), True
    else:
        wk, w_nk = jnp.asarray(w).reshape(din, n), False
    parts = xla_pallas.linear(jnp.asarray(x).reshape(rows, din), wk, jnp.asarray(bias).reshape(n), w_nk=w_nk,
                              parts=three, interpret=mode == "interpret")
    b, t = x.shape[:2]
    return [parts[f[4]].reshape(b, t, h, d) for f in found]


def run(q, k, v, scale: float, causal: bool, implementation: str, btnh: bool = False):
    """softmax(q @ k^T * scale [causal]) @ v for q [..., T, D], k/v [..., S, D] (the MLIR layout)."""
    import jax

    if np.dtype(q.dtype) == np.float32:  # exact f32 like the unfused ops (no TF32 on GPUs)
        with jax.default_matmul_precision("highest"):
            return _run(q, k, v, scale, causal, implementation, btnh)
    return _run(q, k, v, scale, causal, implementation, btnh)


def _run(q, k, v, scale, causal, implementation, btnh):
    import jax
    import jax.numpy as jnp

    lead = q.shape[:-2]

    def to_btnh(x):  # [..., T, D] -> [B, T, N, D] with N the last leading dim
        if len(lead) == 1:
            return x[:, :, None, :]
        x = x.reshape((-1, *x.shape[-3:]))
        return jnp.swapaxes(x, 1, 2)

    if btnh:  # q, k, v given as [B, T, H, D]; the result goes back to [B, H, T, D]
        o = jax.nn.dot_product_attention(q, k, v, scale=scale, is_causal=causal, implementation=implementation)
        return jnp.swapaxes(o, 1, 2)
    o = jax.nn.dot_product_attention(to_btnh(q), to_btnh(k), to_btnh(v), scale=scale, is_causal=causal,
                                     implementation=implementation)
    if len(lead) == 1:
        return o[:, :, 0, :]
    return jnp.swapaxes(o, 1, 2).reshape((*lead, q.shape[-2], v.shape[-1]))
