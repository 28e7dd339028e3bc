"""A TRUSTED notebook keeps its stages too: the extension's widget-view wrapper shows the text/html snapshot
until ipywidgets has drawn a live view (extension/src/widget_fallback.ts).

Without it, a trusted output goes to ipywidgets' renderer, which shows "Loading widget..." (no kernel) or
"Error displaying widget: model not found" (fresh kernel) and hides the snapshot.
Screenshots go to test-results/widget-fallback-*.png.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import expect
from test_snapshot_browser import CELLS, PROFILES, TIMEOUT, check_snapshots

pytestmark = pytest.mark.e2e

nbformat = pytest.importorskip("nbformat")

WRAPPER = ".tripy-widget-fallback"


@pytest.fixture(scope="module")
def trusted_notebook(jupyter_server, tmp_path_factory) -> Path:
    """The executed notebook in the server's root, signed with the server's notary (same data dir)."""
    from nbclient import NotebookClient
    from nbformat.sign import NotebookNotary

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    work = tmp_path_factory.mktemp("fallback-nb")
    NotebookClient(nb, timeout=300, kernel_name="python3", store_widget_state=False,
                   resources={"metadata": {"path": str(work)}}).execute()
    NotebookNotary().sign(nb)
    path = Path(jupyter_server["root"]) / "trusted-snapshot.ipynb"
    nbformat.write(nb, path)
    return path


def _no_live_placeholders(panel) -> None:
    """ipywidgets' messages may be in the DOM (inside the hidden inner renderer) but never shown."""
    for text in ("Loading widget", "Error displaying widget"):
        for k in range(panel.get_by_text(text).count()):
            expect(panel.get_by_text(text).nth(k)).to_be_hidden()


def _is_trusted(page) -> bool:
    return page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(1).trusted")


def test_trusted_reopened_without_a_kernel_shows_the_snapshot(lab, trusted_notebook):
    page = lab.page
    page.route("**/api/sessions**", lambda route: route.abort() if route.request.method == "POST"
               else route.continue_())
    page.goto(f"{lab.server['base']}/lab/tree/{trusted_notebook.name}?reset&token={lab.server['token']}")
    page.get_by_role("dialog").filter(has_text="Error Starting Kernel").get_by_role("button", name="Ok").click(
        timeout=TIMEOUT)
    page.get_by_role("dialog").filter(has_text="Select Kernel").get_by_role("button", name="No Kernel").click(
        timeout=TIMEOUT)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator(".jp-Cell")).to_have_count(len(CELLS), timeout=TIMEOUT)
    assert _is_trusted(page) is True
    # Trusted: the widget-view renderer (our wrapper around ipywidgets') draws both outputs.
    wrappers = panel.locator(WRAPPER)
    expect(wrappers).to_have_count(len(PROFILES), timeout=TIMEOUT)
    for k in range(len(PROFILES)):
        expect(wrappers.nth(k)).to_have_attribute("data-tripy-live", "0")
        expect(wrappers.nth(k).locator(".tripy-widget-snapshot")).to_be_visible()
    check_snapshots(page, panel, "trusted-nokernel")
    _no_live_placeholders(panel)
    lab.screenshot("widget-fallback-trusted-nokernel.png")


def test_trusted_reopened_with_a_fresh_kernel_keeps_the_snapshot(lab, trusted_notebook):
    """A kernel runs but the stored outputs' widget models do not exist in it: the snapshot stays."""
    panel = lab.open(trusted_notebook.name)
    assert _is_trusted(lab.page) is True
    wrappers = panel.locator(WRAPPER)
    expect(wrappers).to_have_count(len(PROFILES), timeout=TIMEOUT)
    lab.page.wait_for_timeout(1500)  # let ipywidgets' manager try (and fail) to find the models
    for k in range(len(PROFILES)):
        expect(wrappers.nth(k)).to_have_attribute("data-tripy-live", "0")
    check_snapshots(lab.page, panel, "trusted-freshkernel")
    _no_live_placeholders(panel)
    lab.screenshot("widget-fallback-trusted-freshkernel.png")


def test_live_cell_shows_the_widget_and_hides_the_snapshot(lab):
    lab.put_notebook("fallback-live.ipynb", [*CELLS[:2], "import ipywidgets\nipywidgets.IntSlider(value=3)"])
    nb = lab.open("fallback-live.ipynb")
    lab.run_cell(0)
    expect(nb.locator(".jp-Cell").nth(0).locator(".jp-InputPrompt")).to_contain_text("[1]", timeout=TIMEOUT)
    lab.run_cell(1)
    wrapper = nb.locator(WRAPPER)
    expect(wrapper).to_have_count(1, timeout=TIMEOUT)
    expect(wrapper).to_have_attribute("data-tripy-live", "1", timeout=TIMEOUT)
    view = wrapper.locator(".tripy-widget-live .tripy-lab")
    expect(view.locator(".tripy-status-ok")).to_contain_text("add_exe", timeout=TIMEOUT)
    expect(view).to_be_visible()
    # The snapshot was rendered (the bundle has it) but is hidden behind the live view.
    snapshot = wrapper.locator(".tripy-widget-snapshot")
    expect(snapshot).to_have_count(1)
    expect(snapshot).to_be_hidden()
    expect(nb.locator(".tripy-snapshot")).to_be_hidden()
    lab.screenshot("widget-fallback-live.png", nb)
    # A widget without our snapshot is ipywidgets' own view, no snapshot pane added.
    lab.run_cell(2)
    other = nb.locator(".jp-Cell").nth(2).locator(".jp-OutputArea")
    expect(other.locator(".widget-slider")).to_be_visible(timeout=TIMEOUT)
    expect(other.locator(WRAPPER)).to_have_attribute("data-tripy-live", "1")
    expect(other.locator(".tripy-widget-snapshot")).to_have_count(0)
