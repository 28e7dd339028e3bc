"""The smallest failing program around one op of an AccuracyReport: that op alone, its inputs fed as constants
(the good run's values), as an Executable and as a standalone Python reproducer script."""

from __future__ import annotations

import base64
import io
from dataclasses import dataclass

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.lab import accuracy_run as runs
from tripy_lab.mlir.program import MlirProgram


@dataclass
class Subgraph:
    """``executable`` runs the op alone (no arguments); ``expected``: the against side's value of its result;
    ``script``: a reproducer (``python repro.py`` builds and runs it and prints the mismatch)."""

    executable: object
    expected: np.ndarray
    script: str
    mlir: str
    op: object  # the OpError

    def __iter__(self):  # exe, script = report.subgraph()
        return iter((self.executable, self.script))

    def write(self, path: str) -> str:
        """Write the reproducer script to ``path`` (atomically); returns the path."""
        from tripy_lab.core.cache import write_atomic

        write_atomic(path, self.script.encode())
        return path


def _npy_b64(array: np.ndarray) -> str:
    buf = io.BytesIO()
    np.save(buf, np.asarray(array), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode()


def _operand_values(report, target) -> list[np.ndarray]:
    """Each operand of ``target``'s op as the good run has it (the exe's side where the against program has no
    such value), in the operand's dtype."""
    program: MlirProgram = report.program
    ops = program.ops()
    op = ops[target.index]
    main = program.main()
    producer = {res: (i, r) for i, o in enumerate(ops) for r, res in enumerate(o.results)}
    need_good, need_exe = [], []
    for v in op.operands:
        src = producer.get(v)
        if src is None or ops[src[0]].name == "tensorrt.constant":
            continue
        (need_good if src in report._matched else need_exe).append(src)
    good = runs.values_of(report._other, report._side, report._other_args, [report._matched[s] for s in need_good])
    bad = runs.values_of(program, report.exe.engine, report.args, need_exe)
    out = []
    for v in op.operands:
        want = dtypes.to_numpy(dtypes.BY_MLIR[str(v.type.element_type)])
        src = producer.get(v)
        if src is None:
            value = report.args[list(main.body.block.args).index(v)]
        elif ops[src[0]].name == "tensorrt.constant":
            value = program.constant_value(ops[src[0]])
        elif src in report._matched:
            value = good[report._matched[src]]
        else:
            value = bad[src]
        with np.errstate(all="ignore"):
            out.append(np.asarray(value).astype(want))
    return out


def _program(report, target, inputs) -> MlirProgram:
    """@main() -> result: a constant per input, then a copy of the op reading them."""
    from xdsl.dialects.builtin import FunctionType, ModuleOp, StringAttr
    from xdsl.dialects.func import FuncOp, ReturnOp
    from xdsl.ir import Block, Region

    from tripy_lab.mlir import dialect as trt

    op = report.program.ops()[target.index]
    block = Block()
    mapping = {}
    for v, value in zip(op.operands, inputs):
        elem = str(v.type.element_type)
        const = trt.ConstantOp(trt.dense_elements(value, elem))
        block.add_op(const)
        mapping[v] = const.results[0]
    new = op.clone(value_mapper=mapping)
    block.add_op(new)
    block.add_op(ReturnOp(new.results[target.result]))
    func = FuncOp("main", FunctionType.from_lists([], [new.results[target.result].type]), Region(block))
    module = ModuleOp([func], sym_name=StringAttr(f"repro_op{target.index}"))
    origins = {k: o for k, o in report.program.origins.items() if o.trace_op == target.trace_op}
    return MlirProgram(module, [], {}, ["out"], origins, {})


_SCRIPT = '''"""Reproducer from tripy_lab.lab.accuracy(): {title}
The op alone, its inputs fed as constants from the good run; compares the {engine} engine's result with the
good run's ({against}). Run: python repro.py (exit code 1 when they disagree)."""
import base64
import io
import sys

import numpy as np

from tripy_lab.pipeline import Lowered

MLIR = r"""
{mlir}"""
EXPECTED = np.load(io.BytesIO(base64.b64decode("{expected}")))
RTOL, ATOL = {rtol!r}, {atol!r}

exe = Lowered.from_text(MLIR).build(engine="{engine}").executable()
got = np.asarray(exe().numpy()).astype(np.float64)
want = EXPECTED.astype(np.float64)
with np.errstate(all="ignore"):
    diff = np.where((got == want) | (np.isnan(got) & np.isnan(want)), 0.0, np.abs(got - want))
    diff = np.where(np.isnan(diff), np.inf, diff)
    outside = int(np.count_nonzero(diff > ATOL + RTOL * np.abs(want)))
print(f"op: {op}  user line: {user_line}  engine: {engine}")
print(f"max abs error {{diff.max(initial=0.0):.6g}}, {{outside}} of {{diff.size}} elements outside "
      f"rtol={{RTOL}} atol={{ATOL}}")
if outside:
    i = np.unravel_index(int(np.argmax(np.where(np.isfinite(diff), diff, np.finfo(np.float64).max))), diff.shape)
    print(f"MISMATCH at {{tuple(int(k) for k in i)}}: got {{got[i]!r}}, expected {{want[i]!r}}")
    sys.exit(1)
print("OK: the op agrees with the good run")
'''


def subgraph(report, target) -> Subgraph:
    from tripy_lab.pipeline.stages import Lowered

    inputs = _operand_values(report, target)
    program = _program(report, target, inputs)
    lowered = Lowered(program, 0.0, None)
    exe = lowered.build(engine=report.exe.engine, shapes="opt").executable()
    want = runs.values_of(report._other, report._side, report._other_args, [report._matched[(target.index,
                                                                                             target.result)]])
    expected = next(iter(want.values())).astype(np.float64)
    text = lowered.as_text(elide=False)
    title = f"op {target.index} `{target.op}` ({target.dtype}), trace op {target.trace_op}, {target.user_line}"
    script = _SCRIPT.format(title=title, engine=report.exe.engine, against=report.against, mlir=text,
                            expected=_npy_b64(expected), rtol=target.rtol, atol=target.atol, op=target.op,
                            user_line=target.user_line or "?")
    return Subgraph(exe, expected, script, text, target)
