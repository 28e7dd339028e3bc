"""The Trace: a pure-data graph of ops and tensors. No numpy math, no MLIR, no engines here."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from tripy_lab.core import dtypes
from tripy_lab.core.source import SourceLocation

_counter = itertools.count()


def fresh_name() -> str:
    return f"%t{next(_counter)}"


@dataclass(eq=False, slots=True)  # no __dict__: one allocation less per tensor/op
class TraceTensor:
    """A value in the graph. ``shape`` holds ints where known and None for dynamic dims."""

    shape: tuple[int | None, ...]
    dtype: dtypes.dtype
    producer: TraceOp | None = None
    location: SourceLocation | None = None
    name: str = field(default_factory=fresh_name)
    # Known small integer value (shape arithmetic folded at trace time), or None.
    value: Any = None
    # A shape value (a DimensionSize or a shape tensor): 0-d int32 ones surface as DimensionSize.
    is_shape: bool = False
    # For 1-D shape tensors whose entries are partly known: an int per known entry, None elsewhere.
    known: tuple | None = None
    # Traced from a compile input (nvtripy's rule: then `Tensor.shape` gives DimensionSizes, even for static dims).
    is_compile_tracer: bool = False

    @property
    def rank(self) -> int:
        return len(self.shape)

    def type_str(self) -> str:
        key = (self.shape, self.dtype)
        text = _TYPE_STRS.get(key)
        if text is None:  # every op's listing shows its types: format each (shape, dtype) once
            dims = "x".join("?" if d is None else str(d) for d in self.shape)
            text = f"tensor<{dims + 'x' if dims else ''}{self.dtype.shortname}>"
            if len(_TYPE_STRS) >= 1 << 14:
                _TYPE_STRS.clear()
            _TYPE_STRS[key] = text
        return text


_TYPE_STRS: dict[tuple, str] = {}


@dataclass(frozen=True, eq=False)
class CallScope:
    """One public frontend call: its name as the user wrote it (``"__getitem__"``, ``"softmax"``) and the user's
    line; identity (``is``) tells two calls on the same line apart."""

    name: str
    location: SourceLocation | None = None


@dataclass(eq=False, slots=True)  # no __dict__: one allocation less per tensor/op
class TraceOp:
    """One op: ``kind`` is its row in the op table; ``params`` holds op-specific plain data."""

    kind: str
    inputs: list[TraceTensor]
    outputs: list[TraceTensor]
    params: dict[str, Any] = field(default_factory=dict)
    location: SourceLocation | None = None
    # Where the op came from, for folding views: the dotted path of the innermost tp.Module whose forward
    # recorded it, by state_dict names ("h.3.attn.c_attn"; "" outside any module) ...
    module: str = ""
    # ... and the one public frontend call that recorded it (a `x[:, :n]`, a `tp.softmax`): every op that call
    # made shares the same CallScope, so index arithmetic folds into its slice. None: not recorded.
    call: CallScope | None = None

    @property
    def name(self) -> str:
        """Stable name of the op: the name of its first output."""
        return self.outputs[0].name

    def params_str(self) -> str:
        shown = []
        for key, val in self.params.items():
            if key == "value":
                val = _short_value(val)
            shown.append(f"{key}={val}")
        return ", ".join(shown)

    def tensor_names(self) -> tuple[str, ...]:
        """Names of the inputs, then of the outputs (what ``listing`` prints)."""
        return tuple([t.name for t in (*self.inputs, *self.outputs)])

    def listing(self, names: tuple[str, ...] | None = None) -> str:
        """The op's line in the trace listing; ``names`` (from ``tensor_names``) stands in for the current ones."""
        if names is None:
            names = self.tensor_names()
        n = len(self.inputs)
        args = [f"{name} : {t.type_str()}" for name, t in zip(names, self.inputs)]
        if self.params:
            args.append(self.params_str())
        types = ", ".join([t.type_str() for t in self.outputs])
        return f"{', '.join(names[n:])} = {self.kind}({', '.join(args)}) : {types}"

    def scope_str(self) -> str:
        """Where the op came from, as the trace listing's comment: ``h.3.attn · softmax @ model.py:12``."""
        scope = " · ".join([part for part in (self.module, self.call.name if self.call else "") if part])
        where = self.location.short if self.location else ""
        return f"{scope} @ {where}" if scope and where else scope or where

    def __str__(self) -> str:
        return self.listing()


def _short_value(val) -> str:
    size = getattr(val, "size", 1)
    if size > 8:
        return f"<{size} values>"
    tolist = getattr(val, "tolist", None)
    return str(tolist() if tolist else val)
