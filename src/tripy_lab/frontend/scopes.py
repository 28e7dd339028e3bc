"""Scopes recorded at trace time: which module's forward and which public call made each op.

``public(fn, name)`` wraps a public op (``tp.softmax``, ``Tensor.__getitem__``...): the outermost one running
names the CallScope of every op made until it returns (softmax's max/sub/exp/sum/div, a slice's index
arithmetic). ``call_module`` runs a module's forward under its dotted state_dict path, found in the tree of the
root module (the module called with none running, whose path is ""). tripy_lab's own leaf modules (Linear,
LayerNorm, Conv...) are public calls too: one ``Linear`` call is one CallScope.
"""

from __future__ import annotations

import contextlib
import functools

from tripy_lab.trace.scopes import STATE


def public(fn, name: str):
    """``fn`` recording its ops under one CallScope ``name`` unless a public call is already running."""

    @functools.wraps(fn)
    def scoped(*args, **kwargs):
        state = STATE
        if state.call_name is not None:  # inside another public call: that one names the ops
            return fn(*args, **kwargs)
        state.call_name = name
        try:
            return fn(*args, **kwargs)
        finally:
            state.call_name = state.call = None

    return scoped


def public_property(prop: property, name: str) -> property:
    return property(public(prop.fget, name), prop.fset, prop.fdel, prop.__doc__)


def call_module(module, forward, args, kwargs):
    """``forward(*args, **kwargs)`` with ``module``'s path as the scope of the ops it makes."""
    state = STATE
    outer_paths, outer = state.paths, state.module
    if outer_paths is None:  # the root: its path is "", its children's paths come from its tree
        paths, path = module_paths(module), ""
    else:
        paths, path = outer_paths, _choose(outer_paths.get(id(module)), outer)
    kind = type(module)
    leaf = _LEAF.get(kind)
    if leaf is None:
        leaf = _LEAF[kind] = _is_leaf(kind)
    opens = leaf and state.call_name is None
    state.paths, state.module = paths, path
    if opens:
        state.call_name, state.call = kind.__name__, None
    try:
        return forward(*args, **kwargs)
    finally:
        state.paths, state.module = outer_paths, outer
        if opens:
            state.call_name = state.call = None


@contextlib.contextmanager
def recording(module: str, call_name: str):
    """Ops made inside are recorded under ``module`` and one CallScope ``call_name`` (a dummy parameter's
    ops: the parameter's module, one call per parameter)."""
    state = STATE
    saved = state.module, state.call_name, state.call
    state.module, state.call_name, state.call = module, call_name, None
    try:
        yield
    finally:
        state.module, state.call_name, state.call = saved


def scoped_call(call):
    """A Module subclass's own ``__call__`` (programs for older Tripy override it instead of ``forward``)."""

    @functools.wraps(call)
    def scoped(self, *args, **kwargs):
        return call_module(self, functools.partial(call, self), args, kwargs)

    return scoped


def module_paths(root) -> dict[int, list[str]]:
    """id(module) -> its dotted paths under ``root``, in state_dict order (a shared module has several)."""
    out: dict[int, list[str]] = {}
    chain: list[int] = [id(root)]

    def visit(module, prefix: str) -> None:
        for name, child in module.named_children():
            if id(child) in chain:  # a module that refers back to an ancestor: not a child
                continue
            path = f"{prefix}.{name}" if prefix else name
            out.setdefault(id(child), []).append(path)
            chain.append(id(child))
            visit(child, path)
            chain.pop()

    visit(root, "")
    return out


def _choose(candidates: list[str] | None, outer: str) -> str:
    """The path of a module called from the module at ``outer``: the one below ``outer`` when it has several;
    a module outside the root's tree (not in any state_dict) records its ops under ``outer``."""
    if not candidates:
        return outer
    if len(candidates) > 1 and outer:
        prefix = outer + "."
        for path in candidates:
            if path.startswith(prefix):
                return path
    return candidates[0]


_LEAF: dict[type, bool] = {}


def _is_leaf(kind: type) -> bool:
    """tripy_lab's own modules with a forward of their own ops (not Sequential, which calls its children); the
    test is ``modules.py``'s (``set_leaf_test``, called when it is imported: Module lives there)."""
    return _leaf_test(kind)


def _no_leaf(kind: type) -> bool:
    return False


_leaf_test = _no_leaf


def set_leaf_test(test) -> None:
    global _leaf_test
    _leaf_test = test
    _LEAF.clear()
