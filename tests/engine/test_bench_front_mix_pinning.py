"""bench_front_mix.py runs its single-threaded trace+lower pairs on one CPU (the machine's vCPUs differ in speed:
benchmarks/README.md): the helpers pick an allowed CPU, pin only inside the block and give the set back."""

import os

import pytest

bench = pytest.importorskip("bench_front_mix")  # benchmarks/ (tests/engine/conftest.py)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux-only")
def test_pinned_runs_on_one_cpu_and_restores_the_allowed_set():
    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    with bench.pinned(cpu):
        assert os.sched_getaffinity(0) == {cpu}
    assert os.sched_getaffinity(0) == allowed
    with pytest.raises(RuntimeError), bench.pinned(cpu):  # an error inside still gives the set back
        raise RuntimeError("boom")
    assert os.sched_getaffinity(0) == allowed
    with bench.pinned(None):  # --no-pin: the scheduler's choice
        assert os.sched_getaffinity(0) == allowed


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux-only")
def test_quiet_cpu_is_the_fastest_allowed_cpu_and_leaves_the_set_alone():
    allowed = os.sched_getaffinity(0)
    out = {}
    cpu = bench.quiet_cpu(out)
    assert os.sched_getaffinity(0) == allowed
    if len(allowed) < 2:
        assert cpu is None and "cpu_loop_ms" not in out
        return
    loops = out["cpu_loop_ms"]
    assert set(loops) == allowed and cpu in allowed
    assert loops[cpu] == min(loops.values()) and all(t > 0 for t in loops.values())


def test_the_quiet_set_keeps_the_cpus_near_the_fastest():
    out = {"cpu_loop_ms": {0: 5.6, 1: 3.7, 2: 4.2, 3: 4.3, 4: 6.5}}
    assert bench.quiet_set(out) == {1, 2}  # 4.2 <= 3.7 * 1.15 < 4.3
    assert bench.quiet_set({}) is None


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="CPU affinity is Linux-only")
def test_pinning_all_threads_reaches_a_thread_started_before_and_gives_each_its_set_back():
    import threading

    allowed = os.sched_getaffinity(0)
    cpu = min(allowed)
    seen, go, done = {}, threading.Event(), threading.Event()

    def worker():
        seen["before"] = os.sched_getaffinity(0)
        go.wait(10)
        seen["inside"] = os.sched_getaffinity(0)
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    try:
        with bench.pinned({cpu}, all_threads=True):
            assert os.sched_getaffinity(0) == {cpu}
            go.set()
            assert done.wait(10)
        assert os.sched_getaffinity(0) == allowed
    finally:
        go.set()
        t.join(10)
    assert seen["before"] == allowed and seen["inside"] == {cpu}
    with bench.pinned({cpu}):  # the calling thread only (the trace+lower pairs)
        assert os.sched_getaffinity(0) == {cpu}
    assert os.sched_getaffinity(0) == allowed
