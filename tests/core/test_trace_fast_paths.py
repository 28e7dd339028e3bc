"""The trace's fast paths (issue 12, the front half): user locations are remembered per (code object,
instruction), yet every op still points at its own line and column, also when code objects die and new ones
reuse their ids (notebook cells re-run); Python-number checks skip numpy only inside the dtype's range;
pairwise broadcasting agrees with the general rule."""

import gc
import itertools
import os

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.core import source
from tripy_lab.core.errors import TripyException
from tripy_lab.trace.optable import broadcast_shapes


def _locations(fn):
    traced = pipeline.trace(fn, args=[tp.InputInfo((2,), tp.float32)])
    return [(op.kind, op.location) for op in traced.trace.ops if op.kind in ("mul", "add", "exp")]


def test_each_op_keeps_its_line_and_column():
    def f(x):
        y = x * 2.0 + x
        return tp.exp(y)

    locs = _locations(f)
    first = f.__code__.co_firstlineno
    assert [(k, loc.line - first) for k, loc in locs] == [("mul", 1), ("add", 1), ("exp", 2)]
    assert locs[0][1].col != locs[1][1].col or locs[0][1].end_col != locs[1][1].end_col
    assert all(loc.file == __file__ and loc.function == "f" for _, loc in locs)



def test_ops_of_one_public_call_take_its_line_from_its_call_scope(monkeypatch):
    from tripy_lab.frontend import scopes

    walks = []
    # a counting stand-in the stack walk skips like tripy_lab's own code: compiled under a file name in its package
    ns = {"walks": walks, "walk": source.user_location}
    exec(compile("def counted(**start):\n    walks.append(1)\n    return walk(**start)\n",
                 os.path.join(source._PKG_DIR, "counted.py"), "exec"), ns)
    monkeypatch.setattr(scopes, "user_location", ns["counted"])

    def f(x):
        n = x.shape[0] // 2
        return tp.exp(x[:n]) + tp.softmax(x, dim=0)

    traced = pipeline.trace(f, args=[tp.InputInfo(((2, 4, 8),), tp.float32)])
    first = f.__code__.co_firstlineno
    calls = {}
    for op in traced.trace.ops:
        assert op.location.file == __file__ and op.location.line - first in (1, 2)
        calls.setdefault(id(op.call), []).append(op)
    for ops in calls.values():  # every op of one call: that call's location object (no walk of its own)
        assert all(op.location is ops[0].call.location for op in ops if op.call is not None)
    getitem = [ops for ops in calls.values() if ops[0].call and ops[0].call.name == "__getitem__"]
    assert len(getitem) == 1 and len(getitem[0]) > 3  # a dynamic slice: its index arithmetic shares one line
    assert len(walks) < len(traced.trace.ops) // 2  # one stack walk per call, not per op

class _Block(tp.Module):
    def __init__(self):
        super().__init__()
        self.fc = tp.Linear(4, 4)
        self.fc.weight = tp.Tensor(np.eye(4, dtype=np.float32))
        self.fc.bias = tp.Tensor(np.zeros(4, np.float32))

    def forward(self, x):
        return _helper(self.fc(x))


def _helper(h):
    return tp.relu(h)[:, : h.shape[1] // 2] * 2.0


def test_walking_from_the_public_calls_caller_finds_what_the_full_walk_finds(monkeypatch):
    """The first op of a public call starts its stack walk at the frame that made the call; it must find the same
    user line, column and function as a walk from the op itself, through helpers, modules and leaf modules."""
    from tripy_lab.frontend import scopes

    block = _Block()

    def f(x):
        y = tp.softmax(block(x), dim=1)
        return _helper(y) + tp.exp(x)[:, :2], tp.reshape(x, (-1,))

    def locations():
        traced = pipeline.trace(f, args=[tp.InputInfo(((1, 2, 3), 4), tp.float32)])
        return [(op.kind, op.location, op.call.name if op.call else None) for op in traced.trace.ops]

    walked_from_caller = locations()
    monkeypatch.setattr(scopes, "_getframe", lambda depth: None)  # no caller frame: every walk starts at its op
    walked_from_op = locations()
    assert walked_from_caller == walked_from_op
    lines = {loc.line for _, loc, _ in walked_from_caller}
    assert {f.__code__.co_firstlineno + 1, f.__code__.co_firstlineno + 2, _helper.__code__.co_firstlineno + 1} <= lines
    # the weights' constants keep the line that made the tensors (_Block.__init__)
    assert {loc.function for _, loc, _ in walked_from_caller} == {"f", "_helper", "forward", "__init__"}


def test_new_code_objects_never_get_a_stale_location():
    # Each round compiles a fresh function (the old one is freed, so CPython may reuse its id) whose op sits
    # on another line: a location remembered by id alone would point at the previous round's line.
    for blank in range(40):
        ns = {"tp": tp}
        exec(compile("\n" * blank + "def f(x):\n    return x * 3.0\n", "<cell>", "exec"), ns)
        (kind, loc), = [r for r in _locations(ns["f"]) if r[0] == "mul"]
        assert (loc.file, loc.line, loc.function) == ("<cell>", blank + 2, "f")
        del ns
        gc.collect()
    assert len(source._LOCATIONS) <= source._LOCATIONS_LIMIT


def test_location_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(source, "_LOCATIONS_LIMIT", 3)
    source._LOCATIONS.clear()
    for _ in range(2):
        for n in range(5):
            ns = {"tp": tp}
            exec(compile("\n" * n + "def f(x):\n    return x * 3.0\n", "<bounded>", "exec"), ns)
            _locations(ns["f"])
            assert len(source._LOCATIONS) <= 3


@pytest.mark.parametrize(("value", "dt", "ok"), [
    (float(np.finfo(np.float32).max), tp.float32, True), (-float(np.finfo(np.float32).max), tp.float32, True),
    (3.5e38, tp.float32, False), (-1e39, tp.float16, False), (float("inf"), tp.float32, True),
    (float("nan"), tp.float32, True), (127, tp.int8, True), (128, tp.int8, False), (-129, tp.int8, False),
    (2**31 - 1, tp.int32, True), (2**31, tp.int32, False), (2**63, tp.int64, False), (True, tp.int8, True),
])
def test_python_number_ranges(value, dt, ok):
    from tripy_lab.frontend.tensor import check_python_values

    if ok:
        check_python_values(value, dt)
    else:
        with pytest.raises(TripyException, match="does not fit|not representable"):
            check_python_values(value, dt)


def test_scalar_operands_convert_like_a_cast():
    def f(x):
        return x * 70000.0  # beyond float16: inf, as a cast

    out = tp.compile(f, args=[tp.InputInfo((2,), tp.float16)], engine="reference")(
        tp.Tensor(np.ones(2, np.float16)))
    assert np.isinf(np.asarray(out).astype(np.float32)).all()
    out = tp.compile(lambda x: x + 3, args=[tp.InputInfo((2,), tp.int8)], engine="reference")(
        tp.Tensor(np.ones(2, np.int8)))
    assert np.asarray(out).tolist() == [4, 4]


def _broadcast_rule(*shapes):
    """Each dim: the one size other than 1 (two different ones: an error), else None if any is unknown, else 1."""
    out = []
    for dims in zip(*shapes):
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            return "error"
        out.append(known.pop() if known else None if None in dims else 1)
    return tuple(out)


def test_pairwise_broadcast_matches_the_rule():
    dims = [None, 1, 2, 3]
    for rank in (0, 1, 2):
        for a in itertools.product(dims, repeat=rank):
            for b in itertools.product(dims, repeat=rank):
                try:
                    got = broadcast_shapes(a, b)
                except TripyException:
                    got = "error"
                assert got == _broadcast_rule(a, b), (a, b)
    assert broadcast_shapes((2, None), (1, 4), (2, 1)) == (2, 4)
    with pytest.raises(TripyException, match="not broadcastable"):
        broadcast_shapes((2, 3), (3, 3))


# ---- a Python number next to a Tensor: operand and rank matching in one step, one location look-up ----
def _scalar_programs():
    def f32(x):
        return (x * 2.0 + 1) - (0.5 * x) / 3 + (1 - x)  # both sides, int and float numbers

    def ints(i):
        return (i * 3 + 2) - (7 - i) // 2

    def halves(h):
        return h * 70000.0 + 1.5  # beyond float16: inf, as a cast (the same op either way)

    def scalar(s):
        return s * 2.0 - 1.0  # rank 0: no reshape

    return [(f32, tp.InputInfo((2, 3), tp.float32)), (ints, tp.InputInfo((4,), tp.int32)),
            (halves, tp.InputInfo((1, 2, 2), tp.float16)), (scalar, tp.InputInfo((), tp.float32))]


def _listing(fn, info):
    traced = pipeline.trace(fn, args=[info])
    ops = traced.trace.ops
    text = traced.lower().program  # the MLIR too, with its locations
    from tripy_lab.mlir.text import print_module

    return (str(traced.trace), [(op.kind, op.location, [t.is_shape for t in op.outputs]) for op in ops],
            print_module(text.module, locations=True))


@pytest.mark.parametrize("index", range(4))
def test_scalar_operand_fast_path_makes_the_general_paths_ops(monkeypatch, index):
    from tripy_lab.frontend import ops_math

    fn, info = _scalar_programs()[index]
    fast = _listing(fn, info)
    monkeypatch.setattr(ops_math, "_PY_NUMBERS", ())  # every number through _as_dim, operand, match_ranks
    slow = _listing(fn, info)
    assert fast == slow
    rank = len(info.static_shape())
    assert "reshape" not in fast[0]  # ranks are matched by the constant's own shape, not by a reshape
    if rank:
        assert f"tensor<{'1x' * rank}" in fast[0]
    ops = pipeline.trace(fn, args=[info]).trace.ops
    assert {op.location.line for op in ops if op.kind != "constant"} == {fn.__code__.co_firstlineno + 1}
    assert all(op.location.function == fn.__name__ for op in ops)


@pytest.mark.parametrize(("fn", "dt", "match"), [
    (lambda x: x * 1.5, tp.int32, "Refusing to automatically cast 'float32' argument to 'int32'"),
    (lambda x: 2.5 - x, tp.int8, "Refusing to automatically cast 'float32' argument to 'int8'"),
    (lambda x: x + 1, tp.bool, "Refusing to automatically cast 'int32' argument to 'bool'"),
    (lambda x: x * 300, tp.int8, "Value 300 does not fit in int8"),
    (lambda x: x * 1e39, tp.float32, "not representable in float32"),
    (lambda x: x ** 2, tp.int32, "Invalid inputs for function: '__pow__'"),
])
def test_scalar_operand_fast_path_keeps_the_errors(monkeypatch, fn, dt, match):
    from tripy_lab.frontend import ops_math

    errors = []
    for numbers in (ops_math._PY_NUMBERS, ()):
        monkeypatch.setattr(ops_math, "_PY_NUMBERS", numbers)
        with pytest.raises(TripyException, match=match) as info:
            pipeline.trace(fn, args=[tp.InputInfo((2,), dt)])
        errors.append(str(info.value))
    assert errors[0] == errors[1]
    assert __file__ in errors[0]  # at the user's line


# ---- the Trace's topological order: a recursive post-order walk, written out here as the definition ----
def _recursive_order(outputs, inputs):
    order, done = [], set()

    def visit(op):
        if op in done:
            return
        for t in op.inputs:
            if t.producer is not None and all(t is not i for i in inputs):
                visit(t.producer)
        done.add(op)
        order.append(op)

    for t in outputs:
        if t.producer is not None and all(t is not i for i in inputs):
            visit(t.producer)
    return order


def test_topological_order_is_the_recursive_walk():
    rng = np.random.default_rng(0)
    ops = [lambda a, b: a + b, lambda a, b: a * 2.0, lambda a, b: tp.exp(a), lambda a, b: a - b]
    for trial in range(30):
        n_ops, reverse = int(rng.integers(1, 25)), bool(trial % 2)

        def f(x, y, n_ops=n_ops, reverse=reverse):
            pool = [x, y]
            for _ in range(n_ops):
                a, b = (pool[int(i)] for i in rng.integers(0, len(pool), 2))
                pool.append(ops[int(rng.integers(4))](a, b))
            picks = sorted({int(i) for i in rng.integers(0, len(pool), int(rng.integers(1, 4)))}, reverse=reverse)
            return [pool[i] for i in picks]

        trace = pipeline.trace(f, args=[tp.InputInfo((2,), tp.float32)] * 2).trace
        assert trace.ops == _recursive_order(trace.outputs, trace.inputs)
        names = [t.name for op in trace.ops for t in op.outputs]
        assert names == [f"%t{i}" for i in range(len(names))]  # renumbered in program order


def test_renumbering_keeps_user_names_and_rejects_clashes():
    def f(x):
        y = tp.exp(x)
        y.name = "mine"
        return y + 1.0

    trace = pipeline.trace(f, args=[tp.InputInfo((2,), tp.float32)]).trace
    assert [t.name for op in trace.ops for t in op.outputs] == ["mine", "%t0", "%t1"]

    def clash(x):
        y = tp.exp(x)
        y.name = "%t9"  # looks auto-named: renumbered like one
        z = tp.exp(y)
        z.name = "x"  # the input's name
        return z

    with pytest.raises(TripyException, match="same name: 'x'"):
        pipeline.trace(clash, args=[tp.InputInfo((2,), tp.float32)])


def test_tensor_pairs_skip_conversions_but_keep_rank_matching_and_checks():
    def f(x, y):
        return x + y, y * x, tp.maximum(x, y)

    trace = pipeline.trace(f, args=[tp.InputInfo((2, 3), tp.float32), tp.InputInfo((3,), tp.float32)]).trace
    kinds = [op.kind for op in trace.ops]
    assert kinds.count("reshape") == 3 and [t.shape for t in trace.outputs] == [(2, 3)] * 3
    with pytest.raises(TripyException, match="same data type"):
        pipeline.trace(lambda x, y: x + y, args=[tp.InputInfo((2,), tp.float32), tp.InputInfo((2,), tp.float16)])
    with pytest.raises(TripyException, match="not broadcastable"):
        pipeline.trace(lambda x, y: x * y, args=[tp.InputInfo((2,), tp.float32), tp.InputInfo((3,), tp.float32)])


def _mixed(x, i, s):
    """Unary and binary ops on plain tensors, 0-d int32 tensors that are not shape values, shape values with
    tensors (DimensionSize + Tensor) and shape values together (folded in make)."""
    d = x.shape[0]
    outs = [tp.exp(x) * 2.0 > x, tp.sqrt(abs(x)) ** 2.0 - x, -i + i, i * 3 - 1, s * d, d * 2 + d, (d + 1) * s]
    return [tp.cast(o, tp.float32) if o.dtype is not tp.float32 else o for o in outs]


def _mixed_listing():
    args = [tp.InputInfo(((1, 2, 4), 3), tp.float32), tp.InputInfo((), tp.int32), tp.InputInfo((), tp.int32)]
    traced = pipeline.trace(_mixed, args=args)
    ops = traced.trace.ops
    return str(traced.trace), [(op.kind, op.location, [(t.is_shape, t.value is None) for t in op.outputs])
                               for op in ops]


def _as_internal(source_text: str, namespace: dict):
    """A function compiled under build.py's file name: user_location skips its frame, as it skips tripy_lab's."""
    from tripy_lab.frontend import build

    return eval(compile(source_text, build.__file__, "eval"), namespace)  # noqa: S307 - a fixed test snippet


def test_plain_ops_make_what_make_makes(monkeypatch):
    from tripy_lab.frontend import build, ops_math

    made = []
    counted = _as_internal("lambda kind, ins, loc=None: made.append(kind) or make_plain(kind, ins, loc)",
                           {"made": made, "make_plain": build.make_plain})
    monkeypatch.setattr(ops_math, "make_plain", counted)
    fast = _mixed_listing()
    assert set(made) >= {"exp", "mul", "greater", "sqrt", "abs", "pow", "sub", "neg", "add"}
    monkeypatch.setattr(ops_math, "make_plain", _as_internal("lambda kind, ins, loc=None: make1(kind, ins, None, loc)",
                                                             {"make1": build.make1}))
    slow = _mixed_listing()
    assert fast == slow
    assert all(loc.file == __file__ for _, loc, _ in fast[1])  # each op at a line of _mixed


def test_auto_names_past_the_shared_list_are_formatted(monkeypatch):
    from tripy_lab.trace import graph

    monkeypatch.setattr(graph, "_AUTO_NAMES", [])
    monkeypatch.setattr(graph, "_AUTO_NAMES_LIMIT", 5)

    def f(x):
        for _ in range(4):
            x = x * 2.0
        return x

    trace = pipeline.trace(f, args=[tp.InputInfo((2,), tp.float32)]).trace
    assert [t.name for op in trace.ops for t in op.outputs] == [f"%t{i}" for i in range(8)]
    assert graph._AUTO_NAMES == [f"%t{i}" for i in range(5)]


def test_trace_tensors_and_ops_are_slotted_records():
    # every op makes a TraceOp and its TraceTensors: no per-object __dict__ (one allocation less each), and a
    # misspelt attribute fails instead of hanging a stray value on the graph
    traced = pipeline.trace(lambda x: tp.softmax(x * 2.0, dim=-1), args=[tp.InputInfo((2, 3), tp.float32)])
    op = traced.trace.ops[-1]
    for obj in (op, op.outputs[0], traced.trace.inputs[0]):
        assert not hasattr(obj, "__dict__")
        with pytest.raises(AttributeError):
            obj.not_a_field = 1
    # fields still read and write as before (renumbering and producers set them after construction)
    out = op.outputs[0]
    assert out.producer is op and out.name.startswith("%t") and op.name == out.name
