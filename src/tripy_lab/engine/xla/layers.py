"""Optimized HLO text (``compiled.as_text()``) -> one ``LayerRecord`` per kernel.

XLA prints the optimized module as computations (``name (params) -> type {`` ... ``}``); the ENTRY
computation lists what runs: ``fusion`` instructions (each one kernel; ``kind=kLoop`` / ``kInput``
(a reduction) / ``kOutput`` / ``kCustom`` (GEMM fusions: Triton, cuDNN, XNNPACK ...)), ``custom-call``
library calls (cuBLAS GEMMs, cuDNN convolutions, TopK ...), and unfused HLO ops (``dot``,
``convolution``, ``copy``, ...). ``call``/``while``/``conditional``/``async-start`` bodies (GPU
command buffers) are walked into. Bookkeeping ops (parameter, constant, tuple, get-tuple-element,
bitcast) are no kernels and make no row.

Every instruction the xla engine traced carries ``metadata={op_name="jit(main)/<scope>/<prim>"}``
where ``<scope>`` is ``<sanitised trace op name>__op<index>`` (see ``xla.scope_name``): the row's
source ops are the scopes found in the kernel's own metadata and in every instruction of the
computation it calls. XLA-made instructions without metadata (layout copies, a convolution whose
bitcast holds the metadata) take the sources of their nearest users.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tripy_lab.engine.base import LayerRecord
from tripy_lab.engine.memory import array_bytes

_SCOPE_RE = re.compile(r"__op(\d+)(?![0-9])")
_COMMENT_RE = re.compile(r"/\*.*?\*/")
_HEADER_RE = re.compile(r"^(ENTRY\s+)?%?([\w.\-$]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTR_RE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-$]+)\s*=\s*(.*)$")
_ARRAY_RE = re.compile(r"([a-z][a-z0-9]*)\[([^\]]*)\]")
_OPNAME_RE = re.compile(r'op_name="([^"]*)"')
_KIND_RE = re.compile(r"\bkind=(k\w+)")
_CALLS_RE = re.compile(r"\b(?:calls|to_apply|body|condition|true_computation|false_computation)=%?([\w.\-$]+)")
_CALLS_LIST_RE = re.compile(r"\b(?:calls|called_computations|branch_computations)=\{([^}]*)\}")
_TARGET_RE = re.compile(r'custom_call_target="([^"]*)"')
_BACKEND_KIND_RE = re.compile(r'"kind"\s*:\s*"([^"]+)"')
_OPERAND_RE = re.compile(r"%([\w.\-$]+)")

HLO_DTYPES = {"pred": "bool", "s4": "int4", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
              "u4": "uint4", "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
              "f16": "float16", "bf16": "bfloat16", "f32": "float32", "f64": "float64",
              "f8e4m3fn": "float8", "f8e5m2": "float8_e5m2", "token": "token"}

_NO_KERNEL = {"parameter", "constant", "tuple", "get-tuple-element", "bitcast", "after-all", "partition-id",
              "replica-id", "opt-barrier", "add-dependency", "domain"}
_WALK_INTO = {"call", "while", "conditional", "async-start", "async-update", "async-done"}
_LAYOUT_ONLY = {"copy", "transpose", "bitcast", "parameter"}


@dataclass
class HloInstr:
    name: str
    opcode: str
    type_text: str
    rest: str  # operands and attributes, as printed
    computation: str
    is_root: bool = False
    operands: list[str] = field(default_factory=list)

    @property
    def op_name(self) -> str:
        m = _OPNAME_RE.search(self.rest)
        return m.group(1) if m else ""

    @property
    def called(self) -> list[str]:
        names = [m.group(1) for m in _CALLS_RE.finditer(self.rest)]
        for m in _CALLS_LIST_RE.finditer(self.rest):
            names += [n.strip().lstrip("%") for n in m.group(1).split(",") if n.strip()]
        return names


@dataclass
class HloModule:
    computations: dict[str, list[HloInstr]]
    entry: str


def _split_type(text: str) -> tuple[str, str]:
    """Split ``TYPE opcode(...)`` into the type and the rest (tuple types hold spaces)."""
    text = text.strip()
    if text.startswith("("):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                return text[: i + 1], text[i + 1:].strip()
    head, _, tail = text.partition(" ")
    return head, tail.strip()


def parse_hlo(text: str) -> HloModule:
    comps: dict[str, list[HloInstr]] = {}
    entry = ""
    current: str | None = None
    for raw in text.splitlines():
        line = _COMMENT_RE.sub("", raw).rstrip()
        if current is None:
            m = _HEADER_RE.match(line)
            if m:
                current = m.group(2)
                comps[current] = []
                if m.group(1):
                    entry = current
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTR_RE.match(line)
        if not m:
            continue
        type_text, rest = _split_type(m.group(3))
        opcode, _, args = rest.partition("(")
        depth, end = 1, len(args)
        for i, ch in enumerate(args):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0:
                end = i
                break
        instr = HloInstr(m.group(2), opcode.strip(), type_text, rest, current, bool(m.group(1)),
                         _OPERAND_RE.findall(args[:end]))
        comps[current].append(instr)
    if not entry and comps:
        entry = list(comps)[-1]
    return HloModule(comps, entry)


def parse_shapes(type_text: str) -> tuple[tuple[tuple[int, ...], ...], tuple[str, ...]]:
    shapes, dts = [], []
    for m in _ARRAY_RE.finditer(type_text):
        dt = m.group(1)
        if dt not in HLO_DTYPES:
            continue
        dims = tuple(int(d.replace("<=", "")) for d in m.group(2).split(",") if d.strip())
        shapes.append(dims)
        dts.append(HLO_DTYPES[dt])
    return tuple(shapes), tuple(dts)


def scope_indices(op_name: str) -> list[int]:
    return [int(i) for i in _SCOPE_RE.findall(op_name)]


def _kind(instr: HloInstr, module: HloModule) -> tuple[str, str]:
    """(kind, kernel) of a kernel-making instruction."""
    op = instr.opcode
    if op == "fusion":
        fkind = (_KIND_RE.search(instr.rest) or [None, ""])[1]
        callee = instr.called[0] if instr.called else ""
        body = [i.opcode for i in module.computations.get(callee, [])]
        if fkind == "kCustom":
            bk = _BACKEND_KIND_RE.search(instr.rest)
            bkind = bk.group(1) if bk else "custom"
            has_dot = any(o in ("dot", "convolution", "scaled-dot") for o in body)
            if "triton_gemm" in bkind or ("triton" in bkind and has_dot):
                return "GEMM (Triton)", callee
            if "cublas" in bkind:
                return "GEMM (cuBLAS)", callee
            if "cudnn" in bkind:
                return "cuDNN fusion", callee
            if "ynn" in bkind or "xnn" in bkind:
                what = "GEMM" if has_dot else ("reduction" if "reduce" in body else "fusion")
                return f"{what} (XNNPACK)", callee
            if "triton" in bkind:
                return "Triton fusion", callee
            return f"custom fusion ({bkind})", callee
        if body and set(body) <= _LAYOUT_ONLY and ("copy" in body or "transpose" in body):
            return "copy", callee
        return {"kLoop": "loop fusion", "kInput": "input fusion (reduction)",
                "kOutput": "output fusion"}.get(fkind, f"fusion ({fkind})"), callee
    if op == "custom-call":
        target = (_TARGET_RE.search(instr.rest) or [None, ""])[1]
        low = target.lower()
        if "cublas" in low or "matmul" in low or "gemm" in low:
            lib = "cuBLAS" if "cublas" in low else ("oneDNN" if "onednn" in low else "library")
            return f"GEMM ({lib})", target
        if "fmha" in low or "attention" in low:
            return "attention (cuDNN)" if "cudnn" in low else "attention", target
        if "cudnn" in low and "conv" in low:
            return "convolution (cuDNN)", target
        if "onednn" in low and "conv" in low:
            return "convolution (oneDNN)", target
        if "triton" in low:  # a Pallas kernel (pallas: a Linear with its epilogue)
            return "Pallas kernel (Triton)", target
        return "custom call", target
    if op == "dot":
        return "GEMM (dot)", "dot"
    if op in ("copy", "copy-start", "copy-done"):
        return "copy", op
    if op == "reduce":
        return "reduction", op
    return op, op


def _users(module: HloModule) -> dict[tuple[str, str], list[HloInstr]]:
    users: dict[tuple[str, str], list[HloInstr]] = {}
    for comp, instrs in module.computations.items():
        for ins in instrs:
            for o in ins.operands:
                users.setdefault((comp, o), []).append(ins)
    return users


def _body_indices(module: HloModule, comp: str, seen: set[str]) -> list[int]:
    if comp in seen:
        return []
    seen.add(comp)
    out: list[int] = []
    for ins in module.computations.get(comp, []):
        out += scope_indices(ins.op_name)
        for c in ins.called:
            out += _body_indices(module, c, seen)
    return out


def kernel_instructions(module: HloModule) -> list[HloInstr]:
    """The instructions that launch work, in program order, walking into call/while/async bodies."""
    out: list[HloInstr] = []
    seen: set[str] = set()

    def walk(comp: str):
        if comp in seen:
            return
        seen.add(comp)
        for ins in module.computations.get(comp, []):
            if ins.opcode in _NO_KERNEL:
                continue
            if ins.opcode in _WALK_INTO:
                for c in ins.called:
                    walk(c)
                continue
            out.append(ins)

    walk(module.entry)
    return out


_WEIGHT_PARAM_RE = re.compile(r"^const_op\d+$")  # lifted constants (``signatures._lower`` names them)
_PARAM_INDEX_RE = re.compile(r"^parameter\((\d+)\)")


def weight_instructions(module: HloModule) -> list[HloInstr]:
    """The ENTRY's weights: parameters that are lifted constants (``const_op<i>``) and embedded constants."""
    return [i for i in module.computations.get(module.entry, [])
            if (i.opcode == "parameter" and _WEIGHT_PARAM_RE.match(i.op_name)) or i.opcode == "constant"]


class _WeightReads:
    """Which weights (``weight_instructions``) an instruction reads, through bitcasts and into called bodies (a
    command buffer's ``parameter(k)`` is its caller's operand k)."""

    def __init__(self, module: HloModule):
        self.weights = {(module.entry, i.name) for i in weight_instructions(module)}
        self.instrs = {(c, i.name): i for c, instrs in module.computations.items() for i in instrs}
        self.callers = {c: i for instrs in module.computations.values() for i in instrs
                        if i.opcode in _WALK_INTO for c in i.called}

    def source(self, comp: str, name: str, depth: int = 0) -> HloInstr | None:
        ins = self.instrs.get((comp, name))
        if ins is None or depth > 32:
            return None
        if (comp, name) in self.weights:
            return ins
        if ins.opcode == "bitcast" and ins.operands:
            return self.source(comp, ins.operands[0], depth + 1)
        m = _PARAM_INDEX_RE.match(ins.rest) if ins.opcode == "parameter" else None
        caller = self.callers.get(comp)
        if m and caller is not None and int(m.group(1)) < len(caller.operands):
            return self.source(caller.computation, caller.operands[int(m.group(1))], depth + 1)
        return None

    def bytes_read(self, ins: HloInstr) -> int:
        found = {id(w): w for o in ins.operands if (w := self.source(ins.computation, o)) is not None}
        return sum(type_bytes(w.type_text) or 0 for w in found.values())


def type_bytes(type_text: str) -> int | None:
    """Bytes of an HLO type (a tuple's arrays summed); None when a size is unknown."""
    sizes = [array_bytes(s, d) for s, d in zip(*parse_shapes(type_text))]
    return None if None in sizes else sum(sizes)


def layer_records(hlo_text: str, op_names: dict[int, str], lines: dict[str, str] | None = None) -> list[LayerRecord]:
    """One row per kernel of the optimized HLO, with the bytes it writes (its outputs, a GEMM's workspace left out)
    and the bytes of the weights it reads (lifted constants and embedded constants, ``weight_instructions``).

    ``op_names``: MLIR op index -> trace op name (``"%t5"``); ``lines``: trace op name -> user line.
    """
    lines = lines or {}
    module = parse_hlo(hlo_text)
    users = _users(module)
    reads = _WeightReads(module)
    rows = []
    for ins in kernel_instructions(module):
        kind, kernel = _kind(ins, module)
        idx = scope_indices(ins.op_name)
        if ins.opcode == "fusion":
            for c in ins.called:
                idx += _body_indices(module, c, set())
        if not idx:  # XLA-made: take the nearest users' scopes
            frontier, seen = [ins], {ins.name}
            while frontier and not idx:
                nxt = []
                for f in frontier:
                    for u in users.get((f.computation, f.name), []):
                        if u.name in seen:
                            continue
                        seen.add(u.name)
                        idx += scope_indices(u.op_name)
                        nxt.append(u)
                frontier = nxt
        order = sorted(set(idx))
        names = []
        for i in order:
            n = op_names.get(i, f"op{i}")
            if n not in names:
                names.append(n)
        src_lines = []
        for n in names:
            ln = lines.get(n, "")
            if ln and ln not in src_lines:
                src_lines.append(ln)
        shapes, dts = parse_shapes(ins.type_text)
        if ins.opcode == "custom-call" and len(shapes) > 1 and dts[-1] in ("int8", "uint8") and len(shapes[-1]) == 1:
            shapes, dts = shapes[:-1], dts[:-1]  # cuBLAS/cuDNN workspace
        sizes = [array_bytes(s, d) for s, d in zip(shapes, dts)]
        rows.append(LayerRecord(name=ins.name, kind=kind, source_ops=tuple(names), source_lines=tuple(src_lines),
                                output_shapes=shapes, output_dtypes=dts, kernel=kernel, mlir_ops=tuple(order),
                                output_bytes=None if None in sizes else sum(sizes),
                                weight_bytes=reads.bytes_read(ins)))
    return rows
