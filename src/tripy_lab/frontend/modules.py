"""tp.Module and the layers: Linear, LayerNorm, Embedding, Sequential."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterator, Sequence

from tripy_lab.core import dtypes as D
from tripy_lab.core.errors import raise_error
from tripy_lab.frontend import ops_init, ops_shape
from tripy_lab.frontend.build import make1
from tripy_lab.frontend.checks import arity_error, check_ints, check_sequence
from tripy_lab.frontend.scopes import call_module, recording, scoped_call, set_leaf_test
from tripy_lab.frontend.tensor import Tensor


def module_dataclass(cls):
    """A public layer as a dataclass, as nvtripy's are (``dataclasses.fields(tp.Linear)``): its annotated fields
    are described; ``__init__``, printing, equality (identity) and attribute checks stay the Module's."""
    return dataclasses.dataclass(init=False, repr=False, eq=False)(cls)


class DefaultParameter:
    """A required parameter not set yet: has a shape and dtype, is not a Tensor."""

    optional = False

    def __init__(self, shape, dtype):
        self.shape = None if shape is None else tuple(shape)
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"{type(self).__name__}(shape={self.shape}, dtype={self.dtype})"


class OptionalParameter(DefaultParameter):
    optional = True


_PARAM_TYPES = (Tensor, DefaultParameter)


class Module:
    """Base class: parameters and child modules are registered by attribute assignment."""

    def __init__(self):
        # Programs written for older Tripy override __call__ instead of forward: their signature is __call__'s.
        overrides_call = type(self).__call__ is not Module.__call__
        self.__signature__ = inspect.signature(self.__call__ if overrides_call else self.forward)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "__call__" in vars(cls):  # an older program's own __call__ records its ops under the module's path
            cls.__call__ = scoped_call(vars(cls)["__call__"])

    def __setattr__(self, name: str, value) -> None:
        current = self.__dict__.get(name)
        if isinstance(current, _PARAM_TYPES) and not isinstance(value, (Tensor, DefaultParameter)):
            raise_error("Unrecognized type for module parameter.",
                        [f"For parameter: {name}, expected a Tensor but got: {type(value).__name__}."])
        if isinstance(current, _PARAM_TYPES) and isinstance(value, Tensor):
            _check_compatible(name, current, value)
        object.__setattr__(self, name, value)

    def _items(self) -> Iterator[tuple[str, object]]:
        for name, value in vars(self).items():
            if name.startswith("_") or name == "__signature__":
                continue
            if isinstance(value, (list, tuple)):
                yield from ((f"{name}.{i}", v) for i, v in enumerate(value))
            elif isinstance(value, dict):
                yield from ((f"{name}.{k}", v) for k, v in value.items())
            else:
                yield name, value

    def named_parameters(self) -> Iterator[tuple[str, Tensor | DefaultParameter]]:
        """Direct parameters (Tensors and not-yet-set placeholders)."""
        return ((n, v) for n, v in self._items() if isinstance(v, _PARAM_TYPES))

    def named_children(self) -> Iterator[tuple[str, Module]]:
        return ((n, v) for n, v in self._items() if isinstance(v, Module))

    def _walk(self) -> Iterator[tuple[str, object, Module, str]]:
        """(key, parameter, owning module, its name there) for every parameter, in state_dict order: a module's own
        parameters, then each child's. Iterative, so a module tree of any depth works (no RecursionError); a module
        that contains itself is visited once on each path."""
        stack: list[tuple[str, Module, frozenset]] = [("", self, frozenset())]
        while stack:
            prefix, module, ancestors = stack.pop()
            ancestors = ancestors | {id(module)}
            children = []
            for name, value in module._items():
                if isinstance(value, _PARAM_TYPES):
                    yield prefix + name, value, module, name
                elif isinstance(value, Module) and id(value) not in ancestors:
                    children.append((f"{prefix}{name}.", value, ancestors))
            stack.extend(reversed(children))

    def state_dict(self) -> dict[str, Tensor | DefaultParameter]:
        """Flat map of every parameter, with dotted keys into children."""
        return {key: value for key, value, _, _ in self._walk()}

    def _set_local(self, name: str, value: Tensor) -> None:
        """Set this module's parameter ``name`` as ``_items`` names it: an attribute (its name may hold dots, e.g.
        set with ``setattr(m, "a.b", ...)``) or an entry ``attr.i`` / ``attr.key`` of a list or dict attribute."""
        if name in vars(self):
            setattr(self, name, value)
            return
        for i, ch in enumerate(name):
            container = vars(self).get(name[:i]) if ch == "." else None
            if isinstance(container, (list, dict)):
                item_key = int(name[i + 1:]) if isinstance(container, list) else name[i + 1:]
                _check_compatible(name, container[item_key], value)
                container[item_key] = value
                return
        raise_error(f"Cannot set parameter: '{name}' of module {type(self).__name__}.",
                    ["It is neither an attribute nor an entry of a list or dict attribute."])

    def _set_by_key(self, key: str, value: Tensor) -> None:
        for k, _, owner, name in self._walk():
            if k == key:
                owner._set_local(name, value)
                return
        raise_error(f"No parameter: '{key}' in module {type(self).__name__}.", [f"Known: {sorted(self.state_dict())}"])

    def load_state_dict(self, state_dict: dict, strict: bool = True):
        """Assign tensors by key; returns (missing_keys, unexpected_keys)."""
        wrong = {k: type(v).__name__ for k, v in dict(state_dict).items() if not isinstance(v, Tensor)}
        if wrong or not isinstance(state_dict, dict):
            got = f"Dict[str, {' | '.join(sorted(set(wrong.values())))}]" if wrong else type(state_dict).__name__
            raise_error("Could not find an implementation for function: 'Module.load_state_dict'.",
                        [f"For parameter: 'state_dict', expected an instance of type: 'Dict[str, Tensor]' "
                         f"but got argument of type: '{got}'.", f"Not tensors: {wrong}"])
        slots = {key: (value, owner, name) for key, value, owner, name in self._walk()}
        missing = {k for k, (v, _, _) in slots.items() if k not in state_dict and not getattr(v, "optional", False)}
        unexpected = {k for k in state_dict if k not in slots}
        if strict and (missing or unexpected):
            raise_error("state_dict is incompatible.",
                        ([f"Missing keys: {sorted(missing)}"] if missing else [])
                        + ([f"Unexpected keys: {sorted(unexpected)}", f"Note: Expected keys were: {sorted(slots)}"]
                           if unexpected else []))
        for key, value in state_dict.items():
            if key in slots:
                slots[key][1]._set_local(slots[key][2], value)
        return missing, unexpected

    def initialize_dummy_parameters(self) -> None:
        for key, value in self.state_dict().items():
            # Required placeholders only: a dummy input_scale would quietly clamp a Linear's inputs.
            if type(value) is DefaultParameter:
                with recording(key.rpartition(".")[0], "initialize_dummy_parameters"):
                    self._set_by_key(key, ops_init.ones(value.shape or (), value.dtype))

    def _may_have_unset(self) -> bool:
        """Whether a required placeholder (a DefaultParameter, not an Optional one) is anywhere in the tree, over
        the attributes ``_items`` reads, without building state_dict's keys (every module call asks; state_dict
        names them when there is one)."""
        stack, seen = [self], set()
        while stack:
            module = stack.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            for _, value in module._items():
                if type(value) is DefaultParameter:
                    return True
                if isinstance(value, Module):
                    stack.append(value)
        return False

    def __call__(self, *args, **kwargs):
        unset = self._may_have_unset() and [k for k, v in self.state_dict().items() if type(v) is DefaultParameter]
        if unset:
            raise_error("Some parameters were never set in the module. Please assign tensors for these parameters.",
                        [f"Note: Not set parameters were: {', '.join(unset)}"])
        try:
            return call_module(self, self.forward, args, kwargs)
        except TypeError:  # forward cannot take these arguments: a TripyException at the user's line
            error = arity_error(f"{type(self).__name__}.forward", inspect.signature(self.forward), args, kwargs)
            if error is None:
                raise
            raise error from None

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def __str__(self) -> str:
        # An explicit stack, not recursion: a tree of any depth prints (children in order, nested by 4 spaces).
        lines: list[str] = []
        open_ids: set[int] = set()  # the modules on the current path: one containing itself prints once
        stack: list = [(self, "", "")]
        while stack:
            item = stack.pop()
            if isinstance(item[0], str):  # a module's closing line
                lines.append(item[0])
                open_ids.discard(item[1])
                continue
            module, pad, label = item
            if id(module) in open_ids:
                lines.append(f"{pad}{label}{type(module).__name__}(...),")
                continue
            open_ids.add(id(module))
            lines.append(f"{pad}{label}{type(module).__name__}(")
            for name, p in module.named_parameters():
                shape = p.shape if isinstance(p, DefaultParameter) else p.trace_tensor.shape
                lines.append(f"{pad}    {name}: Parameter = (shape={shape}, dtype={p.dtype}),")
            stack.append((f"{pad})," if label else ")", id(module)))
            for name, child in reversed(list(module.named_children())):
                stack.append((child, pad + "    ", f"{name}: Module = "))
        return "\n".join(lines)


def _check_compatible(name: str, old, new: Tensor) -> None:
    if not isinstance(new, Tensor):
        raise_error("Unrecognized type for module parameter.", [f"For parameter: {name}, got: {type(new).__name__}."])
    old_shape = old.shape if isinstance(old, DefaultParameter) else old.trace_tensor.shape
    new_shape = new.trace_tensor.shape
    shape_differs = old_shape is not None and tuple(old_shape) != tuple(new_shape)  # None: any shape (scales)
    if shape_differs or old.dtype is not new.dtype:
        raise_error(f"For parameter: {name}, new parameter is not compatible with the existing parameter.",
                    ([f"New parameter shape: {tuple(new_shape)} is not compatible with current shape: "
                      f"{tuple(old_shape)}"] if shape_differs else [])
                    + ([f"New parameter dtype: {new.dtype} is not compatible with current dtype: {old.dtype}"]
                       if old.dtype is not new.dtype else [])
                    + [f"Existing: shape={tuple(old_shape)}, dtype={old.dtype}; new: shape={tuple(new_shape)}, "
                     f"dtype={new.dtype}."])


@module_dataclass
class Linear(Module):
    """y = x @ weight.T + bias, weight (out_features, in_features). With ``quant_dtype`` the weight (and the
    input, once ``input_scale`` is set) go through quantize -> dequantize, as in nvtripy."""

    dtype: D.dtype
    weight: Tensor
    bias: Tensor | None
    quant_dtype: D.dtype | None
    weight_scale: Tensor | None
    input_scale: Tensor | None
    weight_quant_dim: int | None

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=D.float32,
                 quant_dtype=None, weight_quant_dim: int | None = None):
        super().__init__()
        from tripy_lab.frontend.ops_quant import QUANT_DTYPES

        check_ints("Linear", in_features=in_features, out_features=out_features)

        if quant_dtype is not None and quant_dtype not in QUANT_DTYPES:
            raise_error("Invalid value for parameter: 'quant_dtype' of 'Linear'.",
                        [f"Expected one of int4, int8, float8 or None, but got: {quant_dtype!r}."])
        if weight_quant_dim is not None and (isinstance(weight_quant_dim, bool) or weight_quant_dim not in (0, 1)):
            raise_error("Invalid value for parameter: 'weight_quant_dim' of 'Linear'.",
                        [f"Expected 0, 1 or None (a dim of the 2-D weight), but got: {weight_quant_dim!r}."])
        self.dtype = dtype
        self.weight = DefaultParameter((out_features, in_features), dtype)
        self.bias = DefaultParameter((out_features,), dtype) if bias else None
        self.quant_dtype = quant_dtype
        self.weight_quant_dim = weight_quant_dim
        self.weight_scale = None
        self.input_scale = None
        if quant_dtype is not None:
            # Per-channel: one scale per row/column; otherwise per-tensor (scalar) or block-wise (2-D): any shape.
            scale_shape = None if weight_quant_dim is None else (self.weight.shape[weight_quant_dim],)
            self.weight_scale = DefaultParameter(scale_shape, dtype)
            self.input_scale = OptionalParameter((), dtype)

    def __setattr__(self, name: str, value) -> None:
        if name in ("dtype", "quant_dtype") and name in self.__dict__:
            raise_error(f"Field: '{name}' of class: '{type(self).__name__}' is immutable!")
        super().__setattr__(name, value)

    def forward(self, x):
        from tripy_lab.frontend import ops_quant

        weight = self.weight
        if self.quant_dtype is not None:
            if isinstance(self.input_scale, Tensor):
                if self.weight_quant_dim == 1:
                    raise_error("Unsupported quantization parameters for Linear module.",
                                ["weight_quant_dim cannot be 1 when input_scale is provided.",
                                 f"input_scale={self.input_scale.trace_tensor.name}, "
                                 f"weight_quant_dim={self.weight_quant_dim}"])
                q_x = ops_quant.quantize(x, self.input_scale, self.quant_dtype)
                x = ops_quant.dequantize(q_x, self.input_scale, self.dtype)
            q_w = ops_quant.quantize(weight, self.weight_scale, self.quant_dtype, self.weight_quant_dim)
            weight = ops_quant.dequantize(q_w, self.weight_scale, self.dtype, self.weight_quant_dim)
        out = x @ ops_shape.transpose(weight, 0, 1)
        # The bias as (1, out_features), as nvtripy adds it: a 1-D input gives (1, out_features).
        return out + ops_shape.unsqueeze(self.bias, 0) if self.bias is not None else out


@module_dataclass
class LayerNorm(Module):
    """Normalise over the last len(normalized_shape) dims, then scale and shift."""

    dtype: D.dtype
    normalized_shape: Sequence[int]
    weight: Tensor
    bias: Tensor
    eps: float

    def __init__(self, normalized_shape, dtype=D.float32, eps: float = 1e-5):
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else normalized_shape
        shape = tuple(check_sequence("LayerNorm", "normalized_shape", shape))
        self.normalized_shape = shape
        self.dtype = dtype
        self.eps = eps
        self.weight = DefaultParameter(shape, dtype)
        self.bias = DefaultParameter(shape, dtype)

    def forward(self, x):
        if x.rank < 2:
            raise_error(f"Input must have a rank of at least 2, but got input of rank: {x.rank}",
                        ["Layer: LayerNorm (it normalizes the last dims of a batch)."])
        n = len(self.normalized_shape)
        start = max(x.rank - n, 0)
        for i, (d, k) in enumerate(zip(x.trace_tensor.shape[start:], self.normalized_shape[n - (x.rank - start):])):
            if d is not None and d != k:  # else a broadcasting error inside the engine, or a wrong broadcast
                raise_error(f"The normalization scale is not broadcast-compatible with the input at dimension "
                            f"{start + i}", [f"normalized_shape={tuple(self.normalized_shape)}, "
                                             f"input shape={tuple(x.trace_tensor.shape)}."])
        scale = ops_shape.prepend_ones(self.weight, x.rank - n)
        bias = ops_shape.prepend_ones(self.bias, x.rank - n)
        axes = tuple(range(x.rank - n, x.rank))
        return make1("layer_norm", [x, scale, bias], {"dims": axes, "eps": float(self.eps)})


@module_dataclass
class Embedding(Module):
    """Look up rows of weight (num_embeddings, embedding_dim)."""

    dtype: D.dtype
    weight: Tensor

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype=D.float32):
        super().__init__()
        check_ints("Embedding", num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        self.dtype = dtype
        self.weight = DefaultParameter((num_embeddings, embedding_dim), dtype)

    def forward(self, x):
        return ops_shape.gather(self.weight, 0, x)


@module_dataclass
class Sequential(Module):
    """Calls each module in order with one input."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            self.modules = dict(modules[0])
        else:
            self.modules = {str(i): m for i, m in enumerate(modules)}

    def _items(self):
        yield from self.modules.items()

    def __len__(self) -> int:
        return len(self.modules)

    def __iter__(self):
        return iter(self.modules.values())

    def __getitem__(self, key):
        k = str(key) if isinstance(key, int) else key
        if k not in self.modules:
            raise_error(f"Key: '{key}' not found in modules.")
        return self.modules[k]

    def forward(self, x):
        for m in self.modules.values():
            x = m(x)
        return x


def _is_leaf(kind: type) -> bool:
    """tripy_lab's own modules with a forward of their own ops (not Sequential, which calls its children)."""
    forward = kind.forward
    return (getattr(forward, "__module__", "").startswith("tripy_lab.") and kind.__call__ is Module.__call__
            and forward is not Sequential.forward and forward is not Module.forward)


set_leaf_test(_is_leaf)  # frontend/scopes.py asks it (scopes cannot import this module: modules imports scopes)
