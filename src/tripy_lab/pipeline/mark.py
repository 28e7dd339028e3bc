"""Mark intermediate values as outputs: a Lowered -> Lowered transform on the MLIR, so every engine returns
them as it returns any result (xla: extra results of the executable, onnxruntime: extra graph outputs,
reference: from its own env). Engine-agnostic: engines see an ordinary program with more results.

A value is named by ``(op_index, result_index)`` in ``program.ops()`` order (the order of @main's body)."""

from __future__ import annotations

import math

from tripy_lab.core import dtypes
from tripy_lab.mlir.program import MlirProgram

# Values never worth marking: their bytes come straight from the program (constants), or they are shapes.
SKIP_OPS = frozenset({"tensorrt.constant"})


def value_label(op_index: int, result_index: int) -> str:
    return f"op{op_index}.{result_index}"


def markable(program: MlirProgram, constant_folds: bool = False) -> list[tuple[int, int]]:
    """Every (op, result) of @main worth comparing, in program order: constants left out, and (unless
    ``constant_folds``) values computed from constants alone (a transposed or dequantized weight: as big as
    the weights, and the same on every call)."""
    out = []
    folded: set = set()
    for i, op in enumerate(program.ops()):
        if op.name in SKIP_OPS or (op.operands and all(v in folded for v in op.operands)):
            folded.update(op.results)
            if not constant_folds or op.name in SKIP_OPS:
                continue
        for r, res in enumerate(op.results):
            if str(getattr(res.type, "element_type", "")) in dtypes.BY_MLIR:
                out.append((i, r))
    return out


def value_bytes(ops: list, value: tuple[int, int], dynamic: int) -> int:
    """Bytes of one value (``ops``: ``program.ops()``): its static dims, each dynamic dim taken as ``dynamic``
    (an estimate from the call's arguments)."""
    res = ops[value[0]].results[value[1]]
    shape = [dynamic if d < 0 else d for d in res.type.get_shape()]
    return int(math.prod(shape) * max(dtypes.BY_MLIR[str(res.type.element_type)].itemsize, 1))


def chunks(program: MlirProgram, values: list[tuple[int, int]], budget: int, dynamic: int) -> list[list]:
    """``values`` split in program order into groups of at most ``budget`` bytes (one value a group at least)."""
    groups, current, size = [], [], 0
    ops = program.ops()
    for v in values:
        b = value_bytes(ops, v, dynamic)
        if current and size + b > budget:
            groups.append(current)
            current, size = [], 0
        current.append(v)
        size += b
    if current:
        groups.append(current)
    return groups


def mark_program(program: MlirProgram, values: list[tuple[int, int]]) -> MlirProgram:
    """A copy of ``program`` whose @main also returns ``values`` (after its own results, in the given order);
    the original is untouched. Output names: the original's, then ``value_label`` of each value."""
    from xdsl.dialects.builtin import FunctionType
    from xdsl.dialects.func import ReturnOp

    module = program.module.clone()
    copy = MlirProgram(module, list(program.arg_names), dict(program.input_infos), list(program.output_names),
                       dict(program.origins), program.resources)
    main = copy.main()
    ops = copy.ops()
    ret = main.body.block.last_op
    extra = [ops[i].results[r] for i, r in values]
    new_ret = ReturnOp(*ret.operands, *extra)
    new_ret.location = getattr(ret, "location", None) if hasattr(new_ret, "location") else None
    main.body.block.insert_op_before(new_ret, ret)
    main.body.block.erase_op(ret)
    ins = list(main.function_type.inputs.data)
    main.properties["function_type"] = FunctionType.from_lists(ins, [v.type for v in new_ret.operands])
    copy.output_names = list(program.output_names) + [value_label(i, r) for i, r in values]
    return copy
