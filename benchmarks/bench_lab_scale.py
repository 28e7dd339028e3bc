"""The lab's trace graph at real-model size: time to first picture, expand time and snapshot size (issue 25).

For a GPT-2-small-sized tp.Module, a SAM2-style conv/attention stack and a 20,000-op program
(benchmarks/lab_programs.py):

- ``model ms``: the folded model and its JSON (what the kernel sends the live Trace tab after the trace);
- ``first picture ms``: model + the top level laid out: by the browser's wasm graphviz (``wasm``, timed in node
  with the extension's own @hpcc-js/wasm-graphviz, when extension/node_modules is installed) and by the
  kernel's ``dot`` (``dot``: what the snapshot draws);
- ``expand ms``: laying out the level with one more group opened (GPT ``h.0`` then ``h.0.attn``; SAM2
  ``stage1.0`` then ``stage1.0.attn``; 20k ops: the first run then its first run), wasm and dot;
- ``snapshot kB``: the static snapshot of the compiled program (``lab.show``'s text/html), ``report kB``
  (``lab.report``), and for the GPT a saved notebook executed by nbclient (``--notebook``).
Budgets (issue 25): first picture < 2 s and each expand < 0.5 s in the browser; GPT snapshot and report < 1.5 MB.

``--reps N`` repeats the model and the layouts N times and reports medians (the machine is shared: ``model cpu ms``
is the kernel's own CPU time, steadier than wall time under load); ``--picture-only`` leaves out the compile,
snapshot and report.

    python benchmarks/bench_lab_scale.py [--programs gpt,sam2,ops20k] [--notebook] [--reps 5] [--picture-only]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
WASM = HERE.parent / "extension" / "node_modules" / "@hpcc-js" / "wasm-graphviz"
NODE_SCRIPT = """
const { Graphviz } = await import(process.argv[2]);
const fs = await import('fs');
const gv = await Graphviz.load();
const out = [];
for (const file of process.argv.slice(3)) {
  const dot = fs.readFileSync(file, 'utf8');
  const t0 = performance.now();
  gv.dot(dot);
  out.push(performance.now() - t0);
}
console.log(JSON.stringify(out));
"""


def wasm_times(dots: list[str], reps: int = 1) -> list[float] | None:
    """Median milliseconds to lay out each DOT with the extension's wasm graphviz (in node), or None without it."""
    node = shutil.which("node")
    entry = WASM / "dist" / "index.js"
    if node is None or not entry.exists():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for k, dot in enumerate(dots):
            path = Path(tmp) / f"level{k}.dot"
            path.write_text(dot)
            files.append(str(path))
        script = Path(tmp) / "time.mjs"
        script.write_text(NODE_SCRIPT)
        done = subprocess.run([node, str(script), entry.as_uri(), *files * reps], capture_output=True, text=True,
                              timeout=600)
    if done.returncode != 0:
        return None
    times = json.loads(done.stdout)
    return [statistics.median(times[k::len(dots)]) for k in range(len(dots))]


PROGRAMS = {
    "gpt": ("lab_programs.gpt_small", ["h.0", "h.0.attn"]),
    "sam2": ("lab_programs.sam2_stack", ["stage1.0", "stage1.0.attn"]),
    "ops20k": ("lab_programs.many_ops", [None, None]),  # runs: the first, then its first
}


def measure(name: str, reps: int = 1, picture_only: bool = False) -> dict:
    import importlib

    import tripy_lab as tp
    from tripy_lab import pipeline
    from tripy_lab.lab.cli import reports
    from tripy_lab.lab.views import graph_draw, snapshot, tabs

    module, func = PROGRAMS[name][0].rsplit(".", 1)
    f, args = getattr(importlib.import_module(module), func)()
    t0 = time.perf_counter()
    traced = pipeline.trace(f, args=args)
    t_trace = time.perf_counter() - t0
    walls, cpus = [], []
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        view = tabs.TraceView.of(traced)
        payload = json.dumps(view.bundle())
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    t_model = statistics.median(walls)
    model = view.model
    opened: list[int] = []
    levels = [list(model.initial_expanded())]
    for path in PROGRAMS[name][1]:
        group = model.module_node(path) if path else None
        if group is None:  # a run (or a trace without module scopes): the first group at the current level
            kids = model.nodes[opened[-1]].children if opened else model.roots
            group = next((i for i in kids if model.nodes[i].children), None)
        if group is None:
            break
        opened.append(group)
        levels.append([*levels[0], *opened])
    dots, dot_ms = [], []
    for expanded in levels:
        dots.append(graph_draw.level_dot(model, set(expanded)))
        t0 = time.perf_counter()
        view.drawing(expanded)
        dot_ms.append((time.perf_counter() - t0) * 1e3)
    wasm = wasm_times(dots, reps)
    row = {"program": name, "ops": len(traced.trace.ops), "nodes": len(model.nodes),
           "top-level nodes": len(model.roots), "trace ms": t_trace * 1e3, "model+json ms": t_model * 1e3,
           "model cpu ms": statistics.median(cpus) * 1e3,
           "json kB": len(payload) / 1e3,
           "first picture ms (wasm)": None if wasm is None else t_model * 1e3 + wasm[0],
           "first picture ms (dot)": t_model * 1e3 + dot_ms[0],
           "expand ms (wasm)": None if wasm is None else [round(w, 1) for w in wasm[1:]],
           "expand ms (dot)": [round(d, 1) for d in dot_ms[1:]]}
    if picture_only:
        return row
    t0 = time.perf_counter()
    exe = tp.compile(f, args=args, engine="reference")
    row["compile s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    html = snapshot.snapshot_html(name, snapshot.executable_panes(exe), snapshot.status_of(exe))
    row["snapshot s"] = time.perf_counter() - t0
    row["snapshot kB"] = len(html.encode()) / 1e3
    row["snapshot pictures"] = html.count("tripy-graph-image")
    with tempfile.TemporaryDirectory() as tmp:
        out = reports.report(exe, Path(tmp) / "r.html", name)
        row["report kB"] = out.stat().st_size / 1e3
    return row


def notebook_size() -> dict:
    """The GPT's lab.show output saved in an executed notebook (nbclient: no widget state, as JupyterLab)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(
        f"import sys\nsys.path.insert(0, {str(HERE)!r})\nimport tripy_lab as tp\nfrom tripy_lab import lab\n"
        "import lab_programs as P\nmodel, args = P.gpt_small()\n"
        "exe = tp.compile(model, args=args, engine='reference')\nui = lab.show(exe, 'gpt')\n"
        "ui.display.publish()")]
    with tempfile.TemporaryDirectory() as tmp:
        NotebookClient(nb, timeout=900, store_widget_state=False, resources={"metadata": {"path": tmp}}).execute()
        path = Path(tmp) / "gpt.ipynb"
        nbformat.write(nb, path)
        size = path.stat().st_size
        from tripy_lab.lab.cli import reports

        report = reports.report_notebook(path, Path(tmp) / "gpt.html").stat().st_size
    text = json.dumps(nb.cells[0].outputs)
    return {"notebook kB": size / 1e3, "pictures": text.count("tripy-graph-image"), "report_notebook kB": report / 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default="gpt,sam2,ops20k")
    parser.add_argument("--notebook", action="store_true", help="also save an executed GPT notebook")
    parser.add_argument("--reps", type=int, default=1, help="repeat the model and layouts, report medians")
    parser.add_argument("--picture-only", action="store_true", help="leave out compile, snapshot and report")
    opts = parser.parse_args()
    for name in opts.programs.split(","):
        row = measure(name, opts.reps, opts.picture_only)
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    if opts.notebook:
        print(json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in notebook_size().items()}))


if __name__ == "__main__":
    main()
