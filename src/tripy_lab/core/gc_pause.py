"""Python's cyclic garbage collector paused while a stage builds a big graph.

Tracing, lowering and emitting allocate several objects per op and free almost none of them, so every
automatic collection scans a heap that only grows: on a 10,000-op program the collector took about half of the
trace+lower time and made the time per op rise with the program's size (benchmarks/bench_front_mix.py). The
stage's garbage is collected as usual once the collector runs again after the stage.
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
            gc.enable()
