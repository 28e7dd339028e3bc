"""How much of each pane a rendering shows (the live widget's limits, the static snapshot's) and the small HTML
pieces every pane uses for what it leaves out; ``tabs`` and the trace pane both render with them."""

from __future__ import annotations

from dataclasses import dataclass

from tripy_lab.lab.html import esc


@dataclass(frozen=True)
class Limits:
    """How much of each pane to show; None: everything."""

    svg_chars: int | None = None  # a bigger graph is replaced by a note (the listing stays)
    text_chars: int | None = None  # trace listing, DOT text, extra engine stages
    mlir_lines: int | None = None
    table_rows: int | None = None
    log_events: int = 40
    svg_image: bool = False  # the graph as an <img> (survives untrusted sanitizers) instead of inline <svg>
    graph_pictures: int | None = None  # the trace's drawings: the top level, then opened groups (None: as room allows)


LIVE = Limits(graph_pictures=1)  # the live graph opens groups in the browser
# A saved notebook with five 100-op cells stays < 1 MB (benchmarks/bench_snapshot_size.py); svg_chars is the room
# for the trace's pictures (the top level, then opened groups).
SNAPSHOT = Limits(svg_chars=240_000, text_chars=12_000, mlir_lines=300, table_rows=150, log_events=15,
                  svg_image=True)


def _ms(seconds) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.1f} ms"


def _cut(text: str, limit: int | None, what: str) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"\n... ({what} cut: {len(text) - limit} more characters)"


def note_html(text: str) -> str:
    return f'<div class="tripy-elided" style="font-size:12px;color:#92400e">{esc(text)}</div>'


def head_html(text: str) -> str:
    return f'<div style="font-size:12px;color:#374151">{text}</div>'
