"""Device memory of a built engine (issue 29, item 10): one ``MemoryUse`` per built shape, and byte helpers.

Each engine says what its numbers are and where they come from (``MemoryUse.source``): xla, its compiled
executable's ``memory_analysis()``; onnxruntime, its profiler's node events and arena statistics; reference, numpy's
``nbytes``; tensorrt, ``ICudaEngine.device_memory_size`` and the inspector. Per layer, ``LayerRecord.output_bytes``
(what the layer writes) and ``LayerRecord.weight_bytes`` (the weights and constants it reads) where the engine knows
them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

# bits per element of the dtype names the layer tables use (tripy's names, HLO's and ONNX's spelled out)
_BITS = {"bool": 8, "int4": 4, "uint4": 4, "int8": 8, "uint8": 8, "float8": 8, "float8_e5m2": 8, "float4": 4,
         "int16": 16, "uint16": 16, "float16": 16, "bfloat16": 16, "int32": 32, "uint32": 32, "float32": 32,
         "int64": 64, "uint64": 64, "float64": 64}


def array_bytes(shape, dtype: str) -> int | None:
    """Bytes of a dense array of ``shape`` and ``dtype`` (a name in the layer tables); None when a dimension or
    the dtype is unknown. Sub-byte types count packed (two int4 per byte), rounded up."""
    bits = _BITS.get(str(dtype))
    if bits is None or any(d is None or d < 0 for d in shape):
        return None
    return -(-math.prod(shape) * bits // 8)


def fmt_bytes(n: int | None) -> str:
    """``1.5 kB``, ``12.3 MB``: decimal units (1 kB = 1000 B), three significant digits."""
    if n is None:
        return ""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"


@dataclass
class MemoryUse:
    """Memory of one built engine at one input shape.

    ``total``: the engine's own total (bytes); ``parts``: its breakdown, in the engine's words, bytes each;
    ``sums``: whether the parts add up to the total (xla, reference) or are separate facts beside it (onnxruntime:
    the arena's peak is the total, the parts are what it holds and what the layers wrote); ``source``: where the
    numbers come from.
    """

    shape: str  # "opt (x=4x64)" or the signature label
    total: int
    parts: dict[str, int]
    source: str
    sums: bool = True
    notes: list[str] = field(default_factory=list)
    total_name: str = ""  # what the total is, where it is not the parts' sum ("arena peak in use")

    def line(self) -> str:
        """``memory at opt (x=4x64): 45.4 kB = weights 41 kB + inputs 1 kB + ...``"""
        joiner = " + " if self.sums else " · "
        parts = joiner.join(f"{name} {fmt_bytes(n)}" for name, n in self.parts.items() if n)
        total = f"{self.total_name} {fmt_bytes(self.total)}" if self.total_name else fmt_bytes(self.total)
        return f"{self.shape}: {total}" + ((" = " if self.sums else " · ") + parts if parts else "")

    def as_dict(self) -> dict:
        return {"shape": self.shape, "total": self.total, "parts": dict(self.parts), "sums": self.sums,
                "source": self.source, "notes": list(self.notes), "total_name": self.total_name}


def layer_bytes(layer) -> int | None:
    """A layer's memory column: the bytes it writes plus the weights it reads (None when neither is known)."""
    if layer.output_bytes is None and layer.weight_bytes is None:
        return None
    return (layer.output_bytes or 0) + (layer.weight_bytes or 0)
