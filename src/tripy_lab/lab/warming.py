"""The lab's background warm-up: after a build lands in the kernel, the ladder rungs next to opt are compiled and
called (``Executable.warm``, low priority), so a run there, or the build after the next slider move (the same
StableHLO at that shape: a persistent cache hit), finds them compiled. The next build stops it."""

from __future__ import annotations

from tripy_lab.lab import session as lab_session

ENABLED = True  # False: no warm-up after builds (``tripy_lab.lab.warming.ENABLED = False``)


class NeighbourWarmer:
    """A ``Session`` listener (``session.listeners``; the ``%%tpcompile`` widget adds one); ``ENABLED``."""

    def __init__(self, session):
        self.session = session
        self.exe = None  # the Executable being (or last) warmed
        self.warming = None  # its WarmUp

    def __call__(self, changed: set[str]) -> None:
        s = self.session
        if self.warming is not None and (s.building or s.exe is not self.exe):
            self.stop()
        if s.building or s.exe is None or s.exe is self.exe or "engine" not in changed:
            return
        loop = lab_session._running_loop()
        if not ENABLED or loop is None:
            return
        from tripy_lab.executable.warm import neighbours

        self.exe = s.exe
        if not s.exe._compiled.built_points():  # one build covers every shape (onnxruntime, reference)
            return

        def done(warm) -> None:
            if not loop.is_closed():
                loop.call_soon_threadsafe(self._done, warm)

        self.warming = s.exe.warm(neighbours(s.exe.input_infos), on_done=done)

    def _done(self, warm) -> None:
        if warm is self.warming and not warm.cancelled:  # the Engine tab lists the warmed shapes
            self.session.notify({"engine"})

    def stop(self) -> None:
        """Compile nothing more; not waited for (the compile under way ends on its own thread)."""
        if self.warming is not None:
            self.warming.cancel(wait=False)
        self.warming, self.exe = None, None
