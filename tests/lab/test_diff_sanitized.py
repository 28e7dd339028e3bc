"""lab.diff's HTML goes through lab/html.sanitize like every other fragment (issue 27 item 14): pandas
Styler's own <style> never leaves the kernel; the lab's stylesheet (our constants) styles the tables."""

import re

import tripy_lab as tp
from tripy_lab import lab
from tripy_lab.lab.html import sanitize


def test_diff_html_is_sanitized_and_carries_only_the_labs_stylesheet():
    a = tp.compile(lambda x: x * 2.0, args=[tp.InputInfo(((1, 2, 3), 4), tp.float32)], engine="reference")
    b = tp.compile(lambda x: x * 2.0 + 0.0, args=[tp.InputInfo(((1, 2, 3), 4), tp.float32)], engine="reference")
    d = lab.diff(a, b, iters=2, warmup=1)
    for markup in (d._repr_html_(), d.to_html()):
        styles = re.findall(r"<style[^>]*>(.*?)</style>", markup, flags=re.S)
        assert len(styles) == 1 and markup.startswith("<style>"), styles  # ours, first; Styler's is gone
        assert "#T_tripy" not in markup and "table.tripy-table" in styles[0]
        body = markup[markup.index("</style>") + len("</style>"):]
        assert sanitize(body) == body  # already clean: it went through sanitize
        assert "tripy-table" in body and "compute (ms)" in body  # the tables are still there
