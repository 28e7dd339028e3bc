"""Call overhead of the xla engine on a tiny input vs a raw ``jax.jit`` call of the same function.

    python benchmarks/bench_xla_overhead.py [--reps 31] [--calls 2000] [--weights 76] [--json out.json]

Measures, in one process and interleaved, the median per-call time of
  * ``jit``:    ``jax.jit(lambda x: jnp.tanh(x) * 2 + x)(x)``
  * ``engine``: ``XlaCompiled.run([x])`` of the same function written as tensorrt-dialect MLIR
  * ``executable``: ``tp.compile(...)(x)`` when the pipeline is importable (the full user path)
for numpy inputs and for device-resident jax inputs, and reports engine / jit and executable / jit
(goal: executable <= 1.5x jit).
Results are ready-synchronised (``block_until_ready``) at the end of each batch, like a user loop.

``--weights N`` (default 76, 0 skips it) adds the many-argument case of a GPT-sized program: an MLP of N
``tp.Linear(--dim, --dim)`` layers whose N weights are lifted constants (device-resident executable
arguments, as GPT-2's 76 are), against ``jax.jit(f)(x, *weights)`` with the weights passed as jax arrays
(biases baked in on both sides), and ``sum``: ``x + w[0:1]`` over the N weights, almost no work, so its rows
show what the N arguments cost per call.
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
    from tripy_lab.engine.xla.build import XlaEngine
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


def weights_case(kind: str, n_weights: int, dim: int, batch: int):
    """(executable, jitted, weights) of a program with ``n_weights`` lifted (dim, dim) weights, as tp.compile'd
    and as ``jax.jit(f)(x, *weights)``. ``mlp``: N ``tp.Linear`` layers with relu between (biases baked in on
    both sides). ``sum``: ``x + w0[0:1] + ... + wN-1[0:1]``: almost no work, so the rows show what the arguments
    cost."""
    import jax
    import jax.numpy as jnp

    import tripy_lab as tp

    rng = np.random.default_rng(2)
    weights = [(rng.standard_normal((dim, dim)) / np.sqrt(dim)).astype(np.float32) for _ in range(n_weights)]
    biases = [(0.1 * rng.standard_normal(dim)).astype(np.float32) for _ in range(n_weights)]
    if kind == "mlp":
        layers = []
        for w, b in zip(weights, biases):
            lin = tp.Linear(dim, dim)
            lin.weight, lin.bias = tp.Tensor(w), tp.Tensor(b)
            layers.append(lin)

        def f(x):
            for lin in layers:
                x = tp.relu(lin(x))
            return x

        def jf(x, *ws):
            for w, b in zip(ws, biases):
                x = jax.nn.relu(jnp.matmul(x, w.T, precision="highest") + b)
            return x
    else:
        consts = [tp.Tensor(w) for w in weights]

        def f(x):
            for c in consts:
                x = x + c[0:1, :]
            return x

        def jf(x, *ws):
            for w in ws:
                x = x + w[0:1, :]
            return x

    exe = tp.compile(f, args=[tp.InputInfo((batch, dim), tp.float32)], engine="xla")
    lifted = len(getattr(exe._compiled, "_consts", ()))
    if lifted != n_weights:
        raise SystemExit(f"expected {n_weights} lifted weights, the executable has {lifted} (use a larger --dim)")
    x = np.random.default_rng(3).standard_normal((batch, dim)).astype(np.float32)
    return exe, jax.jit(jf), [jax.device_put(w) for w in weights], x


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
    p.add_argument("--weights", type=int, default=76)
    p.add_argument("--dim", type=int, default=48)
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
    cases = [("numpy input", cands, x_np), ("jax input", cands, x_dev)]
    if a.weights:
        for kind in ("mlp", "sum"):
            exe_w, jit_w, ws, xw = weights_case(kind, a.weights, a.dim, 1)
            jit_ws = lambda x, jit_w=jit_w, ws=ws: jit_w(x, *ws)  # noqa: E731  (the peer: weights as jax arrays)
            np.testing.assert_allclose(np.asarray(exe_w(xw)), np.asarray(jit_ws(xw)), rtol=1e-4, atol=1e-5)
            w_cands = {"jit": jit_ws, "engine": lambda x, r=exe_w._compiled.run: r([x]), "executable": exe_w}
            cases += [(f"{a.weights}w {kind} numpy", w_cands, xw), (f"{a.weights}w {kind} jax", w_cands,
                                                                    jax.device_put(xw))]
    results = {}
    for label, group, arg in cases:
        times = {k: [] for k in group}
        for fn in group.values():
            per_call(fn, arg, 200)  # warm up
        for _ in range(a.reps):
            for k, fn in group.items():  # interleaved, so drift hits every candidate alike
                times[k].append(per_call(fn, arg, a.calls))
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        results[label] = med
        print(f"{label:18s} " + "  ".join(f"{k} {v:6.2f} us" for k, v in med.items())
              + "  " + "  ".join(f"{k}/jit {med[k] / med['jit']:.2f}x" for k in med if k != "jit"))
    info = {"jax": jax.__version__, "device": str(jax.devices()[0].device_kind), "python": sys.version.split()[0],
            "machine": platform.machine(), "shape": list(shape), "reps": a.reps, "calls": a.calls,
            "weights": a.weights, "dim": a.dim,
            "median_us": results}
    if a.json:
        from tripy_lab.core.files import write_atomic  # a half-written result never replaces a whole one

        write_atomic(a.json, json.dumps(info, indent=1))
    return info


if __name__ == "__main__":
    main()
