"""Short error reports: tripy-lab's own frames are hidden (as JAX hides its internals) so users see their
line and the message, not a page of pipeline code. ``TRIPY_LAB_FULL_TRACEBACK=1`` shows everything.
"""

from __future__ import annotations

import os
import traceback
import types

from tripy_lab.core.errors import TripyException
from tripy_lab.core.source import _is_internal

_last: list[BaseException] = []  # the last exception shown briefly, for full_traceback()


def show_everything() -> bool:
    return os.environ.get("TRIPY_LAB_FULL_TRACEBACK", "") not in ("", "0")


_SHELL_DIRS = tuple(f"{os.sep}{name}{os.sep}" for name in ("IPython", "ipykernel"))


def _hidden(frame) -> bool:
    return _is_internal(frame.f_code.co_filename) or bool(frame.f_locals.get("__tracebackhide__"))


def _shell_frame(filename: str) -> bool:
    """IPython's own frames (run_cell_magic ...): never the user's code."""
    return any(d in filename for d in _SHELL_DIRS)


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """A new traceback chain without tripy-lab's (and ``__tracebackhide__``) frames."""
    kept = []
    while tb is not None:
        if not _hidden(tb.tb_frame):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for item in reversed(kept):
        out = types.TracebackType(out, item.tb_frame, item.tb_lasti, item.tb_lineno)
    return out


def count_hidden(tb: types.TracebackType | None) -> int:
    n = 0
    while tb is not None:
        n += _hidden(tb.tb_frame)
        tb = tb.tb_next
    return n


def user_frames(tb: types.TracebackType | None) -> list[str]:
    """``file:line in func`` of the user's frames, innermost last (cells print as ``cell:3``)."""
    from tripy_lab.core.source import SourceLocation

    out = []
    for fs, lineno in traceback.walk_tb(filter_traceback(tb)):
        loc = SourceLocation(fs.f_code.co_filename, lineno, fs.f_code.co_name)
        if (
            _shell_frame(loc.file) or "run_cell_magic" in loc.code()
        ):  # the cell's own %%tpcompile line: not informative
            continue
        out.append(f"{loc.short} in {loc.function}()")
    return out


def brief(exc: BaseException) -> str:
    """The message a user needs: summary, details, their line with a caret, then their frames."""
    if isinstance(exc, TripyException):
        # A location inside IPython's machinery (an error raised by the magic itself) tells the user nothing.
        loc = exc.location
        parts = [exc.summary, *(f"    {d}" for d in exc.details if d)]
        if loc is not None and not _shell_frame(loc.file):
            parts += ["", loc.render()]
        head = "TripyException: " + "\n".join(parts)
    else:
        head = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    frames = user_frames(exc.__traceback__)
    lines = [head]
    if frames:
        lines += ["", "Your frames (innermost last):"] + [f"    {f}" for f in frames]
    hidden = count_hidden(exc.__traceback__)
    if hidden:
        lines += [
            "",
            f"({hidden} tripy-lab frames hidden; tripy_lab.lab.errors.full_traceback() shows them, "
            "or set TRIPY_LAB_FULL_TRACEBACK=1)",
        ]
    return "\n".join(lines)


def full_traceback() -> str:
    """The complete traceback of the last error shown briefly."""
    if not _last:
        return "no tripy-lab error shown yet"
    exc = _last[-1]
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def custom_exc_handler(shell, etype, value, tb, tb_offset=None):
    """IPython ``set_custom_exc`` handler for TripyException: a short error output, cell marked failed."""
    if show_everything():
        stb = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    else:
        _last[:] = [value]
        red, reset = "\x1b[0;31m", "\x1b[0m"
        text = brief(value)
        first, _, rest = text.partition("\n")
        stb = [red + first + reset + ("\n" + rest if rest else "")]
    # _showtraceback sends a proper `error` message on ipykernel (and prints in a terminal).
    shell._showtraceback(etype, value, stb)
    return stb


def filtered(exc: BaseException) -> BaseException:
    """``exc`` with tripy-lab's frames dropped when it came from the user's code.

    An exception raised inside tripy-lab itself (not a TripyException) is a bug: keep every frame.
    """
    tb = exc.__traceback__
    inner = tb
    while inner is not None and inner.tb_next is not None:
        inner = inner.tb_next
    if show_everything() or inner is None or _is_internal(inner.tb_frame.f_code.co_filename):
        return exc
    return exc.with_traceback(filter_traceback(tb))
