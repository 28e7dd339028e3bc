"""Where in the user's code a tensor or op was made: the first stack frame outside tripy_lab."""

from __future__ import annotations

import functools
import linecache
import os
import re
import sys
from dataclasses import dataclass

_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# IPython names cell files like /tmp/ipykernel_1234/2716453.py or <ipython-input-3-...>.
_CELL_RE = re.compile(r"(ipykernel_\d+|<ipython-input-(\d+)-)")


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
    def short(self) -> str:
        """`file.py:12` or `cell:12` for notebook cells: what tables and MLIR locs show."""
        name = "cell" if self.is_cell else os.path.basename(self.file)
        return f"{name}:{self.line}"

    def code(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")

    def render(self) -> str:
        """The user's line with a ^^^ marker under the expression, like tripy's errors."""
        code = self.code()
        head = f"--> {self.file}:{self.line} in {self.function}()"
        if not code:
            return head
        width = len(str(self.line))
        lines = [head, " " * (width + 1) + " |", f" {self.line} | {code}"]
        if self.col is not None and self.end_col is not None and self.end_col > self.col:
            lines.append(" " * (width + 1) + " | " + " " * self.col + "^" * (self.end_col - self.col))
        return "\n".join(lines)


@functools.lru_cache(maxsize=4096)
def _is_internal(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PKG_DIR) or filename.startswith("<frozen")


def user_location(skip_internal: bool = True) -> SourceLocation | None:
    """The innermost frame that is not tripy_lab's own code."""
    frame = sys._getframe(1)
    while frame is not None and skip_internal and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    col = end_col = None
    positions = list(frame.f_code.co_positions())
    idx = frame.f_lasti // 2
    if 0 <= idx < len(positions):
        _, end_line, col, end_col = positions[idx]
        if end_line != frame.f_lineno:
            end_col = None
    return SourceLocation(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, col, end_col)
