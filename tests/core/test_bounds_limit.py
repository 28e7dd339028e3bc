"""One rule for the largest bound, checked at construction, the same on every engine (issue 27 item 10)."""

from __future__ import annotations

import numpy as np
import pytest

import tripy_lab as tp

MAX_BOUND = 2**31 - 1  # core.bounds.MAX_BOUND


@pytest.mark.parametrize("make", [
    lambda big: tp.InputInfo(((1, 2, big), 2), tp.float32),
    lambda big: tp.InputInfo((big, 2), tp.float32),
    lambda big: tp.DimensionInputInfo((1, 2, big)),
    lambda big: tp.NamedDimension("n", 1, 2, big),
])
@pytest.mark.parametrize("big", [2**31, 2**63, 2**64 + 1])
def test_a_bound_past_int32_is_refused_at_construction(make, big):
    with pytest.raises(tp.TripyException, match="2147483647") as info:
        make(big)
    assert str(big) in str(info.value)


def engines() -> list[str]:
    out = ["reference", "xla"]
    try:
        import onnxruntime  # noqa: F401

        out.append("onnxruntime")
    except ImportError:
        pass
    return out


@pytest.mark.parametrize("engine", engines())
def test_the_largest_bound_compiles_and_runs_on_every_engine(engine):
    if engine == "xla":
        pytest.importorskip("jax")
    from tripy_lab.core import bounds

    assert bounds.MAX_BOUND == MAX_BOUND
    exe = tp.compile(lambda x, s: x * 2.0 + tp.cast(s, tp.float32),
                     args=[tp.InputInfo(((1, 2, MAX_BOUND), 2), tp.float32), tp.DimensionInputInfo((1, 2, MAX_BOUND))],
                     engine=engine)
    out = exe(tp.Tensor(np.ones((3, 2), np.float32)), tp.DimensionSize(5))
    np.testing.assert_allclose(np.asarray(out), np.full((3, 2), 7.0))
