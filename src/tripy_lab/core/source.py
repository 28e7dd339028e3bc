"""Where in the user's code a tensor or op was made: the first stack frame outside tripy_lab."""

from __future__ import annotations

import functools
import linecache
import os
import re
import sys
import sysconfig
from collections.abc import Callable
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The standard library is never the user's line (contextlib's __exit__ re-raises inside our context managers).
_STDLIB_DIRS = tuple({os.path.abspath(sysconfig.get_paths()[k]) + os.sep for k in ("stdlib", "platstdlib")})
# IPython names cell files like /tmp/ipykernel_1234/2716453.py or <ipython-input-3-...>.
_CELL_RE = re.compile(r"(ipykernel_\d+|<ipython-input-(\d+)-)")
# Set by the lab when IPython is loaded: a cell's filename -> its execution count (None: not a cell).
cell_lookup: Callable[[str], int | None] | None = None


def _ipython_cells() -> Callable[[str], int | None] | None:
    """IPython's cell filename -> execution count, when this runs in IPython (found without importing it), so a
    notebook names cells ``In [5]`` before ``%load_ext tripy_lab`` too."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    cells = getattr(getattr(shell, "compile", None), "_filename_map", None)
    return cells.get if isinstance(cells, dict) else None


@dataclass(frozen=True)
class SourceLocation:
    file: str
    line: int
    function: str
    col: int | None = None
    end_col: int | None = None

    @property
    def is_cell(self) -> bool:
        return bool(_CELL_RE.search(self.file))

    @property
    def cell_name(self) -> str | None:
        """``In [5]`` for a notebook cell whose execution count is known, ``cell`` for another one, else None."""
        lookup = cell_lookup or _ipython_cells()
        count = lookup(self.file) if lookup is not None else None
        if count is not None:
            return f"In [{count}]"
        return "cell" if self.is_cell else None

    @property
    def short(self) -> str:
        """`file.py:12`, or `In [5]:12` for notebook cells: what tables and MLIR locs show."""
        name = self.cell_name or os.path.basename(self.file)
        return f"{name}:{self.line}"

    @property
    def where(self) -> str:
        """`In [5], line 3` for a cell, else `path/file.py:12`."""
        name = self.cell_name
        return f"{name}, line {self.line}" if name else f"{self.file}:{self.line}"

    def code(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")

    def render(self) -> str:
        """The user's line with a ^^^ marker under the expression, like tripy's errors."""
        code = self.code()
        head = f"--> {self.where} in {self.function}()"
        if not code:
            return head
        width = len(str(self.line))
        lines = [head, " " * (width + 1) + " |", f" {self.line} | {code}"]
        if self.col is not None and self.end_col is not None and self.end_col > self.col:
            lines.append(" " * (width + 1) + " | " + " " * self.col + "^" * (self.end_col - self.col))
        return "\n".join(lines)


@functools.lru_cache(maxsize=4096)
def _is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return path.startswith(_PKG_DIR) or path.startswith(_STDLIB_DIRS) or filename.startswith("<frozen")


def user_location(skip_internal: bool = True, start=None) -> SourceLocation | None:
    """The innermost frame that is not tripy_lab's own code (from ``start``, a frame, when given)."""
    frame = sys._getframe(1) if start is None else start
    if skip_internal:
        internal = _INTERNAL_FILES  # set membership per frame: cheaper than a call (~8 frames an op)
        while frame is not None:
            filename = frame.f_code.co_filename
            if filename not in internal:
                if not _is_internal(filename):
                    break
                internal.add(filename)  # bounded: tripy_lab's and the standard library's files
            frame = frame.f_back
    if frame is None:
        return None
    # Every op asks, and one line makes many ops: remember the location of each (code, instruction).
    # Keyed by id(code) (hashing a code object hashes its contents); the entry holds the code object,
    # so that id is not reused while the entry lives.
    code, lasti = frame.f_code, frame.f_lasti
    key = (id(code), lasti)
    entry = _LOCATIONS.get(key)
    if entry is not None and entry[0] is code and entry[1].line == frame.f_lineno:
        return entry[1]
    loc = _frame_location(frame)
    if len(_LOCATIONS) >= _LOCATIONS_LIMIT:
        _LOCATIONS.clear()
    _LOCATIONS[key] = (code, loc)
    return loc


_INTERNAL_FILES: set[str] = set()
_LOCATIONS: dict[tuple[int, int], tuple[object, SourceLocation]] = {}
_LOCATIONS_LIMIT = 1 << 14


def _frame_location(frame) -> SourceLocation:
    col = end_col = None
    positions = list(frame.f_code.co_positions())
    idx = frame.f_lasti // 2
    if 0 <= idx < len(positions):
        _, end_line, col, end_col = positions[idx]
        if end_line != frame.f_lineno:
            end_col = None
    return SourceLocation(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, col, end_col)


def return_location(code) -> SourceLocation:
    """Where a function returns: its one ``return`` line (with columns), else its ``def`` line."""
    import dis

    returns = [ins.positions for ins in dis.get_instructions(code)
               if ins.opname in ("RETURN_VALUE", "RETURN_CONST") and ins.positions and ins.positions.lineno]
    lines = {p.lineno for p in returns}
    if len(lines) == 1:
        pos = returns[0]
        same = pos.end_lineno == pos.lineno
        return SourceLocation(code.co_filename, pos.lineno, code.co_name, pos.col_offset if same else None,
                              pos.end_col_offset if same else None)
    return SourceLocation(code.co_filename, code.co_firstlineno, code.co_name)
