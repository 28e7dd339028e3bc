"""The tensorrt engine's layer table, plain Python (tested without TensorRT).

:func:`layer_records` turns the JSON of ``IEngineInspector.get_engine_information(LayerInformationFormat.JSON)``
into :class:`~tripy_lab.engine.base.LayerRecord` rows. Every layer we add is named ``<op>_<index>`` (plus
``.<role>`` for helper layers, see :func:`layer_name`) and its metadata is the op's location name (the trace
op, e.g. ``%t5``), so fused engine layers map back to the MLIR ops, trace ops and user lines they came from.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tripy_lab.engine.base import LayerRecord
from tripy_lab.engine.memory import array_bytes


def layer_name(op_name: str, index: int, role: str | None = None) -> str:
    """``element_wise_3`` for the layer of MLIR op 3; ``broadcast_4.expand`` for a helper layer."""
    base = f"{op_name.removeprefix('tensorrt.')}_{index}"
    return f"{base}.{role}" if role else base


def op_loc_name(op) -> str | None:
    """The name of an op's ``NameLoc`` (the trace op, e.g. ``%t5``), or None."""
    loc = getattr(op, "location", None)
    for attr in ("desc", "name"):  # xDSL keeps the NameLoc string in ``desc``
        data = getattr(getattr(loc, attr, None), "data", None)
        if isinstance(data, str):
            return data
    return None


@dataclass(frozen=True)
class ProgramIndex:
    """What the layer table needs from a program: op kinds, their trace ops, and user lines."""

    op_kinds: tuple[str, ...]  # short op names by index into program.ops(): "element_wise"
    op_locs: tuple[str | None, ...]  # trace op (loc name) by index: "%t5"
    lines: Mapping[str, str] = field(default_factory=dict)  # trace op -> "cell:3"

    @classmethod
    def from_program(cls, program) -> ProgramIndex:
        ops = program.ops()
        locs = [op_loc_name(op) for op in ops]
        lines = {name: o.line for name, o in program.origins.items() if o.line}
        return cls(tuple(op.name.removeprefix("tensorrt.") for op in ops), tuple(locs), lines)


_SEPARATORS = re.compile(r"[\x1e\x1f\n]")
_DTYPE_WORDS = [  # order matters: longest/most specific first
    ("bfloat16", "bfloat16"), ("bf16", "bfloat16"), ("fp32", "float32"), ("float", "float32"),
    ("fp16", "float16"), ("half", "float16"), ("fp8", "float8"), ("fp4", "float4"), ("uint8", "uint8"),
    ("int64", "int64"), ("int32", "int32"), ("int8", "int8"), ("int4", "int4"), ("bool", "bool"),
]


def parse_datatype(text: str) -> str:
    """The tripy dtype name in an inspector ``Format/Datatype`` string ("Row major linear FP32")."""
    low = text.lower()
    for word, name in _DTYPE_WORDS:
        if re.search(rf"(?<![a-z0-9]){word}(?![a-z0-9])", low):
            return name
    return ""


_FRIENDLY = [  # (substring of LayerType, kind shown); first match wins
    ("reformat", "copy"), ("noop", "no-op"), ("gemm", "GEMM"), ("matrixmultiply", "GEMM"),
    ("deconvolution", "deconvolution"), ("convolution", "convolution"), ("pointwise", "pointwise"),
    ("myelin", "fused subgraph"), ("kgen", "fused subgraph"),
    ("fusion", "fused subgraph"), ("foreignnode", "fused subgraph"),
    ("elementwise", "element_wise"), ("softmax", "softmax"), ("reduce", "reduce"), ("shuffle", "shuffle"),
    ("slice", "slice"), ("pooling", "pooling"), ("plugin", "plugin"), ("constant", "constant"),
    ("shape", "shape"), ("gather", "gather"), ("select", "select"), ("topk", "top_k"), ("resize", "resize"),
    ("normalization", "normalization"), ("fill", "fill"), ("cast", "cast"), ("concatenation", "concatenation"),
    ("quantize", "quantize"), ("unary", "unary"), ("activation", "activation"),
]


def layer_kind(layer_type: str, n_fused: int = 1) -> str:
    """A readable kind for an engine layer type, e.g. ``"GEMM (CaskGemmMatrixMultiply)"``."""
    if not layer_type:
        return "unknown"
    low = layer_type.lower()
    kind = next((k for sub, k in _FRIENDLY if sub in low), layer_type)
    if kind == "pointwise" and n_fused > 1:
        kind = "pointwise fusion"
    return kind if kind == layer_type else f"{kind} ({layer_type})"


class _Resolver:
    """Maps engine layer names and metadata back to MLIR op indices and trace ops."""

    def __init__(self, index: ProgramIndex):
        self.index = index
        kinds = sorted(set(index.op_kinds), key=len, reverse=True)
        self.name_re = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, kinds)) + r")_(\d+)(?![0-9])") \
            if kinds else None
        locs = sorted({loc for loc in index.op_locs if loc}, key=len, reverse=True)
        self.loc_set = set(locs)
        self.loc_re = re.compile("(" + "|".join(map(re.escape, locs)) + r")(?![A-Za-z0-9_])") if locs else None

    def op_indices(self, name: str) -> list[int]:
        if self.name_re is None:
            return []
        out: list[int] = []
        prev_end, prev_idx = None, None
        for m in self.name_re.finditer(name):
            i = int(m.group(2))
            if i >= len(self.index.op_kinds) or self.index.op_kinds[i] != m.group(1):
                continue
            # "{ForeignNode[a_3...b_9]}": a range of layers fused into one; layers are added in op order
            if prev_idx is not None and name[prev_end:m.start()] == "..." and i > prev_idx:
                out.extend(range(prev_idx + 1, i))
            out.append(i)
            prev_end, prev_idx = m.end(), i
        return list(dict.fromkeys(out))

    def metadata_locs(self, metadata: str) -> list[str]:
        found: list[str] = []
        for piece in _SEPARATORS.split(metadata or ""):
            piece = piece.strip()
            if not piece:
                continue
            if piece in self.loc_set:
                found.append(piece)
            elif self.loc_re is not None:
                found.extend(m.group(1) for m in self.loc_re.finditer(piece))
        return list(dict.fromkeys(found))


def _dims(t: Mapping) -> tuple[int | None, ...]:
    dims = t.get("Dimensions", [])
    return tuple(None if int(d) < 0 else int(d) for d in dims) if isinstance(dims, list) else ()


def _weight_bytes(layer: Mapping) -> int | None:
    """Bytes of a layer's ``Weights``/``Bias`` entries (``{"Type": "Float", "Count": 864}``, detailed verbosity)."""
    found = [w for key in ("Weights", "Bias") if isinstance(w := layer.get(key), Mapping) and "Count" in w]
    sizes = [array_bytes((int(w["Count"]),), parse_datatype(str(w.get("Type", "")))) for w in found]
    return None if not found or None in sizes else sum(sizes)


def layer_records(info: str | Mapping, index: ProgramIndex) -> list[LayerRecord]:
    """Rows of the engine's layer table from the inspector's JSON (``{"Layers": [...], ...}``), with the bytes of
    their outputs where every dimension is static and of their weights where the inspector lists them.

    With ``ProfilingVerbosity.LAYER_NAMES_ONLY`` the ``Layers`` list holds plain names; the rows then
    carry names and source ops only.
    """
    data = json.loads(info) if isinstance(info, str) else info
    layers = data.get("Layers", []) if isinstance(data, Mapping) else data
    resolve = _Resolver(index)
    rows = []
    for layer in layers:
        if isinstance(layer, str):
            layer = {"Name": layer}
        name = str(layer.get("Name", ""))
        mlir_ops = resolve.op_indices(name)
        locs = resolve.metadata_locs(str(layer.get("Metadata", "")))
        for i in mlir_ops:
            loc = index.op_locs[i]
            if loc and loc not in locs:
                locs.append(loc)
        lines = tuple(dict.fromkeys(index.lines[loc] for loc in locs if index.lines.get(loc)))
        outputs = [o for o in layer.get("Outputs", []) if isinstance(o, Mapping)]
        tactic = layer.get("TacticName") or layer.get("TacticValue") or ""
        sizes = [array_bytes(_dims(o), parse_datatype(str(o.get("Format/Datatype", "")))) for o in outputs]
        rows.append(LayerRecord(
            name=name, kind=layer_kind(str(layer.get("LayerType", "")), max(len(mlir_ops), len(locs))),
            source_ops=tuple(locs), source_lines=lines, output_shapes=tuple(_dims(o) for o in outputs),
            output_dtypes=tuple(parse_datatype(str(o.get("Format/Datatype", ""))) for o in outputs),
            kernel=str(tactic), mlir_ops=tuple(mlir_ops),
            output_bytes=None if not sizes or None in sizes else sum(sizes), weight_bytes=_weight_bytes(layer)))
    return rows
