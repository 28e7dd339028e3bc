"""Per-op accuracy: every intermediate value of an Executable, as its engine computes it (marked as outputs of
the MLIR), against the same values from the reference interpreter in float64 (or another engine, or another
Executable of the same program), per MLIR op and folded per trace op, frontend call and module.

``report.first_divergent`` is the earliest op whose error exceeds the tolerance while every input is within
it: where the numbers first go wrong."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.errors import raise_error
from tripy_lab.lab import accuracy_run as runs
from tripy_lab.pipeline import mark

# Default tolerances per compute dtype of the op's result: (rtol, atol).
TOLERANCES = {"float32": (1e-3, 1e-4), "float16": (1e-2, 1e-3), "bfloat16": (5e-2, 1e-2)}
DEFAULT_BUDGET = 1 << 30  # bytes of marked values per build-and-run, at most


@dataclass
class OpError:
    """The error of one MLIR op's result (exe's value vs the against side's)."""

    index: int  # op index in @main (program.ops())
    result: int
    op: str  # e.g. "unary <kEXP>"
    dtype: str  # the dtype the op computes in (its result's element type)
    shape: tuple
    max_abs: float
    max_rel: float  # max |a - b| / |b|: huge near zeros, see tol_ratio
    outside: int  # elements outside atol + rtol * |against|
    size: int
    rtol: float
    atol: float
    mlir_line: int | None = None  # 1-based line in lowered.as_text()
    trace_op: str = ""  # "%t5"
    module: str = ""  # dotted state_dict path of the tp.Module, "" outside modules
    call: str = ""  # the public frontend call ("softmax", "__matmul__")
    user_line: str = ""  # the user's line ("model.py:12")
    inputs: tuple = ()  # (op, result) of the compared values this op reads (looked through others)
    tol_ratio: float = 0.0  # max |a - b| / (atol + rtol * |b|): > 1 is outside; what the panes shade by

    @property
    def within(self) -> bool:
        return self.outside == 0


@dataclass
class AccuracyReport:
    exe: object
    against: str
    ops: list[OpError]
    program: object = None  # the exe's MlirProgram
    args: list = field(default_factory=list)  # the exe's host arguments
    against_values: dict = field(default_factory=dict)  # {(op, result): array} of the inputs of first_divergent
    seconds: float = 0.0
    chunks: int = 1

    @property
    def first_divergent(self) -> OpError | None:
        by_value = {(e.index, e.result): e for e in self.ops}
        for e in self.ops:  # program order
            if not e.within and all(by_value[v].within for v in e.inputs if v in by_value):
                return e
        return None

    @property
    def worst(self) -> OpError | None:
        return max(self.ops, key=lambda e: (e.outside > 0, e.max_rel if np.isfinite(e.max_rel) else 1e300),
                   default=None)

    def table(self):
        """One row per compared MLIR op result (a LabFrame: full precision, displayed with units)."""
        import pandas as pd

        from tripy_lab.lab.tables import LabFrame

        first = self.first_divergent
        rows = [{"op": e.index, "mlir": e.op, "line": e.mlir_line, "dtype": e.dtype,
                 "shape": "x".join(str(d) for d in e.shape) or "scalar", "max_abs": e.max_abs, "max_rel": e.max_rel,
                 "tol_ratio": e.tol_ratio,
                 "outside": e.outside, "size": e.size, "trace_op": e.trace_op, "call": e.call, "module": e.module,
                 "user_line": e.user_line, "first": "◀ first divergent" if e is first else ""} for e in self.ops]
        return LabFrame(pd.DataFrame(rows))

    def _fold(self, key) -> dict:
        out: dict = {}
        for e in self.ops:
            k = key(e)
            if not k:
                continue
            agg = out.setdefault(k, {"max_abs": 0.0, "max_rel": 0.0, "outside": 0, "ops": 0})
            agg["max_abs"] = max(agg["max_abs"], e.max_abs)
            agg["max_rel"] = max(agg["max_rel"], e.max_rel)
            agg["outside"] += e.outside
            agg["ops"] += 1
        return out

    def by_trace_op(self, metric: str = "tol_ratio") -> dict[str, float]:
        """{trace op name: worst ``metric`` of its MLIR ops} ("tol_ratio": how many tolerances off, > 1 is
        outside; or "max_abs" / "max_rel"): the per-trace-op map for graph shading."""
        out: dict[str, float] = {}
        for e in self.ops:
            if e.trace_op:
                out[e.trace_op] = max(out.get(e.trace_op, 0.0), getattr(e, metric))
        return out

    def by_call(self) -> dict:
        return self._fold(lambda e: f"{e.call} @ {e.user_line}" if e.call else "")

    def by_module(self) -> dict:
        return self._fold(lambda e: e.module or "")

    def by_mlir_line(self) -> dict[int, float]:
        """{1-based line of ``as_text()``: worst tol_ratio of its op}."""
        out: dict[int, float] = {}
        for e in self.ops:
            if e.mlir_line:
                out[e.mlir_line] = max(out.get(e.mlir_line, 0.0), e.tol_ratio)
        return out

    def subgraph(self, op: OpError | None = None):
        """The smallest program around ``op`` (default: first_divergent): that op alone, its inputs fed as
        constants from the against run, as ``(Executable, reproducer script text)``."""
        from tripy_lab.lab.accuracy_repro import subgraph

        target = op or self.first_divergent
        if target is None:
            raise_error("No op to reduce to: every op is within tolerance.",
                        ["Pass an op (an entry of report.ops) or loosen nothing: the program agrees."])
        return subgraph(self, target)

    def summary(self) -> str:
        first = self.first_divergent
        n_bad = sum(not e.within for e in self.ops)
        head = f"{len(self.ops)} op results compared ({self.exe.engine} vs {self.against}): {n_bad} outside tolerance"
        if first is None:
            return head + "."
        return (f"{head}; first divergent: op {first.index} `{first.op}` (MLIR line {first.mlir_line}, "
                f"trace op {first.trace_op}, module '{first.module}', {first.user_line}), "
                f"max abs {first.max_abs:.3g}, max rel {first.max_rel:.3g}, {first.outside}/{first.size} outside.")

    __str__ = summary

    def _repr_html_(self) -> str:
        from tripy_lab.lab.html import esc

        return f"<p>{esc(self.summary())}</p>" + self.table()._repr_html_()


def _short(op) -> str:
    from tripy_lab.mlir.dialect import attr_value

    kind = op.name.removeprefix("tensorrt.")
    for attr in ("elementwiseOperation", "unaryOperation", "reduceOperation", "activationType"):
        try:
            v = attr_value(op, attr)
        except Exception:  # not an attribute of this op
            v = None
        if v:
            return f"{kind} <{v}>"
    return kind


def mlir_lines(text: str, n_ops: int) -> list[int | None]:
    """1-based line of each op of @main in the printed MLIR (one op per line), or Nones if that does not hold."""
    lines = [k + 1 for k, line in enumerate(text.splitlines())
             if line.lstrip().startswith("%") and " = tensorrt." in line or line.lstrip().startswith("tensorrt.")]
    return lines if len(lines) == n_ops else [None] * n_ops


def compare(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> tuple[float, float, int, float]:
    """(max abs, max rel, count outside atol + rtol*|b|, max |a-b| / (atol + rtol*|b|)) of exe's ``a`` vs
    ``b``; equal infs agree, a NaN on one side only (or an inf against a finite value) is an infinite error."""
    if a.shape != b.shape:
        return float("inf"), float("inf"), max(a.size, b.size), float("inf")
    if a.dtype.kind not in "fc" and b.dtype.kind not in "fc" and a.dtype.name != "bfloat16":
        bad = int(np.count_nonzero(a != b))
        d = np.abs(a.astype(np.float64) - b.astype(np.float64)) if a.size else np.zeros(0)
        return (float(d.max(initial=0.0)), float((d / np.maximum(np.abs(b), 1)).max(initial=0.0)), bad,
                float("inf") if bad else 0.0)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(all="ignore"):
        d = np.abs(a64 - b64)  # inf - inf and nan give nan: equal infs / nans agree below, the rest is inf
        nan = np.isnan(d)
        if nan.any():
            d[nan & ~((a64 == b64) | (np.isnan(a64) & np.isnan(b64)))] = np.inf
            d[np.isnan(d)] = 0.0
        mag = np.abs(b64)
        tol = atol + rtol * mag
        outside = int(np.count_nonzero(d > tol))
        ratio = float(np.where(d > 0, d / tol, 0.0).max(initial=0.0))
        del tol
        np.maximum(mag, np.finfo(np.float64).tiny, out=mag)
        rel = np.divide(d, mag, out=mag)
    return float(d.max(initial=0.0)), float(rel.max(initial=0.0)), outside, ratio


def _scopes(exe) -> dict:
    """{trace op name: (module, call name)} from the Trace (scopes are filled by the frontend)."""
    traced = exe.stages.get("traced") if getattr(exe, "stages", None) else None
    out = {}
    for op in getattr(getattr(traced, "trace", None), "ops", ()):
        call = getattr(op, "call", None)
        out[op.outputs[0].name] = (getattr(op, "module", "") or "", getattr(call, "name", "") or "")
    return out


def _compared_inputs(program, values: set) -> dict:
    """{value: compared values it reads}, looking through ops that are not compared (constants: none)."""
    ops = program.ops()
    producer = {res: (i, r) for i, op in enumerate(ops) for r, res in enumerate(op.results)}
    memo: dict = {}

    def reads(i: int) -> tuple:
        if i in memo:
            return memo[i]
        memo[i] = ()
        found = []
        for v in ops[i].operands:
            src = producer.get(v)
            if src is None:  # an argument of @main: the same on both sides
                continue
            found += [src] if src in values else list(reads(src[0]))
        memo[i] = tuple(dict.fromkeys(found))
        return memo[i]
    return {v: reads(v[0]) for v in values}


def _resolve_against(exe, against):
    """(label, program, side, args-maker) of the against side."""
    from tripy_lab.executable import Executable

    if isinstance(against, Executable):
        what = "same program" if against._program is exe._program else "other program"
        if against.engine == "reference":  # the oracle: in float64
            return f"reference (float64, {what})", against._program, runs.FLOAT64
        return f"{against.engine} ({what})", against._program, against.engine
    if against in (None, "reference", runs.FLOAT64):
        return "reference (float64)", exe._program, runs.FLOAT64
    if isinstance(against, str):
        from tripy_lab.engine import engine_class

        try:
            engine_class(against)
        except Exception:
            raise_error(f"Invalid value for parameter: 'against': {against!r}.",
                        ["Expected 'reference' (float64), an engine name (xla, onnxruntime, tensorrt) or an "
                         "Executable of the same program."])
        return against, exe._program, against
    raise_error(f"Invalid value for parameter: 'against': {against!r}.",
                ["Expected 'reference' (float64), an engine name or an Executable."])


def _budget(max_bytes) -> int:
    if max_bytes is not None:
        return int(max_bytes)
    try:
        avail = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        avail = 4 * DEFAULT_BUDGET
    return max(1 << 20, min(DEFAULT_BUDGET, avail // 4))


def accuracy(exe, *args, against="reference", rtol: float | None = None, atol: float | None = None,
             max_bytes: int | None = None) -> AccuracyReport:
    """Per-op accuracy of ``exe`` on ``args``: each MLIR op's result as ``exe``'s engine computes it (the values
    marked as extra outputs of the MLIR, built with the same engine) vs ``against``: "reference" (default: the
    same program in the reference interpreter, floats in float64), an engine name, or another Executable (of
    the same program, an edit or a dtype variant: ops are matched by position, or by alignment). ``rtol`` /
    ``atol``: per op, ``|exe - against| > atol + rtol * |against|`` counts as outside (defaults by the op's
    dtype, TOLERANCES). ``max_bytes``: marked values per run (more: several runs)."""
    import time

    from tripy_lab.executable import Executable

    if not isinstance(exe, Executable):
        raise_error("Invalid value for parameter: 'exe' of accuracy().",
                    [f"Expected a tp.Executable (tp.compile's result), but got: {type(exe).__name__}."])
    for name, v in (("rtol", rtol), ("atol", atol)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0):
            raise_error(f"Invalid value for parameter: '{name}': {v!r}.", ["Expected a number >= 0."])
    start = time.perf_counter()
    label, other, side = _resolve_against(exe, against)
    program = exe._program
    exe_args = runs.host_args(program, exe.engine_args(*args))
    other_args = runs.host_args(other, exe_args)
    matched = {v: v for v in mark.markable(program)} if other is program else {
        v: w for v, w in runs.match_values(program, other).items() if v in set(mark.markable(program))}
    values = [v for v in mark.markable(program) if v in matched]
    dynamic = max([max(a.shape, default=1) for a in exe_args], default=1)
    groups = mark.chunks(program, values, _budget(max_bytes), dynamic)
    ops, other_ops = program.ops(), other.ops()
    lines = mlir_lines(exe.stages["lowered"].as_text() if exe.stages.get("lowered") else "", len(ops))
    scopes = _scopes(exe)
    if isinstance(against, Executable):
        scopes = {**_scopes(against), **scopes}
    inputs = _compared_inputs(program, set(values))
    errors: list[OpError] = []
    for group in groups:
        got = runs.values_of(program, exe.engine, exe_args, group)
        want = runs.values_of(other, side, other_args, [matched[v] for v in group])
        for v in group:
            op, res = ops[v[0]], ops[v[0]].results[v[1]]
            dt = dtypes.BY_MLIR[str(res.type.element_type)].name
            r_tol, a_tol = TOLERANCES.get(dt, (0.0, 0.0))
            r_tol, a_tol = (r_tol if rtol is None else rtol), (a_tol if atol is None else atol)
            a, b = got[v], want[matched[v]]
            max_abs, max_rel, outside, ratio = compare(a, b, r_tol, a_tol)
            origin = program.origin_of(op) or (other.origin_of(other_ops[matched[v][0]]) if other is not program
                                                 else None)  # an edited program keeps no locations
            trace_op = origin.trace_op if origin else ""
            module, call = scopes.get(trace_op, ("", ""))
            module = getattr(origin, "module", "") or module  # origins carry scopes (also after from_text)
            call = getattr(getattr(origin, "call", None), "name", "") or call
            errors.append(OpError(v[0], v[1], _short(op), dt, tuple(a.shape), max_abs, max_rel, outside, int(a.size),
                                  r_tol, a_tol, lines[v[0]], trace_op, module, call,
                                  origin.line if origin else "", inputs[v], ratio))
        del got, want
    report = AccuracyReport(exe, label, errors, program, exe_args, {}, time.perf_counter() - start, len(groups))
    report._other, report._side, report._matched, report._other_args = other, side, matched, other_args
    return report
