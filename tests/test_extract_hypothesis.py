"""Property tests: never raises, chunk invariance, agreement with html5lib, linear time."""

from __future__ import annotations

import sys
import time
from typing import Any

import html5lib
import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from selectolax.lexbor import LexborHTMLParser

from crawler.extract import Link
from tests.extract_common import BASE, IMPL_NAMES, IMPLS
from tests.extract_common import LINK_ELEMENTS as _LINK_ELEMENTS


def new(impl: Any, encoding: str | None = None, **kw: Any) -> Any:
    ex = impl(BASE, encoding, **kw)
    try:
        ex._strict = True  # a bug raises here instead of being swallowed
    except AttributeError:  # pragma: no cover
        pass
    return ex


def feed_chunks(impl: Any, data: bytes, sizes: list[int], **kw: Any) -> list[Link]:
    ex = new(impl, **kw)
    out: list[Link] = []
    i = 0
    for k in sizes:
        out += ex.feed(data[i : i + k])
        i += k
    out += ex.feed(data[i:])
    return out + ex.close()


# Markup-ish pieces: every tokenizer state and its exits are reachable by concatenation.
PIECES = [
    "<a href=",
    "<a href='",
    '<a href="',
    "<A HREF=",
    "<area href=",
    "<a/href=",
    "<div title=",
    '"',
    "'",
    ">",
    "/>",
    "<",
    "</",
    "/",
    "=",
    " ",
    "\n",
    "\t",
    "x",
    "y",
    "/p",
    "?q=1",
    "#f",
    "&amp;",
    "&amp",
    "&",
    "&#38;",
    "&#x",
    "&notit;",
    "&copy=",
    "\x00",
    "\r\n",
    "<!--",
    "-->",
    "--!>",
    "-",
    "--",
    "!",
    "<!",
    "<!-",
    "<?",
    "<!DOCTYPE html>",
    "<script>",
    "</script>",
    "<script",
    "</script",
    "<style>",
    "</style>",
    "<title>",
    "</title>",
    "<textarea>",
    "</textarea>",
    "<xmp>",
    "</xmp>",
    "<noembed>",
    "</noembed>",
    "<iframe src=f>",
    "</iframe>",
    "<noscript>",
    "<svg>",
    "</svg>",
    "<math>",
    "</math>",
    "<mi>",
    "<foreignObject>",
    "</foreignObject>",
    "<![CDATA[",
    "]]>",
    "<p>",
    "</p>",
    "<b>",
    "<br>",
    "<font color=red>",
    "<base href=/b/>",
    "<meta http-equiv=refresh content='0;url=/r'>",
]
DOCS = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)
SPLITS = st.lists(st.integers(min_value=1, max_value=12), max_size=60)


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=3000), sizes=SPLITS, enc=st.sampled_from([None, "utf-8", "utf-16"]))
def test_arbitrary_bytes_never_raise_and_chunking_does_not_matter(
    impl_name: str, data: bytes, sizes: list[int], enc: str | None
) -> None:
    impl = IMPLS[impl_name]
    want = feed_chunks(impl, data, [], encoding=enc)
    assert feed_chunks(impl, data, sizes, encoding=enc) == want
    for link in want:
        assert isinstance(link, Link) and isinstance(link.url, str)


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCS, sizes=SPLITS)
def test_generated_markup_chunk_invariance(impl_name: str, doc: str, sizes: list[int]) -> None:
    impl = IMPLS[impl_name]
    data = doc.encode("utf-8")
    want = feed_chunks(impl, data, [], encoding="utf-8")
    assert feed_chunks(impl, data, sizes, encoding="utf-8") == want
    assert feed_chunks(impl, data, [1] * len(data), encoding="utf-8") == want
    # A tiny cap never cuts a value: each link is either whole or absent.
    capped = feed_chunks(impl, data, sizes, encoding="utf-8", max_token=3)
    assert all(x in want for x in capped)


def _dom_hrefs(doc: str) -> set[str]:
    tree = html5lib.parse(doc, treebuilder="etree", namespaceHTMLElements=True)
    out = set()
    for el in tree.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag in _LINK_ELEMENTS and el.get("href") is not None:
            out.add(el.get("href"))
    return out


class _RawResolver:
    valid = True

    def __init__(self, base: str, query_codec: str | None = None) -> None:
        self.base = base

    def resolve(self, raw: str) -> str:
        return raw


# For the differential test, integration points only appear inside their svg/math parent.
DIFF_PIECES = [p for p in PIECES if p not in ("<foreignObject>", "</foreignObject>", "<mi>")]
DIFF_PIECES += ["<svg><foreignObject>", "<math><mi>", "<svg><desc>"]
DIFF_DOCS = st.lists(st.sampled_from(DIFF_PIECES), max_size=40).map("".join)


_INTEGRATION_TAGS = {"foreignobject", "desc", "title", "mi", "mo", "mn", "ms", "mtext"}


def _lexbor_hrefs(doc: str) -> set[str]:
    """Like `_dom_hrefs`, with Lexbor; an <area> under svg/math is foreign (no namespace API)."""
    out = set()
    for node in LexborHTMLParser(doc).css("a[href], area[href]"):
        if node.tag == "area":
            p = node.parent
            # (Lexbor names an svg element in its own case: "foreignObject")
            while p is not None and p.tag.lower() not in _INTEGRATION_TAGS:
                if p.tag in ("svg", "math"):
                    break
                p = p.parent
            if p is not None and p.tag in ("svg", "math"):
                continue
        out.add(node.attributes.get("href") or "")
    return out


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DIFF_DOCS)
# (an HTML <area> in a foreignObject after </p> left the inner svg: Chromium's DOM has it too)
@example(doc="<svg><foreignObject><svg></p><area href=>")
def test_generated_markup_same_hrefs_as_html5lib(impl_name: str, doc: str) -> None:
    impl = IMPLS[impl_name]
    # Documented approximation (see _machine.py): HTML elements opened inside an integration
    # point are not tracked, so a CDATA section there counts as CDATA (it is one only while
    # the current node is the SVG/MathML element itself).
    assume(
        not ("<![CDATA[" in doc and ("<foreignObject>" in doc or "<mi>" in doc or "<desc>" in doc))
    )
    mod = sys.modules[impl.__module__]
    saved = mod.Resolver
    mod.Resolver = _RawResolver
    try:
        ex = new(impl, "utf-8")
        links = ex.feed(doc.encode("utf-8")) + ex.close()
    finally:
        mod.Resolver = saved
    ours = {x.raw for x in links if x.tag in ("a", "area")}
    expected = _dom_hrefs(doc)
    if ours != expected:
        # html5lib 1.1 predates the rule that </p> and </br> leave foreign content (HTML
        # standard, 2021); there Lexbor, which implements it, is the reference.
        assert "</p>" in doc or "</br>" in doc, (ours, expected)
        assert ours == _lexbor_hrefs(doc)


# Linear time whatever the chunking: pathological documents fed in 1 KB chunks.
PATHOLOGICAL = {
    "unterminated comment": (b"<!--", b"a-b-c--d "),
    "unterminated attribute value": (b"<a href='", b'x&amp;y<>"= '),
    "unterminated unquoted value": (b"<a href=", b"xyz&amp;<\"'"),
    "unclosed script": (b"<script>", b"if (a<b) x='</scrip'+'t>'; "),
    "escaped script": (b"<script><!--", b"<script></script> -- "),
    "many <": (b"", b"<"),
    "many <a": (b"", b"<a"),
    "endless tag name": (b"<a", b"bcdefgh"),
    "endless attributes": (b"<a ", b"x=1 y='2' "),
    "unclosed textarea": (b"<textarea>", b"</textare <a href=x> "),
    "bogus comment": (b"<?", b"<a href=x"),
    "normal page": (b"", b'<p class="c">text <a href="/p?q=1">l</a> &amp; more</p>\n'),
}


def _time_feed(impl: Any, head: bytes, unit: bytes, size: int) -> float:
    data = head + unit * (size // len(unit))
    best = float("inf")
    for _ in range(2):
        ex = new(impl, "utf-8")
        t0 = time.perf_counter()
        for i in range(0, len(data), 1024):
            ex.feed(data[i : i + 1024])
        ex.close()
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
@pytest.mark.parametrize("case", list(PATHOLOGICAL), ids=list(PATHOLOGICAL))
def test_linear_time_in_1k_chunks(impl_name: str, case: str) -> None:
    impl = IMPLS[impl_name]
    head, unit = PATHOLOGICAL[case]
    # 8x the input: about 8x the time when linear, 64x when quadratic. Loose, and retried, for
    # a shared noisy machine: a quadratic state fails every attempt.
    # The small size grows (to 4 MiB at most) until it takes 10 ms, so that a fast
    # implementation is not timed on noise.
    size = 1 << 18
    while _time_feed(impl, head, unit, size) < 0.01 and size < 1 << 22:
        size *= 2
    ratios = []
    for _ in range(3):
        small = _time_feed(impl, head, unit, size)
        large = _time_feed(impl, head, unit, size * 8)
        ratios.append(large / small)
        if ratios[-1] < 20:
            break
    assert min(ratios) < 20, ratios
