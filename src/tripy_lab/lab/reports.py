"""Stand-alone HTML reports: one self-contained file (no network, no kernel, no script).

``report(exe, path)`` draws an Executable's stages; ``report_notebook(ipynb, path)`` collects the static
snapshots every ``%%tpcompile`` / ``show`` output stored in a saved notebook. A notebook may come from
anyone, so every stored snapshot is sanitized again before it goes into the report.
"""

from __future__ import annotations

import json
from pathlib import Path

from tripy_lab.core.errors import TripyException
from tripy_lab.lab import snapshot, tabs
from tripy_lab.lab.html import esc, sanitize, stylesheet

# A report is a file, not a notebook: keep far more of each pane than a snapshot does.
# A GPT-2-small report (2,750 trace ops, 3,000 MLIR lines and layers) stays < 1.5 MB (bench_lab_scale.py).
REPORT = tabs.Limits(svg_chars=300_000, text_chars=200_000, mlir_lines=1_200, table_rows=800, log_events=200,
                     svg_image=True)
_PAGE_STYLE = """body{font-family:system-ui,sans-serif;margin:16px 24px;color:#111827}
h1{font-size:20px}h2{font-size:16px;margin:20px 0 4px 0;border-top:1px solid #e5e7eb;padding-top:10px}
pre.tripy-source{background:#f9fafb;border:1px solid #e5e7eb;padding:6px;font-size:12px;overflow-x:auto}
.tripy-table{border-collapse:collapse}.tripy-table td,.tripy-table th{padding:1px 8px;text-align:left}"""


def _table_style() -> str:
    from tripy_lab.lab.tables import TABLE_CSS

    return stylesheet(TABLE_CSS, "body")


def page(title: str, sections: list[tuple[str, str, str]]) -> str:
    """A whole HTML document: one (heading, source code, snapshot HTML) section each."""
    body = []
    for heading, source, fragment in sections:
        body.append(f"<h2>{esc(heading)}</h2>")
        if source:
            body.append(f'<pre class="tripy-source">{esc(source)}</pre>')
        body.append(sanitize(fragment))
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
            # No network: nothing is fetched, and the policy says so to the browser too.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title)}</title><style>{_PAGE_STYLE}\n{_table_style()}</style></head><body>"
            f"<h1>{esc(title)}</h1>" + "".join(body) + "</body></html>\n")


def report(exe, path, name: str = "exe") -> Path:
    """Write every stage of ``exe`` (trace graph, MLIR, engine and layers) to one HTML file at ``path``."""
    html_text = snapshot.snapshot_html(f"{name} = {exe}", snapshot.executable_panes(exe), snapshot.status_of(exe),
                                       limits=REPORT)
    out = Path(path)
    out.write_text(page(f"tripy-lab report: {name}", [(name, "", html_text)]), encoding="utf-8")
    return out


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def notebook_snapshots(nb: dict) -> list[tuple[int, str, str]]:
    """(cell index, cell source, snapshot HTML) for every output of a saved notebook that holds a snapshot."""
    found = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            html_text = _text(output.get("data", {}).get("text/html", ""))
            if snapshot.MARKER in html_text:
                found.append((index, _text(cell.get("source", "")), html_text))
    return found


def report_notebook(ipynb_path, out_path) -> Path:
    """Write one self-contained HTML file with every stage of every compile stored in ``ipynb_path``."""
    src = Path(ipynb_path)
    try:
        nb = json.loads(src.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise TripyException(f"Cannot read the notebook '{src}'.",
                             [f"{type(exc).__name__}: {exc}", "Expected a saved .ipynb file (JSON)."]) from None
    found = notebook_snapshots(nb)
    if not found:
        raise TripyException(
            f"The notebook '{src}' holds no tripy-lab snapshots.",
            ["Expected outputs of %%tpcompile cells or tripy_lab.lab.show(exe), saved with their outputs: "
             "run the notebook (e.g. jupyter nbconvert --execute --to notebook --inplace) and save it."],
        )
    sections = [(f"cell {index + 1}", source, fragment) for index, source, fragment in found]
    out = Path(out_path)
    out.write_text(page(f"tripy-lab report: {src.name}", sections), encoding="utf-8")
    return out
