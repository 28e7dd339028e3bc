"""The lab warms the shapes next to opt after each build lands in the kernel (``lab.warming``), lists them in the
Engine tab, and the next build stops that warm-up, leaving no thread behind."""

import asyncio
import threading

import pytest

import tripy_lab as tp
from tripy_lab.lab import spec as S
from tripy_lab.lab.bounds_model import BoundsModel
from tripy_lab.lab.session import Session
from tripy_lab.lab.views.tabs import EngineView
from tripy_lab.lab.warming import NeighbourWarmer

pytest.importorskip("jax")


def add(a, b):
    return a + b


def warm_threads() -> list:
    return [t for t in threading.enumerate() if t.name == "tripy-lab-warm"]


@pytest.fixture(autouse=True)
def fresh_store(tmp_path, monkeypatch):
    monkeypatch.setattr(tp.config, "compilation_cache_dir", str(tmp_path / "xla"))


def session():
    parsed = S.parse_line("a=f32[1:2:8,4] b=f32[1:2:8,4]")
    model = BoundsModel.from_values(list(parsed.params), {n: p.spec for n, p in parsed.params.items()})
    s = Session(add, model, exe_name="exe", namespace={}, engine="xla", debounce_seconds=0, background=True)
    s.progress_seconds = 0.05
    warmer = NeighbourWarmer(s)
    s.listeners.append(warmer)
    return s, warmer


async def until(predicate, seconds=300.0):
    for _ in range(int(seconds / 0.02)):
        if predicate():
            return True
        await asyncio.sleep(0.02)
    return False


def test_after_a_build_the_shapes_next_to_opt_are_warmed_and_listed_in_the_engine_tab():
    s, warmer = session()
    changes = []
    s.listeners.append(changes.append)

    async def main():
        s.refresh()
        assert await until(lambda: s.exe is not None)
        assert warmer.warming is not None and warmer.exe is s.exe
        assert await until(lambda: warmer.warming.done and {"engine"} in changes[-3:])

    asyncio.run(main())
    w = warmer.warming
    assert w.built == [{"a": (4, 4), "b": (4, 4)}] and not warm_threads()  # batch 2 -> 4 (1 and 8: min, max)
    info = dict(EngineView.of(s.built).info)
    assert info["warmed shapes"] == "a=4x4, b=4x4" and "a=4x4, b=4x4" in info["compiled shapes"]


def test_the_next_build_stops_the_warm_up_and_leaves_no_thread(monkeypatch):
    from tripy_lab.engine.xla.running import Running

    gate, entered = threading.Event(), threading.Event()
    real = Running.warm

    def held(self, signature):
        entered.set()
        assert gate.wait(60)
        return real(self, signature)

    monkeypatch.setattr(Running, "warm", held)
    s, warmer = session()

    async def main():
        s.refresh()
        assert await until(lambda: s.exe is not None)
        w = warmer.warming
        assert await until(entered.is_set)
        s.set_engine("reference")  # not built yet: the next build
        s.build()
        assert w.cancelled and warmer.warming is None  # stopped at once, not waited for
        gate.set()
        assert await until(lambda: s.exe is not None and s.built.report.engine == "reference")
        assert w.wait(60) and not warm_threads()
        assert w.built == [{"a": (4, 4), "b": (4, 4)}] and not w.called  # the compile under way ended; no more
        assert warmer.warming is None  # reference builds every shape at once: nothing to warm

    try:
        asyncio.run(main())
    finally:
        gate.set()


def test_without_a_kernel_loop_nothing_is_warmed():
    s, warmer = session()
    s.refresh()
    s.build(wait=True)
    assert s.exe is not None and warmer.warming is None and not warm_threads()
