"""The one way the lab puts text into HTML, and the one place finished HTML is sanitized.

- ``esc(value)``: every user-derived string (names, source lines, error text, table cells) goes
  through it before it is placed in markup.
- ``sanitize(fragment)``: every finished fragment that leaves the kernel (widget panes, static
  snapshots, reports) is cleaned by nh3 (the maintained ammonia sanitizer) against the allowlist
  below: the HTML and SVG our views produce, ``style`` attributes limited to layout and colour
  properties, no ``<script>``/``<style>``, no event handlers, no URLs except SVG images inlined as
  ``data:image/svg+xml`` (an SVG shown as an image runs no script and fetches nothing).

ipywidgets' HTML widget assigns its value with ``innerHTML``, so this is the only barrier there.
"""

from __future__ import annotations

import html as _stdlib_html

HTML_TAGS = {
    "a", "b", "img", "br", "code", "details", "div", "em", "h3", "h4", "hr", "i", "li", "ol", "p", "pre",
    "small", "span", "strong", "summary", "table", "tbody", "td", "th", "thead", "tr", "ul",
}  # fmt: skip
# What graphviz and views.sweep_svg emit (<a> only as graphviz's tooltip wrapper: no link attributes).
SVG_TAGS = {"svg", "g", "title", "polygon", "polyline", "path", "ellipse", "circle", "line", "text", "tspan", "rect"}
SVG_ATTRIBUTES = {
    "width", "height", "viewBox", "xmlns", "transform", "fill", "stroke", "stroke-width", "stroke-dasharray",
    "stroke-opacity", "fill-opacity", "points", "d", "cx", "cy", "rx", "ry", "r", "x", "y", "x1", "y1", "x2",
    "y2", "text-anchor", "font-family", "font-size", "font-weight", "font-style",
}  # fmt: skip
ATTRIBUTES = {
    "*": {"class", "id", "style", "title"},
    "details": {"open"},
    "img": {"src", "alt", "width", "height"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan"},
    **{tag: SVG_ATTRIBUTES for tag in SVG_TAGS},
}
# CSS properties kept in style="..." (nothing that positions outside the output: no position/z-index).
STYLE_PROPERTIES = {
    "background", "background-color", "border", "border-bottom", "border-collapse", "border-left", "border-radius",
    "border-top", "color", "cursor", "display", "filter", "flex", "font-family", "font-size", "font-style",
    "font-weight", "gap", "height", "line-height", "list-style", "margin", "margin-bottom", "margin-left",
    "margin-right", "margin-top", "max-height", "max-width", "min-width", "opacity", "overflow", "overflow-wrap",
    "overflow-x", "overflow-y", "padding", "padding-bottom", "padding-left", "padding-right", "padding-top",
    "text-align", "text-indent", "user-select", "vertical-align", "white-space", "width", "word-break",
}  # fmt: skip


def esc(value) -> str:
    """``value`` as text inside HTML (element content or a quoted attribute)."""
    return _stdlib_html.escape(str(value), quote=True)


SVG_DATA_URI = "data:image/svg+xml,"


def _only_svg_images(element: str, attribute: str, value: str) -> str | None:
    """The one URL allowed anywhere: an ``<img>`` of an SVG inlined as a data URI (images run no script)."""
    if attribute == "src":
        return value if element == "img" and value.startswith(SVG_DATA_URI) else None
    return value


def sanitize(fragment: str) -> str:
    """``fragment`` with everything outside the allowlist removed (nh3; the ``lab`` extra installs it)."""
    import nh3

    return nh3.clean(
        fragment,
        tags=HTML_TAGS | SVG_TAGS,
        attributes=ATTRIBUTES,
        generic_attribute_prefixes={"data-"},
        filter_style_properties=STYLE_PROPERTIES,
        url_schemes={"data"},
        attribute_filter=_only_svg_images,
        link_rel=None,
        strip_comments=True,
    )


def stylesheet(rules: list[dict], scope: str) -> str:
    """pandas-Styler-style rules (``{"selector", "props"}``, our constants) as CSS text under ``scope``, for the
    lab's own ``<style>``: ``sanitize`` removes the ``<style>`` each Styler table carries."""
    return "\n".join(f"{scope} table.tripy-table {r['selector']}".rstrip() + " {" + r["props"] + "}" for r in rules)
