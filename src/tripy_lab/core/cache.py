"""The caches tripy-lab reads back: a private folder per user, entries bound to their program, checked on read.

Trust rule (docs/SECURITY.md):

* A cache folder is used only when it is owned by the current user and neither group- nor
  other-writable, and its parent cannot be renamed under us by someone else; a missing folder is
  created with mode 0700. Anything else is a ``TripyException`` naming the ``tp.config`` setting.
* Every entry is written under a key derived from what it is for (the caller hashes the program text,
  engine, options and versions with :func:`digest`) and carries that key and a SHA-256 digest of its
  payload. A read that finds no file, a foreign-owned file, another key (a swapped entry), a short file
  or a wrong digest is a *miss with a reason*; the caller rebuilds and :meth:`EntryStore.write` replaces
  the entry atomically (temp file in the same folder + ``os.replace``).
* The digest detects accidents and swaps, not an attacker who can write the folder as you: such an
  attacker can already run code as you. That is why the folder itself is checked.
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import json
import os
import stat
import threading
import time
from collections.abc import Callable
from typing import Any

from tripy_lab.core import files
from tripy_lab.core.errors import TripyException, expected

ENTRY_MAGIC = b"tripy-lab cache entry v1\n"
TIMING_FORMAT = "tripy-lab timing cache"
TIMING_VERSION = 1


def default_dir() -> str:
    """``$XDG_CACHE_HOME/tripy-lab``, else ``~/.cache/tripy-lab``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tripy-lab")


def digest(*parts: Any) -> str:
    """SHA-256 (hex) of ``parts`` (str/bytes/anything with a stable ``repr``), each length-prefixed."""
    h = hashlib.sha256()
    for p in parts:
        b = p if isinstance(p, bytes) else (p if isinstance(p, str) else repr(p)).encode("utf-8", "surrogatepass")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def _refuse(path: str, parameter: str, why: str) -> TripyException:
    return TripyException(
        f"Refusing the cache folder {path!r}: {why}.",
        [expected(f"tp.config.{parameter}", path, "a folder owned by you and writable only by you"),
         "Another user could plant compiled code there, which tripy-lab would load and run.",
         f"Point tp.config.{parameter} at a folder of your own (it is created with mode 0700)."])


def _who(uid: int) -> str:
    try:
        import pwd

        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def check_private(path: str, st: os.stat_result, parameter: str) -> None:
    """Raise unless ``st`` (of ``path``) is owned by us and not group/other-writable."""
    me = os.geteuid()
    if st.st_uid != me:
        raise _refuse(path, parameter, f"it is owned by {_who(st.st_uid)}, not by you ({_who(me)})")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        who = " and ".join(w for w, bit in (("group", stat.S_IWGRP), ("others", stat.S_IWOTH)) if st.st_mode & bit)
        raise _refuse(path, parameter, f"it is writable by {who} (mode {stat.S_IMODE(st.st_mode):04o})")


def _check_parent(path: str, parameter: str) -> None:
    """The parent may be shared (like /tmp) only if nobody else can rename our folder away (sticky bit)."""
    parent = os.path.dirname(path) or "."
    st = os.stat(parent)
    others_write = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if st.st_uid not in (os.geteuid(), 0) or (others_write and not st.st_mode & stat.S_ISVTX):
        raise _refuse(path, parameter, f"its parent {parent!r} can be changed by someone else "
                                       f"(owner {_who(st.st_uid)}, mode {stat.S_IMODE(st.st_mode):04o})")


def private_dir(path: str, parameter: str) -> str:
    """Create ``path`` with mode 0700, or check the existing folder (see the module doc). Returns it absolute."""
    path = os.path.abspath(os.path.expanduser(str(path)))
    try:
        missing = []
        head = path
        while not os.path.exists(head):
            missing.append(head)
            head = os.path.dirname(head)
        for folder in reversed(missing):  # every folder we make is private, not only the last one
            os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.stat(path)
    except OSError as exc:
        raise files.WriteError(f"Cannot create the cache folder {path!r}: {files.cause(exc)}.",
                               [expected(f"tp.config.{parameter}", path, "a folder tripy-lab can create")],
                               path, exc.errno) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise files.WriteError(f"The cache path {path!r} is not a folder.",
                               [expected(f"tp.config.{parameter}", path, "a folder")], path, errno.ENOTDIR)
    check_private(path, st, parameter)
    _check_parent(path, parameter)
    return path


def read_private_file(path: str) -> tuple[bytes | None, str]:
    """(bytes, "") or (None, why): no symlinks, owned by us, not writable by others."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None, "no entry"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror or exc})"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if st.st_uid != os.geteuid():
            return None, f"owned by {_who(st.st_uid)}, not by you"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return None, f"writable by others (mode {stat.S_IMODE(st.st_mode):04o})"
        return f.read(), ""


def write_atomic(path: str, data: bytes) -> None:
    """A cache file: ``core.files.write_atomic``, mode 0600, replacing a planted symlink rather than following it."""
    files.write_atomic(path, data, "cache entry", private=True, follow_symlinks=False, what="the cache file")


def write_checked(path: str, data: bytes) -> None:
    """``write_atomic`` without the fsyncs, for the files this module reads back through a digest check (an entry,
    the timing cache): one a power cut left empty or short is a verified miss, rebuilt (core.files)."""
    files.write_atomic(path, data, "cache entry", private=True, follow_symlinks=False, what="the cache file",
                       durable=False)


def degrade(write: Callable[[], Any], path: str, what: str) -> str:
    """Run ``write()``; "" when it worked, else one logged warning (per path and cause) and a build note.

    A cache is an accelerator: a full disk (ENOSPC), a file-size limit (EFBIG), a read-only disk (EROFS) or a
    folder removed while running costs the reuse, never the compile or the run.
    """
    try:
        write()
        return ""
    except (files.WriteError, NotOurs, OSError) as exc:
        code = getattr(exc, "errno", None)
        name = errno.errorcode.get(code, "") if code is not None else ""
        why = exc.summary if isinstance(exc, TripyException) else f"{path!r}: {files.cause(exc)}"
        note = f"{what} not written ({name or type(exc).__name__}): {why} Compiling and running go on without it."
        from tripy_lab.core.logging import logger

        logger.warning(f"tripy-lab: {note}", mode="once")
        return note


class EntryStore:
    """Key -> payload files in a private folder; each file names its key and the digest of its payload."""

    def __init__(self, folder: str, parameter: str):
        self.folder = private_dir(folder, parameter)

    def path(self, key: str) -> str:
        return os.path.join(self.folder, f"{key}.entry")

    def read(self, key: str) -> tuple[bytes | None, str]:
        """(payload, "") on a verified hit; (None, reason) on a miss."""
        data, why = read_private_file(self.path(key))
        if data is None:
            return None, why
        if not data.startswith(ENTRY_MAGIC):
            return None, "not a tripy-lab cache entry (corrupt)"
        head_end = data.find(b"\n", len(ENTRY_MAGIC))
        if head_end < 0:
            return None, "unreadable entry header (truncated or corrupt)"
        try:
            head = json.loads(data[len(ENTRY_MAGIC):head_end])
            want_key, want_size, want_sha = str(head["key"]), int(head["size"]), str(head["sha256"])
        except (ValueError, KeyError, TypeError):
            return None, "unreadable entry header (truncated or corrupt)"
        if want_key != key:
            return None, f"entry was written for another program (key {want_key[:12]}..., swapped or renamed)"
        payload = data[head_end + 1:]
        if len(payload) != want_size:
            return None, f"truncated entry ({len(payload)} of {want_size} bytes)"
        if hashlib.sha256(payload).hexdigest() != want_sha:
            return None, "content digest mismatch (corrupt entry)"
        return payload, ""

    def write(self, key: str, payload: bytes, **meta: Any) -> str:
        head = {"key": key, "size": len(payload), "sha256": hashlib.sha256(payload).hexdigest(), **meta}
        path = self.path(key)
        write_checked(path, ENTRY_MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + payload)
        return path


class NotOurs(TripyException):
    """The file at a cache path is something else (another tool's file): it is never read as ours or written."""


TIMING_PREFIX = b'{"format": "tripy-lab timing cache"'  # how every file we write starts (json.dumps' spacing)


class TimingCacheFile:
    """The file at ``tp.config.timing_cache_file_path`` for the xla engine: an index of its compiled
    entries (key -> label, size, hits, last use) and engine blobs (GPU autotuning results), as JSON with
    a digest of its body. One of ours that fails the checks is reported and rewritten, never trusted; a file
    that is not ours at all (e.g. a TensorRT timing cache) is refused (:class:`NotOurs`) and never written.

    Several processes share the file: each write takes a lock (``<path>.lock``, ``filelock``), re-reads the
    file and merges it (rows by key, hits added, blobs by name) before replacing it, so no row is lost.
    One instance per path and process (:meth:`open`), re-read only when the file changed under it, so a
    build costs one small write, not a parse of the whole index.
    """

    PARAMETER = "timing_cache_file_path"
    MAX_ROWS = 512  # the index keeps the most recently used entries
    SAVE_EVERY = 1.0  # seconds: eager evaluation builds many small programs; the rest is written at exit
    LOCK_TIMEOUT = 30.0  # seconds waiting for another process's write (a write takes milliseconds)
    BODY = b', "body": '  # the body is written last, so its exact text (what the digest covers) is the tail
    _open: dict[str, TimingCacheFile] = {}
    lock = threading.Lock()  # builds of several signatures run in threads

    @classmethod
    def open(cls, path: str) -> TimingCacheFile:
        path = os.path.abspath(os.path.expanduser(str(path)))
        with cls.lock:
            known = cls._open.get(path)
            if known is not None and known._stamp == _stamp(path):
                return known
            cls._open[path] = made = cls(path)
            return made

    def __init__(self, path: str):
        path = files.checked_path(path, f"tp.config.{self.PARAMETER}")
        if os.path.isdir(path):
            raise TripyException(f"The timing cache path {path!r} is a folder.",
                                 [expected(f"tp.config.{self.PARAMETER}", path, "a file path")])
        private_dir(os.path.dirname(path), self.PARAMETER)
        self.path = path
        self._stamp = _stamp(path)
        self._saved_at = 0.0
        self._dirty = False
        self._new_hits: dict[str, int] = {}  # hits since the last write, added to the file's counts on merge
        self.body, self.status = self._load()

    def _load(self) -> tuple[dict, str]:
        data, why = read_private_file(self.path)
        if data is None:
            return {"entries": {}, "blobs": {}}, "created" if why == "no entry" else f"rejected ({why}); replaced"
        body, why = self._parse(data)
        return (body, "loaded") if not why else ({"entries": {}, "blobs": {}}, f"rejected ({why}); replaced")

    def _parse(self, data: bytes) -> tuple[dict, str]:
        """(body, "") or ({}, why it is not a valid one of ours); NotOurs for another tool's file."""
        if data.strip() and not data.startswith(TIMING_PREFIX):
            raise NotOurs(
                f"The timing cache file {self.path!r} is not a tripy-lab timing cache (it starts with "
                f"{data[:24]!r}); it is left as it is.",
                [expected(f"tp.config.{self.PARAMETER}", self.path, "a file tripy-lab writes (or none yet)"),
                 "It may be a TensorRT timing cache or another tool's file: point the setting at another path."])
        try:
            at = data.index(self.BODY)
            head = json.loads(data[:at] + b"}")
            text = data[at + len(self.BODY):-1]
            if head.get("format") != TIMING_FORMAT or head.get("version") != TIMING_VERSION or not data.endswith(b"}"):
                return {}, "not this version of a tripy-lab timing cache"
            if hashlib.sha256(text).hexdigest() != head.get("sha256"):
                return {}, "its digest does not match: edited, truncated or corrupt"
            body = json.loads(text)
            if not isinstance(body.get("entries"), dict) or not isinstance(body.get("blobs"), dict):
                return {}, "malformed body"
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return {}, "not a tripy-lab timing cache: empty, truncated or corrupt"
        return body, ""

    def record(self, key: str, **info: Any) -> None:
        row = self.body["entries"].setdefault(key, {"hits": 0, "created": time.time()})
        hit = info.pop("hit", False)
        row.update(info)
        row["hits"] = int(row.get("hits", 0)) + (1 if hit else 0)
        row["last_used"] = time.time()
        self._new_hits[key] = self._new_hits.get(key, 0) + (1 if hit else 0)

    def save(self) -> None:
        """Write now, or within ``SAVE_EVERY`` seconds (at the latest when the process exits)."""
        if time.monotonic() - self._saved_at < self.SAVE_EVERY:
            if not self._dirty:
                self._dirty = True
                atexit.register(self.flush)
            return
        self._write()

    def flush(self) -> None:
        with self.lock:
            if self._dirty:
                degrade(self._write, self.path, "the timing cache")  # at exit the folder may be gone

    def _write(self) -> None:
        import filelock

        self._dirty = False
        self._saved_at = time.monotonic()
        try:
            with filelock.FileLock(self.path + ".lock", timeout=self.LOCK_TIMEOUT, mode=0o600):
                self._merge_from_disk()
                rows = self.body["entries"]
                if len(rows) > self.MAX_ROWS:
                    keep = sorted(rows, key=lambda k: rows[k].get("last_used", 0), reverse=True)[:self.MAX_ROWS]
                    self.body["entries"] = {k: rows[k] for k in keep}
                text = json.dumps(self.body, sort_keys=True).encode()
                head = json.dumps({"format": TIMING_FORMAT, "version": TIMING_VERSION,
                                   "sha256": hashlib.sha256(text).hexdigest()}).encode()
                write_checked(self.path, head[:-1] + self.BODY + text + b"}")
        except filelock.Timeout as exc:
            raise OSError(errno.EWOULDBLOCK, f"{self.path}.lock is held by another process") from exc
        self._new_hits = {}
        self._stamp = _stamp(self.path)
        self.status = "loaded"  # what the next build in this process finds

    def _merge_from_disk(self) -> None:
        """Under the lock: fold in what other processes wrote since we read the file."""
        if _stamp(self.path) == self._stamp:
            return
        data, _ = read_private_file(self.path)
        disk, why = self._parse(data) if data is not None else ({}, "gone")
        if why:
            return
        ours = self.body["entries"]
        for key, row in disk["entries"].items():
            if not isinstance(row, dict):
                continue
            mine = ours.get(key)
            if mine is None:
                ours[key] = row
                continue
            merged = {**row, **mine}
            merged["hits"] = int(row.get("hits", 0) or 0) + self._new_hits.get(key, 0)
            merged["last_used"] = max(float(row.get("last_used", 0) or 0), float(mine.get("last_used", 0) or 0))
            ours[key] = merged
        for kind, blobs in disk["blobs"].items():
            if isinstance(blobs, dict):
                self.body["blobs"][kind] = {**blobs, **self.body["blobs"].get(kind, {})}


def _stamp(path: str) -> tuple | None:
    """What tells us another process rewrote the file: inode, size, mtime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
