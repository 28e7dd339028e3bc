"""One signature as two XLA executables, when one GEMM wants other XLA options than the rest (CUDA).

XLA picks its GEMM back end per module. In jaxlib 0.11 every GEMM is offered to Triton; where autotuning then
picks cuBLAS, the GEMM has already lost the bias / residual epilogue that cuBLASLt fuses when Triton GEMMs are
off. With them off, a GEMM whose output rows are not a multiple of 8 elements (a GPT's lm head, N = 50257) goes to
cuBLAS padded to the next multiple of 8, and the padded logits are sliced: a copy of the whole output. Only
XLA's own Triton GEMM writes those rows in place. So such a GEMM at the end of the program (the *head*: it and
every op after it, plus the constant-only ops they read) is compiled as a module of its own with the build's
options, and everything before it (the *body*) with ``BODY_OPTIONS``. A call runs the body, then the head on
the values that cross the cut; both are queued on the device's one stream, so the device sees one program.

``MODE``: "auto" (split where ``find`` finds a cut, CUDA only), "always" (on any platform: the CPU tests) or
"off".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

MODE = "auto"
# the block-level rewriter makes the layer-norm / GELU / q-k-v passes Triton fusions: in the eighth session, with the
# split, never slower and 0.3-3.6 % faster from 1024 to 8192 rows (docs/perf-history.md)
BODY_OPTIONS = {"xla_gpu_enable_triton_gemm": False, "xla_gpu_enable_cublaslt": True,
                "xla_gpu_experimental_enable_fusion_block_level_rewriter": True}
HEAD_OPTIONS: dict = {}  # added to the build's options for the head
# how the head lays out an output whose last dimension is the GEMM's unaligned N (the logits): "rows" (row-major,
# XLA's default: only its Triton GEMM writes the unaligned rows fast), "n_major" (that dimension major: the GEMM writes
# the transposed product, whose rows are M long and aligned, so cuBLAS takes it unpadded: the caller gets the same
# values in another memory order, as torch.compile hands back logits with a padded row stride) or "auto" (n_major on
# CUDA). GPT-2 small on the H200, back to back: B8 T1024 5.09 -> 4.85 ms, the lm head alone 1.25 -> 1.02 ms
# (docs/perf-history.md, ninth session); on CPU XLA writes row-major and then copies, so rows there
HEAD_LAYOUT = "auto"
MIN_COLUMNS = 1024  # narrower unaligned GEMMs are left in one executable (their padded copy is small; not measured)
# fewer rows (M) and the split loses: GPT-2 small on the H200, back to back, one executable vs two: B1 T512
# 0.83 vs 0.93-1.15 ms, B4 T256 0.99-1.01 vs 0.88 ms, B8 T1024 5.19-5.21 vs 4.96-4.99 (docs/perf-history.md,
# seventh session)
MIN_ROWS = 1024
# untuned compiles (no autotuning: the profile's min and max, xla.TUNE_OPT_ONLY) of the body and the head run at once
PARALLEL_UNTUNED = True
HEAD_NAME = "main_head"  # the head's jax function: its module is jit_main_head (the profiler keeps jit_main*)
HEAD_PREFIX = "head/"  # before the head's HLO instruction names in the layer table and the profile


@dataclass(frozen=True)
class Split:
    gemm: int  # plan index of the GEMM that starts the head
    head: frozenset  # plan indices the head executable runs
    crossing: tuple  # SSA values the body computes and the head reads (and outputs the body computes)
    lhs: object = None  # the GEMM's first operand (its rows are the GEMM's M)

    def describe_gemm(self, plans) -> str:
        p = next(p for p in plans if p.index == self.gemm)
        return f"{p.trace_name or p.op.name} (MLIR op #{p.index})"

    def describe(self, plans) -> str:
        return (f"{self.describe_gemm(plans)} and {len(self.head) - 1} op(s) after or feeding it from constants "
                "in an executable of their own")

    def rows(self, given, out_info) -> int | None:
        """The GEMM's M at one signature, from the body's results (None when its input is not one of them)."""
        if self.lhs not in given:
            return None
        shape = tuple(out_info[given.index(self.lhs)].shape)
        return int(np.prod(shape[:-1], dtype=np.int64))


def _gpu(platform: str) -> bool:
    return platform in ("gpu", "cuda")


def applies(platform: str) -> bool:
    return MODE == "always" or (MODE == "auto" and _gpu(platform))


def body_options(platform: str) -> dict:
    return dict(BODY_OPTIONS) if _gpu(platform) else {}


def _body_options(platform: str, body) -> dict:
    """``body_options``, with the dot merger off (``xla_attention.apart_options``) where the traced ``body`` cut
    packed q/k/v apart."""
    from tripy_lab.engine.xla import attention as xla_attention

    return xla_attention.apart_options(body_options(platform)) if body.qkv_apart else body_options(platform)


def head_options(platform: str) -> dict:
    return dict(HEAD_OPTIONS) if _gpu(platform) else {}


def head_layout(platform: str) -> str:
    return HEAD_LAYOUT if HEAD_LAYOUT != "auto" else "n_major" if _gpu(platform) else "rows"


def head_formats(split: Split, plans, outputs, device):
    """``out_shardings`` for the head's jax.jit under ``HEAD_LAYOUT`` (None: XLA's default layouts)."""
    if head_layout(device.platform) == "rows":
        return None
    from jax.experimental.layout import Format, Layout
    from jax.sharding import SingleDeviceSharding

    sharding = SingleDeviceSharding(device)
    n = next(p for p in plans if p.index == split.gemm).infos[0][0][-1]
    info = {r: i for p in plans if p.index in split.head for r, i in zip(p.results, p.infos)}
    formats = []
    for v in outputs:
        shape, dtype = info.get(v) or ((), None)  # an output the body computes keeps the default
        logits = dtype is not None and np.dtype(dtype).name in ("float16", "bfloat16") and len(shape) >= 2 \
            and shape[-1] == n
        layout = Layout(major_to_minor=(len(shape) - 1, *range(len(shape) - 1))) if logits else None
        formats.append(Format(layout, sharding))
    return tuple(formats) if any(f.layout is not None for f in formats) else None


def unknown_option(exc: Exception) -> str | None:
    """The XLA option a compile error says this jaxlib does not know, or None."""
    m = re.search(r"No such compile option: '(\w+)'", str(exc))
    return m.group(1) if m else None


def _unaligned_gemm(p) -> bool:
    """An f16/bf16 matrix multiply whose rows (N, static) are not a multiple of 8, N >= MIN_COLUMNS."""
    if p.op.name != "tensorrt.matrix_multiply" or not p.infos or p.infos[0] is None:
        return False
    shape, dtype = p.infos[0]
    if np.dtype(dtype).name not in ("float16", "bfloat16") or len(shape) < 2 or shape[-1] is None:
        return False
    return shape[-1] % 8 != 0 and shape[-1] >= MIN_COLUMNS


def find(plans, outputs, data_args, fused_ops=frozenset(), removed_ops=frozenset()) -> Split | None:
    """The cut before the program's last unaligned GEMM (``_unaligned_gemm``), or None.

    ``data_args``: the block arguments holding data (the others are dimension values, static in both halves);
    ``fused_ops`` / ``removed_ops``: plan indices in attention / linear patterns (the head takes none of them)
    and those of them whose results a fused pattern does not compute (the head reads none of those)."""
    data = set(data_args)  # the values computed from data arguments
    for p in plans:
        if any(v in data for v in p.operands):
            data.update(p.results)
    gemm = next((p for p in reversed(plans) if _unaligned_gemm(p) and p.results[0] in data), None)
    if gemm is None:
        return None
    head = {p.index for p in plans if p.index >= gemm.index}
    read = {v for p in plans if p.index in head for v in p.operands} | set(outputs)
    for p in reversed([p for p in plans if p.index < gemm.index]):  # constant-only producers of what the head reads
        if not any(r in data for r in p.results) and any(r in read for r in p.results):
            head.add(p.index)
            read.update(p.operands)
    if head & set(fused_ops):
        return None
    made_by = {r: p.index for p in plans for r in p.results}
    crossing = []
    for v in [*{v: None for p in plans if p.index in head for v in p.operands}, *outputs]:  # program order
        if v in data and made_by.get(v) not in head and v not in data_args and v not in crossing:
            if made_by.get(v) in removed_ops:
                return None
            crossing.append(v)
    return Split(gemm.index, frozenset(head), tuple(crossing), gemm.op.operands[0])


def lowering(engine, split: Split, shapes, dims, signature, avals, label, options):
    """(relower(options) -> (None, SplitLowered), the first SplitLowered) of one signature of ``engine`` (an
    ``xla.XlaCompiled``), or None when the GEMM has fewer than ``MIN_ROWS`` rows there (its body lowering is then
    thrown away; skipped outright when no data argument has ``MIN_ROWS`` elements)."""
    import inspect
    import math

    import jax

    if shapes and max(math.prod(s) for s in shapes) < MIN_ROWS:
        return None
    platform, plans = engine.device.platform, engine._plans
    body = engine._make_fn(dims, run={p.index for p in plans if p.index < split.gemm}, returns=list(split.crossing),
                           cut_qkv=True)
    body.__name__ = "main"
    body.__signature__ = signature

    def lower_body(options):
        return jax.jit(body, compiler_options=options or None).lower(*avals)

    def lower_head(options, lb, given):
        head = engine._make_fn(dims, run=split.head, given=given, seed=dict(body.statics))
        head.__name__ = HEAD_NAME
        head.__signature__ = signature.replace(parameters=[*signature.parameters.values(), *(
            inspect.Parameter(f"cut{k}", inspect.Parameter.POSITIONAL_ONLY) for k in range(len(given)))])
        lh = jax.jit(head, compiler_options=options or None, out_shardings=formats).lower(*avals, *lb.out_info)
        return SplitLowered(lb, lh, _body_options(platform, body), head_options(platform))

    lb = lower_body(options)
    given = [v for v in split.crossing if v not in body.statics]  # the crossing values the body returns
    rows = split.rows(given, lb.out_info)
    notes = engine.report.notes
    if rows is not None and rows < MIN_ROWS:
        notes.append(f"{label}: one executable (the GEMM {split.describe_gemm(plans)} has {rows} rows, fewer than "
                     f"xla_split.MIN_ROWS = {MIN_ROWS})")
        return None
    notes.append(f"{label}: two executables: {split.describe(plans)} (xla_split; the rest with "
                 f"{_body_options(platform, body) or 'the same options'})")
    formats = head_formats(split, plans, engine._outputs, engine.device)
    if formats is not None:
        moved = [str(k) for k, f in enumerate(formats) if f.layout is not None]
        notes.append(f"{label}: output(s) {', '.join(moved)} laid out with the last dimension major, so the GEMM "
                     "writes aligned rows (xla_split.HEAD_LAYOUT; an executable given one copies it to row-major)")
    engine._note_fusions(label, body)

    def relower(options):
        return None, lower_head(options, lower_body(options), given)

    return relower, lower_head(options, lb, given)


_MAGIC = b"tripy-lab xla_split\n"


class SplitLowered:
    """The two ``jax.stages.Lowered`` of a split signature, compiled and loaded from the store as one.
    ``body_options`` / ``head_options``: added to the compile options of each (an option this jaxlib does not know
    is dropped and listed in ``dropped``); ``key_options``: what the store's key adds for them."""

    def __init__(self, body, head, body_options: dict, head_options: dict):
        self.body, self.head = body, head
        self.options = {"body": dict(body_options), "head": dict(head_options)}
        self.dropped: list[str] = []  # options this jaxlib does not know (dropped, with a note)

    @property
    def key_options(self) -> dict:
        return {"xla_split": {k: sorted(v.items()) for k, v in self.options.items()}}

    def _compile(self, part: str, extra: dict):
        lowered = getattr(self, part)
        while True:
            opts = {**extra, **self.options[part]}
            try:
                return lowered.compile(compiler_options=opts) if opts else lowered.compile()
            except Exception as exc:
                name = unknown_option(exc)
                if name not in self.options[part]:
                    raise
                self.options[part].pop(name)
                self.dropped.append(name)

    def compile(self, compiler_options=None):
        extra = dict(compiler_options or {})
        if not PARALLEL_UNTUNED or extra.get("xla_gpu_autotune_level") != 0:
            # one after the other: two GEMM autotuners on one GPU at once would time each other's kernels
            return SplitCompiled(self._compile("body", extra), self._compile("head", extra))
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=1) as pool:  # no autotuning: the head compiles beside the body
            head = pool.submit(self._compile, "head", extra)
            body = self._compile("body", extra)
            return SplitCompiled(body, head.result())

    def as_text(self, *args, **kwargs) -> str:
        return self.body.as_text(*args, **kwargs) + "\n" + self.head.as_text(*args, **kwargs)

    def load(self, payload: bytes, device):
        """The ``SplitCompiled`` that ``SplitCompiled.serialize`` wrote."""
        from jax.experimental.serialize_executable import deserialize_and_load

        if not payload.startswith(_MAGIC):
            raise ValueError("not a split executable")
        n = int.from_bytes(payload[len(_MAGIC):len(_MAGIC) + 8], "little")
        body, head = payload[len(_MAGIC) + 8:len(_MAGIC) + 8 + n], payload[len(_MAGIC) + 8 + n:]
        return SplitCompiled(*(deserialize_and_load(p, lw.in_tree, lw.out_tree, execution_devices=[device])
                               for p, lw in ((body, self.body), (head, self.head))))


class SplitCompiled:
    """``call(*args, *consts)``: the body, then the head on the arguments and the body's crossing values (both
    queued on the device's stream before either runs)."""

    def __init__(self, body, head):
        self.body, self.head = body, head
        self._call = self._first

    def _first(self, *flat):
        out = self.head(*flat, *self.body(*flat))
        # jax makes each executable's C++ call on its first use; from now on call those directly
        b, h = getattr(self.body, "_call", None) or self.body, getattr(self.head, "_call", None) or self.head
        self._call = lambda *flat: h(*flat, *b(*flat))
        return out

    def __call__(self, *flat):
        return self._call(*flat)

    def serialize(self) -> bytes:
        from jax.experimental.serialize_executable import serialize

        body, head = serialize(self.body)[0], serialize(self.head)[0]
        return _MAGIC + len(body).to_bytes(8, "little") + body + head

    def texts(self) -> tuple[str, str]:
        return self.body.as_text(), self.head.as_text()

    def as_text(self) -> str:
        body, head = self.texts()
        return f"{body}\n// the head (xla_split): its instructions are {HEAD_PREFIX}<name> in the layer table\n{head}"


def layer_records(compiled, op_names, lines):
    """The layer table of a split signature: the body's kernels, then the head's (names prefixed)."""
    from dataclasses import replace

    from tripy_lab.engine.xla.layers import layer_records as records

    body, head = compiled.texts()
    return records(body, op_names, lines) + [replace(r, name=HEAD_PREFIX + r.name)
                                              for r in records(head, op_names, lines)]
