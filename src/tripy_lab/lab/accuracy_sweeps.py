"""Precision what-ifs in one call: the same function compiled at other dtype policies (fp16, bf16) or with int8
weight-only Linear layers (pipeline/variants.py), each compared op by op against the fp32 program run by the
reference interpreter in float64."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tripy_lab.core.bounds import InputInfo
from tripy_lab.core.errors import raise_error
from tripy_lab.lab.accuracy_report import AccuracyReport, accuracy


def random_inputs(exe, seed: int = 0) -> list:
    """Random arrays for ``exe``'s inputs at the profile's opt shapes, in argument order."""
    from tripy_lab.lab.timing import make_inputs, shapes_at

    values = make_inputs(exe.input_infos, shapes_at(exe.input_infos, "opt"), seed)
    return [values[n] for n in exe._arg_names]


def _spec(v) -> tuple[str, dict]:
    """(label, variant() keywords) of one entry of ``variants``."""
    if isinstance(v, str):
        if v == "int8":
            return "int8", {"quantize": "int8"}
        return v, {"dtype": v}
    if isinstance(v, dict) and set(v) <= {"dtype", "quantize"}:
        label = "+".join(str(v[k]) for k in ("dtype", "quantize") if v.get(k) is not None) or "float32"
        return label, dict(v)
    raise_error(f"Invalid entry in parameter: 'variants': {v!r}.",
                ["Expected 'float16', 'bfloat16', 'int8' or a dict of variant() keywords {'dtype', 'quantize'}."])


@dataclass
class SweepReport:
    reference: object  # the fp32 Executable (reference engine)
    reports: dict[str, AccuracyReport]

    def table(self):
        """One row per variant: how many ops go outside tolerance, the first divergent op and its line."""
        import pandas as pd

        from tripy_lab.lab.tables import LabFrame

        rows = []
        for name, r in self.reports.items():
            first = r.first_divergent
            outs = [e for e in r.ops if e.index in _output_ops(r.program)]
            rows.append({"variant": name, "engine": r.exe.engine, "ops": len(r.ops),
                         "outside": sum(not e.within for e in r.ops),
                         "output_max_rel": max((e.max_rel for e in outs), default=float("nan")),
                         "first_divergent": f"{first.op} (op {first.index})" if first else "",
                         "user_line": first.user_line if first else "", "module": first.module if first else ""})
        return LabFrame(pd.DataFrame(rows))

    def __getitem__(self, name: str) -> AccuracyReport:
        return self.reports[name]

    def _repr_html_(self) -> str:
        return self.table()._repr_html_()


def _output_ops(program) -> set[int]:
    ops = program.ops()
    producer = {res: i for i, op in enumerate(ops) for res in op.results}
    return {producer[v] for v in program.main().body.block.last_op.operands if v in producer}


def accuracy_sweep(func, args, variants=("float16",), *, inputs=None, engine: str | None = None,
                   rtol: float | None = None, atol: float | None = None, seed: int = 0) -> SweepReport:
    """Compile ``func`` (a function or tp.Module, compile ``args`` as for tp.compile) as each variant
    ("float16", "bfloat16", "int8", or {"dtype": ..., "quantize": ...}) on ``engine`` and compare each, op by
    op, with the fp32 program in the float64 reference interpreter. ``inputs``: the runtime arrays (float32;
    cast for each variant), default random at the profile's opt shapes."""
    from tripy_lab.pipeline import trace
    from tripy_lab.pipeline.variants import variant

    if not isinstance(args, (list, tuple)):
        raise_error("Invalid value for parameter: 'args' of accuracy_sweep().",
                    [f"Expected a list of compile arguments (InputInfos, constants), got: {type(args).__name__}."])
    reference = trace(func, args=list(args)).lower().build(engine="reference", shapes="opt").executable()
    if inputs is None:
        inputs = random_inputs(reference, seed)
    elif not isinstance(inputs, (list, tuple)):
        raise_error("Invalid value for parameter: 'inputs' of accuracy_sweep().",
                    [f"Expected a list of arrays (one per runtime input), got: {type(inputs).__name__}."])
    reports = {}
    for v in variants:
        label, kwargs = _spec(v)
        fn, vargs = variant(func, list(args), **kwargs)
        exe = trace(fn, args=vargs).lower().build(engine=engine, shapes="opt").executable()
        cast = _cast_inputs(exe, inputs)
        reports[label] = accuracy(exe, *cast, against=reference, rtol=rtol, atol=atol)
    return SweepReport(reference, reports)


def _cast_inputs(exe, inputs) -> list:
    """The fp32 runtime arrays in ``exe``'s float input dtypes (a float16 variant takes float16 inputs)."""
    from tripy_lab.core import dtypes

    out = []
    for name, a in zip(exe._arg_names, inputs):
        info = exe.input_infos[name]
        if isinstance(info, InputInfo) and info.dtype in dtypes.FLOATS and np.asarray(a).dtype.kind == "f":
            a = np.asarray(a).astype(dtypes.to_numpy(info.dtype))
        out.append(a)
    return out
