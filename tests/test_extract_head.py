"""``LinkExtractor(head_facts=True)``: what the head says about the page (canonicals, hreflang
alternates, base, robots noindex, each with its line and column), read by the extractor's
own tokenizer instead of a second parse.

The two twins give the same facts (and the same links) for any bytes and any chunking, the
links are those of an extractor without ``head_facts``, and the facts are those of the
html.parser scan the audit used before (``crawler.audit.head.read_head``) on the corpus
pages and on generated heads. Where the two legitimately differ the extractor follows the
WHATWG tokenizer and tree builder: a ``<template>``'s content is not in the document, and
markup html.parser tokenizes otherwise (tags inside ``<title>``, a ``<`` in an attribute
name...) is not generated; `test_where_html_parser_differs` pins the extractor's answer there.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.audit.head import read_head
from crawler.extract import LinkExtractorC, LinkExtractorPy
from crawler.extract._headfacts import MAX_HEAD_LINKS, HeadFacts
from tests.extract_common import BASE, IMPL_NAMES, IMPLS, PAGES, corpus_params, feed_in, head_plain
from tests.test_extract_accel import DOCS, OPTIONS, PIECES, SPLITS, needs_c


def _run(impl: Any, data: bytes, sizes: list[int], **kw: Any) -> tuple[Any, ...]:
    """Links, base, nofollow, encoding and head facts of ``data`` fed in ``sizes``."""
    out, ex = feed_in(impl, data, sizes, **kw)
    return out, ex.base_url, ex.nofollow, ex.encoding, getattr(ex, "head", None)


def _facts(impl: Any, data: bytes, sizes: list[int] | None = None, **kw: Any) -> HeadFacts:
    facts = _run(impl, data, sizes or [], head_facts=True, **kw)[4]
    assert isinstance(facts, HeadFacts)
    return facts


_plain = head_plain


HEAD = (
    "<!DOCTYPE html>\n<html lang=en>\n<head>\n  <meta charset=utf-8>\n"
    "  <title>T <link rel=canonical href=/not-a-tag></title>\n"
    "  <base href=' /sub/ '><base href=/second/>\n"
    '  <META NAME="Robots" CONTENT="index, googlebot: noindex">\n'
    "  <meta name=robots content='NoIndex,follow'>\n"
    "  <meta name=robots content=none>\n"
    '  <link REL="Canonical  Stylesheet" href="  https://x.example/a  ">\n'
    "  <script>document.write('<link rel=canonical href=/script>')</script>\n"
    "  <link rel=alternate hreflang=' de-CH ' href=/de><link rel=alternate href=/no-lang>\n"
    "  <!-- <link rel=canonical href=/comment> -->\n"
    "  <template><link rel=canonical href=/template><div></div><base href=/t/></template>\n"
    "  <link rel='alternate canonical' hreflang=x-default href='/é'>\n"
    "</head>\n<body><link rel=canonical href=/body><a href=/a>a</a></body></html>\n"
)


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_head_facts_with_their_places(impl_name: str) -> None:
    facts = _facts(IMPLS[impl_name], HEAD.encode())
    assert _plain(facts) == (
        [("https://x.example/a", 10, 3, ""), ("/é", 15, 3, "")],
        [("/de", 12, 3, "de-CH"), ("/é", 15, 3, "x-default")],
        "/sub/",
        ("NoIndex,follow", 8, 3, ""),
        True,
    )


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_the_head_ends_at_the_first_body_tag_not_at_text(impl_name: str) -> None:
    impl = IMPLS[impl_name]
    text_first = b"<title>t</title>hello <link rel=canonical href=/c>"
    assert [c.href for c in _facts(impl, text_first).canonicals] == ["/c"]
    for body in (b"<div>", b"<p>", b"<body>", b"<svg>", b"<img src=x>", b"<frameset>"):
        doc = b"<link rel=canonical href=/a>" + body + b"<link rel=canonical href=/b>"
        assert [c.href for c in _facts(impl, doc).canonicals] == ["/a"], body
    # svg content inside a head template: not in the document, and the head goes on after
    doc = (
        b"<template><svg><link rel=canonical href=/t></svg></template><link rel=canonical href=/h>"
    )
    assert [c.href for c in _facts(impl, doc).canonicals] == ["/h"]


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_columns_count_code_points_and_values_are_decoded(impl_name: str) -> None:
    impl = IMPLS[impl_name]
    doc = "<title>テスト</title><link rel=canonical href='/a&amp;b'>\r\n<base href=/x/>"
    for codec, enc in (("utf-8", "utf-8"), ("shift_jis", "shift_jis"), ("utf-16le", None)):
        data = doc.encode(codec)
        if codec == "utf-16le":
            data = b"\xff\xfe" + data
        facts = _facts(impl, data, encoding=enc)
        assert _plain(facts) == ([("/a&b", 1, 19, "")], [], "/x/", None, True), codec


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_character_references_in_rel_and_name(impl_name: str) -> None:
    """A rel or a meta name written with references is read as the DOM holds it (the compiled
    twin's C check sends such values to the shared code; plain ones it reads itself)."""
    doc = (
        b"<link rel='&#67;anonical' href=/a><link rel=canonicalx href=/x>"
        b"<link rel='stylesheet' href=/s><meta name='ro&#x62;ots' content='NoIndex'>"
        b"<meta name=' ROBOTS ' content=none>"
    )
    facts = _facts(IMPLS[impl_name], doc)
    assert [c.href for c in facts.canonicals] == ["/a"]
    assert facts.noindex is not None and facts.noindex.href == "NoIndex"


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_head_links_kept_are_bounded(impl_name: str) -> None:
    n = MAX_HEAD_LINKS + 5
    doc = b"<link rel=canonical href=/c>" * n + b"<link rel=alternate hreflang=de href=/d>" * 3
    facts = _facts(IMPLS[impl_name], doc)
    assert len(facts.canonicals) == MAX_HEAD_LINKS and not facts.complete
    assert len(facts.alternates) == 3
    assert _facts(IMPLS[impl_name], HEAD.encode()).complete


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_a_head_is_read_whole_however_long(impl_name: str) -> None:
    """The audit's html.parser scan read the first 64 KiB; the extractor reads the head to
    its end (two corpus pages have their canonical past 64 KiB, after inline styles)."""
    style = b"<style>" + b"a{color:red}\n" * 8000 + b"</style>"
    doc = b"<head>" + style + b"\n<link rel=canonical href=/late></head><body>"
    facts = _facts(IMPLS[impl_name], doc, [4096] * 40)
    assert [(c.href, c.line, c.column) for c in facts.canonicals] == [("/late", 8002, 1)]
    assert read_head(doc[:65536].decode()).canonicals == []


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_head_facts_off_by_default(impl_name: str) -> None:
    assert _run(IMPLS[impl_name], HEAD.encode(), [])[4] is None


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_a_value_over_max_token_is_no_fact(impl_name: str) -> None:
    doc = b"<link rel=canonical href=/long-value><link rel=canonical href=/ok>"
    facts = _facts(IMPLS[impl_name], doc, max_token=10)
    assert [c.href for c in facts.canonicals] == ["/ok"]


# -- the twins agree, whatever the chunking; the links do not change --

HEAD_PIECES = [
    "<link rel=canonical href=",
    "<link rel='alternate' hreflang=",
    " href=",
    " rel=Canonical",
    " hreflang=de",
    "<LINK REL=ALTERNATE HREFLANG='fr' HREF='/fr'>",
    "<meta name=robots content=",
    "<meta name=ROBOTS content='noindex'>",
    "<meta name=robots content='bot: noindex, none'>",
    "<base href=",
    "<template>",
    "</template>",
    "<head>",
    "</head>",
    "<body>",
    "<div>",
    "<html>",
    "<noscript>",
    "</noscript>",
    # what the compiled twin's C check must pass on (a reference, non-ASCII) or may skip
    "<link rel='&#99;anonical' href=/ref>",
    "<meta name='ro&#98;ots' content=noindex>",
    "<meta name='robots\u00e9' content=noindex>",
    "<link rel=stylesheet href=/s>",
    "<meta name=viewport content=noindex>",
    "<link rel=canonicalx href=/x>",
]
HEAD_DOCS = st.lists(
    st.sampled_from(PIECES + HEAD_PIECES * 3 + ["/c", "'/d'", '"/e"', "x-default"]), max_size=40
).map("".join)


def _same(data: bytes, a: list[int], b: list[int], **kw: Any) -> None:
    want = _run(LinkExtractorPy, data, a, head_facts=True, **dict(kw))
    got = _run(LinkExtractorC, data, b, head_facts=True, **dict(kw))
    assert got[:4] == want[:4]
    assert _plain(got[4]) == _plain(want[4])


@needs_c
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=HEAD_DOCS, a=SPLITS, b=SPLITS, kw=OPTIONS, codec=st.sampled_from(["utf-8", "latin-1"]))
def test_generated_heads_same_in_both_twins(
    doc: str, a: list[int], b: list[int], kw: dict[str, Any], codec: str
) -> None:
    _same(doc.encode(codec, "replace"), a, b, **kw)


@needs_c
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCS, a=SPLITS, b=SPLITS, kw=OPTIONS)
def test_generated_markup_same_in_both_twins(
    doc: str, a: list[int], b: list[int], kw: dict[str, Any]
) -> None:
    _same(doc.encode("utf-8", "replace"), a, b, **kw)


@needs_c
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2000), a=SPLITS, b=SPLITS, kw=OPTIONS)
def test_arbitrary_bytes_same_in_both_twins(
    data: bytes, a: list[int], b: list[int], kw: dict[str, Any]
) -> None:
    _same(data, a, b, **kw)


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=HEAD_DOCS, a=SPLITS, kw=OPTIONS)
def test_head_facts_change_no_link_and_no_chunking_matters(
    impl_name: str, doc: str, a: list[int], kw: dict[str, Any]
) -> None:
    impl = IMPLS[impl_name]
    data = doc.encode("utf-8")
    off = _run(impl, data, [], **dict(kw))
    on = _run(impl, data, a, head_facts=True, **dict(kw))
    whole = _run(impl, data, [], head_facts=True, **dict(kw))
    assert on[:4] == off[:4]
    assert _plain(on[4]) == _plain(whole[4])


# -- the same facts as the html.parser scan the audit used --


def _reference(data: bytes, encoding: str) -> tuple[Any, ...]:
    return _plain(read_head(data.decode(encoding, "replace")))


@pytest.mark.parametrize("page", corpus_params(PAGES), ids=lambda p: getattr(p, "name", "none"))
def test_corpus_pages_facts_as_read_head_finds_them(page: Any) -> None:
    data = page.read_bytes()
    rnd = random.Random(page.name)
    sizes = [rnd.randint(1, 4096) for _ in range(len(data) // 2048)]
    found = []
    for impl_name in IMPL_NAMES:
        ex = IMPLS[impl_name](BASE, None, head_facts=True)
        ex._strict = True
        i = 0
        for k in sizes if impl_name == "c" else []:
            ex.feed(data[i : i + k])
            i += k
        ex.feed(data[i:])
        ex.close()
        codec = {"windows-1252": "cp1252"}.get(ex.encoding, ex.encoding)
        assert _plain(ex.head) == _reference(data, codec), (impl_name, page.name)
        found.append(_plain(ex.head))
    assert all(f == found[0] for f in found)


def test_corpus_has_heads_to_compare() -> None:
    if not PAGES:
        pytest.skip("../shared/corpus/pages not found")
    counts = [0, 0, 0]
    for page in PAGES:
        facts = _facts(LinkExtractorPy, page.read_bytes())
        counts[0] += bool(facts.canonicals)
        counts[1] += bool(facts.alternates)
        counts[2] += facts.base is not None
    assert counts[0] > 50 and counts[1] > 5, counts


# Heads html.parser and the WHATWG tokenizer read alike: well-formed tags, quoted or not,
# any case, any spacing and line breaks, comments, raw text; then a body with more links.
_WS = st.sampled_from([" ", "  ", "\n", "\n  ", "\t"])
_VALUE = st.sampled_from(["/c", "https://x.example/p?q=1", "../up", " /sp ", "/é", "/a&amp;b", ""])
_REL = st.sampled_from(
    [
        "canonical",
        "CANONICAL",
        "alternate",
        "Alternate Canonical",
        "stylesheet",
        "alternate nofollow",
    ]
)
_LANG = st.sampled_from(["de", " fr-CA ", "x-default", "EN"])


def _attr(name: str, value: str, quote: str) -> str:
    return f"{name}={quote}{value}{quote}"


_Q = st.sampled_from(["'", '"'])
_TAGS = st.one_of(
    st.builds(
        lambda rel, href, lang, q, ws, order: (
            "<link"
            + ws
            + ws.join(
                a
                for a in (
                    [_attr("rel", rel, q), _attr("href", href, q)]
                    + ([_attr("hreflang", lang, q)] if lang else [])
                )[:: order or 1]
            )
            + ">"
        ),
        _REL,
        _VALUE,
        st.one_of(st.none(), _LANG),
        _Q,
        _WS,
        st.sampled_from([1, -1]),
    ),
    st.builds(
        lambda name, content, q: f"<meta {_attr('name', name, q)} {_attr('content', content, q)}>",
        st.sampled_from(["robots", "ROBOTS", "googlebot", "description"]),
        st.sampled_from(["noindex", "index, follow", "NONE", "noindex, nofollow", "bot: noindex"]),
        _Q,
    ),
    st.builds(lambda href, q: f"<base {_attr('href', href, q)}/>", _VALUE, _Q),
    st.sampled_from(
        [
            "<title>a &lt;link rel=canonical href=/t></title>",
            "<script>var s = '<link rel=canonical href=/s>';</script>",
            "<style>a{}</style>",
            "<!-- <link rel=canonical href=/comment> -->",
            "<meta charset=utf-8>",
            "<noscript><link rel=stylesheet href=/n></noscript>",
            "\n",
            "text",
        ]
    ),
)
GOOD_HEADS = st.tuples(
    st.lists(_TAGS, max_size=12), st.sampled_from(["<body>", "<div>", "<p>x", "<img src=i>"])
).map(lambda t: "<!doctype html><html><head>" + "".join(t[0]) + t[1] + "".join(t[0]))


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
@settings(max_examples=300, deadline=None)
@given(doc=GOOD_HEADS, a=SPLITS)
def test_generated_heads_as_read_head_finds_them(impl_name: str, doc: str, a: list[int]) -> None:
    data = doc.encode("utf-8")
    assert _plain(_facts(IMPLS[impl_name], data, a, encoding="utf-8")) == _reference(data, "utf-8")


@pytest.mark.parametrize("impl_name", IMPL_NAMES)
def test_where_html_parser_differs(impl_name: str) -> None:
    """The extractor follows the WHATWG tokenizer and tree builder where html.parser does not."""
    impl = IMPLS[impl_name]
    cases = [
        # a template's content is not in the document (html.parser reads it; its <div> also
        # ends html.parser's scan)
        (
            b"<template><link rel=canonical href=/t><div></template><link rel=canonical href=/h>",
            ["/h"],
            ["/t"],
        ),
        # an attribute name with '<' and a quote: one tag for the tokenizer
        (b"<link rel=canonical x<'y href=/a><link rel=canonical href=/b>", ["/a", "/b"], None),
        # a <title>'s text is RCDATA, no markup (html.parser reads tags in it)
        (b"<title><link rel=canonical href=/t></title>", [], ["/t"]),
    ]
    for data, ours, theirs in cases:
        assert [c.href for c in _facts(impl, data).canonicals] == ours, data
        if theirs is not None:
            assert [c.href for c in read_head(data.decode()).canonicals] == theirs, data
