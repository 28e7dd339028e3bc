"""tensorrt ops: element_wise, unary, activation, matrix_multiply, reduce, softmax, top_k."""

from __future__ import annotations

from tripy_lab.mlir.ops_base import *  # noqa: F403 - shared imports and syntax helpers of the op modules

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


