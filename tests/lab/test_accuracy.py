"""Per-op accuracy (issue 28): planted faults, each found at the right user line, on reference, xla and
onnxruntime."""

import inspect
import subprocess
import sys

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.core.errors import TripyException
from tripy_lab.lab.accuracy_report import accuracy, compare
from tripy_lab.lab.accuracy_sweeps import accuracy_sweep
from tripy_lab.pipeline import Lowered, mark, trace
from tripy_lab.pipeline.variants import variant

ENGINES = ["reference", "xla", "onnxruntime"]


def _line(func, text: str) -> str:
    """"test_accuracy.py:N" of the line of ``func`` containing ``text``."""
    lines, start = inspect.getsourcelines(func)
    n = next(start + k for k, line in enumerate(lines) if text in line)
    return f"test_accuracy.py:{n}"


def _build(func, args, engine):
    if engine == "xla":
        pytest.importorskip("jax")
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    return trace(func, args=args).lower().build(engine=engine, shapes="opt").executable()


def naive_softmax(x):
    e = tp.exp(x)  # no max subtraction: overflows in fp16
    s = tp.sum(e, dim=-1, keepdim=True)
    return e / s


@pytest.mark.parametrize("engine", ENGINES)
def test_fp16_softmax_without_max_subtraction_overflows_at_exp(engine):
    exe = _build(naive_softmax, [tp.InputInfo((2, 8), tp.float16)], engine)
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float16)
    x[1, 5] = 12.0  # exp(12) = 162755 > 65504
    report = accuracy(exe, x)
    first = report.first_divergent
    assert first is not None and first.op == "unary <kEXP>" and first.dtype == "float16"
    assert first.user_line == _line(naive_softmax, "tp.exp(x)") and first.call == "exp" and first.module == ""
    assert first.max_abs == np.inf and first.outside == 1 and first.size == 16
    assert first.mlir_line and "kEXP" in exe.stages["lowered"].as_text().splitlines()[first.mlir_line - 1]
    # downstream ops are off too, but they read an op that is off: not "first"
    assert [e.op for e in report.ops if not e.within][1:] == ["reduce <kSUM>", "element_wise <kDIV>"]
    table = report.table()
    assert list(table["outside"]) == [e.outside for e in report.ops] and table["first"].iloc[0]
    assert report.by_trace_op()[first.trace_op] == np.inf and first.tol_ratio == np.inf
    # without the overflow every op is within the fp16 tolerance of the float64 run
    ok = accuracy(exe, np.clip(x, -4, 4))
    assert ok.first_divergent is None and all(e.within for e in ok.ops) and max(e.max_rel for e in ok.ops) > 0


def scaled_sum(x):
    h = x * 2.0
    y = h + 1.0  # the kSUM that the edit turns into kSUB
    return tp.relu(y) * 3.0


@pytest.mark.parametrize("engine", ENGINES)
def test_mlir_edit_ksum_to_ksub_found_against_the_unedited_program(engine):
    info = tp.InputInfo((3, 4), tp.float32)
    original = _build(scaled_sum, [info], "reference")
    lowered = original.stages["lowered"]
    text = lowered.as_text(elide=False)
    assert text.count("<kSUM>") == 1
    edited = Lowered.from_text(text.replace("<kSUM>", "<kSUB>"), like=lowered).build(
        engine=engine, shapes="opt").executable()
    x = np.abs(np.random.default_rng(1).standard_normal((3, 4))).astype(np.float32)
    report = accuracy(edited, x, against=original)
    first = report.first_divergent
    assert first is not None and first.op == "element_wise <kSUB>"
    assert first.user_line == _line(scaled_sum, "h + 1.0")
    assert report.ops[0].within  # the multiply before it agrees
    same = accuracy(_build(scaled_sum, [info], engine), x, against=original)
    assert same.first_divergent is None


class Mlp(tp.Module):
    def __init__(self):
        super().__init__()
        self.up = tp.Linear(16, 32)
        self.down = tp.Linear(32, 8)

    def forward(self, x):
        h = tp.relu(self.up(x))
        return self.down(h)


def _mlp():
    rng = np.random.default_rng(3)
    net = Mlp()
    for key, p in net.state_dict().items():
        net._set_by_key(key, tp.Tensor((rng.standard_normal(p.shape) * 0.3).astype(np.float32)))
    return net


@pytest.mark.parametrize("engine", ENGINES)
def test_int8_weight_only_linear_with_a_scale_off_by_10x(engine):
    net = _mlp()
    info = tp.InputInfo((4, 16), tp.float32)
    x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32)
    reference = _build(net, [info], "reference")
    good, args = variant(net, [info], quantize="int8")
    bad, _ = variant(net, [info], quantize="int8")
    bad.down.weight_scale = tp.Tensor(bad.down.weight_scale.numpy() / 10)  # the planted fault: clips
    r_good = accuracy(_build(good, args, engine), x, against=reference, rtol=0.05, atol=0.05)
    r_bad = accuracy(_build(bad, args, engine), x, against=reference, rtol=0.05, atol=0.05)
    assert r_good.first_divergent is None
    first = r_bad.first_divergent
    assert first is not None and first.user_line == _line(Mlp.forward, "self.down(h)") and first.module == "down"
    assert "down" in r_bad.by_module() and r_bad.by_module()["down"]["outside"] > 0
    assert first.max_abs > 10 * max(e.max_abs for e in r_good.ops if e.user_line == first.user_line)


def test_reproducer_script_runs_by_itself_and_shows_the_mismatch(tmp_path):
    exe = _build(naive_softmax, [tp.InputInfo((2, 8), tp.float16)], "xla")
    x = np.zeros((2, 8), np.float16)
    x[0, 2] = 13.0
    report = accuracy(exe, x)
    sub = report.subgraph()
    small, script = sub
    assert len(small.stages["lowered"].program.ops()) == 2  # the input constant and the exp
    assert np.isinf(np.asarray(small().numpy(), np.float64)[0, 2]) and np.isfinite(sub.expected[0, 2])
    path = sub.write(str(tmp_path / "repro.py"))
    proc = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "MISMATCH at (0, 2)" in proc.stdout and "got np.float64(inf)" in proc.stdout
    assert _line(naive_softmax, "tp.exp(x)") in proc.stdout


def test_sweep_compares_each_variant_with_the_fp32_reference():
    net = _mlp()
    sweep = accuracy_sweep(net, [tp.InputInfo((4, 16), tp.float32)], variants=["float16", "bfloat16", "int8"],
                           engine="reference", rtol=0.05, atol=0.05)
    table = sweep.table()
    assert list(table["variant"]) == ["float16", "bfloat16", "int8"]
    rel = dict(zip(table["variant"], table["output_max_rel"]))
    assert 0 < rel["float16"] < rel["bfloat16"]  # fewer mantissa bits, larger error
    assert all(len(sweep[v].ops) >= 4 for v in ("float16", "int8"))  # matmul, add, relu, matmul, add


def test_sweep_finds_fp16_softmax_overflow_at_exp():
    x = np.zeros((2, 8), np.float32)
    x[0, 0] = 20.0
    sweep = accuracy_sweep(naive_softmax, [tp.InputInfo((2, 8), tp.float32)], variants=["float16"],
                           inputs=[x], engine="reference")
    first = sweep["float16"].first_divergent
    assert first.op == "unary <kEXP>" and first.user_line == _line(naive_softmax, "tp.exp(x)")


def test_chunks_give_the_same_report_as_one_run():
    exe = _build(scaled_sum, [tp.InputInfo((3, 4), tp.float32)], "reference")
    x = np.ones((3, 4), np.float32)
    one = accuracy(exe, x, against="xla")
    many = accuracy(exe, x, against="xla", max_bytes=1)
    assert many.chunks == len(many.ops) > one.chunks == 1
    assert [(e.index, e.max_abs) for e in one.ops] == [(e.index, e.max_abs) for e in many.ops]


def test_marking_keeps_the_original_program():
    exe = _build(scaled_sum, [tp.InputInfo((3, 4), tp.float32)], "reference")
    program = exe.stages["lowered"].program
    before = exe.stages["lowered"].as_text()
    marked = mark.mark_program(program, mark.markable(program))
    assert len(marked.main().body.block.last_op.operands) == 1 + len(mark.markable(program))
    assert Lowered(program, 0.0, None).as_text() == before


def test_compare_counts_nan_and_inf():
    a = np.array([1.0, np.inf, np.nan, np.inf], np.float32)
    b = np.array([1.0, np.inf, 2.0, 5.0])
    assert compare(a, b, 0.0, 0.0) == (np.inf, np.inf, 2, np.inf)
    assert compare(np.array([1.0, 2.0]), np.array([1.0, 2.1]), 0.0, 0.01)[2:] == (1, pytest.approx(10.0))


def test_bad_arguments_raise_naming_the_parameter():
    exe = _build(scaled_sum, [tp.InputInfo((3, 4), tp.float32)], "reference")
    with pytest.raises(TripyException, match="against"):
        accuracy(exe, np.ones((3, 4), np.float32), against="nope")
    with pytest.raises(TripyException, match="rtol"):
        accuracy(exe, np.ones((3, 4), np.float32), rtol=-1)
    with pytest.raises(TripyException, match="exe"):
        accuracy(scaled_sum, np.ones((3, 4), np.float32))


def test_lab_functions_stay_functions_after_their_modules_load():
    import tripy_lab.lab as lab
    import tripy_lab.lab.accuracy_report  # noqa: F401
    import tripy_lab.lab.accuracy_sweeps  # noqa: F401

    assert callable(lab.accuracy) and callable(lab.accuracy_sweep)
    exe = _build(scaled_sum, [tp.InputInfo((3, 4), tp.float32)], "reference")
    assert lab.accuracy(exe, np.ones((3, 4), np.float32)).first_divergent is None


@pytest.mark.parametrize("engine", ["xla", "onnxruntime"])
def test_dynamic_shapes_are_compared_at_the_call_shape(engine):
    exe = _build(naive_softmax, [tp.InputInfo(((1, 2, 4), 8), tp.float16)], engine)
    x = np.zeros((3, 8), np.float16)
    x[2, 7] = 12.0
    report = accuracy(exe, x)
    assert report.first_divergent.op == "unary <kEXP>" and report.first_divergent.shape == (3, 8)
