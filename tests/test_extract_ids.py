"""Fragment targets: ``LinkExtractor(..., collect_ids=True)`` gives ``ids``, ``ids_complete``.

The ids are those a browser's ``getElementById`` / fragment navigation finds: every element's
``id`` (HTML, SVG and MathML) and every HTML ``<a name>``, decoded as the DOM holds them, not
those inside ``<template>`` content; collected in the same streaming pass, the same whatever
the chunking and in both twins; bounded (`MAX_IDS`); and collecting them changes no link.
"""

from __future__ import annotations

import random
from typing import Any

import html5lib
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.extract import MAX_ID_CHARS, MAX_IDS, LinkExtractor
from tests.extract_common import (
    BASE,
    IMPL_NAMES,
    IMPLS,
    NO_CORPUS,
    PAGES,
    SKIP_WITHOUT_CORPUS,
    run_strict,
)


@pytest.fixture(params=IMPL_NAMES)
def impl(request: pytest.FixtureRequest) -> Any:
    return IMPLS[request.param]


def collect(
    impl: Any,
    data: bytes,
    sizes: list[int] | None = None,
    encoding: str | None = "utf-8",
    **kw: Any,
) -> Any:
    ex = impl(BASE, encoding, collect_ids=True, **kw)
    ex._strict = True
    i = 0
    for k in sizes or []:
        ex.feed(data[i : i + k])
        i += k
    ex.feed(data[i:])
    ex.close()
    return ex


def ids_every_split(impl: Any, data: bytes, encoding: str | None = "utf-8") -> set[str]:
    whole = collect(impl, data, None, encoding)
    for k in range(1, len(data)):
        ex = collect(impl, data, [k], encoding)
        assert (ex.ids, ex.ids_complete) == (whole.ids, whole.ids_complete), k
    assert whole.ids_complete
    return set(whole.ids)


def test_element_ids_and_a_names(impl: Any) -> None:
    doc = (
        b"<!DOCTYPE html><html id=h><head><title id=ti>x</title><meta id=m></head>"
        b"<body><div id=d1><p ID='P2'>text</p><span id=\"s&amp;3\"></span>"
        b"<a name=top></a><a name=n id=i></a><img name=not-a-target><section id=Case></section>"
    )
    assert ids_every_split(impl, doc) == {
        "h",
        "ti",
        "m",
        "d1",
        "P2",
        "s&3",
        "top",
        "n",
        "i",
        "Case",
    }


def test_exact_values_as_the_dom_holds_them(impl: Any) -> None:
    """Case-sensitive, character references and newlines decoded, spaces kept; an empty id
    is no target (and ``id`` alone is empty)."""
    doc = b"<body><i id='A b'><i id='a&#x42;'><i id='x\r\ny'><i id=''><i id><i id=caf\xc3\xa9>"
    assert ids_every_split(impl, doc) == {"A b", "aB", "x\ny", "café"}


def test_first_duplicate_attribute_wins(impl: Any) -> None:
    assert ids_every_split(impl, b"<body><div id=first id=second>") == {"first"}


def test_foreign_content_ids_count_svg_a_name_does_not(impl: Any) -> None:
    doc = b"<body><svg id=s><g id=g><a name=svgname id=sa></a></g></svg><math id=m><mi id=mi>"
    assert ids_every_split(impl, doc) == {"s", "g", "sa", "m", "mi"}


def test_template_content_is_not_searched(impl: Any) -> None:
    doc = (
        b"<body><template id=t><div id=inside><template id=nested></template>"
        b"<svg id=insvg></svg></template><div id=after><template><a name=tn></a></template>"
    )
    assert ids_every_split(impl, doc) == {"t", "after"}


def test_ids_in_raw_text_and_comments_are_not_elements(impl: Any) -> None:
    doc = (
        b"<body><!-- <p id=c> --><script>'<p id=s>'</script><style><p id=st></style>"
        b"<textarea><p id=ta></textarea><title><p id=ti></title><p id=real>"
    )
    assert ids_every_split(impl, doc) == {"real"}


def test_ids_of_tags_not_in_the_link_set_in_every_document_mode(impl: Any) -> None:
    """Head, a body that a <frameset> could still remove, an ordinary body."""
    doc = b"<head><link id=l><style id=st></style></head><div id=held><p id=p>text<b id=b>"
    assert ids_every_split(impl, doc) == {"l", "st", "held", "p", "b"}


@pytest.mark.skipif(SKIP_WITHOUT_CORPUS, reason=NO_CORPUS)
def test_same_ids_as_html5lib_dom_on_corpus_pages(impl: Any) -> None:
    """Every id and ``<a name>`` of html5lib's DOM (outside templates) is in ``ids``, and
    ``ids`` has nothing html5lib's DOM lacks, on pages without templates or noscript."""
    done = 0
    for page in sorted(PAGES, key=lambda p: p.stat().st_size):
        data = page.read_bytes()
        if b"<template" in data or b"<noscript" in data.lower() or b" id=" not in data:
            continue
        dom = html5lib.parse(data, treebuilder="etree", namespaceHTMLElements=False)
        want = {el.get("id") for el in dom.iter() if el.get("id")}
        want |= {el.get("name") for el in dom.iter("a") if el.get("name")}
        rng = random.Random(page.name)
        sizes = [rng.randint(1, 3000) for _ in range(len(data) // 1500)]
        ex = collect(impl, data, sizes, None)
        assert ex.ids == want, page.name
        assert ex.ids_complete
        done += 1
        if done == 8:
            break
    assert done == 8


@pytest.mark.skipif(SKIP_WITHOUT_CORPUS, reason=NO_CORPUS)
def test_links_do_not_depend_on_collect_ids(impl: Any) -> None:
    for page in PAGES[:: max(1, len(PAGES) // 15)]:
        data = page.read_bytes()
        for link_set in ("links", "resources"):
            plain = run_strict(impl, data, [4000] * (len(data) // 4000), None, link_set=link_set)
            ex = impl(BASE, None, link_set=link_set, collect_ids=True)
            with_ids = ex.feed(data) + ex.close()
            assert with_ids == plain, (page.name, link_set)


def test_off_by_default_and_then_incomplete(impl: Any) -> None:
    ex = impl(BASE, "utf-8")
    ex.feed(b"<body><div id=x><a href=y>")
    ex.close()
    assert ex.ids == set()
    assert ex.ids_complete is False  # nothing was collected: a checker cannot judge


def test_bounded_past_max_ids(impl: Any) -> None:
    doc = b"<body>" + b"".join(b"<i id=%d>" % i for i in range(MAX_IDS + 10))
    ex = collect(impl, doc, [65536] * (len(doc) // 65536))
    assert len(ex.ids) == MAX_IDS
    assert ex.ids_complete is False


def test_bounded_past_max_id_chars(impl: Any) -> None:
    big = b"x" * 1000
    doc = b"<body>" + b"".join(b"<i id=%d%s>" % (i, big) for i in range(5000))  # 5 M chars
    ex = collect(impl, doc)
    assert ex.ids_complete is False
    total = sum(map(len, ex.ids))
    assert MAX_ID_CHARS - 1004 < total <= MAX_ID_CHARS


def test_an_id_over_max_token_makes_the_set_incomplete(impl: Any) -> None:
    doc = b"<body><div id=" + b"x" * 300 + b"><p id=ok>"
    ex = collect(impl, doc, [7] * 50, max_token=100)
    assert ex.ids == {"ok"}
    assert ex.ids_complete is False


def test_a_guessed_encoding_keeps_both_decodings(impl: Any) -> None:
    """No charset and ASCII-only first 1024 bytes: the encoding is still a guess when a
    non-ASCII id comes; it is kept as windows-1252 and as UTF-8 (no false "missing"), and it
    decides nothing for the links."""
    doc = b"<body>" + b" " * 1100 + b"<p id=caf\xc3\xa9><a href=\xc3\xa9>"
    ex = collect(impl, doc, None, None)
    assert {"cafÃ©", "café"} <= ex.ids
    plain = run_strict(impl, doc, None, None)
    assert [x.raw for x in plain] == ["é"]


_PIECES = [
    "<div id=a>",
    "<p id='b c'>",
    "<a name=n>",
    "<a name=n2 id=x>",
    "<svg id=s>",
    "</svg>",
    "<math>",
    "<template id=t>",
    "</template>",
    "<template>",
    "<img id=i>",
    "<!--",
    "-->",
    "<script>",
    "</script>",
    "<textarea>",
    "</textarea>",
    "<frameset id=f>",
    "<form id=fo>",
    "text",
    "\n",
    "é",
    "<",
    "<i id=",
    "'",
    '"',
    ">",
    "&amp;",
    "<table><tr><td>",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_PIECES), max_size=30), data=st.data())
def test_any_chunking_same_ids_in_both_twins(pieces: list[str], data: Any) -> None:
    doc = "".join(pieces).encode()
    want = collect(IMPLS["py"], doc)
    for name in IMPL_NAMES:
        sizes = data.draw(st.lists(st.integers(0, 9), max_size=30), label=name)
        got = collect(IMPLS[name], doc, sizes)
        assert (got.ids, got.ids_complete) == (want.ids, want.ids_complete), name


def test_the_default_extractor_has_the_option() -> None:
    ex = LinkExtractor(BASE, "utf-8", collect_ids=True)
    ex.feed(b"<body><h2 id=usage>")
    ex.close()
    assert ex.ids == {"usage"} and ex.ids_complete
