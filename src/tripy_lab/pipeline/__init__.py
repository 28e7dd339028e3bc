"""The one pipeline: stage objects (Traced -> Lowered -> Built -> Executable), compile() and eager eval."""

from tripy_lab.frontend.tensor import set_evaluator
from tripy_lab.pipeline.compile import compile, evaluate
from tripy_lab.pipeline.stages import Built, Lowered, Traced
from tripy_lab.pipeline.tracing import trace

set_evaluator(evaluate)

__all__ = ["Built", "Lowered", "Traced", "compile", "evaluate", "trace"]
