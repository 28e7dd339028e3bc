"""Every file tripy-lab writes goes through here: whole or not at all, never a half-written file.

``write_atomic(path, data)`` (or ``with replacing(path) as tmp:`` for writers that want a path) writes a
temp file in the target's own folder, fsyncs it, then ``os.replace``s it over the target, so the old file
stays whole until the new one is complete (a full disk, a file-size limit, kill -9). On any failure the
temp file is removed and a ``TripyException`` names the path and the cause (``ENOSPC``, ``EFBIG``,
``EROFS``, ...); the target is untouched. Bad paths ("", a NUL byte, a folder, a parent that is missing
or not a folder) are refused before anything is written.

``checked_path(path, parameter)`` is the same validation alone (for readers and callers that check early).

``durable=False`` skips the two fsyncs (the temp file's data, the folder's rename) but not the atomic rename: for
cache files whose reader checks a digest (``core.cache``: compiled entries, the timing-cache index), where a file a
power cut left empty or short is a verified miss that is rebuilt. The fsyncs were ~9 ms a write on the VM, two
writes per xla build: about 3 % of a 1000-op build.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from typing import BinaryIO

from tripy_lab.core.errors import TripyException, expected

_UMASK: int | None = None


class WriteError(TripyException):
    """A write that failed (the target is untouched); ``path`` and ``errno`` (None when not an OS error)."""

    def __init__(self, summary: str, details=(), path: str = "", errno_: int | None = None):
        super().__init__(summary, details)
        self.path, self.errno = path, errno_


def _umask() -> int:
    global _UMASK
    if _UMASK is None:  # os.umask can only be read by setting it: once per process
        _UMASK = os.umask(0o022)
        os.umask(_UMASK)
    return _UMASK


def cause(exc: BaseException) -> str:
    """``"No space left on device (ENOSPC)"`` for an OSError, else the exception's type and text."""
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{exc.strerror or os.strerror(exc.errno)} ({name})"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def checked_path(path, parameter: str = "path", what: str = "a file path") -> str:
    """``path`` as an absolute ``str``, or a TripyException naming the parameter (before any I/O)."""
    try:
        text = os.fspath(path)
    except TypeError:
        raise TripyException(f"Invalid value for parameter: '{parameter}'.",
                             [expected(parameter, path, what + " (str or os.PathLike)")]) from None
    if isinstance(text, bytes):
        text = os.fsdecode(text)
    if not text:
        raise TripyException(f"Invalid value for parameter: '{parameter}': the path is empty.",
                             [expected(parameter, path, what)])
    if "\x00" in text:
        raise TripyException(f"Invalid value for parameter: '{parameter}': the path holds a NUL character.",
                             [expected(parameter, path, what + " without NUL characters")])
    return os.path.abspath(os.path.expanduser(text))


def _target(path, parameter: str, follow_symlinks: bool) -> str:
    target = checked_path(path, parameter)
    if follow_symlinks:  # write where a link points, as open() would; caches replace the link itself
        target = os.path.realpath(target)
    if os.path.isdir(target):
        raise WriteError(f"Cannot write {target!r}: it is a folder (EISDIR).",
                         [expected(parameter, path, "a file path")], target, errno.EISDIR)
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        missing = not os.path.lexists(folder)
        raise WriteError(f"Cannot write {target!r}: its folder {folder!r} "
                         f"{'does not exist (ENOENT)' if missing else 'is not a folder (ENOTDIR)'}.",
                         [expected(parameter, path, "a path in an existing folder")], target,
                         errno.ENOENT if missing else errno.ENOTDIR)
    return target


def _mode(target: str, private: bool) -> int:
    if private:
        return 0o600
    try:  # replacing a file keeps its permissions; a new one gets what open() would give it
        return stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        return 0o666 & ~_umask()


@contextlib.contextmanager
def replacing(path, parameter: str = "path", *, private: bool = False, follow_symlinks: bool = True,
              what: str = "the file") -> Iterator[str]:
    """Yield a temp path beside ``path``; when the block ends without error, fsync it and move it over ``path``.

    Anything the block writes at the temp path (or at other names it then moves itself) is the caller's; the
    temp file is always gone afterwards. Errors are a TripyException naming ``path`` and the cause.
    """
    with _replacing(_target(path, parameter, follow_symlinks), private, what) as tmp:
        yield tmp


@contextlib.contextmanager
def _replacing(target: str, private: bool, what: str, durable: bool = True) -> Iterator[str]:
    folder = os.path.dirname(target)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(target)[:80]}.", suffix=".tmp")
        os.close(fd)
        yield tmp
        if durable:
            with open(tmp, "rb+") as f:  # the data reaches the disk before the name does
                os.fsync(f.fileno())
        os.chmod(tmp, _mode(target, private))
        os.replace(tmp, target)
        tmp = None
        if durable:
            _fsync_dir(folder)
    except (OSError, ValueError) as exc:
        raise WriteError(f"Could not write {what} {target!r}: {cause(exc)}.",
                             [f"{'The existing file is unchanged' if os.path.exists(target) else 'Nothing was written'}"
                              " (files are written to a temp file beside it, then renamed).",
                              *(["The disk is full or a file-size limit was reached: free space or write elsewhere."]
                                if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EFBIG,
                                                                               errno.EDQUOT) else [])],
                         target, getattr(exc, "errno", None)) from exc
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def write_atomic(path, data: bytes | str | Callable[[BinaryIO], None], parameter: str = "path", *,
                 private: bool = False, follow_symlinks: bool = True, what: str = "the file",
                 durable: bool = True) -> str:
    """Write ``data`` (bytes, str as UTF-8, or a function writing to a binary file) to ``path`` atomically.

    ``private``: mode 0600 (cache entries); else a replaced file keeps its mode and a new one gets the umask's.
    ``durable=False``: no fsyncs, for digest-checked cache files only (module docstring).
    Returns the absolute path written.
    """
    target = _target(path, parameter, follow_symlinks)
    with _replacing(target, private, what, durable) as tmp, open(tmp, "wb") as f:
        if callable(data):
            data(f)
        else:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return target


def _fsync_dir(folder: str) -> None:
    """Make the rename itself durable (where the OS lets a folder be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
