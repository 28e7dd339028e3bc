"""tp.compile and eager evaluation: both are trace -> lower -> build -> run."""

from __future__ import annotations

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo
from tripy_lab.core.logging import logger
from tripy_lab.core.source import user_location
from tripy_lab.executable import Executable
from tripy_lab.pipeline.stages import check_optimization_level
from tripy_lab.pipeline.tracing import compile_context, compiling, trace
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


def _input_leaves(tt: TraceTensor) -> list[TraceTensor] | None:
    """The compile inputs ``tt`` is computed from (in no particular order), or None when it uses none."""
    stack, seen, leaves = [tt], set(), []
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if t.producer is None:
            leaves.append(t)
        else:
            stack.extend(t.producer.inputs)
    return leaves or None


def _stand_in(info) -> np.ndarray:
    """nvtripy's tracing inputs: ones (True) at the opt shape; a DimensionInputInfo's opt value."""
    if isinstance(info, DimensionInputInfo):
        return np.asarray(info.value_bounds.opt[0], dtype=np.int32)
    return np.ones(info.shape_bounds.opt, dtype=dtypes.to_numpy(info.dtype))


def evaluate(tt: TraceTensor):
    """Eager ``Tensor.eval()``: the same pipeline with no inputs and optimization level 0.

    While compiling, a tensor computed from the function's inputs is evaluated on stand-ins (ones at the opt shape,
    as nvtripy traces) with a warning; tracing refuses the function if its result then depends on that value."""
    from tripy_lab.pipeline.stages import Traced

    leaves = _input_leaves(tt) if compiling() else None
    if leaves is None:
        traced = Traced(Trace([tt], [], {}, name="eval"), 0.0)
        built = traced.lower().build(optimization_level=0)
        (out,) = built.compiled.run([])
        return out
    inputs, infos, evaluated = compile_context()
    used = [t for t in inputs if any(t is leaf for leaf in leaves)]
    traced = Traced(Trace([tt], used, {t.name: infos[t.name] for t in used}, name="eval"), 0.0)
    built = traced.lower().build(optimization_level=0, shapes="opt")
    (out,) = built.compiled.run([_stand_in(infos[t.name]) for t in used])
    location = user_location()
    evaluated[id(tt)] = (tt, location)
    logger.warning("Tensor was evaluated while compiling, from stand-in inputs (ones at the opt shape): its value "
                   "is not the runtime one. Fine if the result does not use it.", mode="once")
    logger.warning(f"Tensor was evaluated while compiling here: {location.render() if location else '?'}")
    return out
