"""The crosswalk bundle: the JSON the `tripy-lab` JupyterLab renderer draws (extension/src/index.ts).

Version 1::

    {"version": 1, "title": str,
     "svg": str | None,           # graphviz SVG of the trace; None -> the browser draws "dot" (wasm)
     "dot": str,                  # always present
     "ops":    [{"id": "%t5", "label": str, "line": str | None, "mlir": [int], "layers": [str]}],
     "mlir":   [{"line": int, "text": str, "op": str | None}],     # one per MLIR text line
     "layers": [{"id": str, "name": str, "kind": str, "ops": [str],
                 "lines": [str], "shapes": str, "dtypes": str, "kernel": str}],   # last four optional
     "error":  None | {"message": str, "op": str | None},
     "folds":  optional: the MLIR's folds per module (lab/views/mlir_folds.py):
               [{"name": str, "start": int, "end": int, "ops": int, "children": [fold]}], 0-based line ranges
               into "mlir", children inside their parent, in order
     "graph":  optional: the folded graph (lab/graph_model.py GraphModel.to_json): drawn instead of svg/dot,
               every op a leaf node with id "op-X" (left out of an op's node: graph_model.json_node_id)}

Links: ``ops[i].mlir`` are 0-based indices into ``mlir`` and must be exactly the lines whose ``op``
is that op; ``ops[i].layers`` and ``layers[j].ops`` must mirror each other.

Graph nodes: the renderer links the SVG node ``<g class="node" id="op-X">`` to op ``X`` (``X`` verbatim,
``%`` kept); failing that, a node whose ``<title>`` is ``X``.  So give each op node the DOT attribute
``id="op-X"``: ``"t5" [id="op-%t5", label="%t5 = add(a, b)"]``.  Graphviz copies ``id`` onto the ``<g>``
but renames nodes whose *name* starts with ``%`` (reserved for anonymous objects), so the node name can
be anything else.  Nodes of no op (inputs, constants) may be named freely.  ``validate_bundle`` checks
that every op has a node: ``"op-X"`` in ``dot``, and ``<g class="node" id="op-X">`` in ``svg`` if any.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from typing import Any

from tripy_lab.lab.views.graph_model import json_node_id
from tripy_lab.trace.graph import dot_quote, dot_text

MIME_TYPE = "application/vnd.tripy-lab.crosswalk+json"
VERSION = 1


def _is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _check_keys(where: str, obj: Any, spec: dict[str, tuple[Any, bool]], errors: list[str]) -> bool:
    """Check that ``obj`` is a dict whose keys have the types in ``spec`` (name -> (check, required))."""
    if not isinstance(obj, dict):
        errors.append(f"{where}: expected an object, got {type(obj).__name__}")
        return False
    ok = True
    for key, (check, required) in spec.items():
        if key not in obj:
            if required:
                errors.append(f"{where}: missing key {key!r}")
                ok = False
        elif not check(obj[key]):
            errors.append(f"{where}.{key}: bad value {obj[key]!r}")
            ok = False
    return ok


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _int_list(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in v)


_TOP = {
    "version": (lambda v: v == VERSION, True),
    "title": (_str, True),
    "svg": (lambda v: v is None or (isinstance(v, str) and "<svg" in v), True),
    "dot": (lambda v: isinstance(v, str) and v.strip() != "", True),
    "ops": (lambda v: isinstance(v, list), True),
    "mlir": (lambda v: isinstance(v, list), True),
    "layers": (lambda v: isinstance(v, list), True),
    "error": (lambda v: v is None or isinstance(v, dict), True),
}
_OP = {
    "id": (_str, True),
    "label": (_str, True),
    "line": (_opt_str, False),
    "mlir": (_int_list, True),
    "layers": (_is_str_list, True),
}
_LINE = {
    "line": (lambda v: isinstance(v, int) and not isinstance(v, bool), True),
    "text": (_str, True),
    "op": (_opt_str, True),
}
_LAYER = {
    "id": (_str, True),
    "name": (_str, True),
    "kind": (_str, True),
    "ops": (_is_str_list, True),
    "lines": (_is_str_list, False),
    "shapes": (_str, False),
    "dtypes": (_str, False),
    "kernel": (_str, False),
}
_ERROR = {"message": (_str, True), "op": (_opt_str, False)}
_INT = (lambda v: isinstance(v, int) and not isinstance(v, bool))
_FOLD = {"name": (_str, True), "start": (_INT, True), "end": (_INT, True), "ops": (_INT, True),
         "children": (lambda v: isinstance(v, list), False)}


def validate_bundle(bundle: Any) -> list[str]:
    """Return the problems with a crosswalk bundle; an empty list means it is valid."""
    errors: list[str] = []
    if not _check_keys("bundle", bundle, _TOP, errors):
        return errors

    ops = [op for i, op in enumerate(bundle["ops"]) if _check_keys(f"ops[{i}]", op, _OP, errors)]
    lines = bundle["mlir"]
    layers = [ly for i, ly in enumerate(bundle["layers"]) if _check_keys(f"layers[{i}]", ly, _LAYER, errors)]
    line_ok = [_check_keys(f"mlir[{i}]", line, _LINE, errors) for i, line in enumerate(lines)]

    op_ids = [op["id"] for op in ops]
    layer_ids = [ly["id"] for ly in layers]
    op_layers = {op["id"]: set(op["layers"]) for op in ops}
    layer_ops = {ly["id"]: set(ly["ops"]) for ly in layers}
    for kind, ids in (("op", op_ids), ("layer", layer_ids)):
        for dup in sorted(i for i, n in Counter(ids).items() if n > 1):
            errors.append(f"duplicate {kind} id {dup!r}")

    owned: dict[str, set[int]] = {oid: set() for oid in op_ids}
    for i, line in enumerate(lines):
        if line_ok[i] and line["op"] is not None:
            if line["op"] in owned:
                owned[line["op"]].add(i)
            else:
                errors.append(f"mlir[{i}].op: unknown op {line['op']!r}")

    for op in ops:
        oid = op["id"]
        indices = set(op["mlir"])
        for idx in sorted(indices):
            if not 0 <= idx < len(lines):
                errors.append(f"op {oid!r}: mlir index {idx} out of range (0..{len(lines) - 1})")
        if {i for i in indices if 0 <= i < len(lines)} != owned[oid]:
            errors.append(f"op {oid!r}: mlir {sorted(indices)} != its lines {sorted(owned[oid])}")
        for lid in op["layers"]:
            if lid not in layer_ops:
                errors.append(f"op {oid!r}: unknown layer {lid!r}")
            elif oid not in layer_ops[lid]:
                errors.append(f"op {oid!r} lists layer {lid!r}, but that layer does not list the op")
    for ly in layers:
        for oid in ly["ops"]:
            if oid not in op_layers:
                errors.append(f"layer {ly['id']!r}: unknown op {oid!r}")
            elif ly["id"] not in op_layers[oid]:
                errors.append(f"layer {ly['id']!r} lists op {oid!r}, but that op does not list the layer")

    errors += _check_graph(bundle, op_ids)
    errors += _check_folds(bundle.get("folds", []), 0, len(lines), "folds")

    error = bundle["error"]
    if error is not None and _check_keys("error", error, _ERROR, errors):
        if error.get("op") is not None and error["op"] not in op_layers:
            errors.append(f"error.op: unknown op {error['op']!r}")
    return errors


def _check_folds(folds: Any, start: int, end: int, where: str) -> list[str]:
    """Each fold a line range inside [start, end), after the one before it; its children likewise inside it."""
    if not isinstance(folds, list):
        return [f"{where}: expected a list"]
    errors: list[str] = []
    at = start
    for k, fold in enumerate(folds):
        here = f"{where}[{k}]"
        if not _check_keys(here, fold, _FOLD, errors):
            continue
        if not at <= fold["start"] < fold["end"] <= end:
            errors.append(f"{here}: lines {fold['start']}..{fold['end']} outside {at}..{end}")
            continue
        errors += _check_folds(fold.get("children", []), fold["start"], fold["end"], here + ".children")
        at = fold["end"]
    return errors


def _svg_op_ids(svg: str) -> set[str] | None:
    """The X of every ``<g class="node" id="op-X">`` in ``svg``; None when it is not XML."""
    try:
        root = ET.fromstring(svg)
    except ET.ParseError:
        return None
    groups = root.iter("{http://www.w3.org/2000/svg}g")
    return {
        g.get("id", "")[3:]
        for g in groups
        if "node" in g.get("class", "").split() and g.get("id", "").startswith("op-")
    }


def _check_graph(bundle: dict, op_ids: list[str]) -> list[str]:
    graph = bundle.get("graph")
    if graph is not None:  # the folded graph: every op is a leaf (dot is then its top level only)
        nodes = graph.get("nodes") if isinstance(graph, dict) else None
        if not isinstance(nodes, list):
            return ["graph: no node list"]
        have = {json_node_id(n) for n in nodes if isinstance(n, dict)}
        return [f'graph: no node with id "op-{oid}"' for oid in op_ids if f"op-{oid}" not in have]
    # ids are written by trace.graph.dot_quote, and graphviz draws them as dot_text(X)
    errors = [f'dot: no node with id="op-{oid}"' for oid in op_ids if dot_quote(f"op-{oid}", "id") not in bundle["dot"]
              and f'"op-{oid}"' not in bundle["dot"]]
    if bundle["svg"] is not None:
        found = _svg_op_ids(bundle["svg"])
        if found is None:
            errors.append("svg: not well-formed XML")
        else:
            errors += [f'svg: no <g class="node" id="op-{oid}">' for oid in op_ids if dot_text(oid) not in found]
    return errors
