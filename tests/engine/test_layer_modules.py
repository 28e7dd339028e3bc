"""Engines' layer tables name the module of their ops (issue 25): ``LayerRecord.module`` comes from the trace
ops each layer came from, on every engine, and the Engine tab's table shows it."""

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab.engine.base import LayerRecord, layer_module, with_modules


class Mlp(tp.Module):
    def __init__(self, d):
        super().__init__()
        self.fc1 = tp.Linear(d, 4 * d)
        self.fc2 = tp.Linear(4 * d, d)

    def forward(self, x):
        return self.fc2(tp.relu(self.fc1(x)))


class Net(tp.Module):
    def __init__(self, d=8):
        super().__init__()
        self.blocks = [Mlp(d), Mlp(d)]
        self.ln = tp.LayerNorm(d)

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return tp.softmax(self.ln(x), dim=-1)


def _net():
    net = Net()
    rng = np.random.default_rng(0)
    net.load_state_dict({k: tp.Tensor(rng.standard_normal(v.shape).astype(np.float32))
                         for k, v in net.state_dict().items()})
    return net


@pytest.mark.parametrize("engine", ["reference", "xla", "onnxruntime"])
def test_layer_records_name_their_module(engine):
    if engine == "onnxruntime":
        pytest.importorskip("onnxruntime")
    net = _net()
    exe = tp.compile(net, args=[tp.InputInfo(((1, 2, 4), 8), tp.float32)], engine=engine)
    layers = exe.stages["built"].layers
    modules = {ly.module for ly in layers}
    # every block's Linears have layers of their own or fused into their block; none is at the top level
    for i in range(2):
        assert any(m == f"blocks.{i}" or m.startswith(f"blocks.{i}.") for m in modules), modules
    assert any("ln" in m.split(" + ") for m in modules), modules  # alone, or fused with the block before it
    matmuls = [ly for ly in layers if ly.source_ops and all(
        exe.stages["lowered"].program.origins[n].module.endswith(("fc1", "fc2")) for n in ly.source_ops)]
    assert matmuls and all(ly.module.startswith("blocks.") for ly in matmuls)
    x = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    ref = tp.compile(net, args=[tp.InputInfo(((1, 2, 4), 8), tp.float32)], engine="reference")
    np.testing.assert_allclose(np.asarray(exe(tp.Tensor(x))), np.asarray(ref(tp.Tensor(x))), rtol=1e-4,
                               atol=1e-5)
    assert layers[0].as_dict()["module"] == layers[0].module


def test_layer_module_is_the_innermost_module_holding_every_op():
    assert layer_module([]) == ""
    assert layer_module(["h.3.attn.c_attn", "h.3.attn.c_attn"]) == "h.3.attn.c_attn"
    assert layer_module(["h.3.attn.c_attn", "h.3.attn.c_proj"]) == "h.3.attn"
    assert layer_module(["h.3.attn", "h.3.attn.c_proj"]) == "h.3.attn"
    assert layer_module(["h.1.mlp", "h.10.attn"]) == "h"  # a fusion across blocks: their list
    assert layer_module(["ab.c", "abc.d"]) == "ab.c + abc.d"  # by path parts, not characters
    assert layer_module(["", "ln_f"]) == "ln_f"
    assert layer_module(["a", "b", "c", "d"]) == "a + b + c + …"


def test_with_modules_reads_the_origins():
    from tripy_lab.mlir.program import OpOrigin

    origins = {"%t1": OpOrigin("%t1", "", None, "h.0.mlp"), "%t2": OpOrigin("%t2", "", None, "h.0.attn")}
    rows = [LayerRecord("a", "k", ("%t1", "%t2"), (), (), ()), LayerRecord("b", "k", ("%t9",), (), (), ())]
    assert [ly.module for ly in with_modules(rows, origins)] == ["h.0", ""]


def test_engine_tab_shows_the_module_column():
    pytest.importorskip("pandas")
    from tripy_lab.lab import tabs

    exe = tp.compile(_net(), args=[tp.InputInfo((2, 8), tp.float32)], engine="reference")
    view = tabs.EngineView.of(exe.stages["built"])
    assert "module" in list(view.layers.columns)
    assert "blocks.1.fc2" in set(view.layers["module"])
    assert "blocks.1.fc2" in view.html()
