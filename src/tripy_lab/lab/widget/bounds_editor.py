"""The bounds editor: ipywidgets over a BoundsModel (the model is the single source of truth).

Per tensor parameter: a dtype menu, +/- dim buttons, and per dim a static/dynamic toggle, a min/max
range slider, an opt slider kept inside it, and a text box for exact ``min:opt:max`` bounds.
A DimensionInputInfo parameter gets one such row for its value range.
"""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as W

from tripy_lab.lab.bounds_model import BoundsModel, DimState
from tripy_lab.lab.html import esc
from tripy_lab.lab.spec import SHORT_NAMES
from tripy_lab.lab.views import draw as views

DTYPE_OPTIONS = [(f"{short} ({name})", name) for name, short in SHORT_NAMES.items()]


def _limit(d: DimState, current: int = 0) -> int:
    """Slider scale: at least twice the max, growing (never shrinking) as max reaches the end."""
    want = max(8, 2 * max(d.max, d.opt, 1))
    return max(current, want)


def parse_bounds_text(text: str) -> tuple[int, int, int]:
    """``"4"`` or ``"1:2:3"`` -> (min, opt, max); ValueError with a readable message otherwise."""
    parts = [p.strip() for p in text.strip().split(":")]
    if len(parts) not in (1, 3) or not all(p.lstrip("-").isdigit() for p in parts):
        raise ValueError(f"cannot read {text!r}: expected N or min:opt:max")
    values = [int(p) for p in parts]
    return (values[0],) * 3 if len(values) == 1 else tuple(values)  # type: ignore[return-value]


class DimRow:
    """Widgets for one dim (index None: a DimensionInputInfo's value range)."""

    def __init__(self, editor: BoundsEditor, param: str, index: int | None):
        self.editor, self.param, self.index = editor, param, index
        d = self.state()
        self.limit = _limit(d)
        label = "value" if index is None else f"dim {index}" + (f" ({d.name})" if d.name else "")
        self.label = W.Label(label, layout=W.Layout(width="110px"))
        self.toggle = W.ToggleButton(value=not d.static, description="dynamic", tooltip="static / dynamic",
                                     layout=W.Layout(width="90px"))
        self.range = W.IntRangeSlider(value=(d.min, d.max), min=0, max=self.limit, description="min/max",
                                      continuous_update=False, layout=W.Layout(width="320px"))
        self.opt = W.IntSlider(value=d.opt, min=d.min, max=max(d.max, d.min), description="opt",
                               continuous_update=False, layout=W.Layout(width="260px"))
        self.text = W.Text(value=self.bounds_text(d), continuous_update=False, placeholder="min:opt:max",
                           layout=W.Layout(width="120px"))
        self.range.add_class("tripy-range")
        self.opt.add_class("tripy-opt")
        self.text.add_class("tripy-bounds-text")
        if index is None:
            self.toggle.layout.display = "none"
        self.toggle.observe(self._on_toggle, "value")
        self.range.observe(self._on_range, "value")
        self.opt.observe(self._on_opt, "value")
        self.text.observe(self._on_text, "value")
        self.box = W.HBox([self.label, self.toggle, self.range, self.opt, self.text])
        self.box.add_class("tripy-dim-row")
        self.sync()

    def state(self) -> DimState:
        p = self.editor.model.params[self.param]
        return p.value if self.index is None else p.dims[self.index]

    @staticmethod
    def bounds_text(d: DimState) -> str:
        return str(d.min) if d.static else f"{d.min}:{d.opt}:{d.max}"

    def sync(self) -> None:
        """Model -> widgets (observers are muted by the editor while this runs)."""
        d = self.state()
        ok = 0 <= d.min <= d.opt <= d.max
        static = d.static and self.index is not None
        self.toggle.value = not static
        self.toggle.description = "static" if static else "dynamic"
        self.text.value = self.bounds_text(d) if ok or not self.text.value else self.text.value
        if not ok:
            return  # leave the sliders where they were; the problem is shown as text
        if d.max >= self.range.max or d.max > self.limit:
            self.limit = _limit(d, self.limit)
        self.range.max = self.limit
        self.range.value = (d.min, d.max)
        self.range.disabled = static
        # Widen before narrowing so the opt slider never rejects a value transiently.
        self.opt.max = max(self.opt.max, d.max, self.limit if static else 0)
        self.opt.min = min(self.opt.min, d.min)
        self.opt.value = d.opt
        # A static dim's slider is its size, over the whole scale; a dynamic one's opt stays in [min, max].
        self.opt.min, self.opt.max = (0, self.limit) if static else (d.min, d.max)
        self.opt.description = "size" if static else "opt"

    def _edit(self, fn: Callable[[], None]) -> None:
        if not self.editor.muted:
            self.editor.text_errors.pop((self.param, self.index), None)
            fn()
            self.editor.changed()

    def _on_toggle(self, change) -> None:
        self._edit(lambda: self.editor.model.set_static(self.param, self.index, not change["new"]))

    def _on_range(self, change) -> None:
        lo, hi = change["new"]
        self._edit(lambda: self.editor.model.set_range(self.param, self.index, lo, hi))

    def _on_opt(self, change) -> None:
        d = self.state()
        value = change["new"]
        if d.static and self.index is not None:
            self._edit(lambda: self.editor.model.set_bounds(self.param, self.index, value, value, value))
        else:
            self._edit(lambda: self.editor.model.set_opt(self.param, self.index, value))

    def _on_text(self, change) -> None:
        if self.editor.muted:
            return
        try:
            lo, mid, hi = parse_bounds_text(change["new"])
        except ValueError as exc:
            self.editor.text_errors[(self.param, self.index)] = str(exc)
            self.editor.show_problems()
            return
        self._edit(lambda: self.editor.model.set_bounds(self.param, self.index, lo, mid, hi))


class BoundsEditor:
    """``.widget`` is the editor; ``on_change()`` is called after every accepted edit."""

    def __init__(self, model: BoundsModel, on_change: Callable[[], None] | None = None,
                 editable_rank: set[str] | None = None):
        self.model = model
        self.on_change = on_change or (lambda: None)
        self.editable_rank = editable_rank if editable_rank is not None else set()
        self.muted = False
        self.text_errors: dict = {}
        self.rows: list[DimRow] = []
        self.problems = W.HTML()
        self.problems.add_class("tripy-problems-box")
        self.code = W.HTML()
        self.code_toggle = W.ToggleButton(description="show Tripy code", value=False, icon="code")
        self.code_toggle.observe(lambda _: self.show_code(), "value")
        self.params_box = W.VBox()
        self.widget = W.VBox([self.params_box, self.problems, self.code_toggle, self.code])
        self.widget.add_class("tripy-bounds-editor")
        self.rebuild()

    def _param_box(self, name: str) -> W.Widget:
        p = self.model.params[name]
        head: list[W.Widget] = [W.HTML(f"<b>{esc(name)}</b>", layout=W.Layout(width="110px"))]
        if p.kind == "const":
            return W.HBox([*head, W.Label(f"constant: {type(p.const).__name__}")])
        if name in self.editable_rank:
            kind = W.Dropdown(options=[("tensor", "tensor"), ("DimensionSize", "dim")], value=p.kind,
                              layout=W.Layout(width="130px"))
            set_kind = lambda c, n=name: self._structural(lambda: self.model.set_kind(n, c["new"]))
            kind.observe(set_kind, "value")
            head.append(kind)
        rows = []
        if p.kind == "tensor":
            dtype = W.Dropdown(options=DTYPE_OPTIONS, value=p.dtype, layout=W.Layout(width="150px"))
            dtype.add_class("tripy-dtype")
            dtype.observe(lambda c, n=name: self._edit(lambda: self.model.set_dtype(n, c["new"])), "value")
            head.append(dtype)
            if name in self.editable_rank:
                add = W.Button(description="+ dim", layout=W.Layout(width="70px"))
                drop = W.Button(description="- dim", layout=W.Layout(width="70px"))
                add.on_click(lambda _, n=name: self._structural(lambda: self.model.add_dim(n)))
                drop.on_click(lambda _, n=name: self._structural(lambda: self.model.remove_dim(n)))
                head += [add, drop]
            rows = [DimRow(self, name, i) for i in range(len(p.dims))]
            if not p.dims:
                head.append(W.Label("scalar"))
        else:
            rows = [DimRow(self, name, None)]
        self.rows += rows
        return W.VBox([W.HBox(head), *(r.box for r in rows)])

    def rebuild(self) -> None:
        self.rows = []
        self.muted = True
        try:
            self.params_box.children = [self._param_box(n) for n in self.model.params]
        finally:
            self.muted = False
        self.show_problems()
        self.show_code()

    def _structural(self, fn: Callable[[], None]) -> None:
        fn()
        self.rebuild()
        self.on_change()

    def _edit(self, fn: Callable[[], None]) -> None:
        if not self.muted:
            fn()
            self.changed()

    def changed(self) -> None:
        """After a model edit: re-sync every row (NamedDimension groups move together), flag, notify."""
        self.sync()
        self.show_problems()
        self.show_code()
        self.on_change()

    def sync(self) -> None:
        self.muted = True
        try:
            for row in self.rows:
                row.sync()
        finally:
            self.muted = False

    def all_problems(self) -> list:
        return list(self.text_errors.values()) + self.model.problems()

    def show_problems(self) -> None:
        self.problems.value = views.problems_html(self.all_problems())

    def show_code(self) -> None:
        self.code_toggle.description = "hide Tripy code" if self.code_toggle.value else "show Tripy code"
        if not self.code_toggle.value:
            self.code.value = ""
            return
        func = getattr(self, "func_name", "func")
        exe = getattr(self, "exe_name", "exe")
        code = esc(self.model.code(func, exe))
        compact = esc(self.model.compact())
        self.code.value = (
            f'<pre class="tripy-code" style="font-size:12px">{code}</pre>'
            f'<div style="font-size:11px">compact: <code>%%tpcompile {exe} {compact}</code></div>'
        )
