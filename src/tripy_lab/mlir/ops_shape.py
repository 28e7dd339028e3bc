"""tensorrt ops: slice, reshape, transpose, broadcast, concatenation, gather, select."""

from __future__ import annotations

from tripy_lab.mlir.ops_base import *  # noqa: F403 - shared imports and syntax helpers of the op modules

# =============================================================================================
# Shape manipulation: slice, reshape, transpose, broadcast, concatenation, gather, select, ...


def _dyn_or_static(v) -> tuple[SSAValue | None, DenseArrayBase | None]:
    if type(v) in (list, tuple):  # the lowering's static bounds; isinstance(v, SSAValue) goes through ABCMeta
        return None, dense_array([int(x) for x in v], "i32")
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


