"""The xla engine's program as a jax function: each MLIR op's translation inside its named scope, static
values folded in numpy, attention and Linear patterns run fused where they apply."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tripy_lab.core.errors import TripyException
from tripy_lab.engine.xla.plan import _OpPlan


class Tracing:
    """XlaCompiled's tracing: the program as a jax function, op by op, with the attention and Linear
    rewrites."""

    def _make_fn(self, dims: Sequence[int], run=None, given=(), returns=None, seed=None, cut_qkv=False):
        """The program as a jax function of (data args, lifted constants). ``run``: only these plan indices (a
        split signature's body or head, ``split``); ``given``: values passed as trailing arguments;
        ``returns``: the values to return instead of the outputs (jax ones only: a static one is kept in
        ``main.statics`` for the head's trace, which gets them as ``seed``). ``cut_qkv``: packed q/k/v may run
        on their weights' parts cut apart (a split body: cuBLASLt GEMMs, the configuration that gains; with
        Triton GEMMs XLA keeps per-call bias adds instead of the epilogue)."""
        import jax
        import jax.numpy as jnp

        from tripy_lab.engine.xla.ops import STATIC_RESULT_LIMIT, OpContext

        plans, program = self._plans, self.program
        block_args, data_pos, dim_pos = self._block_args, self._data_pos, self._dim_pos
        dim_values = {block_args[i]: np.asarray(v, dtype=self._arg_dtypes[i]) for i, v in zip(dim_pos, dims)}
        outputs, lifted_idx = self._outputs, self._lifted

        from tripy_lab.engine.xla import linear as xla_linear

        attention, by_index = self._attention, {p.index: p for p in plans}
        platform = self.device.platform
        linear = self._linear if xla_linear.applies(platform) else {}
        fused_away = {i for m in (*attention.values(), *linear.values()) for i in m.removed}
        shape_read = {i for m in attention.values() for i in m.shape_read}
        fusions: list[str] = []
        linear_fusions: list[str] = []
        statics: dict = {}
        n_flat = len(data_pos) + len(lifted_idx)

        def main(*flat):
            env: dict = dict(dim_values)
            env.update(seed or {})
            for k, i in enumerate(data_pos):
                env[block_args[i]] = flat[k]
            lifted = dict(zip(lifted_idx, flat[len(data_pos):n_flat]))
            # the traced parts of packed q/k/v weights cut apart at build time: {(id(matmul op), part): (W, b)}
            apart = {k: tuple(lifted[n] if n else None for n in names) for k, names in self._qkv_apart.items()} \
                if cut_qkv and self._qkv_apart else None
            env.update(zip(given, flat[n_flat:]))

            def run_plan(p):
                op = p.op
                vals = [env[v] for v in op.operands]
                static = p.static_ok and p.index not in lifted and all(isinstance(v, np.ndarray) for v in vals)
                ctx = OpContext(op, p.index, env, np if static else jnp, program, p.line, p.trace_name, p.location)
                ctx.lifted = lifted
                with jax.named_scope(p.scope):
                    results = self._apply(p, vals, ctx)
                    if static and any(np.size(r) > STATIC_RESULT_LIMIT for r in results):
                        ctx.xp = jnp
                        results = self._apply(p, vals, ctx)
                    results = self._check(p, ctx, results)
                for res, val in zip(op.results, results):
                    env[res] = val

            for p in plans:
                if run is not None and p.index not in run:
                    continue
                if p.index in fused_away:  # part of an attention pattern: run there, fused or op by op
                    if p.index in shape_read:
                        self._abstract_results(p, env, program)
                    continue
                m = attention.get(p.index)
                lm = linear.get(p.index) if m is None else None
                if m is None and lm is None:
                    run_plan(p)
                    continue
                if m is not None:
                    how = self._run_attention(m, env, by_index, platform, apart)
                    fusions.append(how or "unfused")
                    main.qkv_apart |= "(apart)" in (how or "")
                else:
                    how = self._run_linear(lm, env, by_index, platform)
                    linear_fusions.append(how or "unfused")
                if how is None:
                    for i in (m or lm).ops:
                        run_plan(by_index[i])
            if returns is None:
                return tuple(jnp.asarray(env[v]) for v in outputs)
            statics.update((v, env[v]) for v in returns if isinstance(env[v], np.ndarray))
            return tuple(env[v] for v in returns if v not in statics)

        main.fusions = fusions
        main.qkv_apart = False  # a packed q/k/v ran as three GEMMs on weights cut apart: compile with apart_options
        main.linear_fusions = linear_fusions
        main.statics = statics
        return main

    def _run_linear(self, m, env, by_index, platform) -> str | None:
        """Run a Linear + GELU match as one kernel (its name) or return None (run op by op)."""
        from tripy_lab.engine.xla import linear as xla_linear

        how = xla_linear.plan(m, env, platform)
        if how is None:
            return None
        out = self._fused("linear + GELU", m, by_index, lambda: xla_linear.run(m, env, **how))
        if out is None:
            return None
        env[m.out] = out
        return "pallas" + (" interpreted" if how["interpret"] else "")

    def _fused(self, what: str, m, by_index, run):
        """``run()`` (a rewrite's traced kernel) under one named scope that holds the scopes of every op of the
        match, so the layer table maps the kernel to all of them; None, with a note, if it refuses while
        tracing (the caller then runs the ops one by one)."""
        import jax

        try:
            with jax.named_scope(what.split()[0] + "_" + "_".join(by_index[i].scope for i in m.ops)):
                return run()
        except Exception as exc:  # a configuration the kernel refuses while tracing
            last = by_index[m.ops[-1]]
            self.report.notes.append(f"{what} at {last.trace_name or last.index} not fused: "
                                     f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
            return None

    @staticmethod
    def _abstract_results(p: _OpPlan, env: dict, program) -> None:
        """Stand-ins for a fused-away op's results, for the ``tensorrt.shape`` ops that read them (replaced by the
        real values if the pattern then runs op by op). Traced in the enclosing trace: only their shapes are read,
        and jax's dead-code elimination drops them when it lowers (``jax.eval_shape`` of the same ops took 3x as
        long: 9 % of the GPT's traced lowering on the 2-core VM)."""
        import jax.numpy as jnp

        from tripy_lab.engine.xla.ops import OpContext

        ctx = OpContext(p.op, p.index, env, jnp, program, p.line, p.trace_name, p.location)
        for res, val in zip(p.op.results, p.fn(p.op, [env[v] for v in p.op.operands], ctx)):
            env[res] = val

    def _run_attention(self, m, env, by_index, platform, apart=None) -> str | None:
        """Run one attention match fused (the implementation's name) or return None (the caller runs it op
        by op). ``apart``: the traced parts of packed q/k/v weights cut apart (``xla_attention.packed_qkv``)."""
        from tripy_lab.engine.xla import attention as xla_attention

        how = xla_attention.plan(m, env, platform, program=self.program)
        if how is None:
            return None
        ctx_shape = tuple(m.out.type.get_shape())
        packed = []

        def run():
            split = xla_attention.packed_qkv(m, env, self.program, platform, apart) if len(ctx_shape) == 4 \
                and xla_attention.SPLIT_PACKED else None
            if split is None:
                return xla_attention.run(env[m.q], env[m.k], env[m.v], **how)
            packed.append(split[1])
            return xla_attention.run(*split[0], **how, btnh=True)

        out = self._fused("attention", m, by_index, run)
        if out is None or tuple(out.shape) != tuple(d if d >= 0 else s for d, s in zip(ctx_shape, out.shape)):
            return None
        env[m.out] = out.astype(np.dtype(env[m.q].dtype))
        return how["implementation"] + (f", split qkv ({packed[0]})" if packed else "") \
            + (", causal" if how["causal"] else "")

    @staticmethod
    def _apply(p: _OpPlan, vals, ctx, quiet=None):
        """``quiet``: numpy's floating-point warnings are already off (the caller's ``np.errstate``)."""
        try:
            if ctx.xp is np:
                with quiet or np.errstate(all="ignore"):
                    out = p.fn(p.op, vals, ctx)
                return [np.asarray(r) if isinstance(r, (np.ndarray, np.generic)) else r for r in out]
            return list(p.fn(p.op, vals, ctx))
        except TripyException:
            raise
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ctx.error(f"translation failed: {type(exc).__name__}: {first}",
                            [f"Operand shapes: {[tuple(np.shape(v)) for v in vals]}"]) from exc

    @staticmethod
    def _check(p: _OpPlan, ctx, results):
        out = []
        for i, r in enumerate(results):
            want = ctx.result_shape(i)
            got = tuple(r.shape)
            if len(want) != len(got) or any(w is not None and w != g for w, g in zip(want, got)):
                raise ctx.error(f"result {i} has shape {got}, but its MLIR type says {want}.")
            dt = ctx.result_dtype(i)
            if np.dtype(r.dtype) != dt:
                r = r.astype(dt)
            out.append(r)
        return out
