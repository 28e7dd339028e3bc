"""MLIR (tensorrt dialect) -> ONNX model. The op table is ``ops.TABLE``; this module walks the program.

What the model looks like
-------------------------
* **One graph for the whole profile.** Dynamic dims stay symbolic: an input dim that a ``NamedDimension``
  names gets that name (so every input sharing it shares the ONNX ``dim_param``), other dynamic dims are
  ``<param>_<i>``. Shape arithmetic (``tensorrt.shape``, slices of shapes, ...) becomes ONNX ops
  (``Shape``, ``Slice``, ``Concat``) evaluated by the runtime, so one session runs every shape.
* DimensionInputInfo arguments are scalar ``int32`` graph inputs.
* Constants are initializers; equal payloads (a weight shared by two layers) are stored once.
* Node names carry the MLIR op, the trace op and the user's line: ``%t5 element_wise#3 @ model.py:12``
  (``#3`` = index in ``program.ops()``); helper nodes of one MLIR op add ``/2``, ``/3``... Every ONNX tensor
  an MLIR op makes is named ``t5_op3`` / ``t5_op3_h2``, so fused nodes in an optimized model can be mapped
  back through the tensors they consume and produce (``node_sources``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.onnx import fold
from tripy_lab.engine.onnx.dims import DimClasses

OPSET = 21  # ai.onnx opset: the newest that onnxruntime >= 1.18 runs on every op used here (int4 Q/DQ, Gelu)
IR_VERSION = 10  # the IR version that goes with opset 21

_ONNX_ELEM = {"i1": "BOOL", "i4": "INT4", "i8": "INT8", "ui8": "UINT8", "i32": "INT32", "i64": "INT64",
              "ui32": "UINT32", "f16": "FLOAT16", "bf16": "BFLOAT16", "f32": "FLOAT", "f64": "DOUBLE",
              "f8E4M3FN": "FLOAT8E4M3FN", "f4E2M1FN": "FLOAT4E2M1"}


def onnx_elem(elem: str) -> int:
    """MLIR element type spelling -> ``onnx.TensorProto`` data type."""
    from onnx import TensorProto

    if elem not in _ONNX_ELEM:
        raise TripyException(f"The ONNX lowering has no element type for MLIR type {elem!r}.",
                             [f"Supported: {', '.join(_ONNX_ELEM)}."])
    return getattr(TensorProto, _ONNX_ELEM[elem])


def tensor_name(trace_name: str, index: int) -> str:
    base = re.sub(r"[^A-Za-z0-9_]", "_", trace_name or "").strip("_") or "anon"
    return f"{base}_op{index}"


def input_dim_names(name: str, info, rank: int) -> list[str | None]:
    """ONNX ``dim_param`` per dim of an input: the NamedDimension's name, ``<param>_<i>`` or None (static)."""
    if not isinstance(info, InputInfo):
        return [None] * rank
    b = info.shape_bounds
    out: list[str | None] = []
    for i in range(rank):
        if i in info.dimension_names:
            out.append(info.dimension_names[i])
        elif b.min[i] != b.max[i]:
            out.append(f"{re.sub(r'[^A-Za-z0-9_]', '_', name)}_{i}")
        else:
            out.append(None)
    return out


@dataclass
class OnnxLowering:
    """The ONNX model of a program, with the maps back to MLIR ops, trace ops and user lines."""

    model: Any  # onnx.ModelProto
    input_names: list[str]
    output_names: list[str]
    node_origin: dict[str, int]  # ONNX node name -> MLIR op index
    tensor_origin: dict[str, int]  # ONNX tensor name -> MLIR op index that made it
    op_info: dict[int, tuple[str, str, str]]  # MLIR op index -> (mlir op name, trace op, user line)
    dim_params: dict[str, list[str | None]]  # input name -> dim_param per dim
    notes: list[str] = field(default_factory=list)

    def origin_of_node(self, name: str) -> int | None:
        """MLIR op index of a node name; onnxruntime's fusions name a node ``<first node>/<FusionName>``."""
        while name:
            if name in self.node_origin:
                return self.node_origin[name]
            name = name.rpartition("/")[0]
        return None

    def node_sources(self, inputs, outputs) -> list[int]:
        """MLIR op indices computed between ``inputs`` and ``outputs`` of a (fused) node: the ops the
        outputs depend on, less those the inputs already depend on."""
        made = {self.tensor_origin[t] for t in outputs if t in self.tensor_origin}
        if not made:
            return []
        before = self._ancestors({self.tensor_origin[t] for t in inputs if t in self.tensor_origin})
        return sorted(self._ancestors(made) - before)

    def _ancestors(self, ops: set[int]) -> set[int]:
        if not hasattr(self, "_deps"):  # MLIR op index -> indices of the ops whose results it reads
            self._deps: dict[int, set[int]] = {}
            for node in self.model.graph.node:
                i = self.node_origin.get(node.name)
                if i is None:
                    continue
                self._deps.setdefault(i, set()).update(
                    self.tensor_origin[t] for t in node.input if t in self.tensor_origin and self.tensor_origin[t] != i)
        seen, stack = set(), list(ops)
        while stack:
            i = stack.pop()
            if i in seen:
                continue
            seen.add(i)
            stack.extend(self._deps.get(i, ()))
        return seen


# ONNX ops that only move data -> which inputs are the data ("all": every input)
_MOVEMENT: dict[str, object] = {"Reshape": [0], "Expand": [0], "Identity": [0], "Transpose": [0], "Concat": "all",
                                "Slice": [0], "Gather": [0], "Squeeze": [0], "Unsqueeze": [0], "Where": [1, 2],
                                "Tile": [0]}
_CARRIER_ELEM = {"bf16": "f32", "f8E4M3FN": "f32", "f4E2M1FN": "f32", "i4": "i8"}
_WHERE_ELEMS = {"f32", "f64", "i32", "i64", "ui8", None}  # onnxruntime's CPU Where kernels
_WHERE_CARRIER = {"i1": "ui8", "f16": "f32", "bf16": "f32", "i8": "i32", "i4": "i32", "ui32": "i64",
                  "f8E4M3FN": "f32", "f4E2M1FN": "f32"}


class OpLowering:
    """What a table entry may ask while it lowers one MLIR op (``ops``' ``ctx``)."""

    def __init__(self, builder: _GraphBuilder, op, index: int, trace_name: str, line: str, location):
        self.b = builder
        self.op = op
        self.index = index
        self.trace_name = trace_name
        self.line = line
        self.location = location
        self._n = 0

    # --- operands, attributes, types
    def operand(self, name: str) -> str | None:
        v = getattr(self.op, name, None)
        if isinstance(v, (tuple, list)):
            v = v[0] if v else None
        return None if v is None else self.b.names[v]

    def operands(self, name: str) -> list[str]:
        v = getattr(self.op, name, None)
        if v is None:
            return []
        return [self.b.names[x] for x in (v if isinstance(v, (tuple, list)) else (v,))]

    def operand_value(self, name: str):
        v = getattr(self.op, name, None)
        return v[0] if isinstance(v, (tuple, list)) and v else v

    def attr(self, name: str, default=None):
        from tripy_lab.mlir.dialect import attr_value

        v = attr_value(self.op, name, self.b.program.resources)
        return default if v is None else v

    def elem(self, value) -> str:
        from tripy_lab.mlir.attrs import elem_of

        return elem_of(value.type)

    def shape(self, value) -> tuple[int | None, ...]:
        from tripy_lab.mlir.attrs import shape_of

        return shape_of(value.type)

    def result_elem(self, i: int = 0) -> str:
        return self.elem(self.op.results[i])

    def result_shape(self, i: int = 0) -> tuple[int | None, ...]:
        return self.shape(self.op.results[i])

    # --- emitting
    def node(self, op_type: str, inputs, outputs: int = 1, **attrs) -> str | list[str]:
        """Emit one ONNX node; returns its output name (a list when ``outputs`` > 1).

        Data-movement nodes on bf16/f8/f4/int4 data (onnxruntime has no kernels for those types) run on the
        exact carrier type between two Casts; the graph stays typed as the program says.
        """
        known = None
        if outputs == 1:
            known = fold.evaluate(op_type, [self.b.known.get(i) for i in inputs], attrs)
            if known is not None and fold.full(known) is not None:  # computed now, not on every call
                return self.const(known[0].astype(self._known_dtype(op_type, inputs, attrs)))
        out = self._node(op_type, inputs, outputs, attrs)
        if outputs == 1 and known is not None:
            self.b.known[out] = known
            self.b.known_dtype[out] = self._known_dtype(op_type, inputs, attrs)
        return out

    def shape_node(self, value) -> str:
        """The shape of an MLIR ``value``: static dims are numbers, each dynamic dim is read from the first
        tensor of its class (``dims``), so equal shapes are equal nodes that onnxruntime computes once."""
        dims = self.shape(value)
        known = fold.of_shape(dims)
        if fold.full(known) is not None:
            return self.const(known[0])
        pieces = []
        for d, n in enumerate(dims):
            if n is not None:
                pieces.append(self.ints([n]))
                continue
            root = self.b.dims.find(self.b.dims.key(value, d))
            if root not in self.b.dims.dim_node:
                src, sd = self.b.dims.source.get(root, (self.b.names[value], d))
                out = self._node("Shape", [src], 1, {"start": sd, "end": sd + 1})
                self.b.known[out], self.b.known_dtype[out] = fold.unknown_scalar_vector(root), np.int64
                self.b.dims.dim_node[root] = out
            pieces.append(self.b.dims.dim_node[root])
        return pieces[0] if len(pieces) == 1 else self.node("Concat", pieces, axis=0)

    def known(self, name: str):
        """The partial value (``fold``) of a small integer tensor, or None."""
        return self.b.known.get(name)

    def _known_dtype(self, op_type: str, inputs, attrs: dict):
        if op_type == "Cast":
            return fold._ONNX_INT[attrs["to"]]
        if op_type in ("Equal", "Less", "Greater", "And", "Or", "Not"):
            return np.bool_
        return self.b.known_dtype.get(inputs[0], np.int64)

    def _node(self, op_type: str, inputs, outputs: int, attrs: dict) -> str | list[str]:
        data = _MOVEMENT.get(op_type)
        if data is not None:
            data = [k for k in (range(len(inputs)) if data == "all" else data) if k < len(inputs)]
            elem = self.b.elem_of.get(inputs[data[0]]) if data else None
            carrier = _CARRIER_ELEM.get(elem)
            if op_type == "Where" and elem not in _WHERE_ELEMS:
                carrier = _WHERE_CARRIER.get(elem, carrier)
            if carrier is not None:
                inputs = list(inputs)
                for k in data:
                    inputs[k] = self._emit("Cast", [inputs[k]], 1, {"to": onnx_elem(carrier)})
                out = self._emit(op_type, inputs, 1, attrs)
                out = self._emit("Cast", [out], 1, {"to": onnx_elem(elem)})
                self.b.elem_of[out] = elem
                return out
            out = self._emit(op_type, inputs, outputs, attrs)
            if elem is not None and outputs == 1:
                self.b.elem_of[out] = elem
            return out
        return self._emit(op_type, inputs, outputs, attrs)

    def _emit(self, op_type: str, inputs, outputs: int, attrs: dict) -> str | list[str]:
        from onnx import helper

        self._n += 1
        suffix = "" if self._n == 1 else f"/{self._n}"
        kind = self.op.name.removeprefix("tensorrt.")
        name = f"{self.trace_name or '?'} {kind}#{self.index}{suffix}" + (f" @ {self.line}" if self.line else "")
        base = tensor_name(self.trace_name, self.index)
        outs = [f"{base}_h{self._n}_{k}" for k in range(outputs)]
        self.b.nodes.append(helper.make_node(op_type, [i or "" for i in inputs], outs, name=name,
                                             **{k: v for k, v in attrs.items() if v is not None}))
        self.b.node_origin[name] = self.index
        for o in outs:
            self.b.tensor_origin[o] = self.index
        return outs[0] if outputs == 1 else outs

    def const(self, value, dtype=None) -> str:
        """An initializer holding ``value`` (shared with every equal constant)."""
        array = np.asarray(value, dtype=dtype)
        name = self.b.initializer(array)
        known = fold.of_array(array)
        if known is not None:
            self.b.known[name], self.b.known_dtype[name] = known, array.dtype.type
        return name

    def ints(self, values) -> str:
        return self.const(np.asarray(values, dtype=np.int64).reshape(-1))

    def cast(self, name: str, elem: str) -> str:
        return self.node("Cast", [name], to=onnx_elem(elem))

    def error(self, summary: str, details=()) -> TripyException:
        where = f"{self.op.name} (MLIR op #{self.index}"
        where += f", trace op {self.trace_name}" if self.trace_name else ""
        where += f", {self.line})" if self.line else ")"
        return TripyException(f"ONNX lowering: {summary}", [f"In {where}.", *details], self.location,
                              op=self.trace_name or None)


class _GraphBuilder:
    def __init__(self, program):
        self.program = program
        self.nodes: list = []
        self.inits: list = []
        self._init_keys: dict[tuple, list] = {}
        self.names: dict = {}  # MLIR SSA value -> ONNX tensor name
        self.elem_of: dict[str, str] = {}  # ONNX tensor name -> MLIR element type, where known
        self.node_origin: dict[str, int] = {}
        self.tensor_origin: dict[str, int] = {}
        self.known: dict[str, tuple] = {}  # ONNX tensor name -> partial value (fold), small int tensors only
        self.known_dtype: dict[str, type] = {}
        self.dims = DimClasses()

    def initializer(self, array: np.ndarray) -> str:
        """The initializer holding ``array``; an equal array (a weight shared by two layers) reuses it.

        Candidates are found by dtype, shape and a strided sample of the values (cheap for 100 MB weights),
        then confirmed by a full comparison.
        """
        from onnx import numpy_helper

        array = np.asarray(array, order="C")  # (not ascontiguousarray: it makes 0-d arrays 1-d)
        flat = array.reshape(-1)
        sample = flat[:: max(1, flat.size // 1024)]
        digest = hashlib.blake2b(sample.tobytes() + flat[-1:].tobytes(), digest_size=16).hexdigest()
        key = (array.dtype.str, array.dtype.name, array.shape, digest)
        for name, seen in self._init_keys.get(key, ()):
            if seen is array or np.array_equal(seen, array):
                return name
        name = f"const_{len(self.inits)}"
        self._init_keys.setdefault(key, []).append((name, array))
        self.inits.append(numpy_helper.from_array(array, name))
        return name


def lower_to_onnx(program, graph_name: str = "main") -> OnnxLowering:
    """The ONNX model of ``program.main()``; a TripyException names the op and user line it cannot lower."""
    from onnx import helper

    from tripy_lab.engine.onnx.ops import TABLE
    from tripy_lab.mlir.attrs import elem_of, loc_name, shape_of

    b = _GraphBuilder(program)
    main = program.main()
    block_args = list(main.body.block.args)
    arg_names = list(program.arg_names) or [f"arg{i}" for i in range(len(block_args))]
    inputs, dim_params, named = [], {}, {}
    for name, arg in zip(arg_names, block_args):
        info = program.input_infos.get(name)
        shape = shape_of(arg.type)
        elem = elem_of(arg.type)
        if isinstance(info, DimensionInputInfo):
            dims: list = []
        else:
            params = input_dim_names(name, info, len(shape))
            dims = [p if p is not None else (d if d is not None else f"{name}_{i}")
                    for i, (p, d) in enumerate(zip(params, shape))]
            dim_params[name] = [d if isinstance(d, str) else None for d in dims]
        inputs.append(helper.make_tensor_value_info(name, onnx_elem(elem), dims))
        b.names[arg] = name
        b.elem_of[name] = elem
        for d, dim in enumerate(dims):  # inputs sharing a NamedDimension share its class
            if isinstance(dim, str):
                b.dims.union(b.dims.key(arg, d), named.setdefault(dim, b.dims.key(arg, d)))
        b.dims.register(arg, name, shape)

    op_info: dict[int, tuple[str, str, str]] = {}
    missing = sorted({op.name for op in program.ops() if op.name not in TABLE})
    if missing:
        raise TripyException("The ONNX lowering has no entry for these MLIR ops.", [", ".join(missing)])
    for i, op in enumerate(program.ops()):
        trace_name = loc_name(op)
        origin = program.origins.get(trace_name) if trace_name else None
        line = origin.line if origin else ""
        op_info[i] = (op.name, trace_name, line)
        ctx = OpLowering(b, op, i, trace_name, line, origin.location if origin else None)
        try:
            results = TABLE[op.name](op, ctx)
        except TripyException:
            raise
        except Exception as exc:
            raise ctx.error(f"{type(exc).__name__}: {exc}") from exc
        for res, out in zip(op.results, results):
            b.names[res] = out
            b.elem_of[out] = elem_of(res.type)
        b.dims.relate(op, ctx)
        for res, out in zip(op.results, results):
            b.dims.register(res, out, shape_of(res.type))

    ret = main.body.block.last_op
    outputs, out_names = [], []
    raw = list(program.output_names) or [f"out{i}" for i in range(len(ret.operands))]
    produced = {o: node for node in b.nodes for o in node.output}
    for k, (name, v) in enumerate(zip(raw, ret.operands)):
        oname = re.sub(r"[^A-Za-z0-9_]", "_", name).strip("_") or f"out{k}"
        if oname in out_names or oname in arg_names:
            oname = f"{oname}_{k}"
        src = b.names[v]
        node = produced.pop(src, None)
        if node is not None:  # the producing node writes the graph output itself (no Identity)
            node.output[list(node.output).index(src)] = oname
            for other in b.nodes:
                for j, i in enumerate(other.input):
                    if i == src:
                        other.input[j] = oname
            if src in b.tensor_origin:
                b.tensor_origin[oname] = b.tensor_origin[src]
            for later in ret.operands[k + 1:]:  # the same value returned twice: later outputs copy this one
                if b.names[later] == src:
                    b.names[later] = oname
        else:
            b.nodes.append(helper.make_node("Identity", [src], [oname], name=f"output {oname}"))
            if src in b.tensor_origin:
                b.node_origin[f"output {oname}"] = b.tensor_origin[src]
        out_names.append(oname)
        outputs.append(helper.make_tensor_value_info(oname, onnx_elem(elem_of(v.type)), list(shape_of(v.type))))
    nodes = _live(b.nodes, out_names)
    graph = helper.make_graph(nodes, graph_name, inputs, outputs, _used(b.inits, nodes))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="tripy-lab",
                              ir_version=IR_VERSION)
    return OnnxLowering(model, arg_names, out_names, b.node_origin, b.tensor_origin, op_info, dim_params)


def _live(nodes, outputs) -> list:
    """``nodes`` less those no output depends on (shape computations a folded value replaced)."""
    needed, keep = set(outputs), []
    for node in reversed(nodes):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(node.input)
    return keep[::-1]


def _used(inits, nodes) -> list:
    used = {i for node in nodes for i in node.input}
    return [t for t in inits if t.name in used]


_DTYPE_NAMES = {"BOOL": "bool", "INT4": "int4", "INT8": "int8", "UINT8": "uint8", "INT32": "int32",
                "INT64": "int64", "UINT32": "uint32", "FLOAT16": "float16", "BFLOAT16": "bfloat16",
                "FLOAT": "float32", "DOUBLE": "float64", "FLOAT8E4M3FN": "float8", "FLOAT4E2M1": "float4"}


def tensor_types(model) -> dict[str, tuple[tuple[int | None, ...], str]]:
    """Tensor name -> (shape with None for symbolic dims, dtype name), from ONNX shape inference."""
    from onnx import TensorProto, shape_inference

    inferred = shape_inference.infer_shapes(model, data_prop=True)  # shapes computed from Shape ops too
    out = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
        out[vi.name] = (dims, _DTYPE_NAMES.get(TensorProto.DataType.Name(t.elem_type), "?"))
    return out


# dtypes onnxruntime's Python API cannot hand over as numpy arrays -> the exact carrier type they travel in
CARRIERS = {"BFLOAT16": "FLOAT", "FLOAT8E4M3FN": "FLOAT", "FLOAT4E2M1": "FLOAT", "INT4": "INT8"}


def with_carrier_types(model):
    """A copy of ``model`` whose bf16/f8/f4/int4 inputs and outputs are f32/int8 (exact) with a Cast inside.

    The exported model keeps the real types; a session runs this one so numpy arrays go in and out.
    """
    from onnx import TensorProto, helper

    carriers = {getattr(TensorProto, k): getattr(TensorProto, v) for k, v in CARRIERS.items()}
    graph = model.graph
    if not any(v.type.tensor_type.elem_type in carriers for v in list(graph.input) + list(graph.output)):
        return model
    copy = type(model)()
    copy.CopyFrom(model)
    g = copy.graph
    pre, post = [], []
    for vi in g.input:
        t = vi.type.tensor_type
        if t.elem_type in carriers:
            inner = f"{vi.name}__real"
            _rename(g.node, "input", vi.name, inner)
            pre.append(helper.make_node("Cast", [vi.name], [inner], name=f"input {vi.name} cast", to=t.elem_type))
            t.elem_type = carriers[t.elem_type]
    for vi in g.output:
        t = vi.type.tensor_type
        if t.elem_type in carriers:
            inner = f"{vi.name}__real"
            _rename(g.node, "output", vi.name, inner)
            post.append(helper.make_node("Cast", [inner], [vi.name], name=f"output {vi.name} cast",
                                         to=carriers[t.elem_type]))
            t.elem_type = carriers[t.elem_type]
    nodes = pre + list(g.node) + post
    del g.node[:]
    g.node.extend(nodes)
    return copy


def _rename(nodes, field: str, old: str, new: str) -> None:
    """Point every node's ``field`` ("input" or "output") entries named ``old`` at ``new``."""
    for node in nodes:
        names = getattr(node, field)
        for k, name in enumerate(names):
            if name == old:
                names[k] = new
