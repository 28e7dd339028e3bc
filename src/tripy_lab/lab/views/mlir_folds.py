"""The MLIR pane's folds: its lines grouped by the module that made them, nested as the trace graph folds.

The grouping is the folded trace graph's (``graph_model``): a line belongs to the module groups (and, for a long
program outside any module, the runs) that hold its op's node, so a GPT's MLIR folds into ``h.0`` ... ``h.11`` at
the top and ``h.3`` opens to ``h.3.attn``, ``h.3.mlp``, ... exactly as its Trace tab does. ``folds`` is the view
model; ``folds_html`` renders it as nested ``<details>`` (plain HTML: the live pane and the static snapshot draw the
same markup, no script, nothing the sanitizer removes). Lines printed for no op (the function header, ``}``) sit
at the level their neighbours share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tripy_lab.lab.html import esc
from tripy_lab.lab.views.graph_model import GraphModel

GROUP_KINDS = ("module", "run")  # a call (one `x[:, :n]`) is a few lines: not worth a fold


@dataclass
class Fold:
    node: int  # the graph node of the group (a module or a run)
    name: str  # the module path ("h.3.attn"), or the run's label
    start: int  # its first line (0-based, into the pane's lines)
    end: int  # one past its last line
    n_ops: int = 0  # lines that print an op of the group (the MLIR ops it lowered to)
    children: list[Fold] = field(default_factory=list)

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


def _chain(model: GraphModel, op: str, memo: dict[int, tuple[int, ...]]) -> tuple[int, ...]:
    """The groups holding ``op``'s node, outermost first (() for an op at the top level or not in the model)."""
    leaf = model.op_node.get(op)
    if leaf is None:
        return ()
    parent = model.nodes[leaf].parent
    if parent in memo:
        return memo[parent]
    out: list[int] = []
    p = parent
    while p >= 0:
        if model.nodes[p].kind in GROUP_KINDS:
            out.append(p)
        p = model.nodes[p].parent
    memo[parent] = tuple(reversed(out))
    return memo[parent]


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return a[:k]


def folds(ops: list[str | None], model: GraphModel | None) -> list[Fold]:
    """The top-level folds of a pane whose line ``i`` prints trace op ``ops[i]`` (None: no op)."""
    if model is None or not ops:
        return []
    memo: dict[int, tuple[int, ...]] = {}
    chains: list[tuple[int, ...] | None] = [_chain(model, op, memo) if op else None for op in ops]
    # a line of no op sits at the level shared by the op lines before and after it
    nxt: tuple[int, ...] = ()
    for i in range(len(chains) - 1, -1, -1):
        if chains[i] is None:
            chains[i] = nxt  # provisional: the next op line's
        else:
            nxt = chains[i]
    prev: tuple[int, ...] = ()
    for i, op in enumerate(ops):
        if op is None:
            chains[i] = _common(prev, chains[i])
        else:
            prev = chains[i]
    top: list[Fold] = []
    stack: list[Fold] = []
    for i, chain in enumerate(chains):
        k = 0
        while k < len(stack) and k < len(chain) and stack[k].node == chain[k]:
            k += 1
        del stack[k:]
        for node in chain[k:]:
            n = model.nodes[node]
            fold = Fold(node, n.module if n.kind == "module" else n.label.splitlines()[0], i, i + 1)
            (stack[-1].children if stack else top).append(fold)
            stack.append(fold)
        for fold in stack:
            fold.end = i + 1
            fold.n_ops += ops[i] is not None
    return top


def to_json(fold: Fold) -> dict:
    """The crosswalk bundle's form of a fold (its renderer nests the MLIR lines the same way)."""
    out = {"name": fold.name, "start": fold.start, "end": fold.end, "ops": fold.n_ops}
    if fold.children:
        out["children"] = [to_json(c) for c in fold.children]
    return out


FOLD_STYLE = "border-left:2px solid #c7d2fe"
HEAD_STYLE = "cursor:pointer;color:#3730a3;background:#eef2ff"  # inline and short: a report holds dozens


def _summary(fold: Fold, depth: int) -> str:
    indent = f";padding-left:{depth * 2}ch" if depth else ""
    return (f'<summary style="{HEAD_STYLE}{indent}">{esc(fold.name)} · {fold.n_ops} op{"s" if fold.n_ops != 1 else ""}'
            f" · lines {fold.start + 1}–{fold.end}</summary>")


def folds_html(rows: list[str], top: list[Fold], open_lines: set[int] = frozenset()) -> str:
    """``rows`` (the pane's first ``len(rows)`` line ``<div>``s) inside nested ``<details>``, one per fold, closed
    unless it holds a line of ``open_lines`` (0-based: the failing op's). A fold that starts past the rows (a
    snapshot's cut) keeps its summary and says its lines are left out."""
    upto = len(rows)
    out: list[str] = []

    def render(level: list[Fold], start: int, end: int, depth: int) -> None:
        i = start
        for fold in level:
            out.extend(rows[i:min(fold.start, upto)])
            opened = " open" if any(fold.start <= k < fold.end for k in open_lines) else ""
            out.append(f'<details class="tripy-mlir-fold" data-module="{esc(fold.name)}"{opened} '
                       f'style="{FOLD_STYLE}">{_summary(fold, depth)}')
            if fold.start >= upto:
                out.append(f'<div class="tripy-elided" style="color:#92400e">{fold.end - fold.start} lines left out '
                           "here (size limit)</div>")
            else:
                render(fold.children, fold.start, fold.end, depth + 1)
            out.append("</details>")
            i = fold.end
        out.extend(rows[i:min(end, upto)])

    render(top, 0, max(upto, top[-1].end if top else 0), 0)
    return "".join(out)
