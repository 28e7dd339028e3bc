"""Where the op being recorded comes from: the module path and the public frontend call now running.

The frontend sets these (``frontend/scopes.py``: ``Module.__call__`` and the public ops); ``optable.apply``
and ``record`` copy them onto every TraceOp they make. Per thread: a build thread may trace while the
kernel's thread makes eager ops.
"""

from __future__ import annotations

import threading

from tripy_lab.trace.ir import CallScope


class _Scopes(threading.local):
    # The innermost module's dotted state_dict path ("" outside modules, and in the root module).
    module = ""
    # id(module) -> its paths under the root module being called (None: no module is running).
    paths: dict | None = None
    # The outermost public call running (its name; None: none), and its CallScope, made with its first op
    # (whose location, the user's line, is the call's: one location look-up, no extra stack walk).
    call_name: str | None = None
    call: CallScope | None = None


STATE = _Scopes()


def current_call(location) -> CallScope | None:
    """The CallScope of the public call now running (made on its first op, at that op's ``location``)."""
    state = STATE
    call = state.call
    if call is None and state.call_name is not None:
        call = state.call = CallScope(state.call_name, location)
    return call
