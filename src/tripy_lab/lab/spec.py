"""The ``%%tpcompile`` line: executable name, per-parameter specs and options.

Compact specs (Python expressions are accepted too)::

    a=f32[1:2:3,4]                          InputInfo(((1, 2, 3), 4), tp.float32)
    x=f16[batch=1:8:32,seq=1:128:512]       NamedDimensions "batch" and "seq"
    y=f16[batch,seq]                        reuses the NamedDimensions defined on x
    s=dim[1:2:4]                            DimensionInputInfo((1, 2, 4))
    a=tp.InputInfo(((1, 2, 3), 4), tp.float32)    any Python expression

Every error is a SpecError (a TripyException) that prints the line with a caret under the bad token.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo, NamedDimension
from tripy_lab.core.errors import TripyException

DTYPE_ALIASES: dict[str, str] = {
    "f32": "float32", "f16": "float16", "bf16": "bfloat16", "f8": "float8", "i4": "int4", "i8": "int8",
    "i32": "int32", "i64": "int64", "b": "bool", "i1": "bool",
    **{d.name: d.name for d in dtypes.ALL},
}
SHORT_NAMES: dict[str, str] = {d.name: d.shortname if d.shortname != "b" else "bool" for d in dtypes.ALL}

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_COMPACT = re.compile(r"([A-Za-z][A-Za-z0-9]*)\[")
_CLOSERS = {"(": ")", "[": "]", "{": "}"}
OPTIONS_HELP = ("Options: NAME (the Executable's name), -O/--optimization-level N, --engine NAME, "
                "--no-widgets, --auto-build-ms MS, --debounce-ms MS.")


class SpecError(TripyException):
    """A bad ``%%tpcompile`` line: the message shows the line with ``^^^`` under ``line[start:end]``."""

    def __init__(self, summary: str, line: str, start: int, end: int, hint: str = ""):
        self.line, self.start, self.end, self.hint = line, start, max(end, start + 1), hint
        details = [line, " " * start + "^" * (self.end - start)]
        if hint:
            details.append(hint)
        super().__init__(summary, details)


    def shifted(self, prefix: str) -> SpecError:
        """The same error on ``prefix + line`` (e.g. with ``%%tpcompile `` in front, as the user typed it)."""
        n = len(prefix)
        return SpecError(self.summary, prefix + self.line, self.start + n, self.end + n, self.hint)


@dataclass(frozen=True)
class DimSpec:
    min: int
    opt: int
    max: int
    name: str | None = None

    @property
    def static(self) -> bool:
        return self.min == self.opt == self.max


@dataclass(frozen=True)
class TensorSpec:
    dtype: str  # tripy dtype name, e.g. "float32"
    dims: tuple[DimSpec, ...]


@dataclass(frozen=True)
class DimValueSpec:
    """A DimensionInputInfo: a runtime scalar whose value lies in [min, max]."""

    min: int
    opt: int
    max: int


@dataclass(frozen=True)
class ExprSpec:
    """A Python expression, evaluated in the user's namespace (an InputInfo, or a constant argument)."""

    text: str


Spec = TensorSpec | DimValueSpec | ExprSpec


@dataclass
class ParamSpec:
    name: str
    spec: Spec
    start: int  # span of the value in the magic line, for carets
    end: int


@dataclass
class MagicLine:
    line: str
    exe_name: str | None = None
    params: dict[str, ParamSpec] = field(default_factory=dict)
    optimization_level: int = 3
    engine: str | None = None
    widgets: bool = True
    auto_build_ms: float | None = None
    debounce_ms: float | None = None


def tokenize(line: str) -> list[tuple[str, int, int]]:
    """Split on blanks outside brackets and quotes; (token, start, end) spans."""
    tokens: list[tuple[str, int, int]] = []
    stack: list[tuple[str, int]] = []
    quote: str | None = None
    start: int | None = None
    for i, ch in enumerate(line):
        if start is None and not ch.isspace():
            start = i
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in _CLOSERS:
            stack.append((ch, i))
        elif ch in ")]}":
            if not stack or _CLOSERS[stack[-1][0]] != ch:
                raise SpecError(f"Unmatched '{ch}' in the %%tpcompile line.", line, i, i + 1)
            stack.pop()
        elif ch.isspace() and not stack and start is not None:
            tokens.append((line[start:i], start, i))
            start = None
    if quote:
        raise SpecError("Unterminated string in the %%tpcompile line.", line, line.rindex(quote), len(line))
    if stack:
        opener, pos = stack[-1]
        raise SpecError(f"Unclosed '{opener}' in the %%tpcompile line.", line, pos, pos + 1,
                        f"Expected a matching '{_CLOSERS[opener]}'.")
    if start is not None:
        tokens.append((line[start:], start, len(line)))
    return _join_equals(tokens, line)


def _join_equals(tokens: list[tuple[str, int, int]], line: str) -> list[tuple[str, int, int]]:
    """Accept ``a = f32[4]`` as well as ``a=f32[4]``: glue tokens around a lone ``=``."""
    out: list[tuple[str, int, int]] = []
    for text, s, e in tokens:
        prev = out[-1][0] if out else ""
        glue = out and not prev.startswith("-") and (prev.endswith("=") or text.startswith("="))
        if glue:
            ps = out.pop()[1]
            out.append(((line[ps:s].rstrip() + text), ps, e))
        else:
            out.append((text, s, e))
    return out


def _int(text: str, line: str, start: int, what: str) -> int:
    stripped = text.strip()
    if not re.fullmatch(r"\d+", stripped):
        col = start + (len(text) - len(text.lstrip()))
        raise SpecError(f"Invalid {what}: {stripped!r}.", line, col, col + max(len(stripped), 1),
                        "Expected a non-negative integer.")
    return int(stripped)


def _bounds(text: str, line: str, start: int) -> tuple[int, int, int]:
    """``N`` or ``min:opt:max``, checked 0 <= min <= opt <= max."""
    parts = text.split(":")
    if len(parts) not in (1, 3):
        raise SpecError(f"Invalid dimension bounds: {text.strip()!r}.", line, start, start + len(text),
                        "Expected N (static) or min:opt:max (dynamic), e.g. 1:2:3.")
    values, offset = [], start
    for part in parts:
        values.append(_int(part, line, offset, "dimension size"))
        offset += len(part) + 1
    if len(values) == 1:
        return values[0], values[0], values[0]
    lo, mid, hi = values
    if not lo <= mid <= hi:
        raise SpecError(f"Invalid dimension bounds: min={lo}, opt={mid}, max={hi}.", line, start,
                        start + len(text), "Expected min <= opt <= max.")
    return lo, mid, hi


def _parse_dims(body: str, line: str, start: int, named: dict, refs: list) -> tuple[DimSpec, ...]:
    if not body.strip():
        return ()
    dims: list[DimSpec] = []
    offset = start
    for part in body.split(","):
        stripped = part.strip()
        col = offset + (len(part) - len(part.lstrip()))
        end = col + len(stripped)
        if not stripped:
            raise SpecError("Empty dimension in a shape spec.", line, col, col + 1, "Remove the extra ','.")
        name, eq, rest = stripped.partition("=")
        if eq:
            if not _IDENT.match(name.strip()):
                raise SpecError(f"Invalid dimension name: {name.strip()!r}.", line, col, col + len(name),
                                "Expected an identifier, e.g. batch=1:8:32.")
            bounds = _bounds(rest, line, col + len(name) + 1)
            prev = named.get(name.strip())
            if prev is not None and prev[0] != bounds:
                raise SpecError(f"NamedDimension '{name.strip()}' is defined twice with different bounds.",
                                line, col, end, f"It was first defined as {':'.join(map(str, prev[0]))}.")
            named.setdefault(name.strip(), (bounds, col, end))
            dims.append(DimSpec(*bounds, name=name.strip()))
        elif _IDENT.match(stripped):
            refs.append((stripped, len(dims), col, end))  # resolved once the whole line is read
            dims.append(DimSpec(0, 0, 0, name=stripped))
        else:
            dims.append(DimSpec(*_bounds(part, line, offset)))
        offset += len(part) + 1
    return tuple(dims)


def parse_value(text: str, line: str, start: int, named: dict, refs: list) -> Spec:
    """One parameter's spec: compact ``dtype[...]`` / ``dim[...]``, else a Python expression."""
    match = _COMPACT.match(text)
    head = match.group(1) if match else ""
    if match and text.endswith("]") and (head in DTYPE_ALIASES or head == "dim"):
        body_start = start + match.end()
        body = text[match.end():-1]
        if head == "dim":
            if "," in body or "=" in body:
                raise SpecError("A dim[...] spec takes one min:opt:max range.", line, body_start,
                                body_start + len(body), "Example: s=dim[1:2:4].")
            return DimValueSpec(*_bounds(body, line, body_start))
        return TensorSpec(DTYPE_ALIASES[head], _parse_dims(body, line, body_start, named, refs))
    if not text:
        raise SpecError("Missing spec after '='.", line, start, start + 1,
                        "Example: a=f32[1:2:3,4] or s=dim[1:2:4].")
    return ExprSpec(text)


def _resolve_refs(params: dict[str, ParamSpec], named: dict, refs: list, line: str) -> None:
    for pname, pspec in list(params.items()):
        spec = pspec.spec
        if not isinstance(spec, TensorSpec):
            continue
        mine = [r for r in refs if r[4] == pname]
        if not mine:
            continue
        dims = list(spec.dims)
        for name, index, col, end, _ in mine:
            if name not in named:
                close = difflib.get_close_matches(name, list(named), n=1)
                hint = f"Did you mean '{close[0]}'?" if close else (
                    f"Define it once with bounds, e.g. {name}=1:8:32, then reuse the name.")
                raise SpecError(f"Unknown NamedDimension '{name}'.", line, col, end, hint)
            dims[index] = DimSpec(*named[name][0], name=name)
        params[pname] = ParamSpec(pname, TensorSpec(spec.dtype, tuple(dims)), pspec.start, pspec.end)


def _option_value(tokens, i, line, opt) -> tuple[str, int]:
    text, s, e = tokens[i]
    if "=" in text:
        return text.split("=", 1)[1], i
    if i + 1 >= len(tokens):
        raise SpecError(f"Option {opt} needs a value.", line, s, e, OPTIONS_HELP)
    return tokens[i + 1][0], i + 1


def parse_line(line: str) -> MagicLine:
    """Parse the ``%%tpcompile`` line; raise SpecError pointing at the bad token."""
    out = MagicLine(line)
    named: dict = {}
    refs: list = []
    tokens = tokenize(line)
    i = 0
    while i < len(tokens):
        text, s, e = tokens[i]
        if text.startswith("-"):
            i = _parse_option(out, tokens, i, line)
        elif "=" in text:
            name, _, value = text.partition("=")
            name = name.strip()
            value = value.strip()
            if not _IDENT.match(name):
                name_end = s + len(text.partition("=")[0])
                raise SpecError(f"Invalid parameter name: {name!r}.", line, s, name_end,
                                "Expected NAME=SPEC, e.g. a=f32[1:2:3,4].")
            if name in out.params:
                raise SpecError(f"Parameter '{name}' is given twice.", line, s, e)
            vstart = line.index(value, s + len(text.partition("=")[0]) + 1) if value else e
            first_ref = len(refs)
            out.params[name] = ParamSpec(name, parse_value(value, line, vstart, named, refs), vstart, e)
            # Bare NamedDimension names are resolved after the whole line is read: tag them with the param.
            refs[first_ref:] = [(*r, name) for r in refs[first_ref:]]
        elif _IDENT.match(text):
            if out.exe_name is not None:
                raise SpecError(f"Unexpected word {text!r}: the Executable is already named "
                                f"'{out.exe_name}'.", line, s, e, "Parameter specs look like NAME=SPEC.")
            out.exe_name = text
        else:
            raise SpecError(f"Cannot read {text!r}.", line, s, e,
                            "Expected NAME (the Executable), NAME=SPEC (a parameter) or an option. "
                            + OPTIONS_HELP)
        i += 1
    _resolve_refs(out.params, named, refs, line)
    return out


def _parse_option(out: MagicLine, tokens, i: int, line: str) -> int:
    text, s, e = tokens[i]
    key = text.split("=", 1)[0]
    if key == "-O" or key == "--optimization-level" or re.fullmatch(r"-O\d+", text):
        if re.fullmatch(r"-O\d+", text):
            value, j = text[2:], i
        else:
            value, j = _option_value(tokens, i, line, key)
        vs, ve = tokens[j][1], tokens[j][2]
        if not re.fullmatch(r"\d", value) or int(value) > 5:
            raise SpecError(f"Invalid optimization level: {value!r}.", line, vs, ve, "Expected 0..5.")
        out.optimization_level = int(value)
        return j
    if key == "--engine":
        value, j = _option_value(tokens, i, line, key)
        out.engine = value
        return j
    if key in ("--auto-build-ms", "--debounce-ms"):
        value, j = _option_value(tokens, i, line, key)
        try:
            number = float(value)
        except ValueError:
            raise SpecError(f"Invalid value for {key}: {value!r}.", line, tokens[j][1], tokens[j][2],
                            "Expected a number of milliseconds.") from None
        setattr(out, key[2:].replace("-", "_"), number)
        return j
    if text == "--no-widgets":
        out.widgets = False
        return i
    raise SpecError(f"Unknown option {text!r}.", line, s, e, OPTIONS_HELP)


def dtype_of(name: str) -> dtypes.dtype:
    return dtypes.BY_NAME[name]


def to_info(spec: TensorSpec | DimValueSpec) -> InputInfo | DimensionInputInfo:
    if isinstance(spec, DimValueSpec):
        return DimensionInputInfo((spec.min, spec.opt, spec.max))
    shape = []
    for d in spec.dims:
        if d.name:
            shape.append(NamedDimension(d.name, d.min, d.opt, d.max))
        else:
            shape.append(d.min if d.static else (d.min, d.opt, d.max))
    return InputInfo(shape, dtype_of(spec.dtype))


def from_info(info: InputInfo | DimensionInputInfo) -> TensorSpec | DimValueSpec:
    if isinstance(info, DimensionInputInfo):
        b = info.value_bounds
        return DimValueSpec(b.min[0], b.opt[0], b.max[0])
    b = info.shape_bounds
    dims = tuple(DimSpec(lo, mid, hi, info.dimension_names.get(i))
                 for i, (lo, mid, hi) in enumerate(zip(b.min, b.opt, b.max)))
    return TensorSpec(info.dtype.name, dims)


def format_spec(spec: TensorSpec | DimValueSpec, defined: set[str] | None = None) -> str:
    """The compact form: ``f32[1:2:3,4]``; a NamedDimension already in ``defined`` prints as its name."""
    def rng(lo, mid, hi):
        return str(lo) if lo == mid == hi else f"{lo}:{mid}:{hi}"

    if isinstance(spec, DimValueSpec):
        return f"dim[{rng(spec.min, spec.opt, spec.max)}]"
    defined = set() if defined is None else defined
    parts = []
    for d in spec.dims:
        if d.name and d.name in defined:
            parts.append(d.name)
        elif d.name:
            defined.add(d.name)
            parts.append(f"{d.name}={rng(d.min, d.opt, d.max)}")
        else:
            parts.append(rng(d.min, d.opt, d.max))
    return f"{SHORT_NAMES[spec.dtype]}[{','.join(parts)}]"


def suggest_dtype(head: str) -> str | None:
    close = difflib.get_close_matches(head, list(DTYPE_ALIASES) + ["dim"], n=1, cutoff=0.5)
    return close[0] if close else None
