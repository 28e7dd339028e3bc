"""StableHLO text emitted straight from the tensorrt MLIR ops, compiled without re-tracing through jax.

``emit_module`` walks ``program.ops()`` once: static values (shapes, small constants, shape arithmetic) are
computed in numpy by the same ``ops`` translations the jax path uses, so both paths fold the same
numbers; every other op is written as StableHLO by ``emit_ops.TABLE[op.name]``. Each op carries the
location ``jit(main)/<scope>/<prim>`` (``xla.scope_name``), which XLA turns into the ``op_name`` metadata
the layer table reads, exactly as jax's named scopes do.

``swap_into`` puts the parsed module into a ``jax.stages.Lowered`` of a trivial function with the same
argument and result types (``keep_unused=True``), so compiling, ``as_text``, ``serialize_executable``,
the profiler and the layer table keep working unchanged. That replaces one private attribute
(``Lowered._lowering._hlo``, present since jax 0.4 and in 0.10 / 0.11); where it is missing ``swap_into``
returns False and the engine traces through jax as before.

An op (or dtype, or attribute) the table does not emit raises ``Fallback`` with the reason; the engine then
traces the whole program through jax and says why in the build notes.
"""

from __future__ import annotations

from functools import lru_cache

import ml_dtypes
import numpy as np


class Fallback(Exception):
    """This program (op, dtype, attribute) is not emitted natively: trace it through jax instead."""


MLIR_ELEMENT = {np.dtype(np.bool_): "i1", np.dtype(np.int8): "i8", np.dtype(np.int16): "i16",
                np.dtype(np.int32): "i32", np.dtype(np.int64): "i64", np.dtype(np.uint8): "ui8",
                np.dtype(np.uint16): "ui16", np.dtype(np.uint32): "ui32", np.dtype(np.uint64): "ui64",
                np.dtype(np.float16): "f16", np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.float32): "f32",
                np.dtype(np.float64): "f64"}


@lru_cache(maxsize=4096)
def tensor_type(shape, dtype) -> str:
    elem = MLIR_ELEMENT.get(np.dtype(dtype))
    if elem is None:
        raise Fallback(f"dtype {np.dtype(dtype).name} is not emitted natively")
    return "tensor<" + "".join(f"{d}x" for d in shape) + elem + ">"


class Val:
    """An SSA value of the emitted function (a traced tensor): its name, shape, numpy dtype and MLIR type."""

    __slots__ = ("name", "shape", "dtype", "type")

    def __init__(self, name: str, shape: tuple, dtype):
        self.name, self.shape, self.dtype = name, shape, np.dtype(dtype)
        self.type = tensor_type(shape, self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __repr__(self) -> str:
        return f"Val({self.name}: {self.type})"


def _props_text(attrs: dict) -> str:
    """The op's inherent attributes in the generic form's properties syntax ``<{...}>``."""
    return " <{" + ", ".join(f"{k} = {v}" for k, v in attrs.items()) + "}>" if attrs else ""


def i64_array(values) -> str:
    return _i64_array(tuple(int(v) for v in values))


@lru_cache(maxsize=4096)
def _i64_array(values: tuple) -> str:
    return "array<i64" + (": " + ", ".join(map(str, values)) if values else "") + ">"


class Emitter:
    """Appends generic-form StableHLO ops to the body of ``@main``; one op per call."""

    # f32 dot_general precision: HIGHEST (no TF32 on GPUs). On CPU, XLA computes f32 dots in f32 at every
    # precision (the same bits) but HIGHEST costs 7-9 % on small GEMMs (GPT d=128), so the CPU says DEFAULT.
    dot_precision = "HIGHEST"

    def __init__(self):
        self.lines: list[str] = []
        self._consts: dict[tuple, Val] = {}
        self._frozen: dict[int, tuple] = {}  # id(read-only array) -> (array, its Val), before hashing its bytes
        self._count = 0
        self.scope = ""
        self.aliases: dict[str, str] = {}  # tensor type -> its alias ``!tN``: a shorter text that parses faster

    def _alias(self, ttype: str) -> str:
        name = self.aliases[ttype] = f"!t{len(self.aliases)}"
        return name

    def _fresh(self) -> str:
        self._count += 1
        return f"%v{self._count}"

    def op(self, name: str, operands, shape, dtype, attrs: dict | None = None, region: str = "",
           prim: str | None = None) -> Val:
        self._count += 1
        out = Val(f"%v{self._count}", shape if type(shape) is tuple else tuple(int(d) for d in shape), dtype)
        aliases = self.aliases
        if len(operands) == 1:
            v = operands[0]
            ins, types = v.name, aliases.get(v.type) or self._alias(v.type)
        else:
            ins = ", ".join([v.name for v in operands])
            types = ", ".join([aliases.get(v.type) or self._alias(v.type) for v in operands])
        props = _props_text(attrs) if attrs else ""
        region = f" ({region})" if region else ""
        where = f"jit(main)/{self.scope}/{prim or name.rpartition('.')[2]}" if self.scope else "jit(main)"
        self.lines.append(f'{out.name} = "{name}"({ins}){props}{region} : ({types}) -> '
                          f'{aliases.get(out.type) or self._alias(out.type)} loc("{where}")')
        return out

    def const(self, value) -> Val:
        arr = np.asarray(value)  # (not ascontiguousarray: it makes 0-d arrays 1-d; tobytes is C order anyway)
        if arr.size == 0:
            raise Fallback("empty constant")
        frozen = not arr.flags.writeable  # a read-only array (a constant's bytes) is the same value at every use
        if frozen:
            hit = self._frozen.get(id(arr))
            if hit is not None and hit[0] is arr:
                return hit[1]
        dt = arr.dtype
        key = (dt.str, arr.shape, arr.tobytes()) if arr.size <= 64 else None
        if key is not None and key in self._consts:  # one SSA value per small constant (XLA would CSE them)
            if frozen:
                self._frozen[id(arr)] = (arr, self._consts[key])
            return self._consts[key]
        ttype = tensor_type(arr.shape, dt)
        flat = np.ascontiguousarray(arr.astype(np.uint8) if dt == np.bool_ else arr).reshape(-1)
        first = flat[:1]
        splat = bool(np.all(flat.view(np.uint8).reshape(arr.size, -1) == first.view(np.uint8)))  # bitwise
        data = (first if splat else flat).tobytes().hex().upper()
        out = Val(self._fresh(), tuple(arr.shape), dt)
        self.lines.append(f'{out.name} = "stablehlo.constant"() <{{value = dense<"0x{data}"> : {ttype}}}> : () -> '
                          f'{ttype} loc("jit(main)")')
        if key is not None:
            self._consts[key] = out
        if frozen:
            self._frozen[id(arr)] = (arr, out)
        return out

    def ret(self, values) -> None:
        self.lines.append(f'"func.return"({", ".join(v.name for v in values)}) : '
                          f'({", ".join(v.type for v in values)}) -> () loc("jit(main)")')


def module_text(arg_names, arg_vals, body_lines, aliases: dict | None = None) -> str:
    """``module { func.func public @main(...) }`` around the emitted body (result types from the return), after
    the type aliases (``Emitter.aliases``) the body uses."""
    params = ", ".join(f'{v.name}: {v.type} loc("{n}")' for n, v in zip(arg_names, arg_vals))
    ret = body_lines[-1]
    res_types = ret[ret.index(": (") + 3:ret.rindex(") -> ()")]
    body = "\n    ".join(body_lines)
    # on the module's line: the parser's line numbers (locations of unnamed region ops) stay those of the body
    head = "".join(f"{name} = {ttype} " for ttype, name in (aliases or {}).items())
    return f"{head}module @jit_main {{\n  func.func public @main({params}) -> ({res_types}) {{\n    {body}\n  }}\n}}\n"


def swap_into(lowered, text: str) -> bool:
    """Parse ``text`` in the context of ``lowered``'s module and make it the module ``lowered`` compiles.

    Module attributes and the argument / result attributes of ``@main`` (shardings, result names) are
    copied from the module jax made, so the parsed one is what jax would hand to XLA. False: this jax has
    no such attribute (the caller falls back to tracing)."""
    lowering = getattr(lowered, "_lowering", None)
    old = getattr(lowering, "_hlo", None)
    try:
        from jax._src.lib.mlir import ir
    except ImportError:  # pragma: no cover - jax without its MLIR bindings
        return False
    if not isinstance(old, ir.Module):
        return False
    with old.context, ir.Location.unknown():
        new = ir.Module.parse(text)
        attrs = old.operation.attributes
        for i in range(len(attrs)):  # by index: iterating yields names on some jaxlibs, pairs on others
            if attrs[i].name != "sym_name":
                new.operation.attributes[attrs[i].name] = attrs[i].attr
        old_main, new_main = _main(old), _main(new)
        for name in ("arg_attrs", "res_attrs", "sym_visibility"):
            if name in old_main.attributes:
                new_main.attributes[name] = old_main.attributes[name]
    lowering._hlo = new
    return True


_SELF_TEST: list = []  # [verdict]: "" when a replaced module is what this jax compiles and runs, else why not


def replacement_works() -> str:
    """Once per process: swap ``x + 1`` into the lowering of ``zeros_like(x)``, compile and run it. "" when the
    result is ``x + 1`` (jax compiles the module we put in), else why the direct path is off."""
    if _SELF_TEST:
        return _SELF_TEST[0]
    import jax
    import jax.numpy as jnp

    t = "tensor<2xf32>"
    text = (f'module @jit_main {{\n  func.func public @main(%arg0: {t} loc("x")) -> ({t}) {{\n'
            f'    %v1 = "stablehlo.constant"() <{{value = dense<"0x0000803F"> : {t}}}> : () -> {t} loc("jit(main)")\n'
            f'    %v2 = "stablehlo.add"(%arg0, %v1) : ({t}, {t}) -> {t} loc("jit(main)")\n'
            f'    "func.return"(%v2) : ({t}) -> () loc("jit(main)")\n  }}\n}}\n')
    try:
        lowered = jax.jit(lambda x: jnp.zeros_like(x), keep_unused=True).lower(jax.ShapeDtypeStruct((2,), np.float32))
        if not swap_into(lowered, text):
            verdict = f"jax {jax.__version__}: Lowered has no module to replace"
        else:
            out = np.asarray(lowered.compile()(np.array([1.0, 2.0], np.float32)))
            verdict = "" if out.tolist() == [2.0, 3.0] else f"jax {jax.__version__} did not run the replaced module"
    except Exception as exc:  # a jax whose internals moved: trace through jax instead
        verdict = f"jax {jax.__version__}: replacing the module failed ({type(exc).__name__})"
    _SELF_TEST.append(verdict)
    return verdict


def _main(module):
    for op in module.body.operations:
        if op.operation.name == "func.func" and op.attributes["sym_name"].value == "main":
            return op.operation
    raise Fallback("jax's module has no @main")
