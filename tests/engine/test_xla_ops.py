"""Every entry of the xla engine's translation table vs a numpy expectation, on small programs."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from test_xla_programs import ProgramBuilder, build, run_np

from tripy_lab.core.bounds import DimensionInputInfo
from tripy_lab.core.errors import TripyException
from tripy_lab.mlir import dialect as d
from tripy_lab.mlir.attrs import tensor_type

jax = pytest.importorskip("jax")
rng = np.random.default_rng(0)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def check(prog, args, expected, rtol=1e-5, atol=1e-6):
    outs = run_np(build(prog), *args)
    assert len(outs) == len(expected)
    for o, e in zip(outs, expected):
        e = np.asarray(e)
        assert o.shape == e.shape, (o.shape, e.shape)
        assert o.dtype == e.dtype, (o.dtype, e.dtype)
        if o.dtype.kind in "biu":
            np.testing.assert_array_equal(o, e)
        else:
            np.testing.assert_allclose(o.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol)


def unary_prog(make, shape=(2, 3), elem="f32"):
    b = ProgramBuilder()
    x = b.input("x", shape, elem)
    return b.program(b.add(make(x)))


# ---------------------------------------------------------------------------------------------- element-wise

EW_FLOAT = {"kSUM": np.add, "kPROD": np.multiply, "kMAX": np.maximum, "kMIN": np.minimum, "kSUB": np.subtract,
            "kDIV": np.divide, "kPOW": lambda a, b: np.power(np.abs(a), b),
            "kFLOOR_DIV": lambda a, b: np.floor(a / b)}


@pytest.mark.parametrize("kind", sorted(EW_FLOAT))
def test_element_wise_float(kind):
    b = ProgramBuilder()
    x, y = b.input("x", (2, 3)), b.input("y", (1, 3))
    if kind == "kPOW":
        x = b.add(d.UnaryOp(x, "kABS"))
    prog = b.program(b.add(d.ElementWiseOp(x, y, kind)))
    a, c = f32(2, 3), f32(1, 3, lo=0.5, hi=2.0)
    check(prog, [a, c], [EW_FLOAT[kind](a, c).astype(np.float32)], rtol=1e-5)


def test_element_wise_int_division_truncates_and_floor_div_floors():
    b = ProgramBuilder()
    x, y = b.input("x", (6,), "i32"), b.input("y", (6,), "i32")
    prog = b.program(b.add(d.ElementWiseOp(x, y, "kDIV")), b.add(d.ElementWiseOp(x, y, "kFLOOR_DIV")))
    a = np.array([7, -7, 7, -7, 6, 0], np.int32)
    c = np.array([2, 2, -2, -2, 3, 5], np.int32)
    check(prog, [a, c], [np.array([3, -3, -3, 3, 2, 0], np.int32), np.floor_divide(a, c)])


@pytest.mark.parametrize("kind,fn", [("kEQUAL", np.equal), ("kGREATER", np.greater), ("kLESS", np.less)])
def test_element_wise_compare(kind, fn):
    b = ProgramBuilder()
    x, y = b.input("x", (2, 3)), b.input("y", (2, 1))
    prog = b.program(b.add(d.ElementWiseOp(x, y, kind)))
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    c = np.array([[2], [5]], np.float32)
    check(prog, [a, c], [fn(a, c)])


@pytest.mark.parametrize("kind,fn", [("kAND", np.logical_and), ("kOR", np.logical_or), ("kXOR", np.logical_xor)])
def test_element_wise_logical(kind, fn):
    b = ProgramBuilder()
    x, y = b.input("x", (4,), "i1"), b.input("y", (4,), "i1")
    prog = b.program(b.add(d.ElementWiseOp(x, y, kind)))
    a, c = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    check(prog, [a, c], [fn(a, c)])


# ---------------------------------------------------------------------------------------------- unary / activation

UNARY = {"kEXP": np.exp, "kLOG": np.log, "kSQRT": np.sqrt, "kRECIP": lambda x: 1 / x, "kABS": np.abs,
         "kNEG": np.negative, "kSIN": np.sin, "kCOS": np.cos, "kTAN": np.tan, "kSINH": np.sinh, "kCOSH": np.cosh,
         "kASIN": np.arcsin, "kACOS": np.arccos, "kATAN": np.arctan, "kASINH": np.arcsinh,
         "kACOSH": np.arccosh, "kATANH": np.arctanh, "kCEIL": np.ceil, "kFLOOR": np.floor,
         "kERF": np.vectorize(math.erf), "kSIGN": np.sign, "kROUND": np.round}
DOMAIN = {"kLOG": (0.1, 3), "kSQRT": (0.1, 3), "kRECIP": (0.5, 2), "kASIN": (-0.9, 0.9), "kACOS": (-0.9, 0.9),
          "kATANH": (-0.9, 0.9), "kACOSH": (1.1, 3)}


@pytest.mark.parametrize("kind", sorted(UNARY))
def test_unary(kind):
    prog = unary_prog(lambda x: d.UnaryOp(x, kind))
    a = f32(2, 3, lo=DOMAIN.get(kind, (-2, 2))[0], hi=DOMAIN.get(kind, (-2, 2))[1])
    if kind == "kROUND":
        a = np.array([[0.5, 1.5, 2.5], [-0.5, -1.4, 3.6]], np.float32)
    check(prog, [a], [UNARY[kind](a).astype(np.float32)], rtol=1e-5, atol=1e-5)


def test_unary_not():
    prog = unary_prog(lambda x: d.UnaryOp(x, "kNOT"), (3,), "i1")
    a = np.array([True, False, True])
    check(prog, [a], [~a])


def _erf(x):
    return np.vectorize(math.erf)(x)


ACT = {
    "kRELU": (None, None, lambda x, a, b: np.maximum(x, 0)),
    "kSIGMOID": (None, None, lambda x, a, b: 1 / (1 + np.exp(-x))),
    "kTANH": (None, None, lambda x, a, b: np.tanh(x)),
    "kLEAKY_RELU": (0.1, None, lambda x, a, b: np.where(x >= 0, x, a * x)),
    "kELU": (0.7, None, lambda x, a, b: np.where(x >= 0, x, a * (np.exp(x) - 1))),
    "kSELU": (1.67, 1.05, lambda x, a, b: b * np.where(x > 0, x, a * (np.exp(x) - 1))),
    "kSOFTSIGN": (None, None, lambda x, a, b: x / (1 + np.abs(x))),
    "kSOFTPLUS": (1.5, 0.5, lambda x, a, b: a * np.log(np.exp(b * x) + 1)),
    "kCLIP": (-0.5, 0.5, lambda x, a, b: np.clip(x, a, b)),
    "kHARD_SIGMOID": (0.2, 0.5, lambda x, a, b: np.clip(a * x + b, 0, 1)),
    "kSCALED_TANH": (1.5, 0.5, lambda x, a, b: a * np.tanh(b * x)),
    "kTHRESHOLDED_RELU": (0.3, None, lambda x, a, b: np.where(x > a, x, 0)),
    "kGELU_ERF": (None, None, lambda x, a, b: 0.5 * x * (1 + _erf(x / np.sqrt(2)))),
    "kGELU_TANH": (None, None, lambda x, a, b: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))),
}


@pytest.mark.parametrize("kind", sorted(ACT))
def test_activation(kind):
    alpha, beta, fn = ACT[kind]
    prog = unary_prog(lambda x: d.ActivationOp(x, kind, alpha=alpha, beta=beta))
    a = f32(2, 3)
    check(prog, [a], [fn(a.astype(np.float64), alpha, beta).astype(np.float32)], rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------------------------------- linear algebra


@pytest.mark.parametrize("op0,op1,sa,sb", [
    ("kNONE", "kNONE", (2, 3, 4), (2, 4, 5)), ("kNONE", "kNONE", (2, 3, 4), (1, 4, 5)),
    ("kTRANSPOSE", "kNONE", (4, 3), (4, 5)), ("kNONE", "kTRANSPOSE", (3, 4), (5, 4)),
    ("kVECTOR", "kNONE", (4,), (4, 5)), ("kNONE", "kVECTOR", (3, 4), (4,)), ("kVECTOR", "kVECTOR", (4,), (4,)),
])
def test_matrix_multiply(op0, op1, sa, sb):
    b = ProgramBuilder()
    x, y = b.input("x", sa), b.input("y", sb)
    prog = b.program(b.add(d.MatrixMultiplyOp(x, y, op0, op1)))
    a, c = f32(*sa), f32(*sb)
    aa = np.swapaxes(a, -1, -2) if op0 == "kTRANSPOSE" else a
    cc = np.swapaxes(c, -1, -2) if op1 == "kTRANSPOSE" else c
    check(prog, [a, c], [np.matmul(aa, cc).astype(np.float32)], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,fn", [("kSUM", np.sum), ("kPROD", np.prod), ("kMAX", np.max), ("kMIN", np.min),
                                     ("kAVG", np.mean)])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce(kind, fn, keep):
    prog = unary_prog(lambda x: d.ReduceOp(x, kind, [0, 2], keep_dims=keep), (2, 3, 4))
    a = f32(2, 3, 4, lo=0.5, hi=1.5)
    check(prog, [a], [fn(a, axis=(0, 2), keepdims=keep).astype(np.float32)], rtol=1e-5)


def test_reduce_int_avg_truncates():
    prog = unary_prog(lambda x: d.ReduceOp(x, "kAVG", [1]), (2, 3), "i32")
    a = np.array([[1, 2, 4], [-1, -2, -4]], np.int32)
    check(prog, [a], [np.array([2, -2], np.int32)])


def test_softmax():
    prog = unary_prog(lambda x: d.SoftmaxOp(x, 1), (2, 5))
    a = f32(2, 5)
    e = np.exp(a - a.max(1, keepdims=True))
    check(prog, [a], [(e / e.sum(1, keepdims=True)).astype(np.float32)], rtol=1e-5)


# ---------------------------------------------------------------------------------------------- data movement


def test_constant_small_and_large():
    b = ProgramBuilder()
    small = np.arange(6, dtype=np.float32).reshape(2, 3)
    large = rng.standard_normal((64, 64)).astype(np.float32)  # > STATIC_RESULT_LIMIT: a device argument
    x = b.input("x", (64, 64))
    c1 = b.const(small)
    c2 = b.const(large)
    prog = b.program(c1, b.add(d.ElementWiseOp(x, c2, "kSUM")))
    a = f32(64, 64)
    compiled = build(prog)
    assert any("large constant" in n for n in compiled.report.notes)
    outs = run_np(compiled, a)
    np.testing.assert_array_equal(outs[0], small)
    np.testing.assert_allclose(outs[1], a + large, rtol=1e-6)


def test_shape_slice_collapse_of_dynamic_input():
    b = ProgramBuilder()
    x = b.input("x", ((1, 3, 8), 4))
    s = b.add(d.ShapeOp(x))
    s0 = b.add(d.SliceOp(s, [0], [1], [1], tensor_type((1,), "i32")))
    n = b.add(d.CollapseRankOp(s0, tensor_type((), "i32")))
    prog = b.program(s, n)
    check(prog, [f32(5, 4)], [np.array([5, 4], np.int32), np.array(5, np.int32)])


@pytest.mark.parametrize("start,size,stride", [((0, 1), (2, 2), (1, 1)), ((3, 3), (2, 2), (-1, -2)),
                                               ((1, 0), (0, 4), (1, 1)), ((0, 0), (2, 2), (2, 3))])
def test_slice_static(start, size, stride):
    prog = unary_prog(lambda x: d.SliceOp(x, start, size, stride, tensor_type(size, "f32")), (4, 4))
    a = f32(4, 4)
    idx = np.ix_(*[st + np.arange(sz) * sd for st, sz, sd in zip(start, size, stride)])
    check(prog, [a], [a[idx]])


def test_slice_dynamic_operands():
    b = ProgramBuilder()
    x = b.input("x", (4, 5))
    st, sz, sd = b.const(np.array([1, 4], np.int32)), b.const(np.array([2, 3], np.int32)), b.const(
        np.array([2, -1], np.int32))
    prog = b.program(b.add(d.SliceOp(x, st, sz, sd, tensor_type((None, None), "f32"))))
    a = f32(4, 5)
    check(prog, [a], [a[1:4:2, 4:1:-1]])


@pytest.mark.parametrize("mode", ["kWRAP", "kCLAMP", "kREFLECT", "kFILL"])
@pytest.mark.parametrize("stride", [1, 2])
def test_slice_out_of_bounds_modes(mode, stride):
    b = ProgramBuilder()
    x = b.input("x", (5,))
    fill = b.const(np.array(9.0, np.float32)) if mode == "kFILL" else None
    prog = b.program(b.add(d.SliceOp(x, [-3], [6], [stride], tensor_type((6,), "f32"), mode=mode, fill=fill)))
    a = np.arange(5, dtype=np.float32)
    idx = -3 + np.arange(6) * stride
    n = 5
    if mode == "kWRAP":
        e = a[idx % n]
    elif mode == "kCLAMP":
        e = a[np.clip(idx, 0, n - 1)]
    elif mode == "kREFLECT":
        m = np.abs(idx) % (2 * (n - 1))
        e = a[np.where(m >= n, 2 * (n - 1) - m, m)]
    else:
        e = np.where((idx >= 0) & (idx < n), a[np.clip(idx, 0, n - 1)], 9.0).astype(np.float32)
    check(prog, [a], [e])


def test_slice_out_of_bounds_default_is_an_error():
    prog = unary_prog(lambda x: d.SliceOp(x, [3], [3], [1], tensor_type((3,), "f32")), (4,))
    with pytest.raises(TripyException, match="out of bounds"):
        build(prog)


def test_reshape_with_shape_operand_from_shape_arithmetic():
    b = ProgramBuilder()
    x = b.input("x", ((2, 4, 8), 6))
    s = b.add(d.ShapeOp(x))  # [n, 6]
    n = b.add(d.SliceOp(s, [0], [1], [1], tensor_type((1,), "i32")))
    two = b.const(np.array([2], np.int32))
    n2 = b.add(d.ElementWiseOp(n, two, "kPROD"))
    three = b.const(np.array([3], np.int32))
    shape = b.add(d.ConcatenationOp([n2, three], 0))
    prog = b.program(b.add(d.ReshapeOp(x, tensor_type((None, 3), "f32"), shape=shape)))
    a = f32(4, 6)
    check(prog, [a], [a.reshape(8, 3)])


def test_reshape_static_and_transpose():
    b = ProgramBuilder()
    x = b.input("x", (2, 3, 4))
    r = b.add(d.ReshapeOp(x, tensor_type((6, 4), "f32")))
    t = b.add(d.TransposeOp(x, [2, 0, 1]))
    prog = b.program(r, t)
    a = f32(2, 3, 4)
    check(prog, [a], [a.reshape(6, 4), a.transpose(2, 0, 1)])


def test_broadcast():
    b = ProgramBuilder()
    x = b.input("x", (3, 1))
    shape = b.const(np.array([2, 3, 4], np.int32))
    y = b.add(d.BroadcastOp(x, [1, 2], tensor_type((None, None, None), "f32"), shape=shape))
    z = b.add(d.BroadcastOp(x, [1, 0], tensor_type((4, 3), "f32")))  # non-increasing dims transpose
    prog = b.program(y, z)
    a = f32(3, 1)
    check(prog, [a], [np.broadcast_to(a, (2, 3, 4)), np.broadcast_to(a.T, (4, 3))])


def test_concatenation():
    b = ProgramBuilder()
    x, y = b.input("x", (2, 3)), b.input("y", (2, 1))
    prog = b.program(b.add(d.ConcatenationOp([x, y, x], 1)))
    a, c = f32(2, 3), f32(2, 1)
    check(prog, [a, c], [np.concatenate([a, c, a], 1)])


def test_gather_default_with_negative_and_out_of_bounds():
    b = ProgramBuilder()
    x, i = b.input("x", (4, 3)), b.input("i", (2, 2), "i32")
    prog = b.program(b.add(d.GatherOp(x, i, 0)), b.add(d.GatherOp(x, i, 1)))
    a = f32(4, 3)
    idx = np.array([[0, -1], [2, 7]], np.int32)

    def ref(axis):
        n = a.shape[axis]
        j = np.where(idx < 0, idx + n, idx)
        ok = (j >= 0) & (j < n)
        out = np.take(a, np.clip(j, 0, n - 1), axis=axis)
        mask = ok.reshape((1,) * axis + ok.shape + (1,) * (a.ndim - axis - 1))
        return np.where(mask, out, 0).astype(np.float32)

    check(prog, [a, idx], [ref(0), ref(1)])


def test_gather_one_broadcast_dim():
    b = ProgramBuilder()
    x, i = b.input("x", (2, 4, 3)), b.input("i", (2, 5), "i32")
    prog = b.program(b.add(d.GatherOp(x, i, 1, num_broadcast_dims=1)))
    a = f32(2, 4, 3)
    idx = rng.integers(0, 4, (2, 5)).astype(np.int32)
    check(prog, [a, idx], [np.stack([a[k][idx[k]] for k in range(2)])])


def test_select_and_cast_and_identity():
    b = ProgramBuilder()
    c, x, y = b.input("c", (2, 3), "i1"), b.input("x", (2, 3)), b.input("y", (1, 3))
    s = b.add(d.SelectOp(c, x, y))
    ci = b.add(d.CastOp(x, "i32"))
    cb = b.add(d.CastOp(x, "i1"))
    cf = b.add(d.IdentityOp(c, tensor_type((2, 3), "f16")))
    prog = b.program(s, ci, cb, cf)
    cond = rng.integers(0, 2, (2, 3)).astype(bool)
    a, e = f32(2, 3), f32(1, 3)
    a[0, 0] = 0.0
    check(prog, [cond, a, e], [np.where(cond, a, e), a.astype(np.int32), a != 0, cond.astype(np.float16)])


def test_collapse_and_expand_rank():
    b = ProgramBuilder()
    x = b.input("x", (1, 3, 1, 4))
    c = b.add(d.CollapseRankOp(x, tensor_type((3, 4), "f32")))
    e = b.add(d.ExpandRankOp(c, tensor_type((3, 1, 4, 1), "f32")))
    prog = b.program(c, e)
    a = f32(1, 3, 1, 4)
    check(prog, [a], [a.reshape(3, 4), a.reshape(3, 1, 4, 1)])


def test_shuffle():
    b = ProgramBuilder()
    x = b.input("x", (2, 3, 4))
    y = b.add(d.ShuffleOp(x, tensor_type((4, 6), "f32"), [2, 0, 1], [0, 1], reshape=[4, 6]))
    z = b.add(d.ShuffleOp(x, tensor_type((12, 2), "f32"), [0, 1, 2], [1, 0], reshape=[2, 12]))
    prog = b.program(y, z)
    a = f32(2, 3, 4)
    check(prog, [a], [a.transpose(2, 0, 1).reshape(4, 6), a.reshape(2, 12).T])


def test_linspace_arange_and_iota():
    b = ProgramBuilder()
    n = b.input("n", DimensionInputInfo((1, 5, 10)))
    n1 = b.add(d.ExpandRankOp(n, tensor_type((1,), "i32")))
    start = b.const(np.array(3, np.int32))
    step = b.const(np.array([2], np.int32))
    ar = b.add(d.LinspaceOp(tensor_type((None,), "i32"), start, step, shape=n1))
    fstart = b.const(np.array(0.5, np.float32))
    fstep = b.const(np.array([1.0, 0.25], np.float32))
    shp = b.const(np.array([2, 3], np.int32))
    io = b.add(d.LinspaceOp(tensor_type((None, None), "f32"), fstart, fstep, shape=shp))
    st = b.add(d.LinspaceOp(tensor_type((4,), "f32"), 1.0, 2.0))
    prog = b.program(ar, io, st)
    c = build(prog)
    out = [np.asarray(o) for o in c.run([np.array(7, np.int32)])]
    np.testing.assert_array_equal(out[0], 3 + 2 * np.arange(7))
    np.testing.assert_allclose(out[1], 0.5 + np.arange(2)[:, None] + 0.25 * np.arange(3)[None, :])
    np.testing.assert_allclose(out[2], 1.0 + 2.0 * np.arange(4))


# ---------------------------------------------------------------------------------------------- NN layers


def _norm_ref(a, axes, scale, bias, eps=1e-5):
    m = a.mean(axis=axes, keepdims=True)
    v = ((a - m) ** 2).mean(axis=axes, keepdims=True)
    return ((a - m) / np.sqrt(v + eps) * scale + bias).astype(np.float32)


def test_normalization_layer_norm_and_instance_norm_and_group_norm():
    b = ProgramBuilder()
    x = b.input("x", (2, 4, 6))
    s, bb = b.input("s", (1, 1, 6)), b.input("b", (1, 1, 6))
    ln = b.add(d.NormalizationOp(x, s, bb, [2], eps=1e-5))
    y = b.input("y", (2, 4, 3, 3))
    si, bi = b.input("si", (1, 4, 1, 1)), b.input("bi", (1, 4, 1, 1))
    inn = b.add(d.NormalizationOp(y, si, bi, [2, 3], num_groups=4))
    gn = b.add(d.NormalizationOp(y, si, bi, [2, 3], num_groups=2))
    prog = b.program(ln, inn, gn)
    a, sc, bs = f32(2, 4, 6), f32(1, 1, 6), f32(1, 1, 6)
    a2, sc2, bs2 = f32(2, 4, 3, 3), f32(1, 4, 1, 1), f32(1, 4, 1, 1)
    g = a2.reshape(2, 2, 2, 3, 3)
    gm = g.mean(axis=(2, 3, 4), keepdims=True)
    gv = ((g - gm) ** 2).mean(axis=(2, 3, 4), keepdims=True)
    gref = (((g - gm) / np.sqrt(gv + 1e-5)).reshape(a2.shape) * sc2 + bs2).astype(np.float32)
    check(prog, [a, sc, bs, a2, sc2, bs2],
          [_norm_ref(a, (2,), sc, bs), _norm_ref(a2, (2, 3), sc2, bs2), gref], rtol=1e-4, atol=1e-5)


def _conv_ref(x, w, stride, pre, post, dil, groups):
    n, c, h, wd = x.shape
    k, cg, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (pre[0], post[0]), (pre[1], post[1])])
    oh = (xp.shape[2] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (xp.shape[3] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, k, oh, ow), np.float64)
    kpg = k // groups
    for o in range(k):
        gi = o // kpg
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, gi * cg:(gi + 1) * cg, i * stride[0]:i * stride[0] + dil[0] * (kh - 1) + 1:dil[0],
                           j * stride[1]:j * stride[1] + dil[1] * (kw - 1) + 1:dil[1]]
                out[:, o, i, j] = (patch * w[o]).sum(axis=(1, 2, 3))
    return out


def test_convolution():
    x, w, bias = f32(1, 4, 6, 5), f32(6, 2, 3, 2), f32(6)
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    wv = b.input("w", w.shape)
    ref = _conv_ref(x, w, (2, 1), (1, 0), (1, 1), (1, 2), 2) + bias.reshape(1, -1, 1, 1)
    y = b.add(d.ConvolutionOp(xv, wv, tensor_type(ref.shape, "f32"), [2, 1], [1, 0], [1, 1], bias=bias,
                              num_groups=2, dilation=[1, 2]))
    prog = b.program(y)
    check(prog, [x, w], [ref.astype(np.float32)], rtol=1e-4, atol=1e-5)


def _deconv_ref(x, w, stride, pre, post, groups):
    n, c, h, wd = x.shape
    _, kg, kh, kw = w.shape
    full = np.zeros((n, kg * groups, (h - 1) * stride[0] + kh, (wd - 1) * stride[1] + kw))
    cpg = c // groups
    for ci in range(c):
        gi = ci // cpg
        for i in range(h):
            for j in range(wd):
                full[:, gi * kg:(gi + 1) * kg, i * stride[0]:i * stride[0] + kh, j * stride[1]:j * stride[1] + kw] += (
                    x[:, ci, i, j][:, None, None, None] * w[ci][None])
    return full[:, :, pre[0]:full.shape[2] - post[0], pre[1]:full.shape[3] - post[1]]


def test_deconvolution():
    x, w = f32(1, 4, 3, 4), f32(4, 3, 3, 2)
    ref = _deconv_ref(x, w, (2, 1), (1, 0), (0, 1), 2)
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    y = b.add(d.DeconvolutionOp(xv, w, tensor_type(ref.shape, "f32"), [2, 1], [1, 0], [0, 1], num_groups=2,
                                dilation=[1, 1]))
    check(b.program(y), [x], [ref.astype(np.float32)], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["kMAX", "kAVERAGE", "kAVERAGE_incl"])
def test_pooling(kind):
    x = f32(1, 2, 5, 5)
    exclude = kind != "kAVERAGE_incl"
    ptype = "kMAX" if kind == "kMAX" else "kAVERAGE"
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    y = b.add(d.PoolingOp(xv, ptype, [3, 3], [2, 2], [1, 1], [1, 1],
                          average_count_excludes_padding=None if ptype == "kMAX" else exclude))
    pad = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)],
                 constant_values=-np.inf if ptype == "kMAX" else 0)
    ones = np.pad(np.ones_like(x, np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    out = np.zeros((1, 2, 3, 3))
    for i in range(3):
        for j in range(3):
            win = pad[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3]
            if ptype == "kMAX":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                cnt = ones[:, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].sum(axis=(2, 3)) if exclude else 9
                out[:, :, i, j] = win.sum(axis=(2, 3)) / cnt
    check(b.program(y), [x], [out.astype(np.float32)], rtol=1e-5)


def test_resize_nearest_asymmetric_floor():
    x = f32(1, 1, 3, 4)
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    y = b.add(d.ResizeNearestOp(xv, tensor_type((1, 1, 6, 6), "f32")))
    ih = np.floor(np.arange(6) * 3 / 6).astype(int)
    iw = np.floor(np.arange(6) * 4 / 6).astype(int)
    check(b.program(y), [x], [x[:, :, ih][:, :, :, iw]])


def _lin_1d(a, axis, n_out, align):
    n_in = a.shape[axis]
    y = np.arange(n_out, dtype=np.float64)
    c = y * (n_in - 1) / (n_out - 1) if align else (y + 0.5) * n_in / n_out - 0.5
    c = np.clip(c, 0, n_in - 1)
    i0 = np.floor(c).astype(int)
    i1 = np.minimum(i0 + 1, n_in - 1)
    f = (c - i0).reshape([-1 if k == axis else 1 for k in range(a.ndim)])
    return np.take(a, i0, axis) * (1 - f) + np.take(a, i1, axis) * f


@pytest.mark.parametrize("coord", ["kALIGN_CORNERS", "kHALF_PIXEL"])
def test_resize_linear(coord):
    x = f32(1, 2, 3, 4)
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    shp = b.const(np.array([1, 2, 5, 7], np.int32))
    y = b.add(d.ResizeLinearOp(xv, tensor_type((None, None, None, None), "f32"), output_shape=shp,
                               coordinate_transformation=coord))
    ref = _lin_1d(_lin_1d(x.astype(np.float64), 2, 5, coord == "kALIGN_CORNERS"), 3, 7, coord == "kALIGN_CORNERS")
    check(b.program(y), [x], [ref.astype(np.float32)], rtol=1e-5, atol=1e-6)


def _cubic_1d(a, axis, n_out, coeff, align):
    n_in = a.shape[axis]
    y = np.arange(n_out, dtype=np.float64)
    c = y * (n_in - 1) / (n_out - 1) if align else (y + 0.5) * n_in / n_out - 0.5
    i0 = np.floor(c).astype(int)

    def w(s):
        s = np.abs(s)
        return np.where(s <= 1, ((coeff + 2) * s - (coeff + 3)) * s * s + 1,
                        np.where(s < 2, ((coeff * s - 5 * coeff) * s + 8 * coeff) * s - 4 * coeff, 0))

    out = 0
    for k in range(-1, 3):
        idx = np.clip(i0 + k, 0, n_in - 1)
        wk = w(c - (i0 + k)).reshape([-1 if j == axis else 1 for j in range(a.ndim)])
        out = out + np.take(a, idx, axis) * wk
    return out


@pytest.mark.parametrize("coord,coeff", [("kHALF_PIXEL", -0.75), ("kALIGN_CORNERS", -0.5)])
def test_resize_cubic(coord, coeff):
    x = f32(1, 2, 3, 4)
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    y = b.add(d.ResizeCubicOp(xv, tensor_type((1, 2, 6, 7), "f32"), coordinate_transformation=coord,
                              cubic_coeff=coeff))
    align = coord == "kALIGN_CORNERS"
    ref = _cubic_1d(_cubic_1d(x.astype(np.float64), 2, 6, coeff, align), 3, 7, coeff, align)
    check(b.program(y), [x], [ref.astype(np.float32)], rtol=1e-5, atol=1e-5)
    if coeff == -0.5:  # Keys' a=-0.5 reproduces a linear ramp exactly away from the borders
        ramp = np.tile(np.arange(8, dtype=np.float32), (1, 1, 2, 1))
        b = ProgramBuilder()
        xv = b.input("x", ramp.shape)
        y = b.add(d.ResizeCubicOp(xv, tensor_type((1, 1, 2, 16), "f32"), coordinate_transformation=coord,
                                  cubic_coeff=coeff))
        out = run_np(build(b.program(y)), ramp)[0]
        np.testing.assert_allclose(out[0, 0, 0, 3:-3], (np.arange(16) * 7 / 15)[3:-3], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["kMAX", "kMIN"])
@pytest.mark.parametrize("elem", ["f32", "i32"])
def test_top_k(kind, elem):
    x = rng.permutation(24).reshape(2, 12).astype(np.float32 if elem == "f32" else np.int32)
    b = ProgramBuilder()
    xv = b.input("x", x.shape, elem)
    v, i = b.add(d.TopKOp(xv, kind, 3, 1))
    order = np.argsort(-x if kind == "kMAX" else x, axis=1, kind="stable")[:, :3]
    check(b.program(v, i), [x], [np.take_along_axis(x, order, 1), order.astype(np.int32)])


def test_quantize_dequantize_per_tensor_and_per_channel():
    x = f32(3, 4, lo=-3, hi=3)
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    s = b.const(np.array(0.02, np.float32))
    sc = b.const(np.array([0.01, 0.02, 0.03, 0.04], np.float32))
    q = b.add(d.QuantizeOp(xv, s, "i8"))
    dq = b.add(d.DequantizeOp(q, s, "f32"))
    qc = b.add(d.QuantizeOp(xv, sc, "i8", axis=1))
    prog = b.program(q, dq, qc)
    q_ref = np.clip(np.round(x / np.float32(0.02)), -128, 127).astype(np.int8)
    qc_ref = np.clip(np.round(x / np.array([0.01, 0.02, 0.03, 0.04], np.float32)), -128, 127).astype(np.int8)
    check(prog, [x], [q_ref, (q_ref.astype(np.float32) * np.float32(0.02)), qc_ref])


def test_quantize_fp8():
    x = f32(2, 4, lo=-500, hi=500)
    b = ProgramBuilder()
    xv = b.input("x", x.shape)
    s = b.const(np.array(1.0, np.float32))
    prog = b.program(b.add(d.QuantizeOp(xv, s, "f8E4M3FN")))
    out = run_np(build(prog), x)[0]
    assert out.dtype == ml_dtypes.float8_e4m3fn
    np.testing.assert_array_equal(out, np.clip(x, -448, 448).astype(ml_dtypes.float8_e4m3fn))


def test_opaque_plugin_needs_tensorrt():
    b = ProgramBuilder()
    xv = b.input("x", (2,))
    y = b.add(d.OpaquePluginOp([xv], [tensor_type((2,), "f32")], "MyPlugin"))
    with pytest.raises(TripyException, match="plugins need TensorRT"):
        build(b.program(y))


def test_every_table_entry_is_covered_and_matches_the_dialect():
    from tripy_lab.engine.xla.ops import TABLE

    ops = set(d.TENSORRT_OPS) - {"tensorrt.yield"}
    assert ops <= set(TABLE), sorted(ops - set(TABLE))


def test_shape_operand_depending_on_data_is_a_clear_error():
    b = ProgramBuilder()
    x = b.input("x", (4,))
    shp = b.input("s", (1,), "i32")  # tensor data, not a host scalar
    prog = b.program(b.add(d.ReshapeOp(x, tensor_type((None,), "f32"), shape=shp)))
    with pytest.raises(TripyException, match="must be known when the program is traced"):
        build(prog)


def test_float16_bfloat16_elementwise():
    for elem, npdt in (("f16", np.float16), ("bf16", ml_dtypes.bfloat16)):
        b = ProgramBuilder()
        x, y = b.input("x", (4,), elem), b.input("y", (4,), elem)
        prog = b.program(b.add(d.ElementWiseOp(x, y, "kSUM")))
        a, c = f32(4).astype(npdt), f32(4).astype(npdt)
        out = run_np(build(prog), a, c)[0]
        assert out.dtype == npdt
        np.testing.assert_allclose(out.astype(np.float32), (a + c).astype(np.float32), rtol=1e-2)


def test_int64_programs_run_with_x64():
    b = ProgramBuilder()
    x = b.input("x", (3,), "i64")
    big = b.const(np.array([2**40, 1, -(2**40)], np.int64))
    prog = b.program(b.add(d.ElementWiseOp(x, big, "kSUM")))
    a = np.array([1, 2, 3], np.int64)
    c = build(prog)
    out = run_np(c, a)[0]
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, a + np.array([2**40, 1, -(2**40)]))
    np.testing.assert_array_equal(run_np(c, a)[0], out)  # cached path too


# ---------------------------------------------------------------------------------------------- static (numpy) path

STATIC_CASES = {
    "element_wise": lambda b, x: b.add(d.ElementWiseOp(x, x, "kPROD")),
    "int_div": lambda b, x: b.add(d.ElementWiseOp(b.add(d.CastOp(x, "i32")), b.const(np.array([[3, -2, 5]],
                                                                                              np.int32)), "kDIV")),
    "unary": lambda b, x: b.add(d.UnaryOp(x, "kERF")),
    "activation": lambda b, x: b.add(d.ActivationOp(x, "kGELU_ERF")),
    "matmul": lambda b, x: b.add(d.MatrixMultiplyOp(x, x, "kNONE", "kTRANSPOSE")),
    "reduce": lambda b, x: b.add(d.ReduceOp(x, "kAVG", [1], keep_dims=True)),
    "softmax": lambda b, x: b.add(d.SoftmaxOp(x, 0)),
    "slice_reflect": lambda b, x: b.add(d.SliceOp(x, [-1, -2], [4, 7], [1, 1], tensor_type((4, 7), "f32"),
                                                  mode="kREFLECT")),
    "slice_fill": lambda b, x: b.add(d.SliceOp(x, [-1, 1], [3, 3], [1, 1], tensor_type((3, 3), "f32"), mode="kFILL",
                                               fill=b.const(np.array(7.0, np.float32)))),
    "slice_fill_strided": lambda b, x: b.add(d.SliceOp(x, [-1, 2], [2, 3], [2, -1], tensor_type((2, 3), "f32"),
                                                       mode="kFILL", fill=b.const(np.array(7.0, np.float32)))),
    "gather": lambda b, x: b.add(d.GatherOp(x, b.const(np.array([2, -1, 5], np.int32)), 1)),
    "select": lambda b, x: b.add(d.SelectOp(b.add(d.ElementWiseOp(x, b.const(np.zeros((1, 1), np.float32)),
                                                                  "kGREATER")), x,
                                            b.const(np.full((1, 3), -1.0, np.float32)))),
    "concat_transpose": lambda b, x: b.add(d.TransposeOp(b.add(d.ConcatenationOp([x, x], 0)), [1, 0])),
    "broadcast": lambda b, x: b.add(d.BroadcastOp(x, [1, 2], tensor_type((2, 2, 3), "f32"))),
    "collapse_expand": lambda b, x: b.add(d.CollapseRankOp(b.add(d.ExpandRankOp(x, tensor_type((2, 1, 3), "f32"))),
                                                           tensor_type((2, 3), "f32"))),
    "shuffle": lambda b, x: b.add(d.ShuffleOp(x, tensor_type((3, 2), "f32"), [1, 0], [0, 1], reshape=[0, -1])),
    "shape_cast": lambda b, x: b.add(d.CastOp(b.add(d.ShapeOp(x)), "f32")),
}


@pytest.mark.parametrize("case", sorted(STATIC_CASES))
def test_static_numpy_path_matches_the_traced_path(case):
    """The same op on a constant (evaluated in numpy while tracing) and on an input (traced by jax)."""
    value = np.array([[0.5, -1.25, 2.0], [-0.75, 1.5, 3.0]], np.float32)
    outs = []
    for as_const in (True, False):
        b = ProgramBuilder()
        x_in = b.input("x", (2, 3))
        x = b.const(value) if as_const else x_in
        prog = b.program(STATIC_CASES[case](b, x))
        outs.append(run_np(build(prog), value)[0])
    assert outs[0].dtype == outs[1].dtype and outs[0].shape == outs[1].shape
    np.testing.assert_allclose(outs[0].astype(np.float64), outs[1].astype(np.float64), rtol=1e-5, atol=1e-6)


def test_large_static_results_are_left_to_xla():
    """A broadcast of a scalar constant to a big shape is not materialised in numpy at trace time."""
    b = ProgramBuilder()
    x = b.input("x", (64, 64))
    one = b.const(np.ones((1, 1), np.float32))
    big = b.add(d.BroadcastOp(one, [0, 1], tensor_type((64, 64), "f32")))
    prog = b.program(b.add(d.ElementWiseOp(x, big, "kSUM")))
    c = build(prog)
    text = c.report.extra_stages["stablehlo"]
    assert "broadcast_in_dim" in text and len(text) < 2000, text[:500]
    np.testing.assert_allclose(run_np(c, np.zeros((64, 64), np.float32))[0], 1.0)


def test_float16_sums_and_softmax_accumulate_in_float32():
    x = (np.random.default_rng(3).uniform(0, 1, (2, 4096))).astype(np.float16)
    b = ProgramBuilder()
    xv = b.input("x", x.shape, "f16")
    prog = b.program(b.add(d.ReduceOp(xv, "kSUM", [1])), b.add(d.SoftmaxOp(xv, 1)))
    s, sm = run_np(build(prog), x)
    assert s.dtype == np.float16 and sm.dtype == np.float16
    ref = x.astype(np.float32).sum(1)
    np.testing.assert_allclose(s.astype(np.float32), ref, rtol=1e-3)
    e = np.exp(x.astype(np.float32) - x.astype(np.float32).max(1, keepdims=True))
    np.testing.assert_allclose(sm.astype(np.float32), e / e.sum(1, keepdims=True), rtol=1e-2, atol=1e-6)
