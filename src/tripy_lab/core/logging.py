"""tp.logger: tripy's verbosity levels, including the stage printers `trace`, `mlir` and `timing`."""

from __future__ import annotations

import contextlib
import os
import sys

_HERE = __name__

_IMPLIES = {"verbose": {"verbose", "info", "warning", "error"}, "info": {"info", "warning", "error"},
            "warning": {"warning", "error"}, "error": {"error"}, "trace": {"trace"}, "mlir": {"mlir"},
            "ir": {"trace", "mlir"}, "timing": {"timing"}}
_PREFIX = {"verbose": "[V] ", "info": "[I] ", "warning": "[W] ", "error": "[E] ",
           "trace": "==== Trace IR ====\n", "mlir": "==== MLIR ====\n", "timing": "==== Timing ====\n"}


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parts(path: str) -> tuple[str, ...]:
    """A verbosity key or a caller's path as trie components: ``frontend``, ``frontend/ops_math.py``,
    ``tripy_lab.frontend.ops_math`` and absolute file paths alike (a ``.py`` suffix is not part of a name)."""
    path = path.replace("\\", "/")
    if "/" not in path:  # a dotted module name
        path = path.removesuffix(".py").replace(".", "/")
    parts = [p.removesuffix(".py") for p in path.split("/") if p and p != "."]
    return tuple(parts[1:] if parts[:1] == ["tripy_lab"] else parts)


def _file_parts(filename: str) -> list[tuple[str, ...]]:
    """The trie paths of a source file: relative to the tripy_lab package (as nvtripy's keys: ``frontend/...``,
    or ``../tests/x.py`` resolved against the working directory, as nvtripy resolves it), and absolute."""
    rel = os.path.relpath(filename, _PACKAGE_ROOT)
    return [_parts(rel), _parts(os.path.realpath(rel)), _parts(os.path.realpath(filename))]


class VerbosityTrie(dict):
    """nvtripy's per-path verbosity as nested dicts: ``{"": levels, "frontend": {"": levels}}``; the levels of a
    path come from its longest prefix that sets some."""

    def levels_for(self, candidates) -> set[str]:
        best, best_len = self[""], -1
        for parts in candidates:
            node = self
            for depth, part in enumerate(parts):
                node = node.get(part)
                if not isinstance(node, dict):
                    break
                if "" in node and depth > best_len:
                    best, best_len = node[""], depth
        return best

    @property
    def has_non_default_entries(self) -> bool:
        return len(self) > 1


class Logger:
    def __init__(self):
        self._trie = VerbosityTrie({"": set(_IMPLIES["info"])})
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
    def verbosity(self) -> VerbosityTrie:
        """The enabled levels per path, as nvtripy reads them back: ``{"": {"info", "warning", "error"}}`` by
        default; ``{"frontend": {"": {"error"}}, "": {...}}`` after ``verbosity = {"frontend": "error"}``."""
        return self._trie

    @verbosity.setter
    def verbosity(self, value) -> None:
        if isinstance(value, VerbosityTrie):
            self._trie = value
            return
        per_path = dict(value) if isinstance(value, dict) else {"": value}
        per_path.setdefault("", "info")
        trie = VerbosityTrie()
        for key, levels in per_path.items():
            node = trie
            for part in _parts(str(key)):
                node = node.setdefault(part, {})
            node[""] = self._levels(levels)
        self._trie = trie

    def _levels_for(self, module: str | None) -> set[str]:
        if module is None or not self._trie.has_non_default_entries:
            return self._trie[""]
        return self._trie.levels_for([_parts(module)])

    def enabled(self, level: str, module: str | None = None) -> bool:
        if module is not None or not self._trie.has_non_default_entries:
            return level in self._levels_for(module)
        return level in self._trie.levels_for(_file_parts(_caller_file()))

    @contextlib.contextmanager
    def use_verbosity(self, verbosity):
        old = self._trie
        self.verbosity = verbosity
        try:
            yield
        finally:
            self._trie = old

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
        pad = " " * self._indent  # after the prefix, as nvtripy: "[I]     message"
        print(_PREFIX[verbosity] + pad + text.replace("\n", "\n" + pad), file=sys.stdout)

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


def _caller_file() -> str:
    """The source file that called the logger (the first frame outside this module)."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_globals.get("__name__") == _HERE:
        frame = frame.f_back
    return frame.f_code.co_filename if frame is not None else ""


logger = Logger()
