"""Generate docs/coverage.md from the package: every public name of Tripy (nvtripy 0.1.7) -> implemented in
tripy-lab or unsupported with a reason, and which engines run it.

Each function, layer and operator row has an example call. The example is traced and lowered to MLIR; an
engine runs the name when every MLIR op of that lowering has an entry in the engine's table
(``engine/reference/ops.py:TABLE``, ``engine/xla/ops.py:TABLE``, ``engine/tensorrt/ops.py:TABLE``), except
table entries that exist only to raise a clear error (plugins off TensorRT). Names without MLIR (host-side
helpers, classes, configuration) are checked for existence only.

    python scripts/coverage.py            # rewrite docs/coverage.md
    python scripts/coverage.py --check    # exit 1 when docs/coverage.md is out of date
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BEHAVIOUR = Path(__file__).resolve().parent / "coverage_behaviour.md"
DOC = ROOT / "docs" / "coverage.md"

ENGINE_TABLES = {
    "reference": "tripy_lab.engine.reference.ops",
    "xla": "tripy_lab.engine.xla.ops",
    "tensorrt": "tripy_lab.engine.tensorrt.ops",
    "onnxruntime": "tripy_lab.engine.onnx.ops",
}
# Table entries that exist only to raise a clear error: (MLIR op, engine) -> why the engine cannot run it.
ONLY_RAISES = {
    ("tensorrt.opaque_plugin", "reference"): "plugins need TensorRT",
    ("tensorrt.opaque_plugin", "xla"): "plugins need TensorRT",
    ("tensorrt.opaque_plugin", "onnxruntime"): "plugins need TensorRT",
}
# Public names (or overloads) tripy-lab deliberately does not provide, and why.
UNSUPPORTED = {
    "plugin (overload 2: quickly deployable plugin)":
        "quickly deployable (QDP) plugins take their output ranks and dtypes from TensorRT's Python plugin "
        "registry, which tripy-lab does not consult; call `plugin(name, inputs, output_info, ...)` instead "
        "(a clear TripyException says so)",
}
# Names that may be absent today, with the reason shown while they are.
ABSENT_REASONS = {
    "Executable.serialized_tensorrt_engine":
        "tripy-lab Executables may come from the reference or xla engine, which build no TensorRT engine "
        "blob",
}


@dataclass
class Row:
    section: str
    name: str
    example: Callable | None = None  # tp -> Tensor | sequence of Tensors
    host: str = ""  # for names without MLIR: what runs them
    exists: Callable | None = None  # tp -> bool (default: the dotted name resolves)
    mlir_ops: list[str] = field(default_factory=list)
    status: str = ""
    engines: dict[str, str] = field(default_factory=dict)


def _x(tp, shape=(2, 3), dtype=None):
    data = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) / 4 - 0.5
    t = tp.Tensor(data)
    return t if dtype is None else tp.cast(t, dtype)


def _mod(cls, *args, **kwargs):
    def make(tp):
        m = getattr(tp, cls)(*args, **kwargs)
        m.initialize_dummy_parameters()
        return m
    return make


FUNCTIONS: list[tuple[str, Callable | None, str]] = [
    ("cast", lambda tp: tp.cast(_x(tp), tp.int32), ""),
    ("copy", None, "host: evaluates, then moves the data (to the GPU through cupy or torch)"),
    ("dequantize", lambda tp: tp.dequantize(tp.quantize(_x(tp), 0.5, tp.int8), 0.5, tp.float32), ""),
    ("quantize", lambda tp: tp.quantize(_x(tp), [0.5, 1.0, 2.0], tp.float8, dim=1), ""),
    ("reshape", lambda tp: tp.reshape(_x(tp), (3, -1)), ""),
    ("transpose", lambda tp: tp.transpose(_x(tp), 0, 1), ""),
    ("flatten", lambda tp: tp.flatten(_x(tp, (2, 3, 2)), 1), ""),
    ("permute", lambda tp: tp.permute(_x(tp), (1, 0)), ""),
    ("squeeze", lambda tp: tp.squeeze(_x(tp, (1, 3)), 0), ""),
    ("unsqueeze", lambda tp: tp.unsqueeze(_x(tp), 1), ""),
    ("allclose", None, "host: evaluates both tensors"),
    ("arange (overload 1: start, stop, step)", lambda tp: tp.arange(1, 7, 2, dtype=tp.int32), ""),
    ("arange (overload 2: stop)", lambda tp: tp.arange(6, tp.float32), ""),
    ("concatenate", lambda tp: tp.concatenate([_x(tp), _x(tp)], dim=0), ""),
    ("cumsum", lambda tp: tp.cumsum(_x(tp), 1), ""),
    ("equal", None, "host: evaluates both tensors"),
    ("expand", lambda tp: tp.expand(_x(tp, (1, 3)), (4, -1)), ""),
    ("flip", lambda tp: tp.flip(_x(tp), dim=1), ""),
    ("full", lambda tp: tp.full((2, 2), 3.0), ""),
    ("full_like", lambda tp: tp.full_like(_x(tp), 2.0), ""),
    ("gather", lambda tp: tp.gather(_x(tp), 1, tp.Tensor([2, 0])), ""),
    ("iota", lambda tp: tp.iota((2, 3), 1), ""),
    ("iota_like", lambda tp: tp.iota_like(_x(tp), 0, tp.int32), ""),
    ("masked_fill", lambda tp: tp.masked_fill(_x(tp), _x(tp) > 0.0, 0.0), ""),
    ("ones", lambda tp: tp.ones((2, 3)), ""),
    ("ones_like", lambda tp: tp.ones_like(_x(tp)), ""),
    ("outer", lambda tp: tp.outer(_x(tp, (3,)), _x(tp, (2,))), ""),
    ("pad", lambda tp: [tp.pad(_x(tp), [(1, 0), (0, 2)], value=1.0),
                        tp.pad(_x(tp), [(1, 1), (1, 0)], mode="reflect")], ""),
    ("plugin (overload 1: TensorRT plugin)",
     lambda tp: tp.plugin("CustomGeluPluginDynamic", [_x(tp)], output_info=[(2, tp.float32)], type_id=0), ""),
    ("plugin (overload 2: quickly deployable plugin)", None, ""),
    ("repeat", lambda tp: tp.repeat(_x(tp), 2, 0), ""),
    ("resize (overload 1: output_shape)",
     lambda tp: [tp.resize(_x(tp, (1, 1, 2, 2)), output_shape=(1, 1, 4, 4), mode=m) for m in
                 ("nearest", "linear", "cubic")], ""),
    ("resize (overload 2: scales)",
     lambda tp: [tp.resize(_x(tp, (1, 1, 2, 2)), scales=(1, 1, 2, 2), mode=m, align_corners=m != "nearest")
                 for m in ("nearest", "linear", "cubic")], ""),
    ("softmax", lambda tp: tp.softmax(_x(tp), dim=1), ""),
    ("split", lambda tp: tp.split(_x(tp), 2, 1), ""),
    ("stack", lambda tp: tp.stack([_x(tp), _x(tp)], dim=0), ""),
    ("zeros", lambda tp: tp.zeros((2, 3)), ""),
    ("zeros_like", lambda tp: tp.zeros_like(_x(tp)), ""),
    ("where", lambda tp: tp.where(_x(tp) > 0.0, _x(tp), 0.0), ""),
    ("tril", lambda tp: tp.tril(_x(tp), 0), ""),
    ("triu", lambda tp: tp.triu(_x(tp), 1), ""),
    ("maximum", lambda tp: tp.maximum(_x(tp), 0.5), ""),
    ("minimum", lambda tp: tp.minimum(_x(tp), 0.5), ""),
    ("avgpool", lambda tp: tp.avgpool(_x(tp, (1, 1, 4, 4)), (2, 2), count_include_pad=False,
                                      padding=[(1, 0), (0, 1)]), ""),
    ("maxpool", lambda tp: tp.maxpool(_x(tp, (1, 1, 4, 4)), (2, 2), stride=(2, 2)), ""),
    ("all", lambda tp: tp.all(_x(tp) > 0.0, dim=1), ""),
    ("any", lambda tp: tp.any(_x(tp) > 0.0), ""),
    ("argmax", lambda tp: tp.argmax(_x(tp), dim=1), ""),
    ("argmin", lambda tp: tp.argmin(_x(tp)), ""),
    ("max", lambda tp: tp.max(_x(tp), dim=0), ""),
    ("mean", lambda tp: tp.mean(_x(tp), dim=1, keepdim=True), ""),
    ("min", lambda tp: tp.min(_x(tp)), ""),
    ("prod", lambda tp: tp.prod(_x(tp), dim=1), ""),
    ("sum", lambda tp: tp.sum(_x(tp), dim=1), ""),
    ("topk", lambda tp: tp.topk(_x(tp), 2, 1), ""),
    ("var", lambda tp: tp.var(_x(tp), dim=1), ""),
    ("cos", lambda tp: tp.cos(_x(tp)), ""),
    ("exp", lambda tp: tp.exp(_x(tp)), ""),
    ("gelu", lambda tp: tp.gelu(_x(tp)), ""),
    ("log", lambda tp: tp.log(_x(tp) + 1.0), ""),
    ("relu", lambda tp: [tp.relu(_x(tp)), tp.relu(_x(tp, dtype=tp.int32))], ""),
    ("rsqrt", lambda tp: tp.rsqrt(_x(tp) + 1.0), ""),
    ("sigmoid", lambda tp: tp.sigmoid(_x(tp)), ""),
    ("silu", lambda tp: tp.silu(_x(tp)), ""),
    ("sin", lambda tp: tp.sin(_x(tp)), ""),
    ("sqrt", lambda tp: tp.sqrt(_x(tp) + 1.0), ""),
    ("tanh", lambda tp: tp.tanh(_x(tp)), ""),
    ("compile", None, "host: traces once, then lowers and builds with the chosen engine"),
    ("default_stream", None, "host"),
]

LAYERS: list[tuple[str, Callable]] = [
    ("Linear", lambda tp: _mod("Linear", 3, 4)(tp)(_x(tp))),
    ("LayerNorm", lambda tp: _mod("LayerNorm", 3)(tp)(_x(tp))),
    ("Embedding", lambda tp: _mod("Embedding", 5, 2)(tp)(tp.Tensor([1, 4]))),
    ("Sequential", lambda tp: tp.Sequential(_mod("Linear", 3, 3)(tp), tp.relu)(_x(tp))),
    ("Conv", lambda tp: _mod("Conv", 1, 2, (2, 2), padding=((1, 0), (0, 1)), groups=1)(tp)(_x(tp, (1, 1, 3, 3)))),
    ("ConvTranspose", lambda tp: _mod("ConvTranspose", 1, 2, (2, 2), stride=(2, 2))(tp)(_x(tp, (1, 1, 3, 3)))),
    ("BatchNorm", lambda tp: _mod("BatchNorm", 2)(tp)(_x(tp, (1, 2, 3)))),
    ("GroupNorm", lambda tp: _mod("GroupNorm", 2, 4)(tp)(_x(tp, (1, 4, 3)))),
    ("InstanceNorm", lambda tp: _mod("InstanceNorm", 2)(tp)(_x(tp, (1, 2, 3)))),
]

# nvtripy 0.1.7's parameter names (tripy-api.md): a name is "implemented" only when ours accepts every one of
# them by that name (a ``*args``/``**kwargs`` dispatcher, as for the overloaded names, accepts any).
_IN = ["input"]
_RED = ["input", "dim", "keepdim"]
_CONV = ["in_channels", "out_channels", "kernel_dims", "stride", "padding", "dilation", "groups", "bias", "dtype"]
PARAMS: dict[str, list[str]] = {
    "cast": ["input", "dtype"], "copy": ["input", "device"], "dequantize": ["input", "scale", "dtype", "dim"],
    "quantize": ["input", "scale", "dtype", "dim"], "reshape": ["input", "shape"],
    "transpose": ["input", "dim0", "dim1"], "flatten": ["input", "start_dim", "end_dim"],
    "permute": ["input", "perm"], "squeeze": ["input", "dims"], "unsqueeze": ["input", "dim"],
    "allclose": ["input", "other", "rtol", "atol"],
    "arange (overload 1: start, stop, step)": ["start", "stop", "step", "dtype"],
    "arange (overload 2: stop)": ["stop", "dtype"], "concatenate": ["tensors", "dim"], "cumsum": ["input", "dim"],
    "equal": ["input", "other"], "expand": ["input", "sizes"], "flip": ["input", "dim"],
    "full": ["shape", "value", "dtype"], "full_like": ["input", "value", "dtype"], "gather": ["input", "dim", "index"],
    "iota": ["shape", "dim", "dtype"], "iota_like": ["input", "dim", "dtype"],
    "masked_fill": ["input", "mask", "value"],
    "ones": ["shape", "dtype"], "ones_like": ["input", "dtype"], "outer": ["vec1", "vec2"],
    "pad": ["input", "pad", "mode", "value"],
    "plugin (overload 1: TensorRT plugin)": ["name", "inputs", "output_info", "version", "namespace", "**kwargs"],
    "repeat": ["input", "repeats", "dim"],
    "resize (overload 1: output_shape)": ["input", "output_shape", "mode", "align_corners"],
    "resize (overload 2: scales)": ["input", "scales", "mode", "align_corners"],
    "softmax": ["input", "dim"], "split": ["input", "num_split_or_sizes", "dim"], "stack": ["tensors", "dim"],
    "zeros": ["shape", "dtype"], "zeros_like": ["input", "dtype"], "where": ["condition", "input", "other"],
    "tril": ["tensor", "diagonal"], "triu": ["tensor", "diagonal"], "maximum": ["lhs", "rhs"],
    "minimum": ["lhs", "rhs"], "avgpool": ["input", "kernel_dims", "stride", "padding", "count_include_pad"],
    "maxpool": ["input", "kernel_dims", "stride", "padding"], "all": _RED, "any": _RED, "argmax": _RED,
    "argmin": _RED, "max": _RED, "mean": _RED, "min": _RED, "prod": _RED, "sum": _RED,
    "topk": ["input", "k", "dim"], "var": _RED + ["correction"], "cos": _IN, "exp": _IN, "gelu": _IN, "log": _IN,
    "relu": _IN, "rsqrt": _IN, "sigmoid": _IN, "silu": _IN, "sin": _IN, "sqrt": _IN, "tanh": _IN,
    "compile": ["func", "optimization_level", "args", "kwargs"], "default_stream": ["device"],
    "Linear": ["in_features", "out_features", "bias", "dtype", "quant_dtype", "weight_quant_dim"],
    "LayerNorm": ["normalized_shape", "dtype", "eps"], "Embedding": ["num_embeddings", "embedding_dim", "dtype"],
    "Sequential": ["*modules"], "Conv": _CONV, "ConvTranspose": _CONV, "BatchNorm": ["num_features", "dtype", "eps"],
    "GroupNorm": ["num_groups", "num_channels", "dtype", "eps"], "InstanceNorm": ["num_channels", "dtype", "eps"],
    "Tensor": ["data", "dtype", "device", "name"], "DimensionSize": ["data", "name"],
    "NamedDimension": ["name", "min", "opt", "max"], "InputInfo": ["shape", "dtype"],
    "DimensionInputInfo": ["value_bounds"], "device": ["device"],
    "Tensor.cast": ["dtype"], "Tensor.reshape": ["shape"], "Tensor.transpose": ["dim0", "dim1"],
    "Tensor.flatten": ["start_dim", "end_dim"], "Tensor.permute": ["perm"], "Tensor.squeeze": ["dims"],
    "Tensor.unsqueeze": ["dim"], "Tensor.copy": ["device"], "Tensor.__dlpack__": ["stream"],
    "Executable.save": ["path"], "Executable.load": ["path"], "Module.load_state_dict": ["state_dict", "strict"],
    "logger.use_verbosity": ["verbosity"], "logger.indent": ["level"], "logger.log": ["message", "verbosity", "mode"],
}


def lacking_params(obj, wanted: list[str]) -> list[str]:
    """nvtripy parameter names ``obj`` does not accept (``*name`` / ``**name``: needs ``*args`` / ``**kwargs``)."""
    import inspect

    try:
        params = list(inspect.signature(obj).parameters.values())
    except (TypeError, ValueError):
        return []
    names = {p.name for p in params if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    var_pos = any(p.kind is p.VAR_POSITIONAL for p in params)
    var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
    out = []
    for w in wanted:
        if w.startswith("**"):
            ok = var_kw
        elif w.startswith("*"):
            ok = var_pos
        else:
            ok = w in names or (var_kw and var_pos)  # a (*args, **kwargs) overload dispatcher takes any
        if not ok:
            out.append(w)
    return out


def _callable_of(tp, name: str):
    """The object whose signature a row's nvtripy parameters are checked against."""
    base = name.split(" ")[0]
    head, _, attr = base.partition(".")
    if head == "Tensor" and attr:
        from tripy_lab.frontend import ops

        return ops.METHODS[attr] if attr in ops.METHODS else getattr(tp.Tensor, attr)
    obj = getattr(tp, head)
    return getattr(obj, attr) if attr else obj


OTHER_CLASSES = ["Tensor", "DimensionSize", "Module", "Bounds", "NamedDimension", "InputInfo", "DimensionInputInfo",
                 "Stream", "Executable", "TripyException", "device"]


def _binary(op):
    return lambda tp: op(_x(tp), _x(tp) + 1.0)


def _i(tp):
    return tp.Tensor([[1, -2, 3], [4, 5, -6]])


TENSOR_OPERATORS: list[tuple[str, Callable]] = [
    ("__add__", _binary(lambda a, b: a + b)), ("__radd__", lambda tp: 1.0 + _x(tp)),
    ("__sub__", _binary(lambda a, b: a - b)), ("__rsub__", lambda tp: 1.0 - _x(tp)),
    ("__mul__", _binary(lambda a, b: a * b)), ("__rmul__", lambda tp: 2.0 * _x(tp)),
    ("__truediv__", _binary(lambda a, b: a / b)), ("__rtruediv__", lambda tp: 1.0 / (_x(tp) + 1.0)),
    ("__floordiv__", lambda tp: _i(tp) // 2), ("__rfloordiv__", lambda tp: 7 // _i(tp)),
    ("__mod__", lambda tp: _i(tp) % 4), ("__rmod__", lambda tp: 7 % _i(tp)),
    ("__pow__", lambda tp: _x(tp) ** 2.0), ("__rpow__", lambda tp: 2.0 ** _x(tp)),
    ("__lt__", _binary(lambda a, b: a < b)), ("__le__", _binary(lambda a, b: a <= b)),
    ("__gt__", _binary(lambda a, b: a > b)), ("__ge__", _binary(lambda a, b: a >= b)),
    ("__eq__", _binary(lambda a, b: a == b)), ("__ne__", _binary(lambda a, b: a != b)),
    ("__or__", lambda tp: (_x(tp) > 0.0) | (_x(tp) < -0.25)), ("__invert__", lambda tp: ~(_x(tp) > 0.0)),
    ("__neg__", lambda tp: -_x(tp)), ("__abs__", lambda tp: abs(_i(tp))),
    ("__matmul__", lambda tp: _x(tp) @ _x(tp, (3, 2))),
    ("__getitem__", lambda tp: [_x(tp)[1, ::-2], _x(tp)[None, ..., tp.Tensor([0, 2])]]),
]
TENSOR_METHODS: list[tuple[str, Callable]] = [
    ("cast", lambda tp: _x(tp).cast(tp.float16)), ("reshape", lambda tp: _x(tp).reshape((6,))),
    ("transpose", lambda tp: _x(tp).transpose(0, 1)), ("flatten", lambda tp: _x(tp).flatten()),
    ("permute", lambda tp: _x(tp).permute((1, 0))), ("squeeze", lambda tp: _x(tp, (1, 3)).squeeze(0)),
    ("unsqueeze", lambda tp: _x(tp).unsqueeze(0)),
]
TENSOR_HOST = ["dtype", "rank", "ndim", "shape", "device", "name", "eval", "tolist", "copy", "__bool__", "__iter__",
               "__repr__", "__dlpack__", "__dlpack_device__", "__hash__"]

MEMBERS = {
    "DimensionSize": ["__int__", "__str__", "eval"],
    "Executable": ["__call__", "input_infos", "stream", "__signature__", "save", "load",
                   "serialized_tensorrt_engine"],
    "Stream": ["synchronize", "ptr"],
    "Module": ["state_dict", "load_state_dict", "named_children", "named_parameters", "__call__", "forward",
               "initialize_dummy_parameters"],
    "Sequential": ["__len__", "__iter__", "__getitem__", "named_children"],
    "InputInfo": ["shape_bounds", "dimension_names", "dtype"],
    "DimensionInputInfo": ["value_bounds"],
    "NamedDimension": ["name", "bounds"],
    "Bounds": ["min", "opt", "max", "is_static"],
    "device": ["kind", "index"],
}
DTYPES = ["dtype", "integer", "floating", "float32", "float16", "float8", "bfloat16", "int4", "int8", "int32", "int64",
          "bool"]
OBJECTS = ["logger", "logger.verbosity", "logger.use_verbosity", "logger.indent", "logger.log", "logger.enable_color",
           "config.timing_cache_file_path", "config.enable_input_validation", "config.extra_error_information",
           "types.TensorLike", "types.IntLike", "types.ShapeLike"]


def _member_exists(tp, dotted: str) -> bool:
    """``Class.member`` exists on the class, on an instance made for the check, or as a Tensor method."""
    head, _, attr = dotted.partition(".")
    obj = getattr(tp, head, None)
    if obj is None:
        return False
    if not attr:
        return True
    if head == "Tensor":
        from tripy_lab.frontend import ops

        return hasattr(obj, attr) or attr in ops.METHODS
    if hasattr(obj, attr):
        return True
    samples = {
        "InputInfo": lambda: tp.InputInfo((2,), tp.float32),
        "DimensionInputInfo": lambda: tp.DimensionInputInfo((1, 2, 3)),
        "NamedDimension": lambda: tp.NamedDimension("n", 1, 2, 3), "device": lambda: tp.device("cpu"),
        "Bounds": lambda: tp.InputInfo((2,), tp.float32).shape_bounds,
        "Executable": lambda: tp.compile(lambda a: a + 1.0, args=[tp.InputInfo((2,), tp.float32)], engine="reference"),
        "Module": lambda: _mod("Linear", 2, 2)(tp), "Sequential": lambda: tp.Sequential(_mod("Linear", 2, 2)(tp)),
        "Stream": lambda: tp.Stream(),
    }
    try:
        return attr in vars(samples[head]()) if head in samples else False
    except Exception:
        return False


def _resolves(tp, dotted: str) -> bool:
    obj = tp
    for part in dotted.split("."):
        if not hasattr(obj, part):
            return False
        obj = getattr(obj, part)
    return True


def _lowered_ops(example, tp) -> list[str]:
    from tripy_lab.mlir.lowering import lower
    from tripy_lab.trace import Trace

    out = example(tp)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    program = lower(Trace([t.trace_tensor for t in outs]))
    return sorted({op.name for op in program.ops()})


def engine_tables() -> dict[str, set[str]]:
    return {name: set(importlib.import_module(mod).TABLE) for name, mod in ENGINE_TABLES.items()}


def build_rows() -> list[Row]:
    import tripy_lab as tp

    rows: list[Row] = []
    for name, example, host in FUNCTIONS:
        base = name.split(" ")[0]
        rows.append(Row("Functions", name, example, host, exists=lambda tp, b=base: hasattr(tp, b)))
    for name, example in LAYERS:
        rows.append(Row("Modules", name, example))
    for name in OTHER_CLASSES:
        rows.append(Row("Classes", name, host="host"))
    for name, example in TENSOR_OPERATORS + TENSOR_METHODS:
        rows.append(Row("Tensor members", f"Tensor.{name}", example,
                        exists=lambda tp, n=name: _member_exists(tp, f"Tensor.{n}")))
    for name in TENSOR_HOST:
        rows.append(Row("Tensor members", f"Tensor.{name}", host="host",
                        exists=lambda tp, n=name: _member_exists(tp, f"Tensor.{n}")))
    for cls, members in MEMBERS.items():
        for m in members:
            rows.append(Row("Other members", f"{cls}.{m}", host="host",
                            exists=lambda tp, d=f"{cls}.{m}": _member_exists(tp, d)))
    for name in DTYPES:
        rows.append(Row("dtypes", name, host="host"))
    for name in OBJECTS:
        rows.append(Row("Objects", name, host="host"))

    tables = engine_tables()
    for row in rows:
        exists = row.exists(tp) if row.exists else _resolves(tp, row.name)
        if row.name in UNSUPPORTED:
            row.status = "unsupported: " + UNSUPPORTED[row.name]
            row.engines = {e: "—" for e in tables}
            continue
        if not exists:
            reason = ABSENT_REASONS.get(row.name)
            row.status = f"unsupported: {reason}" if reason else "missing"
            row.engines = {e: "—" for e in tables}
            continue
        if row.name in PARAMS:
            lacking = lacking_params(_callable_of(tp, row.name), PARAMS[row.name])
            if lacking:
                row.status = "missing parameter(s): " + ", ".join(f"`{p}`" for p in lacking)
                row.engines = {e: "—" for e in tables}
                continue
        row.status = "implemented"
        if row.example is None:
            row.engines = {e: "host" for e in tables}
            continue
        row.mlir_ops = _lowered_ops(row.example, tp)
        for engine, table in tables.items():
            lacking = [op for op in row.mlir_ops if op not in table]
            raising = [ONLY_RAISES[(op, engine)] for op in row.mlir_ops if (op, engine) in ONLY_RAISES]
            row.engines[engine] = ("✗ lacks " + ", ".join(lacking) if lacking
                                   else "✗ " + raising[0] if raising else "✓")
    return rows


def emitted_ops(rows: list[Row]) -> set[str]:
    """Every MLIR op our lowering emits: the examples' programs and each op-table row's tensorrt op."""
    from tripy_lab.trace import OPS

    ops = {op for row in rows for op in row.mlir_ops}
    ops |= {f"tensorrt.{row.tensorrt_op}" for row in OPS.values()}
    return ops


def render(rows: list[Row]) -> str:
    engines = list(ENGINE_TABLES)
    lines = [
        "# Tripy API coverage",
        "",
        "<!-- Generated by `python scripts/coverage.py` from the package; do not edit by hand. "
        "tests/test_coverage.py checks that it is up to date. -->",
        "",
        "Every public name of Tripy (nvtripy 0.1.7): implemented in tripy-lab, or unsupported with the reason.",
        "For names that build a graph, an engine runs the name when every MLIR op its lowering emits (last",
        "column, from an example call) has an entry in that engine's table; ✗ names the missing entries, or the",
        "clear error the engine gives. `host` = runs in Python, without MLIR. The tensorrt column says the",
        "TensorRT engine's table has a layer builder for every op; that engine has never been run (TensorRT",
        "cannot be installed where tripy-lab is developed and tested).",
        f"Implemented means every parameter nvtripy names is accepted under that name ({len(PARAMS)} "
        "signatures checked).",
        "",
    ]
    counts = {"implemented": 0, "unsupported": 0, "missing": 0}
    for row in rows:
        counts[row.status.split(":")[0].split(" ")[0]] += 1
    lines.append(f"**{counts['implemented']} implemented, {counts['unsupported']} unsupported, "
                 f"{counts['missing']} missing.**")
    lines.append("")
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            lines += ["", f"## {section}", "",
                      "| name | status | " + " | ".join(engines) + " | MLIR ops |",
                      "|---|---|" + "---|" * len(engines) + "---|"]
        ops = ", ".join(f"`{op.removeprefix('tensorrt.')}`" for op in row.mlir_ops) or (row.host or "")
        cells = [f"`{row.name}`" if " " not in row.name else row.name, row.status,
                 *(row.engines.get(e, "") for e in engines), ops]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    # the behaviour rules (issue 24): hand-written beside this script, checked against the tests they name
    lines += ["", BEHAVIOUR.read_text().rstrip("\n")]
    return "\n".join(lines) + "\n"


def generate() -> str:
    return render(build_rows())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/coverage.md is out of date")
    args = parser.parse_args(argv)
    text = generate()
    if args.check:
        current = DOC.read_text() if DOC.exists() else ""
        if current != text:
            print("docs/coverage.md is out of date: run python scripts/coverage.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
