"""Builds off the kernel's event loop: the loop keeps running, progress shows the elapsed time, Cancel and
interrupts stop waiting, and the widget is left in a clear state (Build enabled, a message saying why)."""

import _thread
import asyncio
import signal
import threading

import pytest

import tripy_lab as tp
from tripy_lab.lab import spec as S
from tripy_lab.lab.bounds_model import BoundsModel
from tripy_lab.lab.session import Session
from tripy_lab.pipeline.stages import Lowered


def add(a, b):
    return a + b


STARTED_S = 60  # how long a test waits for the build to begin (trace + lower first, on a loaded CI machine)


@pytest.fixture
def gate(monkeypatch):
    """Lowered.build waits for ``gate.set()`` (a build as slow as the test wants)."""
    event, started = threading.Event(), threading.Event()
    real = Lowered.build

    def slow(self, *args, **kwargs):
        started.set()
        assert event.wait(20), "the test never released the build"
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Lowered, "build", slow)
    event.started = started
    yield event
    event.set()


def session(**kw):
    parsed = S.parse_line("a=f32[1:2:3,4] b=f32[1:2:3,4]")
    model = BoundsModel.from_values(list(parsed.params), {n: p.spec for n, p in parsed.params.items()})
    ns = {}
    s = Session(add, model, exe_name="exe", namespace=ns, engine="reference", debounce_seconds=0,
                background=True, **kw)
    s.progress_seconds = 0.02
    return s, ns


def test_background_build_keeps_the_loop_running_and_shows_progress(gate):
    s, ns = session()
    statuses = []
    s.listeners.append(lambda changed: statuses.append(s.status()[0]))

    async def main():
        ticks = 0
        s.refresh()  # trace + lower now, the build on a worker thread
        assert s.building and s.traced is not None and "exe" not in ns
        while ticks < 10:  # the loop is free while the engine builds
            await asyncio.sleep(0.01)
            ticks += 1
        gate.set()
        for _ in range(500):
            if not s.building:
                break
            await asyncio.sleep(0.01)
        return ticks

    assert asyncio.run(main()) == 10
    assert isinstance(ns["exe"], tp.Executable) and s.status()[1] == "ok"
    elapsed = [float(t.split()[1]) for t in statuses if t.startswith("building… ")]
    assert len(elapsed) >= 3 and elapsed == sorted(elapsed) and elapsed[-1] > 0.0
    out = ns["exe"](tp.ones((2, 4)).eval(), tp.ones((2, 4)).eval())
    assert tp.allclose(out, tp.ones((2, 4)) * 2)


def test_cancel_leaves_a_clear_state_and_drops_the_late_result(gate):
    s, ns = session()

    async def main():
        s.refresh()
        assert gate.started.wait(STARTED_S)
        assert s.cancel_build()
        assert not s.building and s.job is None
        text, kind = s.status()
        assert text.startswith("build cancelled after ") and "press Build" in text and kind == "stale"
        gate.set()  # the worker finishes later: its result must not land
        await asyncio.sleep(0.3)
        assert "exe" not in ns and s.exe is None and not s.building
        s.build()  # building again works
        for _ in range(500):
            if not s.building:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert isinstance(ns["exe"], tp.Executable) and s.counts["build"] == 1
    assert [e["status"] for e in s.log if e["stage"] == "build"] == ["cancelled", "ok"]


def test_an_interrupt_cancels_a_background_build(gate):
    s, ns = session()
    before = signal.getsignal(signal.SIGINT)

    async def main():
        s.refresh()
        assert gate.started.wait(STARTED_S) and s.building
        await asyncio.sleep(0)  # the handler goes in once the current callback (a kernel message) is done
        signal.raise_signal(signal.SIGINT)  # what the kernel's interrupt sends: no KeyboardInterrupt escapes
        await asyncio.sleep(0)
        assert not s.building and s.status()[0].startswith("build interrupted")

    asyncio.run(main())
    assert signal.getsignal(signal.SIGINT) is before  # the kernel's handler is back


def test_interrupted_first_build_leaves_build_enabled_with_a_message(gate):
    pytest.importorskip("ipywidgets")
    from tripy_lab.lab.widget.bounds_editor import BoundsEditor
    from tripy_lab.lab.widget.ui import LabWidget

    s, ns = session()
    ui = LabWidget(s, BoundsEditor(s.model, on_change=s.schedule))
    pressed = []

    def press_interrupt():  # once the build runs (an interrupt during the trace would test something else)
        if gate.started.wait(STARTED_S):
            pressed.append(1)
            _thread.interrupt_main()

    # the kernel's own SIGINT handler raises KeyboardInterrupt. A process a non-interactive shell starts in the
    # background inherits SIGINT ignored (CI may run so), and interrupt_main then does nothing.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    threading.Thread(target=press_interrupt, daemon=True).start()
    raised = False
    try:
        s.refresh(wait=True)  # the cell's first build, interrupted (Jupyter's interrupt button)
    except KeyboardInterrupt:
        raised = True
    finally:
        signal.signal(signal.SIGINT, before)
    assert raised, (f"no KeyboardInterrupt after {len(pressed)} interrupt(s); build started: {gate.started.is_set()}; "
                    f"in the main thread: {threading.current_thread() is threading.main_thread()}; SIGINT handler "
                    f"before the test: {before!r}")
    assert not s.building and s.job is None
    assert not ui.build_button.disabled and ui.build_button.description == "Build"
    assert ui.cancel_button.layout.display == "none"
    assert "build interrupted after" in ui.status.value and "press Build" in ui.status.value
    gate.set()
    s.build(wait=True)  # Build works afterwards
    assert isinstance(ns["exe"], tp.Executable) and "tripy-status-ok" in ui.status.value


def test_a_failing_background_build_lands_in_the_error_tab(monkeypatch):
    def broken(self, *args, **kwargs):
        raise tp.TripyException("Engine build failed.", ["layer 3 has no kernel"])

    monkeypatch.setattr(Lowered, "build", broken)
    s, ns = session()

    async def main():
        s.refresh()
        for _ in range(500):
            if not s.building:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert s.error_stage == "build" and s.error_info()["summary"] == "Engine build failed."
    assert s.status() == ("build failed: Engine build failed.", "error") and "exe" not in ns
    assert [e["status"] for e in s.log if e["stage"] == "build"] == ["error"]


def test_every_settled_edit_builds_in_the_background_and_the_next_edit_restarts_it(gate):
    """However long the last build took (a budget of 0 ms: every build is "slow"), an edit in the kernel builds
    in the background; a further edit drops that build and starts one for the new bounds."""
    s, ns = session(auto_build_seconds=0.0)

    async def settle():
        for _ in range(1000):
            if not s.building:
                return
            await asyncio.sleep(0.01)

    async def main():
        gate.set()
        s.refresh()
        await settle()
        assert isinstance(ns["exe"], tp.Executable) and s.last_build_seconds > s.auto_build_seconds
        gate.clear()
        gate.started.clear()
        s.model.set_opt("a", 0, 3)
        s.schedule()
        assert s.building and gate.started.wait(STARTED_S)  # no "press Build": it is building
        first = s.job
        s.model.set_opt("a", 0, 1)
        s.schedule()  # the next move: the running build is dropped, a new one starts
        assert first.cancelled and s.building and s.job is not first
        gate.set()
        await settle()

    asyncio.run(main())
    assert "press Build" not in s.status()[0] and s.status()[1] == "ok"
    assert ns["exe"].input_infos["a"].shape_bounds.opt == (1, 4)
    assert s.counts["build"] == 2  # the first build and the last one; the dropped one never landed


def test_the_cells_build_waits_for_the_same_build_already_running(gate):
    """An edit started the build; the cell's own build for the same bounds (``wait``) waits for that one instead
    of returning at once without an Executable, and the build runs once."""
    s, ns = session()
    first = threading.Thread(target=s.refresh, daemon=True)  # the edit's refresh starts the build
    first.start()
    assert gate.started.wait(STARTED_S) and s.building
    cell = threading.Thread(target=lambda: s.build(wait=True), daemon=True)
    cell.start()
    cell.join(0.3)
    assert cell.is_alive(), "the cell's build returned while the build was still running"
    gate.set()
    cell.join(10)
    first.join(10)
    assert not cell.is_alive() and not first.is_alive()
    assert isinstance(ns["exe"], tp.Executable) and s.counts["build"] == 1 and not s.building
