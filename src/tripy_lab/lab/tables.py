"""How the lab shows a DataFrame: one Styler for every table (timing, layers, log, diffs).

Display only: headers get their units (``median_ms`` -> ``median (ms)``), floats 3 significant digits,
long text wraps inside its cell and wide tables scroll inside their own box. The DataFrames themselves keep
full precision: ``benchmark()``/``compare()`` return a ``LabFrame``, a DataFrame whose notebook display
(HTML and text) goes through ``style()``.
"""

from __future__ import annotations

import math

import pandas as pd

# Column suffix -> unit shown in the header. Longest first: "_per_s" before "_s".
UNIT_SUFFIXES = (("_per_s", "1/s"), ("_ms", "ms"), ("_us", "µs"), ("_s", "s"), ("_mb", "MB"))
HEADERS = {"ms": "time (ms)", "opt_level": "opt level"}
SHORT_TEXT = 40  # cells up to this many characters stay on one line
CELL_MAX_WIDTH = "32em"  # a long cell (source ops, user lines, errors) wraps at this width

TABLE_CSS = [
    {"selector": "", "props": "border-collapse:collapse;font-size:12px;width:auto;"},
    {"selector": "th", "props": "text-align:left;padding:2px 8px;background:#f3f4f6;white-space:nowrap;"
                                "border-bottom:1px solid #d1d5db;font-weight:600;"},
    {"selector": "td", "props": f"text-align:left;padding:1px 8px;vertical-align:top;white-space:normal;"
                                f"overflow-wrap:break-word;max-width:{CELL_MAX_WIDTH};"
                                "border-bottom:1px solid #f3f4f6;"},
    {"selector": "td.tripy-num", "props": "text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap;"},
    {"selector": "td.tripy-short", "props": "white-space:nowrap;"},
    {"selector": "tr", "props": "background:none;"},  # no notebook zebra stripes
]
BOX_STYLE = "overflow:auto;max-width:100%;max-height:480px;font-size:12px;line-height:1.4"  # widgets set 28px


def header(column: str) -> str:
    """``median_ms`` -> ``median (ms)``; ``throughput_per_s`` -> ``throughput (1/s)``."""
    if column in HEADERS:
        return HEADERS[column]
    for suffix, unit in UNIT_SUFFIXES:
        if column.endswith(suffix) and len(column) > len(suffix):
            return f"{column[: -len(suffix)].replace('_', ' ')} ({unit})"
    return column.replace("_", " ")


def sig3(value) -> str:
    """3 significant digits, without switching to exponents between 0.001 and 99 999: ``50140.39 -> 50100``."""
    if value is None or isinstance(value, str):
        return "" if value is None else value
    if isinstance(value, bool):
        return str(value)
    v = float(value)
    if math.isnan(v):
        return ""
    if math.isinf(v) or v == 0:
        return f"{v:g}"
    if not 1e-3 <= abs(v) < 1e5:
        return f"{v:.2e}"
    digits = 2 - math.floor(math.log10(abs(v)))
    rounded = round(v, digits)
    if rounded != 0 and math.floor(math.log10(abs(rounded))) != math.floor(math.log10(abs(v))):
        digits -= 1  # 9.996 rounds to 10.0: one digit fewer after the point
    return f"{rounded:.{max(digits, 0)}f}"


def _is_float_column(series: pd.Series) -> bool:
    if pd.api.types.is_float_dtype(series):
        return True
    if series.dtype == object:  # None mixed with floats (e.g. opt_level of an untimed row)
        values = [v for v in series if v is not None and not (isinstance(v, float) and math.isnan(v))]
        return bool(values) and all(isinstance(v, float) for v in values)
    return False


def _integral(series: pd.Series) -> bool:
    values = [float(v) for v in series if v is not None and not math.isnan(float(v))]
    return all(v.is_integer() for v in values)


def _whole(value) -> str:
    return "" if value is None or math.isnan(float(value)) else str(int(value))


def formatters(df: pd.DataFrame) -> dict[str, object]:
    """Column -> formatter for the float columns: 3 significant digits, or whole numbers for a unit-less
    column that holds only whole numbers (an int column with gaps, e.g. opt_level)."""
    out = {}
    for c in df.columns:
        if _is_float_column(df[c]):
            unitless = header(str(c)) == str(c).replace("_", " ")
            out[c] = _whole if unitless and _integral(df[c]) else sig3
    return out


def style(df: pd.DataFrame):
    """The one Styler of the lab: unit headers, 3 significant digits, wrapping cells, no index.

    Deterministic HTML (a fixed table id, no per-cell ids): every table shares the same CSS, and static
    snapshots of the same data are byte-identical.
    """
    from pandas.io.formats.style import Styler

    shown = pd.DataFrame(df).reset_index(drop=True)
    fmt = formatters(shown)
    numeric = [header(str(c)) for c in shown.columns if c in fmt or pd.api.types.is_numeric_dtype(shown[c])]
    fmt = {header(str(c)): f for c, f in fmt.items()}
    shown.columns = [header(str(c)) for c in shown.columns]
    styler = Styler(shown, uuid="tripy", cell_ids=False).hide(axis="index").set_table_styles(TABLE_CSS)
    styler = styler.set_table_attributes('class="tripy-table"')
    styler = styler.format(None, na_rep="", escape="html").format_index(escape="html", axis=1)
    for column, f in fmt.items():
        styler = styler.format(f, subset=[column], na_rep="", escape="html")
    # Numbers right-aligned; short text never wraps (a wide table scrolls instead of squashing it).
    classes = shown.map(lambda v: "tripy-short" if len(str(v)) <= SHORT_TEXT else "")
    classes[numeric] = "tripy-num"
    return styler.set_td_classes(classes)


def frame_html(df: pd.DataFrame) -> str:
    """The styled table in a box that scrolls (both ways) instead of overflowing the cell."""
    html = style(df).to_html()
    return f'<div class="tripy-table-box" style="{BOX_STYLE}">{html}</div>'


def frame_text(df: pd.DataFrame) -> str:
    """Plain-text form with the same headers and digits (``print(df)`` / the text repr)."""
    shown = pd.DataFrame(df).reset_index(drop=True)
    fmt = {header(str(c)): f for c, f in formatters(shown).items()}
    shown.columns = [header(str(c)) for c in shown.columns]
    return shown.to_string(index=False, formatters=fmt, na_rep="", max_rows=pd.get_option("display.max_rows"))


class LabFrame(pd.DataFrame):
    """A DataFrame (full-precision values) shown in notebooks through ``style()``."""

    @property
    def _constructor(self):
        return LabFrame

    def _repr_html_(self) -> str:
        limit = pd.get_option("display.max_rows") or len(self)
        if len(self) <= limit:
            return frame_html(self)
        more = f"<div style='font-size:12px;color:#6b7280'>… {len(self) - limit} more rows</div>"
        return frame_html(self.head(limit)) + more

    def __repr__(self) -> str:
        return frame_text(self)
