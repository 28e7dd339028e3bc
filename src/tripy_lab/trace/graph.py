"""Trace: the ops that compute ``outputs`` from ``inputs``, in topological order."""

from __future__ import annotations

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
        self.ops = self._topo_sort()
        self._check_leaked_inputs()
        self._renumber()
        self._check_names()

    def _renumber(self) -> None:
        """Give auto-named tensors (%tN) names numbered in program order, so listings and IR are stable."""
        tensors = [t for op in self.ops for t in op.outputs]
        taken = {t.name for t in list(self.inputs) + tensors if not t.name.startswith("%t")}
        counter = 0
        for t in tensors:
            if t.name.startswith("%t"):
                while f"%t{counter}" in taken:
                    counter += 1
                t.name = f"%t{counter}"
                counter += 1

    def _topo_sort(self) -> list[TraceOp]:
        input_ids = {id(t) for t in self.inputs}
        order: list[TraceOp] = []
        seen: set[int] = set()
        # Iterative DFS: deep graphs (100s of ops) must not hit Python's recursion limit.
        stack: list[tuple[TraceOp, bool]] = [(t.producer, False) for t in reversed(self.outputs)
                                             if t.producer is not None and id(t) not in input_ids]
        while stack:
            op, expanded = stack.pop()
            if id(op) in seen:
                continue
            if expanded:
                seen.add(id(op))
                order.append(op)
                continue
            stack.append((op, True))
            for inp in reversed(op.inputs):
                if inp.producer is not None and id(inp) not in input_ids and id(inp.producer) not in seen:
                    stack.append((inp.producer, False))
        return order

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

    def _check_names(self) -> None:
        by_name: dict[str, TraceTensor] = {}
        tensors = list(self.inputs) + [t for op in self.ops for t in op.outputs]
        for t in tensors:
            other = by_name.setdefault(t.name, t)
            if other is not t:
                raise_error(f"Found distinct tensors with the same name: '{t.name}'.",
                            ["Give each tensor a unique name."], location=t.location)

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
            where = f"  # {op.location.short}" if op.location else ""
            lines.append(f"    {op}{where}")
        lines.append("    return " + ", ".join(t.name for t in self.outputs))
        return "\n".join(lines)

    def to_dot(self, highlight: str | None = None) -> str:
        """Graphviz DOT text: inputs, ops (with user line), constants, edges labelled with types."""
        def q(s: str) -> str:
            return '"' + s.replace('"', '\\"') + '"'

        def node(name: str) -> str:
            # Graphviz renames nodes whose name starts with '%'; keep the op id in the node's `id` instead.
            return q("n_" + name.lstrip("%"))

        lines = ["digraph trace {", "  rankdir=TB;", '  node [fontname="monospace", fontsize=10];']
        for t in self.inputs:
            label = f"{t.name}\\n{t.type_str()}"
            style = 'shape=invhouse, style=filled, fillcolor="#dbeafe"'
            lines.append(f"  {node(t.name)} [id={q('op-' + t.name)}, {style}, label={q(label)}];")
        for op in self.ops:
            where = f"\\n{op.location.short}" if op.location else ""
            label = f"{op.name} = {op.kind}{where}"
            style = 'shape=box, style="rounded,filled", fillcolor="#f3f4f6"'
            if op.kind == "constant":
                style = 'shape=note, style=filled, fillcolor="#fef3c7"'
            if op.name == highlight:
                style += ', color="#dc2626", penwidth=3'
            ident = q("op-" + op.name)
            lines.append(f"  {node(op.name)} [id={ident}, {style}, label={q(label)}, tooltip={q(str(op))}];")
        producer_name = {id(t): op.name for op in self.ops for t in op.outputs}
        for op in self.ops:
            for t in op.inputs:
                src = producer_name.get(id(t), t.name)
                lines.append(f"  {node(src)} -> {node(op.name)} [label={q(t.type_str())}, fontsize=8];")
        for i, t in enumerate(self.outputs):
            out = f"return{i}"
            style = 'shape=house, style=filled, fillcolor="#dcfce7"'
            lines.append(f"  {q(out)} [{style}, label={q('return ' + t.name)}];")
            src = node(producer_name.get(id(t), t.name))
            lines.append(f"  {src} -> {q(out)} [label={q(t.type_str())}, fontsize=8];")
        lines.append("}")
        return "\n".join(lines)
