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

from tripy_lab.mlir.ops_base import *  # noqa: F403 - shared imports and syntax helpers of the op modules
from tripy_lab.mlir.ops_data import *  # noqa: F403
from tripy_lab.mlir.ops_layers import *  # noqa: F403
from tripy_lab.mlir.ops_math import *  # noqa: F403
from tripy_lab.mlir.ops_shape import *  # noqa: F403

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
