"""HTML for each stage tab, from stage objects (Traced, Lowered, Built) and session data. No widgets."""

from __future__ import annotations

import html

from tripy_lab.lab import crosswalk, views

MAX_GRAPH_OPS = 600  # above this, the Trace tab shows the listing only (the Crosswalk tab still draws)


def _ms(seconds) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.1f} ms"


def trace_graph(traced, highlight: str | None = None) -> tuple[str | None, str, str]:
    """(svg or None, dot, note) for a trace; op nodes carry ``id="op-%tN"``."""
    n_ops = len(traced.trace.ops)
    dot = views.fast_layout(crosswalk.trace_dot(traced, highlight), n_ops)
    if n_ops > MAX_GRAPH_OPS:
        return None, dot, f"{n_ops} ops: too many to draw on every edit (limit {MAX_GRAPH_OPS}); see the listing."
    svg, note = views.render_svg(dot)
    return svg, dot, note


def trace_tab(traced, svg: str | None, dot: str, note: str = "") -> str:
    n_ops = len(traced.trace.ops)
    head = (f'<div style="font-size:12px;color:#374151">{n_ops} ops · traced in {_ms(traced.seconds)} · '
            "inputs blue, constants yellow, outputs green; <code>?</code> marks a dynamic dim</div>")
    text = html.escape(traced.as_text())
    listing = (f'<details><summary style="font-size:12px">trace listing</summary>'
               f'<pre style="font-size:11px">{text}</pre></details>')
    return head + views.graph_html(svg, dot, note) + listing


def failed_trace_tab(partial, info: dict | None, good=None, error_op: str | None = None) -> str:
    """The Trace tab after a failed trace: the ops recorded up to the failing line, where it stopped, and
    the last good trace with the failing op (found by its line) highlighted."""
    where = (info or {}).get("location", "").splitlines()
    stop = html.escape(where[0].removeprefix("--> ")) if where else "the failing line"
    summary = html.escape((info or {}).get("summary", ""))
    head = (f'<div class="tripy-partial-trace" style="font-size:12px;color:#b91c1c">Tracing stopped at '
            f"<b>{stop}</b>: {summary}</div>")
    last_good = ""
    if good is not None and error_op is not None:
        svg, dot, note = trace_graph(good, error_op)
        last_good = (f"<details open><summary style='font-size:12px'>last good trace: <code>"
                     f"{html.escape(error_op)}</code> (red) is the op on the failing line</summary>"
                     f"{views.graph_html(svg, dot, note)}</details>")
    if partial is None:
        return (head + '<div style="font-size:12px">No op was recorded before the error (see the Error tab).</div>'
                + last_good)
    n_ops = len(partial.trace.ops)
    svg, dot, note = trace_graph(partial)
    ops = f"{n_ops} op{'s' if n_ops != 1 else ''}"
    note_html = (f'<div style="font-size:12px;color:#374151">partial trace: the {ops} recorded before '
                 "the error (its unused results shown as outputs)</div>")
    text = html.escape(partial.as_text())
    listing = (f'<details><summary style="font-size:12px">partial trace listing</summary>'
               f'<pre style="font-size:11px">{text}</pre></details>')
    return head + note_html + views.graph_html(svg, dot, note) + listing + last_good


def mlir_tab(lowered, generic: bool = False, error_op: str | None = None) -> tuple[str, list]:
    """(HTML, lines) of the MLIR: profiles inlined, locations used to highlight the failing op's lines."""
    lines = crosswalk.mlir_lines(lowered, generic)
    text = "\n".join(t for t, _ in lines)
    marked = {i + 1 for i, (_, op) in enumerate(lines) if error_op is not None and op == error_op}
    head = (f'<div style="font-size:12px;color:#374151">{len(lowered.program.ops())} MLIR ops · '
            f"lowered in {_ms(lowered.seconds)}{' · generic form' if generic else ''}</div>")
    return head + views.mlir_html(text, marked), lines


def engine_tab(built) -> str:
    r = built.report
    info = [("engine", r.engine), ("why", r.reason), ("device", r.device),
            ("optimization level", built.optimization_level), ("build time", _ms(built.seconds)),
            ("layers", len(built.layers))]
    info += [(f"cache: {k}", v) for k, v in r.cache.items()]
    rows = "".join(f"<tr><th style='text-align:left;padding-right:12px'>{html.escape(str(k))}</th>"
                   f"<td>{html.escape(str(v))}</td></tr>" for k, v in info)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes)
    extra = "".join(f"<details><summary>{html.escape(name)}</summary><pre style='font-size:11px'>"
                    f"{html.escape(text)}</pre></details>" for name, text in r.extra_stages.items())
    table = views.frame_html(views.layers_frame(built.layers))
    return (
        '<div class="tripy-engine"><h4 style="margin:4px 0">'
        f"Engine: <code>{html.escape(r.engine)}</code></h4>"
        f"<table style='font-size:12px'>{rows}</table>"
        + (f"<ul style='font-size:12px'>{notes}</ul>" if notes else "")
        + table
        + extra
        + "</div>"
    )


def log_tab(session) -> str:
    """Per-stage build times, cache hits, engine choice, then the event log (newest last)."""
    stages = [("trace", session.traced), ("mlir", session.lowered), ("build", session.built)]
    rows = [
        {
            "stage": name,
            "status": "current" if obj is not None else "-",
            "ms": None if obj is None else round(obj.seconds * 1e3, 3),
            "detail": "",
        }
        for name, obj in stages
    ]
    if session.built is not None:
        r = session.built.report
        rows[2]["detail"] = f"engine {r.engine}: {r.reason}; cache {r.cache}"
    runs = ", ".join(f"{k} ran {v}x" for k, v in session.counts.items())
    current = views.frame_html(views.log_frame(rows))
    events = views.frame_html(views.log_frame(session.log[-40:]))
    return (
        f"<div class='tripy-log' style='font-size:12px'><b>Current stages</b>{current}"
        f"<div>{html.escape(runs)} (cache hits re-use stages)</div><b>Events</b>{events}</div>"
    )


def error_tab(info: dict | None) -> str:
    if info is None:
        return '<div class="tripy-error-none" style="color:#15803d">No errors.</div>'
    where = f"[{info['stage']}] " if info.get("stage") else ""
    return views.error_html(where + info["summary"], info["details"], info["location"], info.get("op"))
