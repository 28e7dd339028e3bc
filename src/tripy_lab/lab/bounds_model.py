"""The bounds editor's state as plain data: what the widgets show and edit, testable without a kernel.

A ``BoundsModel`` holds one ``ParamState`` per runtime parameter. Edits go through its methods so that
NamedDimension groups move together and opt stays inside [min, max]; ``problems()`` flags what is
invalid before anything is traced or built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.lab import spec as S

KINDS = ("tensor", "dim", "const")


@dataclass
class DimState:
    min: int
    opt: int
    max: int
    name: str | None = None

    @property
    def static(self) -> bool:
        return self.min == self.opt == self.max


@dataclass
class ParamState:
    name: str
    kind: str = "tensor"  # tensor: InputInfo, dim: DimensionInputInfo, const: a value baked in
    dtype: str = "float32"
    dims: list[DimState] = field(default_factory=list)
    value: DimState = field(default_factory=lambda: DimState(1, 2, 4))  # DimensionInputInfo bounds
    const: Any = None  # the constant, for kind == "const"


@dataclass(frozen=True)
class Problem:
    param: str
    dim: int | None  # None: the whole parameter
    message: str

    def __str__(self) -> str:
        where = self.param if self.dim is None else f"{self.param}[{self.dim}]"
        return f"{where}: {self.message}"


def _state_from_spec(name: str, spec) -> ParamState:
    if isinstance(spec, S.DimValueSpec):
        return ParamState(name, "dim", "int32", [], DimState(spec.min, spec.opt, spec.max))
    if isinstance(spec, S.TensorSpec):
        return ParamState(
            name, "tensor", spec.dtype, [DimState(d.min, d.opt, d.max, d.name) for d in spec.dims]
        )
    raise TypeError(spec)


class BoundsModel:
    def __init__(self, params: list[ParamState]):
        self.params: dict[str, ParamState] = {p.name: p for p in params}

    @classmethod
    def from_values(cls, names: list[str], values: dict[str, Any]) -> BoundsModel:
        """One state per name: InputInfos or specs, constants, or a default where a name has no value."""
        params = []
        for name in names:
            value = values.get(name, None)
            if isinstance(value, (InputInfo, DimensionInputInfo)):
                params.append(_state_from_spec(name, S.from_info(value)))
            elif isinstance(value, (S.TensorSpec, S.DimValueSpec)):
                params.append(_state_from_spec(name, value))
            elif name in values:
                params.append(ParamState(name, "const", const=value))
            else:
                params.append(default_param(name))
        return cls(params)

    # -- edits ---------------------------------------------------------------------------------------
    def _group(self, param: str, index: int) -> list[DimState]:
        """The dim and every dim sharing its NamedDimension name (they move together)."""
        dim = self.params[param].dims[index]
        if not dim.name:
            return [dim]
        return [d for p in self.params.values() if p.kind == "tensor" for d in p.dims if d.name == dim.name]

    def _dim(self, param: str, index: int | None) -> list[DimState]:
        return [self.params[param].value] if index is None else self._group(param, index)

    def set_dtype(self, param: str, dtype: str) -> None:
        self.params[param].dtype = S.DTYPE_ALIASES.get(dtype, dtype)

    def set_range(self, param: str, index: int | None, lo: int, hi: int) -> None:
        """A range-slider move: opt is pulled back inside [lo, hi]."""
        for d in self._dim(param, index):
            d.min, d.max = int(lo), int(hi)
            d.opt = min(max(d.opt, d.min), d.max)

    def set_opt(self, param: str, index: int | None, opt: int) -> None:
        for d in self._dim(param, index):
            d.opt = int(opt)

    def set_bounds(self, param: str, index: int | None, lo: int, opt: int, hi: int) -> None:
        """Exact bounds (typed in): stored as given, so problems() can flag them."""
        for d in self._dim(param, index):
            d.min, d.opt, d.max = int(lo), int(opt), int(hi)

    def set_static(self, param: str, index: int, static: bool) -> None:
        for d in self._group(param, index):
            if static:
                d.min = d.max = d.opt
            elif d.static:
                d.min, d.max = (1 if d.opt > 1 else 0), max(2 * d.opt, d.opt + 1)

    def set_kind(self, param: str, kind: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        p = self.params[param]
        p.kind = kind
        if kind == "tensor" and not p.dims:
            p.dims = [DimState(1, 2, 4)]

    def add_dim(self, param: str, size: int = 1) -> None:
        self.params[param].dims.append(DimState(size, size, size))

    def remove_dim(self, param: str) -> None:
        if self.params[param].dims:
            self.params[param].dims.pop()

    # -- checks and outputs --------------------------------------------------------------------------
    def problems(self) -> list[Problem]:
        out: list[Problem] = []
        names: dict[str, tuple[str, int, DimState]] = {}
        for p in self.params.values():
            if p.kind == "dim":
                out += [Problem(p.name, None, m) for m in _bounds_problems(p.value, "value")]
                continue
            if p.kind != "tensor":
                continue
            if p.dtype not in S.SHORT_NAMES:
                out.append(Problem(p.name, None, f"unknown dtype {p.dtype!r}"))
            for i, d in enumerate(p.dims):
                out += [Problem(p.name, i, m) for m in _bounds_problems(d, "dim")]
                if d.name:
                    first = names.setdefault(d.name, (p.name, i, d))
                    other = first[2]
                    if (other.min, other.opt, other.max) != (d.min, d.opt, d.max):
                        out.append(
                            Problem(
                                p.name, i, f"NamedDimension '{d.name}' differs from {first[0]}[{first[1]}]"
                            )
                        )
        return out

    def is_valid(self) -> bool:
        return not self.problems()

    def spec_of(self, param: str) -> S.TensorSpec | S.DimValueSpec | None:
        p = self.params[param]
        if p.kind == "dim":
            return S.DimValueSpec(p.value.min, p.value.opt, p.value.max)
        if p.kind == "tensor":
            return S.TensorSpec(p.dtype, tuple(S.DimSpec(d.min, d.opt, d.max, d.name) for d in p.dims))
        return None

    def key(self) -> tuple:
        """Hashable identity of the current bounds: equal keys trace to the same program."""
        return tuple((n, self.spec_of(n) or ("const", id(p.const))) for n, p in self.params.items())

    def values(self) -> dict[str, Any]:
        """name -> InputInfo / DimensionInputInfo / constant (call only when is_valid())."""
        out: dict[str, Any] = {}
        for name, p in self.params.items():
            spec = self.spec_of(name)
            out[name] = p.const if spec is None else S.to_info(spec)
        return out

    def compact(self) -> str:
        """The specs as a %%tpcompile line fragment: ``a=f32[1:2:3,4] s=dim[1:2:4]``."""
        defined: set[str] = set()
        parts = []
        for name in self.params:
            spec = self.spec_of(name)
            if spec is not None:
                parts.append(f"{name}={S.format_spec(spec, defined)}")
        return " ".join(parts)

    def code(self, func_name: str = "func", exe_name: str = "exe", optimization_level: int = 3) -> str:
        """Plain Tripy code that compiles the same thing, for copying into a script."""
        lines: list[str] = []
        seen: set[str] = set()
        args = []
        for name in self.params:
            spec = self.spec_of(name)
            if spec is None:
                args.append(name)
                continue
            for d in getattr(spec, "dims", ()):
                if d.name and d.name not in seen:
                    seen.add(d.name)
                    lines.append(f'{d.name} = tp.NamedDimension("{d.name}", {d.min}, {d.opt}, {d.max})')
            args.append(info_code(spec))
        level = "" if optimization_level == 3 else f"optimization_level={optimization_level}, "
        lines.append(f"{exe_name} = tp.compile(")
        lines.append(f"    {func_name},")
        if level:
            lines.append(f"    {level.rstrip(', ')},")
        lines.append("    args=[")
        lines += [f"        {a}," for a in args]
        lines.append("    ],")
        lines.append(")")
        return "\n".join(lines)


def info_code(spec) -> str:
    """``tp.InputInfo(shape=((1, 2, 3), 4), dtype=tp.float32)`` for one spec."""
    if isinstance(spec, S.DimValueSpec):
        return f"tp.DimensionInputInfo(value_bounds=({spec.min}, {spec.opt}, {spec.max}))"
    dims = []
    for d in spec.dims:
        if d.name:
            dims.append(d.name)
        elif d.static:
            dims.append(str(d.min))
        else:
            dims.append(f"({d.min}, {d.opt}, {d.max})")
    shape = "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    return f"tp.InputInfo(shape={shape}, dtype=tp.{spec.dtype})"


def _bounds_problems(d: DimState, what: str) -> list[str]:
    if d.min < 0:
        return [f"min {d.min} is negative"]
    if d.min > d.max:
        return [f"min {d.min} > max {d.max}"]
    if not d.min <= d.opt <= d.max:
        return [f"opt {d.opt} is outside [{d.min}, {d.max}]"]
    return []


def default_param(name: str) -> ParamState:
    """A parameter the magic line did not describe: a dynamic 1-D float32 tensor to start from."""
    return ParamState(name, "tensor", "float32", [DimState(1, 2, 4)])
