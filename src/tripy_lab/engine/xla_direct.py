"""The xla engine's direct path: one signature of an ``XlaCompiled`` lowered to StableHLO written by
``xla_emit`` (op by op, ``xla_emit_ops.TABLE``) instead of traced through jax.

``direct_lowering`` says whether a program can take this path (and why not); ``emit_stablehlo`` writes one
signature's module. Static values are folded in numpy by the engine's own ``xla_ops`` translations
(``engine._apply`` / ``engine._check``), so both paths fold the same numbers.
"""

from __future__ import annotations

import contextlib

import numpy as np

from tripy_lab.core.errors import TripyException


def direct_lowering(engine, shapes, dims, pnames, signature, avals):
    """(relower(options) -> (jitted, lowered) of the emitted StableHLO, "") or (None, why not)."""
    from tripy_lab.engine import xla_attention
    from tripy_lab.engine.xla_emit import Fallback, replacement_works, swap_into

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
    from tripy_lab.engine import xla_linear

    lmode = xla_linear.MODE
    if engine._linear and not (lmode == "off" or (lmode == "auto" and engine.device.platform != "gpu")):
        return None, f"{len(engine._linear)} linear + GELU pattern(s) may be fused (xla_linear.MODE={lmode!r})"
    from tripy_lab.engine.xla_emit_ops import FALLBACK, TABLE

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

def emit_stablehlo(engine, shapes, dims, pnames, small_scores=None):
    """The StableHLO text of one signature and its output values (``xla_emit``). ``small_scores``: the
    softmax results of attention patterns that must stay below ``FUSE_MIN_SCORES`` (else Fallback: the
    jax path fuses them)."""
    from tripy_lab.engine.xla_emit import Emitter, Fallback, Val, module_text
    from tripy_lab.engine.xla_emit_ops import FALLBACK, TABLE, val
    from tripy_lab.engine.xla_ops import STATIC_RESULT_LIMIT, OpContext, constant_value, type_info

    em, program, block_args = Emitter(), engine.program, engine._block_args
    env: dict = {block_args[i]: np.asarray(v, dtype=engine._arg_dtypes[i]) for i, v in zip(engine._dim_pos, dims)}
    args = []
    for k, (i, s) in enumerate(zip(engine._data_pos, shapes)):
        env[block_args[i]] = v = Val(f"%arg{k}", tuple(s), engine._arg_dtypes[i])
        args.append(v)
    lifted = {}
    for idx, c in zip(engine._lifted, engine._consts):
        lifted[idx] = v = Val(f"%arg{len(args)}", tuple(c.shape), np.dtype(c.dtype))
        args.append(v)
    quiet, folded = contextlib.nullcontext(), engine._folded
    with np.errstate(all="ignore"):
        for p in engine._plans:
            op = p.op
            vals = [env[v] for v in op.operands]
            static = p.static_ok and p.index not in lifted and all(type(v) is not Val for v in vals)
            ctx = OpContext(op, p.index, env, np, program, p.line, p.trace_name, p.location)
            ctx.lifted = lifted
            results = None
            if static and op.name == "tensorrt.constant":  # the same at every signature: read once
                results = folded.get(p.index)
                if results is None:
                    results = folded[p.index] = [np.asarray(constant_value(op, program))]
            elif static:
                results = engine._apply(p, vals, ctx, quiet)
            if results is not None and any(r.size > STATIC_RESULT_LIMIT for r in results):
                results = None  # too large to fold: computed by XLA, as the jax path does
            if results is None:
                fn = TABLE.get(op.name, FALLBACK)
                if fn == FALLBACK:
                    raise Fallback(f"{op.name} is not emitted natively")
                em.scope = p.scope
                try:
                    results = list(fn(op, vals, ctx, em))
                except (Fallback, TripyException):
                    raise
                except Exception as exc:  # an emitter bug must not break the build: the jax path runs it
                    raise Fallback(f"{op.name}: {type(exc).__name__}: {exc}") from exc
            for res, r in zip(op.results, results):
                if small_scores and res in small_scores:
                    _check_small(small_scores[res], env, r)
                want, dt = type_info(res.type)
                if type(r) is Val:
                    if len(want) != r.ndim or any(w is not None and w != g for w, g in zip(want, r.shape)) \
                            or r.dtype != dt:
                        raise Fallback(f"{op.name} made {r.type} where the MLIR type is {res.type}")
                elif r.shape != want or r.dtype != dt:
                    (r,) = engine._check(p, ctx, [r])  # the jax path's check: an error or a cast
                env[res] = r
    outs = [val(em, env[v]) for v in engine._outputs]
    em.ret(outs)
    return module_text(pnames, args, em.lines), outs


def _check_small(m, env, scores) -> None:
    from tripy_lab.engine import xla_attention
    from tripy_lab.engine.xla_emit import Fallback

    n = xla_attention.scores_size(m, lambda v: env[v].shape)
    if n >= xla_attention.FUSE_MIN_SCORES and np.dtype(scores.dtype) in (np.float16, np.dtype("bfloat16")):
        raise Fallback(f"an attention's scores have {n} elements (>= xla_attention.FUSE_MIN_SCORES): fused by jax")
