"""The xla engine's persistent executables: our own store, not jax's persistent cache.

jax's cache loads whatever file sits at its key, so swapping two valid entries made each program run the
other's executable. Here an executable is serialized with ``jax.experimental.serialize_executable`` into
a ``core.cache.EntryStore`` under a key derived from the program (argument names, blob handles, op
sequence), the lowered StableHLO (with
its locations, which carry the trace op names the layer table reads), the concrete signature, the XLA
options, the device and the jax/jaxlib/tripy-lab versions; the entry carries that key and a digest, so a
swapped, truncated or corrupt entry is a miss with a reason and is rebuilt and replaced. jax's own
persistent cache is switched off around our compiles (``enable_compilation_cache(False)``).

``tp.config.timing_cache_file_path`` holds a ``core.cache.TimingCacheFile``: the index of the entries
(label, size, hits) and, on GPUs, XLA's per-fusion autotuning results, so the cache the user names is
where the reuse is visible.

An entry is written behind the build (``WRITE_BEHIND``): serializing the executable took 0.18-0.23 s of a
10k-op CPU build's ~2.7 s (3.8 MB), and the user waits for the executable, not for its copy on disk. One
writer thread serializes and writes in order; a load of a key waits for that key's pending write, a failed
write is logged and added to the build's notes when it happens, and the writes left at exit finish first
(``concurrent.futures`` joins its workers before the interpreter goes). ``flush()`` waits for all of them.
"""

from __future__ import annotations

import base64
import functools
import itertools
import os
import shutil
import tempfile
import threading
import weakref
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from tripy_lab.core.cache import EntryStore, TimingCacheFile, degrade, digest

AUTOTUNE_OPTION = "xla_gpu_per_fusion_autotune_cache_dir"
WRITE_BEHIND = True  # False: save() serializes and writes before the build returns

_writer: ThreadPoolExecutor | None = None
_pending: dict[str, Future] = {}  # entry key -> its write, while it is queued or running
_pending_lock = threading.Lock()


def _behind(key: str, write) -> bool:
    """Queue ``write`` on the writer thread; False when it cannot be queued (the interpreter is exiting)."""
    global _writer
    with _pending_lock:
        if _writer is None:
            _writer = ThreadPoolExecutor(1, thread_name_prefix="tripy-lab-cache-write")
        try:
            future = _writer.submit(write)
        except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
            return False
        _pending[key] = future
    future.add_done_callback(lambda f, k=key: _done(k, f))
    return True


def _done(key: str, future: Future) -> None:
    with _pending_lock:
        if _pending.get(key) is future:
            del _pending[key]


def wait_for(key: str) -> None:
    """Return once ``key``'s entry is written (or its write failed), when one is pending."""
    with _pending_lock:
        future = _pending.get(key)
    if future is not None:
        future.result()  # the write itself never raises (XlaStore.save catches everything)


def flush() -> None:
    """Wait for every pending entry write of this process."""
    with _pending_lock:
        futures = list(_pending.values())
    for future in futures:
        future.result()


def _late(write, late_notes: list) -> None:
    if note := write():
        late_notes.append(f"persistent cache: {note}")


@functools.cache
def _tripy_lab_version() -> str:
    """The installed tripy-lab's version, read once per process (the metadata scan took ~1 ms a build)."""
    import importlib.metadata

    try:
        return importlib.metadata.version("tripy-lab")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


class XlaStore:
    def __init__(self, folder: str, timing_path: str | None):
        # a cache that cannot be written is skipped with a warning and a build note (core.cache.degrade)
        self.problems: list[str] = []
        self.entries: EntryStore | None = None
        self.timing: TimingCacheFile | None = None
        self.problems.append(degrade(lambda: setattr(self, "entries", EntryStore(folder, "compilation_cache_dir")),
                                     folder, "the xla cache folder"))
        if timing_path:  # (someone else's file there is never overwritten: core.cache.NotOurs)
            self.problems.append(degrade(lambda: setattr(self, "timing", TimingCacheFile.open(timing_path)),
                                         timing_path, "the timing cache"))
        self._recorded: set[str] = set()
        self._autotune_dir: str | None = None
        self._lock = threading.Lock()  # signatures compile concurrently; the index and autotune folder are shared

    @staticmethod
    def program_digest(program, op_names=None) -> str:
        """The program's argument names, blob handles and op sequence (MLIR op and trace op names).

        Not the MLIR text: xDSL's printer took longer than XLA's compile for large programs, and the key also
        holds the lowered StableHLO with its locations, which is the computation the executable runs (op for
        op, each located at its trace op), so it already tells this program's entries from any other's."""
        from tripy_lab.mlir.attrs import loc_name

        ops = [(op.name, loc_name(op)) for op in program.ops()] if op_names is None else list(op_names)
        flat = "\x00".join(itertools.chain.from_iterable(ops))  # ~10x faster than repr(ops) for 2500 ops
        if flat.count("\x00") != max(2 * len(ops) - 1, 0):
            flat = repr(ops)  # a name with a NUL in it: the unambiguous (slow) form
        return digest("ops", flat, list(program.arg_names), sorted(program.resources))

    def key(self, program_text_digest: str, lowered, label: str, options: dict, x64: bool, device,
            stablehlo: str | None = None) -> str:
        """``stablehlo``: the text the module was parsed from (direct emission), else it is printed here."""
        import jax
        import jaxlib

        hlo = stablehlo
        if hlo is None:
            try:
                hlo = lowered.as_text(debug_info=True)
            except TypeError:  # older jax: no debug_info switch
                hlo = lowered.as_text()
        # the arguments' structure: a module whose unused arguments jax pruned (parts cut apart for another
        # signature) prints the same, but an executable loads only with the argument count it was made for
        trees = [repr(getattr(part, "in_tree", None)) for part in (getattr(lowered, "body", lowered),
                                                                   getattr(lowered, "head", None))]
        return digest("xla", _tripy_lab_version(), jax.__version__, jaxlib.__version__, device.platform,
                      device.device_kind, sorted(options.items()), x64, label, program_text_digest, hlo, trees)

    def load(self, key: str, lowered, device) -> tuple[Any, str]:
        """(compiled, "") on a verified hit, else (None, why it missed)."""
        if self.entries is None:
            return None, "no entry"
        wait_for(key)  # an entry this process is still writing
        payload, why = self.entries.read(key)
        if payload is None:
            return None, why
        from jax.experimental.serialize_executable import deserialize_and_load

        try:
            if hasattr(lowered, "load"):  # two executables (xla_split)
                return lowered.load(payload, device), ""
            return deserialize_and_load(payload, lowered.in_tree, lowered.out_tree,
                                        execution_devices=[device]), ""
        except Exception as exc:  # a verified entry jaxlib cannot load (e.g. written by another build of it)
            return None, f"entry could not be loaded ({type(exc).__name__}); rebuilt"

    def save(self, key: str, compiled, label: str, late_notes: list) -> str:
        """Store ``compiled`` (and its row in the timing cache); "" or why not, for the build notes.

        Written behind (``WRITE_BEHIND``): a failure of that write is appended to ``late_notes`` ("persistent
        cache: ...") when it happens, and logged."""
        notes = [p for p in self.problems if p]
        self.problems = []  # said once, in the first build's notes (and logged once)
        self._recorded.add(key)

        def write() -> str:
            try:
                done = [self._store(key, compiled, label), self._index(key, label, hit=False)]
            except Exception as exc:  # never let a cache write reach the user: it is an accelerator
                done = [f"not stored: {type(exc).__name__}: {exc}"]
            return "; ".join(n for n in done if n)

        if WRITE_BEHIND and _behind(key, lambda: _late(write, late_notes)):
            return "; ".join(n for n in notes if n)
        notes.append(write())
        return "; ".join(n for n in notes if n)

    def _store(self, key: str, compiled, label: str) -> str:  # (on the writer thread when written behind)
        if self.entries is None:
            return ""
        try:
            from jax.experimental.serialize_executable import serialize

            payload = compiled.serialize() if hasattr(compiled, "serialize") else serialize(compiled)[0]
        except Exception as exc:  # a backend without executable serialization
            return f"not stored: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return degrade(lambda: self.entries.write(key, payload, label=label, engine="xla"), self.entries.path(key),
                       "the xla cache entry")

    # -- the file at tp.config.timing_cache_file_path ------------------------------------------------
    def autotune_options(self, platform: str) -> dict:
        """GPU: an XLA per-fusion autotune folder filled from the timing cache file (empty on CPU)."""
        if self.timing is None or platform == "cpu":
            return {}
        options: dict = {}
        with self._lock:
            degrade(lambda: options.update(self._autotune_folder()), self._autotune_dir or "a temp folder",
                    "the GPU autotune folder")
        return options

    def _autotune_folder(self) -> dict:
        if self._autotune_dir is None:
            self._autotune_dir = tempfile.mkdtemp(prefix="tripy-autotune-")
            # XLA reads and writes it during this store's compiles and _record copies it into the timing cache:
            # it goes with the store (or at exit), not left in the temp folder once per GPU build
            weakref.finalize(self, shutil.rmtree, self._autotune_dir, True)
        with TimingCacheFile.lock:  # _record adds results from other threads' builds meanwhile
            tuned = list(self.timing.body["blobs"].get("autotune", {}).items())
        for name, blob in tuned:
            parts = name.split("/")  # XLA nests its per-fusion results in folders (jax 0.11 on CUDA)
            if name.startswith("/") or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
                continue  # never write outside the autotune folder
            path = os.path.join(self._autotune_dir, *parts)
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            with open(path, "wb") as f:
                f.write(base64.b64decode(blob))
        return {AUTOTUNE_OPTION: self._autotune_dir}

    def record(self, key: str, label: str, hit: bool) -> None:
        if key in self._recorded:  # a miss: save() indexed it already (and reported a failed write)
            self._recorded.discard(key)
            return
        self._index(key, label, hit)

    def _index(self, key: str, label: str, hit: bool) -> str:
        if self.timing is None:
            return ""
        with TimingCacheFile.lock:  # the index is shared by every build in the process
            return degrade(lambda: self._record(key, label, hit), self.timing.path, "the timing cache")

    def _record(self, key: str, label: str, hit: bool) -> None:
        path = self.entries.path(key) if self.entries is not None else ""
        size = os.path.getsize(path) if path and os.path.exists(path) else 0
        self.timing.record(key, label=label, entry=path, bytes=size, hit=hit)
        if self._autotune_dir:
            tuned = self.timing.body["blobs"].setdefault("autotune", {})
            for folder, _, files in os.walk(self._autotune_dir):
                for file in sorted(files):
                    if file.startswith("."):  # XLA's temporary file of a result another compile is writing
                        continue
                    path = os.path.join(folder, file)
                    name = os.path.relpath(path, self._autotune_dir).replace(os.sep, "/")
                    try:
                        with open(path, "rb") as f:
                            tuned[name] = base64.b64encode(f.read()).decode()
                    except FileNotFoundError:  # renamed or replaced meanwhile by a concurrent compile
                        continue
        self.timing.save()

    def report(self) -> dict:
        out: dict[str, Any] = {"persistent_dir": self.entries.folder if self.entries else "off (cannot be written)"}
        if self.timing is not None:
            out["timing_cache"] = self.timing.path
            out["timing_cache_status"] = self.timing.status
            out["timing_cache_entries"] = len(self.timing.body["entries"])
        return out
