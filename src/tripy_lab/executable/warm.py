"""Warming an Executable: compile, ahead of the first call, the shapes inside its profile that a user will meet.

An engine that compiles per shape (xla) builds the profile's min, opt and max at compile time and every other
shape on its first call, which stalls that call for a whole compile (seconds on a GPT). ``Executable.warm``
compiles a list of shapes — by default a ladder over each dynamic dimension — on a background thread at a low
OS priority, one at a time, so a slider move or sweep point inside the profile finds its shape built. Each
compile also lands in the persistent cache, so the next session starts warm too. ``cancel()`` stops after the
compile under way (XLA cannot abandon one half-way) and joins the thread.

A compiled shape is not yet a fast first call: the Executable checks a new argument signature once, the engine
makes its caller, jax its C++ call path per argument kind (numpy or device array), and on GPUs XLA records the
executable's CUDA graph on its first run and drops every recorded graph whenever it makes a new executable. So
each warmed shape is then called through the Executable with numpy and device zeros, and on GPUs every built
shape once more after the last compile: the user's first call there then costs what the steady ones do.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException, raise_error
from tripy_lab.frontend.tensor import Tensor

DEFAULT_LIMIT = 32  # a ladder over several dims grows fast; past this, the user names the shapes


def _axes(infos: dict) -> list[tuple[tuple, tuple[int, int, int]]]:
    """The dynamic axes of a profile: ((where, ...), (min, opt, max)) where ``where`` is (arg, dim) or (arg,)
    for a DimensionInputInfo. Dims that share a NamedDimension, or unnamed dims with the same bounds, move
    together (they are usually one size, e.g. a batch, seen by several inputs)."""
    groups: dict[tuple, list] = {}
    for name, info in infos.items():
        if isinstance(info, DimensionInputInfo):
            b = info.value_bounds
            bounds = (b.min[0], b.opt[0], b.max[0])
            if bounds[0] != bounds[2]:
                groups.setdefault(("value", bounds), []).append((name,))
            continue
        b = info.shape_bounds
        for d, (lo, mid, hi) in enumerate(zip(b.min, b.opt, b.max)):
            if lo == hi:
                continue
            key = ("named", info.dimension_names[d]) if d in info.dimension_names else ("dim", (lo, mid, hi))
            groups.setdefault(key, []).append((name, d))
    out = []
    for key, where in groups.items():
        if key[0] == "named":
            name, d = where[0]
            b = infos[name].shape_bounds
            bounds = (b.min[d], b.opt[d], b.max[d])
        else:
            bounds = key[1]
        out.append((tuple(where), bounds))
    return out


def _rungs(lo: int, mid: int, hi: int) -> list[int]:
    """min, every power of two strictly between, opt and max: the sizes people pick on a slider or a sweep."""
    values = {lo, mid, hi}
    p = 1
    while p < hi:
        if p > lo:
            values.add(p)
        p *= 2
    return sorted(values)


def _at(infos: dict, moved: dict) -> dict:
    """The signature {arg: shape or value} with every dim at opt except those in ``moved`` ((arg, dim) -> size)."""
    sig = {}
    for name, info in infos.items():
        if isinstance(info, DimensionInputInfo):
            sig[name] = moved.get((name,), info.value_bounds.opt[0])
        else:
            sig[name] = tuple(moved.get((name, d), n) for d, n in enumerate(info.shape_bounds.opt))
    return sig


def ladder(infos: dict[str, InputInfo | DimensionInputInfo], limit: int = DEFAULT_LIMIT) -> list[dict]:
    """Signatures to warm: each dynamic axis along its rungs with the others at opt (a slider moving), then all
    axes together at the same rung index (a sweep growing every dim), without the profile's three points (they
    are built at compile time); at most ``limit``."""
    axes = _axes(infos)
    points = {tuple(sorted(_at(infos, {}).items())), tuple(sorted(_at(infos, _corner(axes, 0)).items())),
              tuple(sorted(_at(infos, _corner(axes, 2)).items()))}
    out: list[dict] = []

    def add(moved: dict) -> None:
        sig = _at(infos, moved)
        key = tuple(sorted(sig.items()))
        if key not in points:
            points.add(key)
            out.append(sig)

    for where, bounds in axes:
        for size in _rungs(*bounds):
            add({w: size for w in where})
    if len(axes) > 1:
        rungs = [_rungs(*bounds) for _, bounds in axes]
        for i in range(max(len(r) for r in rungs)):
            add({w: r[min(i, len(r) - 1)] for (where, _), r in zip(axes, rungs) for w in where})
    return out[:limit]


def neighbours(infos: dict[str, InputInfo | DimensionInputInfo]) -> list[dict]:
    """The ladder's rungs next to opt: each dynamic axis one rung down and one up, the others at opt (where a
    slider or the next edit lands first; the lab warms these after each build, ``Session``)."""
    axes = _axes(infos)
    points = [_at(infos, {}), _at(infos, _corner(axes, 0)), _at(infos, _corner(axes, 2))]  # built at compile time
    out = []
    for where, bounds in axes:
        rungs = _rungs(*bounds)
        i = rungs.index(bounds[1])
        for size in rungs[max(i - 1, 0):i] + rungs[i + 1:i + 2]:
            sig = _at(infos, {w: size for w in where})
            if sig not in points and sig not in out:
                out.append(sig)
    return out


def _corner(axes, which: int) -> dict:
    return {w: bounds[which] for where, bounds in axes for w in where}


def _zeros(exe, signature: dict, resident: bool) -> list:
    """Arguments at ``signature`` in argument order: zeros as numpy arrays, or as the engine's resident arrays
    (jax arrays for xla) when ``resident``; a DimensionInputInfo's value as the plain int a caller passes."""
    engine, args = exe._compiled, []
    for name in exe._arg_names:
        info = exe.input_infos[name]
        if isinstance(info, DimensionInputInfo):
            args.append(int(signature[name]))
            continue
        array = np.zeros(signature[name], dtypes.to_numpy(info.dtype))
        args.append(engine.to_device(array) if resident else array)
    return args


def _call_as_user(exe, args: list) -> bool:
    """One call through the Executable's public path, as a user's call with arguments of these types: it checks
    them, remembers the signature (``Executable._fast``), and the engine makes its caller and jax its C++ call
    path for them; waits for the result. The engine's last outputs (what ``synchronize`` waits on) are put back
    when they are still this call's, so a user's ``exe.synchronize()`` meanwhile waits on their own call."""
    engine = exe._compiled
    before = getattr(engine, "_last", None)
    try:
        # containers of inputs (not flat): the engine's own call, on the leaves (dims as their 0-d int32 arrays)
        out = exe(*args) if exe._flat else engine.run([np.asarray(a, np.int32) if type(a) is int else a
                                                       for a in args])
    except Exception:  # zeros the program refuses at run time: built all the same, the first call loads it
        return False
    first = (out[0] if isinstance(out, (tuple, list)) else out)
    array = vars(first).get("_array") if isinstance(first, Tensor) else first  # an output Tensor's array
    ready = getattr(array, "block_until_ready", None)
    if ready is not None:
        ready()
    last = getattr(engine, "_last", None)
    if last is not None and last is not before and len(last) and last[0] is array:
        engine._last = before
    return True


class WarmUp:
    """A warm-up under way: ``built`` / ``skipped`` fill in as it goes; ``wait()``, ``cancel()``, ``done``.

    For each signature: the engine compiles it (``CompiledEngine.warm``), then it is called once through the
    Executable with numpy zeros and once with the engine's resident arrays (jax arrays), so the first real call
    at that shape, with either kind of argument, finds every per-shape cache filled (``called``). Where a later
    compile undoes part of that (``evicts_on_build``: XLA's CUDA graphs on GPUs), every built signature is
    called once more at the end (``replayed``)."""

    def __init__(self, exe, signatures: list[dict], background: bool, on_done=None):
        self.signatures = signatures
        self.built: list[dict] = []  # compiled now
        self.already: list[dict] = []  # built before (at compile time, a first call, an earlier warm-up)
        self.skipped: list[tuple[dict, str]] = []  # could not be built here, with why (it fails on first use too)
        self.called: list[dict] = []  # called through the Executable after their compile (numpy and resident)
        self.replayed: list[dict] = []  # every built signature, called again after the last compile (GPU)
        self._exe = exe
        self._on_done = on_done  # called with this WarmUp on its thread when it ends (cancelled or not)
        self._stop = threading.Event()
        self._thread = None
        if background:
            self._thread = threading.Thread(target=self._run, name="tripy-lab-warm", daemon=True)
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        if self._thread is not None and hasattr(os, "setpriority"):
            try:  # Linux: a thread's nice value is its own; compiles then yield to the user's calls
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
            except OSError:
                pass
        try:
            self._warm()
        finally:
            if self._on_done is not None:
                self._on_done(self)

    def _warm(self) -> None:
        exe = self._exe
        engine = exe._compiled
        kinds = (False, True) if engine.built_points() else ()  # engines without per-shape builds: no calls
        compiled_any = False
        for sig in self.signatures:
            if self._stop.is_set():
                return
            try:
                compiled = engine.warm(sig)
            except TripyException as exc:
                self.skipped.append((sig, exc.summary))
                continue
            compiled_any |= compiled
            (self.built if compiled else self.already).append(sig)
            if self._stop.is_set():  # cancelled during that compile: it stays built, nothing more runs
                return
            ran = [_call_as_user(exe, _zeros(exe, _at(exe.input_infos, {}) | sig, resident)) for resident in kinds]
            if ran and all(ran):
                self.called.append(sig)
        if compiled_any and engine.evicts_on_build:
            for sig in engine.built_points():
                if self._stop.is_set():
                    return
                if _call_as_user(exe, _zeros(exe, sig, True)):
                    self.replayed.append(sig)

    @property
    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    @property
    def cancelled(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until every signature is handled (or ``timeout`` seconds); True when done."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self.done

    def cancel(self, wait: bool = True) -> None:
        """Build nothing more; returns once the compile under way (if any) has finished and the thread is gone
        (``wait=False``: at once; the thread ends after that compile, e.g. the lab's next build does not wait)."""
        self._stop.set()
        if wait:
            self.wait()

    def __repr__(self) -> str:
        state = "cancelled" if self.cancelled and self.done else "done" if self.done else "running"
        handled = len(self.built) + len(self.already) + len(self.skipped)
        return (f"WarmUp({state}: {handled}/{len(self.signatures)} signatures, {len(self.built)} compiled, "
                f"{len(self.already)} already built, {len(self.skipped)} skipped)")


def warm(exe, shapes="ladder", *, background: bool = True, limit: int = DEFAULT_LIMIT, on_done=None) -> WarmUp:
    if isinstance(shapes, str):
        if shapes != "ladder":
            raise_error("Invalid value for parameter: 'shapes' of Executable.warm.",
                        [f"Expected \"ladder\" or a list of {{argument: shape}} dicts, but got: {shapes!r}."])
        signatures = ladder(exe.input_infos, limit)
    elif isinstance(shapes, Sequence) and all(isinstance(s, dict) for s in shapes):
        signatures = [_at(exe.input_infos, {}) | dict(s) for s in shapes]
    else:
        raise_error("Invalid value for parameter: 'shapes' of Executable.warm.",
                    [f"Expected \"ladder\" or a list of {{argument: shape}} dicts, but got: {shapes!r}."])
    return WarmUp(exe, signatures, background, on_done)
