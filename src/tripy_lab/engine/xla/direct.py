"""The xla engine's direct path: one signature of an ``XlaCompiled`` lowered to StableHLO written by
``emit`` (op by op, ``emit_ops.TABLE``) instead of traced through jax.

``direct_lowering`` says whether a program can take this path (and why not); ``emit_stablehlo`` writes one
signature's module. Static values are folded in numpy by the engine's own ``ops`` translations
(``engine._apply`` / ``engine._check``), so both paths fold the same numbers.
"""

from __future__ import annotations

import contextlib

import numpy as np

from tripy_lab.core.errors import TripyException
from tripy_lab.engine.xla.ops import OpContext
from tripy_lab.mlir.dialect import attr_value


def direct_lowering(engine, shapes, dims, pnames, signature, avals):
    """(relower(options) -> (jitted, lowered) of the emitted StableHLO, "") or (None, why not)."""
    from tripy_lab.engine.xla import attention as xla_attention
    from tripy_lab.engine.xla.emit import Fallback, replacement_works, swap_into

    if why := replacement_works():
        return None, why
    mode = xla_attention.MODE
    small_scores = None  # "auto" on a GPU: emitted op by op unless some attention's scores are big enough to fuse
    if engine._attention and xla_attention.auto_fuses(mode, engine.device.platform):
        if mode != "auto":
            return None, f"{len(engine._attention)} attention pattern(s) may be fused (xla_attention.MODE={mode!r})"
        op_at = {p.index: p.op for p in engine._plans}
        small_scores = {op_at[i].results[0]: m for m in engine._attention.values()
                        for i in m.ops if op_at[i].name == "tensorrt.softmax"}
    from tripy_lab.engine.xla import linear as xla_linear

    if engine._linear and xla_linear.applies(engine.device.platform):
        return None, (f"{len(engine._linear)} linear + GELU pattern(s) may be fused "
                      f"(xla_linear.MODE={xla_linear.MODE!r})")
    from tripy_lab.engine.xla.emit_ops import FALLBACK, TABLE

    missing = sorted({p.op.name for p in engine._plans if TABLE.get(p.op.name, FALLBACK) == FALLBACK})
    if missing:
        return None, f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not emitted natively"
    try:
        text, outs = emit_stablehlo(engine, shapes, dims, pnames, small_scores)
    except Fallback as exc:
        return None, str(exc)
    jax = engine._jax
    out_avals = [(tuple(v.shape), v.dtype) for v in outs]

    def relower(options):
        import jax.numpy as jnp

        def stub(*args):  # the argument and result types of the program; its body is replaced
            return tuple(jnp.zeros(s, d) for s, d in out_avals)

        stub.__name__ = "main"
        stub.__signature__ = signature
        jitted = jax.jit(stub, keep_unused=True, compiler_options=options or None)
        lowered = jitted.lower(*avals)
        if not swap_into(lowered, text):
            raise Fallback("this jax's Lowered has no module to replace")
        return jitted, lowered

    relower.text = text  # what the store's key hashes (the module's StableHLO, locations included)
    return relower, ""


def emit_steps(engine) -> list:
    """Per op of the program: (plan, operands, results, (shape, dtype) of each result, kind), made once per
    engine and shared by its signatures."""
    steps = engine.__dict__.get("_emit_steps")
    if steps is None:
        steps = engine._emit_steps = [(p, p.operands, p.results, p.infos, _KINDS.get(p.op.name, 0) if p.static_ok
                                       else 0) for p in engine._plans]
    return steps


class _EmitContext(OpContext):
    """``OpContext`` whose ``attr`` remembers the plain value of each attribute object it has read (the lowering
    shares one attribute object between many ops) and each op class's defaults, for one emission."""

    memo: dict  # set per emission

    def attr(self, name: str, default=None):
        op = self.op
        a = op.properties.get(name)
        if a is None:
            a = op.attributes.get(name)
        key = id(a) if a is not None else (type(op), name)  # absent: the op class's default
        hit = self.memo.get(key)
        if hit is not None and hit[0] is a:
            value = hit[1]
        else:
            value = attr_value(op, name, getattr(self.program, "resources", None))
            if _immutable(value):  # never an array a translation might write to
                self.memo[key] = (a, value)
        return default if value is None else value


_SCALARS = (str, int, float, bool, type(None))


def _immutable(value) -> bool:
    return type(value) in _SCALARS or (type(value) is tuple and all(type(v) in _SCALARS for v in value))


_CONSTANT, _RESHAPE = 1, 2  # static ops read / folded without an OpContext (every Python scalar is both)
_KINDS = {"tensorrt.constant": _CONSTANT, "tensorrt.reshape": _RESHAPE}


def emit_stablehlo(engine, shapes, dims, pnames, small_scores=None):
    """The StableHLO text of one signature and its output values (``emit``). ``small_scores``: the
    softmax results of attention patterns that must stay below ``FUSE_MIN_SCORES`` (else Fallback: the
    jax path fuses them).

    Static values are computed in numpy by the engine's translations (``engine._apply``). Shortcuts that give
    the same arrays (every Python scalar is a constant and a reshape; the lowering shares one attribute object
    between equal constants): a constant is read once per engine (``engine._folded``, after its result check)
    and once per weights attribute (the read-only view of its bytes); a reshape of a static array to a static
    shape is ``ndarray.reshape``, once per (read-only array, shape array); anything else, an error included,
    takes the translation. The test file tests/engine/test_xla_emit_shortcuts.py checks each shortcut."""
    from tripy_lab.engine.xla.emit import Emitter, Fallback, Val, module_text
    from tripy_lab.engine.xla.emit_ops import FALLBACK, TABLE, val
    from tripy_lab.engine.xla.ops import STATIC_RESULT_LIMIT, constant_value

    em, program, block_args = Emitter(), engine.program, engine._block_args
    if engine.device.platform == "cpu":
        em.dot_precision = "DEFAULT"  # f32 either way on CPU (Emitter.dot_precision)
    env: dict = {block_args[i]: np.asarray(v, dtype=engine._arg_dtypes[i]) for i, v in zip(engine._dim_pos, dims)}
    args = []
    for k, (i, s) in enumerate(zip(engine._data_pos, shapes)):
        env[block_args[i]] = v = Val(f"%arg{k}", tuple(s), engine._arg_dtypes[i])
        args.append(v)
    lifted = {}
    for idx, c in zip(engine._lifted, engine._consts):
        lifted[idx] = v = Val(f"%arg{len(args)}", tuple(c.shape), np.dtype(c.dtype))
        args.append(v)
    quiet, folded, ndarray = contextlib.nullcontext(), engine._folded, np.ndarray
    memo: dict = {}  # attribute values (_EmitContext)
    by_attr: dict = {}  # id(weights attribute) -> (attribute, its read-only array)
    reshaped: dict = {}  # (id(array), id(shape)) -> (array, shape, the read-only reshaped view)

    def context(p):
        ctx = _EmitContext(p.op, p.index, env, np, program, p.line, p.trace_name, p.location)
        ctx.lifted, ctx.memo = lifted, memo
        return ctx

    with np.errstate(all="ignore"):
        for p, operands, op_results, wants, kind in emit_steps(engine):
            op, ctx, results = p.op, None, None
            if kind == _CONSTANT and p.index not in lifted:
                results = folded.get(p.index)
                if results is not None:  # read and checked at an earlier signature
                    env[op_results[0]] = results[0]
                    continue
                w = op.properties.get("weights")  # the lowering shares one attribute between equal constants
                hit = by_attr.get(id(w))
                if hit is not None and hit[0] is w:
                    results = [hit[1]]
                else:
                    results = [np.asarray(constant_value(op, program))]
                    if not results[0].flags.writeable:  # a view of the attribute's bytes: safe to share
                        by_attr[id(w)] = (w, results[0])
                vals = []
            else:
                vals = list(map(env.__getitem__, operands))
                if p.static_ok and p.index not in lifted and Val not in map(type, vals):
                    if kind == _RESHAPE and len(vals) == 2 and type(vals[0]) is ndarray and \
                            type(vals[1]) is ndarray and vals[1].ndim == 1 and vals[1].dtype.kind in "iu":
                        x, to = vals
                        hit = reshaped.get((id(x), id(to)))
                        if hit is not None and hit[0] is x and hit[1] is to:
                            results = [hit[2]]
                        else:
                            try:
                                results = [x.reshape(tuple(to.tolist()))]
                            except (TypeError, ValueError):  # the translation says why
                                results = None
                            if results is not None and not (x.flags.writeable or to.flags.writeable):
                                reshaped[(id(x), id(to))] = (x, to, results[0])  # read-only in, read-only out
                    if results is None:
                        ctx = context(p)
                        results = engine._apply(p, vals, ctx, quiet)
            if results is not None:
                for r in results:
                    if r.size > STATIC_RESULT_LIMIT:  # too large to fold: computed by XLA, as the jax path does
                        results = None
                        break
            if results is None:
                fn = TABLE.get(op.name, FALLBACK)
                if fn == FALLBACK:
                    raise Fallback(f"{op.name} is not emitted natively")
                em.scope = p.scope
                ctx = context(p)
                try:
                    results = list(fn(op, vals, ctx, em))
                except (Fallback, TripyException):
                    raise
                except Exception as exc:  # an emitter bug must not break the build: the jax path runs it
                    raise Fallback(f"{op.name}: {type(exc).__name__}: {exc}") from exc
            for k, (res, r) in enumerate(zip(op_results, results)):
                if small_scores and res in small_scores:
                    _check_small(small_scores[res], env)
                if wants[k] is None:
                    raise Fallback(f"{op.name} result {k} has the type {res.type}, not a tensor type")
                want, dt = wants[k]
                if r.shape != want or r.dtype != dt:
                    if type(r) is Val:
                        if len(want) != r.ndim or any(w is not None and w != g for w, g in zip(want, r.shape)) \
                                or r.dtype != dt:
                            raise Fallback(f"{op.name} made {r.type} where the MLIR type is {res.type}")
                    else:  # the jax path's check: an error or a cast
                        (r,) = engine._check(p, ctx or context(p), [r])
                        results[k] = r
                env[res] = r
            if kind == _CONSTANT and type(results[0]) is not Val:
                folded[p.index] = results
    outs = [val(em, env[v]) for v in engine._outputs]
    em.ret(outs)
    return module_text(pnames, args, em.lines, em.aliases), outs


def _check_small(m, env) -> None:
    from tripy_lab.engine.xla import attention as xla_attention
    from tripy_lab.engine.xla.emit import Fallback

    n = xla_attention.scores_size(m, lambda v: env[v].shape)
    q = env[m.q]  # the kernel's dtype is q's: the scores may be f32 (a softmax in f32 of f16 attention)
    if n >= xla_attention.FUSE_MIN_SCORES and np.dtype(q.dtype) in (np.float16, np.dtype("bfloat16")):
        raise Fallback(f"an attention's scores have {n} elements (>= xla_attention.FUSE_MIN_SCORES): fused by jax")
