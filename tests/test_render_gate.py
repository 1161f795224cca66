"""The crawl's RequestGate (crawler/core/render_gate.py) without a browser: the calls the
renderer's route handler makes, against the real robots.txt cache and fetcher of a crawl
of the local test site (robots.txt disallows /private/)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from crawler.config import CrawlConfig
from crawler.core.render_gate import CrawlGate
from crawler.core.robots import RobotsCache, robots_agent
from crawler.http.client import Fetcher
from crawler.state import Candidate, CrawlState, Outcome
from crawler.state.memory import MemoryState
from crawler.urls.policy import UrlPolicy, host_of, origin_of
from tests.render_site import RenderSite, start


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, str, RenderSite]]:
    render_site = RenderSite(pages=4)
    url, other, runners = await start(render_site)
    yield url, other, render_site
    for runner in runners:
        await runner.cleanup()


async def make_gate(seed: str, **options: object) -> tuple[CrawlGate, Fetcher]:
    config = CrawlConfig(seeds=(seed,), render="auto", **options).validated()  # type: ignore[arg-type]
    fetcher = Fetcher(config)
    policy = UrlPolicy.from_config(config)
    robots = RobotsCache(fetcher, robots_agent(config), policy.in_scope)
    return CrawlGate(config, fetcher, robots, policy), fetcher


async def test_robots_txt_of_the_crawl_decides(site: tuple[str, str, RenderSite]) -> None:
    url, _other, render_site = site
    gate, fetcher = await make_gate(url + "/")
    try:
        page = url + "/app/robots"
        assert not await gate.allow(url + "/private/data.json", "fetch", page)
        assert await gate.allow(url + "/api/robots-ok.json", "fetch", page)
        gate.release(url + "/api/robots-ok.json")
        assert gate.refused["robots"] == 1 and gate.allowed == 1
        assert render_site.log.paths() == ["/robots.txt"]  # the gate fetches nothing else
    finally:
        await fetcher.close()


async def test_ignore_robots_lets_it_through(site: tuple[str, str, RenderSite]) -> None:
    url, _other, _site = site
    gate, fetcher = await make_gate(url + "/", ignore_robots=True)
    try:
        assert await gate.allow(url + "/private/data.json", "fetch", url + "/app/robots")
    finally:
        await fetcher.close()


async def test_other_hosts_get_scripts_only(site: tuple[str, str, RenderSite]) -> None:
    url, other, render_site = site
    gate, fetcher = await make_gate(url + "/")
    try:
        page = url + "/app/scope"
        assert await gate.allow(other + "/cdn/lib.js", "script", page)
        gate.release(other + "/cdn/lib.js")
        assert not await gate.allow(other + "/api/other.json", "fetch", page)
        assert not await gate.allow(other + "/landing", "document", page)
        assert not await gate.allow("ftp://127.0.0.1/x", "script", page)
        assert gate.refused["scope"] == 2
        assert render_site.log.paths("other") == []  # not even its robots.txt
    finally:
        await fetcher.close()


async def test_one_request_at_a_time_for_a_page(site: tuple[str, str, RenderSite]) -> None:
    url, _other, _site = site
    gate, fetcher = await make_gate(url + "/")
    try:
        page = url + "/app/polite"
        first = url + "/api/slow/0.json"
        assert await gate.allow(first, "fetch", page)
        second = asyncio.ensure_future(gate.allow(url + "/api/slow/1.json", "fetch", page))
        other_page = asyncio.ensure_future(gate.allow(url + "/api/links.json", "fetch", url))
        await asyncio.sleep(0.2)
        assert not second.done()  # the page's slot is taken by its first request
        assert other_page.done() and other_page.result()  # another page has its own lease
        gate.release(first)
        assert await asyncio.wait_for(second, 5)
    finally:
        await fetcher.close()


async def test_the_delay_spaces_the_browsers_requests(site: tuple[str, str, RenderSite]) -> None:
    url, _other, _site = site
    gate, fetcher = await make_gate(url + "/", delay=0.3)
    try:
        page = url + "/app/polite"
        gate.page_fetched(page)
        starts = []
        for i in range(3):
            target = f"{url}/api/slow/{i}.json"
            assert await gate.allow(target, "fetch", page)
            starts.append(time.monotonic())
            gate.release(target)
        gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
        assert all(gap >= 0.29 for gap in gaps), gaps
    finally:
        await fetcher.close()


async def test_credentials_only_where_the_crawl_sends_them(
    site: tuple[str, str, RenderSite],
) -> None:
    url, other, _site = site
    gate, fetcher = await make_gate(
        url + "/",
        headers=("X-Api-Key: s3cret-value", "Accept-Language: fr"),
        auth="user:pass",
        scope="subdomains",
    )
    try:
        mine = gate.headers_for(url + "/api/me.json")
        assert mine["X-Api-Key"] == "s3cret-value"
        assert mine["Authorization"].startswith("Basic ")
        assert mine["Accept-Language"] == "fr"
        assert "User-Agent" not in mine and "Accept" not in mine  # the browser's own
        assert gate.headers_for(other + "/cdn/lib.js") == {}  # another host: nothing
    finally:
        await fetcher.close()


async def test_a_request_still_waiting_when_the_render_ends_is_refused(
    site: tuple[str, str, RenderSite],
) -> None:
    url, _other, _site = site
    gate, fetcher = await make_gate(url + "/")
    try:
        page = url + "/hostile/forever"
        assert await gate.allow(url + "/api/tick.json?1", "fetch", page)  # never released
        waiting = asyncio.ensure_future(gate.allow(url + "/api/tick.json?2", "fetch", page))
        also = asyncio.ensure_future(gate.allow(url + "/api/tick.json?3", "fetch", page))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        gate.page_done(page)  # its tab is gone: nothing of it may wait for ever
        assert await asyncio.wait_for(waiting, 2) is False
        assert await asyncio.wait_for(also, 2) is False
        gate.release(url + "/api/tick.json?1")  # a late release of the first is harmless
        assert await gate.allow(url + "/api/tick.json?4", "fetch", page)  # a new render of it
    finally:
        await fetcher.close()


async def test_excluded_addresses_hold_for_the_browser(site: tuple[str, str, RenderSite]) -> None:
    """--exclude-loopback: the seed's host stays allowed (the seeds always are), a CDN script
    on another loopback host is refused before the browser may connect to it; nothing is
    fetched from it."""
    url, other, render_site = site
    gate, fetcher = await make_gate(url + "/", exclude_loopback=True)
    try:
        page = url + "/app/scope"
        assert not await gate.allow(other + "/cdn/lib.js", "script", page)
        assert not await gate.allow("http://localhost:9/cdn/lib.js", "script", page)
        assert gate.refused["address"] == 2
        assert await gate.allow(url + "/api/robots-ok.json", "fetch", page)
        gate.release(url + "/api/robots-ok.json")
        assert render_site.log.paths("other") == []
    finally:
        await fetcher.close()


def _state(kind: str, tmp_path: Path) -> CrawlState:
    if kind == "memory":
        return MemoryState()
    from crawler.state.sqlite import SQLiteState  # noqa: PLC0415

    return SQLiteState(str(tmp_path / "state"))


async def _offer(state: CrawlState, *urls: str) -> None:
    await state.offer_many(
        [Candidate(u, state.fingerprint(u), origin_of(u), host_of(u), 0) for u in urls]
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_the_state_lends_a_hosts_slot_to_the_browser(kind: str, tmp_path: Path) -> None:
    """A browser request to another crawled host takes one of THAT host's ``per_host`` slots
    in the crawl state, as a lease does: the frontier leases none of its requests while the
    slot is out or while the browser waits for it (it gets the next one), and its delay
    spaces the browser's request and the crawl's own."""
    state = _state(kind, tmp_path)
    await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
    b = "http://b.test:80"
    try:
        await _offer(state, b + "/1", b + "/2", b + "/3")
        now = time.time()
        first = await state.lease(5, now)
        assert len(first) == 1  # per_host 1
        assert state.borrow_slot(b, now) is None  # (all out)
        state.want_slot(b, 1, now)  # (the browser waits)
        await state.complete(first[0], Outcome(status=200), now)
        assert await state.lease(5, now) == []  # the freed slot is the browser's
        assert state.borrow_slot(b, now) == 0.0
        state.want_slot(b, -1, now)
        assert await state.lease(5, now) == []  # it is out: the host's one slot
        state.return_slot(b, now)
        assert len(await state.lease(5, now)) == 1
        # a waiting borrower that gives up leaves the host to the frontier again
        state.want_slot(b, 1, now)
        state.want_slot(b, -1, now)
    finally:
        await state.close()

    spaced = _state("memory", tmp_path)
    await spaced.open(per_host=4, delay=1.0, max_pages_per_host=0)
    try:
        await _offer(spaced, b + "/1")
        now = time.time()
        assert spaced.borrow_slot(b, now) == 0.0
        assert await spaced.lease(5, now + 0.5) == []  # the delay counts from the browser's
        assert spaced.borrow_slot(b, now + 0.5) == pytest.approx(0.5)
        assert len(await spaced.lease(5, now + 1.0)) == 1
    finally:
        await spaced.close()


async def test_another_crawled_hosts_request_waits_for_its_slot(
    site: tuple[str, str, RenderSite],
) -> None:
    """The gate lets a request to another crawled host go only in a slot of that host that
    the crawl state lends, and gives it back on release (or when the page's render ends)."""
    url, other, _site = site
    config = CrawlConfig(seeds=(url + "/", other + "/"), render="auto", per_host=1).validated()
    fetcher = Fetcher(config)
    policy = UrlPolicy.from_config(config)
    robots = RobotsCache(fetcher, robots_agent(config), policy.in_scope)
    state = MemoryState()
    await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
    gate = CrawlGate(config, fetcher, robots, policy, state)
    try:
        await _offer(state, other + "/leaf")
        (lease,) = await state.lease(5, time.time())  # the crawl has other's only slot
        page = url + "/app/fetch"
        script = other + "/cdn/lib.js"
        asking = asyncio.ensure_future(gate.allow(script, "script", page))
        await asyncio.sleep(0.2)
        assert not asking.done()  # waits for the slot
        assert await state.lease(5, time.time()) == []
        await state.complete(lease, Outcome(status=200), time.time())
        assert await asyncio.wait_for(asking, 2.0)
        assert gate.borrowed == 1
        await _offer(state, other + "/next")
        assert await state.lease(5, time.time()) == []  # the browser's request is out
        gate.release(script)
        assert len(await state.lease(5, time.time())) == 1
        # a request still waiting when the page's render ends is refused, its wish dropped
        waiting = asyncio.ensure_future(gate.allow(script, "script", page))
        await asyncio.sleep(0.1)
        gate.page_done(page)
        assert not await asyncio.wait_for(waiting, 2.0)
        assert gate.crawls(other + "/api/x.json") and not gate.crawls("http://elsewhere.test/")
    finally:
        await fetcher.close()
        await state.close()


async def test_a_state_that_lends_no_slots_gets_other_hosts_requests_refused(
    site: tuple[str, str, RenderSite],
) -> None:
    """The Redis state refuses to lend a slot (a host's slots are its shard owner's): the
    browser's request to another crawled host is not sent; the page's own host's still are."""
    from crawler.state.redis import RedisState  # noqa: PLC0415

    url, other, render_site = site
    state = RedisState("redis://127.0.0.1:9/0")  # never opened: refusing needs no Redis
    assert isinstance(state, CrawlState)
    assert state.borrow_slot(origin_of(other), time.time()) is False
    config = CrawlConfig(seeds=(url + "/", other + "/"), render="auto").validated()
    fetcher = Fetcher(config)
    policy = UrlPolicy.from_config(config)
    robots = RobotsCache(fetcher, robots_agent(config), policy.in_scope)
    gate = CrawlGate(config, fetcher, robots, policy, state)
    try:
        page = url + "/app/fetch"
        assert not await gate.allow(other + "/cdn/lib.js", "script", page)
        assert not await gate.allow(other + "/api/other.json", "fetch", page)
        assert gate.refused["politeness"] == 2 and gate.borrowed == 0
        assert await gate.allow(url + "/api/links.json", "fetch", page)  # its own host's
        gate.release(url + "/api/links.json")
        assert render_site.log.paths("other") in ([], ["/robots.txt"])  # nothing else of it
    finally:
        await fetcher.close()
