"""How the lab shows a DataFrame: one Styler for every table (timing, layers, log, diffs).

Display only: headers get their units (``median_ms`` -> ``median (ms)``), floats 3 significant digits,
long text wraps inside its cell and wide tables scroll inside their own box. The DataFrames themselves keep
full precision: ``benchmark()``/``compare()`` return a ``LabFrame``, a DataFrame whose notebook display
(HTML and text) goes through ``style()``. Timing tables (``TimingFrame``) show the columns a person reads
and say how compute was measured in a footnote; ``.full()`` shows every column.
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
    """The styled table in a box that scrolls (both ways) instead of overflowing the cell; a timing table shows
    its brief columns and footnote (as in the notebook)."""
    if isinstance(df, TimingFrame):
        return df._repr_html_()
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


# The timing columns a person reads; engine / opt level / build time only where they tell rows apart.
BRIEF = ["label", "engine", "opt_level", "shape", "build_ms", "compute_ms", "latency_ms", "latency_p90_ms",
         "throughput_per_s", "error"]
BRIEF_NAMES = {"latency_ms": "latency_p50_ms"}
NOTE_STYLE = "font-size:11px;color:#6b7280;margin-top:2px;max-width:60em"


def _varies(series: pd.Series) -> bool:
    values = {str(v) for v in series if v is not None and not (isinstance(v, float) and math.isnan(v))}
    return len(values) > 1


class TimingFrame(LabFrame):
    """``benchmark()`` / ``compare()``: every column in the frame, the ones a person reads on screen (shape,
    compute, latency p50/p90, throughput), the compute method as a footnote; ``.full()`` shows them all."""

    @property
    def _constructor(self):
        return TimingFrame

    def full(self) -> LabFrame:
        """The same rows with every column shown (iterations, latency spread, back-to-back time, method)."""
        return LabFrame(self)

    def brief(self) -> tuple[pd.DataFrame, list[str]]:
        """(the shown columns, the footnote lines)."""
        df = pd.DataFrame(self)
        keep = [c for c in BRIEF if c in df.columns]
        same = []  # engine / opt level shared by every row: said once, under the table
        for column, what in (("engine", "engine"), ("opt_level", "opt level")):
            if column in keep and not _varies(df[column]):
                keep.remove(column)
                values = [v for v in df[column] if v is not None and str(v) != "nan"]
                if values:
                    same.append(f"{what} {_whole(values[0]) if column == 'opt_level' else values[0]}")
        notes = [", ".join(same)] if same else []
        if "engine" in keep and "label" in df.columns and all(str(e) in str(lb) for e, lb in zip(df["engine"],
                                                                                              df["label"])):
            keep.remove("engine")  # the labels already name the engines ("xla min")
        if "build_ms" in keep and df["build_ms"].isna().all():
            keep.remove("build_ms")
        if "error" in keep and not df["error"].astype(bool).any():
            keep.remove("error")
        if "compute_method" in df.columns:
            methods: dict[str, list[str]] = {}  # method -> the engines that measured that way
            engines = df["engine"] if "engine" in df.columns else [""] * len(df)
            for method, engine in zip(df["compute_method"], engines):
                if method:
                    methods.setdefault(method, [])
                    if engine and str(engine) not in methods[method]:
                        methods[method].append(str(engine))
            for method, names in methods.items():
                who = f" ({', '.join(names)})" if len(methods) > 1 and names else ""
                notes.append(f"compute{who}: {method}")
        if "iters" in df.columns and len(df):
            notes.append(f"latency: median (p50) and p90 of {int(df['iters'].max())} synchronized calls; "
                         "throughput: calls queued back to back")
        notes.append("all columns: .full()")
        return df[keep].rename(columns=BRIEF_NAMES), notes

    def _repr_html_(self) -> str:
        shown, notes = self.brief()
        html = LabFrame(shown)._repr_html_()
        lines = "".join(f"<div>{_esc(n)}</div>" for n in notes)
        return html + f'<div class="tripy-table-note" style="{NOTE_STYLE}">{lines}</div>'

    def __repr__(self) -> str:
        shown, notes = self.brief()
        return frame_text(shown) + "\n" + "\n".join(notes)


def _esc(text: str) -> str:
    import html

    return html.escape(str(text))


class LayerTimes(LabFrame):
    """``profile()``'s frame: the layer table with a time per layer, which also writes itself as a trace.
    Shown like the lab's other tables (``time (ms)`` to 3 digits, not ``time_ms 1.175655``)."""

    @property
    def _constructor(self):
        return LayerTimes

    def to_trace(self, path, title: str = "tripy-lab") -> str:
        """Write the timing run as a Chrome / Perfetto trace JSON (ui.perfetto.dev and chrome://tracing open it);
        returns the path. See ``tripy_lab.lab.trace_export`` for what the slices mean."""
        from tripy_lab.lab.trace_export import write_trace

        return write_trace(self, path, title)
