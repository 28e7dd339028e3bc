"""The static snapshot: every stage pane as plain HTML next to the live widget, in the same output.

``snapshot_html`` lays the panes (``tabs`` views, rendered by the same ``view.html`` as the widget) out as
``<details>`` sections with inline styles: no ``<script>``, no ``<style>``, no form inputs, so it reads the
same in a live JupyterLab, an untrusted notebook reopened without a kernel (JupyterLab's sanitizer keeps
details/summary, tables, SVG and inline styles), ``nbconvert --to html`` and a stand-alone report.

``SnapshotDisplay`` is the one output: ``{widget-view, text/html snapshot, text/plain summary}``, shown with
a display id and updated in place (``update_display``) after the lab settles, so the saved file holds the
latest state. nbconvert and untrusted JupyterLab pick the ``text/html`` (the widget view needs a kernel).

Known gap: a *trusted* notebook reopened without a kernel shows ipywidgets' "Loading widget..." instead: its
renderer outranks ``text/html`` and has no fallback. Only a frontend renderer can fix that (see issue 9 notes).
"""

from __future__ import annotations

from collections.abc import Callable

from tripy_lab.lab.html import esc, sanitize
from tripy_lab.lab.views import tabs

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CLASS = "tripy-snapshot"
MARKER = 'data-tripy-snapshot="1"'  # how report_notebook and the notebook test find snapshots in outputs
PANES = (("trace", "Trace"), ("mlir", "MLIR"), ("engine", "Engine & layers"), ("run", "Run & time"),
         ("log", "Log"), ("error", "Error"), ("tune", "Tune"))
OPTIONAL = ("tune",)  # shown only when there is something (a cell that never tuned has no Tune section)
# Seconds without lab activity (edits, builds, tab switches, runs) before the output is re-sent: JupyterLab
# re-creates the whole widget view on each update (focus and an ongoing drag are lost), so it must not
# happen while the user is working with it.
UPDATE_DELAY_SECONDS = 2.0
NOTEBOOK_FOOTER = "Static snapshot of the lab: run the cell for the live widgets."

_STATUS_COLORS = {"info": "#1d4ed8", "busy": "#b45309", "error": "#b91c1c", "ok": "#15803d", "stale": "#6b7280"}


def _opened(key: str, view) -> bool:
    if key in ("trace", "mlir", "engine"):
        return True
    if key == "run":
        return getattr(view, "kind", "note") != "note"
    if key == "error":
        return getattr(view, "info", None) is not None
    return key == "tune"


def snapshot_html(title: str, panes: dict, status: tuple[str, str] | None = None,
                  limits: tabs.Limits = tabs.SNAPSHOT, keys: tuple[str, ...] | None = None,
                  footer: str = NOTEBOOK_FOOTER) -> str:
    """The sanitized static HTML of ``panes`` (key -> tabs view; a missing stage shows as not available);
    ``footer`` says what the reader can do next (a report written from a terminal has no cell to run)."""
    parts = [f'<div class="{CLASS}" {MARKER} style="font-size:13px;max-width:100%;overflow-x:auto">',
             f'<div style="margin:2px 0 4px 0"><b>{esc(title)}</b>']
    if status is not None:
        text, kind = status
        parts.append(f' · <span style="color:{_STATUS_COLORS.get(kind, "#374151")}">{esc(text)}</span>')
    parts.append("</div>")
    for key, name in PANES:
        if keys is not None and key not in keys:
            continue
        view = panes.get(key)
        if view is None and key in OPTIONAL:
            continue
        body = view.html(limits) if view is not None else "<i>not available (this stage has not run)</i>"
        opened = " open" if _opened(key, view) else ""
        parts.append(
            f'<details class="tripy-snapshot-{key}"{opened} style="margin:2px 0;border-left:3px solid #d1d5db;'
            f'padding-left:6px"><summary style="cursor:pointer;font-weight:bold">{esc(name)}</summary>'
            f'<div class="tripy-snapshot-pane" style="padding:2px 0 6px 0;overflow-x:auto">{body}</div></details>'
        )
    parts.append(f'<div class="tripy-snapshot-footer" style="font-size:11px;color:#6b7280">{esc(footer)}</div></div>')
    return sanitize("".join(parts))


def executable_panes(exe, run: tabs.RunView | None = None) -> dict:
    """Views of an Executable's stages (``exe.stages``), for ``show``/``report``."""
    st = exe.stages
    panes = tabs.stage_views(st.get("traced"), st.get("lowered"), st.get("built"))
    if run is not None:
        panes["run"] = run
    return panes


def status_of(exe) -> tuple[str, str]:
    built = exe.stages.get("built")
    engine = built.report.engine if built is not None else getattr(exe, "engine", "?")
    return f"built with the {engine} engine", "ok"  # the title already names the Executable


class SnapshotDisplay:
    """One output holding the live widget and its snapshot; ``changed()`` re-sends it once things settle.

    ``render()`` returns (snapshot HTML, text/plain summary). Without a running event loop (scripts,
    tests) or with ``delay <= 0`` the update is sent right away.
    """

    def __init__(self, widget, render: Callable[[], tuple[str, str]], delay: float | None = None):
        from tripy_lab.lab.session import Debouncer

        self.widget, self.render = widget, render
        self.handle = None
        self.sent_html: str | None = None
        self.updates = 0  # update_display messages sent (tests, benchmarks)
        self.debouncer = Debouncer(self.publish, UPDATE_DELAY_SECONDS if delay is None else delay)

    def bundle(self) -> dict:
        html_text, summary = self.render()
        data = dict(self.widget._repr_mimebundle_()) if self.widget is not None else {}
        data["text/html"] = html_text
        data["text/plain"] = summary
        return data

    def show(self):
        from IPython.display import display

        data = self.bundle()
        self.sent_html = data["text/html"]
        self.handle = display(data, raw=True, display_id=True)
        return self.handle

    def changed(self) -> None:
        if self.handle is not None:
            self.debouncer()

    def publish(self) -> None:
        """Send the current snapshot now, if it differs from the one the output holds."""
        self.debouncer.cancel()
        if self.handle is None:
            return
        data = self.bundle()
        if data["text/html"] == self.sent_html:
            return
        self.handle.update(data, raw=True)
        self.sent_html = data["text/html"]
        self.updates += 1

