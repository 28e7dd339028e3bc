"""Executable: a built engine plus the checks every call makes on its arguments."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import Any, Tuple  # noqa: UP035 - nvtripy annotates Tuple[Tensor, ...]

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import raise_error
from tripy_lab.engine.base import CompiledEngine
from tripy_lab.executable.arguments import always_readable, device_kind, dimension_argument, tensor_argument
from tripy_lab.executable.stream import Stream, default_stream
from tripy_lab.frontend.tensor import Tensor


def _top_name(leaf: str) -> str:
    return leaf.split("[", 1)[0].split(".", 1)[0]


def _flatten(name: str, value, out: dict) -> None:
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _flatten(f"{name}[{i}]", v, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _flatten(f"{name}.{k}", v, out)
    else:
        out[name] = value


def _with_values(call, values, args):
    """``call(args)`` with the arguments at the given positions replaced (a remembered DimensionSize's checked
    int32 array for the user's int)."""
    args = list(args)
    for i, v in values:
        args[i] = v
    return call(args)


def _held_array(t: Tensor):
    """The array an evaluated Tensor holds, or None. An Executable's output is read without making the trace
    tensor it makes on first use (a chain of calls would pay for it every call)."""
    d = t.__dict__
    if "_array" in d and "_tt" not in d:
        return d["_array"]
    producer = t.trace_tensor.producer
    return producer.params["value"] if producer is not None and producer.kind == "constant" else None


class Executable:
    """A compiled function. Call it with Tensors (or arrays) for the runtime parameters only."""

    def __init__(self, compiled: CompiledEngine, program, return_single: bool, stages: dict | None = None,
                 optimization_level: int = 3):
        self._compiled = compiled
        self.optimization_level = optimization_level
        self._program = program
        self._arg_names: list[str] = list(program.arg_names)
        self.input_infos: dict[str, InputInfo | DimensionInputInfo] = dict(program.input_infos)
        self._return_single = return_single
        self.stages: dict[str, Any] = stages or {}
        self.stream: Stream = default_stream()
        # Containers of InputInfos were flattened to leaves "name[i]" / "name.key"; callers pass the container.
        self._params = list(dict.fromkeys(_top_name(n) for n in self._arg_names))
        params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Tensor)
                  for n in self._params]
        ret_op = program.main().body.block.last_op
        self._out_dtypes = [dtypes.BY_MLIR[str(v.type.element_type)] for v in ret_op.operands]
        # nvtripy's annotation: Tensor for one output, Tuple[Tensor, Tensor] (one per output) for a sequence
        ret = Tensor if return_single else Tuple[tuple([Tensor] * len(self._out_dtypes))]  # noqa: UP006
        self.__signature__ = inspect.Signature(params, return_annotation=ret)
        # Precomputed per-argument checks for the hot path of __call__.
        self._flat = self._params == self._arg_names
        self._specs = [self._spec(n, self.input_infos[n]) for n in self._arg_names]
        self._devices = compiled.input_devices()
        self._has_named = any(isinstance(i, InputInfo) and i.dimension_names for i in self.input_infos.values())
        self._out0 = self._out_dtypes[0] if self._out_dtypes else None
        # Signatures already checked: (type, shape, dtype) of each array argument, the value of each plain-int
        # DimensionSize -> the engine's call for them. Only for array types whose every instance is in memory the
        # engine reads; see ``_signature_key``.
        self._fast: dict[tuple, Any] = {}
        self._fast_types: set[type] = set()
        self._dim_pos = [i for i, spec in enumerate(self._specs) if spec[2] is None]
        self._type_readable: dict[type, bool] = {}
        self._probes: Any = None  # the engine's arrays vouching for its array class (asked when first needed)

    @staticmethod
    def _spec(name: str, info) -> tuple:
        if isinstance(info, DimensionInputInfo):
            # the plain-int shortcut of _checked_arg: inside the bounds and int32 (bounds may be wider)
            return name, info, None, info.value_bounds.min[0], min(info.value_bounds.max[0], 2**31 - 1)
        b = info.shape_bounds
        return name, info, dtypes.to_numpy(info.dtype), b.min, b.max

    @property
    def engine(self) -> str:
        return self._compiled.report.engine

    @property
    def layers(self):
        return self._compiled.layers

    def __str__(self) -> str:
        args = ", ".join(f"{n}: Tensor" for n in self._params)
        ret = "Tensor" if self._return_single else f"Tuple[{', '.join(['Tensor'] * len(self._out_dtypes))}]"
        return f"Executable({args}) -> {ret}"

    __repr__ = __str__

    def _bind(self, args: Sequence, kwargs: dict) -> list:
        if len(args) > len(self._params):
            raise_error("Incorrect number of arguments.",
                        [f"Expected {len(self._params)} ({', '.join(self._params)}), but got {len(args)}."])
        values = dict(zip(self._params, args))
        extra = [k for k in kwargs if k not in self._params or k in values]
        if extra:
            raise_error(f"Extra keyword arguments: {extra}",
                        [f"Parameters are: {', '.join(self._params)}."])
        values.update(kwargs)
        missing = [n for n in self._params if n not in values]
        if missing:
            raise_error(f"Missing argument: {', '.join(missing)}", [f"Signature: {self}"])
        leaves: dict[str, Any] = {}
        for name in self._params:
            _flatten(name, values[name], leaves)
        absent = [n for n in self._arg_names if n not in leaves]
        if absent:
            raise_error(f"Missing runtime tensor for input `{absent[0]}`.",  # nvtripy's words, one input at a time
                        [f"Missing: {', '.join(absent)}. Pass containers with the same structure as at compile time.",
                         f"Expected inputs: {list(self._arg_names)}"])
        return [leaves[n] for n in self._arg_names]

    def _check_named_dims(self, arrays: dict[str, Any]) -> None:
        seen: dict[str, tuple[str, int, int]] = {}
        for name, info in self.input_infos.items():
            if not isinstance(info, InputInfo):
                continue
            for i, dim_name in info.dimension_names.items():
                size = int(arrays[name].shape[i])
                if dim_name in seen and seen[dim_name][2] != size:
                    other, j, other_size = seen[dim_name]
                    raise_error(f"Mismatched sizes for named dimension '{dim_name}'.",
                                [f"Parameter {other} dim {j} has size {other_size} but parameter {name} dim {i} "
                                 f"has size {size}; all dims named '{dim_name}' must be equal."])
                seen.setdefault(dim_name, (name, i, size))

    def _checked_arg(self, spec: tuple, value):
        """The array for one argument, after checking dtype, rank and each dim (or value) against its bounds."""
        name, info, np_dtype, mins, maxs = spec
        if np_dtype is not None:
            array = value
            if isinstance(value, Tensor):
                array = _held_array(value)
            shape = getattr(array, "shape", None)
            # Hot path (a Tensor or a numpy/jax array): right dtype, rank and bounds need no further work.
            if shape is not None and getattr(array, "dtype", None) == np_dtype and len(shape) == len(mins) and all(
                    lo <= d <= hi for d, lo, hi in zip(shape, mins, maxs)) and (
                    type(array) is np.ndarray or (device_kind(array) in self._devices
                                                    and not isinstance(array, np.ma.MaskedArray))):
                return array
        if np_dtype is None:
            if type(value) is int and mins <= value <= maxs:  # a plain int inside the (int32) bounds is exact
                return np.asarray(value, dtype=np.int32)
            return dimension_argument(name, info, value)
        return tensor_argument(name, info, value, self._devices, self.engine)

    def __call__(self, *args, **kwargs):
        if kwargs:  # keywords only, one per parameter (the lab's calls): the same values in parameter order
            if args or not self._flat or len(kwargs) != len(self._params):
                return self._call_checked(args, kwargs)
            try:
                args = tuple([kwargs[n] for n in self._params])
            except KeyError:
                return self._call_checked((), kwargs)
        fast = self._fast
        if not fast:
            return self._call_checked(args, {})
        if len(args) == 1:  # the common case, without the list comprehension's frame
            a = args[0]
            cls = type(a)
            call = fast.get(((cls, a.shape, a.dtype),)) if cls in self._fast_types else (
                fast.get((a,)) if cls is int else None)
        else:
            call = fast.get(self._fast_key(args))
        if call is None:
            return self._call_tensors(args)
        try:
            outputs = call(args)
        except Exception:  # e.g. a deleted jax array: the full checks say what is wrong, or it raises again
            outputs = None
        if outputs is None:
            return self._call_checked(args, {})
        return self._wrap(outputs)

    def _fast_key(self, args) -> tuple:
        """The remembered-signature key of these arguments (``_signature_key`` makes the keys stored)."""
        types = self._fast_types
        return tuple([(type(a), a.shape, a.dtype) if type(a) in types else a if type(a) is int else None
                      for a in args])

    def _wrap(self, outputs):
        if self._return_single:
            return Tensor._from_array(outputs[0], self._out0)
        return tuple([Tensor._from_array(o, dt) for o, dt in zip(outputs, self._out_dtypes)])

    def _call_tensors(self, args):
        """Evaluated Tensors (e.g. another call's outputs) are checked as the arrays they hold: a signature of those
        arrays that was checked before runs on them."""
        if not any(isinstance(a, Tensor) for a in args):
            return self._call_checked(args, {})
        arrays = tuple([_held_array(a) if isinstance(a, Tensor) else a for a in args])
        call = self._fast.get(self._fast_key(arrays))
        try:
            outputs = call(arrays) if call is not None else None
        except Exception:
            outputs = None
        return self._call_checked(args, {}) if outputs is None else self._wrap(outputs)

    def _call_checked(self, args, kwargs):
        """A call with every argument checked; a signature that can be trusted from its key is remembered."""
        flat_call = self._flat and not kwargs and len(args) == len(self._arg_names)
        values = args if flat_call else self._bind(args, kwargs)
        run_args = [self._checked_arg(spec, value) for spec, value in zip(self._specs, values)]
        if self._has_named:
            self._check_named_dims(dict(zip(self._arg_names, run_args)))
        outputs = self._compiled.run(run_args)
        key = self._signature_key(values, run_args) if self._flat else None
        if key is not None:  # only once the engine ran it: a signature that fails is never trusted
            caller = getattr(self._compiled, "caller_for", None)
            call = (caller(run_args) if caller is not None else None) or self._run_engine
            if self._dim_pos:  # the engine gets the checked int32 values, as on this call
                call = functools.partial(_with_values, call, [(i, run_args[i]) for i in self._dim_pos])
            self._fast[key] = call
            self._fast_types.update(k[0] for k in key if type(k) is tuple)
        return self._wrap(outputs)

    def _run_engine(self, args):
        return self._compiled.run(list(args))

    def _device_probes(self) -> tuple:
        probe = getattr(self._compiled, "device_probes", None)
        try:
            return tuple(probe() or ()) if probe is not None else ()
        except Exception:  # the engine cannot say: every array's memory is asked per call
            return ()

    def _signature_key(self, values, run_args) -> tuple | None:
        """The key under which this call's checks may be skipped next time, or None.

        Every check depends only on the key when each argument is the very array that was checked (or held by an
        evaluated Tensor, which is checked as its array; never a converted value), of a type whose instances all
        live in memory the engine reads (``arguments.always_readable``): dtype (compared exactly), rank, bounds and
        named dims follow from (dtype, shape), the device from the type. So a remembered signature never admits a
        value that the checks would refuse. A DimensionSize is in the key by its value, and only as a plain ``int``
        (an ``np.int64``, a 0-d array or a DimensionSize object are checked every call)."""
        key: list = []
        for value, checked, spec in zip(values, run_args, self._specs):
            if spec[2] is None:  # DimensionSize
                if type(value) is not int:
                    return None
                key.append(value)
                continue
            if isinstance(value, Tensor):
                value = _held_array(value)
            cls = type(value)
            if checked is not value:
                return None
            readable = self._type_readable.get(cls)
            if readable is None:
                if self._probes is None and cls is not np.ndarray:
                    self._probes = self._device_probes()
                readable = self._type_readable[cls] = always_readable(cls, self._devices, self._probes)
            if not readable:
                return None
            key.append((cls, value.shape, value.dtype))
        return tuple(key)

    def synchronize(self) -> None:
        self._compiled.synchronize()

    def engine_args(self, *args, **kwargs) -> list:
        """The engine's arguments for this call (argument order, checked as ``__call__`` checks them)."""
        values = self._bind(args, kwargs)
        return [self._checked_arg(spec, value) for spec, value in zip(self._specs, values)]

    def warm(self, shapes="ladder", *, background: bool = True, limit: int = 32, on_done=None):
        """Compile, ahead of their first call, shapes inside the profile that calls will meet: ``"ladder"`` (each
        dynamic dim at min, the powers of two between, opt and max, the others at opt; then all of them together)
        or a list of ``{argument: shape}`` dicts, then call each once through this Executable with numpy and with
        device arrays, so a first call there runs as the steady ones do. Runs on a low-priority background thread
        (``background=False``: here, now) and returns a ``WarmUp`` (``.wait()``, ``.cancel()``, ``.built``,
        ``.skipped``); ``on_done(warm_up)`` is called on its thread at the end. Engines that build every shape at
        once (onnxruntime, reference) have nothing to do."""
        from tripy_lab.executable.warm import warm

        return warm(self, shapes, background=background, limit=limit, on_done=on_done)

    def export_onnx(self, path: str) -> str:
        """Write the program as an ONNX model (one graph for the whole profile, checked by onnx.checker).

        The same graph the ``onnxruntime`` engine runs; feed it to ``trtexec_command()`` or Netron.
        """
        from tripy_lab.engine.onnx.export import export_onnx

        return export_onnx(self._program, path, getattr(self._compiled, "lowering", None))

    def trtexec_command(self, onnx_path: str = "model.onnx") -> str:
        """``trtexec --onnx=... --minShapes/--optShapes/--maxShapes`` for this Executable's InputInfos."""
        from tripy_lab.engine.onnx.export import trtexec_command

        return trtexec_command(self._program, onnx_path)

    def polygraphy_command(self, onnx_path: str = "model.onnx") -> str:
        """``polygraphy run ... --trt --onnxrt`` with the same min/opt/max shapes."""
        from tripy_lab.engine.onnx.export import polygraphy_command

        return polygraphy_command(self._program, onnx_path)

    def save(self, path: str) -> None:
        """Write the program and metadata as JSON; ``Executable.load(path)`` rebuilds it."""
        from tripy_lab.executable import serialize

        serialize.save(self, path)

    @staticmethod
    def load(path: str, engine: str | None = None) -> Executable:
        from tripy_lab.executable import serialize

        compiled, program, meta = serialize.load(path, engine)
        return Executable(compiled, program, meta["return_single"], optimization_level=meta["optimization_level"])
