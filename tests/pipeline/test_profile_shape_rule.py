"""An ill-shaped dynamic matmul is refused at compile time by one rule, the same on every engine (issue 27
item 13): the error names the op, the dims and the profile point."""

from __future__ import annotations

import numpy as np
import pytest

import tripy_lab as tp


def engines() -> list[str]:
    out = ["reference", "xla"]
    try:
        import onnxruntime  # noqa: F401

        out.append("onnxruntime")
    except ImportError:
        pass
    return out


def matmul(a, b):
    return a @ b


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("named", [True, False])
def test_d_by_1_times_d_by_d_is_refused_at_compile_time_on_every_engine(engine, named):
    if engine == "xla":
        pytest.importorskip("jax")
    d = tp.NamedDimension("d", 1, 3, 6) if named else (1, 3, 6)
    with pytest.raises(tp.TripyException) as info:
        tp.compile(matmul, args=[tp.InputInfo((d, 1), tp.float32), tp.InputInfo((d, d), tp.float32)], engine=engine)
    exc = info.value
    text = str(exc)
    assert exc.summary == f"matmul {exc.op}: the contracting dims differ at the profile point opt.", text
    assert "Profile point: opt (a=3x1, b=3x3)." in text and "last dim (1)" in text
    assert ("(d = 3)" if named else "(b[0] = 3)") in text
    assert exc.location is not None and "return a @ b" in exc.location.render()
    assert "TypeError" not in text and "dot_general" not in text


@pytest.mark.parametrize("engine", engines())
def test_well_shaped_dynamic_matmuls_still_build_and_agree(engine):
    if engine == "xla":
        pytest.importorskip("jax")
    d, k = tp.NamedDimension("d", 1, 3, 6), tp.NamedDimension("k", 2, 4, 8)

    def chain(a, b, c):
        return tp.relu(a * 2.0) @ (b + c)  # k followed through element-wise ops to the contraction

    exe = tp.compile(chain, args=[tp.InputInfo((d, k), tp.float32), tp.InputInfo((k, d), tp.float32),
                                  tp.InputInfo((k, 1), tp.float32)], engine=engine)
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((5, 7), (7, 5), (7, 1)))
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(a), tp.Tensor(b), tp.Tensor(c))),
                               np.maximum(a * 2, 0) @ (b + c), rtol=1e-5, atol=1e-5)


def test_a_contraction_that_breaks_only_after_element_wise_ops_is_found():
    k = tp.NamedDimension("k", 2, 4, 8)

    def f(a, b):
        return tp.exp(a + 1.0) @ b

    with pytest.raises(tp.TripyException, match=r"profile point min") as info:
        tp.compile(f, args=[tp.InputInfo((3, k), tp.float32), tp.InputInfo((4, 5), tp.float32)], engine="reference")
    assert "(k = 2)" in str(info.value) and "(4)" in str(info.value)
