"""Renderers that can't be scripted: malicious names through trace -> DOT -> SVG -> widget HTML -> static
snapshot (and report) -> crosswalk bundle, each drawn in Chromium, with a dialog handler and a window
sentinel; the page's styles must not move.

Every payload, if it ever ran, sets ``window.__pwned`` and opens a dialog. The names go through the real
pipeline (trace, lowering, reference build) and the lab's own renderers (``lab.views.tabs``, ``lab.views.crosswalk``).
Batched: many names per page, few pages.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from playwright.sync_api import expect

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.lab.cli import reports
from tripy_lab.lab.html import sanitize
from tripy_lab.lab.views import crosswalk, snapshot, tabs
from tripy_lab.lab.views.crosswalk_schema import MIME_TYPE, validate_bundle

pytestmark = pytest.mark.e2e

PWN = "window.__pwned=1;alert(1)"
PAYLOADS = [
    f"<script>{PWN}</script>", f'<img src=x onerror="{PWN}">', f'"><svg onload="{PWN}">', f"'><svg/onload={PWN}>",
    f'</text><a xlink:href="javascript:{PWN}"><text>click</text></a>', f"javascript:{PWN}",
    f'<a href="javascript:{PWN}">link</a>', '<iframe srcdoc="<script>parent.__pwned=1</script>">',
    f"]]><script>{PWN}</script>", f'<math><mi xlink:href="javascript:{PWN}">m</mi></math>',
    "<style>body{background:rgb(255,0,0)!important}*{display:none!important}</style>",
    f'<div style="position:fixed;inset:0;background:red" onmouseover="{PWN}">', f"<!--<img src=x onerror={PWN}>-->",
    f'<foreignObject><body onload="{PWN}"></body></foreignObject>', "\\", '"', "'", "\n", "&lt;b&gt;", "<", ">",
    f'<a href="data:text/html,<script>{PWN}</script>">d</a>', "${alert(1)}", "{{7*7}}", "\\L\\N", "\x00", "\u202e",
]
name = st.one_of(st.sampled_from(PAYLOADS), st.lists(st.sampled_from(PAYLOADS), min_size=2, max_size=3).map("".join),
                 st.tuples(st.text(max_size=6), st.sampled_from(PAYLOADS)).map("".join))
batches = st.lists(name, min_size=4, max_size=8, unique=True).filter(
    lambda ns: not any(n.startswith("%t") or n in ("a", "") for n in ns))

SENTINEL_PAGE = """<!doctype html><html><head><style>
body { background: rgb(1, 2, 3); } #probe { color: rgb(4, 5, 6); display: block; }
</style></head><body><div id="probe">probe</div><div id="out"></div></body></html>"""
PROBE_JS = """() => {
  const s = e => e ? getComputedStyle(e) : null;
  const pick = e => e && [s(e).display, s(e).color, s(e).backgroundColor, s(e).visibility, s(e).position].join('|');
  return { body: pick(document.body), probe: pick(document.getElementById('probe')),
           shell: pick(document.querySelector('#jp-top-panel')), nb: pick(document.querySelector('.jp-NotebookPanel')),
           pwned: window.__pwned === undefined ? null : String(window.__pwned) };
}"""
CLICK_ALL_JS = """(root) => {
  const items = document.querySelectorAll(root + ' a, ' + root + ' g.node, ' + root + ' [onclick]');
  items.forEach(n => n.dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true})));
  items.forEach(n => n.dispatchEvent(new MouseEvent('mouseover', {bubbles: true})));
  return items.length;
}"""


def artifacts(names: list[str]) -> dict:
    """Everything the lab renders for a program whose ops carry ``names``."""

    def f(a):
        x = a
        for n in names:
            x = tp.relu(x + 1.0)
            x.name = n
        return x

    traced = pipeline.trace(f, args=[tp.InputInfo((2,), tp.float32)])
    lowered = traced.lower()
    built = lowered.build(engine="reference")
    error = {"stage": "build", "summary": f"op {names[0]} failed", "details": names, "location": names[-1],
             "op": names[0]}
    panes = tabs.stage_views(traced, lowered, built, error=error, error_op=names[0])
    svg = panes["trace"].svg
    assert svg is not None, panes["trace"].note  # graphviz drew it: the DOT survived every name
    raw = [view.html() for view in panes.values()]  # our escaping alone (no sanitizer) must hold
    widget = raw + [sanitize(h) for h in raw]  # ... and what ui.LabWidget sends: sanitize(view.html())
    snap = snapshot.snapshot_html(names[0], panes, (names[1], "error"))
    report = reports.page(names[0], [(names[1], names[2], snap)])
    bundle = crosswalk.build_bundle(traced, lowered, built, svg=svg, title=names[0],
                                    error={"message": names[1], "op": names[0]})
    assert validate_bundle(bundle) == []
    wasm = {**bundle, "svg": None}
    # the Trace pane draws the folded graph's top level: count its nodes (each drawn once raw, once sanitized)
    n_nodes = raw[0].count('class="node"')
    assert n_nodes >= 3, raw[0][:500]
    return {"widget": widget, "snapshot": snap, "report": report, "bundle": bundle, "wasm": wasm,
            "n_ops": len(traced.trace.ops), "n_nodes": n_nodes}


def hostile_bundle() -> dict:
    """A forged bundle (not made by us): the issue's attacks on the renderer's SVG path."""
    svg = ("<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink' viewBox='0 0 200 80'>"
           "<style>body{background:rgb(255,0,0)!important} .jp-LabShell{display:none!important}</style>"
           f"<script>{PWN}</script>"
           f"<g class='node' id='op-%t0' onclick='{PWN}' onmouseover='{PWN}'><title>%t0</title>"
           f"<a xlink:href='javascript:{PWN}' href='javascript:{PWN}'><text x='5' y='20'>click me</text></a></g>"
           f"<a href='data:text/html,&lt;script&gt;{PWN}&lt;/script&gt;'><text x='5' y='40'>data</text></a>"
           f"<foreignObject width='100' height='20'><img xmlns='http://www.w3.org/1999/xhtml' src='x' onerror='{PWN}'/>"
           f"</foreignObject><image href='x' onerror='{PWN}'/><animate onbegin='{PWN}' attributeName='x' dur='1s'/>"
           f"<set attributeName='onmouseover' to='{PWN}'/>"
           f"<use href='data:image/svg+xml,&lt;svg onload=&quot;{PWN}&quot;/&gt;'/>"
           "</svg>")  # fmt: skip
    return {"version": 1, "title": "hostile", "svg": svg, "dot": 'digraph g { n [id="op-%t0"]; }',
            "ops": [{"id": "%t0", "label": "<img src=x onerror=alert(1)>", "line": None, "mlir": [0], "layers": []}],
            "mlir": [{"line": 1, "text": f"<script>{PWN}</script>", "op": "%t0"}], "layers": [],
            "error": {"message": f"<img src=x onerror=\"{PWN}\">", "op": "%t0"}}


@pytest.fixture
def dialogs(page):
    seen: list[str] = []

    def on_dialog(d):
        if d.type == "beforeunload":  # JupyterLab asking before we leave a notebook: not a payload
            d.accept()
            return
        seen.append(f"{d.type}: {d.message}")
        d.dismiss()

    page.on("dialog", on_dialog)
    return seen


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(names=batches)
def test_widget_html_runs_no_script_and_keeps_the_page_styles(page, dialogs, names):
    dialogs.clear()
    art = artifacts(names)
    page.set_content(SENTINEL_PAGE)
    before = page.evaluate(PROBE_JS)
    # ipywidgets' HTML widget sets its value with innerHTML: do exactly that, one fragment per widget
    page.evaluate("""(frags) => { const out = document.getElementById('out');
        for (const f of frags) { const d = document.createElement('div'); d.innerHTML = f; out.appendChild(d); } }""",
                  art["widget"] + [art["snapshot"]])
    assert page.locator("#out g.node").count() == 2 * art["n_nodes"]  # drawn twice (raw, sanitized)
    # the snapshot's graph as images: the top level, then opened groups
    assert page.locator("#out .tripy-snapshot img.tripy-graph-image").count() >= 1
    page.evaluate(CLICK_ALL_JS, "#out")
    page.wait_for_timeout(150)  # onerror/onload fire asynchronously
    after = page.evaluate(PROBE_JS)
    assert dialogs == [] and after["pwned"] is None, (dialogs, names)
    assert after == before, names
    text = page.evaluate("() => document.getElementById('out').textContent")
    for n in names:  # every name is shown as text (HTML parsing drops NUL and turns CR LF into LF)
        assert n.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n") in text, n

    # the stand-alone report: a whole page of its own
    page.set_content(art["report"])
    page.evaluate(CLICK_ALL_JS, "body")
    page.wait_for_timeout(100)
    assert dialogs == [] and page.evaluate(PROBE_JS)["pwned"] is None, (dialogs, names)
    norm = names[0].replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    assert page.locator("h1").text_content() == norm  # the title is text


def notebook_cells(batches_: list[dict]) -> list[str]:
    cells = []
    for art in batches_:
        payload = json.dumps({"bundle": art["bundle"], "wasm": art["wasm"],
                              "html": "".join(art["widget"]) + art["snapshot"]})
        cells.append("import json\nfrom IPython.display import display, HTML\n"
                     f"d = json.loads({payload!r})\n"
                     f"display({{{MIME_TYPE!r}: d['bundle'], 'text/plain': 'crosswalk'}}, raw=True)\n"
                     f"display({{{MIME_TYPE!r}: d['wasm'], 'text/plain': 'crosswalk'}}, raw=True)\n"
                     "display(HTML(d['html']))\n")
    return cells


def untrusted_notebook(server, name: str, batches_: list[dict]) -> None:
    """Outputs saved in the file, no signature: JupyterLab opens it untrusted."""
    cells = []
    for i, art in enumerate(batches_):
        outs = [{"output_type": "display_data", "metadata": {}, "data": {MIME_TYPE: b, "text/plain": "crosswalk"}}
                for b in (art["bundle"], art["wasm"])]
        html_out = "".join(art["widget"]) + art["snapshot"]
        outs.append({"output_type": "display_data", "metadata": {}, "data": {"text/html": html_out}})
        cells.append({"cell_type": "code", "metadata": {}, "source": "# saved outputs", "outputs": outs,
                      "execution_count": i + 1, "id": f"c{i}"})
    nb = {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
          "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}}
    (server["root"] / name).write_text(json.dumps(nb))


def check_notebook(lab, dialogs, arts: list[dict], shot: str) -> dict:
    n_views = 2 * len(arts)
    views = lab.notebook.locator(".jp-OutputArea .tripy-crosswalk")
    expect(views).to_have_count(n_views, timeout=60_000)
    expect(lab.notebook.locator('[data-tripy-renderer="wasm"]')).to_have_count(n_views // 2, timeout=60_000)
    # every op's node was found by its id, whatever its name, in graphviz's SVG and in the wasm drawing
    matched = lab.page.evaluate("""() => [...document.querySelectorAll('.jp-OutputArea .tripy-crosswalk')]
        .map(v => v.querySelectorAll('g.node[data-op-id]').length)""")
    assert matched == [len(a["bundle"]["ops"]) for a in arts for _ in (0, 1)]
    assert lab.page.evaluate(CLICK_ALL_JS, ".jp-OutputArea") > n_views
    lab.page.wait_for_timeout(300)
    after = lab.page.evaluate(PROBE_JS)
    assert dialogs == [] and after["pwned"] is None, dialogs
    # nothing a bundle carried survived as markup: no style/script/foreignObject/handlers/links in our views
    leaked = lab.page.evaluate("""() => [...document.querySelectorAll('.tripy-crosswalk *')].filter(n =>
        /^(style|script|foreignobject|iframe|image|use|animate|set)$/i.test(n.nodeName) ||
        [...n.attributes].some(a => /^on|^style$|href$/i.test(a.name))).map(n => n.outerHTML.slice(0, 80))""")
    assert leaked == []
    lab.screenshot(shot)
    return after


# names whose trace graph crashes the wasm graphviz's dot layout ("table index is out of bounds"; a CI run found them):
# the crosswalk then draws it with fdp (extension/src/zoom.ts, drawDot) and later graphs still draw
DOT_LAYOUT_CRASH = ['<a href="javascript:window.__pwned=1;alert(1)">link</a>',
                    "<script>window.__pwned=1;alert(1)</script>",
                    '<iframe srcdoc="<script>parent.__pwned=1</script>">',
                    '<math><mi xlink:href="javascript:window.__pwned=1;alert(1)">m</mi></math>', "\n", "\\L\\N",
                    "'><svg/onload=window.__pwned=1;alert(1)>",
                    ">08<style>body{background:rgb(255,0,0)!important}*{display:none!important}</style>"]


@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
@given(first=batches, second=batches)
@example(first=DOT_LAYOUT_CRASH, second=["b1", "b2", "b3", "b4"])
def test_crosswalk_and_html_in_trusted_and_untrusted_notebooks(lab, dialogs, first, second):
    dialogs.clear()
    arts = [artifacts(first), artifacts(second)]
    hostile = {"bundle": hostile_bundle(), "wasm": {**hostile_bundle(), "svg": None}, "widget": [], "snapshot": ""}
    arts.append(hostile)

    # untrusted: outputs saved in the file (crosswalk renders, being safe; text/html gets JupyterLab's sanitizer)
    untrusted_notebook(lab.server, "untrusted.ipynb", arts)
    lab.open("untrusted.ipynb")
    before = lab.page.evaluate(PROBE_JS)
    after = check_notebook(lab, dialogs, arts, "security-untrusted.png")
    assert after == before

    # trusted: the kernel displays the same outputs live; text/html is then inserted as is, so the lab's own
    # escaping is the only barrier (as in the ipywidgets HTML widget)
    lab.put_notebook("trusted.ipynb", notebook_cells(arts))
    lab.open("trusted.ipynb")
    before = lab.page.evaluate(PROBE_JS)
    lab.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    after = check_notebook(lab, dialogs, arts, "security-trusted.png")
    assert after == before
