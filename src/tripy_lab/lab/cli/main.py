"""The tripy-lab command.

  tripy-lab [lab] [DIR] [JupyterLab options]   JupyterLab on the tutorials (DIR: default the nearest notebooks/)
  tripy-lab doctor                             what works here: Python, engines, jax devices, graphviz, extension
  tripy-lab explain FILE.py:FUNC --args SPEC   every stage of one compile, printed in the terminal
  tripy-lab report NOTEBOOK.ipynb -o OUT.html  one self-contained HTML file with every stage of every compile
  tripy-lab --version
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

QUICKSTART = "01-quickstart.ipynb"
COMMANDS = ("lab", "doctor", "explain", "report")
NOTHING_TO_REPORT = 3  # `tripy-lab report`'s exit status for a notebook without a %%tpcompile cell


def find_notebooks(start: Path | None = None) -> Path | None:
    """``notebooks/`` in the current directory or a parent, else next to the source checkout, else a
    copy of the tutorials shipped in the wheel (made once in ``~/tripy-lab-notebooks``, so edits are the user's)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "notebooks").is_dir():
            return folder / "notebooks"
    repo = Path(__file__).resolve().parents[4] / "notebooks"  # src/tripy_lab/lab/cli/main.py -> repo root
    if repo.is_dir():
        return repo
    packaged = Path(__file__).resolve().parents[2] / "notebooks"  # installed wheel: tripy_lab/notebooks
    if not packaged.is_dir():
        return None
    copy = Path.home() / "tripy-lab-notebooks"
    if not copy.exists():
        shutil.copytree(packaged, copy)
    return copy


def build_command(notebooks: Path, extra: list[str] | None = None, root: bool | None = None) -> list[str]:
    """``python -m jupyterlab`` on ``notebooks`` (quickstart first); as root it adds ``--allow-root``."""
    extra = list(extra or [])
    cmd = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={notebooks}"]
    if (notebooks / QUICKSTART).exists():
        cmd.append(f"--LabApp.default_url=/lab/tree/{QUICKSTART}")
    root = (hasattr(os, "geteuid") and os.geteuid() == 0) if root is None else root
    if root and not any(a.startswith(("--allow-root", "--ServerApp.allow_root")) for a in extra):
        cmd.append("--allow-root")  # containers and CI run as root; JupyterLab refuses to start without it
    return cmd + extra


def _die_with_parent() -> None:
    """In the child: get SIGTERM if tripy-lab itself is killed (SIGKILL cannot be forwarded)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid`` and its descendants (its kernels), the last resort after a clean stop timed out."""
    try:
        import psutil

        procs = psutil.Process(pid).children(recursive=True) + [psutil.Process(pid)]
    except Exception:  # no psutil, or already gone
        procs = []
    for proc in procs:
        try:
            proc.kill()
        except Exception:
            pass
    if not procs:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def run_child(cmd: list[str], grace: float = 20.0) -> int:
    """Run JupyterLab; SIGTERM/SIGINT/SIGHUP to tripy-lab stop it cleanly (its kernels too); exit with its code."""
    preexec = _die_with_parent if sys.platform.startswith("linux") else None
    child = subprocess.Popen(cmd, preexec_fn=preexec)  # noqa: PLW1509 - only a prctl call
    stopping = []

    def forward(signum, _frame) -> None:
        # SIGTERM, not the signal itself: JupyterLab asks "Shutdown this Jupyter server (y/[n])?" on SIGINT.
        stopping.append(time.monotonic())
        if child.poll() is None:
            child.send_signal(signal.SIGTERM)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)  # short waits: the handler above runs between them
                break
            except subprocess.TimeoutExpired:
                if stopping and time.monotonic() - stopping[0] > grace:  # asked to stop, still running
                    _kill_tree(child.pid)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    if code < 0:  # killed by a signal: the shell's convention
        return 128 - code
    return code


def _lab(args: argparse.Namespace, extra: list[str]) -> int:
    folder = args.dir or args.notebooks or find_notebooks()
    if folder is None or not Path(folder).is_dir():
        what = f"{folder} is not a folder" if folder is not None else "no notebooks/ folder found here or " \
               "next to the package"
        print(f"tripy-lab: {what}; pass a folder: tripy-lab lab DIR", file=sys.stderr)
        return 2
    folder = Path(folder).resolve()
    cmd = build_command(folder, extra)
    if args.print_command:
        print(shlex.join(cmd))
        return 0
    print(f"tripy-lab: opening JupyterLab on {folder}", file=sys.stderr)
    return run_child(cmd)


def _doctor(args: argparse.Namespace, extra: list[str]) -> int:
    from tripy_lab.lab.cli import doctor

    return doctor.main()


def load_target(target: str):
    """``FILE.py:FUNC`` -> (the function or tp.Module instance, the file's namespace)."""
    import runpy

    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise SystemExit(f"tripy-lab explain: expected FILE.py:FUNC, got {target!r}")
    if not Path(path).is_file():
        raise SystemExit(f"tripy-lab explain: no file {path!r}")
    namespace = runpy.run_path(path, run_name="__tripy_lab_explain__")
    if name not in namespace:
        found = sorted(k for k, v in namespace.items() if callable(v) and not k.startswith("_"))
        raise SystemExit(f"tripy-lab explain: {path} defines no {name!r} (it defines: {', '.join(found)})")
    return namespace[name], namespace


def explain(target: str, spec: str, engine: str | None = None, level: int = 3, html_out: str | None = None,
            out=None, as_json: bool = False) -> int:
    """Compile ``FILE.py:FUNC`` with the specs and print each stage, as ``%%tpcompile --no-widgets`` does
    (``as_json``: one JSON object instead, see ``explain_json``)."""
    from tripy_lab import pipeline
    from tripy_lab.core.errors import TripyException
    from tripy_lab.lab import errors
    from tripy_lab.lab import spec as S
    from tripy_lab.lab.views import draw as views
    from tripy_lab.lab.widget import magic

    out = out or sys.stdout
    func, namespace = load_target(target)
    try:
        parsed = S.parse_line(spec)
        values, missing = magic.resolve_specs(parsed, magic.runtime_params(func), namespace)
        if missing:
            raise S.SpecError(f"No spec for parameter{'s' if len(missing) > 1 else ''}: {', '.join(missing)}.",
                              spec, len(spec), len(spec) + 1, f"Add e.g. {missing[0]}=f32[1:2:3,4].")
        traced = pipeline.trace(func, kwargs=values)
        lowered = traced.lower()
        built = lowered.build(engine=engine, optimization_level=level)
        exe = built.executable()
    except Exception as exc:
        if not isinstance(exc, TripyException):
            raise
        if as_json:
            loc = getattr(exc, "location", None)
            print(json.dumps({"target": target, "error": {"summary": exc.summary, "details": list(exc.details),
                                                          "location": loc.render() if loc else ""}}), file=out)
        print(errors.brief(exc), file=sys.stderr)
        return 1
    if engine:  # the pipeline's reason speaks Python (engine=...); here it was a command-line option
        built.report.reason = f"requested with --engine {engine}"
    if as_json:
        print(json.dumps(explain_json(target, traced, lowered, built), indent=1, default=_plain), file=out)
        return 0
    report = built.report
    sections = [
        (f"Trace ({len(traced.trace.ops)} ops, traced in {traced.seconds * 1e3:.1f} ms)", traced.as_text()),
        (f"MLIR (lowered in {lowered.seconds * 1e3:.1f} ms)", lowered.as_text()),
        (f"Engine {report.engine} -O{built.optimization_level}, built in {built.time_text()}\n"
         f"   why {report.engine}: {report.reason}",
         repr(views.layers_frame(built.layers))),  # the lab's table text (units, 3 significant digits)
    ]
    for title, body in sections:
        print(f"== {title}\n{body}\n", file=out)
    from tripy_lab.lab.cli.reports import program_title

    program = program_title(exe)
    print(f"{program} compiled to {exe}", file=out)
    if html_out:
        from tripy_lab import lab

        command = explain_command(target, spec, engine, level)
        try:
            lab.report(exe, html_out, footer=f"Written by: {command} --html {shlex.quote(str(html_out))}. In "
                                             "JupyterLab, %%tpcompile shows these stages live.")
        except TripyException as exc:  # an existing file that is not a report, a bad path, a full disk
            print(f"tripy-lab explain: {exc}", file=sys.stderr)
            return 1
        print(f"wrote {html_out}", file=out)
    print(next_steps(target, spec, engine, level, program, html_out), file=out)
    return 0


def explain_command(target: str, spec: str, engine: str | None, level: int) -> str:
    """The ``tripy-lab explain`` command line for these options, to paste into a shell."""
    words = ["tripy-lab", "explain", target, "--args", spec]
    words += ["--engine", engine] if engine else []
    words += ["-O", str(level)] if level != 3 else []
    return shlex.join(words)


def next_steps(target: str, spec: str, engine: str | None, level: int, program: str, html_out) -> str:
    """What a terminal user can do next: the same stages as an HTML page (graph, tables) or as JSON."""
    command = explain_command(target, spec, engine, level)
    stem = target.rpartition(":")[2] or "report"
    lines = ["", "Next:"]
    if not html_out:
        lines.append(f"  {command} --html {stem}.html\n      writes these stages, with the trace graph, "
                     "as one HTML page for a browser")
    lines.append(f"  {command} --json\n      prints them as one JSON object (stages, timings, layers)")
    lines.append(f"  In JupyterLab (tripy-lab lab), a %%tpcompile cell shows {program.split(' ')[0]}'s stages live, "
                 "with sliders for the shapes.")
    return "\n".join(lines)


def _plain(value):
    """JSON for numpy scalars and anything else a report holds (its text)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


def explain_json(target: str, traced, lowered, built) -> dict:
    """Stages (text and time), the engine's layer table and its report, as plain JSON-able data."""
    from tripy_lab.lab.views import draw as views
    from tripy_lab.lab.views import tabs

    report = built.report
    layers = views.layers_frame(built.layers)
    return {
        "target": target,
        "signature": str(built.executable()),
        "engine": report.engine,
        "optimization_level": built.optimization_level,
        "timings_ms": {"trace": traced.seconds * 1e3, "mlir": lowered.seconds * 1e3, "build": built.seconds * 1e3},
        "build_time": built.time_text(),  # what the build time covers
        "stages": {
            "trace": {"ops": len(traced.trace.ops), "text": traced.as_text()},
            "mlir": {"text": lowered.as_text()},
            "engine": {"reason": report.reason, "device": report.device, "notes": [tabs.tilde(n) for n in report.notes],
                       "cache": tabs.cache_line(report.cache) if report.cache else "",
                       "layers": len(built.layers)},
        },
        "layers": [{str(k): v for k, v in row.items()} for row in layers.to_dict("records")],
        "memory": _memory(built),
    }


def _memory(built) -> list[dict]:
    """Device memory per built shape, as the Engine tab's line has it (bytes; what each part is and its source).
    onnxruntime and reference run the opt shapes once to know; an engine that cannot say gives an empty list."""
    try:
        return [use.as_dict() for use in built.memory()]
    except Exception as exc:  # noqa: BLE001 - a number it could not get never fails the explanation
        return [{"error": f"{type(exc).__name__}: {exc}"}]


def _explain(args: argparse.Namespace, extra: list[str]) -> int:
    return explain(args.target, args.args, args.engine, args.optimization_level, args.html, as_json=args.json)


def _report(args: argparse.Namespace, extra: list[str]) -> int:
    from tripy_lab import lab

    if not Path(args.notebook).is_file():
        print(f"tripy-lab report: no notebook {args.notebook!r}", file=sys.stderr)
        return 2
    write = getattr(lab, "report_notebook", None)
    if write is None:
        print("tripy-lab report: tripy_lab.lab.report_notebook is missing in this version", file=sys.stderr)
        return 1
    from tripy_lab.core.errors import TripyException

    out = args.output or str(Path(args.notebook).with_suffix(".html"))
    from tripy_lab.lab.cli.reports import NothingToReport, check_output

    try:
        # never over the notebook itself (e.g. x.html with no -o), nor over a file that is not our report
        check_output(out, [args.notebook], force=args.force, parameter="-o")
        write(args.notebook, out, **({"force": True} if args.force else {}))
    except NothingToReport as exc:  # a notebook without a compile: no file written, and a status that says so
        print(f"tripy-lab report: {exc}", file=sys.stderr)
        return NOTHING_TO_REPORT
    except TripyException as exc:  # e.g. a notebook saved without its outputs
        print(f"tripy-lab report: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {out}")
    return 0


def make_parser() -> argparse.ArgumentParser:
    from tripy_lab import __version__

    parser = argparse.ArgumentParser(prog="tripy-lab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"tripy-lab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    lab = sub.add_parser("lab", help="JupyterLab on the tutorials (the default command)",
                         usage="tripy-lab lab [DIR] [--print-command] [JupyterLab options]",
                         description="JupyterLab on DIR (default: the nearest notebooks/, quickstart first). "
                                     "Other options (--port 8899, --no-browser, --ServerApp.ip=...) go to "
                                     "JupyterLab; as root --allow-root is added.")
    lab.add_argument("--notebooks", type=Path, help=argparse.SUPPRESS)  # the old spelling of DIR
    lab.add_argument("--print-command", action="store_true", help="print the JupyterLab command and exit")
    lab.set_defaults(run=_lab)
    doc = sub.add_parser("doctor", help="check Python, engines, jax devices, graphviz and the lab extension",
                         description="One line per check; exit code 1 when the default path is broken.")
    doc.set_defaults(run=_doctor)
    exp = sub.add_parser("explain", help="print every stage of compiling FILE.py:FUNC",
                         description="Trace, MLIR and the engine's layers of FUNC in FILE.py, compiled with "
                                     "SPEC (the %%tpcompile spec syntax, e.g. 'a=f32[1:2:3,4] b=f32[4]').")
    exp.add_argument("target", metavar="FILE.py:FUNC")
    exp.add_argument("--args", required=True, metavar="SPEC", help="one spec per parameter: a=f32[1:2:3,4] ...")
    exp.add_argument("--engine", help="reference, xla, onnxruntime or tensorrt (default: the best installed)")
    exp.add_argument("-O", "--optimization-level", type=int, default=3, help="0..5 (default 3)")
    exp.add_argument("--html", metavar="OUT", help="also write the stages as a self-contained HTML report")
    exp.add_argument("--json", action="store_true",
                     help="print one JSON object (stages, timings, layers) instead of text")
    exp.set_defaults(run=_explain)
    rep = sub.add_parser("report", help="write NOTEBOOK.ipynb's compiles as one self-contained HTML file",
                         description="One HTML file with the stages of every %%tpcompile cell (and lab.show "
                                     "output) saved in NOTEBOOK.ipynb. Exit status: 0 written, 1 an error (e.g. "
                                     "outputs not saved: run the notebook first), 2 no such notebook, "
                                     f"{NOTHING_TO_REPORT} nothing to report (no %%tpcompile cell).")
    rep.add_argument("notebook", metavar="NOTEBOOK.ipynb")
    rep.add_argument("-o", "--output", metavar="OUT.html", help="default: the notebook's name with .html")
    rep.add_argument("--force", action="store_true",
                     help="replace OUT.html even if it is not a tripy-lab report (never the notebook itself)")
    rep.set_defaults(run=_report)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # `tripy-lab` and `tripy-lab --port 8899 ...` mean `tripy-lab lab ...`; a bare word must be a command.
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help", "--version"):
        argv.insert(0, "lab")
    parser = make_parser()
    if argv[0] not in COMMANDS and not argv[0].startswith("-"):
        parser.error(f"unknown command {argv[0]!r} (choose from {', '.join(COMMANDS)}; "
                     f"to open a folder: tripy-lab lab {argv[0]})")
    # DIR is the word right after `lab`; later bare words belong to JupyterLab's options (`--port 8899`).
    folder = Path(argv.pop(1)) if argv[0] == "lab" and len(argv) > 1 and not argv[1].startswith("-") else None
    args, extra = parser.parse_known_args(argv)
    if args.command == "lab":
        args.dir = folder
    if extra and args.command != "lab":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args.run(args, extra)


if __name__ == "__main__":
    raise SystemExit(main())
