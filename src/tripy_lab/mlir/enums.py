"""Enums of the `tensorrt` dialect (``TensorRTEnums.td``) as xDSL enum attributes.

Every enum is a ``StrEnum`` whose members are the TensorRT spellings (``kSUM``, ``kRELU``...)
in declared order, plus an attribute class that prints as ``#tensorrt.<mnemonic><kVALUE>``
inside attribute dictionaries and as a bare ``<kVALUE>`` where an op's custom syntax places it
(the declarative format prints only the parameter).

    ElementWiseOperationAttr("kSUM")            # -> #tensorrt.element_wise_operation<kSUM>
    ENUM_ATTRS["activation_type"]               # mnemonic -> attribute class
    enum_attr(ActivationTypeAttr, "kRELU")      # validates the value, clear error otherwise
"""

from __future__ import annotations

import types

from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.str_enum import StrEnum

__all__ = [
    "ENUM_ATTRS",
    "enum_attr",
    "ActivationType",
    "ActivationTypeAttr",
    "ElementWiseOperation",
    "ElementWiseOperationAttr",
    "UnaryOperation",
    "UnaryOperationAttr",
    "ReduceOperation",
    "ReduceOperationAttr",
    "MatrixOperation",
    "MatrixOperationAttr",
    "TopKOperation",
    "TopKOperationAttr",
    "PoolingType",
    "PoolingTypeAttr",
    "SliceMode",
    "SliceModeAttr",
    "GatherMode",
    "GatherModeAttr",
    "PaddingMode",
    "PaddingModeAttr",
    "ResizeMode",
    "ResizeModeAttr",
    "ResizeCoordinateTransformation",
    "ResizeCoordinateTransformationAttr",
    "ResizeSelector",
    "ResizeSelectorAttr",
    "ResizeRoundMode",
    "ResizeRoundModeAttr",
    "LoopOutput",
    "LoopOutputAttr",
    "TripLimit",
    "TripLimitAttr",
    "FillOperation",
    "FillOperationAttr",
    "ScatterMode",
    "ScatterModeAttr",
]

ENUM_ATTRS: dict[str, type[EnumAttribute]] = {}
"""attribute mnemonic (``activation_type``) -> attribute class."""
_ENUM_VALUES: dict[tuple, EnumAttribute] = {}  # (class, "kSUM") -> attribute; bounded by the enums' sizes


def _print_parameter(self: EnumAttribute, printer: Printer) -> None:
    printer.print_string(f"<{str(self.data)}>")


def _parse_parameter(cls: type[EnumAttribute], parser: AttrParser) -> StrEnum:
    with parser.in_angle_brackets():
        return parser.parse_str_enum(cls.enum_type)


def _make(name: str, mnemonic: str, values: str) -> tuple[type[StrEnum], type[EnumAttribute]]:
    """Build the StrEnum ``name`` and its attribute class ``<name>Attr``."""
    enum_cls = StrEnum(name, [(v, v) for v in values.split()])
    enum_cls.__module__ = __name__

    def body(ns: dict) -> None:
        ns["name"] = f"tensorrt.{mnemonic}"
        ns["__module__"] = __name__
        ns["__doc__"] = f"``#tensorrt.{mnemonic}<kVALUE>`` ({name})."
        ns["print_parameter"] = _print_parameter
        ns["parse_parameter"] = classmethod(_parse_parameter)

    attr_cls = types.new_class(f"{name}Attr", (EnumAttribute[enum_cls],), {}, body)
    attr_cls = irdl_attr_definition(attr_cls)
    ENUM_ATTRS[mnemonic] = attr_cls
    return enum_cls, attr_cls


def enum_attr(attr_cls: type[EnumAttribute], value: str | StrEnum | EnumAttribute) -> EnumAttribute:
    """``attr_cls`` holding ``value`` (a ``"kSUM"`` string, enum member or attribute)."""
    if type(value) is str:  # the lowering's case; isinstance against attribute classes goes through ABCMeta
        hit = _ENUM_VALUES.get((attr_cls, value))
        if hit is not None:
            return hit
    if isinstance(value, attr_cls):
        return value
    if isinstance(value, EnumAttribute):
        value = str(value.data)
    key = (attr_cls, str(value))
    hit = _ENUM_VALUES.get(key)
    if hit is not None:  # enum attributes are immutable: one object per value
        return hit
    try:
        attr = _ENUM_VALUES[key] = attr_cls(attr_cls.enum_type(str(value)))
        return attr
    except ValueError:
        allowed = ", ".join(m.value for m in attr_cls.enum_type)
        raise ValueError(f"{value!r} is not a valid {attr_cls.name} (expected one of: {allowed})") from None


ActivationType, ActivationTypeAttr = _make(
    "ActivationType",
    "activation_type",
    "kRELU kSIGMOID kTANH kLEAKY_RELU kELU kSELU kSOFTSIGN kSOFTPLUS kCLIP kHARD_SIGMOID "
    "kSCALED_TANH kTHRESHOLDED_RELU kGELU_ERF kGELU_TANH",
)
ElementWiseOperation, ElementWiseOperationAttr = _make(
    "ElementWiseOperation",
    "element_wise_operation",
    "kSUM kPROD kMAX kMIN kSUB kDIV kPOW kFLOOR_DIV kAND kOR kXOR kEQUAL kGREATER kLESS",
)
UnaryOperation, UnaryOperationAttr = _make(
    "UnaryOperation",
    "unary_operation",
    "kEXP kLOG kSQRT kRECIP kABS kNEG kSIN kCOS kTAN kSINH kCOSH kASIN kACOS kATAN kASINH "
    "kACOSH kATANH kCEIL kFLOOR kERF kNOT kSIGN kROUND",
)
ReduceOperation, ReduceOperationAttr = _make("ReduceOperation", "reduce_operation", "kSUM kPROD kMAX kMIN kAVG")
MatrixOperation, MatrixOperationAttr = _make("MatrixOperation", "matrix_operation", "kNONE kTRANSPOSE kVECTOR")
TopKOperation, TopKOperationAttr = _make("TopKOperation", "top_k_operation", "kMAX kMIN")
PoolingType, PoolingTypeAttr = _make("PoolingType", "pooling_type", "kMAX kAVERAGE kMAX_AVERAGE_BLEND")
SliceMode, SliceModeAttr = _make("SliceMode", "slice_mode", "kDEFAULT kWRAP kCLAMP kFILL kREFLECT")
GatherMode, GatherModeAttr = _make("GatherMode", "gather_mode", "kDEFAULT kELEMENT kND")
PaddingMode, PaddingModeAttr = _make(
    "PaddingMode", "padding_mode", "kEXPLICIT_ROUND_DOWN kEXPLICIT_ROUND_UP kSAME_UPPER kSAME_LOWER"
)
ResizeMode, ResizeModeAttr = _make("ResizeMode", "resize_mode", "kNEAREST kLINEAR kCUBIC")
ResizeCoordinateTransformation, ResizeCoordinateTransformationAttr = _make(
    "ResizeCoordinateTransformation",
    "resize_coordinate_transformation",
    "kALIGN_CORNERS kASYMMETRIC kHALF_PIXEL",
)
ResizeSelector, ResizeSelectorAttr = _make("ResizeSelector", "resize_selector", "kFORMULA kUPPER")
ResizeRoundMode, ResizeRoundModeAttr = _make("ResizeRoundMode", "resize_round_mode", "kHALF_UP kHALF_DOWN kFLOOR kCEIL")
LoopOutput, LoopOutputAttr = _make("LoopOutput", "loop_output", "kLAST_VALUE kCONCATENATE kREVERSE")
TripLimit, TripLimitAttr = _make("TripLimit", "trip_limit", "kCOUNT kWHILE")
FillOperation, FillOperationAttr = _make("FillOperation", "fill_operation", "kLINSPACE kRANDOM_UNIFORM kRANDOM_NORMAL")
ScatterMode, ScatterModeAttr = _make("ScatterMode", "scatter_mode", "kELEMENT kND")
