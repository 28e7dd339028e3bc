"""The xla engine's executables, one per concrete input signature: StableHLO written straight from the MLIR
or traced through jax, compiled with the level's XLA options (untuned at min/max on GPUs), kept in the
persistent store."""

from __future__ import annotations

import inspect
import math
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor

from tripy_lab.core.errors import TripyException
from tripy_lab.engine import xla
from tripy_lab.engine.xla.executables import _Built, _compile_contexts, _fmt_sig
from tripy_lab.engine.xla.split import unknown_option


class Signatures:
    """XlaCompiled's builds: one executable per concrete signature, lowered (direct or traced), compiled
    (tuned or not), stored."""

    @staticmethod
    def _sig(shapes, dims) -> tuple:
        return tuple(tuple(s) for s in shapes), tuple(int(d) for d in dims)

    def _build(self, shapes, dims, why: str) -> _Built:
        return self._build_many([(shapes, dims, why)])[0]

    def _build_many(self, wanted: list[tuple[list, list, str]]) -> list[_Built]:
        """Lower each signature (Python, one after another) and compile them concurrently on a thread pool
        (XLA compiles without the GIL; each compile starts once its signature is lowered); register in order."""
        def lower(shapes, dims, why):
            try:
                return self._lower(shapes, dims)
            except TripyException as exc:
                if why == wanted[0][2]:  # the first (opt) signature must build; the others may fail here
                    raise
                self.report.notes.append(f"{why} signature not built: {exc.summary} (it fails on first use)")
                return None

        def compile_or_note(lw, why=wanted[0][2]):
            try:
                return self._compile(*lw, untuned=self._untuned(why, len(wanted)))
            except TripyException as exc:
                return exc

        if len(wanted) == 1:
            lw = lower(*wanted[0])
            done = [(wanted[0][2], compile_or_note(lw))]
        else:  # each compile starts as soon as its signature is lowered, so lowering overlaps compiling
            order = self._lowering_order(wanted)
            # at least one thread per profile point: on 2 cores, 3 compiles sharing them end sooner than 2 + 1
            with ThreadPoolExecutor(max_workers=min(len(wanted), max(3, os.cpu_count() or 1))) as pool:
                futures = {}
                for i in order:
                    lw = lower(*wanted[i])
                    if lw is not None:
                        futures[i] = pool.submit(compile_or_note, lw, wanted[i][2])
                done = [(wanted[i][2], futures[i].result()) for i in sorted(futures)]  # opt first, as wanted
        if isinstance(done[0][1], TripyException):
            raise done[0][1]
        results = [b for _, b in done]
        out = []
        for why, built in done:
            if isinstance(built, TripyException):
                self.report.notes.append(f"{why} signature not built: {built.summary}")
                continue
            self._execs[built.key] = built
            c = self.report.cache
            c["persistent_hits"] += built.persistent == "hit"
            c["persistent_misses"] += built.persistent == "miss"
            if built.rejected:
                c["persistent_rejected"].append({"signature": built.label, "reason": built.rejected})
            c["shapes_built"].append(built.label)
            self.report.notes.extend(built.notes)
            self.report.notes.append(f"built {built.label} ({why}): lower {built.lower_s:.3f}s, compile "
                                     f"{built.compile_s:.3f}s, persistent cache {built.persistent}")
            out.append(built)
        if len(results) > 1:
            self.report.notes.append(f"{len(results)} signatures compiled concurrently")
        return out

    def _lowering_order(self, wanted: list[tuple[list, list, str]]) -> list[int]:
        """The order in which ``_build_many`` lowers (and so starts compiling) the signatures: those compiled with
        GEMM autotuning first (theirs is the longest compile), then the biggest first."""
        n = len(wanted)
        return sorted(range(n), key=lambda i: (self._untuned(wanted[i][2], n),
                                               -sum(math.prod(s) for s in wanted[i][0])))

    def _lower(self, shapes, dims):
        jax = self._jax
        label = _fmt_sig([self._arg_names[i] for i in self._data_pos], shapes,
                         [self._arg_names[i] for i in self._dim_pos], dims)
        # parameter names show up in the StableHLO/HLO (``%x.1 = f32[8,16] parameter(0)``)
        pnames = [re.sub(r"\W", "_", self._arg_names[i]) or f"arg{i}" for i in self._data_pos]
        pnames += [f"const_op{i}" for i in self._lifted]
        pnames = [n if n.isidentifier() else f"arg_{n}" for n in pnames]
        signature = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in pnames])
        avals = [jax.ShapeDtypeStruct(tuple(s), self._arg_dtypes[i]) for s, i in zip(shapes, self._data_pos)]
        avals += [jax.ShapeDtypeStruct(c.shape, c.dtype) for c in self._consts]
        options = dict(self._xla_options)
        from tripy_lab.engine.xla.direct import direct_lowering

        t0 = time.perf_counter()
        split = self._split_plan()
        if split is not None:  # two executables, where the signature is big enough (else None: as any other)
            from tripy_lab.engine.xla.split import lowering

            with _compile_contexts(self._x64):
                lowered_split = lowering(self, split, shapes, dims, signature, avals, label, options)
            if lowered_split is not None:
                relower, lowered = lowered_split
                return (shapes, dims, label, relower, options, None, lowered, time.perf_counter() - t0, "jax",
                        None)
        if not xla.DIRECT_STABLEHLO:
            relower, why = None, "DIRECT_STABLEHLO is off"
        else:
            relower, why = direct_lowering(self, shapes, dims, pnames, signature, avals)
        path, text = "direct", None
        if relower is not None:
            try:
                with _compile_contexts(self._x64):
                    jitted, lowered = relower(options)
                text = relower.text
            except Exception as exc:  # the emitted text did not parse, or this jax has no module to replace
                relower, why = None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc) else ''}"
        if relower is not None and self._attention:  # emitted op by op, as the jax path's unfused patterns
            from tripy_lab.engine.xla import attention as xla_attention

            small = self.device.platform != "cpu" and xla_attention.MODE == "auto"
            self.report.notes.append(f"{label}: attention 0 of {len(self._attention)} pattern(s) fused "
                                     + ("(scores below xla_attention.FUSE_MIN_SCORES: " if small else "(")
                                     + "StableHLO emitted op by op)")
        if relower is not None:  # if XLA refuses the emitted module, _compile traces instead
            relower.traced = lambda: self._traced_lowering(dims, signature, avals, label)
        else:
            path = "jax"
            self.report.notes.append(f"{label}: StableHLO traced through jax ({why})")
            relower = self._traced_lowering(dims, signature, avals, label)
            with _compile_contexts(self._x64):
                jitted, lowered = relower(options)
        return shapes, dims, label, relower, options, jitted, lowered, time.perf_counter() - t0, path, text

    def _split_plan(self):
        """The ``split.Split`` of this program on this device (found once), or None."""
        from tripy_lab.engine.xla import split as xla_split

        if not xla_split.applies(self.device.platform):
            return None
        if "_split" not in self.__dict__:
            self._split = xla_split.find(
                self._plans, self._outputs, [self._block_args[i] for i in self._data_pos],
                {i for m in (*self._attention.values(), *self._linear.values()) for i in m.ops},
                {i for m in (*self._attention.values(), *self._linear.values()) for i in m.removed})
        return self._split

    def _traced_lowering(self, dims, signature, avals, label):
        """relower(options) -> (jitted, lowered) of the program traced through jax (``ops``)."""
        jax = self._jax
        fn = self._make_fn(dims)
        fn.__name__ = "main"
        fn.__signature__ = signature
        noted = []

        def relower(options):
            jitted = jax.jit(fn, compiler_options=options or None)
            lowered = jitted.lower(*avals)
            if not noted:
                noted.append(True)
                self._note_fusions(label, fn)
            return jitted, lowered

        return relower

    def _note_fusions(self, label, fn) -> None:
        """How many attention / linear patterns the traced function ``fn`` fused (after its first trace)."""
        for what, done in (("attention", fn.fusions), ("linear + GELU", fn.linear_fusions)):
            if done:
                fused = [f for f in done if f != "unfused"]
                self.report.notes.append(f"{label}: {what} {len(fused)} of {len(done)} pattern(s) fused"
                                         + (f" ({', '.join(sorted(set(fused)))})" if fused else ""))

    def _untuned(self, why: str, n_points: int) -> bool:
        """Whether profile point ``why`` compiles without GEMM autotuning (``xla.TUNE_OPT_ONLY``, GPUs only)."""
        return (xla.TUNE_OPT_ONLY and n_points > 1 and why in ("min", "max") and self.device.platform != "cpu"
                and "xla_gpu_autotune_level" not in self._xla_options)

    def _compile(self, shapes, dims, label, relower, options, jitted, lowered, lower_s, path, text,
                 untuned: bool = False) -> _Built:
        notes = []
        store, key, cached, missed = self._store, None, None, ""
        # the timing cache's GPU autotuning folder, given at compile time only (not part of the key)
        extra = store.autotune_options(self.device.platform) if store is not None else {}
        key_options = self._xla_options
        if untuned:  # part of the key: a tuned build of this signature later must not load this one
            untuned_options = {k: v for k, v in xla.UNTUNED.items() if k not in self._xla_options}  # the user's win
            extra, key_options = {**extra, **untuned_options}, {**self._xla_options, **untuned_options}
            notes.append(f"{label}: compiled without GEMM autotuning, its GEMMs on cuBLAS (kernels are tuned at opt; "
                         "TUNE_OPT_ONLY)")
        while True:
            with _compile_contexts(self._x64):
                t1 = time.perf_counter()
                if store is not None and key is None:  # a split signature's own options are part of its key
                    key = store.key(self._program_digest, lowered, label,
                                    {**key_options, **getattr(lowered, "key_options", {})}, self._x64, self.device,
                                    text)
                    cached, missed = store.load(key, lowered, self.device)
                try:
                    compiled = cached or (lowered.compile(compiler_options=extra) if extra else lowered.compile())
                except Exception as exc:  # an option this jaxlib does not know: drop it and retry
                    unknown = unknown_option(exc)
                    if unknown in options:
                        options.pop(unknown)
                        notes.append(f"dropped XLA option {unknown} (unknown to this jaxlib)")
                        jitted, lowered = relower(options)
                        continue
                    if any(k not in xla.UNTUNED for k in extra):  # the autotune hook failed: compile without it
                        notes.append(f"compiled without the timing cache's autotune folder ({type(exc).__name__})")
                        extra = {k: v for k, v in extra.items() if k in xla.UNTUNED}
                        continue
                    if path == "direct" and cached is None:  # never the user's fault: trace through jax instead
                        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                        notes.append(f"{label}: StableHLO traced through jax (XLA refused the emitted module: "
                                     f"{type(exc).__name__}: {first})")
                        relower, path, text, key = relower.traced(), "jax", None, None
                        jitted, lowered = relower(options)
                        continue
                    raise TripyException("XLA failed to compile the program.", [str(exc).splitlines()[0]]) from exc
                t2 = time.perf_counter()
            break
        notes += [f"dropped XLA option {o} (unknown to this jaxlib)" for o in getattr(lowered, "dropped", ())]
        persistent, rejected = "off" if store is None else ("hit" if cached is not None else "miss"), ""
        if persistent == "miss":
            if missed != "no entry":
                rejected = missed
                notes.append(f"persistent cache entry for {label} rejected: {missed}; replaced")
            if stored := store.save(key, compiled, label, late_notes=self.report.notes):  # written behind
                notes.append(f"persistent cache: {stored}")
        if store is not None:
            store.record(key, label, hit=cached is not None)
        # the emitted module lives only in ``lowered``: call its executable, never the stub ``jitted`` traces
        call = cached or (compiled if path == "direct" or jitted is None else jitted)
        return _Built(self._sig(shapes, dims), label, call, compiled, lowered, lower_s, t2 - t1,
                      persistent, notes=notes, rejected=rejected, path=path)
