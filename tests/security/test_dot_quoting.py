"""DOT quoting: any Unicode name gives DOT text that real graphviz draws, with the name intact."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tripy_lab.core import dtypes
from tripy_lab.trace.graph import Trace, dot_quote, dot_text
from tripy_lab.trace.ir import TraceOp, TraceTensor

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz `dot` is not installed")
SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"
NASTY = ["\\", "a\\", '"', '\\"', "<", ">", "&amp;", "\n", "\r\n", "\\N", "\\G\\L", "\x00", "\x1b[31m", "\ud800",
         "</svg><script>alert(1)</script>", "]]>", "{}", "%t", "\ufeff", "\u202e", "😀", "-->", "\t"]
names = st.one_of(st.sampled_from(NASTY), st.text(st.characters(codec=None), max_size=12),
                  st.lists(st.sampled_from(NASTY), min_size=1, max_size=4).map("".join))


def chain(input_name: str, op_names: list[str]) -> Trace:
    """input -> op0 -> op1 -> ... with the given names."""
    x = TraceTensor(shape=(2, None), dtype=dtypes.float32, name=input_name)
    cur = x
    for name in op_names:
        out = TraceTensor(shape=(2, None), dtype=dtypes.float32, name=name)
        out.producer = TraceOp("add", [cur, x], [out])
        cur = out
    return Trace([cur], [x])


def draw(dot: str) -> ET.Element:
    res = subprocess.run(["dot", "-Tsvg"], input=dot.encode("utf-8"), capture_output=True, timeout=60)
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    return ET.fromstring(res.stdout)  # well-formed XML, or this raises


def lines(text: str) -> str:
    """Label lines as graphviz draws them: empty lines take no <text> element."""
    return "\n".join(line for line in text.replace("\xa0", " ").split("\n") if line.strip())


def node_texts(svg: ET.Element) -> dict[str, tuple[str, str | None]]:
    """{id: (label lines joined by newlines, tooltip)} of every drawn node."""
    out = {}
    for g in svg.iter(f"{SVG}g"):
        if g.get("class") == "node":
            label = lines("\n".join(t.text or "" for t in g.iter(f"{SVG}text")))
            a = g.find(f".//{SVG}a")
            tip = a.get(f"{XLINK}title").replace("\xa0", " ") if a is not None else None
            out[g.get("id")] = (label, tip)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(names, min_size=2, max_size=5, unique=True).filter(lambda ns: not any(n.startswith("%t") for n in ns)))
@example(["\\", '\n"'])  # a tooltip that starts with a newline (graphviz dropped a raw one)
def test_any_names_give_dot_that_graphviz_draws_with_names_intact(ns):
    trace = chain(ns[0], ns[1:])
    drawn = node_texts(draw(trace.to_dot(highlight=ns[-1])))
    assert len(drawn) == len(ns) + 1  # inputs, ops and the return node: nothing merged, nothing lost
    assert drawn[f"op-{dot_text(ns[0])}"][0] == lines(dot_text(f"{ns[0]}\n{trace.inputs[0].type_str()}"))
    for op in trace.ops:
        label, tooltip = drawn[f"op-{dot_text(op.name)}"]
        assert label == lines(dot_text(f"{op.name} = add")), (label, op.name)
        assert tooltip == dot_text(str(op)).replace("\\", "\u2216").replace("\xa0", " ")


@pytest.mark.parametrize("text", ["abc\\", 'say "hi"', "\\n is not a newline", "a\nb", "&lt;b&gt;", "\\\\\\"])
def test_quoted_strings_read_back_verbatim(text):
    dot = f"digraph g {{ n [id={dot_quote('op-' + text, 'id')}, label={dot_quote(text)}]; }}"
    ((ident, (label, _)),) = node_texts(draw(dot)).items()
    assert ident == "op-" + text and label == lines(text)


def test_unprintable_characters_become_visible_pictures():
    assert dot_text("a\x00b\x1bc\x7f\ud800") == "a\u2400b\u241bc\u2421\ufffd"
    assert dot_text("new\nline") == "new\nline"
