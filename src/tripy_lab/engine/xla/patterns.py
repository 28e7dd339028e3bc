"""MLIR walking helpers the pattern rewrites (``attention``, ``linear``) share."""

from __future__ import annotations


def producer(value):
    """The tensorrt op that defines ``value``, or None (a block argument or another dialect's op)."""
    owner = getattr(value, "owner", None)
    return owner if getattr(owner, "name", "").startswith("tensorrt.") else None


def attr(op, name, default=None):
    """Attribute ``name`` of ``op`` as a plain Python value, or ``default`` where it is absent."""
    from tripy_lab.mlir.dialect import attr_value

    v = attr_value(op, name)
    return default if v is None else v
