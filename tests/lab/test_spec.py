"""The %%tpcompile line parser: compact specs, options, and errors with a caret under the bad token."""

import pytest

import tripy_lab as tp
from tripy_lab.lab import spec as S


def test_compact_dynamic_spec_is_the_seed_input_info():
    line = S.parse_line("add_exe a=f32[1:2:3,4]")
    assert line.exe_name == "add_exe"
    info = S.to_info(line.params["a"].spec)
    assert info == tp.InputInfo(((1, 2, 3), 4), tp.float32)


def test_named_dimensions_are_defined_once_and_reused():
    line = S.parse_line("x=f16[batch=1:8:32,seq=1:128:512] y=f16[batch,seq]")
    x, y = (S.to_info(line.params[n].spec) for n in "xy")
    assert x.dimension_names == y.dimension_names == {0: "batch", 1: "seq"}
    assert y.shape_bounds.max == (32, 512)
    assert x.dtype is tp.float16


def test_reference_before_definition_is_resolved():
    line = S.parse_line("y=f32[batch,4] x=f32[batch=1:2:3,4]")
    assert S.to_info(line.params["y"].spec).shape_bounds.min == (1, 4)


def test_dim_spec_is_a_dimension_input_info():
    line = S.parse_line("s=dim[1:2:4]")
    assert S.to_info(line.params["s"].spec) == tp.DimensionInputInfo((1, 2, 4))


def test_options_and_python_expressions():
    text = "e a = tp.InputInfo(((1, 2, 3), 4), tp.float32) b=i32[] -O 5 --engine xla --no-widgets"
    line = S.parse_line(text)
    assert line.params["a"].spec == S.ExprSpec("tp.InputInfo(((1, 2, 3), 4), tp.float32)")
    assert line.params["b"].spec == S.TensorSpec("int32", ())
    assert (line.optimization_level, line.engine, line.widgets) == (5, "xla", False)
    assert S.parse_line("-O0").optimization_level == 0
    assert S.parse_line("--optimization-level=2 --auto-build-ms 50").auto_build_ms == 50.0


ALIASES = ["f32", "float32", "f16", "bf16", "f8", "i4", "i8", "i32", "i64", "b", "bool"]


@pytest.mark.parametrize("dtype", ALIASES)
def test_every_dtype_alias(dtype):
    spec = S.parse_line(f"a={dtype}[2]").params["a"].spec
    assert spec.dtype in {d.name for d in (tp.float32, tp.float16, tp.bfloat16, tp.float8, tp.int4, tp.int8,
                                           tp.int32, tp.int64, tp.bool)}


def caret(err: S.SpecError) -> str:
    """The token the caret points at."""
    return err.line[err.start:err.end]


@pytest.mark.parametrize(("line", "token", "summary"), [
    ("a=f32[1:3:2,4]", "1:3:2", "min=1, opt=3, max=2"),
    ("a=f32[1:2,4]", "1:2", "Invalid dimension bounds"),
    ("a=f32[1:2:x,4]", "x", "Invalid dimension size"),
    ("a=f32[1:2:3,4", "[", "Unclosed '['"),
    ("a=f32[2]] b", "]", "Unmatched ']'"),
    ("a=f32[batc,4] b=f32[batch=1:2:3]", "batc", "Unknown NamedDimension 'batc'"),
    ("a=f32[n=1:2:3] b=f32[n=1:2:4]", "n=1:2:4", "defined twice"),
    ("-O 9", "9", "Invalid optimization level"),
    ("--fast", "--fast", "Unknown option"),
    ("x y", "y", "already named 'x'"),
    ("a=f32[2] a=f32[3]", "a=f32[3]", "given twice"),
    ("s=dim[1:2:4,5]", "1:2:4,5", "one min:opt:max"),
    ("1a=f32[2]", "1a", "Invalid parameter name"),
    ("a=f32[2,,3]", ",", "Empty dimension"),
])
def test_errors_point_at_the_bad_token(line, token, summary):
    with pytest.raises(S.SpecError) as info:
        S.parse_line(line)
    err = info.value
    assert isinstance(err, tp.TripyException)
    assert summary in err.summary
    assert caret(err) == token
    # The message shows the line and a caret line under the token.
    text = str(err)
    assert line in text
    assert " " * err.start + "^" * (err.end - err.start) in text


def test_hint_suggests_a_close_named_dimension():
    with pytest.raises(S.SpecError, match="Did you mean 'batch'"):
        S.parse_line("a=f32[batc,4] b=f32[batch=1:2:3]")


def test_shifted_error_keeps_the_caret_under_the_token():
    with pytest.raises(S.SpecError) as info:
        S.parse_line("a=f32[1:3:2,4]")
    moved = info.value.shifted("%%tpcompile ")
    assert moved.line.startswith("%%tpcompile a=")
    assert caret(moved) == "1:3:2"


def test_tokenizer_keeps_brackets_and_strings_together():
    toks = [t for t, _, _ in S.tokenize("a=tp.InputInfo((1, 2), tp.float32) name='x y' -O 3")]
    assert toks == ["a=tp.InputInfo((1, 2), tp.float32)", "name='x y'", "-O", "3"]


@pytest.mark.parametrize("text", ["f32[1:2:3,4]", "f16[batch=1:8:32,seq=1:128:512]", "dim[1:2:4]", "i32[]",
                                  "bool[2,3]"])
def test_format_round_trips(text):
    spec = S.parse_line(f"a={text}").params["a"].spec
    assert S.format_spec(spec) == text
    assert S.from_info(S.to_info(spec)) == spec
