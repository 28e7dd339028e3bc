"""Executable.load of an edited or malformed file (issue 8, finding 9): a TripyException, never a raw
KeyError / AttributeError / ParseError / RecursionError; bounds come only from the MLIR profile; a content digest
binds the file to its program (issue 10)."""

import functools
import json
import os
import re
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tripy_lab as tp
from tripy_lab.executable import serialize

BATCH = tp.NamedDimension("batch", 1, 2, 4)


def program(x, y, s):
    mask = tp.Tensor(np.triu(np.full((3, 3), -np.inf, np.float32), k=1))
    return tp.reshape(x, (-1, s)), tp.softmax(y + mask, dim=-1)


@functools.cache
def saved_bytes() -> bytes:
    exe = tp.compile(program, args=[tp.InputInfo((BATCH, 6), tp.float32), tp.InputInfo((BATCH, 3, 3), tp.float32),
                                    tp.DimensionInputInfo((1, 2, 3))], engine="reference")
    with tempfile.TemporaryDirectory() as folder:
        exe.save(os.path.join(folder, "exe.json"))
        with open(os.path.join(folder, "exe.json"), "rb") as f:
            return f.read()


@pytest.fixture
def saved() -> bytes:
    return saved_bytes()


@functools.cache
def small_saved_bytes() -> bytes:
    """A few ops only (xDSL parses ~2 ms per op): a named dynamic dim, a DimensionSize, a -inf constant."""
    mask = np.array([0.0, -np.inf, np.nan], np.float32)
    exe = tp.compile(lambda x, s: (x + tp.Tensor(mask), s), args=[tp.InputInfo((BATCH, 3), tp.float32),
                                                                 tp.DimensionInputInfo((1, 2, 3))],
                     engine="reference")
    with tempfile.TemporaryDirectory() as folder:
        exe.save(os.path.join(folder, "exe.json"))
        with open(os.path.join(folder, "exe.json"), "rb") as f:
            return f.read()


def restamp(data: dict) -> bytes:
    """An edit made on purpose, with the digest recomputed: what the checks after the digest must catch."""
    try:
        data["digest"] = serialize.digest_of(data)
    except ValueError:  # inf / nan numbers have no canonical JSON: such a file keeps its old digest
        pass
    return json.dumps(data).encode()


def refused(raw: bytes, match: str = "") -> tp.TripyException:
    with pytest.raises(tp.TripyException, match=match) as info:
        serialize.read_bytes(raw, "exe.json")
    return info.value


def test_a_saved_file_loads_and_its_bounds_are_the_profile(saved, tmp_path):
    path = tmp_path / "exe.json"
    path.write_bytes(saved)
    exe = tp.Executable.load(str(path), engine="reference")
    assert exe.input_infos["x"].shape_bounds.max == (4, 6)
    assert exe.input_infos["x"].dimension_names == {0: "batch"}
    assert exe.input_infos["s"].value_bounds.max == (3,)
    out = exe(np.ones((4, 6), np.float32), np.zeros((4, 3, 3), np.float32), 3)
    assert out[0].shape == (8, 3)
    assert np.all(np.asarray(out[1])[:, 0, 1:] == 0)  # the -inf mask survived


def test_json_bounds_never_win_over_the_mlir_profile(saved, tmp_path):
    """The finding: max 10**6 in the JSON was accepted where the profile says 4."""
    data = json.loads(saved)
    data["input_infos"] = {"x": {"kind": "InputInfo", "min": [1, 6], "opt": [2, 6], "max": [10**6, 6],
                                 "dimension_names": {}, "dtype": "float32"}}
    path = tmp_path / "edited.json"
    path.write_bytes(restamp(data))
    exe = tp.Executable.load(str(path), engine="reference")
    assert exe.input_infos["x"].shape_bounds.max == (4, 6)
    with pytest.raises(tp.TripyException, match="outside the bounds"):
        exe(np.ones((5, 6), np.float32), np.zeros((5, 3, 3), np.float32), 3)


def test_an_edited_profile_is_caught_by_the_digest(saved):
    data = json.loads(saved)
    data["mlir"] = data["mlir"].replace("max = [4, 6]", "max = [1000000, 6]", 1)
    refused(json.dumps(data).encode(), "digest does not match")


def test_an_edited_profile_with_a_new_digest_gives_the_new_bounds_everywhere(saved):
    data = json.loads(saved)
    data["mlir"] = data["mlir"].replace("max = [4, 6]", "max = [5, 6]", 1)
    prog, _ = serialize.read_bytes(restamp(data))
    assert prog.input_infos["x"].shape_bounds.max == (5, 6)


@pytest.mark.parametrize("edit, match", [
    (lambda d: d.pop("arg_names"), "'arg_names' is missing"),              # was a KeyError
    (lambda d: d.update(origins=["%t0"]), "expected an object"),           # was an AttributeError
    (lambda d: d.update(origins=[{"trace_op": "%t0", "text": "", "location": [1]}]), "location must be"),
    (lambda d: d.update(mlir=d["mlir"][: len(d["mlir"]) // 2]), "does not parse"),   # was a ParseError
    (lambda d: d.update(mlir="module {" * 5000), "does not parse|nested too deeply"),  # was a RecursionError
    (lambda d: d.update(arg_names=["x", "y"]), "@main takes 3 arguments"),
    (lambda d: d.update(output_names=["a"]), "returns 2 values"),
    (lambda d: d.update(optimization_level=10**6), r"\[0, 5\]"),
    (lambda d: d.update(return_single="yes"), "'return_single' is str"),
    (lambda d: d.update(format="tripy-lab-executable/1"), "older format"),
    (lambda d: d.update(mlir=d["mlir"].replace("min = [1, 6], opt = [2, 6]", "min = [3, 6], opt = [2, 6]", 1)),
     "does not parse or verify"),
    (lambda d: d.update(mlir=d["mlir"].replace("tensorrt.shape_profile", "tensorrt.shape_profilx", 1)),
     "no tensorrt.shape_profile"),
])
def test_malformed_fields_are_tripy_exceptions(saved, edit, match):
    data = json.loads(saved)
    edit(data)
    refused(restamp(data), match)


def test_malformed_bytes_are_tripy_exceptions(saved):
    refused(b"[" * 100_000, "nested too deeply|not valid JSON")
    refused(saved[:-40], "not valid JSON")
    refused(b"\xff\xfe" + saved, "not valid JSON")
    refused(b"[1, 2]", "top level")
    with pytest.raises(tp.TripyException, match="Could not load"):
        tp.Executable.load("/nonexistent/exe.json")


# ------------------------------------------------------------------------------------------------ fuzzing


def json_values():
    return st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=8)
                        | st.floats(allow_nan=False),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                    max_size=3), max_leaves=6)


def json_mutation(data: dict, draw) -> dict:
    """Delete or replace one node somewhere in the JSON tree."""
    parent, key = None, None
    node = data
    for _ in range(draw(st.integers(1, 4))):
        keys = list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []
        if not keys:
            break
        parent, key = node, draw(st.sampled_from(keys))
        node = parent[key]
        if not isinstance(node, (dict, list)) or draw(st.booleans()):
            break
    if parent is None:
        return data
    if draw(st.booleans()):
        del parent[key]
    else:
        parent[key] = draw(json_values())
    return data


_TOKENS = ["[", "]", "{", "}", "<", ">", "(", ")", ",", ":", "=", "%arg0", "%0", "tensor<?x6xf32>", "0xFF800000",
           "-", "1", "4294967296", "dense<", "#profile", "\"", "loc(", "#-}", "{-#", "nan", "1e400", "?"]


def mlir_mutation(text: str, draw) -> str:
    """Cut, duplicate or replace a span of the MLIR text, or splice in a token."""
    i = draw(st.integers(0, len(text)))
    j = min(len(text), i + draw(st.integers(0, 40)))
    kind = draw(st.sampled_from(["cut", "dup", "token", "digit"]))
    if kind == "cut":
        return text[:i] + text[j:]
    if kind == "dup":
        return text[:j] + text[i:j] + text[j:]
    if kind == "token":
        return text[:i] + draw(st.sampled_from(_TOKENS)) + text[j:]
    numbers = list(re.finditer(r"\d+", text))
    m = draw(st.sampled_from(numbers))
    return text[:m.start()] + str(draw(st.integers(-1, 2**40))) + text[m.end():]


def byte_mutation(raw: bytes, draw) -> bytes:
    i = draw(st.integers(0, len(raw) - 1))
    kind = draw(st.sampled_from(["flip", "cut", "truncate"]))
    if kind == "flip":
        return raw[:i] + bytes([raw[i] ^ (1 << draw(st.integers(0, 7)))]) + raw[i + 1:]
    if kind == "cut":
        return raw[:i] + raw[i + draw(st.integers(1, 50)):]
    return raw[:i]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_fuzzed_files_raise_only_tripy_exceptions(data):
    saved = small_saved_bytes()
    how = data.draw(st.sampled_from(["bytes", "json", "mlir", "mlir", "mlir"]))
    if how == "bytes":
        raw = byte_mutation(saved, data.draw)
    else:
        doc = json.loads(saved)
        if how == "json":
            doc = json_mutation(doc, data.draw)
        else:
            doc["mlir"] = mlir_mutation(doc["mlir"], data.draw)
        raw = restamp(doc) if data.draw(st.integers(0, 9)) else json.dumps(doc).encode()
    try:
        serialize.read_bytes(raw, "fuzzed.json")
    except tp.TripyException:
        pass
