"""The ``xla`` engine: the MLIR ops of ``program.main()`` translated to jax, compiled by XLA, run.

How a program runs
------------------
* **StableHLO straight from the MLIR** (``DIRECT_STABLEHLO``, the default): ``xla_direct`` / ``xla_emit`` write each
  MLIR op as StableHLO text (``xla_emit_ops.TABLE``, the same primitives the jax translations make, so the
  same bits) located at ``jit(main)/<t5>__op<i>/<prim>``, and puts the parsed module into the ``Lowered``
  of a stub jax function with the same argument and result types; that ``Lowered`` is compiled, stored
  and called like any other. A program with an op the table marks ``fallback`` ((de)convolution, pooling,
  resize, top-k, plugins), an attribute or dtype an emitter refuses (group norm, int4 / float8 quantize,
  broadcast-batch matmuls, out-of-bounds slice modes, ...), or an attention pattern that may be fused
  (CUDA) is traced through jax instead, with a note "StableHLO traced through jax (why)"; so is a module
  XLA refuses to compile. A once-per-process self-test checks that the installed
  jax compiles the module it is given (else every program is traced, with that reason).
* Traced through jax, each MLIR op is translated by ``xla_ops.TABLE[op.name]`` inside
  ``jax.named_scope("<t5>__op<i>")`` (the op's trace name, sanitised, plus its index in
  ``program.ops()``). Either way that name lands in the ``op_name`` metadata of every HLO instruction XLA
  makes from the op, which is how the layer table maps fused kernels back to trace ops and user lines
  (``xla_layers``).
* **Shapes are concrete.** XLA compiles one executable per concrete input signature: the data
  arguments' shapes plus the values of DimensionInputInfo arguments (host scalars). While tracing,
  shape computations (``tensorrt.shape``, slices of shapes, i32 scalar arithmetic, concatenations that
  feed reshape/broadcast/slice/linspace shape operands) run in numpy on static values, so XLA only sees
  tensor data. The executable for the profile's ``opt`` shapes is built eagerly by ``build``; every
  other signature inside the bounds is built on first use and cached. ``report.cache`` lists the
  built signatures and counts hits and misses.
* Constants with more than ``xla_ops.STATIC_RESULT_LIMIT`` elements are passed to the executable as
  device-resident arguments (uploaded once at build) instead of being baked into the HLO. With the
  module switch ``FOLD_CONSTANTS = False`` so is every constant that no shape operand is computed from
  (``xla_ops.SHAPE_OPERANDS``): the ops on them are then traced and run by XLA instead of folded in
  numpy, which is how the frontend tests check the jax translations on eagerly evaluated constants.
* **Two executables for an unaligned lm head** (CUDA, ``xla_split``): when the program ends in a big f16/bf16
  GEMM whose rows are not a multiple of 8 and the signature has at least ``xla_split.MIN_ROWS`` of them, the ops
  before it (the body) compile with Triton GEMMs off (cuBLASLt epilogues) and the GEMM and what follows (the
  head) with the build's options; a call queues both. Smaller signatures stay one executable.
* ``run`` returns **jax arrays** on every platform, on the device they were computed on (GPU
  buffers stay on the GPU; on CPU ``np.asarray(out)`` is zero-copy). Inputs may be numpy or jax
  arrays, or any DLPack producer (cupy, torch), which is imported with ``jax.dlpack.from_dlpack``.
  ``synchronize()`` blocks until the last results are ready.
* f32 matrix multiplies and convolutions use ``Precision.HIGHEST`` (no TF32 on GPUs), so results
  match the reference engine; f16/bf16 run at the native precision.

``optimization_level`` -> XLA options (passed as ``jax.jit(..., compiler_options=...)``)
------------------------------------------------------------------------------------------
====== =========================================================================================
level  XLA options
====== =========================================================================================
0      ``xla_backend_optimization_level=0``, ``xla_llvm_disable_expensive_passes=True``,
       ``xla_gpu_autotune_level=0``: no LLVM optimisation, no GEMM autotuning. Fastest build.
1      ``xla_backend_optimization_level=1``, ``xla_llvm_disable_expensive_passes=True``,
       ``xla_gpu_autotune_level=0``.
2      ``xla_backend_optimization_level=2``, ``xla_gpu_autotune_level=2``.
3      (default) none: XLA's own defaults (LLVM -O3, autotune level 4), i.e. exactly what a
       plain ``jax.jit`` does.
4      XLA defaults plus ``exec_time_optimization_effort=0.5`` (the build option XLA reads to
       spend more compile time for run time).
5      ``exec_time_optimization_effort=1.0`` plus ``xla_gpu_exhaustive_tiling_search=True``
       (GPU: autotune Triton GEMMs over every tile config; slow builds).
====== =========================================================================================

HLO-level fusion is the same at every level (XLA has no switch for it); the levels trade LLVM
code generation and GPU autotuning time against run time. Options a jaxlib does not know are
dropped with a note in ``report.notes``.

Persistent compilation cache
----------------------------
With ``BuildOptions.compilation_cache_dir`` set (the pipeline passes ``tp.config.xla_cache_dir()``, a
private per-user folder) every executable is serialized into tripy-lab's own store (``xla_cache``):
the entry's key is bound to the program (argument names, op sequence, lowered StableHLO with locations, signature, XLA
options, device, versions) and its payload is digest-checked on read, so a swapped, truncated or
corrupt entry is a miss with its reason in ``report.cache["persistent_rejected"]`` and is replaced.
jax's own persistent cache is switched off around these compiles. ``BuildOptions.timing_cache_path``
(``tp.config.timing_cache_file_path``) receives the index of the entries (and GPU autotuning results).
Hits and misses are recorded per built signature in ``report.cache``. Compiles run with
``jax_traceback_in_locations_limit=0`` (locations hold only the named scopes, so they do not depend on
the caller's stack), so the key and a cached executable's op names are those of the program itself.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import os
import re
import sys
import threading
import time
from collections.abc import MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.base import (
    BuildOptions,
    BuildReport,
    CompiledEngine,
    Engine,
    EngineProfile,
    LayerRecord,
    build_errors,
    call_point,
    profile_point,
)
from tripy_lab.engine.xla.cache import XlaStore
from tripy_lab.engine.xla.ops import type_info
from tripy_lab.engine.xla.split import unknown_option

OPT_LEVEL_OPTIONS: dict[int, dict[str, Any]] = {
    0: {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True,
        "xla_gpu_autotune_level": 0},
    1: {"xla_backend_optimization_level": 1, "xla_llvm_disable_expensive_passes": True,
        "xla_gpu_autotune_level": 0},
    2: {"xla_backend_optimization_level": 2, "xla_gpu_autotune_level": 2},
    3: {},
    4: {"exec_time_optimization_effort": 0.5},
    5: {"exec_time_optimization_effort": 1.0, "xla_gpu_exhaustive_tiling_search": True},
}

# False: every constant that no shape operand needs is passed to the executable as an argument, so the
# ops on it are traced and run by XLA instead of being folded in numpy while tracing. Eager evaluation of
# constants then exercises the jax translations (tests/frontend runs the xla engine both ways).
FOLD_CONSTANTS = True

# GPU builds of the whole profile: min and max compile without GEMM autotuning, so the three concurrent compiles
# do not queue for the one device's autotuning runs; opt (and shapes requested by name, and shapes built on first
# use) are tuned. Like TensorRT, which times its tactics at the profile's opt shapes.
TUNE_OPT_ONLY = True
# and on cuBLAS: untuned, XLA's Triton GEMMs run a default tiling that is far off (GPT-2 small at B8 T1024 on the
# H200: its lm head 4.1 ms instead of 1.1 ms, the whole model 77 ms instead of 5 ms without xla_split), while cuBLAS
# picks its kernels by heuristics (benchmarks/README.md, eighth session)
UNTUNED = {"xla_gpu_autotune_level": 0, "xla_gpu_enable_triton_gemm": False}
# True: the StableHLO is written straight from the MLIR ops (``xla_emit``); programs with an op it does
# not emit (and attention patterns that may be fused) are traced through jax, with a note saying why.
DIRECT_STABLEHLO = True

_SCOPE_BASES: dict[str, str] = {}


def scope_name(trace_name: str | None, index: int) -> str:
    """The jax named scope of MLIR op ``index``: ``%t5`` -> ``t5__op3`` (``xla_layers`` reads it back)."""
    base = _SCOPE_BASES.get(trace_name or "")
    if base is None:
        if len(_SCOPE_BASES) > 100_000:
            _SCOPE_BASES.clear()
        base = _SCOPE_BASES[trace_name or ""] = re.sub(r"[^A-Za-z0-9_]", "_", trace_name or "").strip("_") or "anon"
    return f"{base}__op{index}"


def loc_name(op) -> str:
    """The trace op name on an op's location: ``loc("%t5"(...))`` -> ``"%t5"`` ("" when unnamed)."""
    return _loc_name(getattr(op, "location", None))


def _loc_name(loc) -> str:
    desc = getattr(loc, "desc", None)  # xDSL's NameLoc keeps the name in `desc`
    name = getattr(desc, "data", None)
    if isinstance(name, str):
        return name
    inner = getattr(loc, "locations", None)  # FusedLoc
    for sub in getattr(inner, "data", inner) or ():
        if name := _loc_name(sub):
            return name
    return ""


def _result_info(r):
    """(shape, numpy dtype) of an op result's type, or None where it is not a tensor type (the translation that
    reads it says so)."""
    try:
        return type_info(r.type)
    except Exception:
        return None


def _compile_contexts(x64: bool) -> ExitStack:
    from jax._src import config as jc

    stack = ExitStack()
    # jax's persistent cache is off: our store (xla_cache) binds entries to their program
    for name, value in (("traceback_in_locations_limit", 0), ("enable_compilation_cache", False)):
        state = getattr(jc, name, None)
        if state is not None:
            stack.enter_context(state(value))
    if x64:
        stack.enter_context(_x64())
    return stack


def _x64():
    import jax

    state = getattr(jax, "enable_x64", None)  # public since jax 0.7
    if state is None:
        from jax._src import config as jc

        state = jc.enable_x64
    return state(True)


def _fmt_sig(names: Sequence[str], shapes: Sequence[tuple], dim_names: Sequence[str], dims: Sequence[int]) -> str:
    parts = [f"{n}={'x'.join(map(str, s)) if s else 'scalar'}" for n, s in zip(names, shapes)]
    parts += [f"{n}={v}" for n, v in zip(dim_names, dims)]
    return ", ".join(parts) or "()"


@dataclass(slots=True)
class _OpPlan:
    index: int
    op: Any
    fn: Any
    scope: str
    trace_name: str
    line: str
    static_ok: bool
    location: Any = None
    operands: tuple = ()
    results: tuple = ()
    infos: tuple = ()  # (shape, numpy dtype) of each result (``xla_ops.type_info``); None where it has none


@dataclass
class _Built:
    """One executable: a concrete input signature."""

    key: tuple
    label: str
    call: Any  # jitted function object: call(*data_args, *consts)
    compiled: Any
    lowered: Any
    lower_s: float
    compile_s: float
    persistent: str  # "hit" / "miss" / "off"
    _layers: list[LayerRecord] | None = None
    _hlo: str | None = None
    notes: list[str] = field(default_factory=list)
    rejected: str = ""  # why a persistent cache entry was not used (swapped, truncated, ...)
    path: str = "jax"  # how the StableHLO was made: "direct" (xla_emit) or "jax" (traced)

    @property
    def hlo(self) -> str:
        if self._hlo is None:
            self._hlo = self.compiled.as_text()
        return self._hlo


class LazyTexts(MutableMapping):
    """``BuildReport.extra_stages`` whose values may be functions: each is called on first read, then kept."""

    def __init__(self, items: dict):
        self._items = dict(items)

    def __getitem__(self, name: str) -> str:
        value = self._items[name]
        if callable(value):
            value = self._items[name] = value()
        return value

    def __setitem__(self, name: str, value) -> None:
        self._items[name] = value

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class XlaCompiled(CompiledEngine):
    def __init__(self, program, options: BuildOptions):
        import jax

        t0 = time.perf_counter()
        self.program = program
        self.options = options
        self._jax = jax
        main = program.main()
        self._block_args = list(main.body.block.args)
        names = list(program.arg_names) or [f"arg{i}" for i in range(len(self._block_args))]
        self._arg_names = names
        infos = program.input_infos
        self._data_pos = [i for i, n in enumerate(names) if not isinstance(infos.get(n), DimensionInputInfo)]
        self._dim_pos = [i for i, n in enumerate(names) if isinstance(infos.get(n), DimensionInputInfo)]
        from tripy_lab.mlir.attrs import NUMPY_DTYPES, elem_of, shape_of

        self._arg_dtypes = [NUMPY_DTYPES[elem_of(a.type)] for a in self._block_args]
        self._arg_types = [shape_of(a.type) for a in self._block_args]
        self._plans = self._plan(program.ops())
        self._x64 = self._uses_64bit()
        from tripy_lab.engine.xla import attention as xla_attention
        from tripy_lab.engine.xla import linear as xla_linear

        ops = [p.op for p in self._plans]  # program.ops(), read once by _plan
        self._attention = {m.ops[-1]: m for m in xla_attention.find(ops)}
        in_attention = {i for m in self._attention.values() for i in m.ops}
        self._linear = {m.ops[-1]: m for m in xla_linear.find(ops) if not in_attention.intersection(m.ops)}
        self._op_names = {p.index: p.trace_name for p in self._plans if p.trace_name}
        self._lines = {p.trace_name: p.line for p in self._plans if p.trace_name and p.line}
        ret = main.body.block.last_op
        self._outputs = list(ret.operands) if ret is not None and ret.name == "func.return" else []
        self._consts, self._lifted = self._lift_constants()

        platform = jax.default_backend()
        dev = jax.devices()[0]
        self.device = dev
        device = "cpu" if platform == "cpu" else f"{platform} ({dev.device_kind})"
        self.report = BuildReport(engine="xla", device=device)
        level = int(options.optimization_level)
        if level not in OPT_LEVEL_OPTIONS:
            raise TripyException(f"Invalid optimization_level {level} for the xla engine.", ["Expected 0..5."])
        self._xla_options = dict(OPT_LEVEL_OPTIONS[level])
        opts = ", ".join(f"{k}={v}" for k, v in self._xla_options.items()) or "XLA defaults"
        self.report.notes.append(f"optimization_level={level} -> {opts}")
        self.report.notes.append(f"jax {jax.__version__} on {dev.platform}:{dev.id} ({dev.device_kind})")
        if self._consts:
            why = "" if FOLD_CONSTANTS else " (FOLD_CONSTANTS is off: every constant no shape needs)"
            self.report.notes.append(f"{len(self._consts)} large constant(s) passed as device-resident arguments"
                                     + why)
        self._store = None
        if options.compilation_cache_dir:
            self._store = XlaStore(options.compilation_cache_dir, options.timing_cache_path)
            self._program_digest = self._store.program_digest(
                program, [(p.op.name, p.trace_name) for p in self._plans])
        self.report.cache.update({**(self._store.report() if self._store else {"persistent_dir": "off"}),
                                  "persistent_hits": 0, "persistent_misses": 0, "persistent_rejected": [],
                                  "shapes_built": [], "hits": 0, "misses": 0})
        self._folded: dict[int, list] = {}  # constant op index -> its numpy value (direct StableHLO emission)
        self._execs: dict[tuple, _Built] = {}  # signature (shapes, dims) -> executable
        self._build_lock = threading.Lock()  # one build after the first at a time: first use or a warm-up
        self._calls: dict[tuple, Any] = {}  # call key (type, shape, dtype per arg; dim values) -> caller(args)
        self._last: Any = None
        self._opt: _Built | None = None
        self._key_simple = not self._dim_pos

        wanted = self._wanted_signatures(options.build_shapes)
        if wanted:
            first = wanted[0][2].split(",")[0]  # "opt" or "opt, requested"
            with build_errors("xla", program, profile_point(program, first) if first in ("min", "opt", "max")
                              else None):
                built = self._build_many(wanted)
            self._opt = opt = built[0]
            # printed when first read (the Stages tab, a test), not on every build: ~6 ms for 2500 ops
            self.report.extra_stages = LazyTexts({"stablehlo": opt.lowered.as_text, "hlo": lambda: opt.hlo})
        else:
            self.report.notes.append("no opt signature (arguments without shape profiles): built on first run")
        self.report.notes.append(f"build took {time.perf_counter() - t0:.3f}s")

    # ------------------------------------------------------------------------------------ planning
    def _uses_64bit(self) -> bool:
        def wide(t) -> bool:
            try:
                return type_info(t)[1].itemsize == 8
            except Exception:
                return False

        if any(wide(a.type) for a in self._block_args):
            return True
        return any(info is not None and info[1].itemsize == 8 for p in self._plans for info in p.infos)

    def _plan(self, ops) -> list[_OpPlan]:
        from tripy_lab.engine.xla.ops import STATIC_OK, TABLE

        plans, missing, origins = [], [], self.program.origins
        lines: dict = {}  # by the location's id first: hashing a SourceLocation hashes every field
        for i, op in enumerate(ops):
            fn = TABLE.get(op.name)
            if fn is None:
                missing.append(op.name)
                continue
            trace_name = loc_name(op)
            origin = origins.get(trace_name) if trace_name else None
            line, where = "", None
            if origin is not None:  # many ops share a source line: format each location once
                where = origin.location
                line = lines.get(id(where))
                if line is None:
                    line = lines.get(where)
                    if line is None:
                        line = lines[where] = origin.line
                    lines[id(where)] = line
            results = tuple(op.results)
            operands = getattr(op, "_operands", None)  # xDSL's tuple behind the ``operands`` view (~0.4 us an op)
            plans.append(_OpPlan(i, op, fn, scope_name(trace_name, i), trace_name, line, op.name in STATIC_OK, where,
                                 tuple(operands if operands is not None else op.operands), results,
                                 tuple(map(_result_info, results))))
        if missing:
            raise TripyException("The xla engine cannot translate these ops.", [", ".join(sorted(set(missing)))])
        return plans

    def _shape_values(self) -> set:
        """The SSA values a shape operand is computed from (they must stay static numpy values)."""
        from tripy_lab.engine.xla.ops import SHAPE_OPERANDS

        needed: set = set()
        for p in reversed(self._plans):
            op = p.op
            for name in SHAPE_OPERANDS.get(op.name, ()):
                v = getattr(op, name, None)
                needed.update(v if isinstance(v, (tuple, list)) else ([v] if v is not None else []))
            if p.static_ok and any(r in needed for r in op.results):
                needed.update(op.operands)
        return needed

    def _lift_constants(self):
        from tripy_lab.engine.xla.ops import STATIC_RESULT_LIMIT, constant_value

        consts, lifted = [], []
        keep = self._shape_values() if not FOLD_CONSTANTS else set()
        for p in self._plans:
            if p.op.name != "tensorrt.constant":
                continue
            shape = p.infos[0][0] if p.infos[0] is not None else type_info(p.results[0].type)[0]
            big = None not in shape and math.prod(shape) > STATIC_RESULT_LIMIT
            if big or (not FOLD_CONSTANTS and p.results[0] not in keep):
                value = constant_value(p.op, self.program)
                with _compile_contexts(self._x64):  # 64-bit constants keep their dtype
                    consts.append(self._jax.device_put(value))
                lifted.append(p.index)
        return consts, lifted

    def _point_signature(self, point: str = "opt", given: dict | None = None):
        """(shapes, dims) at a profile point ("min"/"opt"/"max"), or of ``given`` ({arg: shape or value},
        others at opt); (None, None) when an argument has no shape profile."""
        given = given or {}
        shapes, dims = [], []
        for i in self._data_pos:
            name = self._arg_names[i]
            info = self.program.input_infos.get(name)
            if name in given:
                shapes.append(tuple(int(d) for d in given[name]))
            elif isinstance(info, InputInfo):
                shapes.append(tuple(getattr(info.shape_bounds, point)))
            elif all(d is not None for d in self._arg_types[i]):
                shapes.append(tuple(self._arg_types[i]))
            else:
                return None, None
        for i in self._dim_pos:
            name = self._arg_names[i]
            value = given.get(name, getattr(self.program.input_infos[name].value_bounds, point)[0])
            dims.append(int(value[0] if isinstance(value, (tuple, list)) else value))
        return shapes, dims

    def _wanted_signatures(self, build_shapes) -> list[tuple[list, list, str]]:
        """What ``build`` compiles: opt first, then min and max (``build_shapes="profile"``, the default) or
        opt only (``"opt"``), plus any shapes given as a list of {arg: shape} dicts."""
        points = ("opt",) if build_shapes == "opt" else ("opt", "min", "max")
        out, seen = [], set()
        for point in points:
            shapes, dims = self._point_signature(point)
            if shapes is None:
                return []
            if self._sig(shapes, dims) not in seen:
                seen.add(self._sig(shapes, dims))
                out.append((shapes, dims, point))
        if not isinstance(build_shapes, str):
            for given in build_shapes or ():
                shapes, dims = self._point_signature("opt", given)
                self._validate_signature(shapes, dims)
                if self._sig(shapes, dims) not in seen:
                    seen.add(self._sig(shapes, dims))
                    out.append((shapes, dims, "requested"))
                else:  # a profile point asked for by name: tuned like any requested shape (TUNE_OPT_ONLY)
                    i = next(i for i, w in enumerate(out) if self._sig(w[0], w[1]) == self._sig(shapes, dims))
                    if "requested" not in out[i][2]:
                        out[i] = (*out[i][:2], f"{out[i][2]}, requested")
        return out

    def _validate_signature(self, shapes, dims) -> None:
        args: list = [None] * len(self._block_args)
        for i, s in zip(self._data_pos, shapes):
            args[i] = np.zeros(s, self._arg_dtypes[i])
        for i, v in zip(self._dim_pos, dims):
            args[i] = np.asarray(v, np.int32)
        self._validate(args)

    # ------------------------------------------------------------------------------------ tracing
    def _make_fn(self, dims: Sequence[int], run=None, given=(), returns=None, seed=None):
        """The program as a jax function of (data args, lifted constants). ``run``: only these plan indices (a
        split signature's body or head, ``xla_split``); ``given``: values passed as trailing arguments;
        ``returns``: the values to return instead of the outputs (jax ones only: a static one is kept in
        ``main.statics`` for the head's trace, which gets them as ``seed``)."""
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
                    how = self._run_attention(m, env, by_index, platform)
                    fusions.append(how or "unfused")
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

    def _run_attention(self, m, env, by_index, platform) -> str | None:
        """Run one attention match fused (the implementation's name) or return None (the caller runs it op
        by op)."""
        from tripy_lab.engine.xla import attention as xla_attention

        how = xla_attention.plan(m, env, platform, program=self.program)
        if how is None:
            return None
        ctx_shape = tuple(m.out.type.get_shape())
        packed = []

        def run():
            split = xla_attention.packed_qkv(m, env, self.program, platform) if len(ctx_shape) == 4 \
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

    # ------------------------------------------------------------------------------------ building
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
        if not DIRECT_STABLEHLO:
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
        """The ``xla_split.Split`` of this program on this device (found once), or None."""
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
        """relower(options) -> (jitted, lowered) of the program traced through jax (``xla_ops``)."""
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
        """Whether profile point ``why`` compiles without GEMM autotuning (``TUNE_OPT_ONLY``, GPUs only)."""
        return (TUNE_OPT_ONLY and n_points > 1 and why in ("min", "max") and self.device.platform != "cpu"
                and "xla_gpu_autotune_level" not in self._xla_options)

    def _compile(self, shapes, dims, label, relower, options, jitted, lowered, lower_s, path, text,
                 untuned: bool = False) -> _Built:
        notes = []
        store, key, cached, missed = self._store, None, None, ""
        # the timing cache's GPU autotuning folder, given at compile time only (not part of the key)
        extra = store.autotune_options(self.device.platform) if store is not None else {}
        key_options = self._xla_options
        if untuned:  # part of the key: a tuned build of this signature later must not load this one
            untuned_options = {k: v for k, v in UNTUNED.items() if k not in self._xla_options}  # the user's win
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
                    if any(k not in UNTUNED for k in extra):  # the autotune hook failed: compile without it
                        notes.append(f"compiled without the timing cache's autotune folder ({type(exc).__name__})")
                        extra = {k: v for k, v in extra.items() if k in UNTUNED}
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
            if stored := store.save(key, compiled, label):
                notes.append(f"persistent cache: {stored}")
        if store is not None:
            store.record(key, label, hit=cached is not None)
        # the emitted module lives only in ``lowered``: call its executable, never the stub ``jitted`` traces
        call = cached or (compiled if path == "direct" or jitted is None else jitted)
        return _Built(self._sig(shapes, dims), label, call, compiled, lowered, lower_s, t2 - t1,
                      persistent, notes=notes, rejected=rejected, path=path)

    def _validate(self, args) -> tuple[list, list, list]:
        """Concrete (shapes, dims, converted data args) of a call; checks dtypes and bounds."""
        if len(args) != len(self._block_args):
            raise TripyException(f"Expected {len(self._block_args)} arguments, got {len(args)}.")
        shapes, dims, data = [], [], []
        named: dict[str, tuple[int, str]] = {}
        for i in self._data_pos:
            name = self._arg_names[i]
            a = self._to_jax_compatible(args[i])
            data.append(a)
            dt = np.dtype(a.dtype)
            if dt != self._arg_dtypes[i]:
                raise TripyException(f"Argument '{name}' has dtype {dt}, expected {self._arg_dtypes[i]}.")
            shape = tuple(int(d) for d in a.shape)
            info = self.program.input_infos.get(name)
            want = self._arg_types[i]
            if len(shape) != len(want):
                raise TripyException(f"Argument '{name}' has rank {len(shape)}, expected {len(want)}.")
            if isinstance(info, InputInfo):
                b = info.shape_bounds
                for d, (s, lo, hi) in enumerate(zip(shape, b.min, b.max)):
                    if not lo <= s <= hi:
                        raise TripyException(f"Argument '{name}' dim {d} is {s}, outside its bounds [{lo}, {hi}].",
                                             [f"Shape {shape}; {b}."])
                for d, dn in info.dimension_names.items():
                    if dn in named and named[dn][0] != shape[d]:
                        raise TripyException(f"Dimension '{dn}' must be equal everywhere: {named[dn][1]} has "
                                             f"{named[dn][0]}, '{name}' dim {d} has {shape[d]}.")
                    named.setdefault(dn, (shape[d], f"'{name}' dim {d}"))
            else:
                for d, (s, w) in enumerate(zip(shape, want)):
                    if w is not None and s != w:
                        raise TripyException(f"Argument '{name}' dim {d} is {s}, expected {w}.")
            shapes.append(shape)
        for i in self._dim_pos:
            name = self._arg_names[i]
            v = int(np.asarray(args[i]).reshape(()))
            b = self.program.input_infos[name].value_bounds
            if not b.min[0] <= v <= b.max[0]:
                raise TripyException(f"DimensionInputInfo argument '{name}' is {v}, outside [{b.min[0]}, {b.max[0]}].")
            dims.append(v)
        return shapes, dims, data

    def _to_jax_compatible(self, a):
        if isinstance(a, (np.ndarray, self._jax.Array)):
            return a
        if isinstance(a, (np.generic, int, float, bool)):
            return np.asarray(a)
        if hasattr(a, "__dlpack__"):
            x = self._jax.dlpack.from_dlpack(a)
            if x.devices() != {self.device}:
                x = self._jax.device_put(x, self.device)
            return x
        return np.asarray(a)

    # ------------------------------------------------------------------------------------ running
    def run(self, args: Sequence[Any]) -> list[Any]:
        try:
            if not self._key_simple:
                call = self._calls[self._key(args)]
            elif len(args) == 1:  # without the list comprehension's frame
                a = args[0]
                call = self._calls[((type(a), a.shape, a.dtype),)]
            else:
                call = self._calls[tuple([(type(a), a.shape, a.dtype) for a in args])]
        except (KeyError, AttributeError, TypeError, IndexError):
            return self._run_miss(args)
        return list(call(args))

    def caller_for(self, args: Sequence[Any]):
        """The ``call(args) -> outputs`` that ``run`` used for arguments of this signature (None before ``run`` saw
        it, or for arguments without a shape and dtype). Like ``run`` on a hit it checks nothing: the Executable
        keeps it per signature it has checked. Each call counts a hit and keeps its outputs for ``synchronize``."""
        try:
            return self._calls.get(tuple([(type(a), a.shape, a.dtype) for a in args]) if self._key_simple
                                   else self._key(args))
        except (AttributeError, TypeError):
            return None

    def device_probes(self) -> list | None:
        """One tiny jax array on each device a jax array can be on in this process (every backend's), or None when
        a backend has several devices (an array could span them). The Executable asks their memory once and then
        trusts it for every array of their class (``executable.arguments.always_readable``)."""
        from jax.extend.backend import backends

        probes = []
        for client in backends().values():
            devices = client.devices()
            if len(devices) != 1:
                return None
            probes.append(self._jax.device_put(np.zeros((), np.float32), devices[0]))
        return probes

    def _key(self, args) -> tuple:
        key = [(type(a), a.shape, a.dtype) for a in args]
        for i in self._dim_pos:
            key[i] = int(args[i])
        return tuple(key)

    def _caller(self, built: _Built, convert: bool):
        """The cheapest ``call(args) -> outputs`` for this executable and these argument types, counting a cache
        hit and keeping the outputs for ``synchronize``; and the same call without the count (for a miss)."""
        fn, consts, data_pos, cache = self._direct(built.call), tuple(self._consts), self._data_pos, self.report.cache

        def plain(args):
            data = args if not self._dim_pos else [args[i] for i in data_pos]
            try:
                return fn(*data, *consts)
            except ValueError as exc:
                return _call_relaid(exc, fn, data, consts)

        if not self._dim_pos and not self._x64 and not convert:  # the hot path: one frame, then jax's C++ call
            # the try costs nothing until an argument comes laid out otherwise (``_call_relaid``)
            if consts:
                def call(args):
                    try:
                        out = self._last = fn(*args, *consts)
                    except ValueError as exc:
                        out = self._last = _call_relaid(exc, fn, args, consts)
                    cache["hits"] += 1
                    return out
            else:
                def call(args):
                    try:
                        out = self._last = fn(*args)
                    except ValueError as exc:
                        out = self._last = _call_relaid(exc, fn, args, ())
                    cache["hits"] += 1
                    return out

            return call, plain
        if self._x64:
            narrow = plain

            def plain(args):
                with _x64():
                    return narrow(args)
        if convert:
            inner, conv = plain, self._to_jax_compatible
            plain = lambda args: inner([conv(a) for a in args])  # noqa: E731

        def call(args):
            out = self._last = plain(args)
            cache["hits"] += 1
            return out

        return call, plain

    @staticmethod
    def _direct(fn):
        """What to call for a built executable: a loaded one (``jax.stages.Compiled``) is a Python ``__call__``
        around the C++ call jax makes on its first use; once made, calling that saves ~0.5 us a call. A jitted
        function is its C++ call already."""
        inner = getattr(fn, "_call", None)
        return inner if callable(inner) else fn

    def _run_miss(self, args):
        shapes, dims, data = self._validate(args)
        sig = self._sig(shapes, dims)
        built = self._execs.get(sig)
        if built is None:
            self.report.cache["misses"] += 1
            names = self._arg_names
            point = call_point(self.program, {**{names[i]: s for i, s in zip(self._data_pos, shapes)},
                                              **{names[i]: d for i, d in zip(self._dim_pos, dims)}})
            with self._build_lock:  # a warm-up may be compiling this very signature: wait for it, not twice
                built = self._execs.get(sig)
                if built is None:
                    with build_errors("xla", self.program, point):
                        built = self._build(shapes, dims, "first use")
        else:
            self.report.cache["hits"] += 1
        native = (np.ndarray, self._jax.Array)
        convert = any(not isinstance(args[i], native) for i in self._data_pos)
        call, plain = self._caller(built, convert)
        out = self._last = plain(list(args))
        if self._direct(built.call) is not built.call:  # jax made the C++ call on this first use: call it directly
            call = self._caller(built, convert)[0]
        try:
            key = tuple([(type(a), a.shape, a.dtype) for a in args]) if self._key_simple else self._key(args)
            self._calls[key] = call
        except (AttributeError, TypeError):  # arguments without shape/dtype: never cached, always converted
            pass
        return list(out)

    def warm(self, signature: dict) -> bool:
        """Compile ``signature`` ({arg: shape or value}) unless it is built; True when this call compiled it."""
        shapes, dims = self._point_signature("opt", signature)
        self._validate_signature(shapes, dims)
        with self._build_lock:
            if self._sig(shapes, dims) in self._execs:
                return False
            with build_errors("xla", self.program, call_point(self.program, signature)):
                self._build(shapes, dims, "warm-up")
        # one call on zeros: the device loads the executable's kernels on its first run (tens of ms on a GPU)
        args: list = [None] * len(self._block_args)
        for i, shape in zip(self._data_pos, shapes):
            args[i] = np.zeros(shape, self._arg_dtypes[i])
        for i, value in zip(self._dim_pos, dims):
            args[i] = np.asarray(value, np.int32)
        try:
            self._jax.block_until_ready(self.run(args))
        except Exception:  # zeros the program refuses at run time: built all the same, the first call loads it
            pass
        return True

    def synchronize(self) -> None:
        if self._last is not None:
            self._jax.block_until_ready(self._last)

    def to_device(self, array: Any) -> Any:
        return self._jax.device_put(self._to_jax_compatible(array), self.device)

    def profile(self, args: Sequence[Any], calls: int = 10) -> EngineProfile:
        """Device time per call and per layer, from jax's profiler (see ``xla_profile``)."""
        from tripy_lab.engine.xla.profile import SUSTAIN_S, profile_calls

        self.run(args)  # builds this signature if it is new
        self.synchronize()
        shapes, dims, _ = self._validate(args)
        layers = list(self.layers_for(self._execs[self._sig(shapes, dims)]))
        gpu = self.device.platform != "cpu"
        times = profile_calls(lambda: self.run(args), self.synchronize, calls, layers,
                              sustain_s=SUSTAIN_S if gpu else 0.0)
        if times is None:
            prof = super().profile(args, calls)
            prof.notes.append("the XLA profiler gave no events (another profiler session active?)")
            return prof
        known = {ly.name for ly in layers}
        for op in times.op_s:
            if op not in known:  # an instruction the layer table does not list: keep its time visible
                layers.append(LayerRecord(name=op, kind="unlisted", source_ops=(), source_lines=(),
                                          output_shapes=(), output_dtypes=()))
        where = ("CPU: span of the XLA thunk events of each call (XLA profiler)" if not gpu else
                 "device time from the XLA profiler's GPU kernel trace (first kernel start to last kernel end)"
                 + (f" of calls run back to back after {SUSTAIN_S:g} s of them (sustained clocks)"
                    if times.back_to_back else " of synchronized calls"))
        return EngineProfile(times.compute_s, {ly.name: times.op_s.get(ly.name, 0.0) for ly in layers}, layers,
                             where, times.notes, times.wall_s)

    # ------------------------------------------------------------------------------------ describing
    @property
    def layers(self) -> list[LayerRecord]:
        built = self._opt or next(iter(self._execs.values()), None)
        return self.layers_for(built) if built is not None else []

    def layers_for(self, built: _Built) -> list[LayerRecord]:
        from tripy_lab.engine.base import with_modules
        from tripy_lab.engine.xla import split as xla_split
        from tripy_lab.engine.xla.layers import layer_records

        if built._layers is None:
            if isinstance(built.compiled, xla_split.SplitCompiled):
                built._layers = xla_split.layer_records(built.compiled, self._op_names, self._lines)
            else:
                built._layers = layer_records(built.hlo, self._op_names, self._lines)
            built._layers = with_modules(built._layers, self.program.origins)
        return built._layers

    @property
    def built_signatures(self) -> list[str]:
        return [b.label for b in self._execs.values()]

    def executables(self) -> dict[str, _Built]:
        return {b.label: b for b in self._execs.values()}


class XlaEngine(Engine):
    name = "xla"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if importlib.util.find_spec("jax") is None:
            return False, "jax is not installed (pip install 'tripy-lab[xla]')"
        jax = sys.modules.get("jax")
        if getattr(jax, "__version__", None):  # imported: its version, without a scan of the installed packages
            return True, f"jax {jax.__version__} is installed"
        try:
            from importlib.metadata import version

            return True, f"jax {version('jax')} is installed"
        except Exception:
            return True, "jax is installed"

    def build(self, program, options: BuildOptions) -> CompiledEngine:
        return XlaCompiled(program, options)


def _call_relaid(exc: ValueError, fn, args, consts):
    """``fn(*args, *consts)`` again with every jax array argument in XLA's default (row-major) layout, when jax
    refused ``args`` for their layouts: an output of an N-major head (``xla_split.HEAD_LAYOUT``) passed on to an
    executable compiled for row-major inputs. Any other error is raised again."""
    if "layouts that disagree" not in str(exc):
        raise exc
    import jax
    from jax.experimental.layout import Format, Layout

    def row_major(a):
        if not isinstance(a, jax.Array) or a.format.layout.major_to_minor == tuple(range(a.ndim)):
            return a
        return jax.device_put(a, Format(Layout(major_to_minor=tuple(range(a.ndim))), a.sharding))

    return fn(*[row_major(a) for a in args], *consts)
