"""The ``--render auto`` rule without a browser: the test site's pages, real pages, edge cases.

The test site's ``PAGES`` table says which pages need a browser; the rule must agree on every
one of them. Real static pages (the shared corpus, and the documentation installed on the
machine: PostgreSQL, Node.js, npm, Rust's std) must never be judged as needing one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crawler.core.render_rule import (
    FEW_LINKS,
    MANY_LINKS,
    REASONS,
    PageSignals,
    judge,
    needs_render,
    scan,
)
from crawler.extract import LinkExtractor
from tests.extract_common import NO_CORPUS, SKIP_WITHOUT_CORPUS
from tests.extract_common import PAGES as CORPUS_PAGES
from tests.render_site import PAGES, RenderSite, _generated, _pages


def links_of(url: str, body: bytes) -> int:
    ex = LinkExtractor(url, None)
    return len(ex.feed(body)) + len(ex.close())


def verdict(body: bytes, url: str = "http://127.0.0.1/x") -> str | None:
    return judge([body], links_of(url, body))


SITE = RenderSite(other="http://127.0.0.2:9", pages=30, js_every=10)
SITE_PAGES = _pages(SITE)


@pytest.mark.parametrize("path", sorted(PAGES))
def test_every_test_site_page_is_judged_as_its_table_says(path: str) -> None:
    body = SITE_PAGES[path].encode()
    reason = verdict(body, "http://127.0.0.1" + path)
    assert (reason is not None) == PAGES[path].needs_render, (path, reason)
    assert reason is None or reason in REASONS


def test_the_reasons_of_the_test_site() -> None:
    reasons = {p: verdict(SITE_PAGES[p].encode()) for p in PAGES}
    assert reasons["/app/fetch"] == "mount_point"
    assert reasons["/app/router"] == "mount_point"  # (__next empty; also a router marker)
    assert reasons["/app/hash"] == "mount_point"  # id="app"
    assert reasons["/app/timer"] == "noscript"
    assert reasons["/app/shadow"] == "script_heavy"
    assert reasons["/docs/analytics"] is None  # an analytics tag on a page with content


def test_generated_sites_client_rendered_pages_only() -> None:
    for prefix in ("/spa/", "/ssr/", "/mix/"):
        for i in range(SITE.pages):
            page = _generated(f"{prefix}{i}", SITE)
            assert page is not None
            client = prefix == "/spa/" or (prefix == "/mix/" and i % SITE.js_every == 0)
            assert (verdict(page.encode()) is not None) == client, (prefix, i)


@pytest.mark.skipif(SKIP_WITHOUT_CORPUS, reason=NO_CORPUS)
def test_no_corpus_page_needs_a_browser() -> None:
    judged = {p.name: verdict(p.read_bytes()) for p in CORPUS_PAGES}
    assert len(judged) >= 100
    assert {name: r for name, r in judged.items() if r} == {}


_DOCS = {
    "postgresql": Path("/usr/share/doc/postgresql-doc-15/html"),
    "nodejs": Path("/usr/share/doc/nodejs/api"),
    "npm": Path("/usr/lib/node_modules/npm/docs/output"),
    "rust-std": Path(
        "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/std"
    ),
}


@pytest.mark.parametrize("name", sorted(_DOCS))
def test_no_page_of_an_installed_documentation_site_needs_a_browser(name: str) -> None:
    root = _DOCS[name]
    files = sorted(root.rglob("*.html"))[:1500] if root.is_dir() else []
    if not files:
        pytest.skip(f"{root} is not installed on this machine")
    judged = {str(f.relative_to(root)): verdict(f.read_bytes(), f.as_uri()) for f in files}
    assert {f: r for f, r in judged.items() if r} == {}


SHELL = (
    b"<!doctype html><html><head><title>x</title><script src=/b.js></script></head>"
    b"<body>%s</body></html>"
)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'<div id="root"></div>', "mount_point"),
        (b"<DIV ID=ROOT>\n </DIV>", "mount_point"),
        (b"<div id='app' class=x><!-- ssr outlet --></div>", "mount_point"),
        (b"<main id=__nuxt></main>", "mount_point"),
        (b"<app-root></app-root>", "mount_point"),
        (b'<div data-id="root"></div><p>' + b"words " * 200 + b"</p>", None),  # not the id
        (b'<div id="root-cause"></div><p>' + b"words " * 200 + b"</p>", None),
        (b'<div id="root"><h1>Server rendered</h1><p>' + b"words " * 200 + b"</p></div>", None),
        (b"<noscript>You need to enable JavaScript to run this app.</noscript>", "noscript"),
        (b'<noscript><img src="/pixel.gif"></noscript><p>' + b"words " * 200 + b"</p>", None),
        (b'<script id="__NEXT_DATA__" type="application/json">{}</script>', "client_router"),
        (b"<script>" + b"var a=1;" * 100 + b"</script><p>loading</p>", "script_heavy"),
        (b"<p>" + b"words " * 200 + b"</p>", None),  # a short static page with one script
    ],
)
def test_signals_on_small_pages(body: bytes, reason: str | None) -> None:
    assert verdict(SHELL % body) == reason


def test_a_page_without_script_is_never_rendered() -> None:
    assert verdict(b'<div id="root"></div><noscript>enable JavaScript</noscript>') is None


def test_a_redirect_page_is_not_rendered() -> None:
    page = (
        b'<html><head><meta http-equiv="refresh" content="0;URL=../other.html">'
        b'<script>location.replace("../other.html" + location.hash)</script></head>'
        b'<body><p>Redirecting to <a href="../other.html">other</a>...</p></body></html>'
    )
    assert verdict(page) is None


def test_many_links_are_enough_even_with_an_empty_mount_point() -> None:
    links = b"".join(b'<a href="/p%d">p</a>' % i for i in range(MANY_LINKS))
    assert verdict(SHELL % (b'<div id="root"></div>' + links)) is None
    fewer = b"".join(b'<a href="/p%d">p</a>' % i for i in range(FEW_LINKS))
    assert verdict(SHELL % (b'<div id="root"></div>' + fewer)) == "mount_point"


def test_a_page_of_many_links_is_not_scanned() -> None:
    assert scan(b"<script>", MANY_LINKS) == PageSignals(MANY_LINKS, -1)
    assert judge([b"not even looked at"], MANY_LINKS) is None


def test_chunks_are_judged_as_the_whole_body() -> None:
    body = SHELL % b'<div id="root"></div>'
    for cut in range(1, len(body), 7):
        assert judge([body[:cut], body[cut:]], 0) == "mount_point"


def test_the_rule_in_order() -> None:
    thin = PageSignals(links=0, scripts=2, text_bytes=10, script_bytes=5)
    assert needs_render(thin) == "few_links"
    assert needs_render(PageSignals(0, 0, empty_mount=True)) is None
    assert needs_render(PageSignals(FEW_LINKS, 1, empty_mount=True)) == "mount_point"
    assert needs_render(PageSignals(FEW_LINKS, 1, router=True)) is None
    assert needs_render(PageSignals(1, 1, router=True, noscript=True)) == "client_router"
    assert needs_render(PageSignals(1, 1, text_bytes=600, script_bytes=5000)) is None
