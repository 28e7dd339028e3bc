"""``tune(func_or_module, args, space)``: build every configuration of a search space, check each one's
outputs against the fp32 reference and time it -> a ``TuneResult`` (a table, a Pareto plot of time against
error, the best passing config as code).

``client=None`` runs in this process (on a background thread, so a notebook stays responsive and a kernel
interrupt cancels); ``client=distributed.Client(...)`` runs one task per config on a Dask cluster
(``lab/tune_dask.py``). Each config runs ``lab/tune_task.run_config``: the same code in both places.
"""

from __future__ import annotations

import itertools
import threading
import time
import uuid

from tripy_lab.core import dtypes
from tripy_lab.core.errors import expected, raise_error
from tripy_lab.lab import tune_task

KEYS = ("engine", "optimization_level", "dtype", "quantize", "opt")
DTYPES = ("float32", "float16", "bfloat16")
DEFAULT_ACCURACY = {"atol": 1e-2, "rtol": 1e-2}
# Short timing: a sweep is about builds; benchmark() the winner for a longer measurement.
DEFAULT_TIMING = {"warmup": 3, "iters": 20, "max_seconds": 2.0, "profile_calls": 10}
TIMING_KEYS = ("warmup", "iters", "max_seconds", "profile_calls")


# -- the space -----------------------------------------------------------------------------------------
def _dtype_name(value) -> str | None:
    if value in (None, "as written"):
        return None  # the program's own dtypes
    name = value.name if isinstance(value, dtypes.dtype) else value
    if name not in DTYPES:
        raise_error(f"Invalid value for parameter: 'dtype': {value!r}.",
                    [expected("dtype", value, "one of 'float32', 'float16', 'bfloat16' or that tp dtype")])
    return name


def _quantize_name(value) -> str | None:
    if value in (None, False, "none", "None"):
        return None
    name = value.name if isinstance(value, dtypes.dtype) else value
    if name != "int8":
        raise_error(f"Invalid value for parameter: 'quantize': {value!r}.",
                    [expected("quantize", value, "None or 'int8' (int8 weight-only Linear)")])
    return "int8"


def _opt(value) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise_error(f"Invalid value for parameter: 'opt': {value!r}.",
                    [expected("opt", value, "a dict {argument name: opt shape}, e.g. {'x': (8, 64)}")])
    return {str(k): ((int(v),) if isinstance(v, int) else tuple(int(s) for s in v)) for k, v in value.items()}


def normalize(config: dict) -> dict:
    """A config with every key (engine, optimization_level, dtype, quantize, opt) checked and filled in."""
    from tripy_lab.engine import engine_class
    from tripy_lab.pipeline.stages import check_optimization_level

    if not isinstance(config, dict):
        raise_error(f"Invalid configuration: {config!r}.", [expected("space", config, "a dict of lists or a "
                                                                    "list of config dicts")])
    unknown = sorted(set(config) - set(KEYS))
    if unknown:
        raise_error(f"Invalid key in parameter: 'space': {unknown[0]!r}.", [f"Expected keys from {list(KEYS)}."])
    engine = config.get("engine")
    if engine in ("default", ""):
        engine = None
    if engine is not None:
        engine_class(engine)  # an unknown engine name raises here, at the user's line
    return {"engine": engine, "optimization_level": check_optimization_level(config.get("optimization_level", 3)),
            "dtype": _dtype_name(config.get("dtype")), "quantize": _quantize_name(config.get("quantize")),
            "opt": _opt(config.get("opt"))}


def expand(space) -> list[dict]:
    """A dict of lists -> every combination (in key order); a list of dicts -> those configs."""
    if isinstance(space, dict):
        lists = {k: (v if isinstance(v, (list, tuple)) else [v]) for k, v in space.items()}
        if any(len(v) == 0 for v in lists.values()):
            empty = next(k for k, v in lists.items() if not v)
            raise_error(f"Invalid value for parameter: 'space': {empty!r} is empty.", ["Give at least one value."])
        keys = list(lists)
        configs = [dict(zip(keys, combo)) for combo in itertools.product(*(lists[k] for k in keys))]
    elif isinstance(space, (list, tuple)):
        configs = list(space)
    else:
        raise_error(f"Invalid value for parameter: 'space': {space!r}.",
                    [expected("space", space, "a dict of lists (e.g. {'optimization_level': [0, 3]}) or a list "
                                              "of config dicts")])
    if not configs:
        raise_error("Invalid value for parameter: 'space': no configurations.", ["Give at least one config."])
    return [normalize(c) for c in configs]


def label(config: dict) -> str:
    """``xla -O3 float16 int8-wo opt x=8x64``"""
    from tripy_lab.lab.measure.timing import shape_label

    parts = [config["engine"] or "default", f"-O{config['optimization_level']}"]
    if config["dtype"]:
        parts.append(config["dtype"])
    if config["quantize"]:
        parts.append(f"{config['quantize']}-wo")
    if config["opt"]:
        parts.append(f"opt {shape_label(config['opt'])}")
    return " ".join(parts)


def _gate(accuracy) -> dict:
    if isinstance(accuracy, (int, float)) and not isinstance(accuracy, bool):
        return {"atol": float(accuracy), "rtol": 0.0}
    if isinstance(accuracy, dict) and set(accuracy) <= {"atol", "rtol"}:
        return {**{"atol": 0.0, "rtol": 0.0}, **{k: float(v) for k, v in accuracy.items()}}
    raise_error(f"Invalid value for parameter: 'accuracy': {accuracy!r}.",
                [expected("accuracy", accuracy, "a max abs error (float) or {'atol': ..., 'rtol': ...}")])


# -- a running sweep -----------------------------------------------------------------------------------
class TuneRun:
    """A sweep under way: ``rows`` fill in as configs finish (``listeners`` hear each), ``cancel()`` stops
    the remaining ones, ``result()`` waits and returns the ``TuneResult``."""

    def __init__(self, configs: list[dict], program: tuple, gate: dict, where: str, path: str | None = None):
        self.configs, self.program, self.gate, self.where, self.path = configs, program, gate, where, path
        self.rows: list[dict | None] = [None] * len(configs)
        self.listeners: list = []
        self.done = threading.Event()
        self.token = f"tripy-lab-tune-{uuid.uuid4().hex}"  # the cancel event's name
        self.started = time.perf_counter()
        self.seconds: float | None = None
        self.error = ""  # the sweep itself failed (e.g. the fp32 reference did not build)
        self.reference_shape = ""
        self.cancelled = False
        self._lock = threading.Lock()
        self._cancel_hooks: list = []

    @property
    def finished(self) -> int:
        return sum(r is not None for r in self.rows)

    def add(self, row: dict) -> None:
        with self._lock:
            if self.rows[row["index"]] is not None:
                return
            row["config"] = label(self.configs[row["index"]])
            self.rows[row["index"]] = row
        self._notify()

    def fail_remaining(self, why: str) -> None:
        """Rows for every config without one (cancelled, or the sweep failed before it ran)."""
        for i, config in enumerate(self.configs):
            if self.rows[i] is None:
                self.add({"index": i, **config, "worker": "", "build_s": float("nan"), "passed": False,
                          "error": why, "trtexec": ""})

    def finish(self) -> None:
        self.seconds = time.perf_counter() - self.started
        self.done.set()
        self._notify()

    def _notify(self) -> None:
        for listener in list(self.listeners):
            try:
                listener(self)
            except Exception:  # a display that failed must not stop the sweep
                pass

    def cancel(self) -> None:
        """Stop: configs not started never run, a running one stops at its next step (build, accuracy,
        timing); their rows say "cancelled"."""
        self.cancelled = True
        event = tune_task._LOCAL_CANCEL.get(self.token)
        if event is not None:
            event.set()
        for hook in self._cancel_hooks:
            hook()

    def wait(self, timeout: float | None = None) -> bool:
        return self.done.wait(timeout)

    def result(self):  # -> tune_view.TuneResult
        from tripy_lab.lab.tune_view import TuneResult

        self.done.wait()
        return TuneResult(list(self.rows), self.configs, self.program, self.gate, self.seconds or 0.0,
                          self.reference_shape, self.error, self.where, self.path)

    def _repr_html_(self) -> str:
        from tripy_lab.lab.tune_view import progress_html

        return progress_html(self)


def _run_local(run: TuneRun, inputs, timing_opts: dict, engine: str) -> None:
    tune_task._LOCAL_CANCEL[run.token] = threading.Event()
    try:
        func, args = run.program
        try:
            ref = tune_task.reference(func, args, inputs, engine=engine)
        except Exception as exc:  # the fp32 program itself does not build or run: every row says so
            run.error = f"reference: {getattr(exc, 'summary', None) or exc}"
            run.fail_remaining(run.error)
            return
        run.reference_shape = ref["shape"]
        for i, config in enumerate(run.configs):
            if run.cancelled:
                break
            run.add(tune_task.run_config(i, config, run.program, ref, run.gate, timing_opts, run.token, keep=True))
        run.fail_remaining("cancelled")
    finally:
        tune_task._LOCAL_CANCEL.pop(run.token, None)
        run.finish()


def tune(func_or_module, args, space, *, inputs=None, accuracy=DEFAULT_ACCURACY, client=None, wait: bool = True,
         timing: dict | None = None, progress: bool = True, reference: str = "reference"):
    """Build, check and time every config of ``space`` -> ``TuneResult`` (``wait=False``: a ``TuneRun``).

    * ``func_or_module``: a function, a ``tp.Module`` (sent to Dask workers with its weights, once) or an
      importable ``"package.module:attr"`` path (each worker imports it). ``args``: the ``tp.compile`` args
      (a list, or a dict by parameter name).
    * ``space``: a dict of lists, every combination is a config: ``engine`` ("xla", "reference", ...),
      ``optimization_level`` (0-5), ``dtype`` (compute precision: "float32"/"float16"/"bfloat16" or a tp
      dtype; not given: the program's own dtypes), ``quantize`` (None or "int8": int8 weight-only Linear),
      ``opt`` ({arg: opt shape}, min and max kept); or an explicit list of config dicts.
    * Accuracy: each config's top-level outputs against the program cast to fp32 (``pipeline.variants``), built
      on the ``reference`` engine (the numpy interpreter; "xla" for big inputs), on the same inputs
      (``inputs``: {name: array}, else random at the profile's opt point). ``accuracy``: the gate,
      ``{"atol", "rtol"}`` (every element ``|out - ref| <= atol + rtol * |ref|``) or a float max abs error.
    * Timing: ``lab.timing.measure`` (compute, latency, throughput) on those inputs; ``timing`` overrides
      ``DEFAULT_TIMING`` (warmup, iters, max_seconds, profile_calls). One timing at a time per process; on a
      cluster whose workers have a ``GPU`` resource, one config at a time per GPU.
    * ``client``: None (this process) or a ``distributed.Client``; rows arrive as configs finish. A kernel
      interrupt (or ``run.cancel()``) stops the remaining configs.
    """
    configs = expand(space)
    from tripy_lab.engine import engine_class

    engine_class(reference)  # an unknown reference engine raises here
    gate = _gate(accuracy)
    timing_opts = {**DEFAULT_TIMING, **(timing or {})}
    bad = sorted(set(timing_opts) - set(TIMING_KEYS))
    if bad:
        raise_error(f"Invalid key in parameter: 'timing': {bad[0]!r}.", [f"Expected keys from {list(TIMING_KEYS)}."])
    if isinstance(args, tuple):
        args = list(args)
    if not isinstance(args, (list, dict)):
        raise_error(f"Invalid value for parameter: 'args': {args!r}.",
                    [expected("args", args, "a list of InputInfos / values, or a dict by parameter name")])
    path = func_or_module if isinstance(func_or_module, str) else None
    program = (tune_task.import_path(path) if path else func_or_module, args)
    if client is None:
        run = TuneRun(configs, program, gate, "this process", path)
        threading.Thread(target=_run_local, args=(run, inputs, timing_opts, reference), daemon=True,
                         name="tripy-lab-tune").start()
    else:
        from tripy_lab.lab import tune_dask

        run = TuneRun(configs, program, gate, tune_dask.describe(client), path)
        tune_dask.start(run, client, path, inputs, timing_opts, reference)
    if not wait:
        return run
    return _wait(run, progress)


def _wait(run: TuneRun, progress: bool):
    """Block until done, showing progress in a notebook; a KeyboardInterrupt cancels the rest."""
    from tripy_lab.lab import tune_view

    shown = tune_view.LiveProgress(run) if progress else None
    try:
        while not run.wait(0.2):
            pass
    except KeyboardInterrupt:
        run.cancel()
        run.wait()
    finally:
        if shown is not None:
            shown.close()
    return run.result()


__all__ = ["DEFAULT_ACCURACY", "TuneRun", "expand", "label", "normalize", "tune"]
