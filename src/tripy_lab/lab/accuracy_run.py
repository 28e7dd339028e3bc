"""Getting intermediate values out of a program: from an engine (the program with the values marked as extra
results of @main, pipeline/mark.py) or from the reference interpreter in float64; and matching the values of
two programs (an edit, a dtype or quantization variant) op by op."""

from __future__ import annotations

import contextlib
import difflib
import threading

import ml_dtypes
import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.arrays import to_host
from tripy_lab.core.errors import raise_error
from tripy_lab.mlir.program import MlirProgram
from tripy_lab.pipeline import mark

FLOAT64 = "float64"  # the name of the float64 reference run, as an "against" side
_LOCAL = threading.local()
_BF16 = np.dtype(ml_dtypes.bfloat16)
_PATCH_LOCK = threading.Lock()


def _promoting_to_numpy(original):
    def to_numpy(dt):
        if getattr(_LOCAL, "promote", False) and dt in dtypes.FLOATS:
            return np.dtype(np.float64)
        return original(dt)
    return to_numpy


@contextlib.contextmanager
def _float64_results():
    """While active on this thread, the reference interpreter's ops give float results in float64 (each op
    casts its result to ``dtypes.to_numpy`` of its MLIR type); other threads see the usual dtypes."""
    with _PATCH_LOCK:
        original = dtypes.to_numpy
        dtypes.to_numpy = _promoting_to_numpy(original)
    _LOCAL.promote = True
    try:
        yield
    finally:
        _LOCAL.promote = False
        with _PATCH_LOCK:
            dtypes.to_numpy = original


# Ops that only move data: their inputs stay in the stored dtype (a transposed embedding table is not copied
# in float64); every op that computes reads float64.
_MOVES = frozenset({"tensorrt.transpose", "tensorrt.reshape", "tensorrt.broadcast", "tensorrt.slice",
                    "tensorrt.gather", "tensorrt.concatenation", "tensorrt.collapse_rank", "tensorrt.expand_rank",
                    "tensorrt.shape"})


def _promote(a):
    a = np.asarray(a)
    if a.dtype == np.float64:
        return a
    if a.dtype == np.float16 or a.dtype == _BF16:  # through float32: numpy's half -> double loop is slow
        return a.astype(np.float32).astype(np.float64)
    return a.astype(np.float64) if a.dtype.kind == "f" else a


def _matmul64(op, a, b, block: int = 1 << 22):
    """The reference's matrix_multiply in float64, the right operand promoted one column block at a time (a
    float64 copy of a whole lm-head weight would double the model's memory)."""
    from tripy_lab.mlir.dialect import attr_value

    if attr_value(op, "op0") == "kTRANSPOSE":
        a = np.swapaxes(a, -1, -2)
    if attr_value(op, "op1") == "kTRANSPOSE":
        b = np.swapaxes(b, -1, -2)
    a = _promote(a)
    if b.ndim < 2 or b.dtype == np.float64 or b.size <= block:
        return np.matmul(a, _promote(b))
    if b.ndim == 2 and b.T.flags.c_contiguous:  # a transposed weight (a view): promote rows of the weight
        w, n = b.T, b.shape[1]
        step = max(1, block // w.shape[1])
        return np.concatenate([np.matmul(a, _promote(w[j:j + step]).T) for j in range(0, n, step)], axis=-1)
    n = b.shape[-1]
    step = max(1, block // max(1, b.size // n))
    parts = [np.matmul(a, _promote(b[..., j:j + step])) for j in range(0, n, step)]
    return np.concatenate(parts, axis=-1)


def run_float64(program: MlirProgram, args, keep) -> dict:
    """Values ``keep`` ((op, result) pairs) of ``program`` run by the reference interpreter with every float
    tensor in float64 (constants are promoted where used, not stored twice). Values are freed after last use."""
    from tripy_lab.engine.reference.ops import TABLE
    from tripy_lab.mlir.dialect import attr_value

    ops = program.ops()
    main = program.main()
    keep = set(keep)
    index = {res: (i, r) for i, op in enumerate(ops) for r, res in enumerate(op.results)}
    last = {}
    for i, op in enumerate(ops):
        for v in op.operands:
            last[v] = i
    env = {arg: _promote(to_host(a)) for arg, a in zip(main.body.block.args, args)}
    out = {}
    with _float64_results():
        for i, op in enumerate(ops):
            if op.name == "tensorrt.constant":
                _LOCAL.promote = False  # constants keep their stored dtype until used
                try:
                    env[op.results[0]] = program.constant_value(op)
                finally:
                    _LOCAL.promote = True
                continue
            with np.errstate(all="ignore"):
                if op.name == "tensorrt.matrix_multiply":
                    got = _matmul64(op, env[op.operands[0]], env[op.operands[1]])
                elif op.name == "tensorrt.transpose":  # a view: a transposed embedding table is not copied
                    got = np.transpose(env[op.operands[0]], attr_value(op, "permutation"))
                else:
                    ins = [env[v] for v in op.operands] if op.name in _MOVES else [_promote(env[v])
                                                                                   for v in op.operands]
                    got = TABLE[op.name](op, ins, env, program)
            for r, (res, val) in enumerate(zip(op.results, got if isinstance(got, list) else [got])):
                val = np.asarray(val) if op.name in _MOVES else _promote(val)
                env[res] = val
                if (i, r) in keep:
                    out[(i, r)] = val
            for v in op.operands:
                if last.get(v) == i and v in env and index.get(v) not in keep:
                    del env[v]
    return out


def run_marked(program: MlirProgram, engine: str, args, values) -> dict:
    """Values of ``program`` as ``engine`` computes them: the program with ``values`` marked as outputs, built
    for the first signature only ("opt"; a call at other shapes compiles on use) and run once."""
    from tripy_lab.pipeline.stages import Lowered

    marked = mark.mark_program(program, list(values))
    built = Lowered(marked, 0.0, None).build(engine=engine, shapes="opt")
    outs = built.compiled.run(list(args))
    n = len(program.output_names)
    return {v: np.asarray(to_host(o)) for v, o in zip(values, outs[n:])}


def values_of(program: MlirProgram, side: str, args, values) -> dict:
    if not values:
        return {}
    if side == FLOAT64:
        return run_float64(program, args, values)
    return run_marked(program, side, args, values)


def _key(op) -> tuple:
    shapes = tuple(tuple(r.type.get_shape()) if hasattr(r.type, "get_shape") else () for r in op.results)
    return op.name, shapes


def match_values(a: MlirProgram, b: MlirProgram) -> dict:
    """{(op, result) of ``a``: (op, result) of ``b``} for ops that correspond: identical programs op by op;
    otherwise an alignment of the op sequences by op name and result shapes (element types and attributes
    ignored, so a dtype variant, an edited enum or inserted quantize/dequantize ops still line up)."""
    ops_a, ops_b = a.ops(), b.ops()
    keys_a, keys_b = [_key(o) for o in ops_a], [_key(o) for o in ops_b]
    pairs: list[tuple[int, int]] = []
    if keys_a == keys_b:
        pairs = [(i, i) for i in range(len(ops_a))]
    else:
        sm = difflib.SequenceMatcher(None, keys_a, keys_b, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                pairs += [(i1 + k, j1 + k) for k in range(i2 - i1)]
            elif tag == "replace" and i2 - i1 == j2 - j1:  # same length: pair the ops of the same name
                pairs += [(i1 + k, j1 + k) for k in range(i2 - i1) if ops_a[i1 + k].name == ops_b[j1 + k].name]
    out = {}
    for i, j in pairs:
        for r in range(min(len(ops_a[i].results), len(ops_b[j].results))):
            out[(i, r)] = (j, r)
    return out


def host_args(program: MlirProgram, args, like=None) -> list:
    """``args`` (engine args of another program, or the user's arrays) as host arrays of ``program``'s input
    dtypes: a float array becomes the program's float dtype (a float16 variant gets float16 inputs)."""
    main = program.main()
    out = []
    if len(args) != len(main.body.block.args):
        raise_error("Wrong number of arguments for the accuracy run.",
                    [f"Expected {len(main.body.block.args)} ({', '.join(program.arg_names)}), got {len(args)}."])
    for a, arg in zip(args, main.body.block.args):
        a = np.asarray(to_host(a))
        want = dtypes.to_numpy(dtypes.BY_MLIR[str(arg.type.element_type)])
        if a.dtype != want and (a.dtype.kind == "f" or a.dtype == _BF16):
            a = a.astype(want)
        out.append(a)
    return out
