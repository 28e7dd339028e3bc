"""Scopes recorded at trace time (issue 25): every trace op carries the dotted state_dict path of the module
whose forward made it (``TraceOp.module``) and the one public frontend call it came from (``TraceOp.call``, a
CallScope shared by identity), printed in the Trace text."""

import numpy as np

import tripy_lab as tp
from tripy_lab import pipeline


class Attn(tp.Module):
    def __init__(self, d):
        super().__init__()
        self.c_attn = tp.Linear(d, d)
        self.c_proj = tp.Linear(d, d)

    def forward(self, x):
        y = tp.softmax(self.c_attn(x), dim=-1)
        return self.c_proj(y)


class Block(tp.Module):
    def __init__(self, d):
        super().__init__()
        self.ln_1 = tp.LayerNorm(d)
        self.attn = Attn(d)
        self.mlp = tp.Sequential(tp.Linear(d, d), tp.Linear(d, d))

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(x)


class GPT(tp.Module):
    """GPT-like nesting: a list of blocks (``h.3``), a Sequential inside each, a dict of heads."""

    def __init__(self, d=8, n=3):
        super().__init__()
        self.wte = tp.Embedding(16, d)
        self.h = [Block(d) for _ in range(n)]
        self.heads = {"lm": tp.Linear(d, 16, bias=False)}

    def forward(self, ids):
        x = self.wte(ids)
        for block in self.h:
            x = block(x)
        return self.heads["lm"](x)


def _gpt_trace():
    model = GPT()
    model.initialize_dummy_parameters()
    return model, pipeline.trace(model, args=[tp.InputInfo(((1, 2, 4),), tp.int32)]).trace


def test_module_paths_follow_state_dict_names():
    model, trace = _gpt_trace()
    by_kind = {}
    for op in trace.ops:
        by_kind.setdefault(op.kind, []).append(op.module)
    assert by_kind["gather"] == ["wte"]
    assert by_kind["layer_norm"] == ["h.0.ln_1", "h.1.ln_1", "h.2.ln_1"]
    assert by_kind["softmax"] == ["h.0.attn", "h.1.attn", "h.2.attn"]  # made by Attn.forward itself
    matmuls = by_kind["matmul"]
    assert matmuls == [f"h.{i}.{m}" for i in range(3) for m in ("attn.c_attn", "attn.c_proj", "mlp.0", "mlp.1")] + [
        "heads.lm"]
    # every path names a module of the state_dict; the residual adds belong to the blocks
    parts = [key.split(".") for key in model.state_dict()]
    prefixes = {".".join(p[:k]) for p in parts for k in range(1, len(p))}
    forward_ops = [op for op in trace.ops if op.call is None or op.call.name != "initialize_dummy_parameters"]
    assert {op.module for op in forward_ops if op.kind == "add" and op.call.name == "__add__"} == {
        "h.0", "h.1", "h.2"}
    assert {op.module for op in trace.ops} <= prefixes
    # a weight's ops belong to its module, not to the top level
    weight = next(op for op in trace.ops if op.name == "h.1.attn.c_proj.weight")
    assert weight.module == "h.1.attn.c_proj"


def test_root_called_directly_and_modules_outside_a_module():
    lin = tp.Linear(4, 4)
    lin.initialize_dummy_parameters()

    def f(x):
        return tp.relu(lin(x))

    ops = pipeline.trace(f, args=[tp.InputInfo((2, 4), tp.float32)]).trace.ops
    assert {op.module for op in ops} == {""}  # lin is the root of its call: path ""
    (matmul,) = [op for op in ops if op.kind == "matmul"]
    (relu,) = [op for op in ops if op.kind == "relu"]
    assert matmul.call.name == "Linear" and relu.call.name == "relu"


def test_one_getitem_is_one_call_scope_at_the_users_line():
    def f(x, n):
        y = x[:, :n]
        z = x[:, :n]
        return y + z

    ops = pipeline.trace(f, args=[tp.InputInfo((2, 8), tp.float32), tp.DimensionInputInfo((1, 2, 8))]).trace.ops
    first = f.__code__.co_firstlineno
    slices = [op for op in ops if op.kind == "slice"]
    assert len(slices) == 2
    for k, sl in enumerate(slices):
        mine = [op for op in ops if op.call is sl.call]
        kinds = {op.kind for op in mine}
        assert {"slice", "minimum", "maximum"} <= kinds  # the index arithmetic folds into its slice
        assert sl.call.name == "__getitem__"
        assert (sl.call.location.file, sl.call.location.line) == (__file__, first + 1 + k)
    assert slices[0].call is not slices[1].call
    (add,) = [op for op in ops if op.kind == "add"]
    assert add.call.name == "__add__" and add.call not in (slices[0].call, slices[1].call)


def test_two_calls_on_one_line_are_two_scopes():
    def f(x):
        return tp.exp(x) + tp.exp(x)

    ops = pipeline.trace(f, args=[tp.InputInfo((2,), tp.float32)]).trace.ops
    exps = [op for op in ops if op.kind == "exp"]
    assert exps[0].call is not exps[1].call
    assert exps[0].call.location.line == exps[1].call.location.line


def test_outermost_public_call_names_the_ops():
    def f(x):
        return tp.softmax(x, dim=0) * tp.var(x, dim=0)

    ops = pipeline.trace(f, args=[tp.InputInfo((2, 3), tp.float32)]).trace.ops
    calls = {}
    for op in ops:
        calls.setdefault(op.call.name, set()).add(id(op.call))
    assert set(calls) == {"softmax", "var", "__mul__"}  # var's inner mean/sub/mul/sum/div are var's
    assert all(len(ids) == 1 for ids in calls.values())
    var_kinds = [op.kind for op in ops if op.call.name == "var"]
    assert len(var_kinds) > 3 and "reduce_sum" in var_kinds and "sub" in var_kinds


def test_method_property_and_constructor_calls_are_scopes():
    def f(x):
        y = x.reshape((3, 2))
        return y + tp.Tensor(np.ones((3, 2), np.float32)), x.shape[0] + 1

    ops = pipeline.trace(f, args=[tp.InputInfo(((1, 2, 2), 3), tp.float32)]).trace.ops
    names = {op.call.name for op in ops if op.call is not None}
    assert {"reshape", "Tensor", "shape", "__add__"} <= names
    assert [op.call.name for op in ops if op.kind == "get_dim"] == ["shape"]


def test_module_overriding_call_records_its_path():
    class Old(tp.Module):  # older Tripy programs override __call__ instead of forward
        def __init__(self):
            super().__init__()
            self.fc = tp.Linear(2, 2)

        def __call__(self, x):
            return tp.relu(self.fc(x))

    class Top(tp.Module):
        def __init__(self):
            super().__init__()
            self.old = Old()

        def forward(self, x):
            return self.old(x)

    top = Top()
    top.initialize_dummy_parameters()
    ops = pipeline.trace(top, args=[tp.InputInfo((2, 2), tp.float32)]).trace.ops
    assert [op.module for op in ops if op.kind in ("matmul", "relu")] == ["old.fc", "old"]


def test_scopes_do_not_leak_after_an_error():
    from tripy_lab.trace.scopes import STATE

    model = GPT()  # parameters unset: Module.__call__ raises

    def f(ids):
        return tp.softmax(model(ids), dim=0)

    try:
        pipeline.trace(f, args=[tp.InputInfo((2,), tp.int32)])
    except tp.TripyException:
        pass
    assert (STATE.module, STATE.paths, STATE.call_name, STATE.call) == ("", None, None, None)
    ops = pipeline.trace(lambda x: tp.exp(x), args=[tp.InputInfo((2,), tp.float32)]).trace.ops
    assert [(op.module, op.call.name) for op in ops] == [("", "exp")]


def test_trace_text_names_module_call_and_line():
    _, trace = _gpt_trace()
    text = str(trace)
    line = next(ln for ln in text.splitlines() if " = softmax(" in ln and "h.1.attn" in ln)
    assert line.rstrip().endswith(f"# h.1.attn · softmax @ {os.path.basename(__file__)}:{_SOFTMAX_LINE}")
    assert any(ln.rstrip().endswith("# h.2.attn.c_proj · Linear @ " + os.path.basename(__file__) + ":" +
                                    str(_C_PROJ_LINE)) for ln in text.splitlines() if " = matmul(" in ln)


import os  # noqa: E402 - the lines of Attn.forward, for the text test

_SOFTMAX_LINE = Attn.forward.__code__.co_firstlineno + 1
_C_PROJ_LINE = Attn.forward.__code__.co_firstlineno + 2
