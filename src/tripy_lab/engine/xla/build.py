"""The ``xla`` engine: the MLIR ops of ``program.main()`` translated to jax, compiled by XLA, run.

How a program runs
------------------
* **StableHLO straight from the MLIR** (``DIRECT_STABLEHLO``, the default): ``direct`` / ``emit`` write each
  MLIR op as StableHLO text (``emit_ops.TABLE``, the same primitives the jax translations make, so the
  same bits) located at ``jit(main)/<t5>__op<i>/<prim>``, and puts the parsed module into the ``Lowered``
  of a stub jax function with the same argument and result types; that ``Lowered`` is compiled, stored
  and called like any other. A program with an op the table marks ``fallback`` ((de)convolution, pooling,
  resize, top-k, plugins), an attribute or dtype an emitter refuses (group norm, int4 / float8 quantize,
  broadcast-batch matmuls, out-of-bounds slice modes, ...), or an attention pattern that may be fused
  (CUDA) is traced through jax instead, with a note "StableHLO traced through jax (why)"; so is a module
  XLA refuses to compile. A once-per-process self-test checks that the installed
  jax compiles the module it is given (else every program is traced, with that reason).
* Traced through jax, each MLIR op is translated by ``ops.TABLE[op.name]`` inside
  ``jax.named_scope("<t5>__op<i>")`` (the op's trace name, sanitised, plus its index in
  ``program.ops()``). Either way that name lands in the ``op_name`` metadata of every HLO instruction XLA
  makes from the op, which is how the layer table maps fused kernels back to trace ops and user lines
  (``layers``).
* **Shapes are concrete.** XLA compiles one executable per concrete input signature: the data
  arguments' shapes plus the values of DimensionInputInfo arguments (host scalars). While tracing,
  shape computations (``tensorrt.shape``, slices of shapes, i32 scalar arithmetic, concatenations that
  feed reshape/broadcast/slice/linspace shape operands) run in numpy on static values, so XLA only sees
  tensor data. The executable for the profile's ``opt`` shapes is built eagerly by ``build``; every
  other signature inside the bounds is built on first use and cached. ``report.cache`` lists the
  built signatures and counts hits and misses.
* Constants with more than ``ops.STATIC_RESULT_LIMIT`` elements are passed to the executable as
  device-resident arguments (uploaded once at build) instead of being baked into the HLO. With the
  module switch ``FOLD_CONSTANTS = False`` so is every constant that no shape operand is computed from
  (``ops.SHAPE_OPERANDS``): the ops on them are then traced and run by XLA instead of folded in
  numpy, which is how the frontend tests check the jax translations on eagerly evaluated constants.
* **Two executables for an unaligned lm head** (CUDA, ``split``): when the program ends in a big f16/bf16
  GEMM whose rows are not a multiple of 8 and the signature has at least ``split.MIN_ROWS`` of them, the ops
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
private per-user folder) every executable is serialized into tripy-lab's own store (``cache``):
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
import sys
import threading
import time
from typing import Any

from tripy_lab.core.bounds import DimensionInputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine import xla
from tripy_lab.engine.base import (
    BuildOptions,
    BuildReport,
    CompiledEngine,
    Engine,
    LayerRecord,
    build_errors,
    profile_point,
)
from tripy_lab.engine.xla.cache import XlaStore
from tripy_lab.engine.xla.executables import LazyTexts, _Built
from tripy_lab.engine.xla.plan import Planning
from tripy_lab.engine.xla.running import Running
from tripy_lab.engine.xla.signatures import Signatures
from tripy_lab.engine.xla.tracing import Tracing


class XlaCompiled(Planning, Tracing, Signatures, Running, CompiledEngine):
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
        self._qkv_apart = self._lift_qkv_parts()
        device = "cpu" if platform == "cpu" else f"{platform} ({dev.device_kind})"
        self.report = BuildReport(engine="xla", device=device)
        level = int(options.optimization_level)
        if level not in xla.OPT_LEVEL_OPTIONS:
            raise TripyException(f"Invalid optimization_level {level} for the xla engine.", ["Expected 0..5."])
        self._xla_options = dict(xla.OPT_LEVEL_OPTIONS[level])
        opts = ", ".join(f"{k}={v}" for k, v in self._xla_options.items()) or "XLA defaults"
        self.report.notes.append(f"optimization_level={level} -> {opts}")
        self.report.notes.append(f"jax {jax.__version__} on {dev.platform}:{dev.id} ({dev.device_kind})")
        if self._consts:
            why = "" if xla.FOLD_CONSTANTS else " (FOLD_CONSTANTS is off: every constant no shape needs)"
            self.report.notes.append(f"{len(self._consts)} large constant(s) passed as device-resident arguments"
                                     + why)
        if self._qkv_apart:
            arrays = dict(zip(self._lifted, self._consts))
            mb = sum(arrays[n].nbytes for pair in self._qkv_apart.values() for n in pair if n) / 2**20
            self.report.notes.append(
                f"q/k/v weights of {len(self._qkv_apart) // 3} packed projection(s) also passed cut apart "
                f"({mb:.1f} MB): three GEMMs from {xla_attention.QKV_APART_MIN_ROWS} rows on (xla_attention.QKV_APART)")
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
        self.report.seconds = time.perf_counter() - t0  # shown with the stage's time (Built.time_text), not a note

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

    def memory(self, measure: bool = True) -> list:
        """XLA's memory analysis of every built signature, the layer table's (opt) first (``xla.memory``);
        nothing runs, so ``measure`` changes nothing."""
        from tripy_lab.engine.xla.memory import memory_use

        execs = sorted(self._execs.values(), key=lambda b: b is not self._opt)
        cache = self.__dict__.setdefault("_memory_uses", {})  # signature -> MemoryUse (the HLO is parsed once)
        return [cache[b.key] if b.key in cache else cache.setdefault(b.key, memory_use(self, b)) for b in execs]

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
