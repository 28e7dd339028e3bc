"""Python's cyclic garbage collector paused while a stage builds a big graph.

Tracing, lowering and emitting allocate several objects per op and free almost none of them, so every
automatic collection scans a heap that only grows: on a 10,000-op program the collector took about half of the
trace+lower time and made the time per op rise with the program's size (benchmarks/bench_front_mix.py). After
the stage its objects go to the oldest generation unscanned; its garbage is freed by the next full collection.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def gc_paused():
    """Pause automatic collection for the block; nested or concurrent blocks leave it to the outermost one, and a
    collector the caller had switched off stays off."""
    was_enabled = gc.isenabled()
    if was_enabled:
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            _promote()
            gc.enable()


def _promote():
    """Move every tracked object to the oldest generation, unscanned (two list splices).

    The stage made most of the young objects and keeps them (a trace, a program, an executable): the first
    young collection after the pause would walk all of them (10-16 us an op of a 1k-10k-op trace+lower, a fifth
    of it) only to promote them. Its cyclic garbage is found by the next full collection, as any old object's
    is. Where the interpreter has no freeze (PyPy), the young collection runs as before."""
    freeze, unfreeze = getattr(gc, "freeze", None), getattr(gc, "unfreeze", None)
    if freeze is None or unfreeze is None or gc.get_freeze_count():
        return  # someone else's frozen objects stay frozen: unfreezing them here would undo their freeze
    freeze()  # young, middle and old generations -> the permanent one (also resets the young count) ...
    unfreeze()  # ... -> the oldest generation
