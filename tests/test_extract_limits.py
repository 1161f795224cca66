"""The extractor's caps, and work that must stay linear: both twins, at and around each cap.

Every cap either implementation has is listed here with the behaviour at ``cap - 1``, ``cap``
and ``cap + 1``, whole and chunked (one byte at a time, random splits): the compiled twin must
give what the pure-Python reference gives, and the reference what is documented in
``_machine.py``. The caps: runs of open svg/math elements (1024), tag names (256 bytes),
attribute names in a link set (64 bytes), attribute values (``max_token``), and the
size past which a tag's attributes are first searched for a wanted name (4096 bytes).
"""

from __future__ import annotations

import random
import time
import tracemalloc
from typing import Any

import pytest

from crawler.extract import Link, LinkExtractorC, LinkExtractorPy
from crawler.extract._tree import _MAX_ANAME, _MAX_FOREIGN_DEPTH, _MAX_NAME
from tests.extract_common import BASE, IMPL_NAMES, IMPLS, run_strict


def run(impl: Any, data: bytes, sizes: list[int] | None = None, **kw: Any) -> list[Link]:
    return run_strict(impl, data, sizes, kw.pop("encoding", "utf-8"), **kw)


def chunkings(data: bytes, seed: int = 0) -> list[list[int] | None]:
    """Whole, one byte at a time, and two random splittings."""
    rnd = random.Random(seed)
    out: list[list[int] | None] = [None, [1] * len(data)]
    for top in (7, 300):
        sizes, left = [], len(data)
        while left > 0:
            k = rnd.randint(1, top)
            sizes.append(k)
            left -= k
        out.append(sizes)
    return out


def same_everywhere(data: bytes, **kw: Any) -> list[Link]:
    """The links of ``data``: the same for both twins and every chunking (asserted)."""
    want = run(LinkExtractorPy, data, **dict(kw))
    for sizes in chunkings(data):
        for name in IMPL_NAMES:
            assert run(IMPLS[name], data, sizes, **dict(kw)) == want, (name, sizes and sizes[:5])
    return want


def hrefs(links: list[Link]) -> list[str]:
    return [x.raw for x in links]


# -- runs of open foreign elements ---------------------------------------------------------


def foreign_runs(runs: int) -> bytes:
    """``<svg>`` and ``runs - 1`` more runs (alternating names, so no two runs merge), then a
    ``<foreignObject>``: an HTML integration point only if it is recorded."""
    inner = b"".join(b"<g>" if i % 2 else b"<h>" for i in range(runs - 1))
    return b"<svg>" + inner + b"<foreignObject><style><a href=x></style><a href=y>"


@pytest.mark.parametrize(
    "runs", [_MAX_FOREIGN_DEPTH - 1, _MAX_FOREIGN_DEPTH, _MAX_FOREIGN_DEPTH + 1]
)
def test_foreign_depth_cap(runs: int) -> None:
    links = same_everywhere(foreign_runs(runs))
    if runs < _MAX_FOREIGN_DEPTH:
        # foreignObject recorded: <style> is HTML raw text, then <a href=y> is an HTML link.
        assert hrefs(links) == ["y"]
    else:
        # Past the cap the foreignObject is not recorded: <style> stays a foreign element.
        assert hrefs(links) == ["x", "y"]


def test_same_name_nesting_has_no_depth_cap() -> None:
    """A run of one name costs one entry: 100,000 nested <g> are all recorded, and 99,999
    end tags still leave the svg open (its <style> is no raw text)."""
    n = 100_000
    data = b"<svg>" + b"<g>" * n + b"</g>" * (n - 1) + b"<style><a href=s></style></g></svg>"
    data += b"<style><a href=nope></style><a href=x>"
    for name in IMPL_NAMES:
        assert hrefs(run(IMPLS[name], data)) == ["s", "x"]
        assert hrefs(run(IMPLS[name], data, [1024] * (len(data) // 1024))) == ["s", "x"]


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_foreign_stack_memory_is_bounded(impl_name: str) -> None:
    """200,000 unclosed foreign elements (alternating names) keep at most 1024 entries."""
    ex = IMPLS[impl_name](BASE, "utf-8")
    ex.feed(b"<body><svg>")
    tracemalloc.start()
    try:
        for _ in range(100):
            ex.feed(b"<g><h>" * 1000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # 1024 short entries are ~60 KB; an unbounded stack would hold 200,000 (~9 MB).
    assert peak < 1_000_000, peak
    assert [x.raw for x in ex.feed(b"<a href=in-svg>")] == ["in-svg"]


def _timed(impl: Any, data: bytes) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        run(impl, data, [65536] * (len(data) // 65536))
        best = min(best, time.perf_counter() - t)
    return best


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_unmatched_foreign_end_tags_are_linear(impl_name: str) -> None:
    """Deep foreign nesting then end tags that match nothing: the cost of an end tag must not
    depend on the depth. At 8x the input (8x the depth and 8x the end tags) a scan of the
    stack per end tag costs 64x; linear work costs 8x (the bound leaves room for noise)."""

    def doc(depth: int, ends: int) -> bytes:
        return b"<svg>" + b"<g><h>" * (depth // 2) + b"</x>" * ends

    impl = IMPLS[impl_name]
    small = _timed(impl, doc(128, 20_000))
    big = _timed(impl, doc(1024, 160_000))
    assert big / small < 24, (small, big)


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_unmatched_end_tags_in_an_integration_point_are_linear(impl_name: str) -> None:
    """The same for HTML elements open in an integration point (their names are kept too)."""

    def doc(depth: int, ends: int) -> bytes:
        return b"<svg><desc>" + b"<b><i>" * (depth // 2) + b"</x>" * ends

    impl = IMPLS[impl_name]
    small = _timed(impl, doc(128, 20_000))
    big = _timed(impl, doc(1024, 160_000))
    assert big / small < 24, (small, big)


@pytest.mark.parametrize(
    "depth", [_MAX_FOREIGN_DEPTH - 1, _MAX_FOREIGN_DEPTH, _MAX_FOREIGN_DEPTH + 1]
)
def test_html_in_integration_point_cap(depth: int) -> None:
    """At most 1024 HTML elements open in integration points are recorded; the end tag of
    one past the cap then closes nothing (the desc stays open either way here)."""
    data = b"<svg><desc>" + b"<b>" * (depth - 1) + b"<i></i></desc><style><a href=x></style>"
    data += b"</b>" * depth + b"</desc><style><a href=y></style>"
    same_everywhere(data)


def test_foreign_end_tags_pop_what_they_close() -> None:
    """Matched end tags, deep in alternating runs: the same as a browser's stack."""
    data = b"<svg>" + b"<g><h>" * 500 + b"</g>" + b"<foreignObject><style><a href=nope></style>"
    data += b"</foreignObject></svg><a href=x>"
    assert hrefs(same_everywhere(data)) == ["x"]


# -- tag names -----------------------------------------------------------------------------


@pytest.mark.parametrize("length", [_MAX_NAME - 1, _MAX_NAME, _MAX_NAME + 1, 3 * _MAX_NAME])
def test_tag_name_cap_in_foreign_content(length: int) -> None:
    """An end tag closes a foreign element of a name up to the cap; a longer name is stored
    short and no end tag closes it. Closed: the <svg> below annotation-xml is SVG and its
    foreignObject an HTML integration point (<style> is raw text); not closed: the <svg> is
    a MathML element and <style> a foreign element whose <a href> is a link."""
    name = b"q" * length
    data = b"<math><annotation-xml><" + name + b"></" + name + b">"
    data += b"<svg><foreignObject><style><a href=x></style>"
    links = same_everywhere(data)
    assert hrefs(links) == ([] if length <= _MAX_NAME else ["x"])


@pytest.mark.parametrize("length", [_MAX_NAME - 1, _MAX_NAME])
def test_link_set_tag_name_up_to_the_cap(length: int) -> None:
    tag = "t" * length
    data = b"<" + tag.encode() + b" href=x>"
    links = same_everywhere(data, link_set={tag: ("href",)})
    assert [(x.tag, x.raw) for x in links] == [(tag, "x")]


@pytest.mark.parametrize(
    "link_set", [{"t" * (_MAX_NAME + 1): ("href",)}, {"a": ("h" * (_MAX_ANAME + 1),)}]
)
def test_link_set_names_over_the_cap_are_refused(link_set: dict[str, Any]) -> None:
    for name in IMPL_NAMES:
        with pytest.raises(ValueError, match="link_set"):
            IMPLS[name](BASE, link_set=link_set)


@pytest.mark.parametrize("length", [_MAX_ANAME - 1, _MAX_ANAME])
def test_link_set_attribute_name_up_to_the_cap(length: int) -> None:
    attr = "h" * length
    data = b"<a " + attr.encode() + b"=x " + attr.encode() + b"x=y>"
    links = same_everywhere(data, link_set={"a": (attr,)})
    assert [(x.attr, x.raw) for x in links] == [(attr, "x")]


# -- attribute values and counts -----------------------------------------------------------


@pytest.mark.parametrize("max_token", [16, 4096])
@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_max_token(max_token: int, delta: int) -> None:
    value = b"v" * (max_token + delta)
    for quote in (b'"', b"'", b""):
        data = b"<a href=" + quote + value + quote + b"><a href=after>"
        links = same_everywhere(data, max_token=max_token)
        expected = ([value.decode()] if delta <= 0 else []) + ["after"]
        assert hrefs(links) == expected


@pytest.mark.parametrize("region", [4095, 4096, 4097])
def test_huge_tag_threshold(region: int) -> None:
    """The reference reads a tag's attributes one by one only when a wanted name occurs in
    a region over 4096 bytes; the result must not depend on which side of it a tag is."""
    filler = b" x=" + b"y" * (region - 3 - len(b" href=z"))
    data = b"<a" + filler + b" href=z>" + b"<a" + filler + b" hreff=z>"
    assert len(filler + b" href=z") == region
    assert hrefs(same_everywhere(data)) == ["z"]


def test_many_attributes() -> None:
    attrs = b"".join(b" a%d=%d" % (i, i) for i in range(10_000))
    data = b"<a" + attrs + b" href=x href=y><area" + attrs + b" rel=nofollow href=z>"
    links = same_everywhere(data)
    assert [(x.raw, x.nofollow) for x in links] == [("x", False), ("z", True)]


@pytest.mark.skipif(LinkExtractorC is None, reason="compiled extractor not built")
def test_resolver_cache_size_is_invisible() -> None:
    """4096 distinct values fill a resolver's cache, which is then cleared: 4095 to 4097
    values and repeats give the same links in both twins."""
    for n in (4095, 4096, 4097):
        data = b"".join(b"<a href=/p%d>" % (i % n) for i in range(n + 50))
        links = same_everywhere(data)
        assert len(links) == n + 50
        assert links[n].raw == "/p0"
