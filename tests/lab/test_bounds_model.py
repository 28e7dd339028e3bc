"""BoundsModel: NamedDimension groups move together, opt stays inside, problems are flagged early."""

import tripy_lab as tp
from tripy_lab.lab import spec as S
from tripy_lab.lab.bounds_model import BoundsModel


def model(line: str) -> BoundsModel:
    parsed = S.parse_line(line)
    return BoundsModel.from_values(list(parsed.params), {n: p.spec for n, p in parsed.params.items()})


def test_range_move_pulls_opt_inside():
    m = model("a=f32[1:4:8,4]")
    m.set_range("a", 0, 1, 3)
    assert m.params["a"].dims[0].opt == 3
    m.set_range("a", 0, 5, 9)
    assert m.params["a"].dims[0].opt == 5
    assert m.is_valid()


def test_named_dimension_group_moves_together():
    m = model("x=f16[batch=1:8:32,seq=1:128:512] y=f16[batch,seq]")
    m.set_range("y", 0, 2, 16)
    assert m.values()["x"].shape_bounds.max == (16, 512)
    assert m.values()["y"].shape_bounds.min == (2, 1)
    m.set_static("x", 1, True)
    assert m.params["y"].dims[1].static


def test_static_toggle_and_back():
    m = model("a=f32[4,3]")
    m.set_static("a", 0, False)
    d = m.params["a"].dims[0]
    assert (d.min, d.opt, d.max) == (1, 4, 8)
    m.set_static("a", 0, True)
    assert (d.min, d.opt, d.max) == (4, 4, 4)


def test_invalid_bounds_are_flagged_not_raised():
    m = model("a=f32[1:2:3,4] s=dim[1:2:4]")
    m.set_bounds("a", 0, 3, 5, 2)
    m.set_bounds("s", None, 1, 9, 4)
    problems = [str(p) for p in m.problems()]
    assert problems == ["a[0]: min 3 > max 2", "s: opt 9 is outside [1, 4]"]
    assert not m.is_valid()


def test_named_dimension_conflict_is_a_problem():
    m = model("x=f32[n=1:2:3] y=f32[n]")
    m.params["y"].dims[0].max = 9  # bypassing the group edit, as a typed-in value could
    assert "NamedDimension 'n' differs" in str(m.problems()[0])


def test_values_code_and_compact():
    m = model("x=f16[batch=1:8:32,4] y=f16[batch,4] s=dim[1:2:4]")
    assert m.compact() == "x=f16[batch=1:8:32,4] y=f16[batch,4] s=dim[1:2:4]"
    code = m.code("f", "exe")
    assert 'batch = tp.NamedDimension("batch", 1, 8, 32)' in code
    assert "tp.InputInfo(shape=(batch, 4), dtype=tp.float16)" in code
    assert "tp.DimensionInputInfo(value_bounds=(1, 2, 4))" in code
    namespace = {"tp": tp, "f": lambda x, y, s: x}
    exec(code, namespace)  # the code is runnable Tripy
    assert namespace["exe"].input_infos["x"] == m.values()["x"]


def test_seed_input_info_code():
    m = model("a=f32[1:2:3,4]")
    assert "tp.InputInfo(shape=((1, 2, 3), 4), dtype=tp.float32)" in m.code()


def test_missing_params_get_an_editable_default_and_constants_stay():
    const = tp.Tensor([1.0, 2.0])
    m = BoundsModel.from_values(["a", "b", "c"], {"b": const, "c": tp.InputInfo((2,), tp.int32)})
    assert m.params["a"].kind == "tensor" and m.params["a"].dims[0].min == 1
    assert m.params["b"].kind == "const" and m.values()["b"] is const
    m.set_kind("a", "dim")
    assert isinstance(m.values()["a"], tp.DimensionInputInfo)
    m.set_kind("a", "tensor")
    m.add_dim("a", 3)
    assert m.values()["a"].rank == 2
    m.remove_dim("a")
    assert m.values()["a"].rank == 1


def test_key_changes_with_bounds_only():
    m = model("a=f32[1:2:3,4]")
    k1 = m.key()
    m.set_opt("a", 0, 3)
    assert m.key() != k1
    m.set_opt("a", 0, 2)
    assert m.key() == k1
