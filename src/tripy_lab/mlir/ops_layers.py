"""tensorrt ops: normalization, convolution, deconvolution, pooling, resize, quantize, plugin, shuffle."""

from __future__ import annotations

import functools

from tripy_lab.mlir.ops_base import *  # noqa: F403 - shared imports and syntax helpers of the op modules
from tripy_lab.mlir.ops_math import _check_axes

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


@functools.lru_cache(maxsize=256)
def _groups_attr(n: int) -> IntegerAttr:
    # one immutable attribute per group count: building one verifies it (~40 us, every convolution)
    return IntegerAttr(n, UI32)


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
            "num_groups": _groups_attr(int(num_groups)),
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


