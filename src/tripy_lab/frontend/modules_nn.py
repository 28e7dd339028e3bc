"""Convolution and normalization layers: Conv, ConvTranspose, BatchNorm, GroupNorm, InstanceNorm
(Tripy's parameter names, shapes and defaults)."""

from __future__ import annotations

from collections.abc import Sequence

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_init, ops_math, ops_shape, shapes
from tripy_lab.frontend.build import make1
from tripy_lab.frontend.checks import FLOAT, check_dtype, check_ints, check_same_dtype, check_tensor
from tripy_lab.frontend.modules import DefaultParameter, Module, module_dataclass
from tripy_lab.frontend.tensor import Tensor


def _int_list(cls: str, param: str, value, n: int, default: int, minimum: int) -> list[int]:
    if value is None:
        return [default] * n
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise_error(f"Invalid value for parameter: '{param}' of '{cls}'.",
                    [f"Expected a sequence of {n} ints, but got: {value!r}."])
    if len(value) != n:  # nvtripy's wording first, then which parameter and what was expected
        raise_error(f"{param.capitalize()} must have the same length as kernel_dims.",
                    [f"Invalid value for parameter: '{param}' of '{cls}': expected {n} entries (one per spatial dim "
                     f"of kernel_dims), but got: {list(value)}."])
    if any(v < minimum for v in value):
        raise_error(f"Non-positive {param} is not supported.",
                    [f"Invalid value for parameter: '{param}' of '{cls}': expected values >= {minimum}, but got: "
                     f"{list(value)}."])
    return list(value)


class _ConvBase(Module):
    _TRANSPOSED = False
    _DTYPES = FLOAT

    def __init__(self, in_channels: int, out_channels: int, kernel_dims, stride=None, padding=None, dilation=None,
                 groups: int | None = None, bias: bool = True, dtype=D.float32):
        super().__init__()
        cls = type(self).__name__
        check_ints(cls, in_channels=in_channels, out_channels=out_channels)
        if not isinstance(kernel_dims, (list, tuple)) or not kernel_dims or not all(
                isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in kernel_dims):
            raise_error(f"Invalid value for parameter: 'kernel_dims' of '{cls}'.",
                        [f"Expected a non-empty sequence of positive ints, but got: {kernel_dims!r}."])
        n = len(kernel_dims)
        groups = 1 if groups is None else groups
        if not isinstance(groups, int) or isinstance(groups, bool) or groups <= 0:
            raise_error("Feature group count must be a positive integer.", [f"Got groups: {groups!r}."])
        if in_channels % groups or out_channels % groups:
            raise_error("Feature group count must divide both input and output channel counts evenly.",
                        [f"Got groups: {groups}, in_channels: {in_channels}, out_channels: {out_channels}."])
        if padding is None:
            padding = [(0, 0)] * n
        if isinstance(padding, (list, tuple)) and len(padding) != n:
            raise_error("Padding must have the same length as kernel_dims.",
                        [f"Invalid value for parameter: 'padding' of '{cls}': expected {n} (before, after) pairs, "
                         f"but got: {padding!r}."])
        if isinstance(padding, (list, tuple)) and any(isinstance(v, int) and v < 0 for p in padding
                                                      if isinstance(p, (list, tuple)) for v in p):
            raise_error("Negative padding is not supported.",
                        [f"Invalid value for parameter: 'padding' of '{cls}': got: {padding!r}."])
        if not isinstance(padding, (list, tuple)) or len(padding) != n or not all(
                isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(v, int) and v >= 0 for v in p)
                for p in padding):
            raise_error("For parameter: 'padding', expected an instance of type: 'Sequence[Tuple[int, int]] | None' "
                        f"but got: {padding!r}.",
                        [f"Invalid value for parameter: 'padding' of '{cls}': expected {n} (before, after) pairs of "
                         "non-negative ints."])
        self.dtype = dtype
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_dims = list(kernel_dims)
        self.stride = _int_list(cls, "stride", stride, n, 1, 1)
        self.padding = [tuple(p) for p in padding]
        self.dilation = _int_list(cls, "dilation", dilation, n, 1, 1)
        self.groups = groups
        if self._TRANSPOSED:
            shape = (in_channels, out_channels // groups, *kernel_dims)
        else:
            shape = (out_channels, in_channels // groups, *kernel_dims)
        # bias first: nvtripy's ConvBase sets it before Conv sets the weight, so str(Conv) and state_dict list it first
        self.bias = DefaultParameter((out_channels,), dtype) if bias else None
        self.weight = DefaultParameter(shape, dtype)

    def forward(self, input):  # noqa: A002 - tripy's parameter name
        cls = type(self).__name__
        check_tensor(cls, "input", input)
        check_dtype(cls, "input", input, self._DTYPES)
        check_same_dtype(cls, ("input", "weight"), (input, self.weight))
        n = len(self.kernel_dims)
        if input.rank != n + 2:
            raise_error("Input and weight should have the same number of spatial dimensions",
                        [f"Input must have a rank of {n + 2} for a {n}D {cls}: expected (N, C, spatial...), but got a "
                         f"tensor of rank {input.rank}."])
        c = input.trace_tensor.shape[1]
        if c is not None and c != self.in_channels:
            raise_error(f"Expected {self.in_channels} channels in the input, but got {c} channels",
                        [f"Layer: {cls}."])
        x, w = input, self.weight
        stride, dilation = list(self.stride), list(self.dilation)
        pre, post = [p[0] for p in self.padding], [p[1] for p in self.padding]
        if n == 1:  # the layer is 2-D or 3-D: treat a 1-D conv as (L, 1)
            x, w = ops_shape.unsqueeze(x, -1), ops_shape.unsqueeze(w, -1)
            stride, dilation, pre, post = stride + [1], dilation + [1], pre + [0], post + [0]
        inputs = [x, w] + ([self.bias] if self.bias is not None else [])
        params = {"stride": tuple(stride), "pre_padding": tuple(pre), "post_padding": tuple(post),
                  "dilation": tuple(dilation), "groups": self.groups}
        out = make1("deconv" if self._TRANSPOSED else "conv", inputs, params)
        return ops_shape.squeeze(out, -1) if n == 1 else out


@module_dataclass
class Conv(_ConvBase):
    """N-D cross-correlation of (N, C, D...) inputs; weight (out, in/groups, *kernel_dims), bias (out,)."""

    dtype: D.dtype
    weight: Tensor
    padding: Sequence[tuple[int, int]]
    stride: Sequence[int]
    groups: int
    dilation: Sequence[int]
    bias: Tensor | None


@module_dataclass
class ConvTranspose(_ConvBase):
    """Transposed convolution; weight (in, out/groups, *kernel_dims), bias (out,)."""

    dtype: D.dtype
    weight: Tensor
    padding: Sequence[tuple[int, int]]
    stride: Sequence[int]
    groups: int
    dilation: Sequence[int]
    bias: Tensor | None

    _TRANSPOSED = True
    _DTYPES = (D.float32, D.float16)


def _channel_view(p: Tensor, rank: int) -> Tensor:
    """A (C,) parameter as (1, C, 1, ...) for an input of ``rank``."""
    return ops_shape.reshape(p, [1, -1] + [1] * (rank - 2))


@module_dataclass
class BatchNorm(Module):
    """Inference batch norm: (x - running_mean) * rsqrt(running_var + eps) * weight + bias, per channel."""

    num_features: int
    dtype: D.dtype
    eps: float
    weight: Tensor
    bias: Tensor
    running_mean: Tensor
    running_var: Tensor

    def __init__(self, num_features: int, dtype=D.float32, eps: float = 1e-5):
        super().__init__()
        check_ints("BatchNorm", num_features=num_features)
        self.num_features = num_features
        self.dtype = dtype
        self.eps = eps
        self.weight = DefaultParameter((num_features,), dtype)
        self.bias = DefaultParameter((num_features,), dtype)
        self.running_mean = DefaultParameter((num_features,), dtype)
        self.running_var = DefaultParameter((num_features,), dtype)

    def forward(self, x):
        check_tensor("BatchNorm", "x", x)
        check_dtype("BatchNorm", "x", x, FLOAT)
        if x.rank < 2:
            raise_error(f"Input must have a rank of at least 2, but got input of rank: {x.rank}",
                        ["Layer: BatchNorm (the channels are dim 1)."])
        mean, var = _channel_view(self.running_mean, x.rank), _channel_view(self.running_var, x.rank)
        weight, bias = _channel_view(self.weight, x.rank), _channel_view(self.bias, x.rank)
        scale = ops_math.mul(ops_math.rsqrt(ops_math.add(var, self.eps)), weight)
        return ops_math.add(ops_math.mul(ops_math.sub(x, mean), scale), bias)


def _check_norm_input(cls: str, x, channels: int) -> None:
    check_tensor(cls, "x", x)
    check_dtype(cls, "x", x, FLOAT)
    if x.rank < 3:
        raise_error(f"Input must have a rank of at least 3, but got input of rank: {x.rank}",
                    [f"Layer: {cls} (the channels are dim 1, spatial dims follow)."])
    c = x.trace_tensor.shape[1]
    if c is not None and c != channels:
        raise_error(f"Expected {channels} channels in the input, but got {c} channels", [f"Layer: {cls}."])


@module_dataclass
class InstanceNorm(Module):
    """Per-sample, per-channel normalization over the spatial dims, then weight/bias per channel."""

    num_channels: int
    dtype: D.dtype
    weight: Tensor
    bias: Tensor
    eps: float

    def __init__(self, num_channels: int, dtype=D.float32, eps: float = 1e-5):
        super().__init__()
        check_ints("InstanceNorm", num_channels=num_channels)
        self.num_channels = num_channels
        self.dtype = dtype
        self.eps = eps
        self.weight = DefaultParameter((num_channels,), dtype)
        self.bias = DefaultParameter((num_channels,), dtype)

    def forward(self, x):
        _check_norm_input("InstanceNorm", x, self.num_channels)
        check_same_dtype("InstanceNorm", ("x", "weight"), (x, self.weight))
        params = {"dims": tuple(range(2, x.rank)), "eps": float(self.eps), "num_groups": self.num_channels}
        return make1("instance_norm", [x, _channel_view(self.weight, x.rank), _channel_view(self.bias, x.rank)],
                     params)


@module_dataclass
class GroupNorm(Module):
    """Normalize each group of num_channels / num_groups channels (with its spatial dims), then weight/bias."""

    num_groups: int
    num_channels: int
    dtype: D.dtype
    weight: Tensor
    bias: Tensor
    eps: float

    def __init__(self, num_groups: int, num_channels: int, dtype=D.float32, eps: float = 1e-5):
        super().__init__()
        check_ints("GroupNorm", num_groups=num_groups, num_channels=num_channels)
        if num_groups <= 0 or num_channels % num_groups:
            raise_error("Number of groups must divide number of channels evenly.",
                        [f"Got {num_groups} groups but {num_channels} channels."])
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.dtype = dtype
        self.eps = eps
        self.weight = DefaultParameter((num_channels,), dtype)
        self.bias = DefaultParameter((num_channels,), dtype)

    def forward(self, x):
        _check_norm_input("GroupNorm", x, self.num_channels)
        check_same_dtype("GroupNorm", ("x", "weight"), (x, self.weight))
        g = self.num_groups
        dims = shapes.shape_dims(x)
        grouped = ops_shape.reshape(x, [dims[0], g, -1])
        ones, zeros = ops_init.ones((1, g, 1), x.dtype), ops_init.zeros((1, g, 1), x.dtype)
        normed = make1("instance_norm", [grouped, ones, zeros], {"dims": (2,), "eps": float(self.eps), "num_groups": g})
        out = ops_shape.reshape(normed, dims)
        return ops_math.add(ops_math.mul(out, _channel_view(self.weight, x.rank)), _channel_view(self.bias, x.rank))
