"""Printing tensorrt-dialect modules as MLIR(-TensorRT) prints them: ``print_module`` (``text.py``'s docstring
says what the options do), SSA names MLIR-style, attribute aliases, the resource trailer."""

from __future__ import annotations

import io
import re
from collections.abc import Mapping

import numpy as np
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AnyFloat,
    ArrayAttr,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    DictionaryAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    ModuleOp,
    NameLoc,
    UnknownLoc,
    UnregisteredOp,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.printer import Printer

from .attrs import NUMPY_DTYPES, ShapeProfileAttr, element_name, elements_to_numpy
from .floats import format_float

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
