"""Text form of tensorrt-dialect modules, printed the way MLIR(-TensorRT) prints them.

    make_context() -> xdsl.context.Context        # builtin, func, arith, tensorrt, plan
    print_module(module, *, generic=False, elide_above=None, locations=False,
                 resources=None) -> str
    parse_module(text, *, resources=None, verify=True) -> ModuleOp
    format_float(value, elem="f32") -> str         # MLIR's float spelling (9.99999974E-6)

(the printer is ``printer.py``, float spelling ``floats.py``; the context and the parser are here.)

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

import math
import re
import struct
from collections.abc import MutableMapping
from fractions import Fraction

import numpy as np
from xdsl.context import Context
from xdsl.dialect_interfaces.op_asm import OpAsmDialectInterface
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import (
    AnyFloat,
    Builtin,
    BytesAttr,
    DenseIntOrFPElementsAttr,
    FusedLoc,
    ModuleOp,
    NoneAttr,
)
from xdsl.dialects.func import Func
from xdsl.ir import Dialect
from xdsl.parser import Parser
from xdsl.parser.generic_parser import ParserState
from xdsl.utils.lexer import Input
from xdsl.utils.mlir_lexer import MLIRLexer

from .attrs import NUMPY_DTYPES, dense_elements, element_name
from .dialect import Plan, TensorRT
from .floats import _FLOAT_SEMANTICS, _round_to, format_float
from .printer import print_module

__all__ = ["make_context", "print_module", "parse_module", "format_float"]

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
    module = parser.parse_module()
    if verify:
        module.verify()
    return module
