"""Shape and value bounds: Bounds, NamedDimension, InputInfo, DimensionInputInfo (tripy's compile inputs)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tripy_lab.core import dtypes
from tripy_lab.core.errors import raise_error


@dataclass(frozen=True)
class Bounds:
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]

    def is_static(self) -> bool:
        return self.min == self.opt == self.max

    def __str__(self) -> str:
        return f"Bounds(min={self.min}, opt={self.opt}, max={self.max})"


_SHAPE_TYPE = "Sequence[int | DimensionSize | Tuple[int | DimensionSize, int | DimensionSize, int | DimensionSize]]"


def _type_str(value) -> str:
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__.capitalize()}[{', '.join(_type_str(v) for v in value)}]"
    return type(value).__name__


def _bad_shape(shape, detail: str) -> None:
    """nvtripy's overload message for InputInfo's shape, our detail underneath."""
    raise_error("Could not find an implementation for function: 'InputInfo'.",
                [f"For parameter: 'shape', expected an instance of type: '{_SHAPE_TYPE}' "
                 f"but got argument of type: '{_type_str(shape)}'.", detail])


def _as_int(value, param: str, shape=None) -> int:
    if isinstance(value, bool) or not hasattr(value, "__int__") or isinstance(value, float):
        detail = f"Expected an int, a (min, opt, max) tuple or a NamedDimension, but got: {value!r}."
        if shape is not None:
            _bad_shape(shape, detail)
        raise_error(f"Invalid shape entry for parameter: '{param}'.", [detail])
    return int(value)


def _check_order(lo: int, mid: int, hi: int, what: str) -> None:
    if lo < 0 or not lo <= mid <= hi:
        raise_error(f"Invalid bounds for {what}: (min={lo}, opt={mid}, max={hi}).",
                    ["Expected 0 <= min <= opt <= max."])


class NamedDimension:
    """A dynamic dimension with a name; every dim sharing the name must be equal at run time."""

    def __init__(self, name: str, min: int, opt: int, max: int):  # noqa: A002 - tripy's names
        if not isinstance(name, str) or not name:
            raise_error("NamedDimension name must be a non-empty string.", [f"Got: {name!r}."])
        self.name = name
        self.bounds = (_as_int(min, "min"), _as_int(opt, "opt"), _as_int(max, "max"))
        _check_order(*self.bounds, f"NamedDimension '{name}'")

    def __str__(self) -> str:
        return f"NamedDimension<name: '{self.name}', bounds: {self.bounds}>"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, NamedDimension) and (self.name, self.bounds) == (other.name, other.bounds)

    def __hash__(self) -> int:
        return hash((self.name, self.bounds))


class InputInfo:
    """A runtime tensor input: per dim a fixed size, a ``(min, opt, max)`` triple or a NamedDimension."""

    def __init__(self, shape: Sequence, dtype: dtypes.dtype):
        if not isinstance(shape, (list, tuple)):
            raise_error("Invalid value for parameter: 'shape' of InputInfo.",
                        [f"Expected a sequence of dims, but got: {shape!r}."])
        if not isinstance(dtype, dtypes.dtype) or dtype in (dtypes.integer, dtypes.floating):
            raise_error("Invalid value for parameter: 'dtype' of InputInfo.",
                        [f"Expected a tripy dtype such as tp.float32, but got: {dtype!r}."])
        mins, opts, maxs = [], [], []
        self.dimension_names: dict[int, str] = {}
        for i, dim in enumerate(shape):
            if isinstance(dim, NamedDimension):
                lo, mid, hi = dim.bounds
                self.dimension_names[i] = dim.name
            elif isinstance(dim, (tuple, list)):
                if len(dim) != 3:
                    _bad_shape(shape, f"Entry {i}: expected a (min, opt, max) triple, but got: {dim!r}.")
                lo, mid, hi = (_as_int(v, "shape", shape) for v in dim)
                _check_order(lo, mid, hi, f"dimension {i}")
            else:
                lo = mid = hi = _as_int(dim, "shape", shape)
                _check_order(lo, mid, hi, f"dimension {i}")
            mins.append(lo)
            opts.append(mid)
            maxs.append(hi)
        self.shape_bounds = Bounds(tuple(mins), tuple(opts), tuple(maxs))
        self.dtype = dtype
        check_named_dimensions({"shape": self})

    @property
    def rank(self) -> int:
        return len(self.shape_bounds.min)

    def static_shape(self) -> tuple[int | None, ...]:
        """Each dim's size where min == max, else None (printed as `?`)."""
        b = self.shape_bounds
        return tuple(lo if lo == hi else None for lo, hi in zip(b.min, b.max))

    def __str__(self) -> str:
        return (f"InputInfo<{self.shape_bounds}, dimension names: {self.dimension_names}, "
                f"dtype: {self.dtype}>")

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return (isinstance(other, InputInfo) and self.shape_bounds == other.shape_bounds
                and self.dtype == other.dtype and self.dimension_names == other.dimension_names)

    def __hash__(self) -> int:
        return hash((self.shape_bounds, self.dtype.name))

    def shape_spec(self) -> list:
        """The ``shape`` argument that rebuilds this InputInfo (NamedDimensions included)."""
        b = self.shape_bounds
        out = []
        for i, (lo, mid, hi) in enumerate(zip(b.min, b.opt, b.max)):
            if i in self.dimension_names:
                out.append(NamedDimension(self.dimension_names[i], lo, mid, hi))
            else:
                out.append(lo if lo == mid == hi else (lo, mid, hi))
        return out

    def to_json(self) -> dict:
        b = self.shape_bounds
        return {"kind": "InputInfo", "min": list(b.min), "opt": list(b.opt), "max": list(b.max),
                "dimension_names": {str(k): v for k, v in self.dimension_names.items()},
                "dtype": self.dtype.name}


class DimensionInputInfo:
    """A runtime scalar shape value (a DimensionSize) whose value lies in ``(min, opt, max)``."""

    def __init__(self, value_bounds: Sequence):
        if not isinstance(value_bounds, (list, tuple)) or len(value_bounds) != 3:
            raise_error("Invalid value for parameter: 'value_bounds' of DimensionInputInfo.",
                        [f"Expected a (min, opt, max) triple, but got: {value_bounds!r}."])
        lo, mid, hi = (_as_int(v, "value_bounds") for v in value_bounds)
        _check_order(lo, mid, hi, "parameter 'value_bounds'")
        self.value_bounds = Bounds((lo,), (mid,), (hi,))
        self.dtype = dtypes.int32

    def __str__(self) -> str:
        b = self.value_bounds
        return f"DimensionInputInfo(min={b.min}, opt={b.opt}, max={b.max})"

    __repr__ = __str__

    def __eq__(self, other) -> bool:
        return isinstance(other, DimensionInputInfo) and self.value_bounds == other.value_bounds

    def __hash__(self) -> int:
        return hash(self.value_bounds)

    def to_json(self) -> dict:
        b = self.value_bounds
        return {"kind": "DimensionInputInfo", "min": b.min[0], "opt": b.opt[0], "max": b.max[0]}


def check_named_dimensions(infos: dict) -> None:
    """Every use of a NamedDimension name must carry the same bounds (the dims are one value at run time)."""
    first: dict[str, tuple[str, tuple]] = {}
    for param, info in infos.items():
        if not isinstance(info, InputInfo):
            continue
        b = info.shape_bounds
        for i, name in info.dimension_names.items():
            where, bounds = f"{param}[{i}]", (b.min[i], b.opt[i], b.max[i])
            seen = first.setdefault(name, (where, bounds))
            if seen[1] != bounds:
                raise_error(f"NamedDimension '{name}' is used with different bounds.",
                            [f"{seen[0]} has bounds (min, opt, max) = {seen[1]}, but {where} has {bounds}.",
                             "Dims sharing a name are one value at run time: give them the same bounds, "
                             "or different names."])


def info_from_json(data: dict) -> InputInfo | DimensionInputInfo:
    if data["kind"] == "DimensionInputInfo":
        return DimensionInputInfo((data["min"], data["opt"], data["max"]))
    names = {int(k): v for k, v in data["dimension_names"].items()}
    shape = []
    for i, (lo, mid, hi) in enumerate(zip(data["min"], data["opt"], data["max"])):
        shape.append(NamedDimension(names[i], lo, mid, hi) if i in names else (lo, mid, hi))
    return InputInfo(shape, dtypes.BY_NAME[data["dtype"]])
