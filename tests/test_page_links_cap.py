"""Memory that a page decides (issue 27, item 4), against real servers on 127.0.0.1.

``max_links_per_page``: a page's links past the cap are counted (``links_capped``) and nothing
else, on every path a page's links take (the compiled direct path, its LinkRecord, Links).
The memory state the crawler makes itself queues only what the ``max_pages`` budget can still
reach, and lists exactly what it listed before.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from crawler.check.api import check
from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.state.memory import MemoryState
from tests.test_cli import run


def _page(prefix: str, n: int, extra: str = "") -> str:
    links = "".join(f'<a href="/{prefix}{i}">{i}</a>' for i in range(n))
    return f"<!doctype html><html><body>{links}{extra}</body></html>"


def _site(links: int, *, robots: str | None = None) -> web.Application:
    """Every page /, /pN... holds ``links`` links to pages of its own (``/<path>-i``)."""

    async def robots_txt(request: web.Request) -> web.Response:
        if robots is None:
            raise web.HTTPNotFound()
        return web.Response(text=robots)

    async def page(request: web.Request) -> web.Response:
        path = request.path.strip("/")
        prefix = f"{path}-" if path else "p"
        return web.Response(text=_page(prefix, links), content_type="text/html")

    app = web.Application()
    app.router.add_get("/robots.txt", robots_txt)
    app.router.add_get("/{tail:.*}", page)
    return app


async def _crawl(config: CrawlConfig, **kwargs: Any) -> tuple[Crawler, list[Any]]:
    pages = []
    async with Crawler(config, keep_results=True, **kwargs) as crawler:
        async for page in crawler:
            pages.append(page)
    return crawler, pages


# -- the cap --


@pytest.mark.parametrize(
    "mode",
    [{}, {"page_links": False}, {"link_record": True}],
    ids=["links", "direct", "record"],
)
async def test_links_past_the_cap_are_counted_not_offered(serve, mode: dict[str, bool]) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_site(50))
    base = f"http://127.0.0.1:{server.port}/"
    cfg = CrawlConfig(seeds=(base,), max_pages=1, max_links_per_page=10, ignore_robots=True)
    crawler, pages = await _crawl(cfg, **mode)
    # the seed and exactly the page's first 10 links, in document order
    assert crawler._admission is not None
    assert crawler._admission.links == [base] + [f"{base}p{i}" for i in range(10)]
    stats = crawler.stats
    assert (stats.links_found, stats.links_new, stats.links_capped) == (50, 11, 40)
    [page] = pages
    assert page.links_capped == 40
    if mode.get("page_links", True):
        assert [link.url for link in page.links] == [f"{base}p{i}" for i in range(10)]
        assert page.to_dict()["links_capped"] == 40
    assert (await crawler._state.counts()).seen == 11  # nothing past the cap marked seen


async def test_no_cap_with_zero_and_no_key_on_an_uncapped_page(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_site(50))
    base = f"http://127.0.0.1:{server.port}/"
    cfg = CrawlConfig(seeds=(base,), max_pages=1, max_links_per_page=0, ignore_robots=True)
    crawler, [page] = await _crawl(cfg)
    assert crawler.stats.links_new == 51 and crawler.stats.links_capped == 0
    assert "links_capped" not in page.to_dict()  # the jsonl line of a page under the cap


async def test_the_default_cap(serve) -> None:  # type: ignore[no-untyped-def]
    cap = CrawlConfig().max_links_per_page
    assert cap == 100_000
    server = await serve(_site(cap + 7))
    base = f"http://127.0.0.1:{server.port}/"
    crawler, [page] = await _crawl(
        CrawlConfig(seeds=(base,), max_pages=1, ignore_robots=True), page_links=False
    )
    assert crawler.stats.links_found == cap + 7
    assert crawler.stats.links_new == cap + 1  # the seed and the first 100,000
    assert crawler.stats.links_capped == page.links_capped == 7


async def test_cli_crawl_caps_lists_and_reports(serve, tmp_path) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_site(30))
    base = f"http://127.0.0.1:{server.port}/"
    out = await run("crawl", base, "--max-pages", "1", "--max-links-per-page", "4")
    assert out.rc == 0, out.err
    assert out.lines() == [base] + [f"{base}p{i}" for i in range(4)]
    assert "26 past --max-links-per-page" in out.err
    jsonl = tmp_path / "pages.jsonl"
    done = await run(
        "crawl", base, "--max-pages", "1", "--max-links-per-page", "4", "-f", "jsonl",
        "-o", str(jsonl), "--quiet",
    )  # fmt: skip
    assert done.rc == 0, done.err
    [line] = jsonl.read_text().splitlines()
    record = json.loads(line)
    assert record["links"] == [f"{base}p{i}" for i in range(4)]
    assert record["links_capped"] == 26


async def test_cli_rejects_a_negative_cap() -> None:
    out = await run("crawl", "http://127.0.0.1:9/", "--max-links-per-page", "-1")
    assert out.rc == 2 and "max-links-per-page" in out.err


async def test_check_does_not_check_links_past_the_cap(serve) -> None:  # type: ignore[no-untyped-def]
    async def front(request: web.Request) -> web.Response:
        links = '<a href="/ok">ok</a><a href="/gone1">1</a><a href="/gone2">2</a>'
        return web.Response(text=f"<body>{links}</body>", content_type="text/html")

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="<body>fine</body>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", front)
    app.router.add_get("/ok", ok)
    server = await serve(app)
    base = f"http://127.0.0.1:{server.port}/"
    report = await check(base, ignore_robots=True, max_links_per_page=2, recheck_delay=0)
    assert [p.url for p in report.broken] == [f"{base}gone1"]  # /gone2 is the 3rd link
    report = await check(base, ignore_robots=True, max_links_per_page=0, recheck_delay=0)
    assert sorted(p.url for p in report.broken) == [f"{base}gone1", f"{base}gone2"]


# -- what the page budget cannot reach is not queued --


async def _listed(
    base: str, state: MemoryState | None, **options: Any
) -> tuple[Crawler, list[str]]:
    cfg = CrawlConfig(seeds=(base,), max_pages=5, concurrency=1, max_links_per_page=0, **options)
    crawler, _ = await _crawl(cfg, state=state)
    assert crawler._admission is not None
    return crawler, crawler._admission.links


@pytest.mark.parametrize("robots", [None, "User-agent: *\nDisallow:\n"], ids=["404", "allow"])
async def test_max_pages_keeps_only_what_it_can_reach(serve, robots: str | None) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_site(2000, robots=robots))
    base = f"http://127.0.0.1:{server.port}/"
    # a MemoryState given to the crawler may be resumed by another: everything is queued
    kept = MemoryState()
    _, before = await _listed(base, kept)
    assert (await kept.counts()).queued > 9_000
    crawler, after = await _listed(base, None)
    state = crawler._state
    assert isinstance(state, MemoryState)
    assert after == before  # the same URLs listed, in the same order
    assert len(after) == 1 + 5 * 2000
    counts = await state.counts()
    if robots is None:  # no robots.txt: every lease is a page: 4 left after the seed
        assert counts.queued <= 4
        assert state.trimmed == len(after) - counts.done - counts.queued
    else:  # a robots.txt with rules: a lease may be disallowed and give its page back
        assert state.trimmed == 0 and counts.queued > 9_000


async def test_max_pages_with_ignore_robots_keeps_only_what_it_can_reach(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_site(2000, robots="User-agent: *\nDisallow: /nothing\n"))
    base = f"http://127.0.0.1:{server.port}/"
    _, before = await _listed(base, MemoryState(), ignore_robots=True)
    crawler, after = await _listed(base, None, ignore_robots=True)
    assert after == before
    assert (await crawler._state.counts()).queued <= 4
    assert crawler._state.trimmed > 9_000  # type: ignore[attr-defined]


async def test_robots_disallowed_leases_do_not_use_the_budget(serve) -> None:  # type: ignore[no-untyped-def]
    # Half of every page's links are disallowed: the budget counts only the pages fetched, so
    # the queue keeps what a disallowed lease would free room for (robots.txt has rules).
    async def page(request: web.Request) -> web.Response:
        path = request.path.strip("/")
        prefix = f"{path}-" if path else "p"
        links = "".join(
            f'<a href="/{"no/" if i % 2 else ""}{prefix}{i}">{i}</a>' for i in range(200)
        )
        return web.Response(text=f"<body>{links}</body>", content_type="text/html")

    async def robots_txt(request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nDisallow: /no/\n")

    app = web.Application()
    app.router.add_get("/robots.txt", robots_txt)
    app.router.add_get("/{tail:.*}", page)
    server = await serve(app)
    base = f"http://127.0.0.1:{server.port}/"
    _, before = await _listed(base, MemoryState())
    crawler, after = await _listed(base, None)
    assert after == before
    assert crawler.stats.pages == 5
