"""``OpContext.operand(s)`` reads an op's operand groups once, all at once for ops whose groups a segment-size
property delimits (a slice's optional start / size / stride / fill): the same values as xDSL's named accessors."""

from __future__ import annotations

import numpy as np

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.engine.xla.ops import OpContext, _segments


def _program():
    def f(x):
        n = x.shape[0]
        a = x[1:n, ::2]                      # a dynamic size: start / size / stride operands
        b = tp.pad(x, ((1, 1), (0, 0)), mode="reflect")  # a slice in kREFLECT mode
        return a, b[:n]
    return pipeline.trace(f, args=[tp.InputInfo(((2, 4, 8), 6), tp.float32)]).lower().program


def test_grouped_reads_match_the_named_accessors():
    program = _program()
    slices = [op for op in program.ops() if op.name == "tensorrt.slice"]
    assert len(slices) >= 3
    checked = 0
    for op in program.ops():
        groups = _segments(op)
        if groups is None:
            continue
        env = {v: object() for v in op.operands}  # a distinct stand-in per SSA value
        ctx = OpContext(op, 0, env, np, program, None)
        names = list(groups)
        assert names[:4] == ["input", "start", "size", "stride"] or op.name != "tensorrt.slice"
        for name in names:
            want = getattr(op, name)
            want = () if want is None else tuple(want) if isinstance(want, (tuple, list)) else (want,)
            assert ctx.operands(name) == [env[v] for v in want]
            assert ctx.operand(name) is (env[want[0]] if want else None)
            checked += 1
    assert checked >= 15
    # a dynamic size really is an operand here, and a static stride is not
    dynamic = [op for op in slices if op.size is not None]
    assert dynamic and all(OpContext(op, 0, {v: v for v in op.operands}, np, program, None).operand("size")
                           is op.size for op in dynamic)


def test_an_op_without_segments_reads_by_name():
    program = _program()
    op = next(op for op in program.ops() if op.name == "tensorrt.shape")
    assert _segments(op) is None
    env = {v: object() for v in op.operands}
    ctx = OpContext(op, 0, env, np, program, None)
    assert ctx.operand("input") is env[op.input]
    assert ctx.operands("missing_group") == [] and ctx.operand("missing_group") is None
