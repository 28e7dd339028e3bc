"""Pure-data IR: tensors, ops, the op table, and the Trace graph."""

from tripy_lab.trace.graph import Trace
from tripy_lab.trace.ir import CallScope, TraceOp, TraceTensor
from tripy_lab.trace.optable import OPS, OpDef, apply, broadcast_shapes

__all__ = ["OPS", "CallScope", "OpDef", "Trace", "TraceOp", "TraceTensor", "apply", "broadcast_shapes"]
