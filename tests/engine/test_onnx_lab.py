"""The lab with the onnxruntime engine (issue 11): offered in the dropdown, an opt-only bounds edit reuses
the one session, and the Engine tab says which engines cover the whole profile."""

import pytest

pytest.importorskip("onnxruntime")

from tripy_lab.lab import spec as S  # noqa: E402
from tripy_lab.lab.bounds_model import BoundsModel  # noqa: E402
from tripy_lab.lab.session import Session  # noqa: E402
from tripy_lab.lab.views import tabs  # noqa: E402
from tripy_lab.lab.widget import ui  # noqa: E402


def add(a, b):
    return a * 2.0 + b


def make(engine):
    parsed = S.parse_line("a=f32[1:2:8,4] b=f32[1:2:8,4]")
    model = BoundsModel.from_values(list(parsed.params), {n: p.spec for n, p in parsed.params.items()})
    return Session(add, model, exe_name="exe", namespace={}, engine=engine, debounce_seconds=0)


def test_dropdown_offers_onnxruntime():
    assert "onnxruntime" in ui.ENGINES


def test_opt_edit_keeps_the_onnxruntime_session_but_a_new_max_rebuilds():
    s = make("onnxruntime")
    s.refresh()
    first = s.built
    s.model.set_opt("a", 0, 5)
    s.model.set_opt("b", 0, 5)
    s.schedule()
    assert s.counts["trace"] == 2 and s.counts["build"] == 1  # retraced, same session
    assert s.built is first
    s.model.set_range("a", 0, 1, 9)
    s.model.set_range("b", 0, 1, 9)
    s.schedule()
    assert s.counts["build"] == 2 and s.built is not first  # the profile changed


def test_xla_rebuilds_on_an_opt_edit():
    pytest.importorskip("jax")
    s = make("xla")
    s.refresh()
    s.model.set_opt("a", 0, 5)
    s.model.set_opt("b", 0, 5)
    s.schedule()
    assert s.counts["build"] == 2


def test_engine_tab_says_how_much_of_the_profile_a_build_covers():
    s = make("onnxruntime")
    s.refresh()
    page = tabs.EngineView.of(s.built).html()
    assert "one build covers the whole profile" in page
    assert "trtexec --onnx=model.onnx --minShapes=a:1x4,b:1x4 --optShapes=a:2x4,b:2x4" in page
    pytest.importorskip("jax")
    x = make("xla")
    x.refresh()
    text = tabs.profile_text(x.built)
    assert text.startswith("specializes per shape") and "a=2x4, b=2x4" in text
