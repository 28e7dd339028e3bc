"""Call overhead of the xla engine on a tiny input vs a raw ``jax.jit`` call of the same function.

    python benchmarks/bench_xla_overhead.py [--reps 31] [--calls 2000] [--json out.json]

Measures, in one process and interleaved, the median per-call time of
  * ``jit``:    ``jax.jit(lambda x: jnp.tanh(x) * 2 + x)(x)``
  * ``engine``: ``XlaCompiled.run([x])`` of the same function written as tensorrt-dialect MLIR
  * ``executable``: ``tp.compile(...)(x)`` when the pipeline is importable (the full user path)
for numpy inputs and for device-resident jax inputs, and reports engine / jit (target <= 1.5x).
Results are ready-synchronised (``block_until_ready``) at the end of each batch, like a user loop.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time

import numpy as np


def build_engine(shape):
    from xdsl.dialects.builtin import ModuleOp, NameLoc, StringAttr, UnknownLoc
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    from tripy_lab.core import dtypes
    from tripy_lab.core.bounds import InputInfo
    from tripy_lab.engine.base import BuildOptions
    from tripy_lab.engine.xla import XlaEngine
    from tripy_lab.mlir import dialect as d
    from tripy_lab.mlir.attrs import tensor_type
    from tripy_lab.mlir.program import MlirProgram

    block = Block(arg_types=[tensor_type(shape, "f32")])
    (x,) = block.args
    ops = []

    def add(op):
        op.location = NameLoc(StringAttr(f"%t{len(ops)}"), UnknownLoc())
        block.add_op(op)
        ops.append(op)
        return op.results[0]

    t = add(d.ActivationOp(x, "kTANH"))
    two = add(d.ConstantOp(np.full((1,) * len(shape), 2.0, np.float32), "f32"))
    y = add(d.ElementWiseOp(add(d.ElementWiseOp(t, two, "kPROD")), x, "kSUM"))
    block.add_op(ReturnOp(y))
    module = ModuleOp([FuncOp("main", ([x.type], [y.type]), Region(block))])
    prog = MlirProgram(module, ["x"], {"x": InputInfo(list(shape), dtypes.float32)}, ["y"])
    return XlaEngine().build(prog, BuildOptions())


def per_call(fn, arg, calls: int) -> float:
    import jax

    out = None
    t0 = time.perf_counter()
    for _ in range(calls):
        out = fn(arg)
    jax.block_until_ready(out)
    return (time.perf_counter() - t0) / calls


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=31)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--shape", default="8")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import jax
    import jax.numpy as jnp

    shape = tuple(int(s) for s in a.shape.split("x"))
    x_np = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x_dev = jax.device_put(x_np)
    jitted = jax.jit(lambda x: jnp.tanh(x) * 2 + x)
    engine = build_engine(shape)
    run = engine.run
    cands = {"jit": jitted, "engine": lambda x: run([x])}
    try:
        import tripy_lab as tp

        exe = tp.compile(lambda x: tp.tanh(x) * 2 + x, args=[tp.InputInfo(list(shape), tp.float32)], engine="xla")
        cands["executable"] = exe
    except Exception as exc:  # the pipeline may not be there (or not accept this) yet
        print(f"(executable path skipped: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})")
    np.testing.assert_allclose(np.asarray(cands["engine"](x_np)[0]), np.asarray(jitted(x_np)), rtol=1e-6)
    results = {}
    for label, arg in (("numpy input", x_np), ("jax input", x_dev)):
        times = {k: [] for k in cands}
        for fn in cands.values():
            per_call(fn, arg, 200)  # warm up
        for _ in range(a.reps):
            for k, fn in cands.items():  # interleaved, so drift hits every candidate alike
                times[k].append(per_call(fn, arg, a.calls))
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        results[label] = med
        print(f"{label:12s} " + "  ".join(f"{k} {v:6.2f} us" for k, v in med.items())
              + "  " + "  ".join(f"{k}/jit {med[k] / med['jit']:.2f}x" for k in med if k != "jit"))
    info = {"jax": jax.__version__, "device": str(jax.devices()[0].device_kind), "python": sys.version.split()[0],
            "machine": platform.machine(), "shape": list(shape), "reps": a.reps, "calls": a.calls,
            "median_us": results}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(info, f, indent=1)
    return info


if __name__ == "__main__":
    main()
