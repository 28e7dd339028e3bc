"""Tripy-compatible frontend: Tensor, DimensionSize, ops, Modules. Builds trace ops; never runs them."""

from tripy_lab.frontend import ops
from tripy_lab.frontend.modules import Embedding, LayerNorm, Linear, Module, Sequential
from tripy_lab.frontend.modules_nn import BatchNorm, Conv, ConvTranspose, GroupNorm, InstanceNorm
from tripy_lab.frontend.tensor import DimensionSize, Tensor, set_evaluator

__all__ = ["DimensionSize", "Embedding", "LayerNorm", "Linear", "Module", "Sequential", "Tensor", "ops",
           "set_evaluator", "BatchNorm", "Conv", "ConvTranspose", "GroupNorm", "InstanceNorm"]
