"""What a sweep shows: the ``TuneResult`` (table, Pareto plot of time against error, the best passing
config as code), the progress line while it runs, and the live progress output of ``tune(wait=True)``.

``TuneResult.html(limits)`` is the one renderer: the notebook output, the Tune tab and the static snapshot.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from tripy_lab.lab.html import esc, sanitize
from tripy_lab.lab.views import tabs

COLUMNS = ["config", "engine", "optimization_level", "dtype", "quantize", "opt", "build_s", "compute_ms",
           "latency_ms", "throughput_per_s", "max_abs_err", "max_rel_err", "passed", "worker", "error"]
ERR_FLOOR = 1e-9  # an exact match (error 0) is drawn here on the log axis


def row_time(row: dict) -> float:
    """The time a config is judged by: the engine's compute time, else the synchronized latency."""
    for key in ("compute_ms", "latency_ms"):
        v = row.get(key)
        if isinstance(v, float) and math.isfinite(v):
            return v
    return float("nan")


def _ok(row: dict | None) -> bool:
    return row is not None and not row.get("error") and math.isfinite(row_time(row))


def table_rows(rows: list[dict | None]) -> list[dict]:
    from tripy_lab.lab.measure.timing import shape_label

    out = []
    for row in rows:
        if row is None:
            continue
        shown = {k: row.get(k) for k in COLUMNS}
        shown["engine"] = row.get("engine") or "default"
        shown["quantize"] = row.get("quantize") or ""
        shown["dtype"] = row.get("dtype") or "as written"
        shown["opt"] = shape_label(row["opt"]) if row.get("opt") else ""
        out.append(shown)
    return out


def pareto(rows: list[dict]) -> list[int]:
    """Indices of the rows no other row beats in both time and max abs error (sorted by time)."""
    points = sorted((row_time(r), r["max_abs_err"], i) for i, r in enumerate(rows) if _ok(r)
                    and math.isfinite(r.get("max_abs_err", float("nan"))))
    front, best_err = [], math.inf
    for _t, err, i in points:
        if err < best_err:
            front.append(i)
            best_err = err
    return front


def pareto_svg(rows: list[dict], best: int | None = None, width: int = 520, height: int = 300) -> str:
    """Time (x) against max abs error (y, log scale): passing configs green, failing the gate orange, the
    Pareto front joined, the best passing config ringed; each point labelled with its row number."""
    pts = [(i, row_time(r), max(r["max_abs_err"], ERR_FLOOR), bool(r.get("passed"))) for i, r in enumerate(rows)
           if _ok(r) and math.isfinite(r.get("max_abs_err", float("nan")))]
    if not pts:
        return "<div style='font-size:12px;color:#6b7280'>No config ran: nothing to plot.</div>"
    from tripy_lab.lab.views.draw import nice_ticks

    left, right, top, bottom = 62, 18, 14, 44
    xt = nice_ticks(max(t for _, t, _, _ in pts))
    lo = math.floor(math.log10(min(e for *_, e, _ in pts)))
    hi = max(math.ceil(math.log10(max(e for *_, e, _ in pts))), lo + 1)
    sx = lambda t: left + t / xt[-1] * (width - left - right)
    sy = lambda e: top + (hi - math.log10(e)) / (hi - lo) * (height - top - bottom)
    base = height - bottom
    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' class='tripy-pareto' width='{width}' height='{height}' "
             "font-family='sans-serif' font-size='11' fill='#374151'>"]
    for k in range(lo, hi + 1):
        parts.append(f"<line x1='{left}' y1='{sy(10.0 ** k):.1f}' x2='{width - right}' y2='{sy(10.0 ** k):.1f}' "
                     "stroke='#e5e7eb'/>")
        parts.append(f"<text x='{left - 6}' y='{sy(10.0 ** k) + 4:.1f}' text-anchor='end'>1e{k}</text>")
    for t in xt:
        parts.append(f"<text x='{sx(t):.1f}' y='{base + 16}' text-anchor='middle'>{t:.4g}</text>")
    parts += [f"<line x1='{left}' y1='{base}' x2='{width - right}' y2='{base}' stroke='#374151'/>",
              f"<line x1='{left}' y1='{top}' x2='{left}' y2='{base}' stroke='#374151'/>"]
    front = pareto(rows)
    if len(front) > 1:
        line = " ".join(f"{sx(row_time(rows[i])):.1f},{sy(max(rows[i]['max_abs_err'], ERR_FLOOR)):.1f}"
                        for i in front)
        parts.append(f"<polyline class='tripy-pareto-front' points='{line}' fill='none' stroke='#6b7280' "
                     "stroke-dasharray='4 3'/>")
    for i, t, e, passed in pts:
        color = "#16a34a" if passed else "#ea580c"
        parts.append(f"<circle class='tripy-pareto-{'pass' if passed else 'fail'}' cx='{sx(t):.1f}' cy='{sy(e):.1f}' "
                     f"r='4' fill='{color}'><title>{esc(rows[i].get('config', ''))}</title></circle>")
        parts.append(f"<text x='{sx(t) + 6:.1f}' y='{sy(e) - 4:.1f}' font-size='10'>{i}</text>")
        if i == best:
            parts.append(f"<circle cx='{sx(t):.1f}' cy='{sy(e):.1f}' r='8' fill='none' stroke='#1d4ed8' "
                         "stroke-width='2'/>")
    mid = (top + base) / 2
    parts.append(f"<text x='{(left + width - right) / 2}' y='{height - 8}' text-anchor='middle'>time per call (ms): "
                 "compute, else latency</text>")
    parts.append(f"<text x='14' y='{mid}' text-anchor='middle' dominant-baseline='middle' "
                 f"transform='rotate(-90 14 {mid})'>max abs error vs fp32</text>")
    parts.append("</svg>")
    return "".join(parts)


def _args_code(func, args, opt) -> tuple[list[str], str]:
    """(NamedDimension lines, the args list literal) with ``opt`` applied, through the lab's spec printer."""
    from tripy_lab.core.bounds import DimensionInputInfo, InputInfo
    from tripy_lab.lab.bounds_model import info_code
    from tripy_lab.lab.spec import from_info
    from tripy_lab.lab.tune_task import param_names, with_opt

    args = with_opt(func, args, opt)
    named = args if isinstance(args, dict) else dict(zip(param_names(func), args))
    lines, seen, items = [], set(), []
    for name, value in named.items():
        if not isinstance(value, (InputInfo, DimensionInputInfo)):
            items.append(f"{name}={name}" if isinstance(args, dict) else name)  # a constant: pass yours
            continue
        spec = from_info(value)
        for d in getattr(spec, "dims", ()):
            if d.name and d.name not in seen:
                seen.add(d.name)
                lines.append(f'{d.name} = tp.NamedDimension("{d.name}", {d.min}, {d.opt}, {d.max})')
        items.append(f"{name}={info_code(spec)}" if isinstance(args, dict) else info_code(spec))
    open_, close = ("dict(", ")") if isinstance(args, dict) else ("[", "]")
    return lines, open_ + "\n    " + ",\n    ".join(items) + ",\n" + close


def snippet(config: dict, program: tuple, path: str | None = None, trtexec: str = "") -> str:
    """Plain tripy-lab code that builds ``config`` (the dtype/int8 variant through ``pipeline.variants``)."""
    func, args = program
    if path:
        module, _, attr = path.partition(":")
        name, lines = attr.split(".")[-1], [f"from {module} import {attr.split('.')[0]}"]
    else:
        name = "model" if hasattr(func, "state_dict") else getattr(func, "__name__", "func")
        lines = []
    lines.insert(0, "import tripy_lab as tp")
    named, literal = _args_code(func, args, config.get("opt"))
    lines += named + [f"args = {literal}"]
    if config.get("dtype") or config.get("quantize"):
        lines.insert(1, "from tripy_lab.pipeline.variants import variant")
        opts = ([f'dtype="{config["dtype"]}"'] if config.get("dtype") else []) + (
            [f'quantize="{config["quantize"]}"'] if config.get("quantize") else [])
        lines.append(f"{name}, args = variant({name}, args, {', '.join(opts)})")
    engine = f', engine="{config["engine"]}"' if config.get("engine") else ""
    pass_args = "kwargs=args" if isinstance(args, dict) else "args=args"
    lines.append(f"exe = tp.compile({name}, optimization_level={config['optimization_level']}{engine}, {pass_args})")
    lines.append('exe.export_onnx("model.onnx")  # the same program as ONNX, for TensorRT')
    if trtexec:
        lines.append(f"# {trtexec}")
    return "\n".join(lines)


@dataclass
class TuneResult:
    """A finished sweep. ``table``: a LabFrame, one row per config; ``best``: the fastest config that passed
    the accuracy gate (a row dict, or None); ``snippet()``: code that builds it; ``executable(i)``: config
    ``i`` built here (kept from an in-process sweep, else rebuilt)."""

    rows: list[dict]
    configs: list[dict]
    program: tuple
    gate: dict
    seconds: float
    reference_shape: str = ""
    error: str = ""
    where: str = ""
    path: str | None = None
    kind: str = "tune"  # the snapshot opens a pane whose view has results

    @property
    def table(self):
        from tripy_lab.lab.tables import LabFrame

        return LabFrame(table_rows(self.rows), columns=COLUMNS)

    @property
    def best_index(self) -> int | None:
        passing = [(row_time(r), i) for i, r in enumerate(self.rows) if _ok(r) and r.get("passed")]
        return min(passing)[1] if passing else None

    @property
    def best(self) -> dict | None:
        i = self.best_index
        return None if i is None else self.rows[i]

    def snippet(self, index: int | None = None) -> str:
        i = self.best_index if index is None else index
        if i is None:
            return ""
        return snippet(self.configs[i], self.program, self.path, self.rows[i].get("trtexec", ""))

    def pareto_svg(self) -> str:
        return pareto_svg(self.rows, self.best_index)

    def executable(self, index: int | None = None):
        """Config ``index`` (default: the best) as an Executable with its stages."""
        from tripy_lab.lab.tune_task import build

        i = self.best_index if index is None else index
        if i is None:
            from tripy_lab.core.errors import raise_error

            raise_error("No config passed the accuracy gate.", ["Pass index= to build another row's config."])
        kept = self.rows[i].get("executable")
        return kept if kept is not None else build(*self.program, self.configs[i])

    def export_onnx(self, path: str, index: int | None = None) -> str:
        return self.executable(index).export_onnx(path)

    def summary(self) -> str:
        ok = sum(1 for r in self.rows if _ok(r))
        passed = sum(1 for r in self.rows if _ok(r) and r.get("passed"))
        failed = sum(1 for r in self.rows if r and r.get("error") and r["error"] != "cancelled")
        cancelled = sum(1 for r in self.rows if r and r.get("error") == "cancelled")
        text = (f"{len(self.rows)} configs in {self.seconds:.1f} s on {self.where}: {ok} ran ({passed} passed the "
                f"gate atol={self.gate['atol']:g} rtol={self.gate['rtol']:g}), {failed} failed")
        return text + (f", {cancelled} cancelled" if cancelled else "")

    def html(self, limits: tabs.Limits = tabs.LIVE) -> str:
        from tripy_lab.lab.views.draw import frame_html

        df = self.table
        tail = ""
        if limits.table_rows is not None and len(df) > limits.table_rows:
            df, tail = df.head(limits.table_rows), tabs.note_html(f"{len(df) - limits.table_rows} more rows.")
        head = tabs.head_html(esc(self.summary()) + (f" · inputs {esc(self.reference_shape)}"
                                                     if self.reference_shape else ""))
        best = self.best_index
        code = self.snippet()
        best_html = (f"<div style='font-size:12px'><b>best passing: #{best} {esc(self.rows[best]['config'])}</b>"
                     f"<pre class='tripy-tune-snippet' style='font-size:11px'>{esc(code)}</pre></div>"
                     if best is not None else "<div style='font-size:12px'><b>no config passed the gate</b></div>")
        error = tabs.note_html(self.error) if self.error else ""
        return (f"<div class='tripy-tune'>{head}{error}<div class='tripy-tune-table'>{frame_html(df)}</div>{tail}"
                f"{self.pareto_svg()}{best_html}</div>")

    def _repr_html_(self) -> str:
        return sanitize(self.html(tabs.SNAPSHOT))

    def __repr__(self) -> str:
        return self.summary() + "\n" + repr(self.table)


# -- while it runs ----------------------------------------------------------------------------------------
def progress_html(run) -> str:
    from tripy_lab.lab.views.draw import frame_html

    n, done = len(run.rows), run.finished
    pct = 100 * done // max(n, 1)
    elapsed = (run.seconds if run.done.is_set() else time.perf_counter() - run.started)
    state = "done" if run.done.is_set() else ("cancelling" if run.cancelled else "running")
    bar = (f"<div style='width:240px;height:8px;background:#e5e7eb;display:inline-block;margin-right:8px'>"
           f"<div class='tripy-tune-bar' style='width:{pct}%;height:8px;background:#2563eb'></div></div>")
    rows = table_rows(run.rows)
    table = frame_html(_frame(rows)) if rows else ""
    return (f"<div class='tripy-tune-progress' style='font-size:12px'>{bar}tune {state}: {done}/{n} configs · "
            f"{elapsed:.1f} s · {esc(run.where)}</div>{table}")


def _frame(rows):
    from tripy_lab.lab.tables import LabFrame

    return LabFrame(rows, columns=COLUMNS)


class LiveProgress:
    """``tune(wait=True)`` in a notebook: one output updated as rows arrive (at most twice a second)."""

    def __init__(self, run, every: float = 0.5):
        self.run, self.every, self.handle, self.last = run, every, None, 0.0
        try:
            from IPython import get_ipython
            from IPython.display import HTML, display

            if getattr(get_ipython(), "kernel", None) is None:
                return
            self._html = HTML
            self.handle = display(HTML(sanitize(progress_html(run))), display_id=True)
        except ImportError:
            return
        run.listeners.append(self.update)

    def update(self, run, force: bool = False) -> None:
        now = time.perf_counter()
        if self.handle is None or (not force and now - self.last < self.every):
            return
        self.last = now
        self.handle.update(self._html(sanitize(progress_html(run))))

    def close(self) -> None:
        if self.handle is not None:
            self.run.listeners.remove(self.update)
            self.update(self.run, force=True)
