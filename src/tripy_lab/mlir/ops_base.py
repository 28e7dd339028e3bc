"""Shared pieces of the tensorrt op definitions: imports, verifier helpers, custom-syntax helpers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar, NoReturn

import numpy as np
from xdsl.dialects.builtin import (
    I32,
    I64,
    AffineMapAttr,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    DictionaryAttr,
    Float32Type,
    Float64Type,
    FloatAttr,
    IntegerAttr,
    IntegerType,
    Signedness,
    StringAttr,
    TensorType,
)
from xdsl.ir import Attribute, Dialect, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.irdl import (
    AttrSizedOperandSegments,
    EqAttrConstraint,
    IRDLOperation,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_region_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import IsTerminator, Pure
from xdsl.utils.exceptions import VerifyException

from .attrs import (
    MemorySpaceAttr,
    ShapeProfileAttr,
    bool_attr,
    broadcast_shapes,
    dense_array,
    dense_elements,
    f32_attr,
    fmt_shape,
    int_attr,
    shapes_compatible,
    tensor_type,
    to_python,
)
from .attrs import elem_of as _el
from .attrs import shape_of as _sh
from .enums import (
    ENUM_ATTRS,
    ActivationTypeAttr,
    ElementWiseOperationAttr,
    MatrixOperationAttr,
    PoolingTypeAttr,
    ReduceOperationAttr,
    ResizeCoordinateTransformationAttr,
    ResizeRoundModeAttr,
    ResizeSelectorAttr,
    SliceModeAttr,
    TopKOperationAttr,
    UnaryOperationAttr,
    enum_attr,
)
from .op_builder import build_planned

ElementsAttr = DenseIntOrFPElementsAttr | DenseResourceAttr
UI32 = IntegerType(32, Signedness.UNSIGNED)
_UI32Attr = IntegerAttr.constr(EqAttrConstraint(UI32))

_T = base(TensorType)
_F32Attr = FloatAttr[Float32Type]
_F64Attr = FloatAttr[Float64Type]
_PROPS = (ParsePropInAttrDict(),)

_EW_TYPES = {"i1", "i8", "i32", "i64", "f16", "bf16", "f32"}
_FLOATS = {"f16", "bf16", "f32"}
_CAST_TYPES = {"i1", "ui8", "i8", "i32", "i64", "f16", "bf16", "f32"}


def _fail(op: IRDLOperation, msg: str) -> NoReturn:
    raise VerifyException(f"'{op.name}' op {msg}")


def _ints(a: Attribute | None) -> tuple[int, ...]:
    return () if a is None else tuple(int(v) for v in a.get_values())


def _int(a: Attribute | None) -> int | None:
    return None if a is None else int(a.value.data)


def _enum(a: Attribute) -> str:
    return str(a.data)


def _result(ty: TensorType | str | None, like: SSAValue) -> TensorType:
    """``ty`` as a tensor type; an element name keeps ``like``'s shape."""
    if isinstance(ty, str):
        return tensor_type(_sh(like.type), ty)
    return like.type if ty is None else ty


def _perm_map(perm: Sequence[int]) -> AffineMapAttr:
    """The permutation's affine map; attributes are immutable, so one per permutation is shared (building the
    map's expressions was ~6 us a transpose)."""
    key = tuple(int(p) for p in perm)
    attr = _PERM_MAPS.get(key)
    if attr is None:
        attr = AffineMapAttr(AffineMap(len(key), 0, tuple(AffineExpr.dimension(p) for p in key)))
        if len(_PERM_MAPS) < 1024:
            _PERM_MAPS[key] = attr
    return attr


_PERM_MAPS: dict[tuple, AffineMapAttr] = {}


def _opt(fn, value):
    """``fn(value)``, or None when ``value`` is None (None properties are dropped)."""
    return None if value is None else fn(value)


def _elements(v, elem: str | None) -> Attribute:
    return v if isinstance(v, Attribute) else dense_elements(np.asarray(v), elem or "f32")


class _Op(IRDLOperation):
    """Base of the tensorrt ops: all are side-effect free."""

    traits = traits_def(Pure())

    def _make(self, operands, results, regions=(), **props) -> None:
        """Initialise with ``props`` as properties, dropping those that are None."""
        properties = {k: v for k, v in props.items() if v is not None}
        if regions or not build_planned(self, operands, results, properties):
            IRDLOperation.__init__(self, operands=operands, result_types=results, properties=properties,
                                   regions=list(regions))


# ---- custom syntax helpers -------------------------------------------------------------------


def _print_attrs(printer: Printer, op: IRDLOperation, skip: Sequence[str] = ()) -> None:
    """Print ``{...}`` with the properties/attributes not shown elsewhere, defaults omitted."""
    defs = op.get_irdl_definition().properties
    shown = {}
    for k, v in {**op.properties, **op.attributes}.items():
        if k in skip or k == "operandSegmentSizes":
            continue
        d = defs.get(k)
        if d is not None and d.default_value is not None and d.default_value == v:
            continue
        shown[k] = v
    printer.print_op_attributes(shown)


def _parse_attrs(parser: Parser, cls: type[IRDLOperation]) -> tuple[dict, dict]:
    """Parse an optional ``{...}``, splitting it into (properties, discardable attributes)."""
    names = cls.get_irdl_definition().properties
    attrs = parser.parse_optional_attr_dict()
    props = {k: v for k, v in attrs.items() if k in names}
    return props, {k: v for k, v in attrs.items() if k not in names}


def _print_typed(printer: Printer, v: SSAValue, sep: str = " : ") -> None:
    printer.print_operand(v)
    printer.print_string(sep)
    printer.print_attribute(v.type)


def _parse_typed(parser: Parser) -> SSAValue:
    operand = parser.parse_unresolved_operand()
    parser.parse_punctuation(":")
    return parser.resolve_operand(operand, parser.parse_type())


def _build(cls, operands, result_types, props, attrs, regions=()):
    return cls.build(
        operands=operands,
        result_types=result_types,
        properties=props,
        attributes=attrs,
        regions=list(regions),
    )



__all__ = [n for n in dir() if not n.startswith("__")]
