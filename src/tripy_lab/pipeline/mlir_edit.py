"""MLIR text edited by hand -> MlirProgram: parse, verify op by op, read the inputs from ``@main``.

Every problem is a ``MlirTextError`` (a TripyException) carrying the 1-based ``line`` and ``column`` in the
edited text, so the lab can point at it in the editor.
"""

from __future__ import annotations

import re

from tripy_lab.core import dtypes
from tripy_lab.core.bounds import DimensionInputInfo, InputInfo, NamedDimension
from tripy_lab.core.errors import TripyException
from tripy_lab.core.source import user_location
from tripy_lab.executable.serialize import _Malformed as Malformed
from tripy_lab.executable.serialize import dimension_names
from tripy_lab.mlir.program import MlirProgram, origins_from_locations

_OP_NAME = re.compile(r"\b[a-z_]+\.[a-z_.]+\b")
_UNDEFINED = re.compile(r"values used but not defined: \[(%[\w$.\-]+)")


class MlirTextError(TripyException):
    """A parse or verify error in MLIR text, at ``line``/``column`` (1-based) of that text."""

    def __init__(self, message: str, text: str, line: int, column: int, kind: str = "parse"):
        self.line, self.column, self.kind, self.message = line, column, kind, message
        lines = text.splitlines()
        code = lines[line - 1] if 0 < line <= len(lines) else ""
        details = [message, f"{line:>4} | {code}", "     | " + " " * (column - 1) + "^"]
        super().__init__(f"The edited MLIR does not {kind} at line {line}, column {column}.", details,
                         user_location())


def line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _clean(exc: BaseException) -> str:
    """xDSL re-raises verify errors with the whole module printed: keep the original message."""
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    return str(cause).strip().splitlines()[0] if str(cause).strip() else type(cause).__name__


def parse_and_verify(text: str, resources: dict[str, bytes]):
    """(module, op_starts): the parsed module, verified op by op so an error names the op's position."""
    from xdsl.utils.exceptions import ParseError

    from tripy_lab.mlir import text as mlir_text

    op_starts: dict[int, int] = {}
    try:
        module = mlir_text.parse_module(text, resources=resources, verify=False, op_starts=op_starts)
    except ParseError as exc:
        where = exc.span.get_location()
        line, col = where.line, where.col
        if (m := _UNDEFINED.search(exc.msg)) and (use := re.search(re.escape(m.group(1)) + r"(?![\w$.\-])", text)):
            line, col = line_col(text, use.start())  # xDSL reports these at the end of the block: show the use
        message = exc.msg
        if "builtin.unregistered" in message:  # xDSL's words for an op name no dialect defines
            code = text.splitlines()[line - 1] if line <= text.count("\n") + 1 else ""
            names = [m for m in _OP_NAME.finditer(code) if m.start() < col]
            if names:
                message, col = f"unknown operation '{names[-1].group(0)}'", names[-1].start() + 1
        raise MlirTextError(message, text, line, col) from None
    except (ValueError, KeyError) as exc:  # a malformed resource trailer, an unknown enum spelling
        raise MlirTextError(str(exc), text, 1, 1) from None
    for op in module.walk():
        try:
            op.verify(verify_nested_ops=False)
        except Exception as exc:  # xDSL's VerifyException / DiagnosticException and attribute checks
            line, col = line_col(text, op_starts.get(id(op), 0))
            raise MlirTextError(f"{op.name}: {_clean(exc)}", text, line, col, kind="verify") from None
    return module, op_starts


def check_resources(module, blobs: dict[str, bytes], text: str, op_starts: dict[int, int]) -> None:
    """Every ``dense_resource<handle>`` must have its bytes (a copied display text has ``__elided__``)."""
    from xdsl.dialects.builtin import DenseResourceAttr

    for op in module.walk():
        for attr in [*op.properties.values(), *op.attributes.values()]:
            if isinstance(attr, DenseResourceAttr) and attr.resource_handle.data not in blobs:
                line, col = line_col(text, op_starts.get(id(op), 0))
                handle = attr.resource_handle.data
                raise MlirTextError(
                    f"{op.name}: no data for dense_resource<{handle}>"
                    + (" (the display text elides large constants: edit the text of as_text(elide=False))"
                       if handle == "__elided__" else " (not in the original's resources or the text's trailer)"),
                    text, line, col, kind="verify")


def _dtype(element) -> dtypes.dtype:
    from tripy_lab.mlir.attrs import NUMPY_DTYPES, element_name

    return dtypes.from_numpy(NUMPY_DTYPES[element_name(element)])


def infos_from_main(main, text: str, op_starts: dict[int, int]) -> list[InputInfo | DimensionInputInfo]:
    """One InputInfo per ``@main`` argument from its type and ``tensorrt.shape_profile``/``value_bounds``."""
    attrs = [a.data for a in main.arg_attrs.data] if main.arg_attrs is not None else []
    out = []
    for i, arg in enumerate(main.body.block.args):
        arg_attrs = attrs[i] if i < len(attrs) else {}
        try:
            if "tensorrt.value_bounds" in arg_attrs:
                lo, mid, hi = arg_attrs["tensorrt.value_bounds"].values
                out.append(DimensionInputInfo((lo[0], mid[0], hi[0])))
                continue
            shape = list(arg.type.get_shape())
            if "tensorrt.shape_profile" in arg_attrs:
                lo, mid, hi = arg_attrs["tensorrt.shape_profile"].values
                shape = [d if d >= 0 else (lo[k], mid[k], hi[k]) for k, d in enumerate(shape)]
            if any(isinstance(d, int) and d < 0 for d in shape):
                raise ValueError(f"argument %arg{i} has a dynamic dim but no tensorrt.shape_profile")
            names = dimension_names(arg_attrs, len(shape), f"%arg{i}")  # kept: calls check them
            shape = [NamedDimension(names[k], *(d if isinstance(d, tuple) else (d, d, d))) if k in names else d
                     for k, d in enumerate(shape)]
            out.append(InputInfo(shape, _dtype(arg.type.get_element_type())))
        except (TripyException, ValueError, IndexError, AttributeError, Malformed) as exc:
            line, col = line_col(text, op_starts.get(id(main), 0))
            message = exc.summary if isinstance(exc, TripyException) else str(exc)
            raise MlirTextError(f"@main argument {i}: {message}", text, line, col, kind="verify") from None
    return out


def program_from_text(text: str, like: MlirProgram | None = None,
                      resources: dict[str, bytes] | None = None) -> MlirProgram:
    """An MlirProgram from edited text; names, origins and constant blobs come from ``like`` when given.

    Inputs are read from the edited ``@main`` (an edited shape profile changes the bounds); an input whose
    bounds did not change keeps ``like``'s InputInfo (its dimension names).
    """
    blobs = dict(like.resources) if like is not None else {}
    blobs.update(resources or {})
    module, op_starts = parse_and_verify(text, blobs)
    check_resources(module, blobs, text, op_starts)
    probe = MlirProgram(module, [], {}, [])
    try:
        main = probe.main()
    except KeyError:
        raise MlirTextError("the module has no func.func @main", text, 1, 1, kind="verify") from None
    infos = infos_from_main(main, text, op_starts)
    n_out = len(main.function_type.outputs.data)
    line, col = line_col(text, op_starts.get(id(main), 0))
    if like is not None:
        if len(infos) != len(like.arg_names):
            raise MlirTextError(f"@main takes {len(infos)} arguments; the original takes {len(like.arg_names)} "
                                f"({', '.join(like.arg_names)})", text, line, col, kind="verify")
        names = list(like.arg_names)
        infos = [like.input_infos[n] if like.input_infos[n] == info else info for n, info in zip(names, infos)]
        outputs = list(like.output_names) if n_out == len(like.output_names) else [f"out{k}" for k in range(n_out)]
        origins = dict(like.origins)
    else:
        names = [f"arg{k}" for k in range(len(infos))]
        outputs, origins = [f"out{k}" for k in range(n_out)], {}
    origins = origins_from_locations(main, origins)  # ops the original lacks: what their locations say
    return MlirProgram(module, names, dict(zip(names, infos)), outputs, origins, blobs)
