"""Check generic-form MLIR text with upstream MLIR (jaxlib's bindings), not just xDSL.

    check_with_upstream(generic_text) -> list[str]     # [] = parsed and verified

jaxlib ships MLIR's parser and verifier with the ``builtin``/``func``/``arith`` dialects
registered (``jax.interpreters.mlir.make_ir_context()``); ``tensorrt.*``/``plan.*`` are
unregistered there, so only the generic form (``print_module(m, generic=True)``) parses. No
``mlir-opt`` binary is needed. jax is imported lazily (it takes about a second).
"""

from __future__ import annotations

__all__ = ["check_with_upstream"]


def check_with_upstream(generic_text: str) -> list[str]:
    """Parse and verify ``generic_text`` with upstream MLIR; one ``location: message`` per error.

    Raises ImportError when jax/jaxlib is not installed.
    """
    from jax.interpreters import mlir as jax_mlir  # noqa: TID251 - lazy, optional dependency
    from jaxlib.mlir import ir  # noqa: TID251

    ctx = jax_mlir.make_ir_context()
    ctx.allow_unregistered_dialects = True
    try:
        with ctx:
            ir.Module.parse(generic_text, context=ctx)
    except ir.MLIRError as e:
        out = []
        for d in e.error_diagnostics:
            out.append(f"{d.location}: {d.message}")
            out.extend(f"  {n.location}: {n.message}" for n in d.notes)
        return out or [str(e)]
    return []
