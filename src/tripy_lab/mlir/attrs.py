"""Attributes, types and value helpers for the `tensorrt` / `plan` dialects.

    tensor_type((None, 4), "f32")                 # tensor<?x4xf32>
    dense_elements(np.arange(4, dtype=np.float32), "f32")   # dense<[0.0, ...]> : tensor<4xf32>
    elements_to_numpy(attr, resources=None)       # DenseIntOrFP / dense_resource -> numpy array
    ShapeProfileAttr([1, 2], [2, 2], [3, 2])      # #tensorrt.shape_profile<min = [1, 2], ...>
    MemorySpaceAttr("host")                       # #plan.memory_space<host>
    to_python(attr)                               # any attribute -> plain Python value

Element types are named by their MLIR spelling (``"f32"``, ``"i1"``, ``"bf16"``, ``"f8E4M3FN"``...).
``resources`` maps a ``dense_resource<handle>`` handle to the raw little-endian element bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    AffineMapAttr,
    ArrayAttr,
    BoolAttr,
    BytesAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    DenseResourceAttr,
    DictionaryAttr,
    FileLineColLoc,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    IntegerType,
    NameLoc,
    Signedness,
    StringAttr,
    TensorType,
    UnitAttr,
    UnknownLoc,
    bf16,
    f8E4M3FN,
    f16,
    f32,
    f64,
    i64,
)
from xdsl.dialects.builtin import (
    Float4E2M1FNType as _F4,
)
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

ELEMENT_TYPES: dict[str, Attribute] = {
    "i1": IntegerType(1),
    "i4": IntegerType(4),
    "i8": IntegerType(8),
    "ui8": IntegerType(8, Signedness.UNSIGNED),
    "i32": IntegerType(32),
    "i64": IntegerType(64),
    "ui32": IntegerType(32, Signedness.UNSIGNED),
    "f16": f16,
    "bf16": bf16,
    "f32": f32,
    "f64": f64,
    "f8E4M3FN": f8E4M3FN,
    "f4E2M1FN": _F4(),
}
"""MLIR element-type spelling -> xDSL type."""

NUMPY_DTYPES: dict[str, np.dtype] = {
    "i1": np.dtype(np.bool_),
    "i4": np.dtype(ml_dtypes.int4),
    "i8": np.dtype(np.int8),
    "ui8": np.dtype(np.uint8),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "ui32": np.dtype(np.uint32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f4E2M1FN": np.dtype(ml_dtypes.float4_e2m1fn),
}
"""MLIR element-type spelling -> numpy dtype (xDSL stores one little-endian item per element)."""

# how xDSL stores elements: sub-byte/bool types use one byte per element
_STORAGE: dict[str, np.dtype] = {
    "i1": np.dtype(np.int8),
    "i4": np.dtype(np.int8),
    "f4E2M1FN": np.dtype(np.uint8),
}


def element_name(t: Attribute) -> str:
    """MLIR spelling of an element type (``f32``, ``i1``, ``ui8``...)."""
    try:
        return _ELEMENT_NAMES[t]
    except (KeyError, TypeError):  # xDSL attribute equality is slow: remember each type once
        pass
    for name, et in ELEMENT_TYPES.items():
        if et == t:
            _ELEMENT_NAMES[t] = name
            return name
    raise ValueError(f"unsupported element type {t}")


_ELEMENT_NAMES: dict[Attribute, str] = {}


def element_type(elem: str | Attribute) -> Attribute:
    if not isinstance(elem, str):
        return elem
    try:
        return ELEMENT_TYPES[elem]
    except KeyError:
        raise ValueError(f"unknown element type {elem!r}; expected one of {sorted(ELEMENT_TYPES)}") from None


def tensor_type(shape: Sequence[int | None], elem: str | Attribute) -> TensorType:
    """``tensor<...>`` with ``None`` (or -1) dims printed as ``?``.

    Types are immutable values, so one object per (shape, element type) is shared by every program:
    building and verifying a TensorType costs ~9 us, a lookup ~0.3 us (2000+ per 1000-op lowering)."""
    key = (tuple(shape), elem)
    try:
        return _TENSOR_TYPES[key]
    except KeyError:
        pass
    except TypeError:  # an unhashable dim: build it uncached (TensorType then says what is wrong)
        key = None
    dims = [DYNAMIC_INDEX if d is None or d < 0 else int(d) for d in shape]
    t = TensorType(element_type(elem), dims)
    if key is not None:
        _remember(_TENSOR_TYPES, key, t)
    return t


_TENSOR_TYPES: dict[tuple, TensorType] = {}
_CACHE_LIMIT = 1 << 15  # entries per cache; a full cache starts over (dynamic shapes make many keys)


def _remember(cache: dict, key, value) -> None:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value


def file_loc(file: str, line: int, col: int) -> FileLineColLoc:
    """``"file":line:col``, one shared object per position (many ops come from one line)."""
    key = (file, line, col)
    loc = _FILE_LOCS.get(key)
    if loc is None:
        loc = FileLineColLoc(StringAttr(file), IntAttr(line), IntAttr(col))
        _remember(_FILE_LOCS, key, loc)
    return loc


_FILE_LOCS: dict[tuple, FileLineColLoc] = {}
_NAMES: dict[str, StringAttr] = {}
# Clearing when full made every lowering past the limit rebuild all its names (%t0.. again): a 76k-op program
# thrashed a 32k cache. Names are few per op and shared by every program, so this cache keeps its first ones.
_NAMES_LIMIT = 1 << 17
_DESC, _CHILD = (f for f, _ in NameLoc.get_irdl_definition().parameters)  # ("desc", "location")
_new, _set = object.__new__, object.__setattr__


def name_loc(name: str, child: FileLineColLoc | UnknownLoc | NameLoc) -> NameLoc:
    """``loc("name"(child))``: equal to ``NameLoc(StringAttr(name), child)``, without its generic verifiers
    (~4 us per op of a lowering), which check only what the types here guarantee: a string and a location."""
    if type(name) is not str or type(child) not in (FileLineColLoc, UnknownLoc, NameLoc):
        return NameLoc(StringAttr(name), child)
    desc = _NAMES.get(name)
    if desc is None:  # every program names its ops %t0, %t1, ...: one immutable StringAttr per name
        desc = _new(StringAttr)
        _set(desc, "data", name)
        if len(_NAMES) < _NAMES_LIMIT:  # full: keep the low names every program reuses, never clear them
            _NAMES[name] = desc
    loc = _new(NameLoc)
    _set(loc, _DESC, desc)
    _set(loc, _CHILD, child)
    return loc


def loc_name(op) -> str:
    """The trace op name on an op's location: ``loc("%t5"(...))`` -> ``"%t5"`` ("" when unnamed)."""
    return _loc_name(getattr(op, "location", None))


def _loc_name(loc) -> str:
    desc = getattr(loc, "desc", None)  # xDSL's NameLoc keeps the name in `desc`
    name = getattr(desc, "data", None)
    if isinstance(name, str):
        return name
    inner = getattr(loc, "locations", None)  # FusedLoc
    for sub in getattr(inner, "data", inner) or ():
        if name := _loc_name(sub):
            return name
    return ""


def shape_of(t: Attribute) -> tuple[int | None, ...]:
    """Shape of a tensor type with ``None`` for dynamic dims."""
    assert isinstance(t, TensorType), f"expected a tensor type, got {t}"
    return tuple(None if d == DYNAMIC_INDEX else d for d in t.get_shape())


def elem_of(t: Attribute) -> str:
    assert isinstance(t, TensorType), f"expected a tensor type, got {t}"
    return element_name(t.element_type)


def dense_elements(array: np.ndarray | Sequence | float | int, mlir_elem: str) -> DenseIntOrFPElementsAttr:
    """A ``dense<...> : tensor<shape x elem>`` attribute holding ``array`` (cast to ``mlir_elem``).

    Small arrays (scalars, shape vectors: most constants of a traced program) share one attribute per
    (element type, source dtype, shape, bytes); attributes are immutable, so sharing is invisible."""
    arr = np.asarray(array)
    key = None
    dt = arr.dtype
    if arr.size <= _SMALL_ELEMENTS and dt.kind in "biuf":
        key = (mlir_elem, dt, arr.shape, arr.tobytes())  # dt, not dt.str (~0.4 us): equal dtypes, equal bytes
        hit = _SMALL_DENSE.get(key)
        if hit is not None:
            return hit
    attr = _dense_elements(arr, mlir_elem)
    if key is not None:
        _remember(_SMALL_DENSE, key, attr)
    return attr


_SMALL_ELEMENTS = 16
_SMALL_DENSE: dict[tuple, DenseIntOrFPElementsAttr] = {}


def _dense_elements(arr: np.ndarray, mlir_elem: str) -> DenseIntOrFPElementsAttr:
    store = _STORAGE.get(mlir_elem, NUMPY_DTYPES[mlir_elem])
    if mlir_elem == "f4E2M1FN":
        data = np.ascontiguousarray(arr.astype(NUMPY_DTYPES[mlir_elem])).view(np.uint8)
    else:
        data = arr.astype(NUMPY_DTYPES[mlir_elem]).astype(store)
    data = np.ascontiguousarray(data).astype(store.newbyteorder("<"), copy=False)
    return DenseIntOrFPElementsAttr(tensor_type(arr.shape, mlir_elem), BytesAttr(data.tobytes()))


def _blob_to_numpy(data: bytes, t: TensorType) -> np.ndarray:
    name = element_name(t.element_type)
    store = _STORAGE.get(name, NUMPY_DTYPES[name]).newbyteorder("<")
    flat = np.frombuffer(data, dtype=store)
    if name == "f4E2M1FN":
        flat = flat.view(NUMPY_DTYPES[name])
    else:
        flat = flat.astype(NUMPY_DTYPES[name], copy=False)  # weights: no copy when the storage dtype matches
    shape = tuple(t.get_shape())
    n = int(np.prod(shape, dtype=np.int64))
    if flat.size == 1 and n != 1:
        return np.broadcast_to(flat.reshape(()), shape).copy()
    return flat.reshape(shape)


def elements_to_numpy(attr: Attribute, resources: Mapping[str, bytes] | None = None) -> np.ndarray:
    """Numpy array of a ``dense<...>`` or ``dense_resource<handle>`` elements attribute."""
    if isinstance(attr, DenseIntOrFPElementsAttr):
        return _blob_to_numpy(attr.data.data, attr.type)
    if isinstance(attr, DenseResourceAttr):
        handle = attr.resource_handle.data
        if resources is None or handle not in resources:
            raise KeyError(f"dense_resource<{handle}>: no bytes for this handle (pass resources=...)")
        return _blob_to_numpy(resources[handle], attr.type)  # bytes or a memoryview: never copied here
    raise TypeError(f"not an elements attribute: {attr}")


def dense_array(values: Sequence[int | float], elem: str = "i64") -> DenseArrayBase:
    """``array<i64: ...>`` / ``array<i32: ...>`` / ``array<f32: ...>``.

    Integer arrays (axes, permutations, static slice bounds: several an op) share one immutable attribute per
    (element type, values): ``from_list`` packs and verifies each (~40 us), a lookup is ~0.5 us."""
    values = tuple(values)
    key = None
    if type(elem) is str:
        for v in values:  # a loop, not all(...): every slice and reduce asks
            if type(v) is not int:
                break
        else:
            key = (elem, values)
            hit = _DENSE_ARRAYS.get(key)
            if hit is not None:
                return hit
    attr = DenseArrayBase.from_list(element_type(elem), values)
    if key is not None:
        _remember(_DENSE_ARRAYS, key, attr)
    return attr


_DENSE_ARRAYS: dict[tuple, DenseArrayBase] = {}


def int_attr(value: int, elem: str = "i64") -> IntegerAttr:
    """``value : elem``, one shared immutable attribute per (value, element type) (building one verifies it)."""
    key = (int(value), elem) if type(elem) is str else None
    hit = _INT_ATTRS.get(key) if key is not None else None
    if hit is None:
        hit = IntegerAttr(int(value), element_type(elem))
        if key is not None:
            _remember(_INT_ATTRS, key, hit)
    return hit


_INT_ATTRS: dict[tuple, IntegerAttr] = {}


def f32_attr(value: float) -> FloatAttr:
    return FloatAttr(float(value), f32)


def bool_attr(value: bool) -> IntegerAttr:
    # two immutable attributes, made once: from_bool builds and verifies a new one (~40 us) on every call
    return _BOOLS[bool(value)]


_BOOLS = {True: BoolAttr.from_bool(True), False: BoolAttr.from_bool(False)}


# --------------------------------------------------------------------------------------------
# #tensorrt.shape_profile<min = [..], opt = [..], max = [..]>


@irdl_attr_definition
class ShapeProfileAttr(ParametrizedAttribute):
    """Min/opt/max of every dim of an argument (or the value range of a host scalar)."""

    name = "tensorrt.shape_profile"
    min: DenseArrayBase
    opt: DenseArrayBase
    max: DenseArrayBase

    def __init__(
        self,
        min: Sequence[int] | DenseArrayBase,
        opt: Sequence[int] | DenseArrayBase,
        max: Sequence[int] | DenseArrayBase,
    ) -> None:
        def conv(v: Sequence[int] | DenseArrayBase) -> DenseArrayBase:
            return v if isinstance(v, DenseArrayBase) else DenseArrayBase.from_list(i64, tuple(int(x) for x in v))

        super().__init__(conv(min), conv(opt), conv(max))

    @property
    def values(self) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        return tuple(self.min.get_values()), tuple(self.opt.get_values()), tuple(self.max.get_values())

    def verify(self) -> None:
        mins, opts, maxs = self.values
        if not len(mins) == len(opts) == len(maxs):
            raise VerifyException("shape min/opt/max arrays should have equal size")
        for i, (lo, op, hi) in enumerate(zip(mins, opts, maxs)):
            if lo > op:
                raise VerifyException(f"profile dimension {i} min={lo} should be less than or equal to opt={op}")
            if op > hi:
                raise VerifyException(f"profile dimension {i} opt={op} should be less than or equal to max={hi}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        from tripy_lab.core.bounds import MAX_BOUND

        def bound() -> int:  # checked here, where the value is: i64 would wrap 2**63 to a negative number
            start = parser.pos
            value = parser.parse_integer()
            if not 0 <= value <= MAX_BOUND:
                parser.raise_error(f"shape profile value {value} is out of range: bounds are 0..{MAX_BOUND} "
                                   "(int32, the same rule as InputInfo)", start, parser.pos)
            return value

        start = parser.pos
        with parser.in_angle_brackets():
            out = []
            for i, key in enumerate(("min", "opt", "max")):
                if i:
                    parser.parse_punctuation(",")
                parser.parse_keyword(key)
                parser.parse_punctuation("=")
                out.append(parser.parse_comma_separated_list(parser.Delimiter.SQUARE, bound))
        try:  # verified here (on construction), so the error points at this attribute's text
            attr = cls(*out)
        except VerifyException as exc:
            parser.raise_error(str(exc), start, parser.pos)
        return [attr.min, attr.opt, attr.max]

    def print_parameters(self, printer: Printer) -> None:
        mins, opts, maxs = self.values
        fmt = lambda v: ", ".join(str(x) for x in v)
        printer.print_string(f"<min = [{fmt(mins)}], opt = [{fmt(opts)}], max = [{fmt(maxs)}]>")


# --------------------------------------------------------------------------------------------
# #plan.memory_space<host>

MemorySpace = StrEnum("MemorySpace", [(v, v) for v in ("unknown", "host", "host_pinned", "device", "unified")])


@irdl_attr_definition
class MemorySpaceAttr(EnumAttribute[MemorySpace]):
    """``#plan.memory_space<host>``: where a function argument lives."""

    name = "plan.memory_space"

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{str(self.data)}>")

    @classmethod
    def parse_parameter(cls, parser: AttrParser) -> MemorySpace:
        with parser.in_angle_brackets():
            return parser.parse_str_enum(MemorySpace)


# --------------------------------------------------------------------------------------------


def permutation_of(m: AffineMapAttr) -> tuple[int, ...]:
    """The permutation ``perm`` of ``affine_map<(d0, ...) -> (d_perm[0], ...)>``."""
    amap = m.data
    out = []
    for expr in amap.results:
        pos = getattr(expr, "position", None)
        if pos is None:
            raise ValueError(f"{amap} is not a permutation map")
        out.append(pos)
    return tuple(out)


def to_python(attr: Attribute, resources: Mapping[str, bytes] | None = None):
    """Plain Python value of an attribute (enum -> ``"kSUM"``, arrays -> tuples, elements -> numpy)."""
    if isinstance(attr, EnumAttribute):
        return str(attr.data)
    if isinstance(attr, IntegerAttr):
        v = attr.value.data
        return bool(v) if attr.type == IntegerType(1) else int(v)
    if isinstance(attr, FloatAttr):
        return float(attr.value.data)
    if isinstance(attr, DenseArrayBase):
        return tuple(attr.get_values())
    if isinstance(attr, AffineMapAttr):
        return permutation_of(attr)
    if isinstance(attr, StringAttr):
        return attr.data
    if isinstance(attr, UnitAttr):
        return True
    if isinstance(attr, DenseIntOrFPElementsAttr | DenseResourceAttr):
        return elements_to_numpy(attr, resources)
    if isinstance(attr, ShapeProfileAttr):
        return attr.values
    if isinstance(attr, ArrayAttr):
        return tuple(to_python(a, resources) for a in attr.data)
    if isinstance(attr, DictionaryAttr):
        return {k: to_python(v, resources) for k, v in attr.data.items()}
    return attr


# --------------------------------------------------------------------------------------------
# shape helpers shared by the op verifiers


def broadcast_dim(dims: Sequence[int | None]) -> int | None | bool:
    """Broadcast of one dim across inputs: the size, None if unknown, False if incompatible."""
    static = {d for d in dims if d is not None and d != 1}
    if len(static) > 1:
        return False
    if static:
        return static.pop()
    return None if any(d is None for d in dims) else 1


def broadcast_shapes(*shapes: Sequence[int | None]) -> tuple[int | None, ...] | None:
    """Same-rank TensorRT broadcast of ``shapes``; None when not broadcastable."""
    out = []
    for dims in zip(*shapes):
        d = broadcast_dim(dims)
        if d is False:
            return None
        out.append(d)
    return tuple(out)


def dims_compatible(a: int | None, b: int | None) -> bool:
    return a is None or b is None or a == b


def shapes_compatible(a: Sequence[int | None], b: Sequence[int | None]) -> bool:
    return len(a) == len(b) and all(dims_compatible(x, y) for x, y in zip(a, b))


def fmt_shape(shape: Sequence[int | None]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"
