"""Stored notebooks keep their stages: every lab output in notebooks/*.ipynb carries its static snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tripy_lab.lab.cli import reports
from tripy_lab.lab.views import snapshot

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def missing_snapshots(nb: dict) -> list[str]:
    """Where a %%tpcompile (widgets) cell, or any widget output, has outputs but no static snapshot."""
    problems = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        source = reports._text(cell.get("source", ""))
        outputs = cell.get("outputs", [])
        has_snapshot = [snapshot.MARKER in reports._text(o.get("data", {}).get("text/html", "")) for o in outputs]
        for o, ok in zip(outputs, has_snapshot):
            if snapshot.WIDGET_MIME in o.get("data", {}) and not ok and "%%tpcompile" in source:
                problems.append(f"cell {index + 1}: a widget output without its static snapshot")
        lab_cell = source.lstrip().startswith("%%tpcompile") and "--no-widgets" not in source.splitlines()[0]
        errored = any(o.get("output_type") == "error" for o in outputs)
        if lab_cell and outputs and not errored and not any(has_snapshot):
            problems.append(f"cell {index + 1}: %%tpcompile output without a static snapshot")
    return problems


def test_the_check_finds_a_missing_snapshot():
    widget = {"output_type": "display_data", "metadata": {},
              "data": {snapshot.WIDGET_MIME: {"model_id": "x"}, "text/plain": "VBox(...)"}}
    cell = {"cell_type": "code", "source": "%%tpcompile e a=f32[2]\ndef f(a): return a", "outputs": [widget]}
    assert len(missing_snapshots({"cells": [cell]})) == 2
    widget["data"]["text/html"] = f"<div {snapshot.MARKER}>...</div>"
    assert missing_snapshots({"cells": [cell]}) == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_stored_notebook_outputs_carry_their_snapshots(path):
    assert missing_snapshots(json.loads(path.read_text(encoding="utf-8"))) == []
