"""pipeline.trace(): run the user's function once on stand-ins for its runtime inputs and record the Trace."""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable

from tripy_lab.core.bounds import DimensionInputInfo, InputInfo, check_named_dimensions
from tripy_lab.core.errors import raise_error
from tripy_lab.core.gc_pause import gc_paused
from tripy_lab.core.source import return_location
from tripy_lab.frontend import Module
from tripy_lab.frontend.tensor import DimensionSize, Tensor
from tripy_lab.trace import Trace, TraceTensor, optable

_COMPILING: list[tuple[list, dict, dict]] = []  # per trace being made: its inputs, infos, tensors evaluated


def compiling() -> bool:
    return bool(_COMPILING)


def compile_context() -> tuple[list, dict, dict]:
    """The innermost trace being made: (input trace tensors, their infos by name, {id(tt): (tt, location)} of the
    tensors evaluated while tracing)."""
    return _COMPILING[-1]


@contextlib.contextmanager
def _compiling(inputs: list, infos: dict):
    _COMPILING.append((inputs, infos, {}))
    try:
        yield
    finally:
        _COMPILING.pop()


def _check_not_evaluated(outputs: list[TraceTensor], evaluated: dict) -> None:
    """nvtripy's rule: a tensor evaluated while compiling is fine (a warning) unless the result uses it, since its
    value was computed from stand-in inputs and would be baked into the program."""
    if not evaluated:
        return
    stack, seen = list(outputs), set()
    while stack:
        t = stack.pop()
        if id(t) in seen:
            continue
        seen.add(id(t))
        if id(t) in evaluated and evaluated[id(t)][0] is t:
            raise_error("Cannot evaluate a tensor while compiling.",
                        ["Tensor was evaluated here (its value came from stand-in inputs: all ones at the opt shape):",
                         "The result depends on it. Avoid print/tolist/int/bool on tensors that depend on the "
                         "function's runtime inputs."], location=evaluated[id(t)][1])
        if t.producer is not None:
            stack.extend(t.producer.inputs)


def _input_tensor(name: str, info) -> Tensor:
    if isinstance(info, DimensionInputInfo):
        tt = TraceTensor(shape=(), dtype=info.dtype, name=name, is_shape=True, is_compile_tracer=True)
        return DimensionSize._wrap(tt)
    tt = TraceTensor(shape=info.static_shape(), dtype=info.dtype, name=name, is_compile_tracer=True)
    return Tensor._wrap(tt)


def _flatten(name: str, value, inputs: list[TraceTensor], infos: dict):
    """Replace InputInfos (also inside lists/tuples/dicts) by input tensors named name / name[i] / name.key."""
    if isinstance(value, (InputInfo, DimensionInputInfo)):
        t = _input_tensor(name, value)
        inputs.append(t.trace_tensor)
        infos[name] = value
        return t
    if isinstance(value, (list, tuple)) and any(_has_info(v) for v in value):
        out = [_flatten(f"{name}[{i}]", v, inputs, infos) for i, v in enumerate(value)]
        return type(value)(out) if isinstance(value, tuple) else out
    if isinstance(value, dict) and any(_has_info(v) for v in value.values()):
        return {k: _flatten(f"{name}.{k}", v, inputs, infos) for k, v in value.items()}
    return value


def _has_info(value) -> bool:
    if isinstance(value, (InputInfo, DimensionInputInfo)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_info(v) for v in value)
    if isinstance(value, dict):
        return any(_has_info(v) for v in value.values())
    return False


def _signature(func) -> inspect.Signature:
    if isinstance(func, Module):
        # Older Tripy programs (NVIDIA's ResNet-50, CLIP) override __call__ instead of forward.
        overrides_call = type(func).__call__ is not Module.__call__
        return inspect.signature(func.__call__ if overrides_call else func.forward)
    return inspect.signature(func)


def _partial(made: list, inputs: list, infos: dict, name: str, seconds: float):
    """The Traced of the ops made before a failure (their unused results as outputs), or None."""
    from tripy_lab.pipeline.stages import Traced

    used = {id(t) for op in made for t in op.inputs}
    leaves = [t for op in made for t in op.outputs if id(t) not in used]
    if not made or not leaves:
        return None
    try:
        return Traced(Trace(leaves, inputs, infos, name=name), seconds, False)
    except Exception:  # a partial graph is a bonus: never mask the user's error
        return None


def failed_call(exc: BaseException, made: list) -> dict | None:
    """The public frontend call that raised during a trace, for the lab to draw in red: its name, its operand
    tensors (and their types) and the user's line. It is the first tripy-lab frontend frame after the user's
    last frame in the traceback (``y @ w`` -> ``__matmul__``); None when the error came from elsewhere."""
    frames, tb = [], exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    frontend = [f.f_globals.get("__name__", "").startswith("tripy_lab.frontend") for f in frames]
    user = [not f.f_globals.get("__name__", "").startswith("tripy_lab") for f in frames]
    last_user = max((k for k, u in enumerate(user) if u), default=-1)
    call, public = None, None
    for k in range(last_user + 1, len(frames)):
        if frames[k].f_globals.get("__name__") == "tripy_lab.frontend.scopes":  # the public-call wrapper
            public = public or frames[k].f_locals.get("name")
        elif frontend[k]:
            call = frames[k]
            break
    if call is None:
        return None
    code = call.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    tensors = []
    for name in names:
        value = call.f_locals.get(name)
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, Tensor) and all(v.trace_tensor is not t for t in tensors):
                tensors.append(v.trace_tensor)
    loc = getattr(exc, "location", None)
    module = next((op.module for op in reversed(made) if op.location is not None and loc is not None
                   and (op.location.file, op.location.line) == (loc.file, loc.line)), "")
    name = public if isinstance(public, str) else code.co_name
    return {"name": name.strip("_") or name, "tensors": tensors,
            "types": [t.type_str() for t in tensors],
            "line": loc.short if loc is not None else "", "module": module,
            "message": getattr(exc, "summary", None) or str(exc)}


def trace(func: Callable, args=(), kwargs=None):
    """Trace ``func(*args, **kwargs)``: InputInfo/DimensionInputInfo become runtime inputs, the rest constants."""
    from tripy_lab.pipeline.stages import Traced

    kwargs = dict(kwargs or {})
    if not callable(func):
        raise_error("Invalid value for parameter: 'func'.", [f"Expected a function or tp.Module, got: {func!r}."])
    start = time.perf_counter()
    sig = _signature(func)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise_error(f"Arguments do not match the signature of '{getattr(func, '__name__', type(func).__name__)}'.",
                    [str(exc), f"Signature: {sig}"])
    inputs: list[TraceTensor] = []
    infos: dict = {}
    for pname, value in bound.arguments.items():
        kind = sig.parameters[pname].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            value = tuple(_flatten(f"{pname}{i}", v, inputs, infos) for i, v in enumerate(value))
        elif kind is inspect.Parameter.VAR_KEYWORD:
            value = {k: _flatten(k, v, inputs, infos) for k, v in value.items()}
        else:
            value = _flatten(pname, value, inputs, infos)
        bound.arguments[pname] = value
    # BoundArguments.args stops at the first parameter left to its default: a later one given by name
    # (kwargs={"b": 10.0} with ``a`` defaulted) goes by keyword, never into ``a``'s position.
    call_args, call_kwargs = bound.args, bound.kwargs
    check_named_dimensions(infos)
    if isinstance(func, Module):
        for key, tensor in func.state_dict().items():
            if isinstance(tensor, Tensor):
                tensor.name = key  # weights show up in the IR by their state_dict key
                producer = tensor.trace_tensor.producer
                if producer is not None and not producer.module:  # made outside a forward: its owner's
                    producer.module = key.rpartition(".")[0]
    name = getattr(func, "__name__", type(func).__name__)
    made: list = []
    optable.recording.append(made)
    try:
        with _compiling(inputs, infos), gc_paused():
            result = func(*call_args, **call_kwargs)
            evaluated = compile_context()[2]
        single = isinstance(result, Tensor)
        outputs = [result] if single else list(result) if isinstance(result, (list, tuple)) else None
        if not outputs or any(not isinstance(o, Tensor) for o in outputs):
            bad = result if outputs is None else next((o for o in outputs if not isinstance(o, Tensor)), result)
            code = (func.forward if isinstance(func, Module) else func).__code__
            raise_error("Function must return 1 or more Tensors.",
                        [f"Got a return value of type: {type(bad).__name__}."], location=return_location(code))
        _check_not_evaluated([o.trace_tensor for o in outputs], evaluated)
    except Exception as exc:
        exc.partial_trace = _partial(made, inputs, infos, name, time.perf_counter() - start)
        if exc.partial_trace is not None:
            try:
                exc.partial_trace.failed_call = failed_call(exc, made)
            except Exception:  # a drawing aid: never mask the user's error
                exc.partial_trace.failed_call = None
        raise
    finally:
        optable.recording.pop()
    tr = Trace([o.trace_tensor for o in outputs], inputs, infos, name=name)
    return Traced(tr, time.perf_counter() - start, single)
