"""MlirProgram: what the lowering produces and every engine consumes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.source import SourceLocation


class OpOrigin:
    """Where an MLIR op came from: its trace op and the user's line. Read-only.

    ``trace_op``: the trace op's name, e.g. "%t5" (the NameLoc name on the MLIR op); ``text``: the trace op as
    printed in the trace listing; ``location``: the user's line; ``module``: the trace op's module path
    (``"h.3.attn"``, "" outside modules); ``call``: its CallScope (None when not known, e.g. after loading).
    The lowering makes them with ``of_trace_op``, which formats the text on first use (most programs never
    show it; formatting was ~4 us an op)."""

    __slots__ = ("_trace_op", "_text", "_location", "_names", "module", "call")

    def __init__(self, trace_op: str, text: str, location: SourceLocation | None, module: str = "", call=None):
        self._trace_op, self._text, self._location, self._names = trace_op, text, location, None
        self.module, self.call = module, call

    @classmethod
    def of_trace_op(cls, op) -> OpOrigin:
        """The origin of trace op ``op``; its text is ``op.listing(names)`` with the tensor names of now."""
        origin = cls.__new__(cls)
        outputs = op.outputs
        origin._trace_op, origin._text, origin._location = outputs[0].name, op, op.location
        origin._names = tuple([t.name for t in (*op.inputs, *outputs)])  # op.tensor_names(), inlined
        origin.module, origin.call = op.module, op.call
        return origin

    @property
    def trace_op(self) -> str:
        return self._trace_op

    @property
    def location(self) -> SourceLocation | None:
        return self._location

    @property
    def text(self) -> str:
        if self._names is not None:
            self._text, self._names = self._text.listing(self._names), None
        return self._text

    @property
    def line(self) -> str:
        return self.location.short if self.location else ""

    def _key(self) -> tuple:
        return self.trace_op, self.text, self.location, self.module

    def __eq__(self, other):
        return self._key() == other._key() if type(other) is OpOrigin else NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"OpOrigin(trace_op={self.trace_op!r}, text={self.text!r}, location={self.location!r}, "
                f"module={self.module!r})")


@dataclass
class MlirProgram:
    module: object  # xdsl ModuleOp with one func.func @main
    arg_names: list[str]
    input_infos: dict[str, InputInfo | DimensionInputInfo]
    output_names: list[str]
    origins: dict[str, OpOrigin] = field(default_factory=dict)
    resources: dict[str, bytes] = field(default_factory=dict)  # dense_resource blobs (raw bytes) by handle

    def main(self):
        from xdsl.dialects.func import FuncOp

        for op in self.module.ops:
            if isinstance(op, FuncOp) and op.sym_name.data == "main":
                return op
        raise KeyError("module has no func.func @main")

    def ops(self) -> list:
        """Ops of @main in order, without the terminator."""
        return [op for op in self.main().body.block.ops if op.name not in ("func.return",)]

    def origin_of(self, op) -> OpOrigin | None:
        loc = getattr(op, "location", None)
        name = getattr(getattr(loc, "desc", None), "data", None)
        return self.origins.get(name) if name else None

    def constant_value(self, op) -> np.ndarray:
        """The payload of a tensorrt.constant as a numpy array (inline dense or a dense_resource blob)."""
        from tripy_lab.mlir.attrs import elements_to_numpy

        return elements_to_numpy(op.properties["weights"], self.resources)


def origins_from_locations(main, origins: dict[str, OpOrigin]) -> dict[str, OpOrigin]:
    """``origins`` plus one for every op of ``main`` whose ``loc("%t5"("h.3.attn"("file.py":12:5)))`` names a
    trace op it lacks (MLIR text parsed without its original): trace op, module path and user line come from
    the location itself (no listing text)."""
    out = dict(origins)
    for op in main.body.block.ops:
        loc = getattr(op, "location", None)
        name = getattr(getattr(loc, "desc", None), "data", None)
        if not isinstance(name, str) or name in out:
            continue
        child, module = loc.location, ""
        inner = getattr(getattr(child, "desc", None), "data", None)
        if isinstance(inner, str):  # the module's NameLoc
            child, module = child.location, inner
        where = None
        if hasattr(child, "filename"):  # FileLineColLoc (columns 1-based)
            where = SourceLocation(child.filename.data, child.line.data, "", max(child.column.data - 1, 0))
        out[name] = OpOrigin(name, "", where, module)
    return out
