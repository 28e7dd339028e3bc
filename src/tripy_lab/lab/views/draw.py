"""Pure view functions: stage data in, HTML / SVG / DataFrames out. No widgets, no kernel."""

from __future__ import annotations

import math
import re
import shutil

from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexer import RegexLexer, bygroups
from pygments.style import Style
from pygments.token import Comment, Keyword, Name, Number, Operator, Punctuation, String, Text

from tripy_lab.lab.html import esc

STALE_STYLE = "opacity:0.45;filter:grayscale(1)"


class MlirLexer(RegexLexer):
    """Enough MLIR for the tensorrt dialect: values, symbols, attributes, ops, types."""

    name = "MLIR"
    aliases = ["mlir"]
    tokens = {
        "root": [
            (r"//.*?$", Comment.Single),
            (r"\s+", Text),
            (r'"(\\\\|\\"|[^"])*"', String),
            (r"%[\w.$\-#]+", Name.Variable),
            (r"@[\w.$\-]+", Name.Function),
            (r"\^[\w\-]+", Name.Label),
            (r"#[\w.$\-]+", Name.Constant),
            (r"(?:tensor|memref|vector)<[^<>]*>", Keyword.Type),  # one span per simple type
            (r"(tensor|memref|vector)(<)", bygroups(Keyword.Type, Punctuation)),
            (r"\b(?:[fi]\d+|bf16|f8E4M3FN|index|ui\d+)\b", Keyword.Type),
            (r"\b(?:[a-z_]+\.)+[a-z_]+\b", Name.Builtin),
            (r"<k[A-Z0-9_]+>", Name.Attribute),
            (r"\b(?:dense|dense_resource|array|loc|true|false)\b", Keyword),
            (r"0x[0-9A-Fa-f]+", Number.Hex),
            (r"-?\d+(\.\d+)?([eE][+-]?\d+)?", Number),
            (r"[?x]", Keyword.Type),
            (r"->|=|:", Operator),
            (r"[(){}\[\]<>,]", Punctuation),
            (r"\w+", Text),
            (r".", Text),
        ]
    }


class MlirStyle(Style):
    """Colours for what carries meaning (ops, values, types, attributes); numbers and punctuation stay
    plain, which also keeps a 100-op listing about half the size (one span per coloured token)."""

    styles = {
        Comment: "italic #3D7B7B",
        String: "#BA2121",
        Name.Variable: "#19177C",
        Name.Function: "#0000FF",
        Name.Label: "#767600",
        Name.Constant: "#880000",
        Name.Builtin: "#008000",
        Name.Attribute: "#687822",
        Keyword: "bold #008000",
        Keyword.Type: "nobold #B00040",
    }


# -- MLIR -------------------------------------------------------------------------------------------
_ALIAS_DEF = re.compile(r"^(#[\w.$\-]+) = (.*)$")


def inline_aliases(text: str, prefixes: tuple[str, ...] = ("#profile",)) -> str:
    """Replace hoisted attribute aliases (``#profile1 = #tensorrt.shape_profile<...>``) by their value,
    so each argument shows its own bounds inline; other aliases stay as printed."""
    aliases: dict[str, str] = {}
    kept: list[str] = []
    for line in text.splitlines():
        m = _ALIAS_DEF.match(line)
        if m and m.group(1).startswith(prefixes):
            aliases[m.group(1)] = m.group(2)
        else:
            kept.append(line)
    if not aliases:
        return text
    # Longest first, and only whole names: #profile1 must not match inside #profile12.
    pattern = re.compile(
        "|".join(re.escape(a) for a in sorted(aliases, key=len, reverse=True)) + r"(?![\w$\-])"
    )
    out = "\n".join(pattern.sub(lambda m: aliases[m.group(0)], line) for line in kept)
    return out.lstrip("\n") + ("\n" if text.endswith("\n") else "")


def mlir_rows(text: str, highlight_lines: set[int] | frozenset[int] = frozenset(), linenos: bool = True) -> list[str]:
    """One highlighted ``<div class="tripy-mlir-line">`` per line of ``text``; ``highlight_lines`` (1-based) red."""
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style=MlirStyle)
    body = highlight(text if text.endswith("\n") else text + "\n", MlirLexer(), formatter)
    rows = body.rstrip("\n").split("\n")
    width = len(str(len(rows)))
    # Long lines wrap with a hanging indent past the line number (profiles stay readable); inline styles
    # because JupyterLab's widget CSS sets white-space/word-break on nested blocks.
    hang = "white-space:pre-wrap;word-break:normal;"
    hang += f"padding-left:{width + 5}ch;text-indent:-{width + 5}ch;" if linenos else ""
    out = []
    for i, row in enumerate(rows, start=1):
        bg = "background:#fee2e2;" if i in highlight_lines else ""
        num = f'<span style="color:#9ca3af;user-select:none">{i:>{width}} </span>' if linenos else ""
        out.append(f'<div class="tripy-mlir-line" data-line="{i}" style="{bg}{hang}">{num}{row or " "}</div>')
    return out


def mlir_pre(rows_html: str) -> str:
    """The ``<pre>`` that holds ``mlir_rows`` (folded into ``<details>`` or not)."""
    style = "font-size:12px;line-height:1.35;margin:0;overflow-wrap:anywhere;min-width:0;max-width:100%;flex:1 1 auto"
    return f'<pre class="tripy-mlir" style="{style}">' + rows_html + "</pre>"


def mlir_html(
    text: str, highlight_lines: set[int] | frozenset[int] = frozenset(), linenos: bool = True
) -> str:
    """Highlighted MLIR with line numbers; ``highlight_lines`` (1-based) get a red background."""
    return mlir_pre("".join(mlir_rows(text, highlight_lines, linenos)))


# -- graph ------------------------------------------------------------------------------------------
def has_dot() -> bool:
    return shutil.which("dot") is not None


def add_node_ids(dot: str, op_names: list[str]) -> str:
    """Give each op node ``id="op-%t5"`` (the crosswalk renderer and highlight use it)."""
    wanted = set(op_names)

    def fix(m: re.Match) -> str:
        name = m.group(2)
        if name not in wanted or "id=" in m.group(3)[:40]:
            return m.group(0)
        return f'{m.group(1)}[id="op-{name}", {m.group(3)}'

    return re.sub(r'^(\s*"((?:[^"\\]|\\.)*)" )\[(.*)$', fix, dot, flags=re.M)


FAST_LAYOUT_OPS = 30  # above this many ops, lay out for speed (dot's spline routing is superlinear)
_EDGE_LABEL = re.compile(r'^(\s*"[^"]*" -> "[^"]*") \[label="[^"]*", fontsize=8\];$', re.M)


def fast_layout(dot: str, n_ops: int) -> str:
    """Layout settings that keep ``dot`` at ~30 ms for 100 ops (17 s with labelled splines).

    Big graphs lose their edge labels (every op node already shows its types in its tooltip) and get
    straight edges and capped rank/crossing iterations.
    """
    if n_ops <= FAST_LAYOUT_OPS:
        return dot.replace("digraph trace {", "digraph trace {\n  nslimit=2;", 1)
    dot = _EDGE_LABEL.sub(r"\1;", dot)
    # Square op boxes: a rounded box is a 330-character SVG path, a square one a 90-character polygon.
    dot = dot.replace('style="rounded,filled"', "style=filled")
    return dot.replace("digraph trace {", "digraph trace {\n  splines=line; nslimit=1; mclimit=0.1;", 1)


def render_svg(dot: str) -> tuple[str | None, str]:
    """(SVG or None, note). None when graphviz's ``dot`` is missing or fails: show the DOT text instead."""
    if not has_dot():
        return None, "Graphviz `dot` is not installed (apt-get install graphviz): showing the DOT text."
    import graphviz

    try:
        svg = graphviz.Source(dot).pipe(format="svg", encoding="utf-8")
    except (graphviz.ExecutableNotFound, graphviz.CalledProcessError, OSError) as exc:
        return None, f"Graphviz failed ({type(exc).__name__}): showing the DOT text."
    # Drop the XML prolog and DOCTYPE: the SVG is embedded in HTML.
    start = svg.find("<svg")
    return compact_svg(svg[start:] if start >= 0 else svg), ""


_SVG_NOISE = re.compile(r"<!--.*?-->|<title>[^<]*</title>", re.S)
_SVG_GEOMETRY = re.compile(r' (points|d|x|y|cx|cy|rx|ry|x1|y1|x2|y2|transform|viewBox)="([^"]*)"')
_DECIMALS = re.compile(r"(\d\.\d)\d+")
_BETWEEN_TAGS = re.compile(r">\s+<")


def _one_decimal(m: re.Match) -> str:
    return m.group(1)


def compact_svg(svg: str) -> str:
    """Graphviz's SVG without comments, node/edge titles (nodes carry ids and tooltips) and blanks between
    tags, coordinates to 0.1 pt (labels untouched): ~10% smaller, drawn the same."""
    svg = _SVG_NOISE.sub("", svg)
    svg = _SVG_GEOMETRY.sub(lambda m: f' {m.group(1)}="{_DECIMALS.sub(_one_decimal, m.group(2))}"', svg)
    return _BETWEEN_TAGS.sub("><", svg)


_SVG_LINK_NOISE = re.compile(r'<g id="a_[^"]*"><a xlink:title="[^"]*">|</a></g>| (?:id|class)="[^"]*"')
_DATA_URI_QUOTE = str.maketrans({"%": "%25", "#": "%23", '"': "%22", "&": "%26", "\n": "%0A"})


def svg_image(svg: str) -> str:
    """The SVG as ``<img src="data:image/svg+xml,...">``: JupyterLab's sanitizer removes inline ``<svg>``
    from untrusted outputs but keeps images (an SVG image cannot run script or fetch anything either).
    Tooltip anchors and ids are dropped: an image has no hover or links."""
    plain = _SVG_LINK_NOISE.sub("", svg)
    if "xmlns=" not in plain[:400]:
        plain = plain.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
    if "'" not in plain:  # graphviz escapes quotes inside values: every raw " delimits an attribute
        plain = plain.replace('"', "'")  # 1 byte in the URI instead of %22
    src = "data:image/svg+xml," + plain.translate(_DATA_URI_QUOTE)
    return f'<img class="tripy-graph-image" alt="trace graph" src="{src}" style="max-width:none">'


def graph_html(svg: str | None, dot: str, note: str = "", max_dot_chars: int = 20_000, image: bool = False) -> str:
    if svg is not None:
        drawn = svg_image(svg) if image else svg
        return f'<div class="tripy-graph" style="overflow:auto;max-height:640px">{drawn}</div>'
    shown = dot if len(dot) <= max_dot_chars else dot[:max_dot_chars] + "\n... (DOT text cut)"
    return (f'<div class="tripy-graph"><p style="color:#92400e">{esc(note)}</p>'
            f'<details><summary>DOT text</summary><pre style="font-size:11px">{esc(shown)}</pre>'
            "</details></div>")


# -- tables -----------------------------------------------------------------------------------------
def _shape(s) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in s) + "]"


def layers_frame(layers):
    """The engine's layer table: one row per LayerRecord (a LabFrame: shown in the lab's table style)."""
    from tripy_lab.engine.memory import fmt_bytes, layer_bytes
    from tripy_lab.lab.tables import LabFrame

    rows = [
        {
            "layer": ly.name,
            "kind": ly.kind,
            "module": ly.module,
            "source ops": " ".join(ly.source_ops),
            "user lines": " ".join(ly.source_lines),
            "shapes": " ".join(_shape(s) for s in ly.output_shapes),
            "dtype": ",".join(ly.output_dtypes),
            "kernel": ly.kernel,
            "mlir ops": ",".join(str(i) for i in ly.mlir_ops),
            "memory": fmt_bytes(layer_bytes(ly)),  # outputs + weights read (engine.memory), "" when unknown
        }
        for ly in layers
    ]
    columns = ["layer", "kind", "module", "source ops", "user lines", "shapes", "dtype", "memory", "kernel",
               "mlir ops"]
    return LabFrame(rows, columns=columns)


_STYLER_CLASS = re.compile(r'class="([^"]*)"')
_STYLER_STYLE = re.compile(r"<style[^>]*>.*?</style>", re.S)


def _own_classes(m: re.Match) -> str:
    kept = [c for c in m.group(1).split() if c.startswith("tripy-")]
    return f'class="{" ".join(kept)}"' if kept else ""


def frame_html(df) -> str:
    """Every table the lab shows goes through ``tables.frame_html`` (units, 3 significant digits, wrapping).

    The Styler's own ``<style>`` and positional classes (``data row3 col1``) are dropped: sanitize would strip
    the first anyway (the lab's stylesheet carries ``tables.TABLE_CSS``), and both cost ~40% of a 100-row table.
    """
    from tripy_lab.lab import tables  # pandas loads with the first table

    markup = _STYLER_STYLE.sub("", tables.frame_html(df))
    return _BETWEEN_TAGS.sub("><", _STYLER_CLASS.sub(_own_classes, markup)).replace(" >", ">")


def log_frame(events: list[dict]):
    import pandas as pd

    df = pd.DataFrame(events, columns=["stage", "status", "ms", "detail"])
    df["ms"] = pd.to_numeric(df["ms"], errors="coerce")  # a stage that did not run: NaN, an empty cell (not None)
    return df


def status_html(text: str, kind: str = "info") -> str:
    colors = {"info": "#1d4ed8", "busy": "#b45309", "error": "#b91c1c", "ok": "#15803d", "stale": "#6b7280"}
    style = f"color:{colors[kind]}"
    return f'<span class="tripy-status tripy-status-{kind}" style="{style}">{esc(text)}</span>'


def problems_html(problems) -> str:
    if not problems:
        return ""
    items = "".join(f"<li>{esc(str(p))}</li>" for p in problems)
    return f'<div class="tripy-problems" style="color:#b91c1c"><b>Invalid bounds</b><ul>{items}</ul></div>'


def error_html(summary: str, details: list[str], location: str = "", op: str | None = None) -> str:
    parts = [f'<div class="tripy-error" style="color:#b91c1c;font-weight:bold">{esc(summary)}</div>']
    if details:
        parts.append('<pre style="margin:4px 0">' + esc("\n".join(details)) + "</pre>")
    if location:
        parts.append('<pre style="background:#fef2f2;margin:4px 0">' + esc(location) + "</pre>")
    if op:
        parts.append(
            f"<div>Failing op: <code>{esc(op)}</code> (highlighted in the Trace and MLIR tabs)</div>"
        )
    return "".join(parts)


# -- plot -------------------------------------------------------------------------------------------
def nice_ticks(hi: float, n: int = 5) -> list[float]:
    """0 .. >= hi in steps of 1, 2 or 5 times a power of ten (about ``n`` ticks)."""
    if hi <= 0:
        return [0.0, 1.0]
    raw = hi / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    count = math.ceil(hi / step - 1e-9)
    return [round(k * step, 12) for k in range(count + 1)]


def sweep_svg(
    xs: list[float],
    ys: list[float],
    opt_x: float | None = None,
    xlabel: str = "size",
    ylabel: str = "compute (ms, median)",
    width: int = 520,
    height: int = 280,
) -> str:
    """Compute time vs. shape as inline SVG (no matplotlib), opt marked. The left margin is sized from the
    widest tick label, so the rotated y title never overlaps the ticks."""
    if not xs:
        return "<svg xmlns='http://www.w3.org/2000/svg' class='tripy-sweep' width='10' height='10'></svg>"
    ticks = nice_ticks(max(ys))
    labels = [f"{t:.4g}" for t in ticks]
    char_w, title_x = 6.6, 14  # ~px per digit at font-size 11; the y title's centre line
    left = int(title_x + 10 + max(len(t) for t in labels) * char_w + 8)
    right, top, bottom = 18, 14, 44
    x0, x1 = min(xs), max(xs)
    y1 = ticks[-1]
    sx = lambda x: left + (x - x0) / ((x1 - x0) or 1) * (width - left - right)
    sy = lambda y: top + (1 - y / y1) * (height - top - bottom)
    base = height - bottom
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='tripy-sweep' width='{width}' height='{height}' "
        "font-family='sans-serif' font-size='11' fill='#374151'>",
    ]
    for t, label in zip(ticks, labels):
        parts.append(f"<line x1='{left}' y1='{sy(t):.1f}' x2='{width - right}' y2='{sy(t):.1f}' stroke='#e5e7eb'/>")
        parts.append(f"<text class='tripy-ytick' x='{left - 6}' y='{sy(t) + 4:.1f}' text-anchor='end'>{label}</text>")
    for x in sorted(set(xs)):
        parts.append(f"<line x1='{sx(x):.1f}' y1='{base}' x2='{sx(x):.1f}' y2='{base + 4}' stroke='#374151'/>")
        parts.append(f"<text x='{sx(x):.1f}' y='{base + 16}' text-anchor='middle'>{x:g}</text>")
    parts += [
        f"<line x1='{left}' y1='{base}' x2='{width - right}' y2='{base}' stroke='#374151'/>",
        f"<line x1='{left}' y1='{top}' x2='{left}' y2='{base}' stroke='#374151'/>",
    ]
    if opt_x is not None:
        parts.append(f"<line x1='{sx(opt_x):.1f}' y1='{top}' x2='{sx(opt_x):.1f}' y2='{base}' "
                     "stroke='#dc2626' stroke-dasharray='4 3'/>")
        parts.append(f"<text x='{sx(opt_x) + 3:.1f}' y='{top + 10}' fill='#dc2626'>opt</text>")
    pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys))
    parts.append(f"<polyline points='{pts}' fill='none' stroke='#2563eb' stroke-width='2'/>")
    parts += [f"<circle cx='{sx(x):.1f}' cy='{sy(y):.1f}' r='3' fill='#2563eb'/>" for x, y in zip(xs, ys)]
    mid = (top + base) / 2
    parts.append(f"<text class='tripy-xtitle' x='{(left + width - right) / 2}' y='{height - 8}' "
                 f"text-anchor='middle'>{esc(xlabel)}</text>")
    parts.append(f"<text class='tripy-ytitle' x='{title_x}' y='{mid}' text-anchor='middle' dominant-baseline='middle' "
                 f"transform='rotate(-90 {title_x} {mid})'>{esc(ylabel)}</text>")
    parts.append("</svg>")
    return "".join(parts)
