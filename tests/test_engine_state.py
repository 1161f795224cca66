"""The engine on the crawl state protocol: memory and SQLite alike, resume, settings, hooks.

Real servers on 127.0.0.1 (the ``serve`` fixture), real state directories (``tmp_path``).
Parametrized over the backends where the behaviour is the same; the resume tests run on
SQLite (a directory reopened) and on one MemoryState object closed and opened again (what
the protocol promises for memory: open leases come back on reopen).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from crawler.config import ConfigError, CrawlConfig
from crawler.core.engine import Crawler, crawl
from crawler.core.results import PageResult
from crawler.state import KIND_SITEMAP, Candidate, CrawlState, Lease, Outcome, open_state
from crawler.state.memory import MemoryState
from tests.sitegen import RecordingSink, app_of, start_site

try:
    from crawler.state.sqlite import SQLiteState  # noqa: F401

    HAVE_SQLITE = True
except ImportError:  # pragma: no cover
    HAVE_SQLITE = False

BACKENDS = [
    "memory",
    pytest.param(
        "sqlite", marks=pytest.mark.skipif(not HAVE_SQLITE, reason="no crawler.state.sqlite yet")
    ),
]


def _state_url(kind: str, tmp_path: Path) -> str | None:
    return None if kind == "memory" else str(tmp_path / "state")


class Recording:
    """A CrawlState that forwards to a real one and records what the engine asked of it."""

    def __init__(self, inner: CrawlState, sink: FlushSink | None = None) -> None:
        self.inner = inner
        self.sink = sink
        self.offers: list[list[Candidate]] = []
        self.completed: list[tuple[Lease, Outcome]] = []
        self.counter_calls = 0
        self.robots_gets = 0
        self.unflushed: list[str] = []  # completions committed before their page was flushed

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        self.offers.append(list(candidates))
        return await self.inner.offer_many(candidates)

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        if self.sink is not None:
            self.unflushed += [ls.url for ls, _ in done if ls.url not in self.sink.flushed]
        self.completed += done
        await self.inner.complete_many(done, now)

    async def complete(self, lease: Lease, outcome: Outcome, now: float) -> None:
        await self.complete_many([(lease, outcome)], now)

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        self.counter_calls += 1
        await self.inner.add_counters(deltas)


class FlushSink(RecordingSink):
    """Records which pages had reached the sink when ``flush`` was last called."""

    def __init__(self) -> None:
        super().__init__()
        self.flushed: set[str] = set()
        self.flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        self.flushed = {p.url for p in self.pages}


# -- the same crawl on every backend --


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_crawl_gives_the_same_pages_on_every_backend(
    serve, tmp_path: Path, backend: str
) -> None:  # type: ignore[no-untyped-def]
    site, _ = await start_site(serve, n=150)
    want_fetched, want_found = site.expected()
    result = await crawl(
        site.url("/p/0.html"),
        max_depth=1000,
        concurrency=8,
        retries=0,
        state=_state_url(backend, tmp_path),
    )
    requested = Counter(site.requests)
    assert requested.pop("/robots.txt") == 1
    assert {p for p, n in requested.items() if n != 1} == set()  # each page once
    assert set(requested) == want_fetched
    assert len(result.links) == len(set(result.links))
    assert set(result.links) == {site.url(p) for p in want_found}
    assert result.stats.pages == len(result.pages) == len({p.url for p in result.pages})
    assert result.stats.links_new == len(want_found)
    pages = {p.url[len(site.origin) :]: p for p in result.pages}
    assert pages["/missing/0"].error == "http_404"
    assert pages["/loop/a"].error == "redirect_loop"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_offers_once_per_chunk_and_counters_once_per_batch(
    serve, tmp_path: Path, backend: str
) -> None:  # type: ignore[no-untyped-def]
    # A page of 2,000 links arrives in a few chunks: a few offers, not one per link; a repeat
    # link (the state's local probe knows it) is never offered again; the counters go to the
    # state with the completions, not per link.
    links = "".join(f'<a href="/l{i % 500}">x</a>' for i in range(2000))
    app, _ = app_of({"/": links})
    server = await serve(app)
    sink = FlushSink()
    state = Recording(open_state(_state_url(backend, tmp_path)), sink)
    config = CrawlConfig(seeds=(str(server.make_url("/")),), ignore_robots=True)
    async with Crawler(config, state=state, sink=sink) as crawler:  # type: ignore[arg-type]
        await crawler.run()
    offered = [c.url for batch in state.offers for c in batch]
    assert len(offered) == len(set(offered)) == 501  # the seed and 500 distinct links
    assert len(state.offers) < 40
    assert crawler.stats.pages == 501
    assert state.counter_calls <= len({id(ls) for ls, _ in state.completed})
    assert state.unflushed == []  # every completion committed after its page was flushed
    assert sink.flushes >= 1


# -- resume --


def _reusable(backend: str, tmp_path: Path) -> Any:
    """A factory of the 'same' state for each run: a directory, or one MemoryState object."""
    if backend == "memory":
        mem = MemoryState()
        return lambda: mem
    return lambda: open_state(str(tmp_path / "state"))


@pytest.mark.parametrize("backend", BACKENDS)
async def test_resume_continues_where_it_stopped(serve, tmp_path: Path, backend: str) -> None:  # type: ignore[no-untyped-def]
    # Three runs on one state, with a page budget that counts the whole crawl: the union of
    # the pages fetched is the site, none twice, robots.txt fetched once (the stored one is
    # younger than the TTL), the stats add up across runs and each URL is listed once.
    site, _ = await start_site(serve, n=150)
    want_fetched, want_found = site.expected()
    state_of = _reusable(backend, tmp_path)
    seed = site.url("/p/0.html")
    listed: list[str] = []
    seen_pages: list[int] = []
    run_pages = 0
    for budget in (40, 100, 10_000):
        config = CrawlConfig(
            seeds=(seed,), max_depth=1000, concurrency=8, retries=0, max_pages=budget
        )
        async with Crawler(config, state=state_of()) as crawler:
            result = await crawler.run()
        listed += result.links
        seen_pages.append(result.stats.pages)
        run_pages += len(result.pages)
        assert result.stats.pages - result.stats.resumed_pages == len(result.pages)
    requested = Counter(site.requests)
    assert requested.pop("/robots.txt") == 1
    assert {p for p, n in requested.items() if n != 1} == set()
    assert set(requested) == want_fetched
    assert seen_pages == [40, 100, run_pages]
    assert len(listed) == len(set(listed)) and set(listed) == {site.url(p) for p in want_found}
    assert result.stats.links_new == len(want_found)  # counted across the three runs
    assert result.stats.resumed_pages == 100


@pytest.mark.skipif(not HAVE_SQLITE, reason="no crawler.state.sqlite yet")
async def test_resume_with_no_seeds_and_new_seeds(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    app, hits = app_of(
        {"/": '<a href="/a">a</a>', "/a": "<p>a", "/b": '<a href="/c">c</a>', "/c": "<p>c"}
    )
    server = await serve(app)
    directory = str(tmp_path / "state")
    base = str(server.make_url("/"))
    first = await crawl(base, state=directory, ignore_robots=True, max_pages=1)
    assert first.stats.pages == 1 and set(hits) == {"/"}
    # no seeds: the stored crawl goes on (max_pages is the stored one unless given: raise it)
    again = await crawl((), state=directory, ignore_robots=True, max_pages=2)
    assert again.stats.pages == 2 and set(hits) == {"/", "/a"}
    # a new seed given on resume is offered (the stored ones are known already)
    more = await crawl(
        [base, str(server.make_url("/b"))], state=directory, ignore_robots=True, max_pages=99
    )
    assert more.stats.pages == 4 and set(hits) == {"/", "/a", "/b", "/c"}
    assert all(n == 1 for n in hits.values())


@pytest.mark.skipif(not HAVE_SQLITE, reason="no crawler.state.sqlite yet")
async def test_a_setting_that_defines_the_crawl_cannot_change_on_resume(
    serve, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    app, hits = app_of({"/": '<a href="/a">a</a>', "/a": "<p>a"})
    server = await serve(app)
    directory = str(tmp_path / "state")
    base = str(server.make_url("/"))
    await crawl(base, state=directory, ignore_robots=True, max_pages=1)
    with pytest.raises(ConfigError) as err:
        await crawl(base, state=directory, ignore_robots=True, scope="domain")
    assert err.value.key == "scope"
    assert set(hits) == {"/"}  # nothing fetched by the refused run
    # the refused run left the state closed and usable: the same settings go on
    again = await crawl(base, state=directory, ignore_robots=True, concurrency=2, max_pages=9)
    assert again.stats.pages == 2 and hits["/a"] == 1


@pytest.mark.skipif(not HAVE_SQLITE, reason="no crawler.state.sqlite yet")
async def test_a_sitemap_is_a_request_of_its_kind_across_runs(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    routes: dict[str, str | tuple[int, str, str]] = {"/": "<p>no links", "/hidden": "<p>h"}
    app, hits = app_of(routes)
    server = await serve(app)
    origin = str(server.make_url("")).rstrip("/")
    routes["/robots.txt"] = (200, "text/plain", f"User-agent: *\nSitemap: {origin}/sm.xml\n")
    routes["/sm.xml"] = (
        200,
        "application/xml",
        f"<urlset><url><loc>{origin}/hidden</loc></url></urlset>",
    )
    directory = str(tmp_path / "state")
    state = Recording(open_state(directory))
    config = CrawlConfig(seeds=(origin + "/",), sitemaps=True, max_pages=1)
    async with Crawler(config, state=state) as crawler:  # type: ignore[arg-type]
        await crawler.run()
    sitemaps = [c for batch in state.offers for c in batch if c.url.endswith("/sm.xml")]
    assert [c.kind for c in sitemaps] == [KIND_SITEMAP]
    assert set(hits) == {"/robots.txt", "/"}
    assert not hasattr(crawler, "_sitemaps")
    # the next run leases the sitemap from the state and reads it as a sitemap
    result = await crawl((), state=directory, sitemaps=True, max_pages=9)
    assert hits["/sm.xml"] == 1 and hits["/hidden"] == 1 and hits["/robots.txt"] == 1
    assert origin + "/hidden" in result.links


@pytest.mark.skipif(not HAVE_SQLITE, reason="no crawler.state.sqlite yet")
@pytest.mark.parametrize("via_redirect", [False, True])
async def test_a_page_in_flight_at_the_stop_is_listed_again_then_fetched(
    serve, tmp_path: Path, via_redirect: bool
) -> None:  # type: ignore[no-untyped-def]
    # /slow sends its links, then stalls; the run is stopped while it is in flight. Its
    # links were offered (in the state) and listed by the first sink; the second run
    # re-lists them (the first run's output may have been cut there) and fetches /slow again.
    # Via a redirect (/go -> /slow): the first run marked /slow seen (fetched in-line, never
    # queued); the second follows it again all the same, or /slow would never be fetched.
    release = asyncio.Event()
    sent = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        await resp.write(b'<a href="/x1">1</a><a href="/x2">2</a>' + b" " * 5000)
        sent.set()
        await release.wait()
        return resp

    async def leaf(request: web.Request) -> web.Response:
        return web.Response(text="<p>leaf", content_type="text/html")

    async def go(request: web.Request) -> web.Response:
        raise web.HTTPFound("/slow")

    app = web.Application()
    app.router.add_get("/slow", slow)
    app.router.add_get("/go", go)
    app.router.add_get("/x{n}", leaf)
    server = await serve(app)
    directory = str(tmp_path / "state")
    url = str(server.make_url("/go" if via_redirect else "/slow"))
    target = str(server.make_url("/slow"))
    first = [url, target] if via_redirect else [url]
    sink = RecordingSink()
    config = CrawlConfig(seeds=(url,), state=directory, ignore_robots=True, concurrency=1)
    crawler = Crawler(config, sink=sink)
    async with crawler:
        task = asyncio.ensure_future(crawler.run())
        await asyncio.wait_for(sent.wait(), 10)
        for _ in range(50):  # the chunk's offer and listing happen right after it arrives
            if len(sink.links) == len(first) + 2:
                break
            await asyncio.sleep(0.02)
        crawler.stop()
        await asyncio.gather(task, return_exceptions=True)
    x_urls = [str(server.make_url("/x1")), str(server.make_url("/x2"))]
    assert [u for u, _, _ in sink.links] == [*first, *x_urls]
    assert sink.pages == []
    release.set()
    sink2 = RecordingSink()
    async with Crawler(config.replace(concurrency=4), sink=sink2) as crawler2:
        result = await crawler2.run()
    assert result.stats.recovered == 1
    relisted = [target, *x_urls] if via_redirect else x_urls  # before the fetch
    assert [u for u, _, _ in sink2.links[: len(relisted)]] == relisted
    assert sorted(p.url for p in sink2.pages) == sorted([url, *x_urls])
    (again,) = [p for p in sink2.pages if p.url == url]
    assert again.final_url == target and again.error is None and len(again.links) == 2
    # the counters of the whole crawl are those of a crawl never stopped: the stopped
    # page's counts were not committed, its re-fetch and re-listing count them once
    stats = result.stats
    assert (stats.links_found, stats.links_new, stats.redirects) == (
        2,
        len(first) + 2,
        int(via_redirect),
    )
    assert stats.pages == 3 and stats.pages_ok == 3


# -- hooks for the link checker --


async def test_collect_ids_fills_the_pages_fragment_targets(serve) -> None:  # type: ignore[no-untyped-def]
    app, _ = app_of({"/": '<h1 id="top">t</h1><a name="n1" href="/b#x">b</a>', "/b": "<p id=x>"})
    server = await serve(app)
    seed = str(server.make_url("/"))
    result = await crawl(seed, ignore_robots=True)
    assert all(p.ids is None for p in result.pages)
    pages: list[PageResult] = []
    config = CrawlConfig(seeds=(seed,), ignore_robots=True)
    async with Crawler(config, collect_ids=True, on_page=pages.append) as crawler:
        await crawler.run()
    by = {p.url: p for p in pages}
    assert by[seed].ids == {"top", "n1"} and by[seed].ids_complete
    assert by[str(server.make_url("/b"))].ids == {"x"}


async def test_report_skipped_gives_a_result_for_a_url_robots_disallows(serve) -> None:  # type: ignore[no-untyped-def]
    routes: dict[str, str | tuple[int, str, str]] = {
        "/robots.txt": (200, "text/plain", "User-agent: *\nDisallow: /private\n"),
        "/": '<a href="/private/a">p</a><a href="/ok">ok</a>',
        "/ok": "<p>ok",
    }
    app, hits = app_of(routes)
    server = await serve(app)
    seed = str(server.make_url("/"))
    plain = await crawl(seed)
    assert {p.url for p in plain.pages} == {seed, str(server.make_url("/ok"))}
    config = CrawlConfig(seeds=(seed,))
    async with Crawler(config, report_skipped=True, keep_results=True) as crawler:
        result = await crawler.run()
    skipped = [p for p in result.pages if p.error == "robots_disallowed"]
    assert [p.url for p in skipped] == [str(server.make_url("/private/a"))]
    assert skipped[0].status is None and skipped[0].referrer == seed
    assert "/private/a" not in hits
    # not a page: the counts are those of the plain crawl
    assert result.stats.pages == plain.stats.pages == 2
    assert result.stats.robots_disallowed == 1 and result.stats.errors == {}


async def test_redirect_statuses_are_kept_per_hop(serve) -> None:  # type: ignore[no-untyped-def]
    async def r1(request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("/r2")

    async def r2(request: web.Request) -> web.Response:
        raise web.HTTPTemporaryRedirect("/end")

    async def end(request: web.Request) -> web.Response:
        return web.Response(text="<p>end", content_type="text/html")

    app = web.Application()
    app.router.add_get("/r1", r1)
    app.router.add_get("/r2", r2)
    app.router.add_get("/end", end)
    server = await serve(app)
    result = await crawl(str(server.make_url("/r1")), ignore_robots=True)
    (page,) = result.pages
    assert page.redirects == [str(server.make_url("/r2")), str(server.make_url("/end"))]
    assert page.redirect_statuses == [301, 307]


@pytest.mark.skipif(not HAVE_SQLITE, reason="no crawler.state.sqlite yet")
async def test_a_recovered_redirect_does_not_fetch_a_target_queued_on_its_own(
    serve, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # / links /go and /t; /go (slow) redirects to /t, which is queued on its own (a link):
    # the run is stopped while /go is in flight. The next run's recovered /go stops at the
    # known target, as any redirect to a known URL does: /t is fetched once, by its own lease.
    sent = asyncio.Event()
    release = asyncio.Event()
    hits: Counter[str] = Counter()

    async def root(request: web.Request) -> web.Response:
        hits["/"] += 1
        return web.Response(text='<a href="/go">g</a><a href="/t">t</a>', content_type="text/html")

    async def go(request: web.Request) -> web.Response:
        hits["/go"] += 1
        if hits["/go"] == 1:
            sent.set()
            await release.wait()  # in flight until the stop
        raise web.HTTPFound("/t")

    async def t(request: web.Request) -> web.Response:
        hits["/t"] += 1
        return web.Response(text="<p>t", content_type="text/html")

    app = web.Application()
    app.router.add_get("/", root)
    app.router.add_get("/go", go)
    app.router.add_get("/t", t)
    server = await serve(app)
    seed = str(server.make_url("/"))
    config = CrawlConfig(
        seeds=(seed,), state=str(tmp_path / "state"), ignore_robots=True, concurrency=1
    )
    async with Crawler(config) as crawler:
        task = asyncio.ensure_future(crawler.run())
        await asyncio.wait_for(sent.wait(), 10)
        crawler.stop()
        await asyncio.gather(task, return_exceptions=True)
    release.set()
    assert hits == {"/": 1, "/go": 1}
    async with Crawler(config) as crawler2:
        result = await crawler2.run()
    assert result.stats.recovered == 1
    assert hits == {"/": 1, "/go": 2, "/t": 1}
    (go_page,) = [p for p in result.pages if p.url.endswith("/go")]
    assert go_page.final_url == str(server.make_url("/t")) and go_page.status == 302
