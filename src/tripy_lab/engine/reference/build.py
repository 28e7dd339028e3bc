"""The reference engine: a numpy interpreter of the tensorrt-dialect ops (``ops.TABLE``). The MLIR is what runs."""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.arrays import to_host
from tripy_lab.core.bounds import DimensionInputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine import base
from tripy_lab.engine.base import BuildOptions, BuildReport, CompiledEngine, Engine, EngineProfile, LayerRecord
from tripy_lab.engine.reference.ops import TABLE


class ReferenceCompiled(CompiledEngine):
    def __init__(self, program, report: BuildReport):
        self.program = program
        self.report = report
        self._ops = program.ops()
        self._layers = base.with_modules([self._layer(i, op) for i, op in enumerate(self._ops)], program.origins)
        self._memory: list = []

    def _layer(self, i: int, op) -> LayerRecord:
        origin = self.program.origin_of(op)
        shapes = tuple(tuple(None if d < 0 else d for d in r.type.get_shape()) for r in op.results)
        elem = tuple(dtypes.BY_MLIR[str(r.type.element_type)].name for r in op.results)
        kind = op.name.removeprefix("tensorrt.")
        source_ops = (origin.trace_op,) if origin else ()
        source_lines = (origin.line,) if origin and origin.line else ()
        return LayerRecord(name=f"{kind}_{i}", kind=kind, source_ops=source_ops, source_lines=source_lines,
                           output_shapes=shapes, output_dtypes=elem, kernel="numpy", mlir_ops=(i,))

    @property
    def layers(self) -> list[LayerRecord]:
        return self._layers

    def input_devices(self) -> frozenset[str]:
        # host arrays; GPU arrays are copied to the host (cupy / torch), so only where a CUDA device exists
        return frozenset({"cpu", "cuda"}) if base.cuda_device_count() else frozenset({"cpu"})

    def memory(self, measure: bool = True) -> list:
        """numpy's ``nbytes`` of every value one call makes (the oracle), from the last timing run or, with ``measure``,
        one call at the opt shapes now. A constant op's value is a weight (``weight_bytes``), every other op's
        results its ``output_bytes``; the interpreter keeps every value until the call returns, so the total is
        its peak."""
        if not self._memory and measure:
            self._measure(base.opt_inputs(self.program))
        return self._memory

    def _measure(self, args: Sequence, op_times: list[float] | None = None) -> list[np.ndarray]:
        from dataclasses import replace

        from tripy_lab.engine.memory import MemoryUse

        op_bytes = [0] * len(self._ops)
        outs = self.run(args, op_times, op_bytes)
        const = [op.name == "tensorrt.constant" for op in self._ops]
        self._layers = [replace(ly, output_bytes=0 if c else n, weight_bytes=n if c else None)
                        for ly, n, c in zip(self._layers, op_bytes, const)]
        parts = {"weights (constants)": sum(n for n, c in zip(op_bytes, const) if c),
                 "inputs": sum(to_host(a).nbytes for a in args),
                 "op outputs": sum(n for n, c in zip(op_bytes, const) if not c)}
        values = {name: int(np.asarray(to_host(a))) if isinstance(self.program.input_infos.get(name),
                                                                    DimensionInputInfo) else np.shape(a)
                  for name, a in zip(self.program.arg_names, args)}
        self._memory = [MemoryUse(base.call_point(self.program, values), sum(parts.values()), parts,
                                  "numpy's nbytes of every value the interpreter made in one call (it keeps them "
                                  "all until the call returns)")]
        return outs

    def profile(self, args: Sequence, calls: int = 10) -> EngineProfile:
        """Wall time of each call and of each MLIR op (one layer per op) in the interpreter."""
        per_op = [0.0] * len(self._ops)
        compute = []
        for k in range(calls):
            start = time.perf_counter()
            (self._measure if k == 0 else self.run)(args, per_op)  # the first call also measures memory
            compute.append(time.perf_counter() - start)
        layer_s = {ly.name: t / calls for ly, t in zip(self._layers, per_op)}
        return EngineProfile(compute, layer_s, self._layers, "CPU: wall time of the interpreter, per MLIR op")

    def run(self, args: Sequence, op_times: list[float] | None = None,
            op_bytes: list[int] | None = None) -> list[np.ndarray]:
        main = self.program.main()
        env: dict = {}
        for arg, value in zip(main.body.block.args, args):
            env[arg] = to_host(value)
        clock = time.perf_counter
        for k, op in enumerate(self._ops):
            if op_times is not None:
                t0 = clock()
            try:
                out = TABLE[op.name](op, [env[v] for v in op.operands], env, self.program)
            except TripyException as exc:
                # A run-time check failed (bounds, broadcast): point at the op's user line and trace op.
                origin = self.program.origin_of(op)
                if origin is not None and exc.op is None:
                    raise TripyException(exc.summary, exc.details + [f"Trace op: {origin.text}"],
                                         exc.location or origin.location, op=origin.trace_op) from exc
                raise
            except Exception as exc:  # numpy's own error: name the MLIR op and its origin
                origin = self.program.origin_of(op)
                raise TripyException(f"Reference engine failed in '{op.name}': {exc}",
                                     [f"Trace op: {origin.text}" if origin else ""],
                                     origin.location if origin else None,
                                     op=origin.trace_op if origin else None) from exc
            outs = out if isinstance(out, list) else [out]
            for res, val in zip(op.results, outs):
                env[res] = np.asarray(val)
            if op_bytes is not None:
                op_bytes[k] += sum(env[res].nbytes for res in op.results)
            if op_times is not None:
                op_times[k] += clock() - t0
        ret = main.body.block.last_op
        return [env[v] for v in ret.operands]


class ReferenceEngine(Engine):
    name = "reference"

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return True, "numpy interpreter, always available"

    def build(self, program, options: BuildOptions) -> CompiledEngine:
        start = time.perf_counter()
        missing = sorted({op.name for op in program.ops() if op.name not in TABLE})
        if missing:
            raise TripyException("The reference engine cannot run these ops.", [", ".join(missing)])
        report = BuildReport(engine=self.name, device="cpu",
                             cache={"timing_cache": "none (the reference engine has no cache)"})
        report.notes.append(f"optimization_level={options.optimization_level} (no effect: the interpreter does "
                            f"no optimization); validated in {time.perf_counter() - start:.4f}s")
        return ReferenceCompiled(program, report)
