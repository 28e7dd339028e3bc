"""Executable: a built engine plus the checks every call makes on its arguments."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
from tripy_lab.core.errors import raise_error
from tripy_lab.engine.base import CompiledEngine
from tripy_lab.executable.arguments import device_kind, dimension_argument, tensor_argument
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
        ret = Tensor if return_single else tuple[Tensor, ...]
        self.__signature__ = inspect.Signature(params, return_annotation=ret)
        # Precomputed per-argument checks for the hot path of __call__.
        self._flat = self._params == self._arg_names
        self._specs = [self._spec(n, self.input_infos[n]) for n in self._arg_names]
        self._devices = compiled.input_devices()
        self._has_named = any(isinstance(i, InputInfo) and i.dimension_names for i in self.input_infos.values())
        ret_op = program.main().body.block.last_op
        self._out_dtypes = [dtypes.BY_MLIR[str(v.type.element_type)] for v in ret_op.operands]

    @staticmethod
    def _spec(name: str, info) -> tuple:
        if isinstance(info, DimensionInputInfo):
            return name, info, None, (), ()
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
        ret = "Tensor" if self._return_single else "Tuple[Tensor, ...]"
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
            raise_error(f"Missing argument: {', '.join(absent)}",
                        ["Pass containers with the same structure as at compile time."])
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
                producer = value.trace_tensor.producer
                array = producer.params["value"] if producer is not None and producer.kind == "constant" else None
            shape = getattr(array, "shape", None)
            # Hot path (a Tensor or a numpy/jax array): right dtype, rank and bounds need no further work.
            if shape is not None and getattr(array, "dtype", None) == np_dtype and len(shape) == len(mins) and all(
                    lo <= d <= hi for d, lo, hi in zip(shape, mins, maxs)) and (
                    type(array) is np.ndarray or device_kind(array) in self._devices):
                return array
        if np_dtype is None:
            return dimension_argument(name, info, value)
        return tensor_argument(name, info, value, self._devices, self.engine)

    def __call__(self, *args, **kwargs):
        flat_call = self._flat and not kwargs and len(args) == len(self._arg_names)
        values = args if flat_call else self._bind(args, kwargs)
        run_args = [self._checked_arg(spec, value) for spec, value in zip(self._specs, values)]
        if self._has_named:
            self._check_named_dims(dict(zip(self._arg_names, run_args)))
        outputs = self._compiled.run(run_args)
        if self._return_single:
            return Tensor._from_array(outputs[0], self._out_dtypes[0])
        return tuple(Tensor._from_array(o, dt) for o, dt in zip(outputs, self._out_dtypes))

    def synchronize(self) -> None:
        self._compiled.synchronize()

    def engine_args(self, *args, **kwargs) -> list:
        """The engine's arguments for this call (argument order, checked as ``__call__`` checks them)."""
        values = self._bind(args, kwargs)
        return [self._checked_arg(spec, value) for spec, value in zip(self._specs, values)]

    def export_onnx(self, path: str) -> str:
        """Write the program as an ONNX model (one graph for the whole profile, checked by onnx.checker).

        The same graph the ``onnxruntime`` engine runs; feed it to ``trtexec_command()`` or Netron.
        """
        from tripy_lab.engine.onnx_export import export_onnx

        return export_onnx(self._program, path, getattr(self._compiled, "lowering", None))

    def trtexec_command(self, onnx_path: str = "model.onnx") -> str:
        """``trtexec --onnx=... --minShapes/--optShapes/--maxShapes`` for this Executable's InputInfos."""
        from tripy_lab.engine.onnx_export import trtexec_command

        return trtexec_command(self._program, onnx_path)

    def polygraphy_command(self, onnx_path: str = "model.onnx") -> str:
        """``polygraphy run ... --trt --onnxrt`` with the same min/opt/max shapes."""
        from tripy_lab.engine.onnx_export import polygraphy_command

        return polygraphy_command(self._program, onnx_path)

    def save(self, path: str) -> None:
        """Write the program and metadata as JSON; ``Executable.load(path)`` rebuilds it."""
        from tripy_lab.executable import serialize

        serialize.save(self, path)

    @staticmethod
    def load(path: str, engine: str | None = None) -> Executable:
        from tripy_lab.executable import serialize

        return serialize.load(path, engine)
