"""Short error reports: frames of tripy-lab, IPython and jax are hidden (as JAX hides its internals) so users
see their cell's line and the message, not a page of pipeline code. ``tp.config.show_internal_frames = True``
(or ``TRIPY_LAB_FULL_TRACEBACK=1``) shows everything.
"""

from __future__ import annotations

import linecache
import os
import traceback
import types

from tripy_lab.core import config
from tripy_lab.core.errors import TripyException
from tripy_lab.core.source import SourceLocation, _is_internal

_last: list[BaseException] = []  # the last exception shown briefly, for full_traceback()


def show_everything() -> bool:
    return bool(config.show_internal_frames)


_SHELL_DIRS = tuple(f"{os.sep}{name}{os.sep}" for name in ("IPython", "ipykernel"))
_LIBRARY_DIRS = tuple(f"{os.sep}{name}{os.sep}" for name in ("jax", "jaxlib", "jax_plugins"))


def _shell_frame(filename: str) -> bool:
    """IPython's own frames (run_cell_magic ...): never the user's code."""
    return any(d in filename for d in _SHELL_DIRS)


def _library_frame(filename: str) -> bool:
    return _shell_frame(filename) or any(d in filename for d in _LIBRARY_DIRS)


def _hidden(frame, lineno: int | None = None) -> bool:
    name = frame.f_code.co_filename
    if _is_internal(name) or _library_frame(name) or frame.f_locals.get("__tracebackhide__"):
        return True
    # The cell's own `get_ipython().run_cell_magic('tpcompile', ...)` line: IPython's rewrite, not the user's.
    return lineno is not None and "run_cell_magic(" in linecache.getline(name, lineno)


def is_user_location(loc: SourceLocation | None) -> bool:
    """A location the user can act on: not inside tripy-lab, IPython or jax."""
    return loc is not None and not _is_internal(loc.file) and not _library_frame(loc.file)


def innermost_user_location(exc: BaseException) -> SourceLocation | None:
    """The innermost frame of ``exc``'s traceback in the user's code (where a Python error happened)."""
    found = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):
        loc = SourceLocation(frame.f_code.co_filename, lineno, frame.f_code.co_name)
        if not _hidden(frame) and is_user_location(loc):
            found = loc
    return found


def _magic_call(loc: SourceLocation | None) -> bool:
    # IPython turns a `%%tpcompile` cell into this one line; it is the magic's caller, not the user's code
    return loc is not None and loc.code().lstrip().startswith("get_ipython().run_cell_magic(")


def relocate(exc: BaseException, fallback: SourceLocation | None) -> BaseException:
    """Point a TripyException that has no user location (raised under the magic) at ``fallback`` in the cell."""
    if isinstance(exc, TripyException) and fallback is not None and (
            not is_user_location(exc.location) or _magic_call(exc.location)):
        exc.location = fallback
        exc.args = (exc._render(),)
    return exc


def filter_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """A new traceback chain without tripy-lab's (and ``__tracebackhide__``) frames."""
    kept = []
    while tb is not None:
        if not _hidden(tb.tb_frame, tb.tb_lineno):
            kept.append(tb)
        tb = tb.tb_next
    out = None
    for item in reversed(kept):
        out = types.TracebackType(out, item.tb_frame, item.tb_lasti, item.tb_lineno)
    return out


def count_hidden(tb: types.TracebackType | None) -> int:
    n = 0
    while tb is not None:
        n += _hidden(tb.tb_frame, tb.tb_lineno)
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
        if is_user_location(loc):
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
            f"({hidden} frames of tripy-lab, IPython and jax hidden; tripy_lab.lab.errors.full_traceback() "
            "shows them, or set tp.config.show_internal_frames = True)",
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
