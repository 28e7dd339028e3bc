"""``tripy_lab.types`` (Tripy's ``nvtripy.types``): the type aliases used in signatures."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Number
from typing import Union

from tripy_lab.frontend.tensor import DimensionSize, Tensor

TensorLike = Union[Tensor, Number]  # noqa: UP007 - an alias users may pass to isinstance-free annotations
"""A Tensor or a Python number (numbers become tensors; ints next to shapes become DimensionSizes)."""

IntLike = Union[int, DimensionSize]  # noqa: UP007
"""An int or a DimensionSize."""

ShapeLike = Sequence[IntLike]
"""A sequence of ints and/or DimensionSizes; becomes a 1-D int32 shape tensor."""

__all__ = ["IntLike", "ShapeLike", "TensorLike"]
