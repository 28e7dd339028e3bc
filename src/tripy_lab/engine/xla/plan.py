"""The xla engine's plan of a program: one entry per MLIR op (its translation, jax scope, trace op and
user line), and which signatures a build compiles."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from tripy_lab.core.bounds import InputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine import xla
from tripy_lab.engine.xla.executables import _compile_contexts
from tripy_lab.engine.xla.ops import type_info
from tripy_lab.mlir.attrs import loc_name

_SCOPE_BASES: dict[str, str] = {}


def scope_name(trace_name: str | None, index: int) -> str:
    """The jax named scope of MLIR op ``index``: ``%t5`` -> ``t5__op3`` (``layers`` reads it back)."""
    base = _SCOPE_BASES.get(trace_name or "")
    if base is None:
        if len(_SCOPE_BASES) > 100_000:
            _SCOPE_BASES.clear()
        base = _SCOPE_BASES[trace_name or ""] = re.sub(r"[^A-Za-z0-9_]", "_", trace_name or "").strip("_") or "anon"
    return f"{base}__op{index}"


def _result_info(r):
    """(shape, numpy dtype) of an op result's type, or None where it is not a tensor type (the translation that
    reads it says so)."""
    try:
        return type_info(r.type)
    except Exception:
        return None


@dataclass(slots=True)
class _OpPlan:
    index: int
    op: Any
    fn: Any
    scope: str
    trace_name: str
    line: str
    static_ok: bool
    location: Any = None
    operands: tuple = ()
    results: tuple = ()
    infos: tuple = ()  # (shape, numpy dtype) of each result (``ops.type_info``); None where it has none


class Planning:
    """XlaCompiled's planning: one ``_OpPlan`` per MLIR op, 64-bit use, lifted constants, the signatures a
    build compiles."""

    def _uses_64bit(self) -> bool:
        def wide(t) -> bool:
            try:
                return type_info(t)[1].itemsize == 8
            except Exception:
                return False

        if any(wide(a.type) for a in self._block_args):
            return True
        return any(info is not None and info[1].itemsize == 8 for p in self._plans for info in p.infos)

    def _plan(self, ops) -> list[_OpPlan]:
        from tripy_lab.engine.xla.ops import STATIC_OK, TABLE

        plans, missing, origins = [], [], self.program.origins
        lines: dict = {}  # by the location's id first: hashing a SourceLocation hashes every field
        for i, op in enumerate(ops):
            fn = TABLE.get(op.name)
            if fn is None:
                missing.append(op.name)
                continue
            trace_name = loc_name(op)
            origin = origins.get(trace_name) if trace_name else None
            line, where = "", None
            if origin is not None:  # many ops share a source line: format each location once
                where = origin.location
                line = lines.get(id(where))
                if line is None:
                    line = lines.get(where)
                    if line is None:
                        line = lines[where] = origin.line
                    lines[id(where)] = line
            results = tuple(op.results)
            operands = getattr(op, "_operands", None)  # xDSL's tuple behind the ``operands`` view (~0.4 us an op)
            plans.append(_OpPlan(i, op, fn, scope_name(trace_name, i), trace_name, line, op.name in STATIC_OK, where,
                                 tuple(operands if operands is not None else op.operands), results,
                                 tuple(map(_result_info, results))))
        if missing:
            raise TripyException("The xla engine cannot translate these ops.", [", ".join(sorted(set(missing)))])
        return plans

    def _shape_values(self) -> set:
        """The SSA values a shape operand is computed from (they must stay static numpy values)."""
        from tripy_lab.engine.xla.ops import SHAPE_OPERANDS

        needed: set = set()
        for p in reversed(self._plans):
            op = p.op
            for name in SHAPE_OPERANDS.get(op.name, ()):
                v = getattr(op, name, None)
                needed.update(v if isinstance(v, (tuple, list)) else ([v] if v is not None else []))
            if p.static_ok and any(r in needed for r in op.results):
                needed.update(op.operands)
        return needed

    def _lift_constants(self):
        from tripy_lab.engine.xla.ops import STATIC_RESULT_LIMIT, constant_value

        consts, lifted = [], []
        keep = self._shape_values() if not xla.FOLD_CONSTANTS else set()
        for p in self._plans:
            if p.op.name != "tensorrt.constant":
                continue
            shape = p.infos[0][0] if p.infos[0] is not None else type_info(p.results[0].type)[0]
            big = None not in shape and math.prod(shape) > STATIC_RESULT_LIMIT
            if big or (not xla.FOLD_CONSTANTS and p.results[0] not in keep):
                value = constant_value(p.op, self.program)
                with _compile_contexts(self._x64):  # 64-bit constants keep their dtype
                    consts.append(self._jax.device_put(value))
                lifted.append(p.index)
        return consts, lifted

    def _lift_qkv_parts(self) -> dict:
        """The parts of packed q/k/v projection weights (``xla_attention.apart_weights``) as more device-resident
        arguments, after the lifted constants: {(id(matmul op), part): (weight's name, bias's name or None)}."""
        from tripy_lab.engine.xla import attention as xla_attention

        platform = self.device.platform
        if not self._attention or not xla_attention.apart_applies(platform) \
                or not xla_attention.auto_fuses(xla_attention.MODE, platform) or not self._may_reach_apart_rows() \
                or self._split_plan() is None:  # only a split body cuts them apart (Tracing._make_fn)
            return {}
        names: dict = {}
        for key, arrays in xla_attention.apart_weights(self._attention.values(), self.program).items():
            pair = []
            for part, value in zip("wb", arrays):
                if value is None:
                    pair.append(None)
                    continue
                name = f"qkv{len(self._lifted)}{part}"  # a parameter name in the HLO (const_op<name>)
                with _compile_contexts(self._x64):
                    self._consts.append(self._jax.device_put(value))
                self._lifted.append(name)
                pair.append(name)
            names[key] = tuple(pair)
        return names

    def _may_reach_apart_rows(self) -> bool:
        """Whether some data argument can have ``QKV_APART_MIN_ROWS`` elements (rows are fewer than elements)."""
        from tripy_lab.engine.xla import attention as xla_attention

        shapes, _ = self._point_signature("max")
        return shapes is None or max((math.prod(s) for s in shapes), default=0) >= xla_attention.QKV_APART_MIN_ROWS

    def _point_signature(self, point: str = "opt", given: dict | None = None):
        """(shapes, dims) at a profile point ("min"/"opt"/"max"), or of ``given`` ({arg: shape or value},
        others at opt); (None, None) when an argument has no shape profile."""
        given = given or {}
        shapes, dims = [], []
        for i in self._data_pos:
            name = self._arg_names[i]
            info = self.program.input_infos.get(name)
            if name in given:
                shapes.append(tuple(int(d) for d in given[name]))
            elif isinstance(info, InputInfo):
                shapes.append(tuple(getattr(info.shape_bounds, point)))
            elif all(d is not None for d in self._arg_types[i]):
                shapes.append(tuple(self._arg_types[i]))
            else:
                return None, None
        for i in self._dim_pos:
            name = self._arg_names[i]
            value = given.get(name, getattr(self.program.input_infos[name].value_bounds, point)[0])
            dims.append(int(value[0] if isinstance(value, (tuple, list)) else value))
        return shapes, dims

    def _wanted_signatures(self, build_shapes) -> list[tuple[list, list, str]]:
        """What ``build`` compiles: opt first, then min and max (``build_shapes="profile"``, the default) or
        opt only (``"opt"``), plus any shapes given as a list of {arg: shape} dicts."""
        points = ("opt",) if build_shapes == "opt" else ("opt", "min", "max")
        out, seen = [], set()
        for point in points:
            shapes, dims = self._point_signature(point)
            if shapes is None:
                return []
            if self._sig(shapes, dims) not in seen:
                seen.add(self._sig(shapes, dims))
                out.append((shapes, dims, point))
        if not isinstance(build_shapes, str):
            for given in build_shapes or ():
                shapes, dims = self._point_signature("opt", given)
                self._validate_signature(shapes, dims)
                if self._sig(shapes, dims) not in seen:
                    seen.add(self._sig(shapes, dims))
                    out.append((shapes, dims, "requested"))
                else:  # a profile point asked for by name: tuned like any requested shape (xla.TUNE_OPT_ONLY)
                    i = next(i for i, w in enumerate(out) if self._sig(w[0], w[1]) == self._sig(shapes, dims))
                    if "requested" not in out[i][2]:
                        out[i] = (*out[i][:2], f"{out[i][2]}, requested")
        return out

    def _validate_signature(self, shapes, dims) -> None:
        args: list = [None] * len(self._block_args)
        for i, s in zip(self._data_pos, shapes):
            args[i] = np.zeros(s, self._arg_dtypes[i])
        for i, v in zip(self._dim_pos, dims):
            args[i] = np.asarray(v, np.int32)
        self._validate(args)
