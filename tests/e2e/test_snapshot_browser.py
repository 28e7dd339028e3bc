"""Saved %%tpcompile notebooks keep their stages: reopened in JupyterLab with no kernel and untrusted,
exported by nbconvert, and as a stand-alone report, each shows the static snapshot of every cell.

The notebook is executed once with nbclient (a real kernel, no widget state stored: what JupyterLab
saves by default). Screenshots go to test-results/snapshot-*.png.
"""

from __future__ import annotations

import html
import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e

nbformat = pytest.importorskip("nbformat")

CELLS = [
    "%load_ext tripy_lab\nimport tripy_lab as tp\ntp.config.engine = 'reference'",
    "%%tpcompile add_exe a=f32[1:2:3,4]\ndef add(a):\n    return a + a\n",
    "%%tpcompile mm_exe x=f32[b=1:4:8,16] w=f32[16,8]\ndef mm(x, w):\n    return tp.relu(x @ w)\n",
]
PROFILES = ["tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>",
            "tensorrt.shape_profile<min = [1, 16], opt = [4, 16], max = [8, 16]>"]
TIMEOUT = 60_000


@pytest.fixture(scope="module")
def saved(jupyter_server, tmp_path_factory) -> dict:
    """The executed notebook (in the server's root), its nbconvert HTML and its report."""
    from nbclient import NotebookClient

    from tripy_lab.lab import report_notebook

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    work = tmp_path_factory.mktemp("snapshot-nb")
    NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=False,
                   resources={"metadata": {"path": str(work)}}).execute()
    path = Path(jupyter_server["root"]) / "snapshot.ipynb"
    nbformat.write(nb, path)
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nb)
    exported = work / "snapshot-nbconvert.html"
    exported.write_text(body, encoding="utf-8")
    return {"nb": nb, "path": path, "nbconvert": exported, "report": report_notebook(path, work / "report.html")}


def check_snapshots(page, root, name: str) -> None:
    """Every %%tpcompile cell's snapshot shows its trace SVG, MLIR (with the shape profile) and layer table."""
    snaps = root.locator(".tripy-snapshot")
    expect(snaps).to_have_count(len(PROFILES), timeout=TIMEOUT)
    for k, profile in enumerate(PROFILES):
        snap = snaps.nth(k)
        snap.scroll_into_view_if_needed()
        graph = snap.locator(".tripy-graph img.tripy-graph-image")
        expect(graph).to_be_visible()
        graph.evaluate("img => img.decode()")  # a broken image rejects
        assert graph.evaluate("img => img.naturalWidth > 0"), graph.get_attribute("src")[:300]
        mlir = snap.locator(".tripy-mlir")
        expect(mlir).to_be_visible()
        expect(mlir).to_contain_text(profile)
        layers = snap.locator(".tripy-layers table")
        expect(layers).to_be_visible()
        assert layers.locator("tbody tr").count() >= 1
        expect(layers.locator("thead")).to_contain_text("source ops")
        mlir.scroll_into_view_if_needed()
        page.screenshot(path=str(_results() / f"snapshot-{name}-cell{k + 1}.png"))
    # The snapshot itself carries no script and no <style> (nbconvert's page has its own scripts).
    assert snaps.locator("script, style").count() == 0


def _results() -> Path:
    out = Path(__file__).resolve().parents[2] / "test-results"
    out.mkdir(exist_ok=True)
    return out


def test_reopened_untrusted_without_a_kernel_shows_every_stage(lab, saved):
    page = lab.page
    # No kernel: the frontend may not start one (session creation fails), nothing from the live run exists.
    page.route("**/api/sessions**", lambda route: route.abort() if route.request.method == "POST"
               else route.continue_())
    page.goto(f"{lab.server['base']}/lab/tree/snapshot.ipynb?reset&token={lab.server['token']}")
    dialog = page.get_by_role("dialog").filter(has_text="Error Starting Kernel")
    dialog.get_by_role("button", name="Ok").click(timeout=TIMEOUT)
    page.get_by_role("dialog").filter(has_text="Select Kernel").get_by_role("button", name="No Kernel").click(
        timeout=TIMEOUT)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator(".jp-Cell")).to_have_count(len(CELLS), timeout=TIMEOUT)
    trusted = page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1).trusted")
    assert trusted is False
    lab.screenshot("snapshot-jupyterlab-untrusted.png")
    check_snapshots(page, panel, "jupyterlab")
    # The live widget's renderer is not used for untrusted outputs: no "Loading widget..." placeholders.
    expect(panel.locator(".jp-OutputArea-output", has_text="Loading widget")).to_have_count(0)


def test_nbconvert_html_offline_shows_every_stage(page, saved):
    page.context.set_offline(True)
    page.goto(saved["nbconvert"].as_uri())
    check_snapshots(page, page.locator("body"), "nbconvert")
    page.screenshot(path=str(_results() / "snapshot-nbconvert.png"), full_page=False)


def test_report_offline_shows_every_stage(page, saved):
    page.context.set_offline(True)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto(saved["report"].as_uri())
    check_snapshots(page, page.locator("body"), "report")
    assert [u for u in requests if not u.startswith("file://")] == []
    assert page.locator("script").count() == 0
    page.screenshot(path=str(_results() / "snapshot-report.png"))
    assert os.path.getsize(saved["report"]) < 1_000_000


def test_live_edits_reach_the_saved_file(lab):
    """Move the max slider in a live lab, wait for the lab to settle, save: the file holds the new snapshot."""
    lab.put_notebook("live-snapshot.ipynb", CELLS[:2])
    nb = lab.open("live-snapshot.ipynb")
    lab.run_cell(0)
    expect(nb.locator(".jp-Cell").nth(0).locator(".jp-InputPrompt")).to_contain_text("[1]", timeout=TIMEOUT)
    lab.run_cell(1)
    view = nb.locator(".jp-OutputArea .tripy-lab")
    expect(view.locator(".tripy-status-ok")).to_contain_text("add_exe", timeout=TIMEOUT)
    handle = view.locator(".tripy-range .noUi-handle-upper").first
    handle.focus()
    handle.press("ArrowRight")
    expect(view.locator(".tripy-bounds-text input").first).to_have_value("1:2:4", timeout=TIMEOUT)
    # The output is re-sent once the lab has been quiet for UPDATE_DELAY_SECONDS; then the view is re-created.
    lab.page.wait_for_timeout(4000)
    expect(nb.locator(".jp-OutputArea .tripy-lab")).to_have_count(1, timeout=TIMEOUT)
    lab.page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    wanted = PROFILES[0].replace("max = [3, 4]", "max = [4, 4]")
    text_of = lambda markup: html.unescape(re.sub(r"<[^>]+>", "", markup))
    path = Path(lab.server["root"]) / "live-snapshot.ipynb"
    for _ in range(100):  # the server writes the file a moment after the save resolves
        outputs = nbformat.read(path, 4).cells[1].outputs
        if outputs and wanted in text_of(outputs[0].data.get("text/html", "")):
            break
        lab.page.wait_for_timeout(100)
    (output,) = outputs
    assert set(output.data) >= {"application/vnd.jupyter.widget-view+json", "text/html", "text/plain"}
    assert wanted in text_of(output.data["text/html"])
    lab.screenshot("snapshot-live-after-update.png", view)
