"""Helpers for the xla engine tests: build small MlirPrograms op by op with the dialect classes.

    b = ProgramBuilder()
    x = b.input("x", ((1, 2, 4), 3), "f32")        # InputInfo with a dynamic dim
    y = b.add(d.UnaryOp(x, "kEXP"))                  # named %t0, origin cell:1
    prog = b.program(y)
"""

from __future__ import annotations

import numpy as np
import pytest

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.source import SourceLocation
from tripy_lab.mlir.attrs import tensor_type
from tripy_lab.mlir.program import MlirProgram, OpOrigin

pytest.importorskip("jax")


class ProgramBuilder:
    def __init__(self, file: str = "/tmp/ipykernel_1/123.py"):
        from xdsl.ir import Block

        self.block = Block()
        self.names: list[str] = []
        self.infos: dict = {}
        self.origins: dict[str, OpOrigin] = {}
        self.file = file
        self.count = 0

    def input(self, name: str, shape_or_info, elem: str = "f32"):
        if isinstance(shape_or_info, DimensionInputInfo):
            info, t = shape_or_info, tensor_type((), "i32")
        else:
            if isinstance(shape_or_info, InputInfo):
                info, elem = shape_or_info, shape_or_info.dtype.mlir
            else:
                info = InputInfo(list(shape_or_info), dtypes.BY_MLIR[elem])
            t = tensor_type(info.static_shape(), elem)
        self.names.append(name)
        self.infos[name] = info
        return self.block.insert_arg(t, len(self.block.args))

    def add(self, op, name: str | None = None, line: int | None = None):
        from xdsl.dialects.builtin import NameLoc, StringAttr, UnknownLoc

        name = name or f"%t{self.count}"
        self.count += 1
        op.location = NameLoc(StringAttr(name), UnknownLoc())
        self.block.add_op(op)
        loc = SourceLocation(self.file, line if line is not None else self.count, "f")
        self.origins[name] = OpOrigin(name, f"{name} = {op.name}", loc)
        return op.results[0] if len(op.results) == 1 else tuple(op.results)

    def const(self, value, elem: str | None = None):
        from tripy_lab.mlir import dialect as d

        arr = np.asarray(value)
        elem = elem or {"float32": "f32", "int32": "i32", "bool": "i1", "float16": "f16", "int64": "i64",
                        "int8": "i8"}[arr.dtype.name]
        return self.add(d.ConstantOp(arr, elem))

    def program(self, *outs) -> MlirProgram:
        from xdsl.dialects.builtin import ModuleOp
        from xdsl.dialects.func import FuncOp, ReturnOp
        from xdsl.ir import Region

        self.block.add_op(ReturnOp(*outs))
        func = FuncOp("main", ([a.type for a in self.block.args], [o.type for o in outs]), Region(self.block))
        module = ModuleOp([func])
        return MlirProgram(module, list(self.names), dict(self.infos), [f"out{i}" for i in range(len(outs))],
                           dict(self.origins))


def build(program, level: int = 3, cache_dir: str | None = None):
    from tripy_lab.engine.base import BuildOptions
    from tripy_lab.engine.xla.build import XlaEngine

    return XlaEngine().build(program, BuildOptions(optimization_level=level, compilation_cache_dir=cache_dir))


def run_np(compiled, *args) -> list[np.ndarray]:
    return [np.asarray(o) for o in compiled.run(list(args))]


def test_builder_makes_a_runnable_program():
    from tripy_lab.mlir import dialect as d

    b = ProgramBuilder()
    x = b.input("x", (2, 3))
    y = b.add(d.UnaryOp(x, "kNEG"))
    prog = b.program(y)
    assert [op.name for op in prog.ops()] == ["tensorrt.unary"]
    assert prog.origins["%t0"].trace_op == "%t0"
    (out,) = run_np(build(prog), np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(out, -np.ones((2, 3), np.float32))
