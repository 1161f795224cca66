"""``crawler audit`` on a site built to hold each finding once (tests/audit_site.py), its near
misses, a crawl cut by --max-pages, and the parsers of heads, Link headers and sitemaps."""

from __future__ import annotations

import gzip
import importlib.util
import re
import sys
from pathlib import Path

import pytest
from aiohttp import web
from audit_site import EXPECTED, MESH, _page, site_app

from crawler.audit import audit
from crawler.audit.analysis import hreflang_valid
from crawler.audit.head import parse_link_header, read_head, robots_noindex
from crawler.audit.model import KINDS
from crawler.audit.sitemaps import SitemapError, SitemapParser

pytestmark = pytest.mark.timeout(60)


def _line_of(html: str, needle: str) -> int:
    for number, line in enumerate(html.split("\n"), 1):
        if needle in line:
            return number
    raise AssertionError(needle)


async def _audit(serve, **options):  # type: ignore[no-untyped-def]
    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    report = await audit(base + "/", **options)
    return base, report


async def test_the_site_gives_exactly_its_planted_findings(serve) -> None:  # type: ignore[no-untyped-def]
    base, report = await _audit(serve)
    assert report.complete and report.limit is None
    got = [(f.kind, f.url.removeprefix(base)) for f in report.findings]
    assert len(got) == len(set(got))  # each once
    assert set(got) == EXPECTED
    by = {(f.kind, f.url.removeprefix(base)): f for f in report.findings}

    # a link to a redirect: every page and line that links it, and the URL to link instead
    moved = by["redirect", "/moved"]
    assert moved.target == base + "/about"
    line = _line_of(_page("/"), 'href="/moved"')
    assert [(p.page, p.line, p.column, p.tag) for p in moved.places] == [
        (base + "/", line, 1, "a"),
        (base + "/about", _line_of(_page("/about"), 'href="/moved"'), 1, "a"),
    ]
    chain = by["redirect_chain", "/chain-start"]
    assert chain.target == base + "/hub" and "2 hops" in chain.detail
    # a canonical's place is its <link> in the head; a header's is the header
    conflict = by["canonical_conflict", "/c-conflict"]
    assert [(p.line, p.tag) for p in conflict.places] == [
        (_line_of(_page("/c-conflict"), 'rel="canonical"'), "link"),
        (0, "header"),
    ]
    assert by["canonical_not_ok", "/c-404"].target == base + "/gone"
    assert "http_404" in by["canonical_not_ok", "/c-404"].detail
    # the orphan: where the sitemap lists it
    orphan = by["orphan", "/orphan"]
    assert orphan.places[0].page == base + "/sitemap.xml" and orphan.places[0].line == 5
    # a deep page: its click depth, and the links that reach it
    deep = by["deep_page", "/d5"]
    assert "5 clicks" in deep.detail
    assert {p.page.removeprefix(base) for p in deep.places} == {"/d4a", "/d4b"}
    assert by["nofollow_inlinks_only", "/nf"].places[0].page == base + "/"
    noindex = by["linked_noindex", "/noindexed"]
    assert len({p.page for p in noindex.places}) == len(MESH) - 3  # (itself, secret, dead-end)
    # the depth distribution: the seed, the mesh and the chain's levels
    assert report.stats.depth == {"0": 1, "1": 26, "2": 2, "3": 2, "4": 2, "5": 1}
    assert report.stats.sitemaps == 2 and report.stats.sitemap_urls == 5


async def test_the_near_misses_give_nothing(serve) -> None:  # type: ignore[no-untyped-def]
    base, report = await _audit(serve)
    about = {f.url.removeprefix(base) for f in report.findings}
    # own canonical, a reciprocal pair with x-default (HTML and sitemap), a redirect the site
    # does not link (it links its target), a pair listed back
    for path in ("/about", "/en", "/de", "/new", "/old-near", "/da", "/hub", "/it"):
        assert path not in about


async def test_a_crawl_cut_by_max_pages_lists_no_orphan_as_fact(serve) -> None:  # type: ignore[no-untyped-def]
    base, report = await _audit(serve, max_pages=3)
    assert not report.complete and report.limit == "--max-pages 3"
    kinds = {f.kind for f in report.findings}
    assert "orphan" not in kinds
    not_linked = [f for f in report.findings if f.kind == "not_linked"]
    # the orphan, and the page the crawl would have reached through a redirect
    assert [f.url for f in not_linked] == [base + "/orphan", base + "/via-redirect-only"]
    assert all("--max-pages 3" in f.detail for f in not_linked)


async def test_a_bad_click_depth_is_refused() -> None:
    with pytest.raises(ValueError, match="max_click_depth"):
        await audit("http://127.0.0.1:9/", max_click_depth=-1)


def test_head_scan_reads_the_head_only() -> None:
    html = (
        "<!doctype html>\n<html><head><base href='/sub/'>\n"
        '<link rel="Canonical" href="a.html">\n'
        '<LINK rel="alternate" hreflang="de-CH" href="/de">\n'
        "<meta name=ROBOTS content='NOINDEX'>\n"
        "</head><body><div>\n"
        '<link rel="canonical" href="/in-the-body">\n'
    )
    facts = read_head(html)
    assert facts.base == "/sub/"
    assert [(c.href, c.line, c.column) for c in facts.canonicals] == [("a.html", 3, 1)]
    assert [(a.hreflang, a.href, a.line) for a in facts.alternates] == [("de-CH", "/de", 4)]
    assert facts.noindex is not None and facts.noindex.line == 5


def test_link_header_and_robots_directives() -> None:
    canonicals, alternates = parse_link_header(
        '<https://a.example/x>; rel="canonical", <https://a.example/de>; rel=alternate; '
        'hreflang="de", <https://a.example/s.css>; rel=stylesheet'
    )
    assert [c.href for c in canonicals] == ["https://a.example/x"]
    assert [(a.hreflang, a.href, a.source) for a in alternates] == [
        ("de", "https://a.example/de", "header")
    ]
    assert robots_noindex("noindex, nofollow") and robots_noindex("None")
    assert not robots_noindex("googlebot: noindex") and not robots_noindex("index, follow")


@pytest.mark.parametrize(
    ("code", "valid"),
    [
        ("en", True),
        ("en-GB", True),
        ("zh-Hant-TW", True),
        ("x-default", True),
        ("X-Default", True),
        ("en_GB", False),
        ("english", False),
        ("xx-YY", False),
        ("", False),
    ],
)
def test_hreflang_codes(code: str, valid: bool) -> None:
    assert hreflang_valid(code) is valid


def _feed_in_pieces(parser: SitemapParser, data: bytes) -> None:
    for i in range(0, len(data), 7):
        parser.feed(data[i : i + 7])
    parser.close()


def test_sitemap_parser_urlset_index_and_gzip() -> None:
    urlset = (
        b'<?xml version="1.0"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'
        b' xmlns:xhtml="http://www.w3.org/1999/xhtml">\n<url>\n <loc> https://a.example/ </loc>\n'
        b' <xhtml:link rel="alternate" hreflang="fr" href="https://a.example/fr"/>\n</url>\n'
        b"<url><loc>https://a.example/b</loc></url></urlset>"
    )
    for data in (urlset, gzip.compress(urlset)):
        parser = SitemapParser("https://a.example/s.xml")
        _feed_in_pieces(parser, data)
        assert [(e.loc, e.line) for e in parser.entries] == [
            ("https://a.example/", 4),
            ("https://a.example/b", 7),
        ]
        assert [(a.hreflang, a.href) for a in parser.entries[0].alternates] == [
            ("fr", "https://a.example/fr")
        ]
    index = SitemapParser("https://a.example/i.xml")
    _feed_in_pieces(
        index,
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<sitemap><loc>https://a.example/s1.xml</loc></sitemap></sitemapindex>",
    )
    assert index.children == [("https://a.example/s1.xml", 1)] and not index.entries


def test_sitemap_parser_refuses_entities_and_bad_xml() -> None:
    bomb = (
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>&b;</loc></url>'
        b"</urlset>"
    )
    with pytest.raises(SitemapError, match="entities"):
        _feed_in_pieces(SitemapParser("https://a.example/s.xml"), bomb)
    with pytest.raises(SitemapError, match="well-formed"):
        _feed_in_pieces(SitemapParser("https://a.example/s.xml"), b"<urlset><url></urlset>")


def test_the_test_site_plants_each_kind_once() -> None:
    """Every kind of finding the audit knows is planted (or stands for a cut crawl)."""
    planted = {kind for kind, _ in EXPECTED}
    assert set(KINDS) - planted == {"not_linked"}
    assert re.search(r"noindex", _page("/noindexed"))


# -- real pages and a real documentation site: no false finding --

_ROOT = Path(__file__).resolve().parent.parent
_CORPUS = _ROOT.parent / "shared" / "corpus" / "pages"
_SMALL = _ROOT / "benchmarks" / "crawl" / "sitegen_small.py"
HEAD_BYTES = 65536  # (what the audit's html.parser scan was given of each page)


def _lxml_head(text: str) -> tuple[list[str], list[tuple[str, str]], bool]:
    """What lxml's HTML parser puts in the document's <head>: canonicals, alternates, noindex."""
    import lxml.html  # noqa: PLC0415  (the test extra)

    head = lxml.html.document_fromstring(text).find("head")
    canonicals: list[str] = []
    alternates: list[tuple[str, str]] = []
    noindex = False
    for el in head.iter("link", "meta") if head is not None else ():
        if el.tag == "link" and el.get("href") is not None:
            rel = (el.get("rel") or "").lower().split()
            if "canonical" in rel:
                canonicals.append(el.get("href").strip())
            if "alternate" in rel and el.get("hreflang") is not None:
                alternates.append((el.get("hreflang").strip(), el.get("href").strip()))
        elif el.tag == "meta" and (el.get("name") or "").strip().lower() == "robots":
            noindex = noindex or robots_noindex(el.get("content") or "")
    return canonicals, alternates, noindex


@pytest.mark.skipif(not _CORPUS.is_dir(), reason="needs ../shared/corpus/pages")
def test_real_pages_heads_read_as_lxml_reads_them() -> None:
    """114 real pages: the head scan finds the canonicals, alternates and noindex that lxml's
    parser finds in the same bytes (73 pages with a canonical, 12 with hreflang), and every
    hreflang value they use is a valid tag (no false hreflang_invalid_code)."""
    pages = sorted(_CORPUS.glob("*.html"))
    with_canonical = with_alternates = 0
    for path in pages:
        text = path.read_bytes()[:HEAD_BYTES].decode("utf-8", "replace")
        facts = read_head(text)
        mine = (
            [c.href for c in facts.canonicals],
            [(a.hreflang, a.href) for a in facts.alternates],
            facts.noindex is not None,
        )
        assert mine == _lxml_head(text), path.name
        with_canonical += bool(facts.canonicals)
        with_alternates += bool(facts.alternates)
        assert all(hreflang_valid(a.hreflang) for a in facts.alternates), path.name
    assert len(pages) > 100 and with_canonical > 50 and with_alternates > 5


def _static_app(root: Path) -> web.Application:
    async def handle(request: web.Request) -> web.StreamResponse:
        name = request.path.lstrip("/") or "index.html"
        target = root / name
        if "/" in name or not target.is_file():
            raise web.HTTPNotFound()
        return web.Response(body=target.read_bytes(), content_type="text/html")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    return app


@pytest.mark.skipif(not _SMALL.exists(), reason="needs benchmarks/crawl/sitegen_small.py")
async def test_a_documentation_site_has_no_finding_it_cannot_have(serve, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The benchmark's DocBook-like manual (every page reachable from / in two steps through
    the tables of contents, no redirect, canonical, hreflang, sitemap, noindex or nofollow):
    the audit finds none of those, every page at click depth <= 2, none without outlinks."""
    spec = importlib.util.spec_from_file_location("audit_sitegen_small", _SMALL)
    assert spec is not None and spec.loader is not None
    sitegen_small = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sitegen_small
    spec.loader.exec_module(sitegen_small)
    n = 300
    sitegen_small.build_site(tmp_path, n, seed=3)
    server = await serve(_static_app(tmp_path))
    report = await audit(str(server.make_url("/")))
    assert report.complete and report.stats.pages == n
    possible = {"single_inlink"}  # a manual may link a section from one place only
    assert {f.kind for f in report.findings} <= possible
    assert max(int(d) for d in report.stats.depth) <= 2 and "unreached" not in report.stats.depth
