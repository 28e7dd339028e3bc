"""Stage objects: Traced -> Lowered -> Built -> Executable. Each has ``as_text()`` and ``seconds``."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from tripy_lab.core import config
from tripy_lab.core.errors import TripyException, raise_error
from tripy_lab.core.gc_pause import gc_paused
from tripy_lab.engine import BuildOptions, choose, engine_class
from tripy_lab.engine.base import build_errors
from tripy_lab.executable import Executable
from tripy_lab.mlir.program import MlirProgram
from tripy_lab.trace import Trace


def check_optimization_level(level) -> int:
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 5:
        raise_error(f"Invalid value for parameter: 'optimization_level': {level!r}.",
                    ["Expected an int in [0, 5] (the TensorRT builder optimization level)."])
    return level


@dataclass
class Traced:
    """The Trace of a function: ops, inputs and outputs, with the user's lines."""

    trace: Trace
    seconds: float
    return_single: bool = True

    def as_text(self) -> str:
        return str(self.trace)

    def lower(self) -> Lowered:
        from tripy_lab.mlir.lowering import lower  # xDSL loads on first use, not at `import tripy_lab`
        from tripy_lab.pipeline import profile_shapes

        start = time.perf_counter()
        profile_shapes.check(self.trace)  # one rule for every engine: each profile point is a valid program
        try:
            with gc_paused():
                program = lower(self.trace)
        except TripyException:
            raise
        except Exception as exc:  # an xDSL verifier or a lowering rule failing: never a raw exception
            text = (str(exc).strip().splitlines() or [""])[0][:300]
            raise_error(f"Lowering the trace to MLIR failed: {type(exc).__name__}.", [text])
        return Lowered(program, time.perf_counter() - start, self)

    def __str__(self) -> str:
        return self.as_text()


@dataclass
class Lowered:
    """The MLIR module (tensorrt dialect) that engines build from."""

    program: MlirProgram
    seconds: float
    traced: Traced | None = None
    _text_cache: dict = field(default_factory=dict, repr=False)

    def as_text(self, generic: bool = False, elide: bool = True, locations: bool = False) -> str:
        key = (generic, elide, locations)
        if key not in self._text_cache:
            from tripy_lab.mlir import text as mlir_text

            self._text_cache[key] = mlir_text.print_module(
                self.program.module, generic=generic, locations=locations,
                elide_above=config.elide_constants_above if elide else None,
                resources=None if elide else self.program.resources)
        return self._text_cache[key]

    @classmethod
    def from_text(cls, text: str, like: Lowered | None = None, *, resources: dict | None = None) -> Lowered:
        """Parse and verify MLIR text (e.g. an edited ``like.as_text(elide=False)``) into a Lowered to build.

        Errors are TripyExceptions with ``.line``/``.column`` in ``text``. With ``like``, argument names,
        origins and constant blobs (``dense_resource`` handles) come from it; inputs are read from ``@main``.
        """
        from tripy_lab.pipeline.mlir_edit import program_from_text

        start = time.perf_counter()
        program = program_from_text(text, like.program if like is not None else None, resources)
        traced = like.traced if like is not None else None
        if traced is not None and len(program.output_names) != len(like.program.output_names):
            traced = None  # a different number of results: the original's return form no longer applies
        return cls(program, time.perf_counter() - start, traced)

    def build(self, engine: str | None = None, optimization_level: int = 3, shapes="profile") -> Built:
        """Build with an engine. ``shapes``: the input signatures compiled now ("profile": opt, min, max;
        "opt"; or a list of {arg: shape} dicts besides them); others are compiled on first use."""
        check_optimization_level(optimization_level)
        name, reason = choose(engine)
        cls = engine_class(name)
        ok, why = cls.available()
        if not ok:
            raise_error(f"The '{name}' engine is not available here.", [why, f"(chosen because: {reason})"])
        options = BuildOptions(optimization_level=optimization_level,
                               timing_cache_path=config.timing_cache_file_path,
                               compilation_cache_dir=config.xla_cache_dir(), build_shapes=shapes)
        start = time.perf_counter()
        with build_errors(name, self.program), gc_paused():  # anything an engine lets escape: a TripyException
            compiled = cls().build(self.program, options)
        compiled.report.reason = reason
        return Built(compiled, time.perf_counter() - start, self, optimization_level)

    def to_onnx(self, path: str) -> str:
        """Write this program as an ONNX model (checked by onnx.checker); returns the path."""
        from tripy_lab.engine.onnx.export import export_onnx

        return export_onnx(self.program, path)

    def __str__(self) -> str:
        return self.as_text()


@dataclass
class Built:
    """A built engine: its layer table and build report."""

    compiled: object
    seconds: float
    lowered: Lowered
    optimization_level: int = 3

    @property
    def layers(self):
        return self.compiled.layers

    @property
    def report(self):
        return self.compiled.report

    def time_text(self) -> str:
        """The build time as every view shows it: the whole stage the user waited for, in ms, and what it covers
        (the engine's start-up, e.g. importing jax on a process's first build, when that was a visible part)."""
        text = f"{self.seconds * 1e3:.1f} ms"
        own = getattr(self.report, "seconds", None)
        start_up = self.seconds - own if own is not None else 0.0
        if start_up < max(0.05, 0.1 * self.seconds):  # a few ms of bookkeeping: not worth a clause
            return f"{text} (from MLIR to a runnable engine)"
        return (f"{text} (from MLIR to a runnable engine; {start_up * 1e3:.1f} ms of it loading the "
                f"{self.report.engine} engine's libraries, once per process)")

    def memory(self) -> list:
        """Device memory per built shape (the opt shape first): ``engine.memory.MemoryUse`` with ``total``, its
        ``parts`` and ``source`` (what the engine reports); measures where the engine must run to know (onnxruntime,
        reference: one call at the opt shapes), which also fills the layer table's ``output_bytes``/``weight_bytes``."""
        return self.compiled.memory()

    def as_text(self) -> str:
        r = self.report
        lines = [f"engine: {r.engine} ({r.reason})", f"device: {r.device}",
                 f"optimization_level: {self.optimization_level}", f"build time: {self.time_text()}"]
        lines += [f"cache: {k} = {v}" for k, v in r.cache.items()]
        lines += [f"note: {n}" for n in r.notes]
        try:  # what the engine knows without running (xla: every built shape)
            uses = self.compiled.memory(measure=False) if hasattr(self.compiled, "memory") else []
        except Exception:  # a stage's text never fails on a number it could not get
            uses = []
        lines += [f"memory at {u.line()}" for u in uses]
        lines.append(f"layers ({len(self.layers)}):")
        for layer in self.layers:
            shapes = ", ".join("x".join("?" if d is None else str(d) for d in s) or "scalar"
                               for s in layer.output_shapes)
            lines.append(f"  {layer.name:<28} {layer.kind:<18} {shapes:<16} {','.join(layer.output_dtypes):<10} "
                         f"{' '.join(layer.source_ops)}  {' '.join(layer.source_lines)}")
        return "\n".join(lines)

    def executable(self) -> Executable:
        traced = self.lowered.traced
        single = traced.return_single if traced else True
        stages = {"traced": traced, "lowered": self.lowered, "built": self}
        return Executable(self.compiled, self.lowered.program, single, stages, self.optimization_level)

    def __str__(self) -> str:
        return self.as_text()
