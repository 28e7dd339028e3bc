"""tensorrt ops: cast, identity, constant, shape, collapse_rank, expand_rank, linspace."""

from __future__ import annotations

from tripy_lab.mlir.ops_base import *  # noqa: F403 - shared imports and syntax helpers of the op modules


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


