"""Golden MLIR: the text people see for a dozen small programs. `pytest --update-golden` rewrites them.

Each golden program is also checked to parse back to the same text, and its generic form to parse and
verify in upstream MLIR (jaxlib's bindings).
"""

from pathlib import Path

import numpy as np
import pytest

import tripy_lab as tp
from tripy_lab import pipeline
from tripy_lab.mlir import text as mlir_text
from tripy_lab.mlir.upstream import check_with_upstream

HERE = Path(__file__).parent
F32 = tp.float32


def static_add(a, b):
    return a + b


def dynamic_add(a, b):
    return a + b


def named_dims(a, b):
    return a * b


def dynamic_reshape(x, s):
    return tp.reshape(x, (-1, s))


class LinearModel(tp.Module):
    def __init__(self):
        super().__init__()
        self.proj = tp.Linear(3, 2)
        self.proj.weight = tp.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        self.proj.bias = tp.Tensor(np.array([0.5, -0.5], dtype=np.float32))

    def forward(self, x):
        return self.proj(x)


def softmax(x):
    return tp.softmax(x, dim=-1)


def matmul(a, b):
    return a @ b


def reductions(x):
    return tp.sum(x, dim=1), tp.max(x, dim=0, keepdim=True), tp.mean(x)


def concatenate(a, b):
    return tp.concatenate([a, b], dim=1)


def slicing(x):
    return x[1:, ::-1][None, 0]


def cast(x):
    return tp.cast(x, tp.int32)


def where(x, y):
    return tp.where(x > y, x, y)


def dynamic_slicing(x):
    return x[1:]


CASES = {
    "static_add": (static_add, [tp.InputInfo((2, 3), F32), tp.InputInfo((2, 3), F32)]),
    "dynamic_add": (dynamic_add, [tp.InputInfo(((1, 2, 3), 4), F32), tp.InputInfo(((1, 2, 3), 4), F32)]),
    "named_dims": (named_dims, [tp.InputInfo((tp.NamedDimension("batch", 1, 4, 8), 16), F32),
                                tp.InputInfo((tp.NamedDimension("batch", 1, 4, 8), 16), F32)]),
    "dynamic_reshape": (dynamic_reshape, [tp.InputInfo((3, 4), F32), tp.DimensionInputInfo((1, 2, 4))]),
    "linear": (LinearModel(), [tp.InputInfo(((1, 2, 4), 3), F32)]),
    "softmax": (softmax, [tp.InputInfo((2, 5), F32)]),
    "matmul": (matmul, [tp.InputInfo((2, 3), F32), tp.InputInfo((3, 4), F32)]),
    "reductions": (reductions, [tp.InputInfo((2, 3), F32)]),
    "concatenate": (concatenate, [tp.InputInfo((2, 1), F32), tp.InputInfo((2, 3), F32)]),
    "slicing": (slicing, [tp.InputInfo((4, 2), F32)]),
    "dynamic_slicing": (dynamic_slicing, [tp.InputInfo(((2, 3, 4), 2), F32)]),
    "cast": (cast, [tp.InputInfo((3,), F32)]),
    "where": (where, [tp.InputInfo((2, 2), F32), tp.InputInfo((2, 2), F32)]),
}


def lowered(name):
    func, args = CASES[name]
    return pipeline.trace(func, args=args).lower()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_mlir(name, request):
    text = lowered(name).as_text()
    path = HERE / f"{name}.mlir"
    if request.config.getoption("--update-golden") or not path.exists():
        path.write_text(text + "\n")
    assert text + "\n" == path.read_text()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_text_parses_back(name):
    low = lowered(name)
    full = low.as_text(elide=False)
    resources = {}
    module = mlir_text.parse_module(full, resources=resources)
    assert mlir_text.print_module(module, resources=resources) == full


@pytest.mark.parametrize("name", sorted(CASES))
def test_generic_form_verifies_in_upstream_mlir(name):
    generic = lowered(name).as_text(generic=True, elide=False, locations=True)
    assert check_with_upstream(generic) == []


def test_dynamic_profile_text():
    text = lowered("dynamic_add").as_text()
    assert "#tensorrt.shape_profile<min = [1, 4], opt = [2, 4], max = [3, 4]>" in text
    assert "tensor<?x4xf32>" in text
    assert 'tensorrt.dimension_names = {}' in text


def test_value_bounds_and_host_memory_space():
    text = lowered("dynamic_reshape").as_text()
    assert "plan.memory_space = #plan.memory_space<host>" in text
    assert "#tensorrt.shape_profile<min = [1], opt = [2], max = [4]>" in text


def test_every_op_has_a_location_back_to_the_user_line():
    low = lowered("linear")
    for op in low.program.ops():
        origin = low.program.origin_of(op)
        assert origin is not None, op.name
        assert origin.location.file == __file__
    text = low.as_text(locations=True)
    assert f'"{__file__}"' in text
