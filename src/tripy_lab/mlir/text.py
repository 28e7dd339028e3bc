"""Text form of tensorrt-dialect modules, printed the way MLIR(-TensorRT) prints them.

    make_context() -> xdsl.context.Context        # builtin, func, arith, tensorrt, plan
    print_module(module, *, generic=False, elide_above=None, locations=False,
                 resources=None) -> str
    parse_module(text, *, resources=None, verify=True) -> ModuleOp
    format_float(value, elem="f32") -> str         # MLIR's float spelling (9.99999974E-6)

Pretty form: ``module @"name" {``, ``func.func @main(...)``, ``return``, attribute dictionaries
sorted and without default values, SSA names as MLIR assigns them (``%arg0``, ``%0``,
``%cst_f32``, ``%cst_f32_0``, ``%values, %indices``, ``%0:2`` / ``%0#1`` for unnamed multi-result
ops), ``#tensorrt.shape_profile`` attributes hoisted as ``#profile``, ``#profile1``... and affine
maps as ``#map``, ``#map1``... (aliases are numbered in order of appearance and listed sorted by
name, as MLIR does). Dense elements with more than 100 elements print as hex
(``dense<"0x...">``); ``elide_above=N`` prints non-splat ones with more than N elements as
``dense_resource<__elided__>`` (display only: such text parses, but the data is gone).
``locations=True`` appends ``loc(...)`` to every op. ``generic=True`` prints the generic form
(properties as ``<{...}>``) that upstream MLIR parses (see ``upstream.check_with_upstream``).

Resources: a ``dense_resource<handle> : tensor<...>`` attribute refers to bytes kept outside the
IR. ``resources`` maps ``handle -> raw little-endian element bytes``. ``print_module(...,
resources=r)`` appends MLIR's trailer for every referenced handle found in ``r``::

    {-#
      dialect_resources: {
        builtin: {
          handle: "0x04000000<hex bytes>"
        }
      }
    #-}

(a blob is its 4-byte little-endian alignment, written as the element size, then the bytes).
``parse_module(text, resources=r)`` fills ``r`` from such a trailer, so
``print_module(parse_module(t, resources=r), resources=r) == t`` for printed text ``t``.
"""

from __future__ import annotations

import functools
import io
import math
import re
import struct
from collections.abc import Mapping, MutableMapping
from fractions import Fraction

import ml_dtypes
import numpy as np
from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    Builtin,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    DictionaryAttr,
    FusedLoc,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NameLoc,
    NoneAttr,
    UnknownLoc,
    UnregisteredOp,
)
from xdsl.dialects.func import Func
from xdsl.ir import Attribute, Dialect, Operation, SSAValue
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.lexer import Input
from xdsl.utils.mlir_lexer import MLIRLexer

from .attrs import NUMPY_DTYPES, ShapeProfileAttr, dense_elements, element_name, elements_to_numpy
from .dialect import Plan, TensorRT

__all__ = ["make_context", "print_module", "parse_module", "format_float"]

# ---------------------------------------------------------------------------------------------
# floats, exactly as llvm::APFloat::toString + mlir::printFloatValue spell them

# element type -> (significand bits incl. the integer bit, minimum normal exponent, largest finite)
_FLOAT_SEMANTICS = {
    "f64": (53, -1022, float(np.finfo(np.float64).max)),
    "f32": (24, -126, float(np.finfo(np.float32).max)),
    "f16": (11, -14, 65504.0),
    "bf16": (8, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)),
    "f8E4M3FN": (4, -6, 448.0),
    "f4E2M1FN": (2, 0, 6.0),
}


def _to_decimal(mant: int, exp2: int, precision: int, max_padding: int, truncate_zero: bool) -> str:
    """Decimal spelling of ``mant * 2**exp2`` (> 0), following APFloat::toString."""
    tz = (mant & -mant).bit_length() - 1
    mant, exp2 = mant >> tz, exp2 + tz
    exp = 0
    if exp2 >= 0:
        sig = mant << exp2
    else:  # N * 2^-e == N * 5^e * 10^-e
        sig, exp = mant * 5 ** (-exp2), exp2
    # drop decimal digits the requested precision cannot show (truncating, like APFloat)
    bits, needed = sig.bit_length(), (precision * 196 + 58) // 59
    if bits > needed and (tens := (bits - needed) * 59 // 196):
        sig //= 10**tens
        exp += tens
    digits = str(sig)
    stripped = digits.rstrip("0")
    exp += len(digits) - len(stripped)
    digits = stripped
    if len(digits) > precision:  # round half up to `precision` digits
        n = len(digits)
        if digits[precision] < "5":
            digits = digits[:precision].rstrip("0")
        else:
            kept = digits[:precision].rstrip("9")
            digits = "1" if not kept else kept[:-1] + str(int(kept[-1]) + 1)
        exp += n - len(digits)
    nd = len(digits)
    if not max_padding:
        scientific = True
    elif exp >= 0:
        scientific = exp > max_padding or nd + exp > precision
    else:
        msd = exp + nd - 1
        scientific = msd < 0 and -msd > max_padding
    if scientific:
        e10 = exp + nd - 1
        s = digits[0] + "." + ("0" if nd == 1 and truncate_zero else digits[1:])
        if not truncate_zero and precision > nd - 1:
            s += "0" * (precision - nd + 1)
        e = str(abs(e10))
        if not truncate_zero and len(e) < 2:
            e = "0" + e
        return s + ("E" if truncate_zero else "e") + ("+" if e10 >= 0 else "-") + e
    if exp >= 0:
        return digits + "0" * exp
    whole = exp + nd
    if whole > 0:
        return digits[:whole] + "." + digits[whole:]
    return "0." + "0" * (-whole) + digits


def _round_to(q: Fraction, elem: str) -> Fraction | None:
    """``q`` (> 0) rounded to nearest-even in ``elem``; None on overflow."""
    p, emin, largest = _FLOAT_SEMANTICS[elem]
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    ulp = Fraction(2) ** (max(e, emin) - p + 1)
    n, rem = divmod(q, ulp)
    if rem * 2 > ulp or (rem * 2 == ulp and n % 2):
        n += 1
    r = n * ulp
    return None if r > largest else r


def _hex_bits(value: float, elem: str) -> str:
    bits = int(np.array([value], dtype=NUMPY_DTYPES[elem]).view(f"u{NUMPY_DTYPES[elem].itemsize}")[0])
    return f"0x{bits:X}"


def format_float(value: float, elem: str | Attribute = "f32") -> str:
    """``value`` (already representable in ``elem``) as MLIR prints it: ``1.000000e+00``,
    ``9.99999974E-6``, ``0x7FC00000``..."""
    value = float(value)
    # the sign bit is part of the key: -0.0 == 0.0 would share a cache entry
    return _format_float(value, math.copysign(1.0, value), elem if isinstance(elem, str) else element_name(elem))


@functools.lru_cache(maxsize=1 << 16)
def _format_float(value: float, sign: float, elem: str) -> str:
    p = _FLOAT_SEMANTICS[elem][0]
    if value != value or value in (float("inf"), float("-inf")):
        return _hex_bits(value, elem)
    sign = "-" if np.signbit(value) else ""
    if value == 0:
        return sign + "0.000000e+00"
    mant, den = abs(value).as_integer_ratio()
    exp2 = -(den.bit_length() - 1)
    s = _to_decimal(mant, exp2, 6, 0, False)
    if _round_to(Fraction(s), elem) == Fraction(abs(value)):
        return sign + s
    s = _to_decimal(mant, exp2, 2 + p * 59 // 196, 3, True)
    return sign + s if "." in s else _hex_bits(value, elem)


# ---------------------------------------------------------------------------------------------
# context


class _ResourceHandles(OpAsmDialectInterface):
    """Keeps ``dense_resource`` handles as written (xDSL's default renames repeats)."""

    def declare_resource(self, key: str) -> str:
        return key

    def parse_resource(self, key: str, val: str) -> None:  # the trailer is parsed by parse_module
        pass


_BUILTIN = Dialect("builtin", list(Builtin.operations), list(Builtin.attributes), [_ResourceHandles()])


def make_context() -> Context:
    """A context with builtin, func, arith (plugin shape regions), tensorrt and plan."""
    ctx = Context(allow_unregistered=True)
    for d in (_BUILTIN, Func, Arith, TensorRT, Plan):
        ctx.load_dialect(d)
    return ctx


# ---------------------------------------------------------------------------------------------
# SSA names, MLIR style

_SHORT_OP_NAMES = {"builtin.module": "module", "func.return": "return"}


def _asm_names(op: Operation) -> list[str] | None:
    if op.name == "tensorrt.constant":
        return ["cst_" + element_name(op.results[0].type.element_type)]
    if op.name == "tensorrt.top_k":
        return ["values", "indices"]
    if op.name == "arith.constant":
        v = op.properties.get("value", op.attributes.get("value"))
        if isinstance(v, IntegerAttr):
            if v.type == IntegerType(1):
                return ["true" if v.value.data else "false"]
            suffix = "" if isinstance(v.type, IndexType) else f"_{v.type}"
            return [f"c{v.value.data}{suffix}"]
        return ["cst"]
    return None


class _Namer:
    """Assigns ``%arg0``, ``%0``, ``%cst_f32_0``... the way mlir::AsmState does."""

    def __init__(self) -> None:
        self.names: dict[SSAValue, str] = {}
        self.groups: dict[Operation, str] = {}

    @staticmethod
    def _unique(name: str, counters: list[int], used: set[str]) -> str:
        name = re.sub(r"[^A-Za-z0-9_$.-]", "_", name)
        if name in used:
            while True:
                probe = f"{name}_{counters[2]}"
                counters[2] += 1
                if probe not in used:
                    name = probe
                    break
        used.add(name)
        return name

    def region(self, region, counters: list[int], used: set[str]) -> None:
        """Number ``region`` (counters: next value id, next argument id, next conflict id), then
        its nested regions, each starting from the counters reached here (like mlir::SSANameState)."""
        nested = []
        for block in region.blocks:
            for arg in block.args:
                if block is region.blocks.first:
                    self.names[arg] = f"arg{counters[1]}"
                    counters[1] += 1
                else:
                    self.names[arg] = str(counters[0])
                    counters[0] += 1
            for op in block.ops:
                self._op(op, counters, used)
                nested.extend((op, r) for r in op.regions)
        for _, r in nested:
            self.region(r, list(counters), set(used))

    def _op(self, op: Operation, counters: list[int], used: set[str]) -> None:
        if not op.results:
            return
        asm = _asm_names(op)
        if asm and len(asm) == len(op.results):
            for r, n in zip(op.results, asm):
                self.names[r] = self._unique(n, counters, used)
            self.groups[op] = ", ".join("%" + self.names[r] for r in op.results)
            return
        n = counters[0]
        counters[0] += 1
        if len(op.results) == 1:
            self.names[op.results[0]] = str(n)
            self.groups[op] = f"%{n}"
        else:
            for i, r in enumerate(op.results):
                self.names[r] = f"{n}#{i}"
            self.groups[op] = f"%{n}:{len(op.results)}"


# ---------------------------------------------------------------------------------------------
# printer

_ALIAS_PREFIX = {ShapeProfileAttr: "profile", AffineMapAttr: "map"}


class _MlirPrinter(Printer):
    def __init__(
        self,
        stream,
        *,
        generic: bool,
        locations: bool,
        elide_above: int | None,
        names: _Namer,
        aliases: dict[Attribute, str] | None,
    ) -> None:
        super().__init__(stream=stream, print_generic_format=generic, print_debuginfo=locations)
        self._names = names
        self._aliases = aliases
        self._elide_above = elide_above

    # names
    def print_ssa_value(self, value: SSAValue) -> str:
        name = self._names.names.get(value)
        if name is None:
            return super().print_ssa_value(value)
        self.print_string("%" + name)
        return name

    def _print_results(self, op: Operation) -> None:
        group = self._names.groups.get(op)
        if group is None:
            return super()._print_results(op)
        self.print_string(group + " = ")

    def print_op(self, op: Operation) -> None:
        if self.print_generic_format or isinstance(op, UnregisteredOp) or type(op).print is Operation.print:
            return super().print_op(op)
        self._print_results(op)
        self.print_string(_SHORT_OP_NAMES.get(op.name, op.name))
        op.print(self)
        if self.print_debuginfo:
            self.print_string(" ")
            self.print_attribute(op.location)

    # dictionaries are sorted, like MLIR's DictionaryAttr
    def print_attr_dict(self, attr_dict: Mapping[str, Attribute]) -> None:
        super().print_attr_dict(dict(sorted(attr_dict.items())))

    def _print_op_properties(self, properties: dict[str, Attribute]) -> None:
        super()._print_op_properties(dict(sorted(properties.items())))

    # attributes
    def print_float(self, value: float, type) -> None:
        self.print_string(format_float(value, type))

    def print_attribute(self, attribute: Attribute) -> None:
        if type(attribute) in _ALIAS_PREFIX and attribute in self._aliases:
            self.print_string("#" + self._aliases[attribute])
            return
        if isinstance(attribute, DenseIntOrFPElementsAttr):
            self._print_dense(attribute)
            return
        if isinstance(attribute, NameLoc) and isinstance(attribute.location, UnknownLoc):
            with self.in_location():
                self.print_attribute(attribute.desc)
            return
        super().print_attribute(attribute)

    def _print_dense(self, attr: DenseIntOrFPElementsAttr) -> None:
        data = attr.data.data
        elem = attr.type.element_type
        size = elem.compile_time_size
        n = len(data) // size
        first = data[:size]
        splat = n > 0 and data == first * n
        if self._elide_above is not None and not splat and n > self._elide_above:
            self.print_string("dense_resource<__elided__> : ")
            self.print_attribute(attr.type)
            return
        if n == 0:
            self.print_string("dense<>")
        elif splat or n <= 100 or elem == IntegerType(1):
            self.print_string("dense<")
            if isinstance(elem, AnyFloat):  # from the stored bits: nan payloads survive (no Python float detour)
                self.print_string(_float_elements_text(attr, splat))
            elif splat:
                attr._print_one_elem(elem.unpack(first, 1)[0], self)  # noqa: SLF001
            else:
                attr._print_dense_list(attr.get_values(), attr.get_shape(), self)  # noqa: SLF001
            self.print_string(">")
        else:
            self.print_string(f'dense<"0x{data.hex().upper()}">')
        self.print_string(" : ")
        self.print_attribute(attr.type)


def _float_elements_text(attr: DenseIntOrFPElementsAttr, splat: bool) -> str:
    """``1.000000e+00`` / ``[[...], [...]]`` of a float elements attribute; non-finite values (and finite ones
    with no exact decimal spelling) as their bit pattern ``0xFF800000``, which ``parse_module`` reads as bits."""
    name = element_name(attr.type.element_type)
    values = elements_to_numpy(attr).reshape(-1)
    if splat:
        values = values[:1]
    bits = values.view(f"u{values.dtype.itemsize}")
    texts = [format_float(float(v), name) if np.isfinite(v) else f"0x{int(b):X}" for v, b in zip(values, bits)]
    if splat:
        return texts[0]

    def nest(items: list[str], shape: list[int]) -> str:
        if len(shape) <= 1:
            return "[" + ", ".join(items) + "]"
        k = len(items) // shape[0] if shape[0] else 0
        return "[" + ", ".join(nest(items[i:i + k], shape[1:]) for i in range(0, len(items), k or 1)) + "]"

    return nest(texts, list(attr.get_shape()))


def _collect_aliases(module: Operation) -> dict[Attribute, str]:
    """Alias names of the aliasable attributes, numbered per prefix in order of appearance
    (``#map``, ``#map1``...; dictionaries are visited sorted, as they print)."""
    seen: dict[Attribute, None] = {}

    def visit(a: Attribute) -> None:
        if type(a) in _ALIAS_PREFIX:
            seen.setdefault(a, None)
        elif isinstance(a, ArrayAttr):
            for x in a.data:
                visit(x)
        elif isinstance(a, DictionaryAttr):
            for k in sorted(a.data):
                visit(a.data[k])

    for op in module.walk():
        attrs = {**op.properties, **op.attributes}
        for k in sorted(attrs):
            visit(attrs[k])
    counts: dict[str, int] = {}
    out = {}
    for attr in seen:
        prefix = _ALIAS_PREFIX[type(attr)]
        i = counts.get(prefix, 0)
        counts[prefix] = i + 1
        out[attr] = prefix + (str(i) if i else "")
    return out


def _print(module: Operation, names: _Namer, aliases, **kw) -> tuple[str, _MlirPrinter]:
    stream = io.StringIO()
    printer = _MlirPrinter(stream, names=names, aliases=aliases, **kw)
    printer.print_op(module)
    return stream.getvalue(), printer


def print_module(
    module: Operation,
    *,
    generic: bool = False,
    elide_above: int | None = None,
    locations: bool = False,
    resources: Mapping[str, bytes] | None = None,
) -> str:
    """MLIR text of ``module`` (see the module docstring for the options)."""
    kw = {"generic": generic, "locations": locations, "elide_above": elide_above}

    names = _Namer()
    if isinstance(module, ModuleOp):
        names.region(module.body, [0, 0, 0], set())
    aliases = _collect_aliases(module)
    body, printer = _print(module, names, aliases, **kw)
    header = []
    for attr, name in sorted(aliases.items(), key=lambda kv: (_ALIAS_PREFIX[type(kv[0])], _alias_key(kv[1]))):
        header.append(f"#{name} = {_attr_text(attr)}\n")
    text = "".join(header) + body + "\n"
    used = printer._dialect_resources.get("builtin", set())  # noqa: SLF001
    blobs = {h: resources[h] for h in sorted(used) if resources is not None and h in resources}
    if blobs:
        types = _resource_types(module)
        entries = ",\n".join(f'      {h}: "0x{_blob_hex(b, types.get(h))}"' for h, b in blobs.items())
        text += f"\n{{-#\n  dialect_resources: {{\n    builtin: {{\n{entries}\n    }}\n  }}\n#-}}\n"
    return text


def _alias_key(name: str) -> int:
    digits = name.lstrip("abcdefghijklmnopqrstuvwxyz_")
    return int(digits) if digits else 0


def _attr_text(attr: Attribute) -> str:
    stream = io.StringIO()
    printer = _MlirPrinter(stream, generic=False, locations=False, elide_above=None, names=_Namer(), aliases={})
    printer.print_attribute(attr)
    return stream.getvalue()


def _resource_types(module: Operation) -> dict[str, Attribute]:
    found: dict[str, Attribute] = {}
    for op in module.walk():
        for a in (*op.properties.values(), *op.attributes.values()):
            if isinstance(a, DenseResourceAttr):
                found[a.resource_handle.data] = a.type
    return found


def _blob_hex(data: bytes, type_: Attribute | None) -> str:
    align = 1
    if type_ is not None:
        try:
            align = NUMPY_DTYPES[element_name(type_.element_type)].itemsize
        except (ValueError, AttributeError):
            align = 1
    return (align.to_bytes(4, "little") + bytes(data)).hex().upper()


# ---------------------------------------------------------------------------------------------
# parser

_TRAILER = re.compile(r"\{-#(.*?)#-\}\s*\Z", re.S)
_ENTRY = re.compile(r'([A-Za-z_][\w$.-]*|"[^"]*")\s*:\s*"0x([0-9A-Fa-f]*)"')


def _parse_trailer(body: str) -> dict[str, bytes]:
    m = re.search(r"dialect_resources\s*:\s*\{\s*builtin\s*:\s*\{(.*?)\}", body, re.S)
    out: dict[str, bytes] = {}
    if m is None:
        return out
    for key, hexdata in _ENTRY.findall(m.group(1)):
        blob = bytes.fromhex(hexdata)
        if len(blob) < 4:
            raise ValueError(f"resource {key}: blob shorter than its 4-byte alignment header")
        out[key.strip('"')] = blob[4:]
    return out


_DECIMAL = re.compile(r"([0-9]+)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]{1,6}))?")


class _Lexer(MLIRLexer):
    # xDSL's string-literal regex nests quantifiers ("(?:[^"...]+|...)*"): an unterminated string takes time
    # exponential in its length. This one matches the same strings with one way to match each character.
    _unescaped_characters_regex = re.compile(r'"(?:[^"\\\n\v\f]|\\(?:["nt\\]|[0-9A-Fa-f]{2}))*"')

DENSE_BYTES_LIMIT = 1 << 32  # a splat expands to its full size in xDSL: refuse absurd shapes before allocating


def _float_literal(text: str, elem: str) -> np.ndarray:
    """One element of a float ``dense<...>`` literal as a 0-d array of ``elem``: ``0x7FC00001`` is the bit
    pattern (as MLIR reads it), a decimal is rounded once, exactly, to ``elem`` (not through a Python float)."""
    dt = NUMPY_DTYPES[elem]
    neg = text.startswith("-")
    body = text.lstrip("+-")
    if body[:2] in ("0x", "0X"):
        bits = int(body, 16)
        width = 4 if elem == "f4E2M1FN" else dt.itemsize * 8
        if neg or bits.bit_length() > width:
            raise ValueError(f"hexadecimal float literal {text} does not fit {elem}")
        return np.array(bits, dtype=f"u{dt.itemsize}").view(dt)
    m = _DECIMAL.fullmatch(body)
    if m is None:
        raise ValueError(f"{text!r} is not a float literal")
    whole, frac, exp = m.group(1), m.group(2) or "", int(m.group(3) or 0)
    digits = (whole + frac).lstrip("0")
    magnitude = len(digits) + exp - len(frac)  # the value is below 10**magnitude and at least 10**(magnitude-1)
    if not digits or magnitude < -400:  # zero, or far below half the smallest subnormal of every type
        return np.array(-0.0 if neg else 0.0, dtype=dt)
    if magnitude > 400:
        raise ValueError(f"float literal {text[:40]} is out of range for {elem}")
    value = float(text)  # correctly rounded to f64
    if elem == "f64":
        if math.isinf(value):
            raise ValueError(f"float literal {text[:40]} is out of range for {elem}")
        return np.array(value, dtype=dt)
    p, emin, largest = _FLOAT_SEMANTICS[elem]
    if elem in ("f32", "f16") and 2.0**emin <= abs(value) <= largest:  # numpy rounds f64 to these directly
        # Rounding the f64 again is exact unless the f64 landed on a midpoint of the target type (every
        # midpoint of a normal target value is an f64, so none lies strictly between the decimal and it).
        drop = 53 - p
        if (struct.unpack("<Q", struct.pack("<d", value))[0] & ((1 << drop) - 1)) != 1 << (drop - 1):
            return np.array(value).astype(dt)
    q = Fraction(int(whole + frac), 1) * Fraction(10) ** (exp - len(frac))
    r = _round_to(q, elem)
    if r is None:
        raise ValueError(f"float literal {text} is out of range for {elem}")
    return np.array(-float(r) if neg else float(r), dtype=dt)


class _Parser(Parser):
    """xDSL's parser, plus MLIR's ``fused<metadata>[...]`` locations, and float ``dense<...>`` elements read
    bit-exactly (xDSL reads ``dense<0xFF800000> : tensor<f32>`` as the integer 4286578688)."""

    def __init__(self, ctx, text: str, name: str = "<unknown>") -> None:
        super().__init__(ctx, "", name)
        self._parser_state = ParserState(_Lexer(Input(text, name)))

    def parse_dense_int_or_fp_elements_attr(self, type=None):
        self.parse_punctuation("<", " in dense attribute")
        blob = literal = None
        if self.parse_optional_punctuation(">") is None:
            blob = self.parse_optional_str_literal()
            if blob is None:
                literal = self._parse_tensor_literal()
            self.parse_punctuation(">", " in dense attribute")
        if type is None:
            self.parse_punctuation(":", " in dense attribute")
            type = self._parse_dense_literal_type()
        count = math.prod(type.get_shape())
        if count * type.element_type.compile_time_size > DENSE_BYTES_LIMIT:  # before anything is allocated
            self.raise_error(f"dense elements of {type} would take {count * type.element_type.compile_time_size} "
                             f"bytes, more than the {DENSE_BYTES_LIMIT} a constant may hold (text.DENSE_BYTES_LIMIT)")
        if literal is None:
            data = b""
            if blob is not None:
                try:
                    data = bytes.fromhex(blob[2:]) if blob[:2] in ("0x", "0X") else None
                except ValueError:
                    data = None
                if data is None:
                    self.raise_error("Hex string in denseAttr is invalid")
                if len(data) == type.element_type.compile_time_size:  # a splat
                    data *= count
            attr = DenseIntOrFPElementsAttr(type, BytesAttr(data))
            if len(attr) != count or len(data) != count * type.element_type.compile_time_size:
                self.raise_error(f"Shape mismatch in dense literal: the type has {count} elements, the data "
                                 f"holds {len(data)} bytes.")
            return attr
        elements, shape = literal
        type_shape = list(type.get_shape())
        if shape and shape != type_shape:
            self.raise_error(f"Shape mismatch in dense literal. Expected {type_shape} shape from the type, "
                             f"but got {shape} shape.")
        if not isinstance(type.element_type, AnyFloat):
            values = [e.to_type(self, type.element_type) for e in elements] * (1 if shape else count)
            return DenseIntOrFPElementsAttr.from_list(type, values)
        elem = element_name(type.element_type)
        try:
            values = [_float_literal(e.span.text, elem) for e in elements]
        except (ValueError, ZeroDivisionError) as exc:
            self.raise_error(str(exc))
        arr = np.array(values, dtype=NUMPY_DTYPES[elem]).reshape(shape or ())
        if not shape:
            arr = np.broadcast_to(arr, type_shape)
        return dense_elements(arr, elem)

    def _parse_location(self):
        if self.parse_optional_keyword("fused") is None:
            return super()._parse_location()
        metadata = NoneAttr()
        if self.parse_optional_punctuation("<") is not None:
            metadata = self.parse_attribute()
            self.parse_punctuation(">")
        locations = self.parse_comma_separated_list(self.Delimiter.SQUARE, self._parse_location)
        return FusedLoc(tuple(locations), metadata)

    op_starts: dict[int, int] | None = None  # id(op) -> offset of its first token, when asked for

    def parse_operation(self):
        start = self._current_token.span.start
        op = super().parse_operation()
        if self.op_starts is not None:
            self.op_starts[id(op)] = start
        return op


def parse_module(text: str, *, resources: MutableMapping[str, bytes] | None = None, verify: bool = True,
                 op_starts: dict[int, int] | None = None) -> ModuleOp:
    """Parse pretty or generic MLIR text (with optional alias lines and resource trailer).

    ``op_starts`` (a dict) is filled with ``id(op) -> character offset`` of every parsed op, so that
    errors found later (verification, engines) can point at the op's line and column."""
    body = text
    if (m := _TRAILER.search(text)) is not None:
        body = text[: m.start()]
        blobs = _parse_trailer(m.group(1))
        if resources is not None:
            resources.update(blobs)
    parser = _Parser(make_context(), body)
    parser.op_starts = op_starts
    try:
        module = parser.parse_module()
    except (VerifyException, RecursionError, OverflowError) as exc:  # an attribute's own checks, deep nesting:
        why = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).strip().splitlines()[0]
        raise ParseError(parser._current_token.span, why) from None  # ... at the token the parser stopped on
    if verify:
        module.verify()
    return module
