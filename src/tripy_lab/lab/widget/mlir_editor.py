"""Edit the MLIR of a ``%%tpcompile`` cell, build it with the chosen engine, run it beside the original.

``build_edited(text, lowered, exe, ...)`` is the widget-free part (``Lowered.from_text`` -> build ->
``compare_outputs``); ``MlirEditor`` puts it behind an Edit toggle, a Textarea and a "Build edited" button.
"""

from __future__ import annotations

from dataclasses import dataclass

from tripy_lab.core.errors import TripyException
from tripy_lab.lab import tables
from tripy_lab.lab.html import esc
from tripy_lab.lab.views import compile_diff as diff
from tripy_lab.lab.views import draw as views


def editable_text(lowered) -> str:
    """The module with every constant spelled out (no ``__elided__``); ``dense_resource`` handles stay and
    resolve from the original program when the edit is parsed."""
    from tripy_lab.mlir import text as mlir_text

    return mlir_text.print_module(lowered.program.module, elide_above=None)


@dataclass
class EditResult:
    exe: object  # the edited Executable
    comparison: object  # LabFrame from diff.compare_outputs
    where: str  # the shapes both ran at

    @property
    def same(self) -> bool:
        return bool(self.comparison["allclose"].all())


def build_edited(text: str, lowered, exe, engine: str | None = None, optimization_level: int = 3) -> EditResult:
    """Parse + verify ``text`` (errors carry ``.line``/``.column``), build it, run both at opt shapes."""
    from tripy_lab.pipeline import Lowered

    edited = Lowered.from_text(text, like=lowered)
    new_exe = edited.build(engine=engine, optimization_level=optimization_level).executable()
    frame, where = diff.compare_outputs(exe, new_exe, labels=("original", "edited"))
    return EditResult(new_exe, frame, where)


def result_html(result: EditResult, name: str) -> str:
    verdict = ("outputs match the original (allclose)" if result.same
               else "outputs differ from the original")
    color = "#15803d" if result.same else "#b45309"
    return (f'<div class="tripy-edit-result"><div style="color:{color};font-weight:600">'
            f"Built <code>{esc(name)}</code> ({esc(str(result.exe.engine))}): "
            f"{esc(verdict)}</div><div style='font-size:12px;color:#374151'>on the same random inputs "
            f"at {esc(result.where)}</div>{tables.frame_html(result.comparison)}</div>")


def excerpt_html(text: str, line: int, column: int, around: int = 3) -> str:
    """The edited text around ``line`` (numbered as in the editor), that line marked and a caret at ``column``."""
    lines = text.splitlines()
    rows = []
    for k in range(max(1, line - around), min(len(lines), line + around) + 1):
        mark = "background:#fee2e2;" if k == line else ""
        rows.append(f'<div class="tripy-edit-line" data-line="{k}" style="{mark}white-space:pre">'
                    f'<span style="color:#9ca3af">{k:>4} </span>{esc(lines[k - 1])}</div>')
        if k == line:
            rows.append('<div class="tripy-edit-caret" style="white-space:pre;color:#b91c1c">'
                        + " " * (4 + column) + "^</div>")
    return ('<pre class="tripy-edit-excerpt" style="font-size:12px;line-height:1.35;overflow-x:auto;margin:4px 0">'
            + "".join(rows) + "</pre>")


def error_html(exc: BaseException, text: str = "") -> str:
    if isinstance(exc, TripyException):
        line = getattr(exc, "line", None)
        if line is None:
            return f'<div class="tripy-edit-error">{views.error_html(exc.summary, exc.details)}</div>'
        return (f'<div class="tripy-edit-error" data-line="{line}" data-column="{exc.column}">'
                f"{views.error_html(exc.summary, [exc.message])}{excerpt_html(text, line, exc.column)}</div>")
    return f'<div class="tripy-edit-error">{views.error_html(f"{type(exc).__name__}: {exc}", [])}</div>'


# Code font, no wrapping: the columns an error names are the columns on screen.
EDITOR_CSS = """<style>
.tripy-mlir-editor textarea { font-family: var(--jp-code-font-family, monospace); font-size: 12px;
  line-height: 1.45; white-space: pre; overflow-wrap: normal; overflow: auto; }
</style>"""


class MlirEditor:
    """The MLIR tab's editor: ``toggle`` switches the tab between the highlighted view and ``widget``."""

    def __init__(self, session, on_toggle=None):
        import ipywidgets as W

        self.session = session
        self.toggle = W.ToggleButton(value=False, description="Edit", icon="pencil", layout=W.Layout(width="90px"),
                                     tooltip="edit the MLIR, build it and compare with the original")
        self.toggle.add_class("tripy-mlir-edit-toggle")
        self.text = W.Textarea(layout=W.Layout(width="100%", height="320px"))
        self.text.add_class("tripy-mlir-editor")
        self.build_button = W.Button(description="Build edited", icon="cogs", button_style="warning")
        self.build_button.add_class("tripy-build-edited")
        self.reset_button = W.Button(description="Reset to original", icon="undo")
        self.out = W.HTML()
        self.out.add_class("tripy-edit-out")
        self.note = W.HTML()
        self.widget = W.VBox([W.HTML(EDITOR_CSS), self.note, self.text,
                              W.HBox([self.build_button, self.reset_button]), self.out],
                             layout=W.Layout(display="none"))
        self.source = None  # the Lowered the text came from
        self.result: EditResult | None = None
        self.on_toggle = on_toggle
        self.toggle.observe(self._toggled, "value")
        self.build_button.on_click(lambda _: self.build())
        self.reset_button.on_click(lambda _: self.reset())

    def _toggled(self, change) -> None:
        self.widget.layout.display = "flex" if change["new"] else "none"
        if change["new"] and self.source is not self.session.lowered:
            self.reset()
        if self.on_toggle is not None:
            self.on_toggle(change["new"])

    def on_session(self) -> None:
        """The cell's MLIR changed (new bounds): keep the user's edits, say what they are based on."""
        stale = self.source is not None and self.source is not self.session.lowered
        self.note.value = ('<div class="tripy-edit-note" style="color:#92400e;font-size:12px">The original '
                           "changed since this text was taken (bounds edited): the edit still builds against "
                           "the module it came from; <b>Reset to original</b> takes the new one.</div>"
                           if stale else "")

    def reset(self) -> None:
        self.source = self.session.lowered
        self.text.value = "" if self.source is None else editable_text(self.source)
        lines = self.text.value.count("\n") + 2
        self.text.layout.height = f"{min(max(lines, 8), 32) * 1.45 + 1:.1f}em"
        self.out.value = self.note.value = ""

    def _original_exe(self):
        """The Executable built from the edited text's source module, with the session's engine/level."""
        s = self.session
        if s.built is not None and s.built.lowered is self.source:
            return s.exe
        for built in s._built.values():
            if built.lowered is self.source and built.optimization_level == s.optimization_level:
                return built.executable()
        return self.source.build(engine=s.engine, optimization_level=s.optimization_level).executable()

    @property
    def exe_name(self) -> str:
        return f"{self.session.exe_name}_edited"

    def build(self) -> None:
        s = self.session
        if self.source is None:
            self.out.value = views.status_html("No MLIR yet: fix the cell's error first.", "error")
            return
        self.out.value = views.status_html("building the edited module…", "busy")
        try:
            original = self._original_exe()
            self.result = build_edited(self.text.value, self.source, original, s.engine, s.optimization_level)
        except Exception as exc:  # parse/verify errors (line, column), engine errors: shown, widget alive
            self.result = None
            self.out.value = error_html(exc, self.text.value)
            return
        s.namespace[self.exe_name] = self.result.exe
        self.out.value = result_html(self.result, self.exe_name)
