"""The two-speed loop without widgets: caching, auto-build threshold, engine-only rebuilds, errors."""

import asyncio
import threading

import tripy_lab as tp
from tripy_lab.lab import spec as S
from tripy_lab.lab.bounds_model import BoundsModel
from tripy_lab.lab.session import Debouncer, Session, failing_op


def add(a, b):
    return a + b


def mm(a, b):
    c = a + 1.0
    return c @ b


def session(func, line, **kw):
    parsed = S.parse_line(line)
    model = BoundsModel.from_values(list(parsed.params), {n: p.spec for n, p in parsed.params.items()})
    ns = {}
    s = Session(func, model, exe_name="exe", namespace=ns, engine="reference", debounce_seconds=0, **kw)
    events = []
    s.listeners.append(events.append)
    return s, ns, events


def test_first_refresh_builds_and_publishes_the_executable():
    s, ns, events = session(add, "a=f32[1:2:3,4] b=f32[1:2:3,4]")
    s.refresh()
    assert isinstance(ns["exe"], tp.Executable) and s.exe is ns["exe"]
    assert s.counts == {"trace": 1, "lower": 1, "build": 1}
    assert s.stale == set()
    assert any("trace" in e and "mlir" in e for e in events)
    assert s.status()[1] == "ok"


def test_only_changed_stages_rerun_and_bounds_are_cached():
    s, ns, _ = session(add, "a=f32[1:2:3,4] b=f32[1:2:3,4]")
    s.refresh()
    first = ns["exe"]
    s.model.set_range("a", 0, 1, 5)
    s.schedule()  # debounce 0: runs now
    assert s.counts == {"trace": 2, "lower": 2, "build": 2}
    assert "max = [5, 4]" in s.lowered.as_text()
    s.model.set_range("a", 0, 1, 3)
    s.schedule()  # back to the first bounds: everything from the cache
    assert s.counts == {"trace": 2, "lower": 2, "build": 2}
    assert ns["exe"].stages["built"] is first.stages["built"]
    assert [e["status"] for e in s.log[-2:]] == ["cache hit", "cache hit"]
    s.refresh()  # nothing changed: nothing runs
    assert s.counts["trace"] == 2


def test_slow_builds_wait_for_the_build_button():
    s, ns, _ = session(add, "a=f32[1:2:3,4] b=f32[2,4]", auto_build_seconds=0.0)
    s.refresh()  # the first build always happens
    assert s.counts["build"] == 1
    s.model.set_opt("a", 0, 3)
    s.schedule()
    assert s.counts == {"trace": 2, "lower": 2, "build": 1}
    assert s.stale == {"engine", "run"}
    assert "press Build" in s.status()[0]
    s.build()
    assert s.counts["build"] == 2 and s.stale == set()
    assert ns["exe"].input_infos["a"].shape_bounds.opt == (3, 4)


def test_engine_change_rebuilds_without_retracing():
    s, _, _ = session(add, "a=f32[2] b=f32[2]")
    s.refresh()
    s.set_engine("reference", 0)
    assert s.stale == {"engine", "run"}
    s.build()
    assert s.counts == {"trace": 1, "lower": 1, "build": 2}
    assert s.built.optimization_level == 0
    s.set_engine("reference", 3)  # the first build is cached
    assert s.stale == set() and s.counts["build"] == 2 and s.built.optimization_level == 3


def test_invalid_bounds_skip_the_pipeline():
    s, _, _ = session(add, "a=f32[1:2:3] b=f32[1:2:3]")
    s.refresh()
    s.model.set_bounds("a", 0, 3, 1, 2)
    s.schedule()
    assert s.counts["trace"] == 1
    assert s.status()[1] == "error" and "min 3 > max 2" in s.status()[0]
    assert {"trace", "mlir"} <= s.stale


def test_trace_error_names_the_failing_op_and_recovers():
    s, ns, _ = session(mm, "a=f32[2,3] b=f32[3,5]")
    s.refresh()
    assert s.error is None
    s.model.set_bounds("b", 0, 4, 4, 4)
    s.schedule()
    info = s.error_info()
    assert info["stage"] == "trace" and "matrix multiplication" in info["summary"]
    assert "return c @ b" in info["location"]
    # The op at the user's line, found in the last good trace, is highlighted.
    assert info["op"] == s.good_traced.trace.ops[-1].name
    s.model.set_bounds("b", 0, 3, 3, 3)
    s.schedule()
    assert s.error is None and s.error_info() is None


def test_failing_op_needs_a_location():
    assert failing_op(ValueError("x"), None) is None


def test_debouncer_coalesces_triggers_on_a_running_loop():
    calls = []

    async def main():
        d = Debouncer(lambda: calls.append(1), 0.02)
        for _ in range(5):
            d()
        assert d.pending
        await asyncio.sleep(0.08)
        assert not d.pending

    # A thread of its own: pytest-playwright's sync API leaves a loop registered on the main thread.
    worker = threading.Thread(target=asyncio.run, args=(main(),))
    worker.start()
    worker.join()
    assert calls == [1]

    def no_loop():
        Debouncer(lambda: calls.append(2), 0.5)()  # no running loop: immediate

    worker = threading.Thread(target=no_loop)
    worker.start()
    worker.join()
    assert calls == [1, 2]


def test_building_state_is_announced_before_the_build():
    s, _, _ = session(add, "a=f32[2] b=f32[2]")
    statuses = []
    s.listeners.append(lambda changed: statuses.append((s.status(), s.building)))
    s.refresh()
    assert any(text.startswith("building… ") and kind == "busy" and busy for (text, kind), busy in statuses)
    assert statuses[-1][0][1] == "ok" and not statuses[-1][1]


def test_schedule_marks_every_tab_stale_until_the_refresh():
    s, _, _ = session(add, "a=f32[1:2:3] b=f32[1:2:3]")
    s.refresh()
    seen = []
    s.listeners.append(lambda changed: seen.append(set(s.stale)))
    s.model.set_opt("a", 0, 3)
    s.schedule()
    assert seen[0] == {"trace", "mlir", "engine", "run"}
    assert s.stale == set()


def test_build_errors_are_reported_with_their_stage():
    s, _, _ = session(add, "a=f32[2] b=f32[2]")
    s.refresh()
    s.set_engine("no-such-engine")
    s.build()
    info = s.error_info()
    assert info["stage"] == "build" and "engine" in info["summary"]
    s.set_engine("reference")  # back to the cached good build: the build error is gone
    assert s.error is None and s.stale == set()


def test_build_button_uses_the_cache_and_ignores_invalid_bounds():
    s, _, _ = session(add, "a=f32[1:2:3] b=f32[1:2:3]")
    s.refresh()
    s.build()  # same bounds: the cached build
    assert s.counts["build"] == 1 and s.log[-1]["status"] == "cache hit"
    s.model.set_bounds("a", 0, 3, 2, 1)
    s.build()
    assert s.counts["build"] == 1 and s.exe.input_infos["a"].shape_bounds.max == (3,)
