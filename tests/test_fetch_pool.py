"""The Fetcher's idle keep-alive pool stays bounded however many origins it meets.

Real sockets: one aiohttp server on 0.0.0.0 (only loopback peers answered) reached as 600
distinct hosts 127.0.x.y, so each is its own (host, port) pool key, as origins are in a crawl.
Open connections are counted in the kernel's table (/proc/net/tcp), not in aiohttp's state.
"""

from __future__ import annotations

import asyncio
import ipaddress
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler.config import CrawlConfig
from crawler.http.client import Fetcher
from crawler.http.options import idle_cap
from crawler.http.response import Response
from crawler.http.session import BoundedPoolConnector

ORIGINS = 600
PEERS = web.AppKey("peers", set[tuple[str, str, int]])
ESTABLISHED = "01"


def hosts(n: int) -> list[str]:
    return [f"127.0.{i // 250}.{i % 250 + 1}" for i in range(n)]


def client_connections(port: int) -> int:
    """Established TCP connections whose remote end is ``port`` (our client sockets to it)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        remote, state = fields[2], fields[3]
        if state == ESTABLISHED and int(remote.split(":")[1], 16) == port:
            count += 1
    return count


def app() -> web.Application:
    async def page(request: web.Request) -> web.Response:
        transport = request.transport
        assert transport is not None
        peer, local = transport.get_extra_info("peername"), transport.get_extra_info("sockname")
        if not ipaddress.ip_address(peer[0]).is_loopback:
            raise web.HTTPForbidden()
        # (the address the client dialled, the client's address and port): one per connection
        request.app[PEERS].add((local[0], *peer[:2]))
        return web.Response(text="<a href=/x>x</a>", content_type="text/html")

    application = web.Application()
    application[PEERS] = set()
    application.router.add_get("/", page)
    return application


@pytest.fixture
async def wide_server() -> AsyncIterator[TestServer]:
    server = TestServer(app(), host="0.0.0.0", port=0)
    await server.start_server()
    yield server
    await server.close()


def read(res: Response) -> Callable[[bytes], None]:
    """Read every body to its end, as the crawl does: a connection left mid-body is not reused."""
    return lambda chunk: None


def connector_of(fetcher: Fetcher) -> BoundedPoolConnector:
    connector = fetcher.session.connector
    assert isinstance(connector, BoundedPoolConnector)
    return connector


async def test_open_connections_stay_under_the_cap_across_600_origins(
    wide_server: TestServer,
) -> None:
    config = CrawlConfig(concurrency=8, per_host=2, retries=0)
    cap = idle_cap(config)
    port = wide_server.port
    assert port is not None
    fetcher = Fetcher(config, plain=False)  # aiohttp's connector: its private pool
    peak = 0
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, client_connections(port))
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    try:
        results = await asyncio.gather(
            *(fetcher.fetch(f"http://{h}:{port}/", read) for h in hosts(ORIGINS))
        )
        assert [r.status for r in results] == [200] * ORIGINS
        # Every origin answered; the evicted connections' sockets close on the next loop turns.
        for _ in range(20):
            await asyncio.sleep(0.01)
        idle_now = client_connections(port)
        connector = connector_of(fetcher)
        assert connector.idle_cap_active, "the idle cap is off on the pinned aiohttp: see fetch.py"
        assert connector.max_idle == cap == 16
        assert connector.idle_connections <= cap
    finally:
        done.set()
        await sampler
        await fetcher.close()
    # Without the cap, one idle socket per origin stays open (600 here) for keepalive_timeout.
    assert 0 < idle_now <= cap
    # In use <= concurrency, idle <= cap, and sockets closed in this loop turn (asyncio closes a
    # transport's socket on the next turn) <= one per release, so <= concurrency.
    assert peak <= cap + 2 * config.concurrency


async def test_repeated_fetches_to_one_origin_reuse_one_connection(wide_server: TestServer) -> None:
    port = wide_server.port
    fetcher = Fetcher(CrawlConfig(concurrency=8, retries=0), plain=False)
    try:
        for _ in range(30):
            assert (await fetcher.fetch(f"http://127.0.0.1:{port}/", read)).status == 200
    finally:
        await fetcher.close()
    assert len(wide_server.app[PEERS]) == 1


async def test_an_origin_in_use_keeps_its_connection_while_cold_ones_are_evicted(
    wide_server: TestServer,
) -> None:
    """LRU: the origin fetched between every cold one is always the most recent, never closed."""
    port = wide_server.port
    config = CrawlConfig(concurrency=8, retries=0)
    fetcher = Fetcher(config, plain=False)  # aiohttp's connector: its private pool
    hot = f"http://127.0.9.9:{port}/"
    try:
        for h in hosts(5 * idle_cap(config)):
            assert (await fetcher.fetch(hot, read)).status == 200
            assert (await fetcher.fetch(f"http://{h}:{port}/", read)).status == 200
    finally:
        await fetcher.close()
    to_hot = {p for p in wide_server.app[PEERS] if p[0] == "127.0.9.9"}
    assert len(to_hot) == 1
    assert len(wide_server.app[PEERS]) == 1 + 5 * idle_cap(config)


class _Key:
    is_ssl = False


class _Proto:
    transport = None
    should_close = True

    def close(self) -> None:
        pass


async def test_a_changed_pool_layout_turns_the_cap_off_instead_of_raising() -> None:
    """What an aiohttp upgrade that reshapes ``_conns`` would do: today's behaviour, no error."""
    connector = BoundedPoolConnector(max_idle=0)
    try:
        assert connector.idle_cap_active
        entry = ("protocol", "used", "a field aiohttp might add")
        connector._conns = {"key": deque([entry])}  # type: ignore[assignment,dict-item]
        connector._release(_Key(), _Proto(), should_close=True)  # no error escapes
        assert not connector.idle_cap_active
        assert connector._conns["key"] == deque([entry])  # nothing dropped half-way
    finally:
        connector._conns = {}  # type: ignore[assignment]
        await connector.close()


async def test_plain_path_keeps_the_same_bounds_across_600_origins(
    wide_server: TestServer,
) -> None:
    # crawler.http.http1's pool: in use <= concurrency, at most per_host to one origin, idle <= cap
    config = CrawlConfig(concurrency=8, per_host=2, retries=0)
    cap = idle_cap(config)
    port = wide_server.port
    assert port is not None
    fetcher = Fetcher(config)
    peak = 0
    peak_in_use = 0
    done = asyncio.Event()

    async def sample() -> None:
        nonlocal peak, peak_in_use
        while not done.is_set():
            peak = max(peak, client_connections(port))
            pool = fetcher._prep.plain.pool
            if pool is not None:
                peak_in_use = max(peak_in_use, pool.in_use)
            await asyncio.sleep(0.005)

    sampler = asyncio.create_task(sample())
    try:
        urls = [f"http://{h}:{port}/" for h in hosts(ORIGINS)]
        urls += urls[:20] * 3  # some origins asked 4 times at once: per_host holds them to 2
        results = await asyncio.gather(*(fetcher.fetch(u, read) for u in urls))
        assert [r.status for r in results] == [200] * len(urls)
        assert fetcher.plain_http
        for _ in range(20):
            await asyncio.sleep(0.01)
        idle_now = client_connections(port)
        pool = fetcher._prep.plain.pool
        assert pool is not None and pool.idle_connections <= cap and pool.in_use == 0
    finally:
        done.set()
        await sampler
        await fetcher.close()
    assert 0 < idle_now <= cap
    assert 0 < peak_in_use <= config.concurrency
    assert peak <= cap + 2 * config.concurrency
