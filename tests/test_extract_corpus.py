"""The extractor over the real pages of the shared corpus.

* Differential: for every page, the set of raw ``a``/``area`` href values equals the one
  html5lib (a spec-compliant HTML parser) puts in its DOM.
* Chunk invariance: every page fed whole, in random splits, and (a few small pages) one byte
  at a time gives the same links.
"""

from __future__ import annotations

import functools
import random
import sys
from pathlib import Path
from typing import Any

import html5lib
import pytest

from crawler.extract import Link
from crawler.extract._html import LINK_SETS, parse_srcset
from tests.extract_common import BASE, HTML_NS, IMPLS, NO_CORPUS, PAGES, SKIP_WITHOUT_CORPUS
from tests.extract_common import LINK_ELEMENTS as _LINK_ELEMENTS

pytestmark = pytest.mark.skipif(SKIP_WITHOUT_CORPUS, reason=NO_CORPUS)


@pytest.fixture(params=[name for name, cls in IMPLS.items() if cls is not None])
def impl(request: pytest.FixtureRequest) -> Any:
    return IMPLS[request.param]


def new(impl: Any, **kw: Any) -> Any:
    ex = impl(BASE, **kw)
    try:
        ex._strict = True
    except AttributeError:  # pragma: no cover
        pass
    return ex


def feed_split(impl: Any, data: bytes, cuts: list[int]) -> list[Link]:
    ex = new(impl)
    out: list[Link] = []
    prev = 0
    for c in cuts:
        out += ex.feed(data[prev:c])
        prev = c
    out += ex.feed(data[prev:])
    return out + ex.close()


class _RawResolver:
    """Stands in for the URL resolver: every value "resolves" to itself, so the differential
    test sees the raw values, including those that are not valid URLs."""

    valid = True

    def __init__(self, base: str, query_codec: str | None = None) -> None:
        self.base = base

    def resolve(self, raw: str) -> str:
        return raw


@functools.cache  # one html5lib parse a page, shared by the implementations
def _dom_links(page: Path) -> tuple[set[str], set[tuple[str, str, str]]]:
    """From html5lib's DOM: the a/area href values, and the (tag, attr, value) of every
    attribute of the "resources" link set (srcset split into its URLs)."""
    doc = html5lib.parse(page.read_bytes(), treebuilder="etree", namespaceHTMLElements=True)
    hrefs = set()
    resources = set()
    for el in doc.iter():
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag in _LINK_ELEMENTS:
            href = el.get("href")
            if href is not None:
                hrefs.add(href)
                resources.add((tag.rpartition("}")[2], "href", href))
        if tag.startswith(f"{{{HTML_NS}}}"):
            name = tag.rpartition("}")[2]
            for attr in LINK_SETS["resources"].get(name, ()):
                value = el.get(attr)
                if value is None:
                    continue
                if attr == "srcset":
                    resources.update((name, attr, u) for u in parse_srcset(value))
                else:
                    resources.add((name, attr, value))
    return hrefs, resources


def test_corpus_is_there() -> None:
    assert len(PAGES) >= 100


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_same_links_as_html5lib(impl: Any, page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = page.read_bytes()
    monkeypatch.setattr(sys.modules[impl.__module__], "Resolver", _RawResolver)
    hrefs, resources = _dom_links(page)
    ex = new(impl)
    links = ex.feed(data) + ex.close()
    # No page of the corpus needs an exception: any difference is a bug.
    assert {x.raw for x in links if x.tag in ("a", "area")} == hrefs
    ex = new(impl, link_set="resources")
    links = ex.feed(data) + ex.close()
    assert {(x.tag, x.attr, x.raw) for x in links} == resources


@pytest.mark.parametrize("page", PAGES, ids=[p.stem for p in PAGES])
def test_chunk_invariance_random_splits(impl: Any, page: Path) -> None:
    data = page.read_bytes()
    whole = new(impl)
    want = whole.feed(data) + whole.close()
    rnd = random.Random(page.name)
    for max_chunk in (31, 1500):
        cuts = sorted(rnd.sample(range(1, len(data)), min(len(data) - 1, len(data) // max_chunk)))
        assert feed_split(impl, data, cuts) == want


def test_chunk_invariance_byte_at_a_time(impl: Any) -> None:
    done = 0
    for page in sorted(PAGES, key=lambda p: p.stat().st_size):
        data = page.read_bytes()
        whole = new(impl)
        want = whole.feed(data) + whole.close()
        if len(want) < 5:
            continue  # the smallest pages with links are the interesting ones here
        assert feed_split(impl, data, list(range(1, len(data)))) == want
        done += 1
        if done == 3:
            break
    assert done == 3


def test_corpus_links_resolve(impl: Any) -> None:
    # Sanity over real pages: plenty of links, all absolute and fragment-free.
    total = 0
    for page in PAGES[:20]:
        ex = new(impl)
        links = ex.feed(page.read_bytes()) + ex.close()
        total += len(links)
        for x in links:
            assert "#" not in x.url
            assert ":" in x.url
    assert total > 1000


def test_utf16_copies_of_pages_give_the_same_links(impl: Any) -> None:
    """The transcoding path (UTF-16 is decoded, then scanned) against the bytes path."""
    done = 0
    for page in PAGES:
        data = page.read_bytes()
        ex = new(impl)
        want = ex.feed(data) + ex.close()
        if ex.encoding != "utf-8" or len(want) < 20:
            continue
        text = data.decode("utf-8", "replace")
        if text.startswith("\ufeff"):
            text = text[1:]
        for codec, bom in (("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff")):
            copy = bom + text.encode(codec)
            cuts = list(range(1001, len(copy), 1001))  # odd sizes: code units split
            assert feed_split(impl, copy, cuts) == want, (page.name, codec)
        done += 1
        if done == 5:
            break
    assert done == 5
