"""Stand-alone HTML reports: one self-contained file (no network, no kernel, no script).

``report(exe, path)`` draws an Executable's stages; ``report_notebook(ipynb, path)`` collects the static
snapshots every ``%%tpcompile`` / ``show`` output stored in a saved notebook. A notebook may come from
anyone, so it is validated (``nbformat``) and every stored snapshot is sanitized again before it goes into
the report. A report is written atomically, never over its input, and over an existing file only when that
file is one of our reports (``force=True`` overrides the latter).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tripy_lab.core import files
from tripy_lab.core.errors import TripyException, expected
from tripy_lab.lab.html import esc, sanitize, stylesheet
from tripy_lab.lab.views import snapshot, tabs

# A report is a file, not a notebook: keep far more of each pane than a snapshot does.
# A GPT-2-small report (2,750 trace ops, 3,000 MLIR lines and layers) stays < 1.5 MB (bench_lab_scale.py).
REPORT = tabs.Limits(svg_chars=300_000, text_chars=200_000, mlir_lines=1_200, table_rows=800, log_events=200,
                     svg_image=True)
EXE_PANES = ("trace", "mlir", "engine", "error")  # a compiled Executable has no runs or lab log to show
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
            "style-src 'unsafe-inline'; img-src data:\">" + GENERATOR +
            f"<title>{esc(title)}</title><style>{_PAGE_STYLE}\n{_table_style()}</style></head><body>"
            f"<h1>{esc(title)}</h1>" + "".join(body) + "</body></html>\n")


GENERATOR = '<meta name="generator" content="tripy-lab report">'


def is_report(path: str) -> bool:
    """Whether the file at ``path`` is one of our reports (read: its first few KB only)."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return GENERATOR.encode() in head or (head.startswith(b"<!DOCTYPE html>") and b"<title>tripy-lab report: " in head)


def check_output(out, inputs=(), force: bool = False, parameter: str = "path") -> str:
    """The absolute path to write a report to, or a TripyException: never over an input, and over an existing
    file only when it is one of our reports (or ``force``)."""
    target = os.path.realpath(files.checked_path(out, parameter))
    for src in inputs:
        if os.path.exists(target) and os.path.samefile(target, src):
            raise TripyException(f"Refusing to write the report over its input {str(src)!r}.",
                                 [expected(parameter, str(out), "another file name, e.g. -o report.html")])
    if os.path.isdir(target):
        raise TripyException(f"Cannot write the report to {target!r}: it is a folder.",
                             [expected(parameter, str(out), "a file path")])
    if os.path.exists(target) and not force and not is_report(target):
        raise TripyException(f"Refusing to overwrite {target!r}: it exists and is not a tripy-lab report.",
                             [expected(parameter, str(out), "a new file or an earlier report"),
                              "Pass force=True (tripy-lab report --force) to replace it."])
    return target


def program_title(exe) -> str:
    """What was compiled, as a reader names it: the function or tp.Module class and the file (or notebook cell)
    most of its ops came from, e.g. ``mlp (model.py)`` or ``GPT (In [3])``."""
    traced = exe.stages.get("traced")
    if traced is None:  # a loaded Executable: only its signature is known
        return str(exe)
    files_seen: dict[str, int] = {}
    for op in traced.trace.ops:
        loc = op.location
        if loc is not None:
            where = loc.cell_name or os.path.basename(loc.file)
            files_seen[where] = files_seen.get(where, 0) + 1
    where = max(files_seen, key=files_seen.get) if files_seen else ""
    return f"{traced.trace.name} ({where})" if where else traced.trace.name


def report(exe, path, name: str | None = None, force: bool = False, footer: str | None = None) -> Path:
    """Write every stage of ``exe`` (trace graph, MLIR, engine and layers) to one HTML file at ``path``; the title
    names the program (``program_title``), ``name`` (the variable holding ``exe``) heads its section."""
    target = check_output(path, force=force)
    program = program_title(exe)
    footer = footer or (f"Written by tripy_lab.lab.report from {program}. To change shapes or options live, compile "
                        "it in JupyterLab with %%tpcompile.")
    html_text = snapshot.snapshot_html(f"{name} = {exe}" if name else str(exe), snapshot.executable_panes(exe),
                                       snapshot.status_of(exe), limits=REPORT, keys=EXE_PANES, footer=footer)
    files.write_atomic(target, page(f"tripy-lab report: {program}", [(name or program, "", html_text)]),
                       what="the report")
    return Path(path)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def notebook_snapshots(nb: dict) -> list[tuple[int | None, str, str]]:
    """(execution count or None, cell source, snapshot HTML) for every output of a saved notebook that holds a
    snapshot."""
    found = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        for output in cell.get("outputs", []):
            html_text = _text(output.get("data", {}).get("text/html", ""))
            if snapshot.MARKER in html_text:
                found.append((cell.get("execution_count"), _text(cell.get("source", "")), html_text))
    return found


def cell_heading(count) -> str:
    """A cell as JupyterLab shows it: ``In [12]`` (its execution count, what the graph's lines say too)."""
    return f"In [{count}]" if isinstance(count, int) else "In [ ] (not run)"


class NothingToReport(TripyException):
    """A notebook read fine but holds no compile to report (``tripy-lab report`` exits with status 3)."""


def _why_empty(src: Path, nb: dict) -> TripyException:
    """Why a notebook gave no snapshots: no %%tpcompile cell at all, or cells whose outputs were not saved."""
    cells = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
    compiles = [c for c in cells if _text(c.get("source", "")).lstrip().startswith("%%tpcompile")]
    if not compiles:
        return NothingToReport(
            f"No %%tpcompile cell in {src.name}: nothing to report.",
            [f"It has {len(cells)} code cell{'s' if len(cells) != 1 else ''}"
             f"{', ' + str(sum(1 for c in cells if c.get('outputs'))) + ' with saved outputs' if cells else ''}, "
             "and no output of tripy_lab.lab.show(exe).",
             "A report collects the stages of %%tpcompile cells (and lab.show outputs); for one function, "
             "tripy-lab explain FILE.py:FUNC --args SPEC --html OUT.html writes the same report."])
    unsaved = [c for c in compiles if not c.get("outputs")]
    if unsaved:
        return TripyException(
            f"The notebook '{src}' holds no tripy-lab snapshots: its {len(compiles)} %%tpcompile "
            f"cell{'s have' if len(compiles) != 1 else ' has'} no saved outputs.",
            ["Run the notebook and save it with its outputs (e.g. jupyter nbconvert --execute --to notebook "
             "--inplace), then write the report again."])
    return TripyException(
        f"The notebook '{src}' holds no tripy-lab snapshots: its %%tpcompile cells' outputs carry none.",
        ["They were saved by a tripy-lab without snapshots, or they failed: run them again and save the notebook."])


def read_notebook(src: Path) -> dict:
    """The notebook at ``src``, validated by nbformat; a TripyException saying what is wrong, never a traceback."""
    def bad(why: str) -> TripyException:
        return TripyException(f"Cannot read the notebook '{src}': {why}.",
                              ["Expected a saved .ipynb file (nbformat 4 JSON)."])

    try:
        raw = src.read_bytes()
    except OSError as exc:
        raise bad(files.cause(exc)) from None
    try:  # NaN/Infinity are not JSON (nbformat's schema would reject them later, less clearly)
        nb = json.loads(raw.decode("utf-8"), parse_constant=lambda c: _raise(ValueError(f"{c} is not JSON")))
    except RecursionError:
        raise bad("it is nested too deeply to read") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise bad(f"it is not JSON ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''})") from None
    if not isinstance(nb, dict):
        raise bad(f"its top level is a JSON {type(nb).__name__}, expected an object")
    cells = nb.get("cells")
    if not isinstance(cells, list):
        raise bad(f"'cells' is {type(cells).__name__ if 'cells' in nb else 'missing'}, expected a list")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise bad(f"cell {i + 1} is a JSON {type(cell).__name__}, expected an object")
    import warnings

    import nbformat

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. cells without ids (nbformat < 4.5): read as they are
            node = nbformat.reads(json.dumps(nb), as_version=4)
            nbformat.validate(node)
    except RecursionError:
        raise bad("it is nested too deeply to read") from None
    except Exception as exc:  # nbformat's ValidationError and the conversion's KeyError/TypeError/...
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        where = next((ln.rstrip(":") for ln in lines if ln.startswith("On instance")), "")
        what = (lines[0] if lines else type(exc).__name__)[:200]
        raise bad(f"it is not a valid notebook ({what}{'; ' + where if where else ''})") from None
    return node


def _raise(exc: Exception):
    raise exc


def report_notebook(ipynb_path, out_path, force: bool = False) -> Path:
    """Write one self-contained HTML file with every stage of every compile stored in ``ipynb_path``."""
    src = Path(ipynb_path)
    target = check_output(out_path, [src] if src.exists() else [], force=force)
    nb = read_notebook(src)
    found = notebook_snapshots(nb)
    if not found:
        raise _why_empty(src, nb)
    sections = [(cell_heading(count), source, fragment) for count, source, fragment in found]
    files.write_atomic(target, page(f"tripy-lab report: {src.name}", sections), what="the report")
    return Path(out_path)
