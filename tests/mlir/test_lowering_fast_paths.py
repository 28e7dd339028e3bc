"""The lowering's fast paths build the same IR as the generic xDSL builders, and its caches share only
immutable values: types, locations, enum and small dense attributes (issue 12, the front half).
"""

import numpy as np
import pytest
from xdsl.dialects.builtin import (
    DYNAMIC_INDEX,
    FileLineColLoc,
    IntAttr,
    NameLoc,
    StringAttr,
    TensorType,
    UnknownLoc,
    f32,
)
from xdsl.irdl import IRDLOperation

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.mlir import attrs, op_builder, ops_base
from tripy_lab.mlir import dialect as trt
from tripy_lab.mlir import text as mlir_text
from tripy_lab.mlir.program import OpOrigin

F32 = tp.float32


LN = tp.LayerNorm(4)
LN.weight, LN.bias = tp.Tensor(np.ones(4, np.float32)), tp.Tensor(np.zeros(4, np.float32))
CONV = tp.Conv(1, 2, (1, 1), bias=True)
CONV.weight, CONV.bias = tp.Tensor(np.ones((2, 1, 1, 1), np.float32)), tp.Tensor(np.zeros(2, np.float32))


def zoo(x, n):
    """One program through most lowering rules: static and dynamic dims, optional and variadic operands."""
    h = tp.tanh(x) * 1.5 + x - 0.25
    h = tp.relu(h) @ tp.transpose(h, 0, 1)
    s = tp.sum(h, dim=1, keepdim=True) + tp.max(h, dim=0)
    w = tp.where(h > 0.0, h, tp.exp(h))
    cat = tp.concatenate([w, s * 2.0, x[:, :3]], dim=1)
    g = tp.gather(cat, 0, tp.Tensor(np.array([0, 1], dtype=np.int32)))
    r = tp.reshape(x, (-1,))[: x.shape[0]]
    ar = tp.arange(0, n, dtype=F32)
    ln = LN(x[:, :4])
    top, idx = tp.topk(x, 2, dim=1)
    img = tp.reshape(x[:1, :4], (1, 1, 2, 2))
    conv = CONV(img)
    pooled = tp.maxpool(conv, kernel_dims=(2, 2))
    return tp.softmax(g, dim=-1), r + ar[:1], tp.cast(ln, tp.float16), top, tp.cast(idx, F32), pooled


def lower_zoo():
    traced = pipeline.trace(zoo, args=[tp.InputInfo(((2, 4, 8), 6), F32), tp.DimensionInputInfo((1, 3, 5))])
    return traced.lower()


def _structure(op):
    return (type(op), [(type(v.owner).__name__, v.index if hasattr(v, "index") else None) for v in op.operands],
            [r.type for r in op.results], list(op.properties.items()), dict(op.attributes), op.location,
            len(op.regions), len(op.successors), sorted(vars(op)))


def _generic_new_op(cls, operands, result_type, properties):
    op = cls.__new__(cls)
    IRDLOperation.__init__(op, operands=list(operands), result_types=[result_type], properties=dict(properties))
    return op


def test_planned_ops_equal_generic_builder(monkeypatch):
    from tripy_lab.mlir import lowering

    fast = lower_zoo().program
    monkeypatch.setattr(ops_base, "build_planned", lambda *args: False)  # every op through irdl_op_init
    monkeypatch.setattr(lowering, "new_op", _generic_new_op)  # also the ones the lowering builds directly
    slow = lower_zoo().program
    fast_ops, slow_ops = fast.ops(), slow.ops()
    planned = {type(op) for op in fast_ops if op_builder._PLANS.get(type(op)) is not None}
    # plain, optional, segments, variadic, 2 results
    assert {trt.ElementWiseOp, trt.ReshapeOp, trt.SliceOp, trt.ConcatenationOp, trt.LinspaceOp,
            trt.ConvolutionOp, trt.TopKOp, trt.ConstantOp, trt.UnaryOp, trt.ActivationOp} <= planned
    assert len(fast_ops) == len(slow_ops) > 40
    for a, b in zip(fast_ops, slow_ops):
        assert _structure(a) == _structure(b), a.name
        for i, v in enumerate(a.operands):  # use lists: the op is a user of each operand, at its index
            assert any(u.operation is a and u.index == i for u in v.uses)
    for key in [dict(generic=True, locations=True), dict(locations=True)]:
        assert mlir_text.print_module(fast.module, **key) == mlir_text.print_module(slow.module, **key)
    fast.module.verify()


def test_unplanned_arguments_keep_the_generic_errors():
    x = trt.ConstantOp(np.ones((2,), np.float32), "f32").results[0]
    with pytest.raises(ValueError, match="input2"):  # irdl_op_init's own message
        trt.ElementWiseOp(x, None, "kSUM", attrs.tensor_type((2,), "f32"))
    with pytest.raises(ValueError, match="kBOGUS"):
        trt.UnaryOp(x, "kBOGUS")


def test_cached_attributes_are_shared_values_not_state():
    t = attrs.tensor_type((None, 4), "f32")
    assert t == attrs.tensor_type([-1, 4], "f32")
    assert t is attrs.tensor_type((None, 4), "f32") and t == TensorType(f32, [DYNAMIC_INDEX, 4])
    assert attrs.tensor_type((4,), "f32") != attrs.tensor_type((4,), "f16")
    with pytest.raises(AttributeError):  # frozen: nobody can change a shared type
        t.element_type = attrs.element_type("f16")
    # small dense constants: the key is the source dtype and bytes, so equal-looking values stay apart
    one_f, one_i = attrs.dense_elements(np.float32(1), "f32"), attrs.dense_elements(np.int64(1), "f32")
    assert one_f == one_i and attrs.to_python(one_i) == 1.0
    zero, neg_zero = attrs.dense_elements(np.float32(0.0), "f32"), attrs.dense_elements(np.float32(-0.0), "f32")
    assert zero != neg_zero and np.signbit(attrs.to_python(neg_zero))
    assert attrs.dense_elements(np.float32(1), "f32") is one_f
    assert attrs.to_python(attrs.dense_elements(np.array([1, 2], np.int32), "i32")).tolist() == [1, 2]
    assert attrs.to_python(attrs.dense_elements(np.array([1, 2], np.int32), "f16")).dtype == np.float16
    assert trt.enum_attr(trt.UnaryOperationAttr, "kEXP") is trt.enum_attr(trt.UnaryOperationAttr, "kEXP")
    # a transpose's permutation map: one shared attribute per permutation, equal to the one built afresh
    from xdsl.dialects.builtin import AffineMapAttr
    from xdsl.ir.affine import AffineExpr, AffineMap

    perm = ops_base._perm_map((1, 0, 2))
    assert perm is ops_base._perm_map([1, 0, 2]) is ops_base._perm_map(np.array([1, 0, 2]))
    assert perm == AffineMapAttr(AffineMap(3, 0, tuple(AffineExpr.dimension(p) for p in (1, 0, 2))))
    assert perm != ops_base._perm_map((0, 1, 2)) and attrs.to_python(perm) == (1, 0, 2)



def test_cached_integer_arrays_and_attributes_equal_the_verified_constructors():
    from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, IntegerType, i32, i64

    a = attrs.dense_array([0, 2, 1], "i32")
    assert a == DenseArrayBase.from_list(i32, (0, 2, 1)) and a is attrs.dense_array((0, 2, 1), "i32")
    assert attrs.dense_array([0, 2, 1], "i64") == DenseArrayBase.from_list(i64, (0, 2, 1)) != a  # elem is in the key
    assert attrs.to_python(attrs.dense_array([], "i64")) == ()
    # bools and floats are not ints: never served the int entry that hashes equal to them
    assert attrs.dense_array([1.5], "f32") == DenseArrayBase.from_list(attrs.element_type("f32"), (1.5,))
    assert attrs.dense_array([True], "i1") == DenseArrayBase.from_list(IntegerType(1), (True,))
    with pytest.raises(ValueError):  # out of range: the constructor's verifier still runs before anything is kept
        attrs.dense_array([2**40], "i32")
    with pytest.raises(ValueError):
        attrs.dense_array([2**40], "i32")
    n = attrs.int_attr(3, "i32")
    assert n == IntegerAttr(3, i32) and n is attrs.int_attr(3, "i32") and attrs.int_attr(3) == IntegerAttr(3, i64) != n
    with pytest.raises(AttributeError):  # frozen: a shared attribute cannot be changed by one program
        n.value = IntegerAttr(4, i32).value

def test_two_programs_sharing_constants_stay_independent():
    def f(x):
        return x * 2.0 + 1.0

    a = pipeline.trace(f, args=[tp.InputInfo((2, 2), F32)]).lower()
    b = pipeline.trace(f, args=[tp.InputInfo((2, 2), F32)]).lower()
    before = b.as_text(locations=True)
    const_a = next(op for op in a.program.ops() if op.name == "tensorrt.constant")
    const_a.properties["weights"] = attrs.dense_elements(np.float32(7.0), "f32")  # edit program a only
    a._text_cache.clear()
    assert "7.000000e+00" in a.as_text() and "7.000000e+00" not in b.as_text()
    assert b.as_text(locations=True) == before
    out = b.build(engine="reference").executable()(tp.Tensor(np.ones((2, 2), np.float32)))
    np.testing.assert_array_equal(np.asarray(out), np.full((2, 2), 3.0, np.float32))


def test_ops_on_one_line_keep_their_own_names_and_columns():
    def f(x):
        return x * 2.0 + x * 3.0

    lowered = pipeline.trace(f, args=[tp.InputInfo((2,), F32)]).lower()
    ops = [op for op in lowered.program.ops() if op.name == "tensorrt.element_wise"]
    names = [op.location.desc.data for op in ops]
    assert len(set(names)) == 3
    cols = [op.location.location.column.data for op in ops]
    assert cols[0] != cols[1]  # the two multiplies: different columns of the same line
    assert len({op.location.location.line.data for op in ops}) == 1
    for op, name in zip(ops, names):
        assert lowered.program.origin_of(op).trace_op == name
        assert lowered.program.origin_of(op).text.startswith(f"{name} = ")
    text = lowered.as_text(locations=True)
    assert all(f'loc("{name}"(' in text for name in names)


def test_name_loc_equals_the_verified_constructor():
    child = attrs.file_loc("cell.py", 3, 5)
    assert child is attrs.file_loc("cell.py", 3, 5) and child == FileLineColLoc(StringAttr("cell.py"), IntAttr(3),
                                                                                IntAttr(5))
    for inner in (child, UnknownLoc()):
        loc = attrs.name_loc("%t7", inner)
        assert loc == NameLoc(StringAttr("%t7"), inner) and hash(loc) == hash(NameLoc(StringAttr("%t7"), inner))
        loc.verify()
        assert str(loc) == str(NameLoc(StringAttr("%t7"), inner))
    # one immutable StringAttr per name, shared by the locations of every program; each location its own child
    a, b = attrs.name_loc("%t8", child), attrs.name_loc("%t8", UnknownLoc())
    assert a.desc is b.desc and a.desc == StringAttr("%t8") and a != b and a.location is child
    with pytest.raises(AttributeError):
        a.desc.data = "%t9"


def test_a_full_name_cache_keeps_its_names_instead_of_starting_over(monkeypatch):
    # a program with more op names than the cache holds must not evict %t0.. (every program's names): clearing
    # when full made each lowering of a 76k-op program rebuild all of its names
    monkeypatch.setattr(attrs, "_NAMES", {})
    monkeypatch.setattr(attrs, "_NAMES_LIMIT", 4)
    first = attrs.name_loc("%t0", UnknownLoc()).desc
    for i in range(1, 10):
        attrs.name_loc(f"%t{i}", UnknownLoc())
    assert len(attrs._NAMES) == 4 and attrs.name_loc("%t0", UnknownLoc()).desc is first
    late = attrs.name_loc("%t9", UnknownLoc())  # past the limit: built, correct, not kept
    assert late.desc == StringAttr("%t9") and "%t9" not in attrs._NAMES


def test_origin_text_is_the_listing_at_lowering_time():
    def f(x):
        return tp.exp(x) + 1.0

    traced = pipeline.trace(f, args=[tp.InputInfo((2,), F32)])
    listing = {op.name: str(op) for op in traced.trace.ops}
    lowered = traced.lower()
    for op in traced.trace.ops:  # a later trace renaming shared tensors must not rewrite these origins
        for t in op.outputs:
            t.name = t.name.replace("%t", "%renamed")
    for name, origin in lowered.program.origins.items():
        assert origin.text == listing[name]
    origin = next(iter(lowered.program.origins.values()))
    assert origin == OpOrigin(origin.trace_op, origin.text, origin.location) and hash(origin)
    with pytest.raises(AttributeError):
        origin.trace_op = "%t99"


def test_constants_take_the_location_of_their_first_user_or_the_last_op():
    def f(x):
        y = x + 1.0
        return y, tp.Tensor([1.0, 2.0])

    lowered = pipeline.trace(f, args=[tp.InputInfo((2,), F32)]).lower()
    consts = [op for op in lowered.program.ops() if op.name == "tensorrt.constant"]
    add = next(op for op in lowered.program.ops() if op.name == "tensorrt.element_wise")
    assert consts[0].location == add.location  # 1.0: emitted at the add that uses it
    last = lowered.traced.trace.ops[-1]
    assert last.kind == "constant"  # the returned constant: at its own trace op and line
    assert consts[-1].location.desc.data == last.name
    assert consts[-1].location.location.line.data == f.__code__.co_firstlineno + 2


def test_planned_builder_fills_defaults_and_segments_like_irdl():
    x = trt.ConstantOp(np.ones((4, 2), np.float32), "f32").results[0]
    t1, t4 = attrs.tensor_type((2,), "f32"), attrs.tensor_type((4,), "f32")
    cases = [  # properties without their defaults (keepDimensions, mode): both builders must add them
        (trt.ReduceOp, [x], [t1], {"reduceAxes": attrs.dense_array([0]),
                                   "reduceOperation": trt.enum_attr(trt.ReduceOperationAttr, "kSUM")}),
        (trt.SliceOp, [x, None, None, None, None], [attrs.tensor_type((1, 2), "f32")],
         {"static_start": attrs.dense_array([0, 0], "i32"), "static_size": attrs.dense_array([1, 2], "i32"),
          "static_stride": attrs.dense_array([1, 1], "i32")}),
        (trt.ConcatenationOp, [[x, x]], [attrs.tensor_type((8, 2), "f32")], {"axis": attrs.int_attr(0, "i32")}),
        (trt.ConcatenationOp, [(x, x, x)], [attrs.tensor_type((12, 2), "f32")], {"axis": attrs.int_attr(0, "i32")}),
        (trt.SliceOp, [x, x, None, [x], None], [attrs.tensor_type((1, 2), "f32")],  # SSA, absent, a one-value list
         {"static_size": attrs.dense_array([1, 2], "i32")}),
        (trt.ReshapeOp, [x, None], [t4], {}),
    ]
    for cls, operands, results, props in cases:
        fast, slow = cls.__new__(cls), cls.__new__(cls)
        assert op_builder.build_planned(fast, operands, results, dict(props))
        IRDLOperation.__init__(slow, operands=operands, result_types=results, properties=dict(props))
        assert _structure(fast) == _structure(slow), cls.name
    assert len(fast.properties) == len(slow.properties)


# ---- block linking and the constant shortcut of the lowering (issue 12 part 5) ----
def consts(x):
    """Constants of each kind the lowering emits: Python numbers, shapes, small and big arrays of several dtypes,
    a non-contiguous array, bools (emitted as i32 and cast), a big splat, a weight used twice."""
    big = tp.Tensor(np.arange(2048, dtype=np.float32).reshape(2, 1024))
    t = tp.Tensor(np.arange(6, dtype=np.float32).reshape(3, 2).T)  # a transposed view
    h = tp.cast(x[:, :2] * 2.0, tp.float16) + tp.Tensor(np.array([[1.5, -2.0]], np.float16))
    i = tp.Tensor(np.array([3, 4], np.int64)) * 2
    b = tp.where(tp.Tensor([True, False]), x[0, :2], x[1, :2])
    s = tp.Tensor(np.full((2, 1024), 0.5, np.float32)) + big + big
    return h, i, b, s, t + x[:, :3], tp.Tensor(np.int8(-3)) * 2


def _lower_consts():
    return pipeline.trace(consts, args=[tp.InputInfo((2, 4), F32)]).lower().program


def _walk(block):
    forward, op = [], block.first_op
    while op is not None:
        forward.append(op)
        op = op.next_op
    backward, op = [], block.last_op
    while op is not None:
        backward.append(op)
        op = op.prev_op
    return forward, backward[::-1]


@pytest.mark.parametrize("make", [lower_zoo, _lower_consts])
def test_linked_block_and_constant_shortcut_equal_the_generic_paths(monkeypatch, make):
    from tripy_lab.core.arrays import to_host
    from tripy_lab.mlir import lowering

    program = make()
    program = getattr(program, "program", program)

    def plain_add(self, op):  # Block.add_op, with its checks
        op.location = self.location
        self.block.add_op(op)
        return op

    monkeypatch.setattr(lowering._Ctx, "add", plain_add)
    monkeypatch.setattr(lowering._Deferred, "emit", lambda self: self.ctx.constant(
        to_host(self.op.params["value"]), self.op.params["dtype"]))
    monkeypatch.setattr(lowering, "new_op", _generic_new_op)
    slow = make()
    slow = getattr(slow, "program", slow)
    block, slow_block = program.main().body.block, slow.main().body.block
    forward, backward = _walk(block)
    assert forward == backward == list(block.ops) and all(op.parent is block for op in forward)
    assert len(forward) == len(list(slow_block.ops)) > 20
    for a, b in zip(forward, _walk(slow_block)[0]):
        assert _structure(a) == _structure(b), a.name
    for key in [dict(generic=True, locations=True), dict(locations=True)]:
        assert mlir_text.print_module(program.module, resources=program.resources, **key) == \
            mlir_text.print_module(slow.module, resources=slow.resources, **key)
    program.module.verify()
    # the block stays editable through xDSL's own API
    first = forward[0]
    first.detach()
    block.insert_op_before(first, block.first_op)
    assert _walk(block)[0] == forward


def test_constant_shortcut_values_match_the_reference_run():
    program = _lower_consts()
    kinds = {str(op.properties["weights"].type) for op in program.ops() if op.name == "tensorrt.constant"}
    assert {"tensor<1x2xf16>", "tensor<2xi64>", "tensor<2xi32>", "tensor<2x3xf32>", "tensor<2x1024xf32>"} <= kinds
    exe = tp.compile(consts, args=[tp.InputInfo((2, 4), F32)], engine="reference")
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    h, i, b, s, t, c = (np.asarray(o) for o in exe(tp.Tensor(x)))
    np.testing.assert_array_equal(h, (x[:, :2] * 2).astype(np.float16) + np.array([[1.5, -2.0]], np.float16))
    np.testing.assert_array_equal(i, [6, 8])
    np.testing.assert_array_equal(b, [x[0, 0], x[1, 1]])
    big = np.arange(2048, dtype=np.float32).reshape(2, 1024)
    np.testing.assert_array_equal(s, 0.5 + big + big)
    np.testing.assert_array_equal(t, np.arange(6, dtype=np.float32).reshape(3, 2).T + x[:, :3])
    assert c.tolist() == -6


def test_file_locations_follow_each_source_location():
    def f(x):
        y = x * 2.0
        z = tp.exp(y)
        return z + y

    lowered = pipeline.trace(f, args=[tp.InputInfo((2,), F32)]).lower()
    for op in lowered.program.ops():
        origin = lowered.program.origin_of(op)
        loc = op.location.location
        assert (loc.filename.data, loc.line.data, loc.column.data) == (
            origin.location.file, origin.location.line, origin.location.col + 1), op.name
    lines = {op.location.location.line.data for op in lowered.program.ops()}
    assert lines == {f.__code__.co_firstlineno + k for k in (1, 2, 3)}


def test_new_op_refuses_what_it_cannot_build():
    x = trt.ConstantOp(np.ones((2,), np.float32), "f32").results[0]
    t = attrs.tensor_type((2,), "f32")
    with pytest.raises(TypeError, match="SliceOp"):  # operand segments
        op_builder.new_op(trt.SliceOp, (x,), t, {})
    with pytest.raises(TypeError, match="ElementWiseOp with 1 operands"):
        op_builder.new_op(trt.ElementWiseOp, (x,), t, {})
    with pytest.raises(TypeError, match="TopKOp"):  # two results
        op_builder.new_op(trt.TopKOp, (x,), t, {})
