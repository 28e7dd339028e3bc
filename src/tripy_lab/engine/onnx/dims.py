"""Which dynamic dims of a program's values are equal at every shape of the profile (union-find), so that the
ONNX lowering reads each from one tensor.

A GPT block reads T from its own residual-stream tensor (``x.shape[1]``): each block's mask and slice
arithmetic was then a separate ~60-node computation per call that onnxruntime could not merge. Reading every
``tensorrt.shape`` dim from the first tensor of its class makes those computations equal node for node, and
onnxruntime's common-subexpression pass keeps one.

Only rules that hold at every shape make two dims one class: an input's NamedDimension; ops whose result has
their input's shape; element-wise broadcasting where the other operands' dims are 1 or the same class; the
M / N / batch dims of a matrix multiply; transposes; gathers' index dims; a reshape / broadcast / linspace /
slice whose shape operand entry is a dim read by ``tensorrt.shape`` (``fold``'s syms). Any other dim is its
own class, so an unknown op only loses sharing, never correctness.
"""

from __future__ import annotations

_SAME_AS_INPUT = {"tensorrt.activation", "tensorrt.unary", "tensorrt.softmax", "tensorrt.normalization",
                  "tensorrt.cast", "tensorrt.identity"}
_ELEMENTWISE = {"tensorrt.element_wise": ("input1", "input2"),
                "tensorrt.select": ("condition", "thenInput", "elseInput")}
_SHAPED_BY = {"tensorrt.reshape": "shape", "tensorrt.broadcast": "shape", "tensorrt.linspace": "shape",
              "tensorrt.slice": "size"}


class DimClasses:
    def __init__(self):
        self._parent: dict = {}
        self.source: dict = {}  # class root -> (ONNX tensor name, dim): where the lowering reads it
        self.dim_node: dict = {}  # class root -> ONNX [1] int64 tensor holding it (made on first use)

    def find(self, key):
        root = key
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while key != root:  # path compression
            self._parent[key], key = root, self._parent[key]
        return root

    def union(self, new, old) -> None:
        """``new`` (a result's dim) joins ``old``'s class; ``old``'s source stays the class's source."""
        a, b = self.find(new), self.find(old)
        if a != b:
            self._parent[a] = b
            if b not in self.source and a in self.source:
                self.source[b] = self.source[a]

    def key(self, value, d: int):
        return (id(value), d)

    def register(self, value, name: str, shape) -> None:
        for d, n in enumerate(shape):
            if n is None:
                self.source.setdefault(self.find(self.key(value, d)), (name, d))

    def relate(self, op, ctx) -> None:
        """Join the dynamic dims of ``op``'s results with the operand dims they provably equal."""
        results = list(op.results)
        if len(results) != 1:
            return
        r = results[0]
        out = ctx.shape(r)
        dyn = [d for d, n in enumerate(out) if n is None]
        if not dyn:
            return
        name = op.name
        if name in _SAME_AS_INPUT:
            x = ctx.operand_value("input")
            if x is not None and len(ctx.shape(x)) == len(out):
                for d in dyn:
                    self.union(self.key(r, d), self.key(x, d))
        elif name in _ELEMENTWISE:
            self._broadcast(r, out, [ctx.operand_value(n) for n in _ELEMENTWISE[name]], ctx, dyn)
        elif name == "tensorrt.matrix_multiply":
            self._matmul(op, r, out, ctx, dyn)
        elif name == "tensorrt.transpose":
            perm = [int(p) for p in ctx.attr("permutation")]
            for d in dyn:
                self.union(self.key(r, d), self.key(op.input, perm[d]))
        elif name == "tensorrt.gather" and not int(ctx.attr("numBroadcastDims", 0) or 0):
            axis, irank = int(ctx.attr("axis", 0)), len(ctx.shape(op.indices))
            for d in dyn:
                if axis <= d < axis + irank:
                    self.union(self.key(r, d), self.key(op.indices, d - axis))
        elif name in _SHAPED_BY and (name != "tensorrt.slice" or (ctx.attr("mode", "kDEFAULT") or "kDEFAULT")
                                     == "kDEFAULT"):
            vec = ctx.operand(_SHAPED_BY[name])
            known = ctx.known(vec) if vec is not None else None
            if known is None or known[0].ndim != 1 or len(known[0]) != len(out):
                return
            if name == "tensorrt.broadcast" and not self._expands_ones(op, ctx, len(out)):
                return
            for d in dyn:
                if known[2][d] is not None and known[2][d][1] == 0:
                    self.union(self.key(r, d), known[2][d][0])

    def _broadcast(self, r, out, operands, ctx, dyn) -> None:
        shapes = [ctx.shape(v) for v in operands if v is not None]
        if len(shapes) != len(operands) or any(len(s) != len(out) for s in shapes):
            return
        for d in dyn:
            dynamic = [self.find(self.key(v, d)) for v, s in zip(operands, shapes) if s[d] is None]
            if dynamic and all(s[d] in (None, 1) for s in shapes) and len(set(dynamic)) == 1:
                self.union(self.key(r, d), dynamic[0])

    def _matmul(self, op, r, out, ctx, dyn) -> None:
        a, b = op.input0, op.input1
        sa, sb = ctx.shape(a), ctx.shape(b)
        op0, op1 = ctx.attr("op0", "kNONE"), ctx.attr("op1", "kNONE")
        if "kVECTOR" in (op0, op1) or not (len(sa) == len(sb) == len(out)):
            return
        m = len(out) - 2
        for d in dyn:
            if d == m:
                self.union(self.key(r, d), self.key(a, m + 1 if op0 == "kTRANSPOSE" else m))
            elif d == m + 1:
                self.union(self.key(r, d), self.key(b, m if op1 == "kTRANSPOSE" else m + 1))
            else:
                self._broadcast(r, out, [a, b], ctx, [d])

    @staticmethod
    def _expands_ones(op, ctx, rank: int) -> bool:
        """A broadcast whose input dims are all static 1 (its result's shape is the shape operand's)."""
        return all(n == 1 for n in ctx.shape(op.input))
