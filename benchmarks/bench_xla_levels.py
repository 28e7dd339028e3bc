"""What ``optimization_level`` 0-5 costs and buys on the xla engine: build time vs run time.

    python benchmarks/bench_xla_levels.py [--batch 256] [--d 512] [--dtype f32] [--json out.json]

Program: a two-layer MLP block written as tensorrt-dialect MLIR (matmul, bias add, GELU, matmul, residual
add, layer norm), weights as constants (device-resident arguments). Each level is built in a fresh jax
compile (no persistent cache), then run; median of ``--reps`` timed batches of ``--calls`` calls.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np


def build_program(batch: int, dm: int, elem: str):
    from xdsl.dialects.builtin import ModuleOp, NameLoc, StringAttr, UnknownLoc
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    from tripy_lab.core import dtypes
    from tripy_lab.core.bounds import InputInfo
    from tripy_lab.mlir import dialect as d
    from tripy_lab.mlir.attrs import tensor_type
    from tripy_lab.mlir.program import MlirProgram

    npdt = dtypes.to_numpy(dtypes.BY_MLIR[elem])
    rng = np.random.default_rng(0)
    block = Block(arg_types=[tensor_type((batch, dm), elem)])
    (x,) = block.args
    count = [0]

    def add(op):
        op.location = NameLoc(StringAttr(f"%t{count[0]}"), UnknownLoc())
        count[0] += 1
        block.add_op(op)
        return op.results[0]

    def const(a):
        return add(d.ConstantOp(a.astype(npdt), elem))

    w1 = const(rng.standard_normal((dm, 4 * dm)) / np.sqrt(dm))
    b1 = const(rng.standard_normal((1, 4 * dm)) * 0.1)
    w2 = const(rng.standard_normal((4 * dm, dm)) / np.sqrt(4 * dm))
    h = add(d.ActivationOp(add(d.ElementWiseOp(add(d.MatrixMultiplyOp(x, w1, "kNONE", "kNONE")), b1, "kSUM")),
                           "kGELU_ERF"))
    y = add(d.ElementWiseOp(add(d.MatrixMultiplyOp(h, w2, "kNONE", "kNONE")), x, "kSUM"))
    y = add(d.NormalizationOp(y, const(np.ones((1, dm))), const(np.zeros((1, dm))), [1], eps=1e-5))
    block.add_op(ReturnOp(y))
    module = ModuleOp([FuncOp("main", ([x.type], [y.type]), Region(block))])
    return MlirProgram(module, ["x"], {"x": InputInfo([batch, dm], dtypes.BY_MLIR[elem])}, ["y"]), npdt


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--d", type=int, default=512)
    p.add_argument("--dtype", default="f32")
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    import jax

    from tripy_lab.engine.base import BuildOptions
    from tripy_lab.engine.xla.build import XlaEngine

    jax.config.update("jax_enable_compilation_cache", False)
    prog, npdt = build_program(a.batch, a.d, a.dtype)
    x = jax.device_put(np.random.default_rng(1).standard_normal((a.batch, a.d)).astype(npdt))
    rows, ref = [], None
    for level in range(6):
        t0 = time.perf_counter()
        c = XlaEngine().build(prog, BuildOptions(optimization_level=level))
        build_s = time.perf_counter() - t0
        out = c.run([x])
        c.synchronize()
        ref = np.asarray(out[0], np.float32) if ref is None else ref
        err = float(np.max(np.abs(np.asarray(out[0], np.float32) - ref)))
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            for _ in range(a.calls):
                c.run([x])
            c.synchronize()
            times.append((time.perf_counter() - t0) / a.calls)
        run_ms = statistics.median(times) * 1e3
        kinds = sorted({r.kind for r in c.layers})
        rows.append({"level": level, "build_s": build_s, "run_ms": run_ms, "max_abs_diff_vs_level0": err,
                     "kernels": len(c.layers), "kinds": kinds})
        print(f"level {level}: build {build_s:7.3f} s   run {run_ms:8.3f} ms   kernels {len(c.layers):3d}   "
              f"max|diff| vs level 0 {err:.2e}   {', '.join(kinds)}")
    info = {"jax": jax.__version__, "device": jax.devices()[0].device_kind, "batch": a.batch, "d": a.d,
            "dtype": a.dtype, "rows": rows}
    if a.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(a.json, json.dumps(info, indent=1))
    return info


if __name__ == "__main__":
    main()
