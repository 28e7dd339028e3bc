"""tp.logger: tripy's verbosity levels, including the stage printers `trace`, `mlir` and `timing`."""

from __future__ import annotations

import contextlib
import sys

_HERE = __name__

_IMPLIES = {"verbose": {"verbose", "info", "warning", "error"}, "info": {"info", "warning", "error"},
            "warning": {"warning", "error"}, "error": {"error"}, "trace": {"trace"}, "mlir": {"mlir"},
            "ir": {"trace", "mlir"}, "timing": {"timing"}}
_PREFIX = {"verbose": "[V] ", "info": "[I] ", "warning": "[W] ", "error": "[E] ",
           "trace": "==== Trace IR ====\n", "mlir": "==== MLIR ====\n", "timing": "==== Timing ====\n"}


def _module_path(name: str) -> str:
    """``tripy_lab.frontend.ops_math`` -> ``frontend/ops_math``; a verbosity key ``frontend.ops_math.py`` alike."""
    name = name.removesuffix(".py").replace("\\", "/").replace(".", "/")
    return name.removeprefix("tripy_lab/").removeprefix("tripy_lab").strip("/")


class Logger:
    def __init__(self):
        # Module sub-path ("" = everything else) -> enabled levels, as nvtripy's per-path verbosity.
        self._map: dict[str, set[str]] = {"": set(_IMPLIES["info"])}
        self.enable_color = True
        self._indent = 0
        self._once: set[str] = set()

    @staticmethod
    def _levels(values) -> set[str]:
        values = {values} if isinstance(values, str) else set(values)  # a string is one level, never its letters
        unknown = {v for v in values if v not in _IMPLIES}
        if unknown:
            raise ValueError(f"Unknown verbosity level(s): {sorted(map(str, unknown))}; "
                             f"expected some of {sorted(_IMPLIES)}.")
        return set().union(*(_IMPLIES[v] for v in values)) if values else set()

    @property
    def verbosity(self):
        """The enabled levels (a set); a dict ``{module path: set}`` once per-module levels are set."""
        if len(self._map) == 1:
            return set(self._map[""])
        return {k: set(v) for k, v in self._map.items()}

    @verbosity.setter
    def verbosity(self, value) -> None:
        per_path = dict(value) if isinstance(value, dict) else {"": value}
        per_path.setdefault("", "info")
        self._map = {_module_path(str(k)): self._levels(v) for k, v in per_path.items()}

    def _levels_for(self, module: str | None) -> set[str]:
        if module is None or len(self._map) == 1:
            return self._map[""]
        path = _module_path(module)
        best = ""
        for key in self._map:
            if key and (path == key or path.startswith(key + "/")) and len(key) > len(best):
                best = key
        return self._map[best]

    def enabled(self, level: str, module: str | None = None) -> bool:
        if module is None and len(self._map) > 1:
            module = _caller_module()
        return level in self._levels_for(module)

    @contextlib.contextmanager
    def use_verbosity(self, verbosity):
        old = {k: set(v) for k, v in self._map.items()}
        self.verbosity = verbosity
        try:
            yield
        finally:
            self._map = old

    @contextlib.contextmanager
    def indent(self, level: int = 4):
        self._indent += level
        try:
            yield
        finally:
            self._indent -= level

    def log(self, message, verbosity: str, mode: str = "each") -> None:
        if not self.enabled(verbosity):
            return
        text = message() if callable(message) else message
        if mode == "once":
            if text in self._once:
                return
            self._once.add(text)
        pad = " " * self._indent
        print(pad + _PREFIX[verbosity] + text.replace("\n", "\n" + pad), file=sys.stdout)

    def verbose(self, m, mode="each"):
        self.log(m, "verbose", mode)

    def info(self, m, mode="each"):
        self.log(m, "info", mode)

    def warning(self, m, mode="each"):
        self.log(m, "warning", mode)

    def error(self, m, mode="each"):
        self.log(m, "error", mode)

    def trace(self, m, mode="each"):
        self.log(m, "trace", mode)

    def mlir(self, m, mode="each"):
        self.log(m, "mlir", mode)

    def timing(self, m, mode="each"):
        self.log(m, "timing", mode)


def _caller_module() -> str | None:
    """The tripy_lab module that called the logger (None for user code: it follows the default levels)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == _HERE:
        frame = frame.f_back
    name = frame.f_globals.get("__name__", "") if frame is not None else ""
    return name if name.startswith("tripy_lab") else None


logger = Logger()
