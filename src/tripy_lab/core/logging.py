"""tp.logger: tripy's verbosity levels, including the stage printers `trace`, `mlir` and `timing`."""

from __future__ import annotations

import contextlib
import sys

_IMPLIES = {"verbose": {"verbose", "info", "warning", "error"}, "info": {"info", "warning", "error"},
            "warning": {"warning", "error"}, "error": {"error"}, "trace": {"trace"}, "mlir": {"mlir"},
            "ir": {"trace", "mlir"}, "timing": {"timing"}}
_PREFIX = {"verbose": "[V] ", "info": "[I] ", "warning": "[W] ", "error": "[E] ",
           "trace": "==== Trace IR ====\n", "mlir": "==== MLIR ====\n", "timing": "==== Timing ====\n"}


class Logger:
    def __init__(self):
        self._verbosity: set[str] = set(_IMPLIES["info"])
        self.enable_color = True
        self._indent = 0
        self._once: set[str] = set()

    @property
    def verbosity(self):
        return self._verbosity

    @verbosity.setter
    def verbosity(self, value) -> None:
        values = {value} if isinstance(value, str) else set(value.get("", "info") if isinstance(value, dict) else value)
        unknown = values - set(_IMPLIES)
        if unknown:
            raise ValueError(f"Unknown verbosity level(s): {sorted(unknown)}; expected some of {sorted(_IMPLIES)}.")
        self._verbosity = set().union(*(_IMPLIES[v] for v in values)) if values else set()

    def enabled(self, level: str) -> bool:
        return level in self._verbosity

    @contextlib.contextmanager
    def use_verbosity(self, value):
        old = self._verbosity
        self.verbosity = value
        try:
            yield
        finally:
            self._verbosity = old

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


logger = Logger()
