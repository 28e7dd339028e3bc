"""The parts of the ``tensorrt`` engine that need no TensorRT: plain Python, tested here.

* **Optimization profile.** :func:`profile_records` reads, for every argument of ``@main``, its
  ``tensorrt.shape_profile`` (a data tensor: min/opt/max of each dim) or ``tensorrt.value_bounds``
  (a host scalar that TensorRT treats as a *shape tensor*: min/opt/max of its value) and returns one
  :class:`ProfileRecord` per argument. Programs built without arg attributes fall back to
  ``program.input_infos`` and then to the argument's static type. :func:`apply_profile` writes the
  records into a TensorRT ``IOptimizationProfile`` (``set_shape`` / ``set_shape_input``).
* **Builder options.** :func:`builder_settings` validates ``BuildOptions`` (optimization level 0-5)
  and :func:`configure_builder` applies them to an ``IBuilderConfig``: ``builder_optimization_level``
  and ``ProfilingVerbosity.DETAILED``. Networks are always strongly typed
  (:func:`network_flags`).
* **Timing cache.** :func:`attach_timing_cache` loads the cache file (or starts an empty cache) into
  the builder config; :func:`save_timing_cache` writes the serialized cache back atomically (a
  temporary file in the same directory, then ``os.replace``), so a crash never leaves half a file.
* **Progress.** :class:`ProgressLog` records the phases TensorRT reports to an ``IProgressMonitor``.

The layer table (names of the layers we add, the inspector's JSON as LayerRecords) is ``layers.py``.

Functions that touch TensorRT objects take them (and the ``tensorrt`` module) as arguments, so the
tests drive them with small stand-ins.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.engine.base import BuildOptions

SHAPE_PROFILE = "tensorrt.shape_profile"
VALUE_BOUNDS = "tensorrt.value_bounds"

# =============================================================================================
# Optimization profile


@dataclass(frozen=True)
class ProfileRecord:
    """One network input in the optimization profile.

    Data tensors: ``min``/``opt``/``max`` are shapes. Shape tensors (``is_shape_tensor``, the
    DimensionInputInfo scalars): they are the *values* the input may take, one per element.
    """

    name: str
    min: tuple[int, ...]
    opt: tuple[int, ...]
    max: tuple[int, ...]
    is_shape_tensor: bool = False

    @property
    def is_static(self) -> bool:
        return self.min == self.opt == self.max

    def as_tuple(self) -> tuple:
        return (self.name, self.min, self.opt, self.max, self.is_shape_tensor)


def _arg_attr_dicts(main) -> list[dict]:
    arg_attrs = getattr(main, "arg_attrs", None)
    if arg_attrs is None:
        return []
    return [dict(d.data) for d in arg_attrs.data]


def _type_shape(t) -> tuple[int | None, ...]:
    from tripy_lab.mlir.attrs import shape_of

    return shape_of(t)


def _check_record(rec: ProfileRecord, type_shape: tuple[int | None, ...]) -> ProfileRecord:
    n = len(type_shape) if not rec.is_shape_tensor else None
    lens = {len(rec.min), len(rec.opt), len(rec.max)}
    if len(lens) != 1 or (n is not None and lens != {n}):
        raise TripyException(f"The optimization profile of input '{rec.name}' does not match its rank.",
                             [f"min={list(rec.min)}, opt={list(rec.opt)}, max={list(rec.max)} for a "
                              f"tensor of shape {['?' if d is None else d for d in type_shape]}."])
    for i, (lo, mid, hi) in enumerate(zip(rec.min, rec.opt, rec.max)):
        if not lo <= mid <= hi or (lo < 0 and not rec.is_shape_tensor):
            raise TripyException(f"Invalid optimization profile for input '{rec.name}'.",
                                 [f"Entry {i}: min={lo}, opt={mid}, max={hi}; expected 0 <= min <= opt <= max."])
        if not rec.is_shape_tensor and type_shape[i] is not None and not lo == hi == type_shape[i]:
            raise TripyException(f"The optimization profile of input '{rec.name}' contradicts its type.",
                                 [f"Dim {i} is static ({type_shape[i]}) but the profile says "
                                  f"min={lo}, opt={mid}, max={hi}."])
    return rec


def profile_records(program) -> list[ProfileRecord]:
    """One record per argument of ``@main``, in argument order.

    Source of truth, in order: the arg attribute (``tensorrt.value_bounds`` -> shape tensor,
    ``tensorrt.shape_profile`` -> data tensor), then ``program.input_infos[name]``, then the static
    type (dynamic dims with no bounds are an error).
    """
    main = program.main()
    attrs = _arg_attr_dicts(main)
    names = list(program.arg_names)
    records = []
    for i, arg in enumerate(main.body.block.args):
        name = names[i] if i < len(names) else f"arg{i}"
        shape = _type_shape(arg.type)
        a = attrs[i] if i < len(attrs) else {}
        info = program.input_infos.get(name)
        if VALUE_BOUNDS in a:
            lo, mid, hi = a[VALUE_BOUNDS].values
            rec = ProfileRecord(name, lo, mid, hi, is_shape_tensor=True)
        elif SHAPE_PROFILE in a:
            lo, mid, hi = a[SHAPE_PROFILE].values
            rec = ProfileRecord(name, lo, mid, hi)
        elif isinstance(info, DimensionInputInfo):
            b = info.value_bounds
            rec = ProfileRecord(name, b.min, b.opt, b.max, is_shape_tensor=True)
        elif isinstance(info, InputInfo):
            b = info.shape_bounds
            rec = ProfileRecord(name, b.min, b.opt, b.max)
        elif None in shape:
            raise TripyException(f"Input '{name}' has dynamic dimensions but no bounds.",
                                 ["TensorRT needs min/opt/max for every dynamic dim: give the argument a "
                                  "'tensorrt.shape_profile' (compile with tp.InputInfo)."])
        else:
            rec = ProfileRecord(name, shape, shape, shape)
        records.append(_check_record(rec, shape))
    return records


def reconcile_shape_tensors(records: Sequence[ProfileRecord],
                            network_says: Mapping[str, bool]) -> tuple[list[ProfileRecord], list[str]]:
    """Trust the built network about which inputs are shape tensors.

    A DimensionInputInfo scalar that only feeds data computations is an ordinary (execution) input
    for TensorRT; ``set_shape_input`` on it would be an error. ``network_says`` maps input name ->
    ``ITensor.is_shape_tensor``.
    """
    out, notes = [], []
    for rec in records:
        actual = network_says.get(rec.name)
        if actual is None or actual == rec.is_shape_tensor:
            out.append(rec)
        elif rec.is_shape_tensor:
            notes.append(f"input '{rec.name}' (value bounds {list(rec.min)}..{list(rec.max)}) is used as data, "
                         "not as a shape: TensorRT treats it as an execution tensor")
            out.append(replace(rec, min=(), opt=(), max=(), is_shape_tensor=False))
        else:
            raise TripyException(f"TensorRT treats input '{rec.name}' as a shape tensor, but it has no value bounds.",
                                 ["Declare it with tp.DimensionInputInfo((min, opt, max))."])
    return out, notes


def apply_profile(profile, records: Sequence[ProfileRecord]) -> list[str]:
    """Write ``records`` into a TensorRT ``IOptimizationProfile``; returns one note per input set."""
    notes = []
    for rec in records:
        if rec.is_shape_tensor:
            profile.set_shape_input(rec.name, list(rec.min), list(rec.opt), list(rec.max))
            notes.append(f"profile: shape input '{rec.name}' values min={list(rec.min)} opt={list(rec.opt)} "
                         f"max={list(rec.max)}")
        elif not rec.is_static:
            profile.set_shape(rec.name, tuple(rec.min), tuple(rec.opt), tuple(rec.max))
            notes.append(f"profile: '{rec.name}' shape min={list(rec.min)} opt={list(rec.opt)} max={list(rec.max)}")
    return notes


# =============================================================================================
# Builder options

OPTIMIZATION_LEVELS = {
    0: "fastest build: no kernel timing, first working tactic",
    1: "quick heuristic tactic choice, little timing",
    2: "more tactics timed",
    3: "TensorRT's default: balanced build time and engine speed",
    4: "wider tactic search (slower builds)",
    5: "widest search, including dynamic-shape specialisations (slowest builds)",
}


@dataclass(frozen=True)
class BuilderSettings:
    optimization_level: int = 3
    strongly_typed: bool = True
    profiling_verbosity: str = "DETAILED"
    timing_cache_path: str | None = None


def builder_settings(options: BuildOptions) -> BuilderSettings:
    """Validate ``options`` for TensorRT (``builder_optimization_level`` takes 0..5)."""
    level = options.optimization_level
    if isinstance(level, bool) or not isinstance(level, int) or not 0 <= level <= 5:
        raise TripyException(f"Invalid optimization level for TensorRT: {level!r}.",
                             ["TensorRT's builder_optimization_level takes an int from 0 to 5 (default 3)."])
    path = options.timing_cache_path
    if path is not None and (not isinstance(path, str) or not path or os.path.isdir(path)):
        raise TripyException(f"Invalid timing cache path: {path!r}.", ["Expected a file path (not a directory)."])
    return BuilderSettings(optimization_level=level, timing_cache_path=path)


def network_flags(trt, settings: BuilderSettings) -> int:
    """``create_network`` flags: strongly typed (every type is explicit in the MLIR)."""
    flags = 0
    if settings.strongly_typed:
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    return flags


def configure_builder(trt, config, settings: BuilderSettings) -> list[str]:
    """Apply ``settings`` to an ``IBuilderConfig``; returns notes for the build report."""
    config.builder_optimization_level = settings.optimization_level
    config.profiling_verbosity = getattr(trt.ProfilingVerbosity, settings.profiling_verbosity)
    return [f"builder_optimization_level={settings.optimization_level} "
            f"({OPTIMIZATION_LEVELS[settings.optimization_level]})",
            f"strongly typed network; profiling verbosity {settings.profiling_verbosity}"]


# =============================================================================================
# Timing cache


@dataclass
class TimingCacheState:
    path: str | None
    status: str = "none"  # none | loaded | created | rejected (file did not match: started empty)
    bytes_loaded: int = 0
    bytes_saved: int = 0
    error: str = ""

    @property
    def hit(self) -> bool:
        return self.status == "loaded"

    def as_report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"timing_cache": self.path or "none", "status": self.status, "hit": self.hit,
                               "bytes_loaded": self.bytes_loaded, "bytes_saved": self.bytes_saved}
        if self.error:
            out["error"] = self.error
        return out


def attach_timing_cache(config, path: str | None):
    """Load ``path`` (if it exists) into a timing cache set on ``config``; returns (cache, state)."""
    state = TimingCacheState(path)
    if not path:
        return None, state
    from tripy_lab.core.cache import private_dir, read_private_file

    private_dir(os.path.dirname(os.path.abspath(path)), "timing_cache_file_path")  # yours, 0700 if new
    data, why = read_private_file(path)  # no symlinks, owned by you, not writable by others
    if data is None and why != "no entry":
        state.error = f"{path} was not loaded ({why}); started an empty cache"
    data = data or b""
    cache = config.create_timing_cache(data)
    ok = cache is not None and config.set_timing_cache(cache, False) is not False
    if data and ok:
        state.status, state.bytes_loaded = "loaded", len(data)
        return cache, state
    if data or state.error:  # TensorRT rejected the file (other TensorRT version or GPU), or we did: start over
        state.status = "rejected"
        state.error = state.error or f"{path} did not match this TensorRT/GPU; started an empty cache"
        cache = config.create_timing_cache(b"")
        config.set_timing_cache(cache, False)
        return cache, state
    state.status = "created"
    return cache, state


def _as_bytes(blob) -> bytes:
    if isinstance(blob, bytes):
        return blob
    return bytes(memoryview(blob))


def save_timing_cache(path: str, data) -> int:
    """Write ``data`` to ``path`` atomically (temp file in the same directory + ``os.replace``)."""
    data = _as_bytes(data)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return len(data)


def finish_timing_cache(config, state: TimingCacheState) -> TimingCacheState:
    """After a build: serialize the config's timing cache and save it to ``state.path``."""
    if not state.path:
        return state
    cache = config.get_timing_cache()
    if cache is None:
        state.error = "the builder config had no timing cache to save"
        return state
    state.bytes_saved = save_timing_cache(state.path, cache.serialize())
    return state


# =============================================================================================
# Progress


@dataclass
class PhaseRecord:
    name: str
    parent: str | None
    steps: int
    depth: int
    started: float
    finished: float | None = None
    steps_done: int = 0


class ProgressLog:
    """What an ``IProgressMonitor`` hears: phases (nested), their step counts and durations.

    TensorRT may call from several threads, so updates take a lock. ``callback(event, phase)`` (if
    given) sees every ``"start"``/``"step"``/``"finish"``; ``cancel()`` makes the next
    ``step_complete`` return False, which asks TensorRT to stop the build.
    """

    def __init__(self, callback: Callable[[str, PhaseRecord], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter):  # fmt: skip
        self.phases: list[PhaseRecord] = []
        self._open: dict[str, PhaseRecord] = {}
        self._lock = threading.Lock()
        self._callback = callback
        self._clock = clock
        self.cancelled = False

    def phase_start(self, phase_name: str, parent_phase: str | None, num_steps: int) -> None:
        with self._lock:
            parent = self._open.get(parent_phase) if parent_phase else None
            rec = PhaseRecord(phase_name, parent_phase, int(num_steps), parent.depth + 1 if parent else 0,
                              self._clock())
            self.phases.append(rec)
            self._open[phase_name] = rec
        self._emit("start", rec)

    def step_complete(self, phase_name: str, step: int) -> bool:
        with self._lock:
            rec = self._open.get(phase_name)
            if rec is not None:
                rec.steps_done = max(rec.steps_done, int(step) + 1)
        if rec is not None:
            self._emit("step", rec)
        return not self.cancelled

    def phase_finish(self, phase_name: str) -> None:
        with self._lock:
            rec = self._open.pop(phase_name, None)
            if rec is not None:
                rec.finished = self._clock()
        if rec is not None:
            self._emit("finish", rec)

    def cancel(self) -> None:
        self.cancelled = True

    def _emit(self, event: str, rec: PhaseRecord) -> None:
        if self._callback is not None:
            self._callback(event, rec)

    def notes(self) -> list[str]:
        out = []
        for rec in self.phases:
            took = f"{rec.finished - rec.started:.3f}s" if rec.finished is not None else "unfinished"
            out.append(f"build phase: {'  ' * rec.depth}{rec.name} ({rec.steps_done}/{rec.steps} steps, {took})")
        return out
