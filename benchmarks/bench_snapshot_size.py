"""Size of a saved notebook with five ``%%tpcompile`` cells of a 100-op function (budget: < 1 MB).

Executes the notebook in a real kernel (nbclient, no widget state stored: what JupyterLab saves by
default), writes it, and reports the file size and each snapshot's size; then the same for
``report_notebook`` and ``nbconvert --to html``.

    python benchmarks/bench_snapshot_size.py [--cells 5] [--ops 100] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import nbformat

SETUP = "%load_ext tripy_lab\nimport tripy_lab as tp\ntp.config.engine = 'reference'"
CELL = """%%tpcompile chain{k}_exe x=f32[n=1:2:{max},64] y=f32[n,64]
def chain{k}(x, y):
    for _ in range({steps}):
        x = tp.relu(x + y)  # 2 trace ops per step
    return x
"""


def make_notebook(cells: int = 5, ops: int = 100) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(SETUP)] + [
        nbformat.v4.new_code_cell(CELL.format(k=k, max=8 + k, steps=ops // 2)) for k in range(cells)
    ]
    return nb


def execute(nb: nbformat.NotebookNode, cwd: Path) -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=False,
                   resources={"metadata": {"path": str(cwd)}}).execute()
    return nb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=5)
    parser.add_argument("--ops", type=int, default=100)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="tripy-snapshot-"))
    out.mkdir(parents=True, exist_ok=True)

    start = time.perf_counter()
    nb = execute(make_notebook(args.cells, args.ops), out)
    seconds = time.perf_counter() - start
    path = out / "snapshot-size.ipynb"
    nbformat.write(nb, path)
    size = path.stat().st_size

    rows = []
    for cell in nb.cells[1:]:
        for output in cell.outputs:
            data = output.get("data", {})
            rows.append({mime: len(value if isinstance(value, str) else json.dumps(value))
                         for mime, value in data.items()})
    from tripy_lab.lab import report_notebook

    report = report_notebook(path, out / "report.html").stat().st_size
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nb)
    print(f"{args.cells} cells x {args.ops} ops, executed in {seconds:.1f} s -> {path}")
    print("| output | " + " | ".join(sorted(rows[0])) + " |")
    for k, row in enumerate(rows):
        print(f"| cell {k + 1} | " + " | ".join(f"{row.get(m, 0) / 1e3:.1f} kB" for m in sorted(rows[0])) + " |")
    verdict = "within" if size < 1_000_000 else "OVER"
    print(f"notebook file: {size / 1e6:.3f} MB ({verdict} the 1 MB budget)")
    print(f"report_notebook: {report / 1e6:.3f} MB; nbconvert --to html: {len(body) / 1e6:.3f} MB")


if __name__ == "__main__":
    main()
