"""Trace: the ops that compute ``outputs`` from ``inputs``, in topological order."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tripy_lab.core.errors import raise_error
from tripy_lab.trace.ir import TraceOp, TraceTensor


class Trace:
    def __init__(self, outputs: Sequence[TraceTensor], inputs: Sequence[TraceTensor] = (),
                 input_infos: dict | None = None, name: str = "main"):
        self.outputs = list(outputs)
        self.inputs = list(inputs)
        self.input_infos = dict(input_infos or {})
        self.name = name
        self.ops, leaked = self._topo_sort()
        if leaked:
            self._check_leaked_inputs()
        self._renumber()

    def _renumber(self) -> None:
        """Give auto-named tensors (%tN) names numbered in program order, so listings and IR are stable; then two
        distinct tensors with one name (inputs first, then each op's outputs in order) are an error at the
        second one. A name the user gave that starts with %t is renumbered like an automatic one."""
        names = _AUTO_NAMES
        by_name: dict[str, TraceTensor] = {}
        for t in self.inputs:
            self._claim(by_name, t)
        counter = 0
        for op in self.ops:
            for t in op.outputs:
                if t.name.startswith("%t"):
                    if counter >= len(names) and counter < _AUTO_NAMES_LIMIT:
                        names.extend(f"%t{i}" for i in range(len(names), min(2 * counter + 64, _AUTO_NAMES_LIMIT)))
                    t.name = names[counter] if counter < len(names) else f"%t{counter}"
                    counter += 1
                if by_name.setdefault(t.name, t) is not t:  # _claim, inlined: every tensor
                    self._claim(by_name, t)

    @staticmethod
    def _claim(by_name: dict, t: TraceTensor) -> None:
        if by_name.setdefault(t.name, t) is not t:
            raise_error(f"Found distinct tensors with the same name: '{t.name}'.",
                        ["Give each tensor a unique name."], location=t.location)

    def _topo_sort(self) -> tuple[list[TraceOp], bool]:
        """Post-order depth-first from each output in turn, each op's inputs in order (what a recursive walk
        gives), with an explicit stack: deep graphs (100s of ops) must not hit Python's recursion limit.
        Ops and tensors hash by identity (``eq=False``), so sets hold them directly. Also says whether an op
        reads a tensor with no producer that is not an input (then ``_check_leaked_inputs`` raises)."""
        inputs = set(self.inputs)
        order: list[TraceOp] = []
        done: set[TraceOp] = set()
        leaked = False
        for out in self.outputs:
            op = out.producer
            if op is None or op in done or out in inputs:
                continue
            stack, nexts = [op], [0]  # an op being walked, and the position of its next input to look at
            while stack:
                op = stack[-1]
                ins = op.inputs
                i, n = nexts[-1], len(ins)
                while i < n:
                    inp = ins[i]
                    i += 1
                    producer = inp.producer
                    if producer is None:
                        leaked = leaked or inp not in inputs
                    elif producer not in done and inp not in inputs:
                        nexts[-1] = i
                        stack.append(producer)
                        nexts.append(0)
                        break
                else:  # every input's producer is placed: so is this op
                    stack.pop()
                    nexts.pop()
                    done.add(op)
                    order.append(op)
        return order, leaked

    def _check_leaked_inputs(self) -> None:
        """A tensor with no producer that is not one of our inputs is another compile's input: a tracer that
        escaped its function through a side effect (``side.append(t)``). Its value never existed."""
        input_ids = {id(t) for t in self.inputs}
        for op in self.ops:
            for t in op.inputs:
                if t.producer is None and id(t) not in input_ids:
                    raise_error("Cannot use a tensor traced by tp.compile outside the function being compiled.",
                                [f"The tensor made at {op.location.short if op.location else '?'} depends on "
                                 f"'{t.name}', an input of a function traced by tp.compile (it escaped through a "
                                 "side effect, e.g. appended to a list); it has no value outside that trace.",
                                 "Return the tensor from the compiled function and use the Executable's output."])

    def op_by_name(self, name: str) -> TraceOp:
        for op in self.ops:
            if op.name == name:
                return op
        raise KeyError(name)

    def __str__(self) -> str:
        lines = [f"def {self.name}("]
        for i, t in enumerate(self.inputs):
            info = self.input_infos.get(t.name)
            suffix = f" : {info}" if info is not None else ""
            comma = "," if i < len(self.inputs) - 1 else ""
            lines.append(f"    {t.name} : {t.type_str()}{suffix}{comma}")
        lines.append(") -> (")
        lines += [f"    {t.name} : {t.type_str()}" + ("," if i < len(self.outputs) - 1 else "")
                  for i, t in enumerate(self.outputs)]
        lines.append("):")
        for op in self.ops:
            where = op.scope_str()
            lines.append(f"    {op}  # {where}" if where else f"    {op}")
        lines.append("    return " + ", ".join(t.name for t in self.outputs))
        return "\n".join(lines)

    def to_dot(self, highlight: str | None = None) -> str:
        """Graphviz DOT text: inputs, ops (with user line), constants, edges labelled with types.

        Every id and label goes through :func:`dot_quote`. Nodes are named by position (``"in0"``,
        ``"op3"``, ``"return0"``) so no user name is a node name; an op's name is in ``id="op-<name>"``.
        """
        q = dot_quote
        node = {id(t): f'"in{i}"' for i, t in enumerate(self.inputs)}
        node.update({id(t): f'"op{i}"' for i, op in enumerate(self.ops) for t in op.outputs})
        # Courier, not "monospace": the browser's wasm graphviz (16.1) crashes laying out some long labels
        # in "monospace" (no metrics for that name); both graphviz builds have Courier's
        lines = ["digraph trace {", "  rankdir=TB;", '  node [fontname="Courier", fontsize=10];']
        for t in self.inputs:
            style = 'shape=invhouse, style=filled, fillcolor="#dbeafe"'
            label = q(f"{t.name}\n{t.type_str()}")
            lines.append(f"  {node[id(t)]} [id={q('op-' + t.name, 'id')}, {style}, label={label}];")
        for op in self.ops:
            where = f"\n{op.location.short}" if op.location else ""
            style = 'shape=box, style="rounded,filled", fillcolor="#f3f4f6"'
            if op.kind == "constant":
                style = 'shape=note, style=filled, fillcolor="#fef3c7"'
            if op.name == highlight:
                style += ', color="#dc2626", penwidth=3'
            attrs = f"id={q('op-' + op.name, 'id')}, {style}, label={q(f'{op.name} = {op.kind}{where}')}"
            lines.append(f"  {node[id(op.outputs[0])]} [{attrs}, tooltip={q(str(op), 'tooltip')}];")
        missing = '"missing"'  # an input that is neither a trace input nor produced (never in a valid Trace)
        for op in self.ops:
            for t in op.inputs:
                edge = f"{node.get(id(t), missing)} -> {node[id(op.outputs[0])]}"
                lines.append(f"  {edge} [label={q(t.type_str())}, fontsize=8];")
        for i, t in enumerate(self.outputs):
            style = 'shape=house, style=filled, fillcolor="#dcfce7"'
            lines.append(f'  "return{i}" [{style}, label={q("return " + t.name)}];')
            lines.append(f'  {node.get(id(t), missing)} -> "return{i}" [label={q(t.type_str())}, fontsize=8];')
        lines.append("}")
        return "\n".join(lines)


# "%t0", "%t1", ...: shared by every Trace (renumbering formats no name twice)
_AUTO_NAMES: list[str] = []
_AUTO_NAMES_LIMIT = 1 << 16  # bounded: bigger programs format their later names on the fly
# C0 controls (but newline) and DEL cannot appear in the SVG (XML 1.0): show their Unicode control pictures.
_PICTURES = {c: chr(0x2400 + c) for c in range(0x20) if c != 0x0A} | {0x7F: "\u2421"}
_INVALID = re.compile("[\ud800-\udfff\ufffe\uffff]")  # lone surrogates and non-characters


def dot_text(text: str) -> str:
    """``text`` with the characters no SVG may hold replaced by visible ones (the renderer does the same)."""
    return _INVALID.sub("\ufffd", str(text).translate(_PICTURES))


def dot_quote(text: str, kind: str = "label") -> str:
    """The one way a string enters DOT: a quoted string that graphviz draws as ``text``.

    ``kind`` is ``"label"``, ``"id"`` or ``"tooltip"``. In DOT's quotes only ``\\"`` is special to the
    parser, but graphviz then reads ``\\\\`` as ``\\``, ``\\N``/``\\G``/``\\L``... as object names and
    ``\\n``/``\\l`` as line breaks, and decodes HTML entities: so ``\\`` is doubled, ``"`` escaped and
    ``&`` written ``&amp;``. Newlines are ``\\n`` in labels (a raw newline after a backslash would be
    DOT's line continuation and vanish); in ids and tooltips they are ``&#10;`` (graphviz keeps entities, and XML
    reads a raw newline in an attribute as a space). Tooltips substitute ``\\L`` even after a doubled backslash
    (graphviz 2.43): there ``\\`` is drawn as U+2216.
    """
    t = dot_text(text).replace("&", "&amp;")
    t = t.replace("\\", "\u2216") if kind == "tooltip" else t.replace("\\", "\\\\")
    if kind in ("id", "tooltip"):  # (a raw newline first in a tooltip was dropped by graphviz)
        t = t.replace("\n", "&#10;")
    elif kind == "label":
        t = t.replace("\n", "\\n")
    return '"' + t.replace('"', '\\"') + '"'
