"""The two-speed loop: a fast path (trace + lower + checks) on every change, then a slow path (engine build) in
the background, which the next change cancels. No widgets here: the UI listens for changes."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tripy_lab.core.errors import TripyException
from tripy_lab.core.source import SourceLocation
from tripy_lab.lab import errors
from tripy_lab.lab import spec as S
from tripy_lab.lab.bounds_model import BoundsModel

FAST_TABS = ("trace", "mlir")
SLOW_TABS = ("engine", "run")


@dataclass
class Settings:
    """Lab-wide defaults; ``%%tpcompile --auto-build-ms/--debounce-ms`` override them per cell."""

    auto_build_seconds: float = 1.0  # rebuild on every change while the last build took less than this
    # Sliders send on release (continuous_update=False), so the wait only merges bursts of edits.
    debounce_seconds: float = 0.05  # wait this long after the last edit before re-tracing
    cache_size: int = 32  # traced/lowered/built stages kept per session, by bounds


settings = Settings()


class Debouncer:
    """Call ``fn`` once, ``delay`` seconds after the last trigger, on the running asyncio loop (the kernel's).

    With no running loop (plain scripts, tests) or ``delay <= 0`` it calls ``fn`` right away.
    """

    def __init__(self, fn: Callable[[], Any], delay: float):
        self.fn, self.delay = fn, delay
        self._handle: asyncio.TimerHandle | None = None

    def __call__(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if self.delay <= 0 or loop is None:
            self.fn()
            return
        self.cancel()
        self._handle = loop.call_later(self.delay, self._fire)

    def _fire(self) -> None:
        self._handle = None
        self.fn()

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @property
    def pending(self) -> bool:
        return self._handle is not None


class LRU(OrderedDict):
    def __init__(self, size: int):
        super().__init__()
        self.size = size

    def get(self, key, default=None):
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def put(self, key, value) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


def _running_loop():
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def failing_op(exc: BaseException, traced) -> str | None:
    """The trace op at the error's user line (in the current or last good trace), if any."""
    if getattr(exc, "op", None):
        return exc.op
    loc = getattr(exc, "location", None)
    if loc is None or traced is None:
        return None
    for op in traced.trace.ops:
        if op.location is not None and (op.location.file, op.location.line) == (loc.file, loc.line):
            return op.name
    return None


class BuildJob:
    """One engine build on a worker thread; ``outcome`` is the Built or the exception, once ``done`` is set."""

    def __init__(self, key: tuple, lowered, engine, level):
        self.key, self.lowered, self.engine, self.level = key, lowered, engine, level
        self.start = time.perf_counter()
        self.done = threading.Event()
        self.outcome: Any = None
        self.cancelled = False
        self.end: float | None = None

    def run(self, on_done: Callable[[], None] | None = None) -> None:
        try:
            self.outcome = self.lowered.build(engine=self.engine, optimization_level=self.level)
        except BaseException as exc:  # delivered to the kernel thread, which reports it
            self.outcome = exc
        self.end = time.perf_counter()
        self.done.set()
        if on_done is not None:
            on_done()

    @property
    def elapsed(self) -> float:
        """Seconds the build has run (until it finished, not until the kernel took its result)."""
        return (self.end or time.perf_counter()) - self.start


# engines whose one build runs every shape in min..max, whatever the opt point (issue 11)
WHOLE_PROFILE_ENGINES = ("onnxruntime",)


def profile_key(key: tuple) -> tuple:
    """A bounds key without the opt points: the shape profile (min..max per dim, names, dtypes)."""
    out = []
    for name, spec in key:
        if isinstance(spec, S.TensorSpec):
            spec = ("tensor", spec.dtype, tuple((d.min, d.max, d.name) for d in spec.dims))
        elif isinstance(spec, S.DimValueSpec):
            spec = ("dim", spec.min, spec.max)
        out.append((name, spec))
    return tuple(out)


class Session:
    """One ``%%tpcompile`` cell's state. Listeners get the set of changed aspects after each step:
    "status", "trace", "mlir", "engine", "run", "error", "log", "stale"."""

    def __init__(
        self,
        func,
        model: BoundsModel,
        *,
        exe_name: str = "exe",
        namespace: dict | None = None,
        engine: str | None = None,
        optimization_level: int = 3,
        auto_build_seconds: float | None = None,
        debounce_seconds: float | None = None,
        fallback_location: SourceLocation | None = None,
        background: bool = False,
    ):
        self.func, self.model, self.exe_name = func, model, exe_name
        self.namespace = namespace if namespace is not None else {}
        self.engine, self.optimization_level = engine, optimization_level
        self.auto_build_seconds = (
            settings.auto_build_seconds if auto_build_seconds is None else auto_build_seconds
        )
        delay = settings.debounce_seconds if debounce_seconds is None else debounce_seconds
        self.debouncer = Debouncer(self.refresh, delay)
        self.listeners: list[Callable[[set[str]], None]] = []
        self._fast = LRU(settings.cache_size)
        self._built = LRU(settings.cache_size)
        self.key: tuple | None = None  # bounds key of the shown traced/lowered
        self.traced = self.lowered = self.built = self.exe = None
        self.good_traced = None  # last trace that worked: errors highlight their op in it
        self.error: BaseException | None = None
        self.error_stage = ""
        self.error_op: str | None = None
        self.stale: set[str] = set()
        self.building = False
        self.last_build_seconds: float | None = None
        self.log: list[dict] = []
        self.counts = {"trace": 0, "lower": 0, "build": 0}  # how often each stage really ran
        # Errors without a place in the user's code point here (the cell's def line).
        self.fallback_location = fallback_location
        # Builds on a worker thread (the widget's sessions), so the kernel stays responsive and can cancel.
        self.background = background
        self.job: BuildJob | None = None
        self.partial_traced = None  # the ops a failed trace made before its error
        self.note = ""  # why the engine is missing (a cancelled or interrupted build)
        self.progress_seconds = 0.4  # how often a background build updates its elapsed time

    # -- plumbing -------------------------------------------------------------------------------------
    def notify(self, changed: set[str]) -> None:
        for listener in list(self.listeners):
            listener(changed)

    def _log(self, stage: str, status: str, seconds: float | None = None, detail: str = "") -> None:
        ms = float("nan") if seconds is None else round(seconds * 1e3, 3)  # NaN prints as an empty cell
        self.log.append({"stage": stage, "status": status, "ms": ms, "detail": detail})
        del self.log[:-200]

    def _fail(self, stage: str, exc: BaseException, changed: set[str]) -> None:
        errors.relocate(exc, self.fallback_location)
        self.partial_traced = getattr(exc, "partial_trace", None) if stage == "trace" else None
        self.error, self.error_stage = exc, stage
        self.error_op = failing_op(exc, self.traced if stage != "trace" else self.good_traced)
        summary = getattr(exc, "summary", None) or f"{type(exc).__name__}: {exc}"
        self._log(stage, "error", None, summary)
        changed |= {"error", "log", "status", "stale", "trace", "mlir"}

    def schedule(self) -> None:
        """A bounds edit: re-run the fast path once the edits settle (debounced); a background build for the
        previous bounds is dropped (the refresh starts the next one)."""
        if self.job is not None and self.background:
            self._drop_job(self.job)
        self.stale |= {*FAST_TABS, *SLOW_TABS}
        self.notify({"stale", "status"})
        self.debouncer()

    # -- fast path ------------------------------------------------------------------------------------
    def refresh(self, force: bool = False, wait: bool = False) -> None:
        """Trace + lower for the current bounds (cached by bounds); build too when builds are fast
        (``wait``: block until that build is done, as the cell's first build does)."""
        changed: set[str] = {"status", "log"}
        problems = self.model.problems()
        if problems:
            self.stale |= {*FAST_TABS, *SLOW_TABS}
            self._log("bounds", "invalid", None, "; ".join(map(str, problems)))
            self.notify(changed | {"stale"})
            return
        key = self.model.key()
        if key == self.key and not force and self.error is None:
            self.stale -= set(FAST_TABS)
            if self._built.get(self._build_key()) is self.built:
                self.stale -= set(SLOW_TABS)
            self.notify(changed | {"stale"})
            return
        self._run_fast(key, changed)
        if self.error is None:
            cached = self._built.get(self._build_key())
            if cached is not None:
                self._use_build(cached, changed, hit=True)
            elif self.builds_on_change():
                self.notify(changed)
                changed = {"status", "log"}
                self.build(wait=wait)
        self.notify(changed)

    def _run_fast(self, key: tuple, changed: set[str]) -> None:
        from tripy_lab import pipeline

        hit = self._fast.get(key)
        if hit is not None:
            self.traced, self.lowered = hit
            self._log("trace+mlir", "cache hit")
        else:
            try:
                traced = pipeline.trace(self.func, kwargs=self.model.values())
            except Exception as exc:  # the user's function or its shapes: shown in the Error tab
                self.counts["trace"] += 1
                self._fail("trace", exc, changed)
                return
            self.counts["trace"] += 1
            self._log("trace", "ok", traced.seconds, f"{len(traced.trace.ops)} ops")
            try:
                lowered = traced.lower()
            except Exception as exc:
                self.counts["lower"] += 1
                self.traced = traced
                self._fail("lower", exc, changed)
                return
            self.counts["lower"] += 1
            self._log("mlir", "ok", lowered.seconds)
            self.traced, self.lowered = traced, lowered
            self._fast.put(key, (traced, lowered))
        self.key = key
        self.good_traced = self.traced
        self.partial_traced = None
        self.error, self.error_stage, self.error_op = None, "", None
        self.stale -= set(FAST_TABS)
        self.stale |= set(SLOW_TABS)
        changed |= {"trace", "mlir", "error", "stale"}

    # -- slow path ------------------------------------------------------------------------------------
    def builds_on_change(self) -> bool:
        """In the kernel (a background session on a running loop) every settled edit builds, however long the
        last build took: the next edit cancels it. Without a loop a build blocks, so only builds that took
        under ``auto_build_seconds`` run on their own."""
        if self.background and _running_loop() is not None:
            return True
        return self.last_build_seconds is None or self.last_build_seconds < self.auto_build_seconds

    def _build_key(self) -> tuple:
        key = self.key
        if self.engine in WHOLE_PROFILE_ENGINES and key is not None:
            key = profile_key(key)  # one session serves min..max: an opt-only edit reuses the build
        return (key, self.engine, self.optimization_level)

    def set_engine(self, engine: str | None = None, optimization_level: int | None = None) -> None:
        """Engine or level changed: only the build re-runs (the fast stages are unchanged)."""
        self.engine = engine
        if optimization_level is not None:
            self.optimization_level = optimization_level
        cached = self._built.get(self._build_key())
        changed = {"status", "stale", "log"}
        if cached is not None:
            if self.error_stage == "build":  # back to a build that worked
                self.error, self.error_stage, self.error_op = None, "", None
                changed.add("error")
            self._use_build(cached, changed, hit=True)
        else:
            self.stale |= set(SLOW_TABS)
        self.notify(changed)

    def _use_build(self, built, changed: set[str], hit: bool = False) -> None:
        self.built = built
        self.exe = built.executable()
        self.namespace[self.exe_name] = self.exe
        self.stale -= set(SLOW_TABS)
        if hit:
            self._log("build", "cache hit", None, built.report.engine)
        changed |= {"engine", "run", "stale"}

    def flush(self) -> None:
        """Run a pending (debounced) refresh now."""
        if self.debouncer.pending:
            self.debouncer.cancel()
            self.refresh()

    def build(self, wait: bool = False) -> None:
        """Build the engine for the current bounds; the Executable lands in the namespace as ``exe_name``.

        With ``background``, the build runs on a worker thread: ``wait`` (the cell's own first build) blocks until
        it is done but a KeyboardInterrupt cancels it; otherwise (widget events on the kernel's event loop) it
        returns at once, shows its elapsed time, and ``cancel_build()`` (Cancel, or an interrupt) stops it."""
        self.flush()
        if self.model.problems() or self.lowered is None or self.error is not None and self.error_stage != "build":
            return
        changed: set[str] = {"status", "log"}
        cached = self._built.get(self._build_key())
        if cached is not None and self.error is None:
            self._use_build(cached, changed, hit=True)
            self.notify(changed)
            return
        if self.job is not None:
            if self.job.key == self._build_key():  # this build is already running (started by an edit)
                if wait:
                    self._wait(self.job)  # the cell's first build still waits for it, and an interrupt stops it
                return
            self.cancel_build("superseded")
        job = BuildJob(self._build_key(), self.lowered, self.engine, self.optimization_level)
        self.job, self.building, self.note = job, True, ""
        try:  # an interrupt at any point from here leaves a clear state: no build, Build enabled, a message
            self.notify({"status"})
            if not self.background:
                job.run()
                if isinstance(job.outcome, KeyboardInterrupt):  # Ctrl+C in a script
                    raise job.outcome
                self._finish(job)
                return
            loop = None if wait else _running_loop()
            if loop is None:
                threading.Thread(target=job.run, name="tripy-lab-build", daemon=True).start()
        except KeyboardInterrupt:
            self.cancel_build("interrupted")
            raise
        if loop is None:
            self._wait(job)
            return

        def finish() -> None:
            if not job.cancelled and not loop.is_closed():  # a cancelled job's late result goes nowhere
                loop.call_soon_threadsafe(self._finish, job)

        threading.Thread(target=job.run, args=(finish,), name="tripy-lab-build", daemon=True).start()
        # After the current message handler: ipykernel restores its own SIGINT handler when a handler ends.
        loop.call_soon(self._hook_interrupt, job)
        loop.call_later(self.progress_seconds, self._tick, loop, job)

    def _tick(self, loop, job: BuildJob) -> None:
        if job is self.job and not job.done.is_set():
            self.notify({"status"})
            loop.call_later(self.progress_seconds, self._tick, loop, job)

    def _hook_interrupt(self, job: BuildJob) -> None:
        """While a background build runs, the kernel's interrupt (SIGINT) cancels it."""
        if job is not self.job or job.done.is_set() or threading.current_thread() is not threading.main_thread():
            return
        try:
            previous = signal.getsignal(signal.SIGINT)

            def on_interrupt(signum, frame) -> None:
                # No build of ours running any more (a handler restored late): behave as the one before did.
                if not self.cancel_build("interrupted") and callable(previous):
                    previous(signum, frame)

            signal.signal(signal.SIGINT, on_interrupt)
        except (ValueError, OSError):  # not allowed here: Cancel still works
            return
        job.restore_sigint = previous

    def _unhook_interrupt(self, job: BuildJob) -> None:
        previous = getattr(job, "restore_sigint", None)
        if previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)
            job.restore_sigint = None

    def cancel_build(self, reason: str = "cancelled") -> bool:
        """Stop waiting for the running build: the widget is ready again at once (the worker's late result
        is dropped). Returns whether a build was running."""
        job = self.job
        if job is None:
            return False
        self._drop_job(job)
        self.note = f"build {reason} after {job.elapsed:.1f} s: press Build to build again"
        self._log("build", reason, job.elapsed, f"{job.engine or 'default engine'}, -O{job.level}")
        self.notify({"status", "log", "stale"})
        return True

    def _drop_job(self, job: BuildJob) -> None:
        job.cancelled = True
        self._unhook_interrupt(job)
        self.job, self.building = None, False
        self.stale |= set(SLOW_TABS)

    def _wait(self, job: BuildJob) -> None:
        """Block until ``job`` is done, showing the elapsed time; an interrupt cancels it (and is re-raised)."""
        try:
            while not job.done.wait(self.progress_seconds):
                self.notify({"status"})  # the elapsed time
        except KeyboardInterrupt:
            self.cancel_build("interrupted")
            raise
        self._finish(job)

    def _finish(self, job: BuildJob) -> None:
        """Take a finished build's result (on the kernel's thread); a cancelled one is dropped."""
        if job.cancelled or job is not self.job:
            return
        self._unhook_interrupt(job)
        self.job, self.building = None, False
        changed: set[str] = {"status", "log"}
        self.counts["build"] += 1
        outcome = job.outcome
        if isinstance(outcome, BaseException):
            self._fail("build", outcome, changed)
        else:
            self.last_build_seconds = job.elapsed
            report = outcome.report
            self._log("build", "ok", outcome.seconds, f"{report.engine}: {report.reason}")
            self._built.put(job.key, outcome)
            self.error, self.error_stage, self.error_op = None, "", None
            if job.key == self._build_key():
                self._use_build(outcome, changed)
            changed.add("error")
        self.notify(changed)

    # -- status -------------------------------------------------------------------------------------
    def status(self) -> tuple[str, str]:
        """(text, kind) for the status line."""
        if self.building:
            job = self.job
            elapsed = f" {job.elapsed:.1f} s" if job is not None else ""
            return f"building…{elapsed}", "busy"
        if self.debouncer.pending:
            return "tracing…", "busy"
        problems = self.model.problems()
        if problems:
            return f"invalid bounds: {problems[0]}", "error"
        if self.error is not None:
            return f"{self.error_stage} failed: {getattr(self.error, 'summary', self.error)}", "error"
        if self.note and self.exe is None or self.note and self.stale & set(SLOW_TABS):
            return self.note, "stale"
        if self.stale & set(SLOW_TABS):
            return "engine is stale: press Build", "stale"
        if self.exe is not None:
            ms = (self.last_build_seconds or 0) * 1e3
            return f"{self.exe_name} = {self.exe} · {self.built.report.engine} · built in {ms:.0f} ms", "ok"
        return "ready", "info"

    def error_info(self) -> dict | None:
        if self.error is None:
            return None
        exc = self.error
        if isinstance(exc, TripyException):
            summary, details, loc = exc.summary, list(exc.details), exc.location
        else:
            summary, details = f"{type(exc).__name__}: {exc}", []
            loc = errors.innermost_user_location(exc) or self.fallback_location
        if errors.show_everything():  # tp.config.show_internal_frames: every frame, as Python prints them
            details += ["", *"".join(traceback.format_exception(exc)).rstrip().splitlines()]
        return {
            "summary": summary,
            "details": details,
            "location": loc.render() if loc else "",
            "op": self.error_op,
            "stage": self.error_stage,
        }
