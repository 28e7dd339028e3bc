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


def mlir_tab(lowered, generic: bool = False, error_op: str | None = None) -> tuple[str, list]:
    """(HTML, lines) of the MLIR: profiles inlined, locations used to highlight the failing op's lines."""
    lines = crosswalk.mlir_lines(lowered, generic)
    text = "\n".join(t for t, _ in lines)
    marked = {i + 1 for i, (_, op) in enumerate(lines) if error_op is not None and op == error_op}
    head = (f'<div style="font-size:12px;color:#374151">{len(lowered.program.ops())} MLIR ops · '
            f"lowered in {_ms(lowered.seconds)}{' · generic form' if generic else ''}</div>")
    return head + views.mlir_html(text, marked), lines


def profile_text(built) -> str:
    """Whether this build covers the whole shape profile or specializes per shape (issue 11)."""
    r = built.report
    if r.engine in ("onnxruntime", "tensorrt"):
        return "one build covers the whole profile: every shape in min..max runs without another build"
    if r.engine == "xla":
        shapes = r.cache.get("shapes_built", [])
        return (f"specializes per shape: XLA compiles each new shape on first use; built so far "
                f"({len(shapes)}): {'; '.join(shapes) or 'none'}")
    return "interprets every shape (no build)"


def export_commands(built) -> list[tuple[str, str]]:
    """The trtexec / polygraphy lines for the program's profile (``exe.trtexec_command()``)."""
    from tripy_lab.engine.onnx_export import polygraphy_command, trtexec_command

    program = built.lowered.program
    return [("trtexec", trtexec_command(program)), ("polygraphy", polygraphy_command(program))]


def engine_tab(built) -> str:
    r = built.report
    info = [("engine", r.engine), ("why", r.reason), ("device", r.device),
            ("optimization level", built.optimization_level), ("build time", _ms(built.seconds)),
            ("profile", profile_text(built)), ("layers", len(built.layers))]
    info += [(f"cache: {k}", v) for k, v in r.cache.items()]
    rows = "".join(f"<tr><th style='text-align:left;padding-right:12px'>{html.escape(str(k))}</th>"
                   f"<td>{html.escape(str(v))}</td></tr>" for k, v in info)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in r.notes)
    extra = "".join(f"<details><summary>{html.escape(name)}</summary><pre style='font-size:11px'>"
                    f"{html.escape(text)}</pre></details>" for name, text in r.extra_stages.items())
    table = views.frame_html(views.layers_frame(built.layers))
    cmds = "".join(f"<div><b>{name}</b> <code style='font-size:11px'>{html.escape(cmd)}</code></div>"
                   for name, cmd in export_commands(built))
    extra += ("<details><summary>ONNX export (exe.export_onnx(path)) and TensorRT command lines</summary>"
              f"<div style='font-size:12px'>{cmds}</div></details>")
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
