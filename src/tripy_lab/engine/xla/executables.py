"""One built executable of the xla engine (``_Built``: a concrete signature), the jax settings its compiles
and calls run under, signature labels, and the lazily printed stage texts."""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from tripy_lab.engine.base import LayerRecord


def _compile_contexts(x64: bool) -> ExitStack:
    from jax._src import config as jc

    stack = ExitStack()
    # jax's persistent cache is off: our store (cache) binds entries to their program
    for name, value in (("traceback_in_locations_limit", 0), ("enable_compilation_cache", False)):
        state = getattr(jc, name, None)
        if state is not None:
            stack.enter_context(state(value))
    if x64:
        stack.enter_context(_x64())
    return stack


def _x64():
    import jax

    state = getattr(jax, "enable_x64", None)  # public since jax 0.7
    if state is None:
        from jax._src import config as jc

        state = jc.enable_x64
    return state(True)


def _fmt_sig(names: Sequence[str], shapes: Sequence[tuple], dim_names: Sequence[str], dims: Sequence[int]) -> str:
    parts = [f"{n}={'x'.join(map(str, s)) if s else 'scalar'}" for n, s in zip(names, shapes)]
    parts += [f"{n}={v}" for n, v in zip(dim_names, dims)]
    return ", ".join(parts) or "()"


@dataclass
class _Built:
    """One executable: a concrete input signature."""

    key: tuple
    label: str
    call: Any  # jitted function object: call(*data_args, *consts)
    compiled: Any
    lowered: Any
    lower_s: float
    compile_s: float
    persistent: str  # "hit" / "miss" / "off"
    _layers: list[LayerRecord] | None = None
    _hlo: str | None = None
    notes: list[str] = field(default_factory=list)
    rejected: str = ""  # why a persistent cache entry was not used (swapped, truncated, ...)
    path: str = "jax"  # how the StableHLO was made: "direct" (emit) or "jax" (traced)

    @property
    def hlo(self) -> str:
        if self._hlo is None:
            self._hlo = self.compiled.as_text()
        return self._hlo


class LazyTexts(MutableMapping):
    """``BuildReport.extra_stages`` whose values may be functions: each is called on first read, then kept."""

    def __init__(self, items: dict):
        self._items = dict(items)

    def __getitem__(self, name: str) -> str:
        value = self._items[name]
        if callable(value):
            value = self._items[name] = value()
        return value

    def __setitem__(self, name: str, value) -> None:
        self._items[name] = value

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
