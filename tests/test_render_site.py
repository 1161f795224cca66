"""The client-rendered test site hides what it says it hides: a crawl without a browser finds
every page the home links to and none of the links only JavaScript makes."""

from __future__ import annotations

from crawler import crawl
from tests.render_site import FORBIDDEN_LINKS, PAGES, RenderSite, start


async def test_static_crawl_sees_no_rendered_link() -> None:
    site = RenderSite(pages=8)
    url, _other, runners = await start(site)
    try:
        result = await crawl(url + "/", max_pages=200, per_host=4, delay=0.0)
    finally:
        for runner in runners:
            await runner.cleanup()
    fetched = {page.url[len(url) :] for page in result.pages}
    assert set(PAGES) <= fetched
    rendered_only = {link for spec in PAGES.values() for link in spec.rendered_only}
    assert not (rendered_only | set(FORBIDDEN_LINKS)) & fetched
    # the browser-only paths were never asked by the crawler
    assert "/api/links.json" not in site.log.paths()
    assert site.log.paths("other") == []
