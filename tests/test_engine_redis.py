"""The engine on a real Redis state: several workers (Crawlers, each with its own RedisState
and connection pool, as separate processes would have) on one crawl in one database.

A real redis-server on a free 127.0.0.1 port (tests/redisserver.py: skipped without the
binary, failed under CI) and real aiohttp sites on 127.0.0.1. The cluster of real worker
processes (SIGKILL, restarts through the CLI) is tests/test_redis_cluster.py.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest
import redis.asyncio as aioredis
from aiohttp import web

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.state import open_state
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)
from tests.test_engine_shared import _pages, chain_site


@pytest.fixture(autouse=True)
def _short_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    # Workers stop 0.5 s (not 2 s) after the crawl ran out of work: shorter tests, same rule.
    from crawler.state.redis import RedisState  # noqa: PLC0415  (needs the redis package)

    monkeypatch.setattr(RedisState, "idle_grace", 0.5)


async def _counts(url: str, name: str | None = None):  # type: ignore[no-untyped-def]
    state = open_state(url, name=name)
    await state.open(per_host=8, delay=0.0, max_pages_per_host=0)
    try:
        return await state.counts()
    finally:
        await state.close()


async def test_redis_workers_share_the_crawl_and_stop_by_themselves(
    serve,  # type: ignore[no-untyped-def]
    redis_server: RedisServer,  # noqa: F811
) -> None:
    app, hits = chain_site(40, fanout=40, delay=0.05)
    server = await serve(app)
    url = redis_server.url
    joiners = [
        asyncio.ensure_future(Crawler(CrawlConfig(state=url, concurrency=3)).run())
        for _ in range(2)
    ]  # up before the crawl exists: they wait for it
    await asyncio.sleep(0.3)
    seed = str(server.make_url("/p/0.html"))
    t0 = time.monotonic()
    results = await asyncio.wait_for(
        asyncio.gather(
            Crawler(CrawlConfig(seeds=(seed,), state=url, concurrency=3)).run(), *joiners
        ),
        30,
    )
    elapsed = time.monotonic() - t0
    assert _pages(hits) == Counter({f"/p/{i}.html": 1 for i in range(40)})
    own = [r.stats.pages - r.stats.resumed_pages for r in results]
    # (one origin: one shard, its owner fetches it all; many origins: tests/test_redis_cluster.py)
    assert sum(own) == 40, own
    assert not any(r.stats.cancelled for r in results)
    assert elapsed < 40 * 0.05 + 0.5 + 5  # the grace period after the end, not a lease timeout
    counts = await _counts(url)
    assert (counts.queued, counts.leased, counts.done) == (0, 0, 40)


async def test_max_pages_holds_for_the_whole_redis_crawl(
    serve,  # type: ignore[no-untyped-def]
    redis_server: RedisServer,  # noqa: F811
) -> None:
    app, hits = chain_site(200, fanout=10, delay=0.01)
    server = await serve(app)
    url = redis_server.url
    seed = str(server.make_url("/p/0.html"))
    cfg = CrawlConfig(state=url, max_pages=25, concurrency=4)
    first = Crawler(cfg.replace(seeds=(seed,)))
    task = asyncio.ensure_future(first.run())
    await asyncio.sleep(0.2)  # the crawl's settings are stored
    others = [Crawler(cfg) for _ in range(2)]
    results = await asyncio.wait_for(asyncio.gather(task, *(w.run() for w in others)), 30)
    assert sum(_pages(hits).values()) == 25
    assert (await _counts(url)).done == 25
    assert not any(r.stats.cancelled for r in results)


async def test_a_stopped_redis_worker_gives_back_its_leases(
    serve,  # type: ignore[no-untyped-def]
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # The lease timeout is 60 s: the other worker must not wait for it.
    app, hits = chain_site(16, fanout=16, delay=0.3)
    server = await serve(app)
    url = redis_server.url
    seed = str(server.make_url("/p/0.html"))
    a = Crawler(CrawlConfig(seeds=(seed,), state=url, concurrency=4, lease_timeout=60))
    task_a = asyncio.ensure_future(a.run())
    while a.in_flight < 2:
        await asyncio.sleep(0.01)
    b = Crawler(CrawlConfig(state=url, concurrency=4, lease_timeout=60))
    task_b = asyncio.ensure_future(b.run())
    await asyncio.sleep(0.1)
    a.stop()
    assert (await asyncio.wait_for(task_a, 10)).stats.cancelled
    t0 = time.monotonic()
    rb = await asyncio.wait_for(task_b, 30)
    assert time.monotonic() - t0 < 15
    assert not rb.stats.cancelled
    assert set(_pages(hits)) == {f"/p/{i}.html" for i in range(16)}
    counts = await _counts(url)
    assert (counts.queued, counts.leased, counts.done) == (0, 0, 16)


async def test_a_redis_restart_mid_crawl_is_ridden_out(
    serve,  # type: ignore[no-untyped-def]
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # Redis is down for 1 s mid-crawl: the workers wait (the backend retries), then finish
    # the crawl; no page fails for it, nobody is cancelled.
    app, hits = chain_site(30, fanout=30, delay=0.1)
    server = await serve(app)
    url = redis_server.url
    seed = str(server.make_url("/p/0.html"))
    workers = [
        Crawler(CrawlConfig(seeds=(seed,), state=url, concurrency=2)),
        Crawler(CrawlConfig(state=url, concurrency=2)),
    ]
    tasks = [asyncio.ensure_future(w.run()) for w in workers]
    while sum(_pages(hits).values()) < 8:
        await asyncio.sleep(0.02)
    await asyncio.to_thread(redis_server.restart, 1.0)
    results = await asyncio.wait_for(asyncio.gather(*tasks), 60)
    assert set(_pages(hits)) == {f"/p/{i}.html" for i in range(30)}
    assert not any(r.stats.cancelled for r in results)
    assert not any(r.stats.errors for r in results)


async def test_idle_workers_do_not_poll_redis(
    serve,  # type: ignore[no-untyped-def]
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # Worker A waits on one slow page; workers B and C have nothing to lease. For those
    # seconds each sends Redis about two round trips a second (a lease re-check, counts),
    # not a busy poll's thousands.
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(text="<p>done</p>", content_type="text/html")

    app = web.Application()
    app.router.add_get("/slow", slow)
    server = await serve(app)
    url = redis_server.url
    cfg = CrawlConfig(state=url, ignore_robots=True)
    a = Crawler(cfg.replace(seeds=(str(server.make_url("/slow")),)))
    task_a = asyncio.ensure_future(a.run())
    while a.in_flight == 0:
        await asyncio.sleep(0.01)
    others = [asyncio.ensure_future(Crawler(cfg).run()) for _ in range(2)]
    client = aioredis.from_url(url)
    try:
        await asyncio.sleep(0.5)  # all three settled into waiting
        await client.config_resetstat()
        await asyncio.sleep(3.0)
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    # commands run inside the Lua scripts are counted too; EVALSHA calls are round trips
    calls = {k.removeprefix("cmdstat_"): v["calls"] for k, v in stats.items()}
    scripts = calls.get("evalsha", 0) + calls.get("eval", 0)
    total = sum(n for k, n in calls.items() if not k.startswith(("config", "info")))
    print(f"3 idle workers, 3 s: {scripts} script calls, {total} commands ({calls})")
    release.set()
    results = await asyncio.wait_for(asyncio.gather(task_a, *others), 20)
    assert not any(r.stats.cancelled for r in results)
    assert scripts <= 3 * 3 * 2, calls  # a lease re-check a second a worker, at most two
    assert total < 3 * 3 * 20, calls  # a busy poll would be thousands


async def test_workers_waiting_for_a_slot_do_not_flood_redis_with_leases(
    serve,  # type: ignore[no-untyped-def]
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # Four workers, one origin, 2 requests at once cluster-wide: most workers wait for a
    # slot most of the time, and every completion wakes them all. The script calls (offer,
    # lease, complete...) per page stay about what one worker alone needs (~3), not one
    # futile lease per worker per wake.
    app, hits = chain_site(80, fanout=12, delay=0.02)
    server = await serve(app)
    url = redis_server.url
    client = aioredis.from_url(url)
    await client.config_resetstat()
    cfg = CrawlConfig(state=url, concurrency=4, per_host=2)
    seeded = Crawler(cfg.replace(seeds=(str(server.make_url("/p/0.html")),)))
    workers = [seeded] + [Crawler(cfg) for _ in range(3)]
    try:
        results = await asyncio.wait_for(asyncio.gather(*(w.run() for w in workers)), 60)
        stats = await client.info("commandstats")
    finally:
        await client.aclose()
    pages = sum(r.stats.pages - r.stats.resumed_pages for r in results)
    assert pages == 80 and len(_pages(hits)) == 80
    scripts = stats["cmdstat_evalsha"]["calls"]
    print(f"4 workers, per_host 2: {scripts} script calls for {pages} pages")
    assert scripts / pages < 5, scripts
