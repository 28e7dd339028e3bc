"""The folded trace graph: one hierarchy of nodes over a Trace, drawn level by level.

Groups come from the scopes recorded at trace time: ``TraceOp.module`` (the dotted ``state_dict`` path of the
module that made the op) gives one group per module; within a group, the ops of one public frontend call
(``TraceOp.call``, shared by identity: a ``x[:, :n]`` and its index arithmetic) fold into one call node. A
module that made no op of its own (a ``ModuleList`` such as a GPT's ``h``) is not a level: its children sit in
its parent, so a GPT opens on ``wte``, ``wpe``, ``h.0`` ... ``h.11``, ``ln_f``. A level with more than
``MAX_CHILDREN`` nodes (a 20,000-op loop outside any module) is cut into runs of consecutive nodes.

The same model feeds the live renderer (``to_json``: the browser lays out each visible level) and the static
pictures (``graph_draw``: graphviz ``dot`` in the kernel). Leaves are the trace's ops, inputs and outputs; edges
join leaves, and a drawing shows each edge between the visible nodes that hold its ends.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_CHILDREN = 60  # nodes per level before consecutive runs are folded into "ops a..b" nodes
RUN_MIN = 10  # nodes per run at least
TIP_OPS = 5000  # above this many ops the live bundle leaves out the ops' tooltips (the label stays): 40% of its size


@dataclass(slots=True)  # 30,000 of them for a 20,000-op program: slots make them cheaper to build
class Node:
    id: str  # "op-%t5" (an op: the crosswalk's node id), "in-x", "out-0", "m:h.0.attn", "c:12", "r:3"
    label: str
    kind: str  # "op", "const", "input", "output", "module", "call", "run", "failed"
    parent: int = -1
    children: list[int] = field(default_factory=list)
    line: str = ""  # the user's line (file:line), for search and labels
    module: str = ""  # dotted module path (every node inside a module carries it)
    tip: str = ""  # tooltip: what a group holds (an op's listing: ``GraphModel.tip``, formatted when drawn)
    n_ops: int = 0  # trace ops under this node
    n_const: int = 0  # ... of which constants (a node of constants only feeds many: its edges are summarized)


@dataclass
class GraphModel:
    title: str
    nodes: list[Node]
    edges: list[tuple[int, int]]  # leaf -> leaf (node indices), deduplicated
    op_node: dict[str, int]  # trace op name -> its leaf node
    top: list[int] = field(default_factory=list)  # the top level, in drawing order
    error: int | None = None  # the failing op's node (drawn red; its groups open on it)
    error_message: str = ""
    leaf_ops: dict = field(default_factory=dict, repr=False)  # leaf node -> its TraceOp (tooltips, on demand)

    def tip(self, index: int) -> str:
        """Node ``index``'s tooltip: an op's listing (formatted here: 20,000 of them cost a second), else its own."""
        op = self.leaf_ops.get(index)
        return _tip(op) if op is not None else self.nodes[index].tip

    @property
    def roots(self) -> list[int]:
        return self.top

    def ancestors(self, index: int) -> list[int]:
        out = []
        p = self.nodes[index].parent
        while p >= 0:
            out.append(p)
            p = self.nodes[p].parent
        return out

    def find(self, node_id: str) -> int:
        for i, n in enumerate(self.nodes):
            if n.id == node_id:
                return i
        raise KeyError(node_id)

    def module_node(self, path: str) -> int | None:
        """The group of module ``path`` (``"h.0.attn"``), or None when it was folded away or does not exist."""
        try:
            return self.find("m:" + path)
        except KeyError:
            return None

    def leaves_under(self, index: int) -> list[int]:
        out, stack = [], [index]
        while stack:
            i = stack.pop()
            kids = self.nodes[i].children
            if kids:
                stack.extend(reversed(kids))
            else:
                out.append(i)
        return out

    def ops_under(self, index: int) -> list[str]:
        """Trace op names under node ``index`` (the crosswalk selects their MLIR lines and layers)."""
        return [self.nodes[i].id[3:] for i in self.leaves_under(index) if self.nodes[i].id.startswith("op-")]

    def initial_expanded(self) -> list[int]:
        """Groups open at first sight: the failing op's, so it is drawn."""
        return [] if self.error is None else self.ancestors(self.error)

    def to_json(self, overlay=None, expanded: list[int] | None = None) -> dict:
        """The bundle the browser renderer lays out (``application/vnd.tripy-lab.graph+json``)."""
        nodes = [_node_json(self, i, n) for i, n in enumerate(self.nodes)]
        out = {"version": 1, "title": self.title, "nodes": nodes, "top": self.top,
               "edges": self.edges,  # (a, b) tuples: JSON arrays
               "expanded": self.initial_expanded() if expanded is None else expanded,
               "error": self.error, "errorMessage": self.error_message, "overlay": None}
        if overlay is not None:
            out["overlay"] = overlay.to_json(self)
        return out


def _node_json(model: GraphModel, i: int, n: Node) -> dict:
    """One node of the live bundle, compact: keys at their default are left out and the renderer fills them in
    (extension/src/graph_level.ts): an op's ``i`` is ``"op-"`` and its label's name, ``n`` is 1 for an op and 0
    for a group, ``s`` and ``m`` are the parent's, ``t`` is ""; an op's tooltip is sent for programs of at most
    ``TIP_OPS`` ops."""
    leaf = i in model.leaf_ops
    out = {"l": n.label, "k": n.kind, "p": n.parent}
    if not leaf or n.label.find(" = ") != len(n.id) - 3 or not n.label.startswith(n.id[3:]):  # as the renderer
        out["i"] = n.id
    parent = model.nodes[n.parent] if n.parent >= 0 else None
    if n.line != (parent.line if parent is not None else ""):
        out["s"] = n.line
    if n.module != (parent.module if parent is not None else ""):
        out["m"] = n.module
    tip = n.tip if not leaf else _tip(model.leaf_ops[i]) if len(model.leaf_ops) <= TIP_OPS else ""
    if tip:
        out["t"] = tip
    if n.n_ops != leaf:
        out["n"] = n.n_ops
    if n.children:
        out["c"] = n.children
    return out


_SHORT: dict[tuple, str] = {}


def _short(loc) -> str:
    """``loc.short``, formatted once per (file, line, function): a 20,000-op program has a few hundred lines."""
    if loc is None:
        return ""
    key = (loc.file, loc.line, getattr(loc, "function", None))
    text = _SHORT.get(key)
    if text is None:
        if len(_SHORT) > 1 << 14:
            _SHORT.clear()
        text = _SHORT[key] = loc.short
    return text


def json_node_id(node: dict) -> str:
    """A live-bundle node's id (``_node_json`` leaves an op's out: ``"op-"`` and the name its label starts with)."""
    if "i" in node:
        return node["i"]
    label = node.get("l", "")
    return "op-" + label[:label.find(" = ")]


def _tip(op) -> str:
    """An op's tooltip: its listing, short (types of its results only)."""
    ins = ", ".join(t.name for t in op.inputs[:6]) + (", …" if len(op.inputs) > 6 else "")
    return f"{op.name} = {op.kind}({ins}) : {', '.join(t.type_str() for t in op.outputs)}"


def build(trace, title: str = "", failed: dict | None = None, error_op: str | None = None) -> GraphModel:
    """The folded model of ``trace`` (a ``tripy_lab.trace.Trace``). ``failed`` (``exc.failed_call`` of a failed
    trace) adds the call that raised as a red node fed by its operands; ``error_op`` marks an op of the trace
    (a later stage failed on it)."""
    nodes: list[Node] = []
    op_node: dict[str, int] = {}
    leaf_of: dict = {}  # op -> its leaf (ops, tensors and calls hash by identity: eq=False)
    leaf_ops: dict[int, object] = {}  # leaf -> its op
    top: list[int] = []

    def add(node: Node) -> int:
        nodes.append(node)
        return len(nodes) - 1

    # Module tree: every path prefix of every op's module; ops sit in their innermost module.
    ops = trace.ops
    own: dict[str, list] = {}  # path -> [(program position, op)]
    for pos, op in enumerate(ops):
        own.setdefault(op.module or "", []).append((pos, op))
    paths = {""}
    for path in own:
        parts = path.split(".") if path else []
        for k in range(1, len(parts) + 1):
            paths.add(".".join(parts[:k]))
    kids: dict[str, list[str]] = {p: [] for p in paths}
    for p in sorted(paths, key=lambda s: (s.count("."), s)):
        if p:
            kids[p.rsplit(".", 1)[0] if "." in p else ""].append(p)
    first = {}  # path -> program position of its first op (children are drawn in program order)

    def first_pos(p: str) -> int:
        if p not in first:
            mine = [k for k, o in own.get(p, []) if o.kind != "constant"] + [first_pos(c) for c in kids[p]]
            mine = mine or [k for k, _ in own.get(p, [])]
            first[p] = min(mine) if mine else len(ops)
        return first[p]

    def lifted(p: str) -> list[str]:
        """The displayed child modules of ``p``: containers without ops of their own are not a level."""
        out = []
        for c in kids[p]:
            out.extend(lifted(c) if not own.get(c) else [c])
        return out

    def place(items: list[tuple[int, int]], parent: int, module: str) -> None:
        """Attach ``items`` ((program position, node), sorted) under ``parent``, in runs when there are many."""
        items.sort()
        if len(items) > MAX_CHILDREN:
            size = max(-(-len(items) // MAX_CHILDREN), RUN_MIN)
            runs = []
            for k in range(0, len(items), size):
                chunk = items[k:k + size]
                run = add(Node(f"r:{len(nodes)}", _run_label(nodes, [i for _, i in chunk]), "run", parent,
                               module=module, tip=f"{len(chunk)} nodes in program order"))
                place(chunk, run, module)
                runs.append(run)
            (nodes[parent].children if parent >= 0 else top)[:] = runs
            return
        for _, i in items:
            nodes[i].parent = parent
        (nodes[parent].children if parent >= 0 else top)[:] = [i for _, i in items]

    def fill(path: str, parent: int) -> None:
        items: list[tuple[int, int]] = []
        mine = own.get(path, [])
        calls: dict = {}  # call -> [(position, op)]
        for item in mine:
            if item[1].call is not None:
                calls.setdefault(item[1].call, []).append(item)
        for pos, op in mine:
            group = calls.get(op.call) if op.call is not None else None
            if group is not None and len(group) > 1:
                if group[0][1] is not op:
                    continue  # drawn with the call's first op
                call = op.call
                line = _short(call.location) or _short(group[-1][1].location)
                label = f"{call.name.strip('_') or call.name} ({len(group)} ops)"
                c = add(Node(f"c:{len(nodes)}", label, "call", parent, line=line, module=path,
                             tip=f"{call.name} at {line}: " + ", ".join(o.kind for _, o in group[:12])))
                place([(k, _leaf(o, c, path)) for k, o in group], c, path)
                items.append((pos, c))
            else:
                items.append((pos, _leaf(op, parent, path)))
        for child in lifted(path):
            rel = child[len(path) + 1:] if path else child
            g = add(Node("m:" + child, rel, "module", parent, module=child, tip=f"module {child}"))
            fill(child, g)
            items.append((first_pos(child), g))
        place(items, parent, path)

    def _leaf(op, parent: int, path: str) -> int:
        name = op.outputs[0].name
        i = len(nodes)
        nodes.append(Node("op-" + name, f"{name} = {op.kind}", "const" if op.kind == "constant" else "op", parent,
                          line=_short(op.location), module=path, n_ops=1))
        op_node[name] = leaf_of[op] = i
        leaf_ops[i] = op
        return i

    inputs = [add(Node("in-" + t.name, f"{t.name}\n{t.type_str()}", "input", tip=t.type_str()))
              for t in trace.inputs]
    fill("", -1)
    outputs = [add(Node(f"out-{k}", f"return {t.name}", "output", tip=t.type_str()))
               for k, t in enumerate(trace.outputs)]
    # the top level is never cut into runs with the inputs and outputs in them: they stay at the ends
    _count_ops(nodes)

    producer = {t: leaf_of[op] for op in ops for t in op.outputs}
    producer.update({t: inputs[k] for k, t in enumerate(trace.inputs)})
    edges: dict[tuple[int, int], None] = {}
    for op in ops:
        dst = leaf_of[op]
        for t in op.inputs:
            src = producer.get(t)
            if src is not None:
                edges[(src, dst)] = None
    for k, t in enumerate(trace.outputs):
        src = producer.get(t)
        if src is not None:
            edges[(src, outputs[k])] = None
    model = GraphModel(title or trace.name, nodes, list(edges), op_node, [*inputs, *top, *outputs],
                       leaf_ops=leaf_ops)
    if failed:
        _add_failed(model, failed, producer)
    elif error_op in op_node:
        model.error = op_node[error_op]
    return model


def _run_label(nodes: list[Node], items: list[int]) -> str:
    """A run's label: its first and last op, and its user lines (``%t10 … %t400`` / ``model.py:12-40``)."""
    def leaf(i: int, last: bool) -> Node:
        n = nodes[i]
        while n.children:
            n = nodes[n.children[-1 if last else 0]]
        return n
    a, b = leaf(items[0], False), leaf(items[-1], True)
    lines = a.line if a.line == b.line else f"{a.line} … {b.line.rsplit(':', 1)[-1]}" if a.line else ""
    return f"{a.id.removeprefix('op-')} … {b.id.removeprefix('op-')}" + (f" · {lines}" if lines else "")


def _count_ops(nodes: list[Node]) -> None:
    """``n_ops`` of every group (children come after their parent in ``nodes``, except runs: hence a loop)."""
    for n in nodes:
        if n.children:
            n.n_ops = 0
    for i in range(len(nodes)):
        if nodes[i].kind in ("op", "const"):
            const = nodes[i].kind == "const"
            nodes[i].n_const = int(const)
            p = nodes[i].parent
            while p >= 0:
                nodes[p].n_ops += 1
                nodes[p].n_const += const
                p = nodes[p].parent
    for n in nodes:
        if n.kind in ("module", "run"):
            n.label = f"{n.label.split(chr(10))[0]}\n{n.n_ops} ops"


def _add_failed(model: GraphModel, failed: dict, producer: dict) -> None:
    """The call that raised, as a red leaf at the top level (or in its module), fed by its operands."""
    shapes = ", ".join(failed.get("types", []))
    label = f"{failed['name']} ✗\n({shapes})"
    if failed.get("line"):
        label += f"\n{failed['line']}"
    module = failed.get("module", "")
    parent = model.module_node(module) if module else None
    if parent is None:
        model.top.insert(len(model.top) - sum(model.nodes[i].kind == "output" for i in model.top), len(model.nodes))
    node = Node("failed", label, "failed", -1 if parent is None else parent, line=failed.get("line", ""),
                module=module, tip=failed.get("message", ""))
    model.nodes.append(node)
    index = len(model.nodes) - 1
    if parent is not None:
        model.nodes[parent].children.append(index)
    for t in failed.get("tensors", []):
        src = producer.get(t)
        if src is not None:
            model.edges.append((src, index))
    model.error, model.error_message = index, failed.get("message", "")
