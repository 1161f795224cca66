"""The engine on a shared crawl state (``CrawlState.shared``: Redis): workers that join,
wait for each other's leases, share one page budget, give their leases back at a stop, and
ride out a state that stalls.

The unit-level model of two workers: two Crawlers in one process on ONE MemoryState, wrapped
so that it says ``shared = True`` and is opened and closed once for both (a Redis state is
one crawl that many processes open). Real aiohttp servers on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from aiohttp import web

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.state import Candidate, Counts, Lease, Outcome
from crawler.state.memory import MemoryState


class SharedMemory:
    """One MemoryState shared by several Crawlers of this process, saying ``shared = True``.

    Opened for the first worker, closed after the last; everything else is forwarded.
    Records the leases given back with ``retry``.
    """

    shared = True
    location = "shared-memory"

    def __init__(self, inner: MemoryState | None = None, *, idle_grace: float | None = None):
        self.inner = inner or MemoryState()
        self.users = 0
        self.retried: list[tuple[Lease, float, float]] = []
        if idle_grace is not None:
            self.idle_grace = idle_grace

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def open(self, **kw: Any) -> None:
        if self.users == 0:
            await self.inner.open(**kw)
        self.users += 1

    async def close(self) -> None:
        self.users -= 1
        if self.users == 0:
            await self.inner.close()

    async def retry(self, lease: Lease, not_before: float, now: float) -> None:
        self.retried.append((lease, not_before, now))
        await self.inner.retry(lease, not_before, now)


def chain_site(
    n: int, *, fanout: int = 3, delay: float = 0.0
) -> tuple[web.Application, Counter[str]]:
    """``/p/0.html`` .. ``/p/{n-1}.html``, page i linking to the next ``fanout`` pages;
    every response after ``delay`` seconds; the requests counted by path."""
    hits: Counter[str] = Counter()

    async def page(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        hits[request.path] += 1
        if delay:
            await asyncio.sleep(delay)
        links = "".join(f'<a href="{j}.html">{j}</a>' for j in range(i + 1, min(n, i + 1 + fanout)))
        return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

    async def robots(request: web.Request) -> web.Response:
        return web.Response(status=404)

    app = web.Application()
    app.router.add_get("/p/{i:\\d+}.html", page)
    app.router.add_get("/robots.txt", robots)
    return app, hits


def _pages(hits: Counter[str]) -> Counter[str]:
    return Counter({k: v for k, v in hits.items() if k.startswith("/p/")})


async def test_a_worker_without_seeds_joins_and_both_stop_by_themselves(serve) -> None:  # type: ignore[no-untyped-def]
    app, hits = chain_site(30, delay=0.1)
    server = await serve(app)
    seed = str(server.make_url("/p/0.html"))
    state = SharedMemory(idle_grace=0.5)
    joiner = Crawler(CrawlConfig(concurrency=2), state=state)  # no seeds: a worker that joins
    seeder = Crawler(CrawlConfig(seeds=(seed,), concurrency=2), state=state)

    async def late_seeder() -> Any:
        await asyncio.sleep(0.5)  # the joiner is up first, with nothing queued anywhere
        return await seeder.run()

    t0 = time.monotonic()
    joined, seeded = await asyncio.wait_for(asyncio.gather(joiner.run(), late_seeder()), 30)
    elapsed = time.monotonic() - t0
    assert _pages(hits) == Counter({f"/p/{i}.html": 1 for i in range(30)})  # each once
    own = [r.stats.pages - r.stats.resumed_pages for r in (joined, seeded)]
    assert sum(own) == 30 and min(own) > 0  # both worked
    assert not joined.stats.cancelled and not seeded.stats.cancelled
    # stopped by themselves, a grace period after the crawl ran out of work
    assert elapsed < 0.5 + 30 * 0.1 + 0.5 + 3
    counts = await state.inner.counts()
    assert (counts.queued, counts.leased, counts.done) == (0, 0, 30)


@pytest.mark.parametrize("kind", ["own grace", "module grace", "not shared"])
async def test_a_worker_stops_only_after_the_grace_period(serve, monkeypatch, kind: str) -> None:  # type: ignore[no-untyped-def]
    # A crawl with nothing queued, nothing leased: a non-shared state stops at once, a
    # shared one waits its idle_grace, or SHARED_IDLE_GRACE when it has none (an offer in
    # that time would keep it working).
    monkeypatch.setattr("crawler.core.dispatch.SHARED_IDLE_GRACE", 0.6)
    app, _ = chain_site(3)
    server = await serve(app)
    inner = MemoryState()
    state: Any = {
        "own grace": SharedMemory(inner, idle_grace=1.2),
        "module grace": SharedMemory(inner),
        "not shared": inner,
    }[kind]
    await Crawler(CrawlConfig(seeds=(str(server.make_url("/p/0.html")),)), state=state).run()
    t0 = time.monotonic()
    result = await Crawler(CrawlConfig(), state=state).run()  # joins the finished crawl
    waited = time.monotonic() - t0
    low, high = {"own grace": (1.2, 2.5), "module grace": (0.6, 1.1), "not shared": (0, 0.3)}[kind]
    assert low <= waited < high
    assert not result.stats.cancelled
    assert result.stats.pages == result.stats.resumed_pages == 3


async def test_a_worker_up_before_the_crawl_waits_for_its_settings(serve) -> None:  # type: ignore[no-untyped-def]
    # It must not store a crawl of its own (no seeds: nothing in scope); it takes the first
    # worker's settings when they appear, then works and stops like any worker.
    state = SharedMemory(idle_grace=0.5)
    joiner = asyncio.ensure_future(Crawler(CrawlConfig(concurrency=2), state=state).run())
    await asyncio.sleep(1.2)
    assert not joiner.done() and await state.inner.load_settings() is None
    app, hits = chain_site(10, delay=0.05)
    server = await serve(app)
    cfg = CrawlConfig(seeds=(str(server.make_url("/p/0.html")),), concurrency=1)
    seeded, joined = await asyncio.wait_for(
        asyncio.gather(Crawler(cfg, state=state).run(), joiner), 20
    )
    assert set(_pages(hits).values()) == {1} and len(_pages(hits)) == 10
    assert joined.stats.pages - joined.stats.resumed_pages > 0  # in scope: it fetched pages
    assert joined.stats.out_of_scope == 0


async def test_a_worker_waits_for_another_workers_leases(serve) -> None:  # type: ignore[no-untyped-def]
    # Worker A holds the only lease (a slow page) whose links are the rest of the crawl;
    # worker B, with nothing to lease, must wait for it (not stop), then take its share.
    hits: Counter[str] = Counter()

    async def page(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        hits[request.path] += 1
        if i == 0:
            await asyncio.sleep(1.5)  # longer than the grace period
            body = "".join(f'<a href="{j}.html">x</a>' for j in range(1, 21))
        else:
            await asyncio.sleep(0.05)
            body = ""
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/p/{i:\\d+}.html", page)
    server = await serve(app)
    state = SharedMemory(idle_grace=0.5)
    cfg = CrawlConfig(ignore_robots=True, concurrency=4)
    a = Crawler(cfg.replace(seeds=(str(server.make_url("/p/0.html")),)), state=state)
    b = Crawler(cfg, state=state)
    task_a = asyncio.ensure_future(a.run())
    await asyncio.sleep(0.2)  # A has leased page 0
    ra, rb = await asyncio.wait_for(asyncio.gather(task_a, b.run()), 30)
    assert sum(_pages(hits).values()) == 21 and set(_pages(hits).values()) == {1}
    assert rb.stats.pages - rb.stats.resumed_pages > 0  # B stayed and took pages


async def test_max_pages_is_the_whole_crawls_budget(serve) -> None:  # type: ignore[no-untyped-def]
    app, hits = chain_site(200, fanout=5, delay=0.01)
    server = await serve(app)
    seed = str(server.make_url("/p/0.html"))
    state = SharedMemory(idle_grace=0.5)
    cfg = CrawlConfig(max_pages=25, concurrency=4)
    workers = [Crawler(cfg.replace(seeds=(seed,)), state=state)] + [
        Crawler(cfg, state=state) for _ in range(2)
    ]
    results = await asyncio.wait_for(asyncio.gather(*(w.run() for w in workers)), 30)
    assert sum(_pages(hits).values()) == 25  # not 25 a worker
    assert (await state.inner.counts()).done == 25
    assert all(not r.stats.cancelled for r in results)


async def test_a_stopped_worker_gives_its_leases_back_at_once(serve) -> None:  # type: ignore[no-untyped-def]
    # A memory lease never expires while the state is open: a lease a stopped worker kept
    # would hold the other worker forever (with Redis: for the lease timeout).
    app, hits = chain_site(16, fanout=16, delay=0.3)
    server = await serve(app)
    seed = str(server.make_url("/p/0.html"))
    state = SharedMemory(idle_grace=0.5)
    a = Crawler(CrawlConfig(seeds=(seed,), concurrency=4), state=state)
    b = Crawler(CrawlConfig(concurrency=4), state=state)
    task_a = asyncio.ensure_future(a.run())
    task_b = asyncio.ensure_future(b.run())

    async def a_holds_leases() -> None:
        while a.in_flight < 2:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(a_holds_leases(), 10)
    held = {lease.url for lease in a._dispatcher.held.values()}
    a.stop()
    ra = await asyncio.wait_for(task_a, 5)
    assert ra.stats.cancelled
    given_back = {lease.url for lease, _, _ in state.retried}
    assert given_back == held and given_back
    assert all(nb <= now + 0.01 for _, nb, now in state.retried)  # due at once
    rb = await asyncio.wait_for(task_b, 30)  # B finishes the crawl, A's pages included
    assert set(_pages(hits)) == {f"/p/{i}.html" for i in range(16)}
    assert not rb.stats.cancelled
    counts = await state.inner.counts()
    assert (counts.queued, counts.leased, counts.done) == (0, 0, 16)


class Stalling:
    """A shared state whose calls stall ``stall`` seconds each, for calls ``first`` to
    ``first + n`` (a Redis outage the backend rides out by retrying inside its methods)."""

    shared = True
    location = "stalling"

    def __init__(self, stall: float, first: int, n: int) -> None:
        self.inner = MemoryState()
        self.stall, self.first, self.last = stall, first, first + n
        self.calls = 0
        self.stalled: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _maybe_stall(self, what: str) -> None:
        self.calls += 1
        if self.first <= self.calls < self.last:
            self.stalled.append(what)
            await asyncio.sleep(self.stall)

    async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        await self._maybe_stall("offer_many")
        return await self.inner.offer_many(candidates)

    async def lease(self, n: int, now: float) -> list[Lease]:
        await self._maybe_stall("lease")
        return await self.inner.lease(n, time.time())

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        await self._maybe_stall("complete_many")
        await self.inner.complete_many(done, time.time())

    async def counts(self) -> Counts:
        await self._maybe_stall("counts")
        return await self.inner.counts()

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        await self._maybe_stall("add_counters")
        await self.inner.add_counters(deltas)


async def test_a_state_that_stalls_mid_crawl_is_waited_for(serve) -> None:  # type: ignore[no-untyped-def]
    # Calls 10..12 stall 2 s each while pages are being read; the timeouts are shorter
    # (read 0.5 s, total 1 s): neither a page nor the crawl may fail for it.
    app, hits = chain_site(30, fanout=3)
    server = await serve(app)
    state = Stalling(2.0, first=10, n=3)
    cfg = CrawlConfig(
        seeds=(str(server.make_url("/p/0.html")),),
        concurrency=4,
        timeout=1.0,
        read_timeout=0.5,
        retries=0,
    )
    result = await asyncio.wait_for(Crawler(cfg, state=state).run(), 60)
    assert len(state.stalled) == 3
    assert "offer_many" in state.stalled
    assert result.stats.errors == Counter() and not result.stats.cancelled
    assert result.stats.pages == 30 and result.stats.pages_ok == 30
    assert set(_pages(hits).values()) == {1} and len(_pages(hits)) == 30


async def test_a_busy_worker_takes_work_another_worker_offers(serve) -> None:  # type: ignore[no-untyped-def]
    # A is busy on one slow page, with room for more; B's fast pages offer links. A must take
    # some of them while its slow page runs (the state's wake-up, not only its own pages).
    hits: Counter[str] = Counter()
    slow_done = asyncio.Event()
    taken_while_slow: list[str] = []

    async def page(request: web.Request) -> web.Response:
        hits[request.path] += 1
        if request.path == "/slow":
            await asyncio.sleep(2.0)
            slow_done.set()
            return web.Response(text="", content_type="text/html")
        i = int(request.match_info.get("i", "0"))
        await asyncio.sleep(0.2)
        links = "".join(f'<a href="{j}.html">n</a>' for j in range(1, 13)) if i == 0 else ""
        return web.Response(text=links, content_type="text/html")

    app = web.Application()
    app.router.add_get("/slow", page)
    app.router.add_get("/p/{i:\\d+}.html", page)
    server = await serve(app)
    state = SharedMemory(idle_grace=0.5)
    cfg = CrawlConfig(ignore_robots=True, concurrency=4)
    slow = str(server.make_url("/slow"))
    a = Crawler(
        cfg.replace(seeds=(slow,)),
        state=state,
        on_page=lambda p: None if slow_done.is_set() else taken_while_slow.append(p.url),
    )
    task_a = asyncio.ensure_future(a.run())
    while a.in_flight == 0:
        await asyncio.sleep(0.01)
    b = Crawler(cfg.replace(seeds=(slow, str(server.make_url("/p/0.html")))), state=state)
    await asyncio.wait_for(asyncio.gather(task_a, b.run()), 20)
    assert len(_pages(hits)) == 13 and set(_pages(hits).values()) == {1}
    assert len(taken_while_slow) >= 3, taken_while_slow


async def test_queued_follows_the_whole_crawl(serve, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # `queued` (progress lines, the frontier gauge) is read from the shared state again
    # every _QUEUED_REFRESH seconds: other workers lease from the same queue.
    monkeypatch.setattr("crawler.core.dispatch._QUEUED_REFRESH", 0.2)
    app, _ = chain_site(60, fanout=60, delay=0.15)
    server = await serve(app)
    state = SharedMemory(idle_grace=0.5)
    a = Crawler(CrawlConfig(seeds=(str(server.make_url("/p/0.html")),), concurrency=2), state=state)
    task_a = asyncio.ensure_future(a.run())
    while (await state.inner.counts()).queued < 50:
        await asyncio.sleep(0.02)
    b = Crawler(CrawlConfig(concurrency=2), state=state)
    task_b = asyncio.ensure_future(b.run())
    await asyncio.sleep(1.0)
    real = (await state.inner.counts()).queued
    assert 10 < real < 45  # mid-crawl
    assert abs(b.queued - real) <= 6 and abs(a.queued - real) <= 6, (a.queued, b.queued, real)
    await asyncio.wait_for(asyncio.gather(task_a, task_b), 30)


class Forgetful(SharedMemory):
    """A shared state that loses its recent writes, as a Redis brought back from an AOF
    without its last second does: ``rollback()`` puts back an earlier copy and bumps
    ``epoch`` (the backend's way to tell that acknowledged writes may be gone)."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch = 0
        self.offered: list[str] = []

    async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        self.offered += [c.url for c in candidates]
        return await self.inner.offer_many(candidates)

    def seen(self, fp: int) -> bool:  # the state's own probe follows the rollback
        return self.inner.seen(fp)

    async def rollback(self, to: MemoryState) -> None:
        await to.open(per_host=8, delay=0.0, max_pages_per_host=0)
        self.inner = to
        self.epoch += 1


async def test_links_are_offered_again_after_the_state_lost_them() -> None:
    # Admission's recent-URL cache must not outlive a state that forgot what it was offered:
    # after the rollback the same links reach offer_many again (else never fetched).
    from crawler.core.admission import Admission, Tally  # noqa: PLC0415
    from crawler.core.results import CrawlStats  # noqa: PLC0415
    from crawler.extract import Link  # noqa: PLC0415
    from crawler.urls.policy import UrlPolicy  # noqa: PLC0415

    cfg = CrawlConfig(seeds=("http://127.0.0.1:1/",)).validated()
    state = Forgetful()
    await state.open(per_host=8, delay=0.0, max_pages_per_host=0)
    admission = Admission(cfg, UrlPolicy.from_config(cfg), state, CrawlStats(), None, keep=True)  # type: ignore[arg-type]
    links = [Link(f"http://127.0.0.1:1/p/{i}.html", f"{i}.html", "a", "href") for i in range(5)]
    await admission.take_links(links, "http://127.0.0.1:1/", 0, None, Tally())
    assert len(state.offered) == 5
    await admission.take_links(links, "http://127.0.0.1:1/", 0, None, Tally())
    assert len(state.offered) == 5  # known: the cache spares the state
    await state.rollback(MemoryState())
    await admission.take_links(links, "http://127.0.0.1:1/", 0, None, Tally())
    assert len(state.offered) == 10  # offered again: the state decides
    assert (await state.inner.counts()).queued == 5


async def test_an_offer_the_state_lost_while_it_ran_is_not_remembered() -> None:
    # The offer was taken, then lost before it returned (the epoch changed meanwhile): the
    # cache must not hold its URLs as offered.
    from crawler.core.admission import Admission, Tally  # noqa: PLC0415
    from crawler.core.results import CrawlStats  # noqa: PLC0415
    from crawler.extract import Link  # noqa: PLC0415
    from crawler.urls.policy import UrlPolicy  # noqa: PLC0415

    class LosesDuringOffer(Forgetful):
        lose_next = True

        async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
            new = await super().offer_many(candidates)
            if self.lose_next:
                self.lose_next = False
                await self.rollback(MemoryState())
            return new

    cfg = CrawlConfig(seeds=("http://127.0.0.1:1/",)).validated()
    state = LosesDuringOffer()
    await state.open(per_host=8, delay=0.0, max_pages_per_host=0)
    admission = Admission(cfg, UrlPolicy.from_config(cfg), state, CrawlStats(), None, keep=True)  # type: ignore[arg-type]
    links = [Link(f"http://127.0.0.1:1/p/{i}.html", f"{i}.html", "a", "href") for i in range(3)]
    await admission.take_links(links, "http://127.0.0.1:1/", 0, None, Tally())
    await admission.take_links(links, "http://127.0.0.1:1/", 0, None, Tally())
    assert len(state.offered) == 6
    assert (await state.inner.counts()).queued == 3
