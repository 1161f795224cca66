"""Long, wide crawls: per-origin and per-URL state of the engine stays bounded (issue 13).

benchmarks/wide_crawl.py runs the same site at 100,000 origins and prints peak RSS; this test
runs 1,500 origins and checks the structures themselves: after the crawl (and while it runs)
no container of the engine or the frontier holds one entry per origin met, and nothing is
kept per page when a sink takes the results. The per-URL seen sets (8-byte fingerprints, the
price of never fetching a URL twice) and the robots.txt cache (bounded by robots.py) are
named exceptions.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Iterator

import pytest

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler, crawl
from crawler.core.results import PageResult
from crawler.state.frontier import MemorySeenSet
from crawler.state.memory import MemoryState
from tests.sitegen import RecordingSink
from tests.widesite import WideSite, patch_resolver, start

pytestmark = pytest.mark.timeout(120)

N = 1500


@pytest.fixture
def resolver() -> Iterator[None]:
    restore = patch_resolver()
    yield
    restore()


class CountingSink(RecordingSink):
    """Keeps counts only (a RecordingSink would itself grow with the crawl)."""

    def __init__(self) -> None:
        super().__init__()
        self.n_links = 0
        self.n_pages = 0

    def link(self, url: str, referrer: str, kind: str) -> None:
        self.n_links += 1

    def page(self, page: PageResult) -> None:
        self.n_pages += 1


def _containers(obj: object) -> dict[str, int]:
    sizes: dict[str, int] = {}
    names = list(getattr(obj, "__dict__", {})) + list(getattr(type(obj), "__slots__", ()))
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, dict | set | list | deque | frozenset):
            sizes[name] = len(value)
    return sizes


async def test_wide_crawl_holds_no_per_origin_state(resolver: None) -> None:
    site = WideSite(N, fanout=4)
    server = await start(site)
    try:
        sink = CountingSink()
        config = CrawlConfig(
            seeds=(site.origin(0) + "/",),
            scope="subdomains",
            sitemaps=True,
            concurrency=32,
            per_host=2,
            retries=0,
        )
        crawler = Crawler(config, sink=sink)
        peak_idle = 0
        samples = 0

        def on_page(page: PageResult) -> None:
            nonlocal peak_idle, samples
            samples += 1
            if samples % 50 == 0:  # origins held with no work: only while a delay runs
                hosts = crawler.state._queues._hosts.values()  # type: ignore[attr-defined]
                idle = sum(1 for h in hosts if h.size == 0 and h.active == 0)
                peak_idle = max(peak_idle, idle)

        crawler._ledger.on_page = on_page
        async with crawler:
            await crawler.run()
        stats = crawler.stats
        # every origin's front page, its leaf, and the sitemap pages of every seventh
        assert stats.pages_ok >= 2 * N, (stats.pages, dict(stats.errors))
        assert sink.n_pages == stats.pages and samples == stats.pages
        assert stats.errors == {}
        # nothing kept per page or per link: a sink takes them
        assert crawler.pages == [] and crawler.links == []
        # the state's queues: origins with work, in flight or within their delay, never all met
        state = crawler.state
        assert isinstance(state, MemoryState)
        frontier = state._queues
        assert frontier.origins <= 100, _containers(frontier)  # the last delay's worth
        assert peak_idle <= 100, peak_idle  # a third of the origins have a delay
        assert frontier.pop_many(1, time.time() + 31) == []
        assert frontier.origins == 0  # their delays are over: all forgotten
        # engine, admission, state: no container sized by the number of origins (or pages)
        # met, but the named, bounded ones: robots.txt bodies and robots delays (LRU tables
        # of at most 4,096 origins, robots.py's bound)
        admission = crawler._admission
        sizes = (
            _containers(crawler)
            | {f"ledger.{k}": v for k, v in _containers(crawler._ledger).items()}
            | {f"dispatcher.{k}": v for k, v in _containers(crawler._dispatcher).items()}
            | {f"admission.{k}": v for k, v in _containers(admission).items()}
            | {f"state.{k}": v for k, v in _containers(state).items()}
            | {f"frontier.{k}": v for k, v in _containers(frontier).items()}
        )
        big = {k: v for k, v in sizes.items() if v > 100}
        assert set(big) <= {"state._robots", "state._delays"}, big
        assert len(state._robots) <= 4096 and len(state._delays) <= 4096
        assert isinstance(state._seen, MemorySeenSet)  # per URL, 8 B each
        assert isinstance(admission._beyond, MemorySeenSet)
        assert len(crawler._policy._by_origin) <= 65536  # a cache with its own bound
    finally:
        server.close()
        await server.wait_closed()


async def test_crawl_with_a_sink_keeps_no_results(resolver: None) -> None:
    site = WideSite(60, fanout=4)
    server = await start(site)
    try:
        sink = CountingSink()
        result = await crawl(site.origin(0) + "/", scope="subdomains", sink=sink)
        assert result.pages == [] and result.links == []
        assert sink.n_pages == result.stats.pages >= 120
        kept = await crawl(site.origin(0) + "/", scope="subdomains", sink=sink, keep_results=True)
        assert len(kept.pages) == kept.stats.pages == result.stats.pages
        assert len(kept.links) == kept.stats.links_new
    finally:
        server.close()
        await server.wait_closed()
    await asyncio.sleep(0)
