"""RobotsCache against a real server: RFC 9309 status handling, caching, size cap; sitemaps."""

from __future__ import annotations

import asyncio
import gc
import gzip
import socket
import sys
import time
import tracemalloc
from collections import Counter

import pytest
from aiohttp import web

from crawler.config import CrawlConfig
from crawler.core.engine import crawl
from crawler.core.robots import (
    MAX_ROBOTS_BYTES,
    MAX_SITEMAP_BYTES,
    ROBOTS_TTL,
    RobotsCache,
    RobotsRules,
    SitemapParser,
    decode_robots,
)
from crawler.http.client import Fetcher
from crawler.state.base import MAX_ROBOTS_ORIGINS

UA = "crawler/1.0 (+https://example.org/bot)"


async def make(serve, routes):  # type: ignore[no-untyped-def]
    hits: Counter[str] = Counter()

    @web.middleware
    async def count(request: web.Request, handler):  # type: ignore[no-untyped-def]
        hits[request.path] += 1
        return await handler(request)

    app = web.Application(middlewares=[count])
    for path, handler in routes.items():
        app.router.add_get(path, handler)
    server = await serve(app)
    origin = str(server.make_url("")).rstrip("/")
    fetcher = Fetcher(CrawlConfig(retries=1, backoff=0.001, user_agent=UA))
    return origin, hits, fetcher, RobotsCache(fetcher, UA)


def text(body: str, status: int = 200):  # type: ignore[no-untyped-def]
    async def h(request: web.Request) -> web.Response:
        return web.Response(text=body, status=status)

    return h


ROBOTS = """\
User-agent: otherbot
Disallow: /

User-agent: crawler
Disallow: /private
Allow: /private/open$
Disallow: /*.pdf$
Crawl-delay: 1.5

Sitemap: http://example.org/sitemap.xml
"""


async def test_rules_parsed_and_cached(serve) -> None:  # type: ignore[no-untyped-def]
    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": text(ROBOTS)})
    try:
        rules = await cache.get(origin)
        assert await cache.get(origin) is rules
        assert rules.allowed(origin + "/public")
        assert not rules.allowed(origin + "/private/x")
        assert rules.allowed(origin + "/private/open")
        assert not rules.allowed(origin + "/doc.pdf")
        assert rules.allowed(origin + "/doc.pdf?x=1")
        assert rules.crawl_delay == 1.5
        assert rules.sitemaps == ["http://example.org/sitemap.xml"]
        assert hits["/robots.txt"] == 1
    finally:
        await fetcher.close()


async def test_concurrent_requests_share_one_fetch(serve) -> None:  # type: ignore[no-untyped-def]
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.2)
        return web.Response(text="User-agent: *\nDisallow: /x\n")

    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": slow})
    try:
        results = await asyncio.gather(*(cache.get(origin) for _ in range(20)))
        assert all(r is results[0] for r in results)
        assert hits["/robots.txt"] == 1
    finally:
        await fetcher.close()


async def test_cancelled_loader_lets_waiter_retry(serve) -> None:  # type: ignore[no-untyped-def]
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.3)
        return web.Response(text="User-agent: *\nDisallow: /x\n")

    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": slow})
    try:
        first = asyncio.ensure_future(cache.get(origin))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(cache.get(origin))
        await asyncio.sleep(0.05)
        first.cancel()
        rules = await asyncio.wait_for(second, 5)
        assert not rules.allowed(origin + "/x")
        assert first.cancelled()
    finally:
        await fetcher.close()


@pytest.mark.parametrize(("status", "allowed"), [(404, True), (403, True), (410, True)])
async def test_4xx_allows_all(serve, status: int, allowed: bool) -> None:  # type: ignore[no-untyped-def]
    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": text("Disallow: /", status)})
    try:
        rules = await cache.get(origin)
        assert rules.allowed(origin + "/anything") is allowed
        assert hits["/robots.txt"] == 1
    finally:
        await fetcher.close()


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_5xx_disallows_all_after_bounded_retry(serve, status: int) -> None:  # type: ignore[no-untyped-def]
    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": text("", status)})
    try:
        rules = await cache.get(origin)
        assert not rules.allowed(origin + "/")
        assert rules.error is None  # a robots verdict, not an unreachable host
        assert hits["/robots.txt"] == 2  # one try + config.retries=1
    finally:
        await fetcher.close()


async def test_redirects_followed_up_to_five(serve) -> None:  # type: ignore[no-untyped-def]
    def hop(n: int):  # type: ignore[no-untyped-def]
        async def h(request: web.Request) -> web.Response:
            return web.Response(status=301, headers={"Location": f"/r{n}"})

        return h

    routes = {"/robots.txt": hop(1), **{f"/r{i}": hop(i + 1) for i in range(1, 4)}}
    routes["/r4"] = text("User-agent: *\nDisallow: /secret\n")
    origin, hits, fetcher, cache = await make(serve, routes)
    try:
        rules = await cache.get(origin)
        assert not rules.allowed(origin + "/secret") and rules.allowed(origin + "/ok")
    finally:
        await fetcher.close()
    # a chain of more than 5 hops: treated as unavailable (allow all)
    routes = {"/robots.txt": hop(1), **{f"/r{i}": hop(i + 1) for i in range(1, 10)}}
    origin, hits, fetcher, cache = await make(serve, routes)
    try:
        rules = await cache.get(origin)
        assert rules.allowed(origin + "/secret")
        assert sum(hits.values()) == 6
    finally:
        await fetcher.close()


async def test_enormous_file_parsed_up_to_cap(serve) -> None:  # type: ignore[no-untyped-def]
    body = "User-agent: *\nDisallow: /early\n" + "# filler\n" * (MAX_ROBOTS_BYTES // 9 + 10)
    body += "Disallow: /late\n"
    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": text(body)})
    try:
        rules = await cache.get(origin)
        assert not rules.allowed(origin + "/early")
        assert rules.allowed(origin + "/late")
    finally:
        await fetcher.close()


def test_garbage_never_raises() -> None:
    for junk in ["\x00\xff<html>", "Disallow", "User-agent:\nDisallow: [[[", "Crawl-delay: soon\n"]:
        rules = RobotsRules.parse(junk, UA)
        rules.allowed("http://h/x")
        assert rules.crawl_delay is None or rules.crawl_delay >= 0


async def test_unreachable_host_reports_its_kind() -> None:
    with socket.socket() as s:  # a port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    fetcher = Fetcher(CrawlConfig(retries=0))
    try:
        rules = await RobotsCache(fetcher, UA).get(f"http://127.0.0.1:{port}")
    finally:
        await fetcher.close()
    assert rules.error == "connect" and not rules.allowed(f"http://127.0.0.1:{port}/")


async def test_a_dead_proxy_is_the_pages_error_not_a_silent_disallow(serve) -> None:  # type: ignore[no-untyped-def]
    # robots.txt through a proxy that is not there: the seed is a page with error "proxy"
    # that names the proxy (a crawl of nothing that says nothing is what this prevents).
    server = await serve(web.Application())
    with socket.socket() as s:  # a port with nothing listening: the dead proxy
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proxy = f"http://127.0.0.1:{port}"
    result = await crawl(str(server.make_url("/")), proxy=proxy, retries=0)
    assert result.stats.pages == 1 and result.stats.errors == Counter({"proxy": 1})
    (page,) = result.pages
    assert page.error == "proxy" and proxy in (page.error_detail or "")


def test_sitemap_parser_any_chunking() -> None:
    doc = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc>http://e.com/a</loc></url><url><loc> http://e.com/b?x=1&amp;y=2 </loc></url>"
        b"<sm:url><sm:loc>http://e.com/c</sm:loc></sm:url></urlset>"
    )
    want = ["http://e.com/a", "http://e.com/b?x=1&y=2", "http://e.com/c"]
    for size in (1, 3, 7, len(doc)):
        p = SitemapParser()
        got: list[str] = []
        for i in range(0, len(doc), size):
            got += p.feed(doc[i : i + size])
        got += p.close()
        assert got == want, size


def test_sitemap_parser_gzip_file_and_bomb() -> None:
    doc = b"<urlset>" + b"".join(b"<url><loc>http://e.com/%d</loc></url>" % i for i in range(500))
    doc += b"</urlset>"
    packed = gzip.compress(doc)
    p = SitemapParser()
    got: list[str] = []
    for i in range(0, len(packed), 100):
        got += p.feed(packed[i : i + 100])
    assert got == [f"http://e.com/{i}" for i in range(500)]
    bomb = gzip.compress(b"<urlset>" + b" " * (MAX_SITEMAP_BYTES + 4 * 1024 * 1024), 1)
    p = SitemapParser()
    t0 = time.monotonic()
    for i in range(0, len(bomb), 65536):
        assert p.feed(bomb[i : i + 65536]) == []
    assert p._inflated <= MAX_SITEMAP_BYTES
    assert time.monotonic() - t0 < 10
    assert SitemapParser().feed(b"\x1f\x8bgarbage") == []


def raw(body: bytes):  # type: ignore[no-untyped-def]
    async def h(request: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/plain")

    return h


@pytest.mark.parametrize(
    "body",
    [
        b"\xef\xbb\xbfUser-agent: *\nDisallow: /private\n",
        b"\xef\xbb\xbfuser-agent: crawler\r\ndisallow: /private\r\n",
        b"\xef\xbb\xbfDisallow: /nothing\nUser-agent: *\nDisallow: /private\n",
        # invalid UTF-8 in a comment and in another rule: replaced, the rest still counts
        b"\xef\xbb\xbfUser-agent: *\n# caf\xe9 \xff\xfe\n"
        b"Disallow: /\xe9t\xe9\nDisallow: /private\n",
    ],
)
async def test_utf8_bom_does_not_hide_the_rules(serve, body: bytes) -> None:  # type: ignore[no-untyped-def]
    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": raw(body)})
    try:
        rules = await cache.get(origin)
    finally:
        await fetcher.close()
    assert not rules.allowed(origin + "/private")
    assert not rules.allowed(origin + "/private/x")
    assert rules.allowed(origin + "/public")


def test_decode_robots() -> None:
    assert decode_robots(b"\xef\xbb\xbfUser-agent: *") == "User-agent: *"
    assert decode_robots(b"Disallow: /caf\xc3\xa9") == "Disallow: /café"
    assert decode_robots(b"Disallow: /caf\xe9") == "Disallow: /caf\ufffd"
    assert decode_robots(b"\xef\xbb\xbf\xef\xbb\xbfx") == "\ufeffx"  # only one BOM is one
    rules = RobotsRules.parse("\ufeffUser-agent: *\nDisallow: /p\n", UA)
    assert not rules.allowed("http://h/p")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_rules_expire_after_24_hours(serve) -> None:  # type: ignore[no-untyped-def]
    body = {"text": "User-agent: *\nDisallow: /old\n"}

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text=body["text"])

    origin, hits, fetcher, _ = await make(serve, {"/robots.txt": robots})
    clock = Clock()
    cache = RobotsCache(fetcher, UA, clock=clock)
    try:
        first = await cache.get(origin)
        assert not first.allowed(origin + "/old")
        body["text"] = "User-agent: *\nDisallow: /new\n"
        clock.now += ROBOTS_TTL - 1
        assert cache.cached(origin) is first
        assert await cache.get(origin) is first
        assert hits["/robots.txt"] == 1
        clock.now += 2  # 24 h and 1 s after the fetch
        assert cache.cached(origin) is None
        fresh = await cache.get(origin)
        assert hits["/robots.txt"] == 2
        assert fresh.allowed(origin + "/old") and not fresh.allowed(origin + "/new")
    finally:
        await fetcher.close()
    assert ROBOTS_TTL == 24 * 3600


async def test_least_recently_used_origin_evicted_and_fetched_again(serve) -> None:  # type: ignore[no-untyped-def]
    counts: Counter[int] = Counter()
    origins: list[str] = []
    for i in range(5):

        async def robots(request: web.Request, i: int = i) -> web.Response:
            counts[i] += 1
            return web.Response(text=f"User-agent: *\nDisallow: /only-{i}\n")

        app = web.Application()
        app.router.add_get("/robots.txt", robots)
        server = await serve(app)
        origins.append(str(server.make_url("")).rstrip("/"))
    fetcher = Fetcher(CrawlConfig(retries=0, user_agent=UA))
    cache = RobotsCache(fetcher, UA, max_origins=3)
    try:
        for origin in origins[:3]:
            await cache.get(origin)
        await cache.get(origins[0])  # origin 0 is now the most recently used
        for origin in origins[3:]:
            await cache.get(origin)
        assert len(cache) == 3 and cache.evicted == 2
        assert cache.cached(origins[1]) is None and cache.cached(origins[2]) is None
        assert cache.cached(origins[0]) is not None
        rules = await cache.get(origins[1])  # evicted: fetched again, same verdict
        assert not rules.allowed(origins[1] + "/only-1") and rules.allowed(origins[1] + "/x")
        assert counts == {0: 1, 1: 2, 2: 1, 3: 1, 4: 1}
        assert len(cache) == 3
    finally:
        await fetcher.close()


async def test_byte_budget_bounds_large_files(serve) -> None:  # type: ignore[no-untyped-def]
    big = "User-agent: *\n" + "".join(f"Disallow: /p{i}/*.x$\n" for i in range(2000))
    origins = []
    for _ in range(4):
        app = web.Application()
        app.router.add_get("/robots.txt", text(big))
        server = await serve(app)
        origins.append(str(server.make_url("")).rstrip("/"))
    fetcher = Fetcher(CrawlConfig(retries=0, user_agent=UA))
    one = RobotsRules.parse(big, UA).weight
    cache = RobotsCache(fetcher, UA, max_bytes=2 * one + one // 2)
    try:
        for origin in origins:
            rules = await cache.get(origin)
            assert not rules.allowed(origin + "/p1999/a.x")
            assert cache.weight <= 2 * one + one // 2
        assert len(cache) == 2 and cache.evicted == 2
        # A budget below one file: the verdict just fetched is kept all the same (alone).
        tiny = RobotsCache(fetcher, UA, max_bytes=1)
        for origin in origins[:2]:
            rules = await tiny.get(origin)
            assert len(tiny) == 1 and tiny.cached(origin) is rules
    finally:
        await fetcher.close()


async def test_cache_bounded_over_100000_origins() -> None:
    """A wide crawl: 100,000 origins through get() keep at most MAX_ROBOTS_ORIGINS verdicts and
    flat memory. The origins' port is out of range, so each fetch fails at once (no socket)."""
    # timeout=0: aiohttp leaves each failed request's total-timeout timer in the loop until it
    # fires, which would show as growth here though it is not the cache's.
    fetcher = Fetcher(CrawlConfig(retries=0, user_agent=UA, timeout=0))
    cache = RobotsCache(fetcher, UA)
    blocks = []
    try:
        for i in range(100_000):
            rules = await cache.get(f"http://o{i}.example:99999")
            assert not rules.allowed(f"http://o{i}.example:99999/")
            assert len(cache) <= MAX_ROBOTS_ORIGINS
            if i in (2 * MAX_ROBOTS_ORIGINS, 99_999):
                gc.collect()
                blocks.append(sys.getallocatedblocks())
    finally:
        await fetcher.close()
    assert len(cache) == MAX_ROBOTS_ORIGINS
    assert cache.evicted == 100_000 - MAX_ROBOTS_ORIGINS
    # After 100,000 origins as many memory blocks are in use as after 8,192: each origin kept
    # holds several blocks (over 10,000 in all), so growth with the origins would show.
    assert blocks[1] - blocks[0] < 2_000, blocks


# 500 KiB of wildcard rules: seconds for Protego to parse, tens of ms for each check.
HUGE_RULES = ("User-agent: *\n" + "".join(f"Disallow: /*{i}*$\n" for i in range(40_000)))[
    : MAX_ROBOTS_BYTES - 100
] + "\nDisallow: /last\n"


class Ticker:
    """Records the gaps between event-loop turns while it runs."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.last = time.perf_counter()
        self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0.005)
            now = time.perf_counter()
            self.gaps.append(now - self.last)
            self.last = now

    def stop(self) -> float:
        """The longest gap, the one still open included."""
        self._task.cancel()
        return max([*self.gaps, time.perf_counter() - self.last])


async def test_huge_rule_file_does_not_stall_the_event_loop(serve) -> None:  # type: ignore[no-untyped-def]
    """Parsing and checking a huge rule file happen off the event loop."""
    # The collector off while the loop's gaps are measured: a full collection of the test
    # session's heap (in whichever thread allocates, the parse's own included) holds the
    # GIL for a stretch that is not the parse's (0.63 s of a 0.73 s parse, once in CI)
    gc.collect()
    gc.disable()
    try:
        await _huge_rule_file_off_the_loop(serve)
    finally:
        gc.enable()


async def _huge_rule_file_off_the_loop(serve) -> None:  # type: ignore[no-untyped-def]
    t0 = time.perf_counter()
    RobotsRules.parse(HUGE_RULES, UA)
    parse_time = time.perf_counter() - t0
    origin, hits, fetcher, cache = await make(serve, {"/robots.txt": text(HUGE_RULES)})
    ticker = Ticker()
    try:
        rules = await cache.get(origin)
    finally:
        worst = ticker.stop()
        await fetcher.close()
    assert parse_time > 0.2, parse_time  # the test means something only if parsing is slow
    # on the loop it would be all of it; 3/4 leaves room for a loaded machine's scheduling
    assert worst < parse_time * 0.75, (worst, parse_time)

    urls = [f"{origin}/page-{chr(97 + i)}" for i in range(26)]  # no digit: no rule matches
    t0 = time.perf_counter()
    inline = [rules.allowed(u) for u in urls]
    check_time = time.perf_counter() - t0
    ticker = Ticker()
    checked = await asyncio.gather(*(rules.allowed_async(u) for u in urls))
    worst = ticker.stop()
    assert checked == inline == [True] * 26
    assert check_time > 0.2, check_time
    assert worst < check_time * 0.75, (worst, check_time)  # (inline: all of it, one turn)
    assert not await rules.allowed_async(origin + "/last")
    assert not await rules.allowed_async(origin + "/page-7")  # "/*7*$"
    small = RobotsRules.parse("User-agent: *\nDisallow: /x\n", UA)
    assert not small.slow and not await small.allowed_async("http://h/x")


async def test_redirect_to_a_non_utf8_location_is_followed() -> None:
    """A latin-1 server's Location (byte 0xE9): followed, not taken for a bad redirect."""
    rules_body = b"User-agent: *\nDisallow: /private\n"
    seen: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = (await reader.readuntil(b"\r\n\r\n")).split(b" ")[1]
        seen.append(target)
        if target == b"/robots.txt":
            head = b"HTTP/1.1 301 Moved\r\nLocation: /r\xe9gles.txt\r\nContent-Length: 0\r\n"
            body = b""
        elif target == b"/r%E9gles.txt":
            head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(rules_body)
            body = rules_body
        else:
            head, body = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n", b""
        writer.write(head + b"Connection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    origin = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    fetcher = Fetcher(CrawlConfig(retries=0, user_agent=UA))
    try:
        rules = await RobotsCache(fetcher, UA).get(origin)
    finally:
        await fetcher.close()
        server.close()
    assert seen == [b"/robots.txt", b"/r%E9gles.txt"]
    assert not rules.allowed(origin + "/private") and rules.allowed(origin + "/public")


@pytest.mark.parametrize(
    "rule",
    [
        "Disallow: /d{i}\n",
        "Allow: /*{i}*$\n",
        "Allow:*{i}$\n",
        "Allow:{i:x}*$\n",
        "Allow: /" + "x*" * 300 + "{i}$\n",
        "Allow: /" + "x" * 300 + "{i}\n",
        "User-agent: b{i}\nAllow:*{i}$\n",
        "# {i}\n",
    ],
    ids=lambda r: repr(r[:24]),
)
def test_weight_is_an_upper_bound_of_the_memory_held(rule: str) -> None:
    """The cache's byte budget counts `weight`: it must not be below what the rules hold."""
    body = ("User-agent: *\n" + "".join(rule.format(i=i) for i in range(20_000)))[:100_000]
    tracemalloc.start()
    try:
        rules = RobotsRules.parse(body, UA)
        rules.allowed("http://h/zz")  # Protego builds its index on the first check
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held <= rules.weight, (held, rules.weight)
    small = RobotsRules.parse("User-agent: *\nDisallow: /x\n", UA)
    assert small.weight >= 6 * 1024


async def test_a_store_keeps_response_verdicts_across_caches(serve) -> None:  # type: ignore[no-untyped-def]
    # The crawl state as the store: a second cache (a resumed crawl) parses the stored body
    # instead of fetching it again while it is younger than the TTL; an older one is fetched
    # again; a verdict without a usable response (5xx: disallow all) is not stored.
    from crawler.state.memory import MemoryState  # noqa: PLC0415

    body = {"text": "User-agent: *\nDisallow: /old\n"}

    async def robots(request: web.Request) -> web.Response:
        return web.Response(text=body["text"])

    origin, hits, fetcher, _ = await make(
        serve, {"/robots.txt": robots, "/down/robots.txt": text("", 503)}
    )
    store = MemoryState()
    wall = Clock()
    wall.now = time.time()
    try:
        first = await RobotsCache(fetcher, UA, store=store, wall_clock=wall).get(origin)
        assert not first.allowed(origin + "/old") and hits["/robots.txt"] == 1
        stored = await store.get_robots(origin)
        assert stored is not None and stored.status == 200 and b"/old" in stored.body
        body["text"] = "User-agent: *\nDisallow: /new\n"
        wall.now += ROBOTS_TTL - 10
        again = RobotsCache(fetcher, UA, store=store, wall_clock=wall)
        rules = await again.get(origin)
        assert hits["/robots.txt"] == 1 and again.from_store == 1 and again.fetched == 0
        assert not rules.allowed(origin + "/old") and rules.allowed(origin + "/new")
        wall.now += 20  # older than the TTL now: fetched again, and the new body stored
        late = RobotsCache(fetcher, UA, store=store, wall_clock=wall)
        rules = await late.get(origin)
        assert hits["/robots.txt"] == 2 and late.from_store == 0
        assert rules.allowed(origin + "/old") and not rules.allowed(origin + "/new")
        stored = await store.get_robots(origin)
        assert stored is not None and b"/new" in stored.body and stored.fetched_at == wall.now
        # a 503 disallows everything in this process, and is asked again by the next
        down = origin + "/down"  # an "origin" whose robots.txt path answers 503
        verdict = await late.get(down)
        assert not verdict.allowed(down + "/x")
        assert await store.get_robots(down) is None
    finally:
        await fetcher.close()
