"""One tuning task, the same code in the notebook's process and on a Dask worker: build one config, check its
outputs against the fp32 reference, time it with the lab's timing (``lab/measure/timing.py``) -> one row (a dict).

A failed build is a row with its error text, never an exception: a sweep keeps going. Nothing here imports
Dask at module level; on a worker, ``setup_worker`` gives the process its own private cache folders (two
processes writing one timing cache or compiled-entry index would overwrite each other's index).
"""

from __future__ import annotations

import copy
import inspect
import os
import tempfile
import threading
import time
from typing import Any

import numpy as np

from tripy_lab.core import config as tp_config
from tripy_lab.core import dtypes
from tripy_lab.core.bounds import Bounds, DimensionInputInfo, InputInfo
from tripy_lab.core.errors import TripyException, raise_error
from tripy_lab.lab.measure import timing

# One timing at a time per process: two configs timed at once on one device (or on the same CPU cores of
# one worker) would each read the other's load. Builds run outside the lock.
TIMING_LOCK = threading.Lock()
_PROGRAMS: dict[str, tuple] = {}  # token -> (func_or_module, args): a worker unpickles a program once
_LOCAL_CANCEL: dict[str, threading.Event] = {}  # in-process runs: token -> event set by cancel()
_WORKER_CACHE: dict[str, str] = {}


class Cancelled(Exception):
    """The sweep was cancelled while this config ran (checked between build, accuracy and timing)."""


# -- the program ---------------------------------------------------------------------------------------
def import_path(path: str):
    """``"package.module:attr"`` -> the object (a function or a tp.Module)."""
    import importlib

    module_name, sep, attr = path.partition(":")
    if not sep or not module_name or not attr:
        raise_error(f"Invalid value for parameter: 'func_or_module': {path!r}.",
                    ["Expected a function, a tp.Module or an importable path 'package.module:attr'."])
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise_error(f"Cannot import {path!r} for tuning.", [f"{type(exc).__name__}: {exc}"])
    return obj


def load_program(token: str, payload) -> tuple:
    """(func_or_module, args) from a scattered cloudpickle payload or an importable path, once per process."""
    hit = _PROGRAMS.get(token)
    if hit is None:
        kind, body, args = payload if isinstance(payload, tuple) else ("pickle", payload, None)
        if kind == "path":
            hit = (import_path(body), args)
        else:
            import cloudpickle

            hit = cloudpickle.loads(body)
        _PROGRAMS[token] = hit
    return hit


def param_names(func) -> list[str]:
    """Parameter names of a function or a Module's ``forward`` (positional args are bound to them)."""
    target = getattr(func, "forward", func)
    try:
        return list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return []


def with_opt(func, args, opt: dict | None):
    """``args`` with each named InputInfo's opt point replaced (min and max kept)."""
    if not opt:
        return args
    keyed = isinstance(args, dict)
    names = list(args) if keyed else param_names(func)[: len(args)]
    values = dict(args) if keyed else dict(zip(names, args))
    for name, shape in opt.items():
        info = values.get(name)
        if not isinstance(info, InputInfo):
            raise_error(f"Invalid value for parameter: 'opt': {name!r}.",
                        [f"Expected the name of an InputInfo argument, one of {names}."])
        shape = (int(shape),) if isinstance(shape, int) else tuple(int(s) for s in shape)
        b = info.shape_bounds
        if len(shape) != len(b.opt) or not all(lo <= s <= hi for lo, s, hi in zip(b.min, shape, b.max)):
            raise_error(f"Invalid value for parameter: 'opt': {name}={shape}.",
                        [f"Expected a shape of rank {len(b.opt)} within min {b.min} and max {b.max}."])
        new = copy.copy(info)
        new.shape_bounds = Bounds(b.min, shape, b.max)
        values[name] = new
    return values if keyed else [values.get(n, a) for n, a in zip(names, args)] + list(args[len(names):])


def variant_of(func, args, dtype, quantize):
    """The dtype / int8 weight-only variant (``pipeline.variants``); no dtype and no quantize: the program."""
    if dtype is None and not quantize:
        return func, args
    from tripy_lab.pipeline.variants import variant

    if isinstance(args, dict):  # by parameter name (the Tune tab's bounds): variant() takes them in order
        func, values = variant(func, list(args.values()), dtype=dtype, quantize=quantize)
        return func, dict(zip(args, values))
    return variant(func, args, dtype=dtype, quantize=quantize)


def build(func, args, config: dict, shapes=None):
    """trace -> lower -> build of one config; returns the Executable. ``shapes``: {arg: shape} dicts compiled
    besides the profile (the sweep's input shapes: their compile is part of the build, not of the first run)."""
    from tripy_lab import pipeline

    func, args = variant_of(func, with_opt(func, args, config.get("opt")), config.get("dtype"),
                            config.get("quantize"))
    keyed = isinstance(args, dict)
    traced = pipeline.trace(func, args=() if keyed else args, kwargs=args if keyed else None)
    built = traced.lower().build(engine=config.get("engine"),
                                 optimization_level=config.get("optimization_level", 3),
                                 shapes=list(shapes) if shapes else "profile")
    return built.executable()


# -- inputs, outputs, errors ----------------------------------------------------------------------------
def cast_inputs(exe, inputs: dict) -> dict:
    """Float inputs in the dtype of ``exe``'s InputInfos (a float16 variant takes float16 inputs)."""
    cast = {}
    for name, value in inputs.items():
        info = exe.input_infos.get(name)
        if isinstance(info, InputInfo) and isinstance(value, np.ndarray) and value.dtype.kind == "f":
            value = value.astype(dtypes.to_numpy(info.dtype))
        cast[name] = value
    return cast


def outputs_of(exe, inputs: dict) -> list[np.ndarray]:
    out = exe(**cast_inputs(exe, inputs))
    return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]


def reference(func, args, inputs=None, seed: int = 0, engine: str = "reference") -> dict:
    """The program cast to fp32, on the reference engine (or ``engine``): the inputs every config runs (random
    at the profile's opt point unless given) and its outputs."""
    exe = build(func, args, {"engine": engine, "optimization_level": 0, "dtype": "float32"})
    infos = exe.input_infos
    if inputs is None:
        inputs = timing.make_inputs(infos, timing.shapes_at(infos, "opt"), seed)
    elif not isinstance(inputs, dict):
        inputs = dict(zip(infos, inputs))
    inputs = {k: (int(v) if isinstance(infos.get(k), DimensionInputInfo) else np.asarray(v))
              for k, v in inputs.items()}
    shapes = {k: (v if isinstance(v, int) else tuple(v.shape)) for k, v in inputs.items()}
    return {"inputs": inputs, "outputs": outputs_of(exe, inputs), "shapes": shapes,
            "shape": timing.shape_label(shapes)}


def errors(outs: list[np.ndarray], refs: list[np.ndarray], gate: dict) -> dict[str, Any]:
    """max |out - ref| and that over max |ref| (over all outputs), and whether every element passes
    ``|out - ref| <= atol + rtol * |ref|``."""
    if len(outs) != len(refs):
        return {"max_abs_err": float("nan"), "max_rel_err": float("nan"), "passed": False,
                "error": f"{len(outs)} outputs, the reference has {len(refs)}"}
    abs_err, rel_err, passed = 0.0, 0.0, True
    for out, ref in zip(outs, refs):
        if out.shape != ref.shape:
            return {"max_abs_err": float("nan"), "max_rel_err": float("nan"), "passed": False,
                    "error": f"output shape {out.shape}, the reference has {ref.shape}"}
        x, r = out.astype(np.float64), ref.astype(np.float64)
        err = np.abs(x - r)
        if not err.size:
            continue
        worst = float(err.max())  # NaN when any output element is NaN: never a pass
        abs_err = float(np.max([abs_err, worst]))  # np.max keeps a NaN
        scale = float(np.abs(r).max())
        rel_err = max(rel_err, worst / scale) if scale > 0 else rel_err
        passed = passed and bool(np.all(err <= gate["atol"] + gate["rtol"] * np.abs(r)))
    return {"max_abs_err": abs_err, "max_rel_err": rel_err, "passed": passed}


# -- worker plumbing -------------------------------------------------------------------------------------
def worker_name() -> str:
    try:
        from distributed import get_worker

        w = get_worker()
        return str(w.name)
    except (ImportError, ValueError):
        return "local"


def setup_worker() -> None:
    """Once per Dask worker process: private cache folders (mode 0700) for the xla engine and timing cache."""
    if _WORKER_CACHE or worker_name() == "local":
        return
    base = os.path.join(tempfile.gettempdir(), f"tripy-lab-tune-{os.geteuid()}")
    os.makedirs(base, mode=0o700, exist_ok=True)
    private = tempfile.mkdtemp(prefix=f"worker-{os.getpid()}-", dir=base)
    tp_config.compilation_cache_dir = os.path.join(private, "xla")
    tp_config.timing_cache_file_path = os.path.join(private, "timing-cache")
    _WORKER_CACHE["dir"] = private

    import atexit
    import shutil

    atexit.register(shutil.rmtree, private, True)


def cancelled(token: str | None) -> bool:
    if token is None:
        return False
    event = _LOCAL_CANCEL.get(token)
    if event is not None:
        return event.is_set()
    try:
        from distributed import Event

        return Event(token).is_set()
    except Exception:  # no cluster: nothing to ask
        return False


def _check(token: str | None) -> None:
    if cancelled(token):
        raise Cancelled()


def _why(exc: BaseException) -> str:
    return getattr(exc, "summary", None) or f"{type(exc).__name__}: {exc}"


def run_config(index: int, config: dict, program: tuple, ref: dict, gate: dict, timing_opts: dict,
               cancel: str | None = None, keep: bool = False) -> dict:
    """One row: build seconds, errors against ``ref``, the gate, timing; ``error`` says where it failed.
    ``keep``: the Executable stays on the row (in-process runs: the Tune tab opens its stages)."""
    setup_worker()
    func, args = program
    row: dict[str, Any] = {"index": index, **config, "worker": worker_name(), "build_s": float("nan"),
                           "passed": False, "error": "", "trtexec": ""}
    try:
        _check(cancel)
        start = time.perf_counter()
        try:
            exe = build(func, args, config, [ref["shapes"]])
        except TripyException as exc:
            row["error"] = f"build: {_why(exc)}"
            return row
        except Exception as exc:  # a variant or user code raising something else: still a row
            row["error"] = f"build: {_why(exc)}"
            return row
        row["build_s"] = time.perf_counter() - start
        if keep:
            row["executable"] = exe
        try:
            row["trtexec"] = exe.trtexec_command()
        except Exception:  # a command line is a convenience, never a failed row
            pass
        _check(cancel)
        with TIMING_LOCK:
            try:
                row.update(errors(outputs_of(exe, ref["inputs"]), ref["outputs"], gate))
            except Exception as exc:
                row["error"] = f"run: {_why(exc)}"
                return row
            _check(cancel)
            try:
                row.update(timing.measure(exe, cast_inputs(exe, ref["inputs"]), **timing_opts))
            except Exception as exc:
                row["error"] = f"timing: {_why(exc)}"
    except Cancelled:
        row["error"] = "cancelled"
        row["passed"] = False
    return row

