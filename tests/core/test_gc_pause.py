"""core.gc_pause: the collector is off inside a stage and back on after it, a stage's objects are moved to the
oldest generation unscanned, and its cyclic garbage is still collected (issue 31, the front half)."""

import gc
import weakref

from tripy_lab.core.gc_pause import gc_paused


class _Node:
    pass


def _cycle():
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_objects_made_in_a_stage_skip_the_young_collections_but_their_garbage_is_collected():
    assert gc.isenabled()
    gc.collect()
    with gc_paused():
        assert not gc.isenabled()
        kept = [_Node() for _ in range(2000)]
        dead = _cycle()
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 100  # the young count starts over: no collection walks the stage's objects
    assert all(gc.is_tracked(k) for k in kept)
    gc.collect(0)
    gc.collect(1)
    assert dead() is not None  # in the oldest generation: young collections do not look at it ...
    gc.collect()
    assert dead() is None  # ... a full one frees it


def test_nested_pauses_and_a_disabled_collector_and_someone_elses_freeze_are_left_alone():
    with gc_paused():
        with gc_paused():
            pass
        assert not gc.isenabled()  # the inner block leaves it to the outer one
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
    gc.collect()
    frozen = _Node()
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        with gc_paused():
            _Node()
        assert gc.get_freeze_count() == count and gc.is_tracked(frozen)  # their frozen objects stay frozen
    finally:
        gc.unfreeze()
