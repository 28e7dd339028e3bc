"""The MLIR ``tensorrt`` dialect (as emitted by nvtripy 0.1.7) defined in xDSL.

Every op stores its attributes as xDSL *properties* named exactly as in TableGen, prints and
parses the MLIR-TensorRT custom syntax, and verifies the cheap rules of the dialect. Engines
read ops only through ``op.name`` and :func:`attr_value`.

Constructors take SSA values, xDSL ``TensorType`` result types and plain Python values
(``"kSUM"`` strings for enums, ints, floats, lists). ``result_type=None`` infers the type where
the rule is simple. "value or list" arguments take an SSA value (1-D i32 tensor) or ints.

    ElementWiseOp(a, b, "kSUM", result_type=None)
    UnaryOp(x, "kEXP")
    ActivationOp(x, "kRELU", alpha=None, beta=None)
    MatrixMultiplyOp(a, b, "kNONE", "kVECTOR", result_type=None)
    ReduceOp(x, "kSUM", axes=[0, 2], keep_dims=False, result_type=None)
    SoftmaxOp(x, axis)
    SliceOp(x, start, size, stride, result_type, mode="kDEFAULT", fill=None)
    ReshapeOp(x, result_type, shape=None)
    TransposeOp(x, perm, result_type=None)
    BroadcastOp(x, broadcast_dims, result_type, shape=None)
    ConcatenationOp([xs], axis, result_type=None)
    GatherOp(data, indices, axis, result_type=None, num_broadcast_dims=0)
    SelectOp(c, t, e, result_type=None)
    CastOp(x, result_type)            /  IdentityOp(x, result_type)   # TensorType or "f32"
    ConstantOp(elements_attr)         # or ConstantOp(numpy_array, "f32")
    ShapeOp(x)
    CollapseRankOp(x, result_type)    /  ExpandRankOp(x, result_type)
    LinspaceOp(result_type, start, step, shape=None)     # start/step: SSA value or float
    NormalizationOp(x, scale, bias, axis, eps=None, num_groups=None)
    ConvolutionOp(x, kernel, result_type, stride, pre_padding, post_padding, bias=None,
                  num_groups=1, dilation=None)          # kernel/bias: SSA value or ndarray
    DeconvolutionOp(...same arguments...)
    PoolingOp(x, "kMAX", window_size, stride, pre_padding, post_padding, result_type=None,
              blend_factor=None, average_count_excludes_padding=None)
    ResizeNearestOp(x, result_type, output_shape=None, coordinate_transformation="kASYMMETRIC",
                    nearest_rounding="kFLOOR", selector_for_single_pixel="kFORMULA", scales=None)
    ResizeLinearOp(x, result_type, output_shape=None, coordinate_transformation="kHALF_PIXEL",
                   selector_for_single_pixel="kFORMULA", scales=None)
    ResizeCubicOp(x, result_type, output_shape=None, coordinate_transformation="kHALF_PIXEL",
                  cubic_coeff=-0.75, selector_for_single_pixel="kFORMULA", scales=None)
    TopKOp(x, "kMAX", k, axis)        # two results: values, indices (i32)
    QuantizeOp(x, scale, result_type, axis=None)  /  DequantizeOp(x, scale, result_type, axis=None)
    OpaquePluginOp(inputs, result_types, plugin_name, plugin_version="1", plugin_namespace="",
                   creator_params=None, dso_path=None, creator_func=None, shapes_region=None)
    ShuffleOp(x, result_type, first_transpose, second_transpose, reshape=None,
              zero_is_placeholder=True, dynamic_reshape=None)
    YieldOp(*values)                  # terminator of opaque_plugin's shapes_region

Helpers: ``attr_value(op, name, resources=None)`` (any property as a plain Python value),
``tensor_type(shape, elem)``, ``dense_elements(array, elem)``, ``TENSORRT_OPS`` (op name ->
class), dialect objects ``TensorRT`` and ``Plan``.
"""

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

__all__ = ["TENSORRT_OPS", "TensorRT", "Plan", "attr_value", "dense_elements", "tensor_type"]

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
    return AffineMapAttr(AffineMap(len(perm), 0, tuple(AffineExpr.dimension(int(p)) for p in perm)))


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
        IRDLOperation.__init__(
            self,
            operands=operands,
            result_types=results,
            properties={k: v for k, v in props.items() if v is not None},
            regions=list(regions),
        )


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


# =============================================================================================
# Element-wise, unary, activation


@irdl_op_definition
class ElementWiseOp(_Op):
    name = "tensorrt.element_wise"
    input1 = operand_def(_T)
    input2 = operand_def(_T)
    elementwiseOperation = prop_def(ElementWiseOperationAttr)
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = (
        "$elementwiseOperation `(` $input1 `,` $input2 `:` type($input1) `,` type($input2) `)` "
        "attr-dict `->` type($result)"
    )

    def __init__(self, input1: SSAValue, input2: SSAValue, op: str, result_type: TensorType | None = None):
        if result_type is None:
            shape = broadcast_shapes(_sh(input1.type), _sh(input2.type)) or _sh(input1.type)
            elem = "i1" if op in ("kEQUAL", "kGREATER", "kLESS") else _el(input1.type)
            result_type = tensor_type(shape, elem)
        self._make([input1, input2], [result_type], elementwiseOperation=enum_attr(ElementWiseOperationAttr, op))

    def verify_(self) -> None:
        a, b, r = self.input1.type, self.input2.type, self.result.type
        kind = _enum(self.elementwiseOperation)
        if not len(_sh(a)) == len(_sh(b)) == len(_sh(r)):
            _fail(self, "expected both inputs and the result to have the same rank")
        if broadcast_shapes(_sh(a), _sh(b)) is None:
            _fail(self, f"shapes are not broadcastable: {fmt_shape(_sh(a))} vs {fmt_shape(_sh(b))}")
        ea, eb, er = _el(a), _el(b), _el(r)
        if ea != eb:
            _fail(self, f"expected both inputs to have the same element type, got {ea} and {eb}")
        if ea not in _EW_TYPES:
            _fail(self, f"element type {ea} is not supported")
        if kind in ("kAND", "kOR", "kXOR"):
            if ea != "i1" or er != "i1":
                _fail(self, f"{kind} expects i1 inputs and an i1 result")
        elif kind in ("kEQUAL", "kGREATER", "kLESS"):
            if ea == "i1":
                _fail(self, f"{kind} does not accept i1 inputs")
            if er != "i1":
                _fail(self, f"{kind} must produce an i1 result, got {er}")
        else:
            if ea == "i1":
                _fail(self, f"{kind} does not accept i1 inputs")
            if kind == "kPOW" and ea == "i32":
                _fail(self, "kPOW does not accept i32 inputs")
            if er != ea:
                _fail(self, f"expected the result element type {ea}, got {er}")


_UNARY_TYPES = {
    **dict.fromkeys(["kABS", "kNEG", "kSIGN"], {"i8", "i32", "i64", "f16", "f32", "bf16"}),
    **dict.fromkeys("kEXP kLOG kSQRT kRECIP kSIN kCOS kCEIL kFLOOR kERF kROUND".split(), _FLOATS),
    **dict.fromkeys("kTAN kSINH kCOSH kASIN kACOS kATAN kASINH kACOSH kATANH".split(), {"f16", "f32"}),
    "kNOT": {"i1"},
}


@irdl_op_definition
class UnaryOp(_Op):
    name = "tensorrt.unary"
    T: ClassVar = VarConstraint("T", _T)
    input = operand_def(T)
    unaryOperation = prop_def(UnaryOperationAttr)
    result = result_def(T)
    irdl_options = _PROPS
    assembly_format = "attr-dict $input `:` type($input)"

    def __init__(self, input: SSAValue, op: str):
        self._make([input], [input.type], unaryOperation=enum_attr(UnaryOperationAttr, op))

    def verify_(self) -> None:
        kind, el = _enum(self.unaryOperation), _el(self.input.type)
        if el not in _UNARY_TYPES[kind]:
            _fail(self, f"{kind} does not support element type {el} (allowed: {sorted(_UNARY_TYPES[kind])})")


_NO_ALPHA = {"kRELU", "kSIGMOID", "kTANH", "kSOFTSIGN", "kGELU_TANH", "kGELU_ERF"}
_NO_BETA = _NO_ALPHA | {"kELU", "kLEAKY_RELU", "kTHRESHOLDED_RELU"}


@irdl_op_definition
class ActivationOp(_Op):
    name = "tensorrt.activation"
    T: ClassVar = VarConstraint("T", _T)
    input = operand_def(T)
    activationType = prop_def(ActivationTypeAttr)
    alpha = opt_prop_def(_F32Attr)
    beta = opt_prop_def(_F32Attr)
    result = result_def(T)
    irdl_options = _PROPS
    assembly_format = "attr-dict $input `:` type($input)"

    def __init__(self, input: SSAValue, act: str, alpha: float | None = None, beta: float | None = None):
        props = {"activationType": enum_attr(ActivationTypeAttr, act)}
        props["alpha"] = _opt(f32_attr, alpha)
        props["beta"] = _opt(f32_attr, beta)
        self._make([input], [input.type], **props)

    def verify_(self) -> None:
        kind, el = _enum(self.activationType), _el(self.input.type)
        if el not in {"i8", "i32", "i64", "f16", "bf16", "f32"}:
            _fail(self, f"element type {el} is not supported")
        if el in ("i32", "i64") and kind != "kRELU":
            _fail(self, f"{el} inputs are only supported with kRELU")
        for attr, exempt in (("alpha", _NO_ALPHA), ("beta", _NO_BETA)):
            present = self.properties.get(attr) is not None
            if present and kind in exempt:
                _fail(self, f"{kind} does not accept '{attr}'")
            if not present and kind not in exempt:
                _fail(self, f"{kind} requires '{attr}'")


# =============================================================================================
# Matrix multiply, reduce, softmax, top-k


def _matmul_shape(a, b, op0: str, op1: str):
    """(result shape, error) of a TensorRT matrix multiply."""

    def split(s, op):
        if op == "kVECTOR":
            return (s[:-1], (s[-1],)) if len(s) >= 1 else (None, None)
        if len(s) < 2:
            return None, None
        return s[:-2], (s[-2:] if op == "kNONE" else s[-2:][::-1])

    (ba, ma), (bb, mb) = split(a, op0), split(b, op1)
    if ma is None or mb is None:
        return None, "kNONE/kTRANSPOSE operands need rank >= 2 and kVECTOR rank >= 1"
    if len(ba) != len(bb):
        return None, "expected both operands to have the same number of batch (collection) dims"
    batch = broadcast_shapes(ba, bb)
    if batch is None:
        return None, f"batch dims {fmt_shape(ba)} and {fmt_shape(bb)} are not broadcastable"
    ka, kb = ma[-1], mb[0]
    if ka is not None and kb is not None and ka != kb:
        return None, f"contraction dims differ: {ka} vs {kb}"
    out = list(batch)
    if op0 != "kVECTOR":
        out.append(ma[0])
    if op1 != "kVECTOR":
        out.append(mb[1])
    return tuple(out), None


@irdl_op_definition
class MatrixMultiplyOp(_Op):
    name = "tensorrt.matrix_multiply"
    input0 = operand_def(_T)
    input1 = operand_def(_T)
    op0 = prop_def(MatrixOperationAttr)
    op1 = prop_def(MatrixOperationAttr)
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = (
        "attr-dict `ins` `(` $input0 `,` $input1 `:` type($input0) `,` type($input1) `)` `->` type($result)"
    )

    def __init__(self, input0: SSAValue, input1: SSAValue, op0: str, op1: str, result_type: TensorType | None = None):
        if result_type is None:
            shape, err = _matmul_shape(_sh(input0.type), _sh(input1.type), op0, op1)
            if err:
                raise ValueError(err)
            result_type = tensor_type(shape, _el(input0.type))
        self._make(
            [input0, input1],
            [result_type],
            op0=enum_attr(MatrixOperationAttr, op0),
            op1=enum_attr(MatrixOperationAttr, op1),
        )

    def verify_(self) -> None:
        a, b = _sh(self.input0.type), _sh(self.input1.type)
        op0, op1 = _enum(self.op0), _enum(self.op1)
        for s, o, n in ((a, op0, "input0"), (b, op1, "input1")):
            if len(s) == 1 and o != "kVECTOR":
                _fail(self, f"rank-1 {n} must use kVECTOR, got {o}")
        if _el(self.input0.type) != _el(self.input1.type):
            _fail(self, "expected both operands to have the same element type")
        if _el(self.input0.type) not in _FLOATS:
            _fail(self, f"element type {_el(self.input0.type)} is not supported (f16, bf16, f32)")
        shape, err = _matmul_shape(a, b, op0, op1)
        if err:
            _fail(self, err)
        if not shapes_compatible(shape, _sh(self.result.type)):
            _fail(self, f"expected result shape {fmt_shape(shape)}, got {fmt_shape(_sh(self.result.type))}")


def _check_axes(op, axes: Sequence[int], rank: int, what: str) -> None:
    if list(axes) != sorted(set(axes)):
        _fail(op, f"{what} must be sorted and unique, got {list(axes)}")
    if any(a < 0 or a >= rank for a in axes):
        _fail(op, f"{what} {list(axes)} out of range for rank {rank}")


@irdl_op_definition
class ReduceOp(_Op):
    name = "tensorrt.reduce"
    input = operand_def(_T)
    reduceAxes = prop_def(DenseArrayBase[I64])
    keepDimensions = prop_def(BoolAttr, default_value=BoolAttr.from_bool(False))
    reduceOperation = prop_def(ReduceOperationAttr)
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = "$reduceOperation $input attr-dict `:` type($input) `->` type($result)"

    def __init__(
        self,
        input: SSAValue,
        op: str,
        axes: Sequence[int],
        keep_dims: bool = False,
        result_type: TensorType | None = None,
    ):
        axes = sorted(int(a) for a in axes)
        if result_type is None:
            s = _sh(input.type)
            shape = (
                [1 if i in axes else d for i, d in enumerate(s)]
                if keep_dims
                else [d for i, d in enumerate(s) if i not in axes]
            )
            result_type = tensor_type(shape, _el(input.type))
        self._make(
            [input],
            [result_type],
            reduceAxes=dense_array(axes),
            keepDimensions=bool_attr(keep_dims),
            reduceOperation=enum_attr(ReduceOperationAttr, op),
        )

    def verify_(self) -> None:
        s, axes = _sh(self.input.type), _ints(self.reduceAxes)
        _check_axes(self, axes, len(s), "reduceAxes")
        keep = bool(self.keepDimensions.value.data)
        want = (
            [1 if i in axes else d for i, d in enumerate(s)] if keep else [d for i, d in enumerate(s) if i not in axes]
        )
        if not shapes_compatible(want, _sh(self.result.type)):
            _fail(self, f"expected result shape {fmt_shape(want)}, got {fmt_shape(_sh(self.result.type))}")
        if _el(self.input.type) != _el(self.result.type):
            _fail(self, "expected the result to have the input element type")


@irdl_op_definition
class SoftmaxOp(_Op):
    name = "tensorrt.softmax"
    T: ClassVar = VarConstraint("T", _T)
    input = operand_def(T)
    axis = prop_def(IntegerAttr[I64])
    result = result_def(T)
    irdl_options = _PROPS
    assembly_format = "attr-dict $input `:` type($input)"

    def __init__(self, input: SSAValue, axis: int):
        self._make([input], [input.type], axis=int_attr(axis))

    def verify_(self) -> None:
        rank, axis = len(_sh(self.input.type)), _int(self.axis)
        if not 0 <= axis < rank:
            _fail(self, f"expected axis to be in [0, {rank}), got {axis}")
        if _el(self.input.type) not in _FLOATS:
            _fail(self, f"element type {_el(self.input.type)} is not supported (f16, bf16, f32)")


@irdl_op_definition
class TopKOp(_Op):
    name = "tensorrt.top_k"
    input = operand_def(_T)
    k = prop_def(IntegerAttr[I64])
    axis = prop_def(IntegerAttr[I64])
    topkOperation = prop_def(TopKOperationAttr)
    values = result_def(_T)
    indices = result_def(_T)
    irdl_options = _PROPS
    assembly_format = "$topkOperation attr-dict $input `:` type($input) `->` type($values) `,` type($indices)"

    def __init__(self, input: SSAValue, op: str, k: int, axis: int):
        shape = list(_sh(input.type))
        shape[axis] = k
        self._make(
            [input],
            [tensor_type(shape, _el(input.type)), tensor_type(shape, "i32")],
            k=int_attr(k),
            axis=int_attr(axis),
            topkOperation=enum_attr(TopKOperationAttr, op),
        )

    def verify_(self) -> None:
        s, k, axis = _sh(self.input.type), _int(self.k), _int(self.axis)
        if not 0 <= axis < len(s):
            _fail(self, f"expected axis to be in [0, {len(s)}), got {axis}")
        if not 0 < k <= 3840:
            _fail(self, f"expected 0 < k <= 3840, got {k}")
        if s[axis] is not None and k > s[axis]:
            _fail(self, f"k={k} is larger than the size {s[axis]} of axis {axis}")
        want = list(s)
        want[axis] = k
        for r in (self.values, self.indices):
            if not shapes_compatible(want, _sh(r.type)):
                _fail(self, f"expected result shape {fmt_shape(want)}, got {fmt_shape(_sh(r.type))}")
        if _el(self.indices.type) != "i32":
            _fail(self, "expected i32 indices")


# =============================================================================================
# Shape manipulation: slice, reshape, transpose, broadcast, concatenation, gather, select, ...


def _dyn_or_static(v) -> tuple[SSAValue | None, DenseArrayBase | None]:
    if isinstance(v, SSAValue):
        return v, None
    return None, dense_array([int(x) for x in v], "i32")


@irdl_op_definition
class SliceOp(_Op):
    name = "tensorrt.slice"
    input = operand_def(_T)
    start = opt_operand_def(_T)
    size = opt_operand_def(_T)
    stride = opt_operand_def(_T)
    fill = opt_operand_def(_T)
    static_start = opt_prop_def(DenseArrayBase[I32])
    static_size = opt_prop_def(DenseArrayBase[I32])
    static_stride = opt_prop_def(DenseArrayBase[I32])
    mode = prop_def(SliceModeAttr, default_value=SliceModeAttr("kDEFAULT"))
    result = result_def(_T)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        input: SSAValue,
        start,
        size,
        stride,
        result_type: TensorType,
        mode: str = "kDEFAULT",
        fill: SSAValue | None = None,
    ):
        (d0, s0), (d1, s1), (d2, s2) = map(_dyn_or_static, (start, size, stride))
        props = {
            "static_start": s0,
            "static_size": s1,
            "static_stride": s2,
            "mode": enum_attr(SliceModeAttr, mode),
        }
        self._make([input, d0, d1, d2, fill], [result_type], **props)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.input)
        for dyn, static in (
            (self.start, "static_start"),
            (self.size, "static_size"),
            (self.stride, "static_stride"),
        ):
            printer.print_string("[")
            if dyn is not None:
                _print_typed(printer, dyn, ": ")
            else:
                printer.print_string(", ".join(str(v) for v in _ints(self.properties.get(static))))
            printer.print_string("]")
        if self.fill is not None:
            printer.print_string(" fill(")
            _print_typed(printer, self.fill)
            printer.print_string(")")
        _print_attrs(printer, self, ("static_start", "static_size", "static_stride"))
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" to ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> SliceOp:
        x = parser.parse_unresolved_operand()
        dyn: list[UnresolvedOperand | None] = []
        dyn_types: list[Attribute | None] = []
        props: dict = {}
        for static in ("static_start", "static_size", "static_stride"):
            parser.parse_punctuation("[")
            if (operand := parser.parse_optional_unresolved_operand()) is not None:
                parser.parse_punctuation(":")
                dyn.append(operand)
                dyn_types.append(parser.parse_type())
            else:
                vals = []
                if (first := parser.parse_optional_integer(allow_boolean=False)) is not None:
                    vals.append(first)
                    while parser.parse_optional_punctuation(","):
                        vals.append(parser.parse_integer(allow_boolean=False))
                props[static] = dense_array(vals, "i32")
                dyn.append(None)
                dyn_types.append(None)
            parser.parse_punctuation("]")
        fill = None
        if parser.parse_optional_keyword("fill"):
            parser.parse_punctuation("(")
            fill = _parse_typed(parser)
            parser.parse_punctuation(")")
        extra, attrs = _parse_attrs(parser, cls)
        props.update(extra)
        parser.parse_punctuation(":")
        in_type = parser.parse_type()
        parser.parse_keyword("to")
        out_type = parser.parse_type()
        resolved = [None if u is None else parser.resolve_operand(u, t) for u, t in zip(dyn, dyn_types)]
        return _build(cls, [parser.resolve_operand(x, in_type), *resolved, fill], [out_type], props, attrs)

    def verify_(self) -> None:
        s, rs = _sh(self.input.type), _sh(self.result.type)
        if len(s) != len(rs):
            _fail(self, f"expected the result rank {len(rs)} to equal the input rank {len(s)}")
        for dyn, static in (
            (self.start, "static_start"),
            (self.size, "static_size"),
            (self.stride, "static_stride"),
        ):
            sv = self.properties.get(static)
            if (dyn is None) == (sv is None):
                _fail(self, f"expected exactly one of '{static[7:]}' and '{static}'")
            if sv is not None and len(_ints(sv)) != len(s):
                _fail(self, f"'{static}' has {len(_ints(sv))} entries, expected {len(s)} (the input rank)")
            if dyn is not None:
                ds = _sh(dyn.type)
                if len(ds) != 1 or _el(dyn.type) != "i32" or (ds[0] is not None and ds[0] != len(s)):
                    _fail(self, f"'{static[7:]}' must be a 1-D i32 tensor of length {len(s)}")
        if self.static_size is not None and not shapes_compatible(_ints(self.static_size), rs):
            _fail(
                self,
                f"result shape {fmt_shape(rs)} does not match static_size {list(_ints(self.static_size))}",
            )
        mode = _enum(self.mode)
        if self.fill is not None and mode != "kFILL":
            _fail(self, "'fill' operand requires mode kFILL")
        if mode in ("kCLAMP", "kFILL", "kREFLECT") and _el(self.input.type) == "bf16":
            _fail(self, f"{mode} does not support bf16")
        if _el(self.input.type) != _el(self.result.type):
            _fail(self, "expected the result to have the input element type")


@irdl_op_definition
class ReshapeOp(_Op):
    name = "tensorrt.reshape"
    input = operand_def(_T)
    shape = opt_operand_def(_T)
    result = result_def(_T)
    assembly_format = (
        "$input (`shape` `(` $shape^ `` `:` type($shape) `)`)? attr-dict `:` type($input) `to` type($result)"
    )

    def __init__(self, input: SSAValue, result_type: TensorType, shape: SSAValue | None = None):
        self._make([input, shape], [result_type])

    def verify_(self) -> None:
        s, rs = _sh(self.input.type), _sh(self.result.type)
        if _el(self.input.type) != _el(self.result.type):
            _fail(self, "expected the result to have the input element type")
        if None not in s and None not in rs and int(np.prod(s)) != int(np.prod(rs)):
            _fail(self, f"input {fmt_shape(s)} and result {fmt_shape(rs)} have different volumes")
        if self.shape is None:
            if rs.count(None) > 1:
                _fail(self, "a result with more than one '?' dim requires a 'shape' operand")
        else:
            ss = _sh(self.shape.type)
            if len(ss) != 1 or _el(self.shape.type) not in ("i32", "i64") or ss[0] != len(rs):
                _fail(self, f"'shape' must be a 1-D i32 tensor of static length {len(rs)} (the result rank)")


@irdl_op_definition
class TransposeOp(_Op):
    name = "tensorrt.transpose"
    input = operand_def(_T)
    permutation = prop_def(AffineMapAttr)
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = "attr-dict $input `:` type($input) `to` type($result)"

    def __init__(self, input: SSAValue, perm: Sequence[int], result_type: TensorType | None = None):
        if result_type is None:
            s = _sh(input.type)
            result_type = tensor_type([s[p] for p in perm], _el(input.type))
        self._make([input], [result_type], permutation=_perm_map(perm))

    def verify_(self) -> None:
        s, rs = _sh(self.input.type), _sh(self.result.type)
        try:
            perm = to_python(self.permutation)
        except ValueError as e:
            _fail(self, str(e))
        if sorted(perm) != list(range(len(s))) or self.permutation.data.num_dims != len(s):
            _fail(self, f"expected 'permutation' to be a permutation of rank {len(s)}, got {list(perm)}")
        if not shapes_compatible([s[p] for p in perm], rs):
            _fail(self, f"expected result shape {fmt_shape([s[p] for p in perm])}, got {fmt_shape(rs)}")


@irdl_op_definition
class BroadcastOp(_Op):
    name = "tensorrt.broadcast"
    input = operand_def(_T)
    shape = opt_operand_def(_T)
    broadcast_dims = prop_def(DenseArrayBase[I64])
    result = result_def(_T)

    def __init__(
        self,
        input: SSAValue,
        broadcast_dims: Sequence[int],
        result_type: TensorType,
        shape: SSAValue | None = None,
    ):
        self._make([input, shape], [result_type], broadcast_dims=dense_array(broadcast_dims))

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.input)
        printer.print_string(" broadcast_dims<" + ", ".join(map(str, _ints(self.broadcast_dims))) + ">")
        if self.shape is not None:
            printer.print_string(" shape(")
            _print_typed(printer, self.shape)
            printer.print_string(")")
        _print_attrs(printer, self, ("broadcast_dims",))
        printer.print_string(" : ")
        printer.print_attribute(self.input.type)
        printer.print_string(" to ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> BroadcastOp:
        x = parser.parse_unresolved_operand()
        parser.parse_keyword("broadcast_dims")
        dims = parser.parse_comma_separated_list(parser.Delimiter.ANGLE, parser.parse_integer)
        shape = None
        if parser.parse_optional_keyword("shape"):
            parser.parse_punctuation("(")
            shape = _parse_typed(parser)
            parser.parse_punctuation(")")
        props, attrs = _parse_attrs(parser, cls)
        props["broadcast_dims"] = dense_array(dims)
        parser.parse_punctuation(":")
        in_type = parser.parse_type()
        parser.parse_keyword("to")
        out_type = parser.parse_type()
        return _build(cls, [parser.resolve_operand(x, in_type), shape], [out_type], props, attrs)

    def verify_(self) -> None:
        s, rs, dims = _sh(self.input.type), _sh(self.result.type), _ints(self.broadcast_dims)
        if len(dims) != len(s):
            _fail(self, f"expected {len(s)} broadcast_dims (one per input dim), got {len(dims)}")
        if len(set(dims)) != len(dims) or any(d < 0 or d >= len(rs) for d in dims):
            _fail(self, f"broadcast_dims {list(dims)} must be distinct and in [0, {len(rs)})")
        for i, d in enumerate(dims):
            if s[i] is not None and s[i] != 1 and rs[d] is not None and rs[d] != s[i]:
                _fail(self, f"input dim {i} of size {s[i]} cannot broadcast to result dim {d} of size {rs[d]}")
        if None in rs and self.shape is None:
            _fail(self, "a result with '?' dims requires a 'shape' operand")
        if _el(self.input.type) != _el(self.result.type):
            _fail(self, "expected the result to have the input element type")


@irdl_op_definition
class ConcatenationOp(_Op):
    name = "tensorrt.concatenation"
    inputs = var_operand_def(_T)
    axis = prop_def(IntegerAttr[I32])
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = "attr-dict `ins` `(` $inputs `:` type($inputs) `)` `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], axis: int, result_type: TensorType | None = None):
        if result_type is None:
            shape = list(_sh(inputs[0].type))
            sizes = [_sh(x.type)[axis] for x in inputs]
            shape[axis] = None if None in sizes else sum(sizes)
            result_type = tensor_type(shape, _el(inputs[0].type))
        self._make([list(inputs)], [result_type], axis=int_attr(axis, "i32"))

    def verify_(self) -> None:
        shapes = [_sh(x.type) for x in self.inputs]
        rs, axis = _sh(self.result.type), _int(self.axis)
        if not shapes:
            _fail(self, "expected at least one input")
        if any(len(s) != len(rs) for s in shapes):
            _fail(self, "expected all inputs and the result to have the same rank")
        if not 0 <= axis < len(rs):
            _fail(self, f"expected axis to be in [0, {len(rs)}), got {axis}")
        if len({_el(x.type) for x in self.inputs} | {_el(self.result.type)}) != 1:
            _fail(self, "expected all inputs and the result to have the same element type")
        for i in range(len(rs)):
            if i != axis and broadcast_shapes(*[(s[i],) for s in shapes]) is None:
                _fail(self, f"inputs disagree on dim {i}")
        sizes = [s[axis] for s in shapes]
        if None not in sizes and rs[axis] is not None and sum(sizes) != rs[axis]:
            _fail(self, f"result dim {axis} is {rs[axis]}, expected {sum(sizes)}")


@irdl_op_definition
class GatherOp(_Op):
    name = "tensorrt.gather"
    data = operand_def(_T)
    indices = operand_def(_T)
    axis = prop_def(IntegerAttr[I64])
    numBroadcastDims = prop_def(IntegerAttr[I64], default_value=IntegerAttr(0, 64))
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = "attr-dict `ins` `(` $data `,` $indices `:` type($data) `,` type($indices) `)` `->` type($result)"

    def __init__(
        self,
        data: SSAValue,
        indices: SSAValue,
        axis: int,
        result_type: TensorType | None = None,
        num_broadcast_dims: int = 0,
    ):
        if result_type is None:
            d, i = _sh(data.type), _sh(indices.type)
            result_type = tensor_type(d[:axis] + i[num_broadcast_dims:] + d[axis + 1 :], _el(data.type))
        self._make([data, indices], [result_type], axis=int_attr(axis), numBroadcastDims=int_attr(num_broadcast_dims))

    def verify_(self) -> None:
        d, i, rs = _sh(self.data.type), _sh(self.indices.type), _sh(self.result.type)
        axis, nb = _int(self.axis), _int(self.numBroadcastDims)
        if not 0 <= axis < len(d):
            _fail(self, f"expected axis to be in [0, {len(d)}), got {axis}")
        if nb not in (0, 1):
            _fail(self, f"numBroadcastDims must be 0 or 1, got {nb}")
        if _el(self.indices.type) not in ("i32", "i64"):
            _fail(self, "expected i32 or i64 indices")
        want = d[:axis] + i[nb:] + d[axis + 1 :]
        if not shapes_compatible(want, rs):
            _fail(self, f"expected result shape {fmt_shape(want)}, got {fmt_shape(rs)}")


@irdl_op_definition
class SelectOp(_Op):
    name = "tensorrt.select"
    condition = operand_def(_T)
    thenInput = operand_def(_T)
    elseInput = operand_def(_T)
    result = result_def(_T)
    assembly_format = (
        "`ins` `(` $condition `,` $thenInput `,` $elseInput `:` type($condition) `,` type($thenInput) `,` "
        "type($elseInput) `)` attr-dict `->` type($result)"
    )

    def __init__(self, condition: SSAValue, then: SSAValue, other: SSAValue, result_type: TensorType | None = None):
        if result_type is None:
            shape = broadcast_shapes(_sh(condition.type), _sh(then.type), _sh(other.type)) or _sh(then.type)
            result_type = tensor_type(shape, _el(then.type))
        self._make([condition, then, other], [result_type])

    def verify_(self) -> None:
        shapes = [_sh(v.type) for v in (self.condition, self.thenInput, self.elseInput, self.result)]
        if len({len(s) for s in shapes}) != 1:
            _fail(self, "expected all operands and the result to have the same rank")
        if broadcast_shapes(*shapes[:3]) is None:
            _fail(self, "shapes are not broadcastable")
        if _el(self.condition.type) != "i1":
            _fail(self, "expected an i1 condition")
        if not _el(self.thenInput.type) == _el(self.elseInput.type) == _el(self.result.type):
            _fail(self, "expected thenInput, elseInput and the result to have the same element type")


class _ConvertOp(_Op):
    input = operand_def(_T)
    result = result_def(_T)
    assembly_format = "$input attr-dict `:` type($input) `to` type($result)"

    def __init__(self, input: SSAValue, result_type: TensorType | str):
        self._make([input], [_result(result_type, input)])

    def verify_(self) -> None:
        for v in (self.input, self.result):
            if _el(v.type) not in _CAST_TYPES:
                _fail(self, f"element type {_el(v.type)} is not supported (quantize/dequantize handle f8/i4)")
        if not shapes_compatible(_sh(self.input.type), _sh(self.result.type)):
            _fail(self, "expected the result to have the input shape (only the element type changes)")


@irdl_op_definition
class CastOp(_ConvertOp):
    name = "tensorrt.cast"


@irdl_op_definition
class IdentityOp(_ConvertOp):
    name = "tensorrt.identity"


@irdl_op_definition
class ConstantOp(_Op):
    name = "tensorrt.constant"
    weights = prop_def(ElementsAttr)
    result = result_def(_T)

    def __init__(self, weights, mlir_elem: str | None = None):
        weights = _elements(weights, mlir_elem)
        self._make([], [weights.type], weights=weights)

    def print(self, printer: Printer) -> None:
        _print_attrs(printer, self, ("weights",))
        printer.print_string(" ")
        printer.print_attribute(self.weights)

    @classmethod
    def parse(cls, parser: Parser) -> ConstantOp:
        props, attrs = _parse_attrs(parser, cls)
        weights = parser.parse_attribute()
        if not isinstance(weights, DenseIntOrFPElementsAttr | DenseResourceAttr):
            parser.raise_error(f"expected a dense elements attribute, got {weights}")
        props["weights"] = weights
        return _build(cls, [], [weights.type], props, attrs)

    def verify_(self) -> None:
        if self.weights.type != self.result.type:
            _fail(self, f"weights type {self.weights.type} does not match the result type {self.result.type}")
        if _el(self.result.type) not in {"i1", "i4", "i8", "i32", "i64", "f8E4M3FN", "f16", "bf16", "f32"}:
            _fail(self, f"element type {_el(self.result.type)} is not supported")


@irdl_op_definition
class ShapeOp(_Op):
    name = "tensorrt.shape"
    input = operand_def(_T)
    result = result_def(_T)
    assembly_format = "$input attr-dict `:` type($input) `->` type($result)"

    def __init__(self, input: SSAValue):
        self._make([input], [tensor_type([len(_sh(input.type))], "i32")])

    def verify_(self) -> None:
        rank = len(_sh(self.input.type))
        if self.result.type != tensor_type([rank], "i32"):
            _fail(self, f"expected result type tensor<{rank}xi32>, got {self.result.type}")


def _only_units_differ(big: Sequence[int | None], small: Sequence[int | None]) -> bool:
    """``small`` is ``big`` with some size-1 dims removed."""
    j = 0
    for d in big:
        if j < len(small) and (d == small[j] or (d is None) != (small[j] is None) and d != 1):
            j += 1
        elif d != 1:
            return False
    return j == len(small)


class _RankOp(_ConvertOp):
    EXPANDS: ClassVar[bool] = False

    def verify_(self) -> None:
        s, rs = _sh(self.input.type), _sh(self.result.type)
        if not (_only_units_differ(rs, s) if self.EXPANDS else _only_units_differ(s, rs)):
            _fail(
                self,
                "expected to only insert unit-dims into the shape"
                if self.EXPANDS
                else "expected to only drop unit-dims from the shape",
            )
        if _el(self.input.type) != _el(self.result.type):
            _fail(self, "expected the result to have the input element type")


@irdl_op_definition
class CollapseRankOp(_RankOp):
    name = "tensorrt.collapse_rank"


@irdl_op_definition
class ExpandRankOp(_RankOp):
    name = "tensorrt.expand_rank"
    EXPANDS: ClassVar[bool] = True


# =============================================================================================
# Linspace (IFillLayer kLINSPACE)


@irdl_op_definition
class LinspaceOp(_Op):
    name = "tensorrt.linspace"
    shape = opt_operand_def(_T)
    start = opt_operand_def(_T)
    step = opt_operand_def(_T)
    static_start = opt_prop_def(_F64Attr)
    static_step = opt_prop_def(_F64Attr)
    result = result_def(_T)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        result_type: TensorType,
        start: SSAValue | float,
        step: SSAValue | float,
        shape: SSAValue | None = None,
    ):
        props = {}
        if not isinstance(start, SSAValue):
            props["static_start"] = FloatAttr(float(start), Float64Type())
            start = None
        if not isinstance(step, SSAValue):
            props["static_step"] = FloatAttr(float(step), Float64Type())
            step = None
        self._make([shape, start, step], [result_type], **props)

    def print(self, printer: Printer) -> None:
        for i, (dyn, static) in enumerate(
            ((self.start, "static_start"), (self.shape, None), (self.step, "static_step"))
        ):
            printer.print_string("[" if i == 0 else " [")
            if dyn is not None:
                _print_typed(printer, dyn)
            elif static is None:
                printer.print_string(" static")
            else:
                printer.print_string(f"{float(self.properties[static].value.data):e}")
            printer.print_string("]")
        _print_attrs(printer, self, ("static_start", "static_step"))
        printer.print_string(" : ")
        printer.print_attribute(self.result.type)

    @classmethod
    def parse(cls, parser: Parser) -> LinspaceOp:
        operands: dict[str, SSAValue | None] = {}
        props: dict = {}
        for key, static in (("start", "static_start"), ("shape", None), ("step", "static_step")):
            parser.parse_punctuation("[")
            operands[key] = None
            if static is None and parser.parse_optional_keyword("static"):
                pass
            elif static is not None and (num := parser.parse_optional_number()) is not None:
                props[static] = FloatAttr(float(num), Float64Type())
            else:
                operands[key] = _parse_typed(parser)
            parser.parse_punctuation("]")
        extra, attrs = _parse_attrs(parser, cls)
        props.update(extra)
        parser.parse_punctuation(":")
        out = parser.parse_type()
        return _build(cls, [operands["shape"], operands["start"], operands["step"]], [out], props, attrs)

    def verify_(self) -> None:
        rs = _sh(self.result.type)
        if (self.start is None) != (self.step is None):
            _fail(self, "'start' and 'step' must be both dynamic or both static")
        if (self.start is None) != (self.static_start is not None) or (self.step is None) != (
            self.static_step is not None
        ):
            _fail(self, "expected exactly one of 'start'/'static_start' and of 'step'/'static_step'")
        if _el(self.result.type) not in ("i32", "i64", "f32"):
            _fail(self, f"result element type {_el(self.result.type)} is not supported (i32, i64, f32)")
        if None in rs and self.shape is None:
            _fail(self, "a result with '?' dims requires a 'shape' operand")
        if self.shape is not None:
            ss = _sh(self.shape.type)
            if len(ss) != 1 or ss[0] != len(rs):
                _fail(self, f"'shape' must be a 1-D tensor of static length {len(rs)} (the result rank)")
        if self.step is not None:
            ss = _sh(self.step.type)
            if len(ss) != 1 or (ss[0] is not None and ss[0] != len(rs)):
                _fail(self, f"'step' must be a 1-D tensor of length {len(rs)} (the result rank)")
        elif len(rs) > 1:
            _fail(self, "a static 'step' is only allowed for rank <= 1 results")


# =============================================================================================
# Normalization, convolution, deconvolution, pooling


@irdl_op_definition
class NormalizationOp(_Op):
    name = "tensorrt.normalization"
    input = operand_def(_T)
    scale = operand_def(_T)
    bias = operand_def(_T)
    axis = prop_def(DenseArrayBase[I64])
    eps = opt_prop_def(_F32Attr)
    num_groups = opt_prop_def(IntegerAttr[I32])
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = (
        "attr-dict `(` $input `:` type($input) `,` $scale `:` type($scale) `,` $bias `:` type($bias) `)` "
        "`->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue,
        scale: SSAValue,
        bias: SSAValue,
        axis: Sequence[int],
        eps: float | None = None,
        num_groups: int | None = None,
    ):
        props = {"axis": dense_array(sorted(int(a) for a in axis))}
        props["eps"] = _opt(f32_attr, eps)
        props["num_groups"] = _opt(lambda v: int_attr(v, "i32"), num_groups)
        self._make([input, scale, bias], [input.type], **props)

    def verify_(self) -> None:
        s = _sh(self.input.type)
        _check_axes(self, _ints(self.axis), len(s), "axis")
        for v, n in ((self.scale, "scale"), (self.bias, "bias"), (self.result, "result")):
            if len(_sh(v.type)) != len(s):
                _fail(self, f"expected '{n}' to have the input rank {len(s)}")
            if _el(v.type) != _el(self.input.type):
                _fail(self, f"expected '{n}' to have the input element type")
        if _el(self.input.type) not in _FLOATS:
            _fail(self, f"element type {_el(self.input.type)} is not supported (f16, bf16, f32)")
        g = _int(self.num_groups)
        if g is not None and g > 1 and s[1] is not None and s[1] % g:
            _fail(self, f"num_groups={g} must divide the channel count {s[1]}")


def _window_out(d, k, stride, pre, post, dil=1, transposed=False):
    if d is None or k is None:
        return None
    if transposed:
        return (d - 1) * stride - pre - post + dil * (k - 1) + 1
    return (d + pre + post - dil * (k - 1) - 1) // stride + 1


class _ConvBase(_Op):
    stride = prop_def(DenseArrayBase[I64])
    pre_padding = prop_def(DenseArrayBase[I64])
    post_padding = prop_def(DenseArrayBase[I64])
    num_groups = prop_def(_UI32Attr, default_value=IntegerAttr(1, UI32))
    dilation = opt_prop_def(DenseArrayBase[I64])
    irdl_options = (AttrSizedOperandSegments(as_property=True), ParsePropInAttrDict())
    TRANSPOSED: ClassVar[bool] = False
    NAMES: ClassVar[tuple[str, str]] = ("kernel", "bias")

    def __init__(
        self,
        input: SSAValue,
        kernel,
        result_type: TensorType,
        stride: Sequence[int],
        pre_padding: Sequence[int],
        post_padding: Sequence[int],
        bias=None,
        num_groups: int = 1,
        dilation: Sequence[int] | None = None,
    ):
        k, b = self.NAMES
        props = {
            "stride": dense_array(stride),
            "pre_padding": dense_array(pre_padding),
            "post_padding": dense_array(post_padding),
            "num_groups": IntegerAttr(num_groups, UI32),
        }
        props["dilation"] = _opt(dense_array, dilation)
        el = _el(input.type)
        if kernel is not None and not isinstance(kernel, SSAValue):
            props[k + "Static"], kernel = _elements(kernel, el), None
        if bias is not None and not isinstance(bias, SSAValue):
            props[b + "Static"], bias = _elements(bias, el), None
        self._make([input, kernel, bias], [result_type], **props)

    def verify_(self) -> None:
        kn, bn = self.NAMES
        s, rs = _sh(self.input.type), _sh(self.result.type)
        kernel, bias = getattr(self, kn), getattr(self, bn)
        kstatic, bstatic = self.properties.get(kn + "Static"), self.properties.get(bn + "Static")
        if (kernel is None) == (kstatic is None):
            _fail(self, f"expected exactly one of '{kn}' and '{kn}Static'")
        if bias is not None and bstatic is not None:
            _fail(self, f"expected at most one of '{bn}' and '{bn}Static'")
        if len(s) not in (4, 5) or len(rs) != len(s):
            _fail(self, f"expected rank-4 or rank-5 input and result, got {len(s)} and {len(rs)}")
        n = len(s) - 2
        for attr in ("stride", "pre_padding", "post_padding", "dilation"):
            if attr in self.properties and len(_ints(self.properties[attr])) != n:
                _fail(self, f"'{attr}' must have {n} entries (one per spatial dim)")
        ks = _sh(kernel.type) if kernel is not None else tuple(kstatic.type.get_shape())
        if len(ks) != len(s):
            _fail(self, f"expected the {kn} to have rank {len(s)}, got {len(ks)}")
        g = _int(self.num_groups)
        out_c = ks[0] if not self.TRANSPOSED else (None if ks[1] is None else ks[1] * g)
        in_c = s[1]
        if g < 1 or (in_c is not None and in_c % g) or (out_c is not None and out_c % g):
            _fail(self, f"num_groups={g} must divide the input and output channel counts")
        kernel_in = ks[0] if self.TRANSPOSED else (None if ks[1] is None else ks[1] * g)
        if in_c is not None and kernel_in is not None and kernel_in != in_c:
            _fail(self, f"the {kn} expects {kernel_in} input channels, got {in_c}")
        if out_c is not None and rs[1] is not None and rs[1] != out_c:
            _fail(self, f"expected {out_c} output channels, got {rs[1]}")
        bs = _sh(bias.type) if bias is not None else (tuple(bstatic.type.get_shape()) if bstatic else None)
        if bs is not None and (len(bs) != 1 or not shapes_compatible(bs, (out_c,))):
            _fail(self, f"expected the {bn} to be rank-1 of size {out_c}")
        stride, pre, post = _ints(self.stride), _ints(self.pre_padding), _ints(self.post_padding)
        dil = _ints(self.dilation) or (1,) * n
        for i in range(n):
            want = _window_out(s[2 + i], ks[2 + i], stride[i], pre[i], post[i], dil[i], self.TRANSPOSED)
            if want is not None and rs[2 + i] is not None and want != rs[2 + i]:
                _fail(self, f"expected spatial dim {i} of the result to be {want}, got {rs[2 + i]}")


@irdl_op_definition
class ConvolutionOp(_ConvBase):
    name = "tensorrt.convolution"
    input = operand_def(_T)
    kernel = opt_operand_def(_T)
    bias = opt_operand_def(_T)
    kernelStatic = opt_prop_def(ElementsAttr)
    biasStatic = opt_prop_def(ElementsAttr)
    result = result_def(_T)
    assembly_format = (
        "attr-dict `in` `(` $input `:` type($input) `)` (`kernel` `(` $kernel^ `:` type($kernel) `)`)? "
        "(`bias` `(` $bias^ `:` type($bias) `)`)? `->` type($result)"
    )


@irdl_op_definition
class DeconvolutionOp(_ConvBase):
    name = "tensorrt.deconvolution"
    input = operand_def(_T)
    kernelWeights = opt_operand_def(_T)
    biasWeights = opt_operand_def(_T)
    kernelWeightsStatic = opt_prop_def(ElementsAttr)
    biasWeightsStatic = opt_prop_def(ElementsAttr)
    result = result_def(_T)
    TRANSPOSED: ClassVar[bool] = True
    NAMES: ClassVar[tuple[str, str]] = ("kernelWeights", "biasWeights")
    assembly_format = (
        "attr-dict `in` `(` $input `:` type($input) `)` "
        "(`kernelWeights` `(` $kernelWeights^ `:` type($kernelWeights) `)`)? "
        "(`biasWeights` `(` $biasWeights^ `:` type($biasWeights) `)`)? `->` type($result)"
    )


@irdl_op_definition
class PoolingOp(_Op):
    name = "tensorrt.pooling"
    input = operand_def(_T)
    windowSize = prop_def(DenseArrayBase[I64])
    stride = prop_def(DenseArrayBase[I64])
    prePadding = prop_def(DenseArrayBase[I64])
    postPadding = prop_def(DenseArrayBase[I64])
    poolingType = prop_def(PoolingTypeAttr)
    blendFactor = opt_prop_def(_F32Attr)
    averageCountExcludesPadding = opt_prop_def(BoolAttr)
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = "attr-dict `ins` `(` $input `:` type($input) `)` `->` type($result)"

    def __init__(
        self,
        input: SSAValue,
        pooling_type: str,
        window_size: Sequence[int],
        stride: Sequence[int],
        pre_padding: Sequence[int],
        post_padding: Sequence[int],
        result_type: TensorType | None = None,
        blend_factor: float | None = None,
        average_count_excludes_padding: bool | None = None,
    ):
        if result_type is None:
            s = _sh(input.type)
            spatial = [
                _window_out(s[2 + i], k, stride[i], pre_padding[i], post_padding[i]) for i, k in enumerate(window_size)
            ]
            result_type = tensor_type([*s[:2], *spatial], _el(input.type))
        props = {
            "windowSize": dense_array(window_size),
            "stride": dense_array(stride),
            "prePadding": dense_array(pre_padding),
            "postPadding": dense_array(post_padding),
            "poolingType": enum_attr(PoolingTypeAttr, pooling_type),
        }
        props["blendFactor"] = _opt(f32_attr, blend_factor)
        props["averageCountExcludesPadding"] = _opt(bool_attr, average_count_excludes_padding)
        self._make([input], [result_type], **props)

    def verify_(self) -> None:
        s, rs, kind = _sh(self.input.type), _sh(self.result.type), _enum(self.poolingType)
        if len(s) not in (4, 5) or len(rs) != len(s):
            _fail(self, f"expected rank-4 or rank-5 input and result, got {len(s)} and {len(rs)}")
        win, stride = _ints(self.windowSize), _ints(self.stride)
        pre, post = _ints(self.prePadding), _ints(self.postPadding)
        if not len(win) == len(stride) == len(pre) == len(post) == len(s) - 2:
            _fail(self, f"windowSize, stride, prePadding and postPadding must have {len(s) - 2} entries")
        if (self.blendFactor is not None) != (kind == "kMAX_AVERAGE_BLEND"):
            _fail(self, "'blendFactor' must be present exactly for kMAX_AVERAGE_BLEND")
        if (self.averageCountExcludesPadding is not None) != (kind != "kMAX"):
            _fail(
                self,
                "'averageCountExcludesPadding' must be present for kAVERAGE/kMAX_AVERAGE_BLEND, absent for kMAX",
            )
        for i in range(len(win)):
            want = _window_out(s[2 + i], win[i], stride[i], pre[i], post[i])
            if want is not None and rs[2 + i] is not None and want != rs[2 + i]:
                _fail(self, f"expected spatial dim {i} of the result to be {want}, got {rs[2 + i]}")


# =============================================================================================
# Resize


class _ResizeBase(_Op):
    input = operand_def(_T)
    output_shape = opt_operand_def(_T)
    coordinateTransformation = prop_def(ResizeCoordinateTransformationAttr)
    selectorForSinglePixel = prop_def(ResizeSelectorAttr)
    scales = opt_prop_def(DenseArrayBase[Float32Type])
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = "attr-dict $input (`,` $output_shape^)? `:` functional-type(operands, results)"
    INNER_DIMS: ClassVar[int] = 3

    def _init(self, input, result_type, output_shape, coordinate_transformation, selector, scales, **extra):
        props = {
            "coordinateTransformation": enum_attr(ResizeCoordinateTransformationAttr, coordinate_transformation),
            "selectorForSinglePixel": enum_attr(ResizeSelectorAttr, selector),
            **extra,
        }
        props["scales"] = _opt(lambda v: dense_array(v, "f32"), scales)
        self._make([input, output_shape], [result_type], **props)

    def verify_(self) -> None:
        s, rs = _sh(self.input.type), _sh(self.result.type)
        if len(rs) != len(s):
            _fail(self, "expected the result to have the input rank")
        if len(s) < (2 if self.INNER_DIMS == 2 else 1):
            _fail(self, f"expected an input of rank >= {2 if self.INNER_DIMS == 2 else 1}")
        if _el(self.input.type) != _el(self.result.type):
            _fail(self, "expected the result to have the input element type")
        if self.output_shape is not None:
            ss = _sh(self.output_shape.type)
            if len(ss) != 1 or ss[0] != len(s):
                _fail(self, f"'output_shape' must be a 1-D tensor of length {len(s)}")
        if self.scales is not None:
            sc = tuple(self.scales.get_values())
            if len(sc) != len(s):
                _fail(self, f"'scales' must have {len(s)} entries (the input rank)")
            if any(v != 1.0 for v in sc[: max(0, len(s) - self.INNER_DIMS)]):
                _fail(self, f"only the innermost {self.INNER_DIMS} dims may be resized")


@irdl_op_definition
class ResizeNearestOp(_ResizeBase):
    name = "tensorrt.resize_nearest"
    nearestRounding = prop_def(ResizeRoundModeAttr)

    def __init__(
        self,
        input: SSAValue,
        result_type: TensorType,
        output_shape: SSAValue | None = None,
        coordinate_transformation: str = "kASYMMETRIC",
        nearest_rounding: str = "kFLOOR",
        selector_for_single_pixel: str = "kFORMULA",
        scales: Sequence[float] | None = None,
    ):
        self._init(
            input,
            result_type,
            output_shape,
            coordinate_transformation,
            selector_for_single_pixel,
            scales,
            nearestRounding=enum_attr(ResizeRoundModeAttr, nearest_rounding),
        )


@irdl_op_definition
class ResizeLinearOp(_ResizeBase):
    name = "tensorrt.resize_linear"

    def __init__(
        self,
        input: SSAValue,
        result_type: TensorType,
        output_shape: SSAValue | None = None,
        coordinate_transformation: str = "kHALF_PIXEL",
        selector_for_single_pixel: str = "kFORMULA",
        scales: Sequence[float] | None = None,
    ):
        self._init(input, result_type, output_shape, coordinate_transformation, selector_for_single_pixel, scales)


@irdl_op_definition
class ResizeCubicOp(_ResizeBase):
    name = "tensorrt.resize_cubic"
    cubicCoeff = prop_def(_F32Attr)
    INNER_DIMS: ClassVar[int] = 2

    def __init__(
        self,
        input: SSAValue,
        result_type: TensorType,
        output_shape: SSAValue | None = None,
        coordinate_transformation: str = "kHALF_PIXEL",
        cubic_coeff: float = -0.75,
        selector_for_single_pixel: str = "kFORMULA",
        scales: Sequence[float] | None = None,
    ):
        self._init(
            input,
            result_type,
            output_shape,
            coordinate_transformation,
            selector_for_single_pixel,
            scales,
            cubicCoeff=f32_attr(cubic_coeff),
        )


# =============================================================================================
# Quantize / dequantize


class _QuantBase(_Op):
    input = operand_def(_T)
    scale = operand_def(_T)
    axis = opt_prop_def(IntegerAttr[I32])
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = (
        "attr-dict `in` `(` $input `:` type($input) `)` `scale` `(` $scale `:` type($scale) `)` `->` type($result)"
    )
    QUANTIZED: ClassVar[tuple[str, ...]] = ()
    REAL: ClassVar[tuple[str, ...]] = ("f32", "f16", "bf16")
    INPUT_IS_QUANTIZED: ClassVar[bool] = False

    def __init__(self, input: SSAValue, scale: SSAValue, result_type: TensorType | str, axis: int | None = None):
        props = {} if axis is None else {"axis": int_attr(axis, "i32")}
        self._make([input, scale], [_result(result_type, input)], **props)

    def verify_(self) -> None:
        s, sc, axis = _sh(self.input.type), _sh(self.scale.type), _int(self.axis)
        q, r = (self.input, self.result) if self.INPUT_IS_QUANTIZED else (self.result, self.input)
        if _el(q.type) not in self.QUANTIZED:
            _fail(self, f"quantized type {_el(q.type)} is not supported ({', '.join(self.QUANTIZED)})")
        if _el(r.type) not in self.REAL or _el(self.scale.type) not in self.REAL:
            _fail(self, "expected f32, f16 or bf16 for the real-valued tensor and the scale")
        if not shapes_compatible(s, _sh(self.result.type)):
            _fail(self, "expected the result to have the input shape")
        if len(s) < 1:
            _fail(self, "expected an input of rank >= 1")
        if len(sc) == 0:
            if axis is not None:
                _fail(self, "per-tensor (rank-0) scale does not take an 'axis'")
        elif len(sc) == 1 and len(s) != 1 or len(sc) == 1 and axis is not None:
            if axis is None or not 0 <= axis < len(s):
                _fail(self, f"per-channel (rank-1) scale requires an 'axis' in [0, {len(s)})")
            if not shapes_compatible(sc, (s[axis],)):
                _fail(self, f"scale length {sc[0]} must equal input dim {axis} ({s[axis]})")
        elif len(sc) == len(s):
            if axis is not None:
                _fail(self, "block quantization (scale rank = input rank) does not take an 'axis'")
        else:
            _fail(self, "scale must have rank 0 (per-tensor), 1 (per-channel) or the input rank (block)")


@irdl_op_definition
class QuantizeOp(_QuantBase):
    name = "tensorrt.quantize"
    QUANTIZED: ClassVar[tuple[str, ...]] = ("i8", "f8E4M3FN", "i4")


@irdl_op_definition
class DequantizeOp(_QuantBase):
    name = "tensorrt.dequantize"
    QUANTIZED: ClassVar[tuple[str, ...]] = ("i8", "f8E4M3FN", "i4", "f4E2M1FN")
    INPUT_IS_QUANTIZED: ClassVar[bool] = True


# =============================================================================================
# Plugin, shuffle, yield


@irdl_op_definition
class YieldOp(IRDLOperation):
    name = "tensorrt.yield"
    values = var_operand_def()
    traits = traits_def(IsTerminator(), Pure())
    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def __init__(self, *values: SSAValue):
        super().__init__(operands=[list(values)])


@irdl_op_definition
class OpaquePluginOp(_Op):
    name = "tensorrt.opaque_plugin"
    inputs = var_operand_def(_T)
    plugin_name = prop_def(StringAttr)
    plugin_version = prop_def(StringAttr)
    plugin_namespace = prop_def(StringAttr)
    dso_path = opt_prop_def(StringAttr)
    creator_func = opt_prop_def(StringAttr)
    creator_params = prop_def(DictionaryAttr)
    plugin_results = var_result_def(_T)
    shapes_region = opt_region_def()

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        result_types: Sequence[TensorType],
        plugin_name: str,
        plugin_version: str = "1",
        plugin_namespace: str = "",
        creator_params: Mapping[str, Attribute] | None = None,
        dso_path: str | None = None,
        creator_func: str | None = None,
        shapes_region: Region | None = None,
    ):
        props = {
            "plugin_name": StringAttr(plugin_name),
            "plugin_version": StringAttr(plugin_version),
            "plugin_namespace": StringAttr(plugin_namespace),
            "creator_params": DictionaryAttr(dict(creator_params or {})),
        }
        props["dso_path"] = _opt(StringAttr, dso_path)
        props["creator_func"] = _opt(StringAttr, creator_func)
        self._make([list(inputs)], [list(result_types)], regions=[shapes_region], **props)

    def print(self, printer: Printer) -> None:
        _print_attrs(printer, self)
        printer.print_string("(")
        printer.print_list(self.inputs, printer.print_operand)
        printer.print_string(") : ")
        printer.print_function_type(self.inputs.types, self.plugin_results.types)
        if self.shapes_region is not None:
            printer.print_string(" ")
            printer.print_region(self.shapes_region)

    @classmethod
    def parse(cls, parser: Parser) -> OpaquePluginOp:
        props, attrs = _parse_attrs(parser, cls)
        operands = parser.parse_comma_separated_list(parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        parser.parse_punctuation(":")
        ftype = parser.parse_function_type()
        region = parser.parse_optional_region()
        resolved = parser.resolve_operands(operands, ftype.inputs.data, parser.pos)
        return _build(cls, [resolved], [list(ftype.outputs.data)], props, attrs, [region])

    def verify_(self) -> None:
        if self.creator_func is not None and self.dso_path is None:
            _fail(self, "'creator_func' requires 'dso_path'")


@irdl_op_definition
class ShuffleOp(_Op):
    name = "tensorrt.shuffle"
    input = operand_def(_T)
    dynamic_reshape = opt_operand_def(_T)
    first_transpose = prop_def(DenseArrayBase[I64])
    reshape = opt_prop_def(DenseArrayBase[I64])
    second_transpose = prop_def(DenseArrayBase[I64])
    zero_is_placeholder = prop_def(BoolAttr, default_value=BoolAttr.from_bool(True))
    result = result_def(_T)
    irdl_options = _PROPS
    assembly_format = (
        "attr-dict `ins` `(` $input `:` type($input) `)` "
        "(`dynamic_reshape` `(` $dynamic_reshape^ `:` type($dynamic_reshape) `)`)? `->` type($result)"
    )

    def __init__(
        self,
        input: SSAValue,
        result_type: TensorType,
        first_transpose: Sequence[int],
        second_transpose: Sequence[int],
        reshape: Sequence[int] | None = None,
        zero_is_placeholder: bool = True,
        dynamic_reshape: SSAValue | None = None,
    ):
        props = {
            "first_transpose": dense_array(first_transpose),
            "second_transpose": dense_array(second_transpose),
            "zero_is_placeholder": bool_attr(zero_is_placeholder),
        }
        props["reshape"] = _opt(dense_array, reshape)
        self._make([input, dynamic_reshape], [result_type], **props)

    def verify_(self) -> None:
        rank, rrank = len(_sh(self.input.type)), len(_sh(self.result.type))
        if sorted(_ints(self.first_transpose)) != list(range(rank)):
            _fail(self, f"'first_transpose' must be a permutation of rank {rank}")
        mid = (
            len(_ints(self.reshape))
            if self.reshape is not None
            else (_sh(self.dynamic_reshape.type)[0] if self.dynamic_reshape is not None else rank)
        )
        if sorted(_ints(self.second_transpose)) != list(range(mid if mid is not None else rrank)):
            _fail(self, "'second_transpose' must be a permutation of the reshaped rank")
        if mid is not None and mid != rrank:
            _fail(self, f"expected a result of rank {mid}, got {rrank}")


# =============================================================================================
# Tables, dialects, attribute access

TENSORRT_OPS: dict[str, type[IRDLOperation]] = {
    op.name: op
    for op in (
        ElementWiseOp,
        UnaryOp,
        ActivationOp,
        MatrixMultiplyOp,
        ReduceOp,
        SoftmaxOp,
        SliceOp,
        ReshapeOp,
        TransposeOp,
        BroadcastOp,
        ConcatenationOp,
        GatherOp,
        SelectOp,
        CastOp,
        ConstantOp,
        ShapeOp,
        CollapseRankOp,
        LinspaceOp,
        NormalizationOp,
        ConvolutionOp,
        DeconvolutionOp,
        PoolingOp,
        ResizeNearestOp,
        ResizeLinearOp,
        ResizeCubicOp,
        TopKOp,
        QuantizeOp,
        DequantizeOp,
        OpaquePluginOp,
        IdentityOp,
        ExpandRankOp,
        ShuffleOp,
        YieldOp,
    )
}
"""op name (``tensorrt.reduce``) -> op class."""

TensorRT = Dialect("tensorrt", list(TENSORRT_OPS.values()), [*ENUM_ATTRS.values(), ShapeProfileAttr])
Plan = Dialect("plan", [], [MemorySpaceAttr])


def attr_value(op: IRDLOperation, name: str, resources: Mapping[str, bytes] | None = None):
    """Property (or attribute) ``name`` of ``op`` as a plain Python value; None when absent.

    enum -> ``"kSUM"``; integer -> int; bool -> bool; float -> float; ``array<...>`` -> tuple;
    affine permutation map -> permutation tuple; string -> str; dense elements -> numpy array
    (``dense_resource`` looks its bytes up in ``resources``); dictionary -> dict.
    """
    attr = op.properties.get(name, op.attributes.get(name))
    if attr is None:
        pdef = op.get_irdl_definition().properties.get(name) if isinstance(op, IRDLOperation) else None
        attr = pdef.default_value if pdef is not None else None
    return None if attr is None else to_python(attr, resources)
