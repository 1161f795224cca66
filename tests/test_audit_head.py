"""The audit's head facts come from the crawl's extractor (``Crawler(head_facts=True)``), not
from a second parse of each page's kept bytes: the page job hands the extractor's facts with
the page, they are those of the html.parser scan the audit used before (``read_head``), and
an audit whose html.parser scan would fail still reports every planted finding."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from audit_site import EXPECTED, site_app

from crawler import CrawlConfig
from crawler.audit import audit
from crawler.audit import head as head_module
from crawler.audit.head import read_head
from crawler.core.engine import Crawler
from tests.extract_common import head_plain

pytestmark = pytest.mark.timeout(60)

_PAGE = (
    "<!doctype html>\n<html><head>\n<title>{n}</title>\n"
    "<link rel=canonical href='/p/{n}'>\n"
    "<link rel=alternate hreflang=de href='/de/{n}'>\n"
    "<meta name=robots content='{robots}'>\n"
    "</head><body><a href='/p/{next}'>next</a><link rel=canonical href=/body></body></html>\n"
)


def _site() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        robots = "noindex" if n % 2 else "index, follow"
        body = _PAGE.format(n=n, next=(n + 1) % 6, robots=robots)
        # one page in Shift_JIS with a non-ASCII title: columns count code points
        if n == 3:
            body = body.replace("<title>3", "<title>テスト3")
            return web.Response(
                body=body.encode("shift_jis"), content_type="text/html", charset="shift_jis"
            )
        return web.Response(text=body, content_type="text/html")

    async def text(request: web.Request) -> web.Response:
        return web.Response(text="<link rel=canonical href=/x>", content_type="text/plain")

    app = web.Application()
    app.router.add_get("/p/{n}", page)
    app.router.add_get("/plain.txt", text)
    return app


async def _crawl(seeds: tuple[str, ...], **kw: Any) -> dict[str, Any]:
    pages = {}
    async with Crawler(CrawlConfig(seeds=seeds, max_pages=20), **kw) as crawler:
        async for page in crawler:
            pages[page.url] = page
    return pages


async def test_the_page_job_hands_the_extractors_head_facts(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_site())
    seeds = (str(server.make_url("/p/0")), str(server.make_url("/plain.txt")))
    pages = await _crawl(seeds, head_facts=True)
    html = [p for url, p in pages.items() if "/p/" in url]
    assert len(html) == 6
    for page in html:
        n = page.url.rsplit("/", 1)[1]
        body = _PAGE.format(
            n=n, next=(int(n) + 1) % 6, robots="noindex" if int(n) % 2 else "index, follow"
        )
        if n == "3":
            body = body.replace("<title>3", "<title>テスト3")
        assert head_plain(page.head_facts) == head_plain(read_head(body)), page.url
        assert [c.href for c in page.head_facts.canonicals] == [f"/p/{n}"]
        assert (page.head_facts.noindex is not None) == (int(n) % 2 == 1)
    # not HTML: no head read; and off unless asked
    assert pages[seeds[1]].head_facts is None
    plain = await _crawl(seeds[:1])
    assert plain and all(p.head_facts is None for p in plain.values())


async def test_the_audit_parses_no_head_with_html_parser(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def refuse(self: Any, data: str) -> None:
        raise RuntimeError("the audit read a head with html.parser")

    monkeypatch.setattr(head_module._HeadScanner, "feed", refuse)
    server = await serve(site_app())
    base = str(server.make_url("/")).rstrip("/")
    report = await audit(base + "/")
    assert report.complete
    assert {(f.kind, f.url.removeprefix(base)) for f in report.findings} == EXPECTED
