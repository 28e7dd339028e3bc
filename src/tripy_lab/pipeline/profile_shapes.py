"""Compile-time shape rule at the profile points, the same on every engine (issue 27 item 13).

A trace's dynamic dims are ``None`` to the op table's shape rules, so ``(d, 1) @ (d, d)`` with ``d`` in
[1, 6] traces fine: it is valid at d = 1 only. XLA compiles every profile point and refused it (a raw jax
TypeError) while reference and onnxruntime built it and failed at run time for d != 1. TensorRT checks each
profile point at build time too. The rule here: every profile point (min, opt, max) must be a valid program;
a matmul whose contracting dims differ at one is a TripyException naming the op, the dims and the point,
raised before any engine sees the program.

Dims are followed symbolically from the compile inputs (an input dim with min < max is a symbol, one symbol
per NamedDimension) through shape-preserving and element-wise ops; a dim the rule cannot follow is unknown
and never refused, so the check has no false alarms.
"""

from __future__ import annotations

from dataclasses import dataclass

from tripy_lab.core.errors import TripyException

POINTS = ("min", "opt", "max")
_SAME = {"unary", "activation", "softmax", "normalization", "cast"}  # output dims = first input's
_ELEMENTWISE = {"element_wise", "select"}  # output dim i from the inputs' dim i (broadcast)


@dataclass(frozen=True)
class Sym:
    """A dynamic dim of the inputs: ``key`` (a NamedDimension's name, or "arg[i]"), its min/opt/max."""

    key: str
    bounds: tuple[int, int, int]

    def at(self, point: str) -> int:
        return self.bounds[POINTS.index(point)]


Dim = int | Sym | None


def _input_dims(trace) -> dict[int, tuple[Dim, ...]]:
    dims: dict[int, tuple[Dim, ...]] = {}
    for t in trace.inputs:
        info = trace.input_infos.get(t.name)
        b = getattr(info, "shape_bounds", None)
        if b is None:
            continue
        names = getattr(info, "dimension_names", {})
        dims[id(t)] = tuple(lo if lo == hi else Sym(names.get(i, f"{t.name}[{i}]"), (lo, mid, hi))
                            for i, (lo, mid, hi) in enumerate(zip(b.min, b.opt, b.max)))
    return dims


def _broadcast(column: list[Dim], static: int | None) -> Dim:
    if static is not None:
        return static
    syms = {d for d in column if d != 1}
    if len(syms) == 1 and isinstance(d := syms.pop(), Sym):
        return d
    return None


def _fmt(d: Dim, point: str) -> str:
    return f"{d.key} = {d.at(point)}" if isinstance(d, Sym) else str(d)


def check(trace) -> None:
    """Raise a TripyException if a matmul's contracting dims differ at a profile point (see the module doc)."""
    from tripy_lab.engine.base import profile_point
    from tripy_lab.trace.optable import OPS

    for op in trace.ops:  # only a contracting dim unknown at build time can differ at one profile point
        if op.kind == "matmul":
            a, b = op.inputs[0].shape, op.inputs[1].shape
            if (a and a[-1] is None) or (len(b) >= 2 and b[-2] is None) or (len(b) == 1 and b[0] is None):
                break
    else:
        return  # every contracting dim is static: the op table's rules already compared them
    dims = _input_dims(trace)
    if not any(isinstance(d, Sym) for ds in dims.values() for d in ds):
        return  # static programs (every eager evaluation): the op table's rules already decided

    def of(t) -> tuple[Dim, ...]:
        known = dims.get(id(t))
        return known if known is not None else tuple(t.shape)  # ints where static, None where unknown

    for op in trace.ops:
        kind = OPS[op.kind].tensorrt_op if op.kind in OPS else ""
        if op.kind == "matmul":
            a, b = of(op.inputs[0]), of(op.inputs[1])
            ka, kb = (a[-1] if a else None), (b[-2] if len(b) >= 2 else (b[0] if b else None))
            if ka is not None and kb is not None and (isinstance(ka, Sym) or isinstance(kb, Sym)):
                for point in POINTS:
                    va = ka.at(point) if isinstance(ka, Sym) else ka
                    vb = kb.at(point) if isinstance(kb, Sym) else kb
                    if va != vb:
                        raise _refuse(op, ka, kb, point, profile_point(trace, point))
            if len(a) >= 2 and len(b) >= 2 and len(op.outputs[0].shape) >= 2:
                out = [None] * (len(op.outputs[0].shape) - 2) + [a[-2], b[-1]]
                dims[id(op.outputs[0])] = tuple(s if s is not None else d for s, d in zip(op.outputs[0].shape, out))
        elif kind in _SAME and op.inputs and len(op.outputs[0].shape) == len(of(op.inputs[0])):
            dims[id(op.outputs[0])] = of(op.inputs[0])
        elif kind in _ELEMENTWISE and len(op.outputs) == 1:
            shape = op.outputs[0].shape
            ins = [of(t) for t in op.inputs]
            if all(len(d) == len(shape) for d in ins):
                dims[id(op.outputs[0])] = tuple(_broadcast([d[i] for d in ins], shape[i]) for i in range(len(shape)))


def _refuse(op, ka: Dim, kb: Dim, point: str, where: str) -> TripyException:
    a, b = op.inputs
    return TripyException(
        f"matmul {op.outputs[0].name}: the contracting dims differ at the profile point {point}.",
        [f"matmul({a.name}: {a.type_str()}, {b.name}: {b.type_str()}): the first operand's last dim "
         f"({_fmt(ka, point)}) must equal the second operand's {'second-to-last' if b.rank >= 2 else 'only'} dim "
         f"({_fmt(kb, point)}).",
         f"Profile point: {where}.",
         "Every profile point (min, opt, max) must give a valid program (TensorRT and XLA build each one): "
         "give the dims bounds under which they agree, or one NamedDimension."],
        op.location, op=op.outputs[0].name)
