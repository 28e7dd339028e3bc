"""Links between the stages: trace op <-> MLIR lines <-> engine layers, and the crosswalk MIME bundle.

MLIR ops carry ``NameLoc("%t5", ...)`` locations; printing with ``locations=True`` puts them on every
line, so one print gives both the text (locs stripped) and the op of each line.
"""

from __future__ import annotations

import re

from tripy_lab.lab.views import draw as views
from tripy_lab.lab.views import mlir_folds
from tripy_lab.lab.views.crosswalk_schema import MIME_TYPE, VERSION

_LOC_NAME = re.compile(r'loc\("([^"]+)"')
_LOC_ALIAS_USE = re.compile(r"loc\((#loc\w*)\)")
_LOC_ALIAS_DEF = re.compile(r'^(#loc\w*) = loc\("([^"]+)"')


def _close_paren(line: str, start: int) -> int:
    """Index of the ``)`` matching the ``(`` at ``start`` (strings respected); len(line) if none."""
    depth, in_str = 0, False
    for k in range(start, len(line)):
        ch = line[k]
        if in_str:
            in_str = not (ch == '"' and line[k - 1] != "\\")
        elif ch == '"':
            in_str = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return k
    return len(line)


def strip_locs(line: str) -> str:
    """Remove every ``loc(...)`` and the blanks before it."""
    out: list[str] = []
    i = 0
    while i < len(line):
        j = line.find("loc(", i)
        if j < 0:
            out.append(line[i:])
            break
        if j > 0 and (line[j - 1].isalnum() or line[j - 1] in "_.#"):  # e.g. "alloc(": not a location
            out.append(line[i:j + 4])
            i = j + 4
            continue
        out.append(line[i:j].rstrip(" "))
        i = _close_paren(line, j + 3) + 1
    return "".join(out)


def mlir_lines(lowered, generic: bool = False) -> list[tuple[str, str | None]]:
    """(text, trace op name or None) per printed line, profiles inlined, location aliases dropped."""
    text = lowered.as_text(generic=generic, elide=True, locations=True)
    aliases = {m.group(1): m.group(2) for m in map(_LOC_ALIAS_DEF.match, text.splitlines()) if m}
    text = views.inline_aliases(text)
    out: list[tuple[str, str | None]] = []
    for line in text.splitlines():
        if _LOC_ALIAS_DEF.match(line) or line.startswith("#loc"):
            continue
        names = _LOC_NAME.findall(line) or [aliases.get(a) for a in _LOC_ALIAS_USE.findall(line)]
        op = next((n for n in reversed(names) if n), None)
        out.append((strip_locs(line), op))
    return out


def mlir_text(lowered, generic: bool = False) -> str:
    return "\n".join(t for t, _ in mlir_lines(lowered, generic)) + "\n"


def loc_name(op) -> str | None:
    """The trace op name in an MLIR op's ``NameLoc`` (xDSL keeps it in ``.desc``; ``.name`` is the attr's)."""
    desc = getattr(getattr(op, "location", None), "desc", None)
    return getattr(desc, "data", None)


def layer_ops(layer, lowered, known: set[str]) -> list[str]:
    """Trace ops of a layer: its ``source_ops``, else the NameLocs of its ``mlir_ops``."""
    names = [n for n in layer.source_ops if n in known]
    if names or lowered is None:
        return names
    ops = lowered.program.ops()
    for idx in layer.mlir_ops:
        if 0 <= idx < len(ops):
            name = loc_name(ops[idx])
            if name in known and name not in names:
                names.append(name)
    return names


def trace_dot(traced, highlight: str | None = None) -> str:
    """The trace's DOT with ``id="op-%tN"`` on op nodes."""
    return views.add_node_ids(traced.trace.to_dot(highlight=highlight), [op.name for op in traced.trace.ops])


def build_bundle(traced, lowered=None, built=None, *, title: str = "", error: dict | None = None,
                 svg: str | None = None, dot: str | None = None, generic: bool = False,
                 graph: dict | None = None, model=None) -> dict:
    """The ``application/vnd.tripy-lab.crosswalk+json`` bundle (see crosswalk_schema); ``graph``: the folded
    graph's JSON (``TraceView.bundle()``), which the renderer draws instead of ``svg``/``dot``; ``model``: that
    graph's model, whose groups fold the MLIR lines (``folds``, as the MLIR tab)."""
    ops = traced.trace.ops
    known = {op.name for op in ops}
    lines = mlir_lines(lowered, generic) if lowered is not None else []
    mlir = [
        {"line": i + 1, "text": text, "op": op if op in known else None} for i, (text, op) in enumerate(lines)
    ]
    layers = []
    for i, ly in enumerate(built.layers if built is not None else []):
        layers.append(
            {
                "id": f"L{i}",
                "name": ly.name,
                "kind": ly.kind,
                "ops": layer_ops(ly, lowered, known),
                "lines": list(ly.source_lines),
                "shapes": " ".join(views._shape(s) for s in ly.output_shapes),
                "dtypes": ",".join(ly.output_dtypes),
                "kernel": ly.kernel,
            }
        )
    op_rows = []
    for op in ops:
        op_rows.append(
            {
                "id": op.name,
                "label": f"{op.name} = {op.kind}",
                "line": op.location.short if op.location else None,
                "mlir": [i for i, row in enumerate(mlir) if row["op"] == op.name],
                "layers": [ly["id"] for ly in layers if op.name in ly["ops"]],
            }
        )
    err_op = error.get("op") if error else None
    dot = dot if dot is not None else trace_dot(traced, err_op)
    out = {
        "version": VERSION,
        "title": title or traced.trace.name,
        "svg": svg,
        "dot": dot,
        "ops": op_rows,
        "mlir": mlir,
        "layers": layers,
        "error": None
        if error is None
        else {"message": error["message"], "op": err_op if err_op in known else None},
    }
    if graph is not None:
        out["graph"] = graph
    if model is not None:
        out["folds"] = [mlir_folds.to_json(f) for f in mlir_folds.folds([op for _, op in lines], model)]
    return out


def mime_bundle(bundle: dict) -> dict:
    """What ``display(..., raw=True)`` takes: the crosswalk plus a text fallback."""
    text = f"crosswalk: {bundle['title']} ({len(bundle['ops'])} ops, {len(bundle['layers'])} layers)"
    return {MIME_TYPE: bundle, "text/plain": text}
