"""tp.compile and eager evaluation: both are trace -> lower -> build -> run."""

from __future__ import annotations

from tripy_lab.core.errors import raise_error
from tripy_lab.core.logging import logger
from tripy_lab.executable import Executable
from tripy_lab.pipeline.stages import check_optimization_level
from tripy_lab.pipeline.tracing import compiling, trace
from tripy_lab.trace import Trace, TraceTensor


def compile(func, optimization_level: int = 3, *, args=(), kwargs=None, engine: str | None = None) -> Executable:  # noqa: A001
    """Trace ``func`` once with ``args``/``kwargs`` and build it; the stages stay on ``exe.stages``."""
    check_optimization_level(optimization_level)
    traced = trace(func, args=args, kwargs=kwargs)
    logger.trace(lambda: traced.as_text())
    lowered = traced.lower()
    logger.mlir(lambda: lowered.as_text())
    built = lowered.build(engine=engine, optimization_level=optimization_level)
    logger.timing(lambda: f"trace {traced.seconds * 1e3:.1f} ms, lower {lowered.seconds * 1e3:.1f} ms, "
                          f"build ({built.report.engine}) {built.seconds * 1e3:.1f} ms")
    return built.executable()


def _depends_on_input(tt: TraceTensor) -> bool:
    stack, seen = [tt], set()
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.producer is None:
            return True
        stack.extend(t.producer.inputs)
    return False


def evaluate(tt: TraceTensor):
    """Eager ``Tensor.eval()``: the same pipeline with no inputs and optimization level 0."""
    if compiling() and _depends_on_input(tt):
        raise_error("Cannot evaluate a tensor while compiling.",
                    ["This tensor depends on a runtime input of the function being compiled; its value is not "
                     "known until the Executable runs. Avoid print/tolist/int/bool on it inside the function."],
                    location=tt.location)
    from tripy_lab.pipeline.stages import Traced

    traced = Traced(Trace([tt], [], {}, name="eval"), 0.0)
    built = traced.lower().build(optimization_level=0)
    (out,) = built.compiled.run([])
    return out
