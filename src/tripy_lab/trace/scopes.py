"""Where the op being recorded comes from: the module path and the public frontend call now running.

The frontend sets these (``frontend/scopes.py``: ``Module.__call__`` and the public ops); ``optable.apply``
and ``record`` copy them onto every TraceOp they make. One ``Scopes`` per thread (a build or Dask thread may
trace while another makes ops), reached through a ContextVar: ``peek(None)`` is a C call and then plain
attribute reads (a threading.local's attribute reads cost ~2.3k instructions an op, 2.6 % of trace+lower).
"""

from __future__ import annotations

import contextvars

from tripy_lab.trace.ir import CallScope


class Scopes:
    __slots__ = ("module", "paths", "call_name", "call", "caller")

    def __init__(self):
        # The innermost module's dotted state_dict path ("" outside modules, and in the root module).
        self.module = ""
        # id(module) -> its paths under the root module being called (None: no module is running).
        self.paths: dict | None = None
        # The outermost public call running (its name; None: none), and its CallScope, made with its first op
        # (whose location, the user's line, is the call's: one location look-up, no extra stack walk).
        self.call_name: str | None = None
        self.call: CallScope | None = None
        # The frame that made the outermost public call (where the stack walk for its location starts: the frames
        # between it and the op being made are tripy_lab's own), or None.
        self.caller = None


_VAR: contextvars.ContextVar[Scopes] = contextvars.ContextVar("tripy_lab_scopes")
peek = _VAR.get  # peek(None): this thread's Scopes, None where no scope was ever opened


def state() -> Scopes:
    """This thread's Scopes (made on first use: a new thread starts with an empty context)."""
    scopes = _VAR.get(None)
    if scopes is None:
        scopes = Scopes()
        _VAR.set(scopes)
    return scopes


state()  # the importing thread's


def current_call(scopes: Scopes, location) -> CallScope | None:
    """The CallScope of the public call now running (made on its first op, at that op's ``location``)."""
    call = scopes.call
    if call is None and scopes.call_name is not None:
        # CallScope(name, location) without the frozen dataclass's object.__setattr__ per field (half its cost)
        call = _new(CallScope)
        fields = call.__dict__
        fields["name"], fields["location"] = scopes.call_name, location
        scopes.call = call
    return call


_new = object.__new__
