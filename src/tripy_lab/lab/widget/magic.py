"""``%load_ext tripy_lab``: the ``%%tpcompile`` cell magic and short TripyException reports."""

from __future__ import annotations

import ast
import inspect
import linecache
import sys
from typing import Any

from IPython.core.magic import Magics, cell_magic, magics_class

from tripy_lab.core import source
from tripy_lab.core.errors import TripyException
from tripy_lab.core.source import SourceLocation
from tripy_lab.lab import errors
from tripy_lab.lab import spec as S

TPCOMPILE_DOC = """Compile the function (or tp.Module instance) this cell defines into an Executable.

Usage::

    %%tpcompile [NAME] [PARAM=SPEC ...] [-O N] [--engine ENGINE] [--no-widgets]
    def func(a, b, ...):
        ...

NAME is the variable that receives the Executable (default: <func>_exe). Each runtime parameter
gets a SPEC, either a Python expression or the compact form:

    a=f32[1:2:3,4]                        tp.InputInfo(((1, 2, 3), 4), tp.float32): dim 0 dynamic
    a=f16[8,128]                          static shape (8, 128), float16
    x=f16[batch=1:8:32,seq=1:128:512]     NamedDimensions "batch" and "seq" ...
    y=f16[batch,seq]                      ... reused by name: these dims must match at run time
    s=dim[1:2:4]                          tp.DimensionInputInfo((1, 2, 4)): a runtime DimensionSize
    m=b[4]                                dtypes: f32 f16 bf16 f8 i4 i8 i32 i64 b (or full names)
    a=tp.InputInfo(((1, 2, 3), 4), tp.float32)     any Python expression (also a constant to bake in)

Dims are N (static) or min:opt:max (dynamic). Parameters without a SPEC (and without a default)
get a bounds editor to fill in.

Options:
    -O N, --optimization-level N   builder optimization level 0..5 (default 3)
    --engine ENGINE                reference, xla, onnxruntime, tensorrt (default: tp.config.engine, else the best one)
    --no-widgets                   compile once and print a summary: no editor, no tabs
    --auto-build-ms MS             without a running event loop (scripts), rebuild on each change only while the
                                   last build took < MS (default 1000); in the kernel every settled change builds
                                   in the background and the next change cancels it
    --debounce-ms MS               wait MS after the last edit before re-tracing (default 50)

With widgets: a bounds editor (dtype, static/dynamic, min/max and opt sliders, exact min:opt:max
text) and tabs Trace | MLIR | Engine | Run & time | Log | Error | Crosswalk. Every edit re-traces and
re-lowers (debounced), then builds the engine in the background (the next edit cancels and restarts it).

Examples::

    %%tpcompile add_exe a=f32[1:2:3,4] b=f32[1:2:3,4]
    def add(a, b):
        return a + b

    %%tpcompile rs x=f32[3,4] s=dim[1:2:4] --no-widgets
    def reshape(x, s):
        return tp.reshape(x, (-1, s))

    %%tpcompile lin x=f32[batch=1:2:8,3] -O 5
    model = Model()      # a tp.Module instance; its forward's parameters get the specs
"""


def find_target(cell: str, namespace: dict) -> tuple[str, Any]:
    """(name, object): the last top-level function, or name bound to a tp.Module, the cell defines."""
    from tripy_lab.frontend import Module

    try:
        tree = ast.parse(cell)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    found: tuple[str, Any] | None = None
    for node in tree.body:
        names: list[str] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name] if not isinstance(node, ast.ClassDef) else []
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        for name in names:
            value = namespace.get(name)
            if isinstance(value, Module) or inspect.isfunction(value):
                found = (name, value)
    if found is None:
        raise TripyException(
            "%%tpcompile: the cell defines no function or tp.Module instance.",
            [
                "Define one at the top level of the cell, e.g. `def add(a, b): return a + b` "
                "or `model = MyModule()`."
            ],
        )
    return found


def target_location(cell: str, filename: str, name: str) -> SourceLocation:
    """The line (counting the ``%%tpcompile`` line) that defines ``name``: where errors without a better
    place in the user's code point."""
    line = 1
    try:
        tree = ast.parse(cell)
    except SyntaxError:
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:
        targets = [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if getattr(t, "name", None) == name or getattr(t, "id", None) == name:
                line = node.lineno + 1
    return line_location(filename, line, cell.splitlines()[line - 2] if line > 1 else "")


def line_location(filename: str, line: int, text: str) -> SourceLocation:
    """A cell line as an error location, its caret as long as the line's text (no column is known)."""
    col = len(text) - len(text.lstrip())
    return SourceLocation(filename, line, "<cell>", col, len(text.rstrip()))


def runtime_params(func) -> list[inspect.Parameter]:
    from tripy_lab.frontend import Module

    sig = inspect.signature(func.forward if isinstance(func, Module) else func)
    return [p for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]


def resolve_specs(parsed: S.MagicLine, params: list[inspect.Parameter], namespace: dict) -> tuple[dict, list]:
    """(values by param name, missing param names). Python expressions are evaluated here."""
    import tripy_lab

    names = [p.name for p in params]
    values: dict[str, Any] = {}
    for pname, ps in parsed.params.items():
        if pname not in names:
            raise S.SpecError(
                f"The function has no parameter '{pname}'.",
                parsed.line,
                ps.start - len(pname) - 1,
                ps.end,
                f"Its parameters are: {', '.join(names) or '(none)'}.",
            )
        if isinstance(ps.spec, S.ExprSpec):
            values[pname] = _eval_expr(ps, parsed.line, {"tp": tripy_lab, **namespace})
        else:
            values[pname] = S.to_info(ps.spec)
    missing = [p.name for p in params if p.name not in values and p.default is inspect.Parameter.empty]
    return values, missing


def _eval_expr(ps: S.ParamSpec, line: str, namespace: dict) -> Any:
    try:
        return eval(ps.spec.text, namespace)  # noqa: S307 - the user's own expression, in their namespace
    except Exception as exc:
        hint = f"{type(exc).__name__}: {exc}"
        head = ps.spec.text.split("[", 1)[0]
        close = S.suggest_dtype(head) if "[" in ps.spec.text else None
        if close:
            hint += f". Did you mean the compact form {close}[...]?"
        raise S.SpecError(
            f"Could not evaluate the spec for '{ps.name}'.", line, ps.start, ps.end, hint
        ) from None


@magics_class
class TripyMagics(Magics):
    @cell_magic
    def tpcompile(self, line: str, cell: str):
        __tracebackhide__ = True
        self.fallback = None  # set once the cell ran: the line defining the compiled function
        try:
            return self._tpcompile(line, cell)
        except S.SpecError as exc:
            shifted = exc.shifted("%%tpcompile ")
            shifted.details.insert(0, f"--> In [{self._cell_number()}], line 1")
            shifted.args = (shifted._render(),)
            raise shifted from None
        except TripyException as exc:
            raise errors.filtered(errors.relocate(exc, self.fallback)) from None
        except Exception as exc:
            raise errors.filtered(exc)  # noqa: B904 - the same exception, with a shorter traceback

    tpcompile.__doc__ = TPCOMPILE_DOC

    def _tpcompile(self, line: str, cell: str):
        __tracebackhide__ = True
        shell = self.shell
        parsed = S.parse_line(line)
        filename = self._run_cell_code(line, cell)
        self.fallback = line_location(filename, 1, f"%%tpcompile {line}")
        fname, func = find_target(cell, shell.user_ns)
        self.fallback = target_location(cell, filename, fname)
        params = runtime_params(func)
        values, missing = resolve_specs(parsed, params, shell.user_ns)
        exe_name = parsed.exe_name or f"{fname}_exe"
        if not parsed.widgets or not _widgets_available():
            if missing:
                raise S.SpecError(
                    f"No spec for parameter{'s' if len(missing) > 1 else ''}: {', '.join(missing)}.",
                    line,
                    len(line),
                    len(line) + 1,
                    f"Add e.g. {missing[0]}=f32[1:2:3,4] (see %%tpcompile?), or drop --no-widgets "
                    "to fill the bounds in an editor.",
                )
            return self._compile_plain(func, fname, exe_name, values, parsed)
        return self._compile_widget(func, fname, exe_name, params, values, missing, parsed)

    def _run_cell_code(self, line: str, cell: str) -> str:
        """Run the cell in the user's namespace under its own filename; the magic line stays as a comment on
        line 1, so line numbers (ours and IPython's, ``In [5], line 3``) count lines as the cell shows them."""
        __tracebackhide__ = True
        shell = self.shell
        code = f"# %%tpcompile {line}\n" + shell.transform_cell(cell)
        filename = shell.compile.cache(code, self._cell_number(), raw_code=f"%%tpcompile {line}\n{cell}")
        compiled = compile(code, filename, "exec")
        entry = linecache.cache.get(filename)
        if entry and entry[2]:
            entry[2][0] = f"%%tpcompile {line}\n"  # errors quote the magic line as typed
        exec(compiled, shell.user_ns)  # noqa: S102 - the user's own cell
        return filename

    def _cell_number(self) -> int:
        """The running cell's execution count: the one IPython compiled the calling cell with (during a cell
        ``shell.execution_count`` may already be the next one)."""
        cells = getattr(self.shell.compile, "_filename_map", None) or {}
        frame = sys._getframe(1)
        while frame is not None:
            if frame.f_code.co_filename in cells:
                return cells[frame.f_code.co_filename]
            frame = frame.f_back
        return self.shell.execution_count

    def _compile_plain(self, func, fname: str, exe_name: str, values: dict, parsed: S.MagicLine):
        from tripy_lab import pipeline

        __tracebackhide__ = True
        traced = pipeline.trace(func, kwargs=values)
        lowered = traced.lower()
        built = lowered.build(engine=parsed.engine, optimization_level=parsed.optimization_level)
        exe = built.executable()
        self.shell.user_ns[exe_name] = exe
        ms = [
            f"{name} {stage.seconds * 1e3:.1f} ms"
            for name, stage in (("trace", traced), ("lower", lowered), ("build", built))
        ]
        print(f"{exe_name} = {exe}  [{built.report.engine}, -O{built.optimization_level}; {', '.join(ms)}]")

    def _compile_widget(
        self, func, fname: str, exe_name: str, params, values: dict, missing: list, parsed: S.MagicLine
    ):
        from tripy_lab.lab.bounds_model import BoundsModel
        from tripy_lab.lab.session import Session
        from tripy_lab.lab.warming import NeighbourWarmer
        from tripy_lab.lab.widget.bounds_editor import BoundsEditor
        from tripy_lab.lab.widget.ui import LabWidget

        names = [p.name for p in params if p.name in values or p.name in missing]
        model = BoundsModel.from_values(names, values)
        ms = lambda v: None if v is None else v / 1e3
        session = Session(
            func,
            model,
            exe_name=exe_name,
            namespace=self.shell.user_ns,
            engine=parsed.engine,
            optimization_level=parsed.optimization_level,
            auto_build_seconds=ms(parsed.auto_build_ms),
            debounce_seconds=ms(parsed.debounce_ms),
            fallback_location=self.fallback,
            background=True,
        )
        session.listeners.append(NeighbourWarmer(session))  # after each build, the shapes next to opt
        editor = BoundsEditor(model, on_change=session.schedule, editable_rank=set(missing))
        editor.func_name, editor.exe_name = fname, exe_name
        ui = LabWidget(session, editor, title=f"%%tpcompile {exe_name} ← {fname}")
        try:
            session.refresh(wait=True)  # the cell's first build: the cell waits, an interrupt cancels it
        finally:  # shown also after an interrupt, saying so (Build ready)
            ui.show()  # one output: the widget and its static snapshot, updated in place from now on
        # Keep the last one reachable for inspection (tests, notebooks): tripy_lab.lab.widget.magic.last
        global last
        last = ui


last = None


def _widgets_available() -> bool:
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def load_ipython_extension(ip) -> None:
    ip.register_magics(TripyMagics)
    cells = getattr(ip.compile, "_filename_map", None)  # IPython's cell filename -> execution count
    if isinstance(cells, dict):
        source.cell_lookup = cells.get
    ip.set_custom_exc((TripyException,), errors.custom_exc_handler)


def unload_ipython_extension(ip) -> None:
    ip.set_custom_exc((), None)
    source.cell_lookup = None
