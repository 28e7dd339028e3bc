"""The Compare tab: a "Compare with…" picker over other builds of the same cell, and the diff view.

Candidates: every other build this session has cached (other bounds, engines or levels), then each other
engine and optimization level at the current bounds (built on demand and cached like any build).
"""

from __future__ import annotations

from tripy_lab.lab.views import compile_diff as diff
from tripy_lab.lab.views import draw as views

PROMPT = "Compare with…"
ENGINES = ("reference", "xla")  # the runnable engines (tensorrt never is, here)


def _label(built) -> str:
    return (f"{built.report.engine} -O{built.optimization_level} "
            f"{diff.bounds_text(built.lowered.program.input_infos)}")


def candidates(session) -> list[tuple[str, tuple]]:
    """(label, choice) pairs for the picker; a choice is ("built", cache key) or ("build", engine, level)."""
    if session.built is None:
        return []
    current = session.built
    out = [(f"built: {_label(b)}", ("built", key)) for key, b in session._built.items() if b is not current]
    engine, level = current.report.engine, current.optimization_level
    from tripy_lab.engine import engine_class

    for name in ENGINES:
        if name != engine and engine_class(name).available()[0]:
            out.append((f"engine {name} -O{level}", ("build", name, level)))
    out += [(f"{engine} -O{n}", ("build", engine, n)) for n in range(6) if n != level]
    return out


def other_executable(session, choice: tuple):
    if choice[0] == "built":
        return session._built.get(choice[1]).executable()
    _, engine, level = choice
    key = (session.key, engine, level)
    built = session._built.get(key)
    if built is None:
        built = session.lowered.build(engine=engine, optimization_level=level)
        session._built.put(key, built)
    return built.executable()


class ComparePane:
    def __init__(self, session):
        import ipywidgets as W

        self.session = session
        self.picker = W.Dropdown(options=[(PROMPT, None)], value=None, layout=W.Layout(width="420px"))
        self.picker.add_class("tripy-compare-picker")
        self.out = W.HTML("<i>Build, then pick another build to compare with.</i>")
        self.out.add_class("tripy-compare-out")
        self.widget = W.VBox([self.picker, self.out])
        self.result: diff.CompileDiff | None = None
        self.picker.observe(self._picked, "value")

    def refresh(self) -> None:
        """Re-list the candidates (after a build), keeping the prompt selected."""
        options = [(PROMPT, None), *candidates(self.session)]
        self.picker.unobserve(self._picked, "value")
        self.picker.options, self.picker.value = options, None
        self.picker.observe(self._picked, "value")

    def _picked(self, change) -> None:
        if change["new"] is not None:
            self.compare(change["new"])

    def compare(self, choice: tuple) -> None:
        s = self.session
        if s.exe is None:
            self.out.value = views.status_html("No Executable yet: press Build.", "error")
            return
        self.out.value = views.status_html("building and comparing…", "busy")
        try:
            other = other_executable(s, choice)
            label = dict((v, k) for k, v in candidates(s)).get(choice, "other")
            self.result = diff.diff(s.exe, other, labels=(f"this: {_label(s.built)}", label))
        except Exception as exc:  # an engine that cannot build this program: show it, keep the widget alive
            self.out.value = views.error_html(getattr(exc, "summary", f"{type(exc).__name__}: {exc}"),
                                              getattr(exc, "details", []))
            return
        self.out.value = self.result.to_html()
