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
import hashlib
import json
import os
import stat
import tempfile
import threading
import time
from typing import Any

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
        raise TripyException(f"Cannot create the cache folder {path!r}: {exc.strerror or exc}.",
                             [expected(f"tp.config.{parameter}", path, "a folder tripy-lab can create")]) from exc
    if not stat.S_ISDIR(st.st_mode):
        raise TripyException(f"The cache path {path!r} is not a folder.",
                             [expected(f"tp.config.{parameter}", path, "a folder")])
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
    """Write ``data`` to a temp file beside ``path`` (mode 0600), then ``os.replace`` it over ``path``."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".tmp-", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


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
        write_atomic(path, ENTRY_MAGIC + json.dumps(head, sort_keys=True).encode() + b"\n" + payload)
        return path


class TimingCacheFile:
    """The file at ``tp.config.timing_cache_file_path`` for the xla engine: an index of its compiled
    entries (key -> label, size, hits, last use) and engine blobs (GPU autotuning results), as JSON with
    a digest of its body. A file that fails the checks is reported and rewritten, never trusted.

    One instance per path and process (:meth:`open`), re-read only when the file changed under it, so a
    build costs one small write, not a parse of the whole index.
    """

    PARAMETER = "timing_cache_file_path"
    MAX_ROWS = 512  # the index keeps the most recently used entries
    SAVE_EVERY = 1.0  # seconds: eager evaluation builds many small programs; the rest is written at exit
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
        path = os.path.abspath(os.path.expanduser(str(path)))
        if os.path.isdir(path):
            raise TripyException(f"The timing cache path {path!r} is a folder.",
                                 [expected(f"tp.config.{self.PARAMETER}", path, "a file path")])
        private_dir(os.path.dirname(path), self.PARAMETER)
        self.path = path
        self._stamp = _stamp(path)
        self._saved_at = 0.0
        self._dirty = False
        self.body, self.status = self._load()

    def _load(self) -> tuple[dict, str]:
        empty: dict = {"entries": {}, "blobs": {}}
        data, why = read_private_file(self.path)
        if data is None:
            return empty, "created" if why == "no entry" else f"rejected ({why}); replaced"
        try:
            at = data.index(self.BODY)
            head = json.loads(data[:at] + b"}")
            text = data[at + len(self.BODY):-1]
            if head.get("format") != TIMING_FORMAT or head.get("version") != TIMING_VERSION or not data.endswith(b"}"):
                return empty, "rejected (not a tripy-lab timing cache); replaced"
            if hashlib.sha256(text).hexdigest() != head.get("sha256"):
                return empty, "rejected (its digest does not match: edited, truncated or corrupt); replaced"
            body = json.loads(text)
            if not isinstance(body.get("entries"), dict) or not isinstance(body.get("blobs"), dict):
                return empty, "rejected (malformed body); replaced"
        except (ValueError, KeyError, TypeError, AttributeError):
            return empty, "rejected (not a tripy-lab timing cache: truncated or corrupt); replaced"
        return body, "loaded"

    def record(self, key: str, **info: Any) -> None:
        row = self.body["entries"].setdefault(key, {"hits": 0, "created": time.time()})
        hit = info.pop("hit", False)
        row.update(info)
        row["hits"] = int(row.get("hits", 0)) + (1 if hit else 0)
        row["last_used"] = time.time()

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
                try:
                    self._write()
                except OSError:  # at exit the folder may be gone (a temporary one): nothing to keep
                    pass

    def _write(self) -> None:
        self._dirty = False
        self._saved_at = time.monotonic()
        rows = self.body["entries"]
        if len(rows) > self.MAX_ROWS:
            keep = sorted(rows, key=lambda k: rows[k].get("last_used", 0), reverse=True)[:self.MAX_ROWS]
            self.body["entries"] = {k: rows[k] for k in keep}
        text = json.dumps(self.body, sort_keys=True).encode()
        head = json.dumps({"format": TIMING_FORMAT, "version": TIMING_VERSION,
                           "sha256": hashlib.sha256(text).hexdigest()}).encode()
        write_atomic(self.path, head[:-1] + self.BODY + text + b"}")
        self._stamp = _stamp(self.path)
        self.status = "loaded"  # what the next build in this process finds


def _stamp(path: str) -> tuple | None:
    """What tells us another process rewrote the file: inode, size, mtime."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns
