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
from sys import _getframe

from tripy_lab.core.source import user_location
from tripy_lab.trace.scopes import peek, state


def public(fn, name: str, arity: int | None = None):
    """``fn`` recording its ops under one CallScope ``name`` unless a public call is already running.
    ``arity`` 1 or 2: ``fn`` takes exactly that many positional arguments (operators: the most common calls,
    whose wrapper then builds no ``*args``/``**kwargs``)."""
    if arity == 2:
        def scoped(a, b):
            scopes = peek(None) or state()
            if scopes.call_name is not None:  # inside another public call: that one names the ops
                return fn(a, b)
            scopes.call_name, scopes.caller = name, _getframe(1)
            try:
                return fn(a, b)
            finally:
                scopes.call_name = scopes.call = scopes.caller = None
    elif arity == 1:
        def scoped(a):
            scopes = peek(None) or state()
            if scopes.call_name is not None:
                return fn(a)
            scopes.call_name, scopes.caller = name, _getframe(1)
            try:
                return fn(a)
            finally:
                scopes.call_name = scopes.call = scopes.caller = None
    else:
        def scoped(*args, **kwargs):
            scopes = peek(None) or state()
            if scopes.call_name is not None:
                return fn(*args, **kwargs)
            scopes.call_name, scopes.caller = name, _getframe(1)
            try:
                return fn(*args, **kwargs)
            finally:
                scopes.call_name = scopes.call = scopes.caller = None

    return functools.wraps(fn)(scoped)


def op_location():
    """The user's line for an op being made: inside a public call whose first op is made, that call's line (its
    CallScope's location: the user's frame waits at the call for all of its ops); for a call's first op, the stack
    walk of ``user_location`` from the frame that made the call (the frames below it are tripy_lab's: ~8 frames
    fewer to skip; trace 2-3 % faster at 10k ops); outside public calls, the walk from here."""
    scopes = peek(None)
    if scopes is not None:
        call = scopes.call
        if call is not None:
            return call.location
        caller = scopes.caller
        if caller is not None:  # the first op of a public call: walk from its caller, not from here (~8 frames)
            return user_location(start=caller)
    return user_location()


def public_property(prop: property, name: str) -> property:
    return property(public(prop.fget, name), prop.fset, prop.fdel, prop.__doc__)


def call_module(module, forward, args, kwargs):
    """``forward(*args, **kwargs)`` with ``module``'s path as the scope of the ops it makes."""
    scopes = state()
    outer_paths, outer = scopes.paths, scopes.module
    if outer_paths is None:  # the root: its path is "", its children's paths come from its tree
        paths, path = module_paths(module), ""
    else:
        paths, path = outer_paths, _choose(outer_paths.get(id(module)), outer)
    kind = type(module)
    leaf = _LEAF.get(kind)
    if leaf is None:
        leaf = _LEAF[kind] = _is_leaf(kind)
    opens = leaf and scopes.call_name is None
    scopes.paths, scopes.module = paths, path
    if opens:
        scopes.call_name, scopes.call = kind.__name__, None
    try:
        return forward(*args, **kwargs)
    finally:
        scopes.paths, scopes.module = outer_paths, outer
        if opens:
            scopes.call_name = scopes.call = None


@contextlib.contextmanager
def recording(module: str, call_name: str):
    """Ops made inside are recorded under ``module`` and one CallScope ``call_name`` (a dummy parameter's
    ops: the parameter's module, one call per parameter)."""
    scopes = state()
    saved = scopes.module, scopes.call_name, scopes.call
    scopes.module, scopes.call_name, scopes.call = module, call_name, None
    try:
        yield
    finally:
        scopes.module, scopes.call_name, scopes.call = saved


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
