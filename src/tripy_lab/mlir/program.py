"""MlirProgram: what the lowering produces and every engine consumes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.source import SourceLocation


@dataclass(frozen=True)
class OpOrigin:
    """Where an MLIR op came from: its trace op and the user's line."""

    trace_op: str  # trace op name, e.g. "%t5" (the NameLoc name on the MLIR op)
    text: str  # the trace op as printed in the trace listing
    location: SourceLocation | None

    @property
    def line(self) -> str:
        return self.location.short if self.location else ""


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
