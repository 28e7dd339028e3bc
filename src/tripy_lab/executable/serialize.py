"""Executable.save / Executable.load: the MLIR program (generic form with its constant blobs) plus metadata.

A loaded Executable is rebuilt by an engine; what is stored is the program, not an engine binary, so a file
saved on one machine loads on any machine that has an engine for it.
"""

from __future__ import annotations

import json
import os
import tempfile

from tripy_lab.core.bounds import info_from_json
from tripy_lab.core.errors import raise_error
from tripy_lab.core.source import SourceLocation
from tripy_lab.engine import BuildOptions, choose, engine_class
from tripy_lab.mlir.program import MlirProgram, OpOrigin

FORMAT = "tripy-lab-executable/1"


def _origin_json(o: OpOrigin) -> dict:
    loc = o.location
    where = None if loc is None else [loc.file, loc.line, loc.function, loc.col, loc.end_col]
    return {"trace_op": o.trace_op, "text": o.text, "location": where}


def _origin_from_json(d: dict) -> OpOrigin:
    loc = SourceLocation(*d["location"]) if d["location"] else None
    return OpOrigin(d["trace_op"], d["text"], loc)


def save(exe, path: str) -> None:
    from tripy_lab.mlir import text

    program: MlirProgram = exe._program
    data = {
        "format": FORMAT,
        "arg_names": program.arg_names,
        "output_names": program.output_names,
        "return_single": exe._return_single,
        "input_infos": {name: info.to_json() for name, info in program.input_infos.items()},
        "engine": exe.engine,
        "optimization_level": exe.optimization_level,
        "origins": [_origin_json(o) for o in program.origins.values()],
        "mlir": text.print_module(program.module, generic=True, locations=True, resources=program.resources),
    }
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)  # a crash mid-write never leaves half a file behind


def load(path: str, engine: str | None = None):
    from tripy_lab.executable.executable import Executable
    from tripy_lab.mlir import text

    try:
        with open(path) as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise_error(f"Could not load an Executable from: '{path}'.", [str(exc)])
    if data.get("format") != FORMAT:
        raise_error(f"Not a tripy-lab Executable file: '{path}'.", [f"Expected format {FORMAT!r}."])
    resources: dict[str, bytes] = {}
    module = text.parse_module(data["mlir"], resources=resources)
    origins = [_origin_from_json(o) for o in data["origins"]]
    program = MlirProgram(module=module, arg_names=data["arg_names"],
                          input_infos={k: info_from_json(v) for k, v in data["input_infos"].items()},
                          output_names=data["output_names"], origins={o.trace_op: o for o in origins},
                          resources=resources)
    name, reason = choose(engine or data["engine"])
    cls = engine_class(name)
    ok, why = cls.available()
    if not ok:
        name, reason = choose(None)
        cls = engine_class(name)
    options = BuildOptions(optimization_level=data["optimization_level"])
    compiled = cls().build(program, options)
    compiled.report.reason = f"loaded from {path}; {reason}"
    return Executable(compiled, program, data["return_single"], optimization_level=data["optimization_level"])
