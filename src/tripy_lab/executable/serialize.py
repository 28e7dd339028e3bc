"""Executable.save / Executable.load: the MLIR program (generic form with its constant blobs) plus metadata.

A loaded Executable is rebuilt by an engine; what is stored is the program, not an engine binary, so a file
saved on one machine loads on any machine that has an engine for it.

Integrity rules (issue 8):
* **One source of truth for bounds**: the MLIR. Every argument's InputInfo / DimensionInputInfo (dtype,
  min/opt/max, dimension names) is read back from ``@main``'s argument attributes
  (``tensorrt.shape_profile``, ``tensorrt.dimension_names``, ``tensorrt.value_bounds``); the JSON holds only
  the argument names, never bounds that could disagree with the profile.
* **Content digest**: ``digest`` is the SHA-256 of the canonical JSON of every other field. ``load`` checks it
  before parsing anything, so an edited, truncated or swapped file is refused (issue 10: a saved Executable is
  bound to its program).
* **Nothing raw escapes**: every malformed file (bad JSON, missing or mistyped fields, MLIR that does not
  parse or verify, nesting too deep) is a TripyException naming the file and what is wrong.

    save(exe, path)
    read(path) -> (MlirProgram, metadata dict)    # parse and check only, no engine build
    read_bytes(raw, path) -> the same, for a file's bytes
    load(path, engine=None) -> (compiled engine, MlirProgram, metadata dict)    # Executable.load wraps them
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Any

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo, NamedDimension
from tripy_lab.core.errors import TripyException
from tripy_lab.core.source import SourceLocation
from tripy_lab.engine import BuildOptions, choose, engine_class
from tripy_lab.engine.base import build_errors
from tripy_lab.mlir.program import MlirProgram, OpOrigin

FORMAT = "tripy-lab-executable/2"
_OLD_FORMATS = ("tripy-lab-executable/1",)


class _Malformed(Exception):
    """A reason a file is not a loadable Executable; ``read`` turns it into a TripyException."""


def _origin_json(o: OpOrigin) -> dict:
    loc = o.location
    where = None if loc is None else [loc.file, loc.line, loc.function, loc.col, loc.end_col]
    out = {"trace_op": o.trace_op, "text": o.text, "location": where}
    if o.module:  # the op's module path (issue 25); older files have none
        out["module"] = o.module
    return out


def digest_of(data: dict) -> str:
    """SHA-256 of the canonical JSON of every field but ``digest``."""
    body = {k: v for k, v in data.items() if k != "digest"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    return hashlib.sha256(canonical.encode("ascii")).hexdigest()


def save(exe, path: str) -> None:
    from tripy_lab.mlir import text

    program: MlirProgram = exe._program
    data = {
        "format": FORMAT,
        "producer": f"tripy-lab {_version()}",
        "arg_names": list(program.arg_names),
        "output_names": list(program.output_names),
        "return_single": bool(exe._return_single),
        "engine": exe.engine,
        "optimization_level": int(exe.optimization_level),
        "origins": [_origin_json(o) for o in program.origins.values()],
        "mlir": text.print_module(program.module, generic=True, locations=True, resources=program.resources),
    }
    data["digest"] = digest_of(data)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)  # a crash mid-write never leaves half a file behind


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tripy-lab")
    except PackageNotFoundError:
        return "unknown"


# ------------------------------------------------------------------------------------------------ checks


def _need(data: dict, key: str, kind, what: str):
    if key not in data:
        raise _Malformed(f"the field {key!r} is missing (expected {what})")
    value = data[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Malformed(f"the field {key!r} is {type(value).__name__} {_short(value)}, expected {what}")
    return value


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _names(data: dict, key: str) -> list[str]:
    names = _need(data, key, list, "a list of strings")
    if not all(isinstance(n, str) and n for n in names):
        raise _Malformed(f"the field {key!r} must hold non-empty strings, got {_short(names)}")
    if len(set(names)) != len(names):
        raise _Malformed(f"the field {key!r} names something twice: {_short(names)}")
    return names


def _origin(entry) -> OpOrigin:
    if not isinstance(entry, dict):
        raise _Malformed(f"an entry of 'origins' is {type(entry).__name__}, expected an object")
    trace_op, text_ = _need(entry, "trace_op", str, "a string"), _need(entry, "text", str, "a string")
    module = _need(entry, "module", str, "a string (a module path)") if "module" in entry else ""
    loc = entry.get("location")
    if loc is None:
        return OpOrigin(trace_op, text_, None, module)
    kinds = (str, int, str, (int, type(None)), (int, type(None)))
    if not isinstance(loc, list) or len(loc) != 5 or not all(
            isinstance(v, k) and not isinstance(v, bool) for v, k in zip(loc, kinds)):
        raise _Malformed(f"origin {trace_op!r}: location must be [file, line, function, col, end_col], "
                         f"got {_short(loc)}")
    return OpOrigin(trace_op, text_, SourceLocation(*loc), module)


def _profile(attrs: dict, key: str, name: str) -> tuple[list[int], list[int], list[int]]:
    from tripy_lab.mlir.attrs import ShapeProfileAttr

    attr = attrs.get(key)
    if not isinstance(attr, ShapeProfileAttr):
        raise _Malformed(f"argument {name!r} of @main has no {key} attribute (its bounds)")
    lo, mid, hi = (list(v) for v in attr.values)
    if any(v < 0 for v in lo) or not all(a <= b <= c for a, b, c in zip(lo, mid, hi)):
        raise _Malformed(f"argument {name!r}: {key} must satisfy 0 <= min <= opt <= max, got "
                         f"min={lo}, opt={mid}, max={hi}")
    return lo, mid, hi


def dimension_names(attrs: dict, rank: int, name: str) -> dict[int, str]:
    """dim index -> name, from an argument's ``tensorrt.dimension_names`` attribute (absent: none)."""
    from xdsl.dialects.builtin import DictionaryAttr, StringAttr

    out = {}
    for k, v in getattr(attrs.get("tensorrt.dimension_names", DictionaryAttr({})), "data", {}).items():
        if not (k.isdigit() and int(k) < rank and isinstance(v, StringAttr) and v.data):
            raise _Malformed(f"argument {name!r}: bad tensorrt.dimension_names entry {k!r} = {v}")
        out[int(k)] = v.data
    return out


def input_infos_from_mlir(main, arg_names: list[str]) -> dict[str, InputInfo | DimensionInputInfo]:
    """Each argument's InputInfo / DimensionInputInfo, from ``@main``'s argument types and attributes alone."""
    from xdsl.dialects.builtin import DictionaryAttr, TensorType

    from tripy_lab.mlir.attrs import elem_of, shape_of

    block_args = list(main.body.block.args)
    if len(block_args) != len(arg_names):
        raise _Malformed(f"'arg_names' has {len(arg_names)} names but @main takes {len(block_args)} arguments")
    arg_attrs = list(main.arg_attrs.data) if main.arg_attrs is not None else [DictionaryAttr({})] * len(block_args)
    infos: dict[str, InputInfo | DimensionInputInfo] = {}
    for name, arg, attrs in zip(arg_names, block_args, arg_attrs):
        attrs = attrs.data
        if not isinstance(arg.type, TensorType):
            raise _Malformed(f"argument {name!r} of @main is {arg.type}, expected a tensor")
        elem, shape = elem_of(arg.type), shape_of(arg.type)
        if "tensorrt.value_bounds" in attrs:
            lo, mid, hi = _profile(attrs, "tensorrt.value_bounds", name)
            if elem != "i32" or shape != () or len(lo) != 1:
                raise _Malformed(f"argument {name!r} has value bounds (a DimensionSize), so it must be a scalar "
                                 f"tensor<i32> with one bound each, got {arg.type} with min={lo}")
            infos[name] = DimensionInputInfo((lo[0], mid[0], hi[0]))
            continue
        lo, mid, hi = _profile(attrs, "tensorrt.shape_profile", name)
        if len(lo) != len(shape):
            raise _Malformed(f"argument {name!r}: its shape profile has rank {len(lo)} but its type {arg.type} "
                             f"has rank {len(shape)}")
        for i, d in enumerate(shape):
            if d is not None and not lo[i] == hi[i] == d:
                raise _Malformed(f"argument {name!r}: dim {i} is {d} in its type {arg.type} but "
                                 f"[{lo[i]}, {hi[i]}] in its shape profile")
        dim_names = dimension_names(attrs, len(shape), name)
        dt = dtypes.BY_MLIR.get(elem)
        if dt is None:
            raise _Malformed(f"argument {name!r} has element type {elem}, which is not a tripy dtype")
        spec = [NamedDimension(dim_names[i], a, b, c) if i in dim_names else (a, b, c)
                for i, (a, b, c) in enumerate(zip(lo, mid, hi))]
        infos[name] = InputInfo(spec, dt)
    return infos


def _parse(data: dict) -> tuple[MlirProgram, dict]:
    from tripy_lab.mlir import text

    fmt = data.get("format")
    if fmt in _OLD_FORMATS:
        raise _Malformed(f"it was saved in the older format {fmt!r}, which carries no content digest and stores "
                         f"bounds twice; compile the function again and save it")
    if fmt != FORMAT:
        raise _Malformed(f"its format is {_short(fmt)}, expected {FORMAT!r} (not a tripy-lab Executable file?)")
    digest = _need(data, "digest", str, "the file's SHA-256 content digest")
    try:
        expected_digest = digest_of(data)
    except ValueError as exc:  # NaN / Infinity numbers are not JSON that save() writes
        raise _Malformed(f"it holds values save() never writes ({exc})") from None
    if digest != expected_digest:
        raise _Malformed("its content digest does not match: the file was edited, truncated or corrupted after "
                         "it was saved (or belongs to another program)")
    arg_names, output_names = _names(data, "arg_names"), _names(data, "output_names")
    single = _need(data, "return_single", bool, "true or false")
    engine = _need(data, "engine", str, "an engine name")
    level = _need(data, "optimization_level", int, "an int in [0, 5]")
    if not 0 <= level <= 5:
        raise _Malformed(f"the field 'optimization_level' is {level}, expected an int in [0, 5]")
    origins = [_origin(o) for o in _need(data, "origins", list, "a list of op origins")]
    mlir = _need(data, "mlir", str, "the program's MLIR text")
    resources: dict[str, bytes] = {}
    module = text.parse_module(mlir, resources=resources)
    program = MlirProgram(module=module, arg_names=arg_names, input_infos={}, output_names=output_names,
                          origins={o.trace_op: o for o in origins}, resources=resources)
    try:
        main = program.main()
    except KeyError:
        raise _Malformed("its MLIR has no func.func @main") from None
    program.input_infos = input_infos_from_mlir(main, arg_names)
    ret = main.body.block.last_op
    n_out = len(ret.operands) if ret is not None and ret.name == "func.return" else -1
    if n_out != len(output_names):
        raise _Malformed(f"'output_names' has {len(output_names)} names but @main returns {max(n_out, 0)} values")
    if single and n_out != 1:
        raise _Malformed(f"'return_single' is true but @main returns {n_out} values")
    for res in ret.operands:
        if dtypes.BY_MLIR.get(str(getattr(res.type, "element_type", None))) is None:
            raise _Malformed(f"@main returns a {res.type}, which is not a tensor of a tripy dtype")
    for op in program.ops():  # constants must be readable (a dense_resource handle needs its blob)
        if op.name == "tensorrt.constant":
            program.constant_value(op)
    return program, {"engine": engine, "optimization_level": level, "return_single": single}


def read(path: str) -> tuple[MlirProgram, dict[str, Any]]:
    """The program and metadata of a saved Executable, checked; a TripyException for any malformed file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise TripyException(f"Could not load an Executable from: '{path}'.", [str(exc)]) from None
    return read_bytes(raw, path)


def read_bytes(raw: bytes, path: str = "<bytes>") -> tuple[MlirProgram, dict[str, Any]]:
    """``read`` of a file's bytes (``path`` only names it in messages)."""
    try:
        data = json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise _Malformed(f"its top level is a JSON {type(data).__name__}, expected an object")
        return _parse(data)
    except TripyException:
        raise
    except _Malformed as exc:
        reason = str(exc)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        reason = f"it is not valid JSON text ({type(exc).__name__}: {exc})"
    except RecursionError:
        reason = "it is nested too deeply to read"
    except Exception as exc:  # the MLIR parser and verifier (xDSL ParseError / VerifyException and the like)
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        reason = f"its MLIR does not parse or verify ({type(exc).__name__}: {first})"
    raise TripyException(f"Could not load an Executable from: '{path}': {reason}.",
                         ["Executable files are written by Executable.save(); an edited file is refused."]) from None


def load(path: str, engine: str | None = None):
    """(compiled engine, program, metadata) of a saved Executable, rebuilt by ``engine`` (default: the one it
    was saved with, else this machine's default); ``Executable.load`` wraps them."""
    program, meta = read(path)
    name, reason = choose(engine or meta["engine"])
    cls = engine_class(name)
    ok, _ = cls.available()
    if not ok:
        name, reason = choose(None)
        cls = engine_class(name)
    options = BuildOptions(optimization_level=meta["optimization_level"])
    with build_errors(name, program):
        compiled = cls().build(program, options)
    compiled.report.reason = f"loaded from {path}; {reason}"
    return compiled, program, meta
