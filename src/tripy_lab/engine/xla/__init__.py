"""The xla engine: the MLIR program as StableHLO, compiled by XLA through jax (imported lazily).

``build.py`` is the engine (how a program runs: its docstring); ``plan``, ``tracing``, ``signatures`` and
``running`` hold its planning, jax tracing, per-signature builds and calls; ``ops`` is the op table keyed by
MLIR op (the jax translations), ``emit``/``emit_ops``/``direct`` write StableHLO straight from the MLIR,
``attention``/``linear``/``pallas`` the fused patterns, ``split`` the two-executable lm head, ``layers``
and ``profile`` the layer table and device times, ``cache`` the persistent store.

The engine's switches live here, read at every build (``from tripy_lab.engine import xla;
xla.DIRECT_STABLEHLO = False``); this module imports nothing, so every part of the engine can read them.
"""

from __future__ import annotations

from typing import Any

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
# H200: its lm head 4.1 ms instead of 1.1 ms, the whole model 77 ms instead of 5 ms without split), while cuBLAS
# picks its kernels by heuristics (docs/perf-history.md, eighth session)
UNTUNED = {"xla_gpu_autotune_level": 0, "xla_gpu_enable_triton_gemm": False}
# True: the StableHLO is written straight from the MLIR ops (``emit``); programs with an op it does
# not emit (and attention patterns that may be fused) are traced through jax, with a note saying why.
DIRECT_STABLEHLO = True
