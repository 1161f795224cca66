"""Fetcher units: aioresponses for status/retry/error logic, a real server for the wire faults."""

from __future__ import annotations

import asyncio
import gzip
import socket
import time
from types import SimpleNamespace
from urllib.parse import unquote_to_bytes

import aiohttp
import pytest
from aiohttp import web
from aioresponses import aioresponses

from crawler.config import CrawlConfig
from crawler.http.client import Fetcher
from crawler.http.errors import classify_error
from crawler.http.response import Response, parse_retry_after
from crawler.urls.policy import join

URL = "http://site.test/page"


class _Resp(aiohttp.ClientResponse):
    """aioresponses 0.7.9 predates aiohttp 3.14's required ``stream_writer`` argument."""

    def __init__(self, method, url, **kw):  # type: ignore[no-untyped-def]
        kw.setdefault("stream_writer", SimpleNamespace(output_size=0))
        super().__init__(method, url, **kw)


def mock() -> aioresponses:
    m = aioresponses()
    plain_add = m.add

    def add(url, method="GET", *args, **kw):  # type: ignore[no-untyped-def]
        kw.setdefault("response_class", _Resp)
        return plain_add(url, method, *args, **kw)

    m.add = add  # type: ignore[method-assign]
    return m


def cfg(**kw: object) -> CrawlConfig:
    base: dict[str, object] = {"retries": 2, "backoff": 0.001, "max_retry_after": 0.05}
    base.update(kw)
    return CrawlConfig(**base)  # type: ignore[arg-type]


class Collect:
    def __init__(self) -> None:
        self.calls: list[Response] = []
        self.chunks: list[bytes] = []

    def __call__(self, res: Response):  # type: ignore[no-untyped-def]
        self.calls.append(res)
        if res.status == 200 and res.is_html:
            return self.chunks.append
        return None


@pytest.fixture
async def fetcher():  # type: ignore[no-untyped-def]
    f = Fetcher(cfg(), plain=False)
    yield f
    await f.close()


async def test_html_body_streams_to_consumer(fetcher: Fetcher) -> None:
    col = Collect()
    with mock() as m:
        m.get(URL, status=200, body=b"<a href=x>hi</a>", content_type="text/html; charset=latin-1")
        res = await fetcher.fetch(URL, col)
    assert res.status == 200 and res.error is None
    assert res.content_type == "text/html" and res.charset == "latin-1"
    assert b"".join(col.chunks) == b"<a href=x>hi</a>"
    assert res.bytes == 16


async def test_non_html_body_not_read(fetcher: Fetcher) -> None:
    col = Collect()
    with mock() as m:
        m.get(URL, status=200, body=b"\x89PNG....", content_type="image/png")
        res = await fetcher.fetch(URL, col)
    assert res.content_type == "image/png" and res.error is None
    assert col.chunks == [] and res.bytes == 0
    assert len(col.calls) == 1


async def test_404_is_final_and_not_retried(fetcher: Fetcher) -> None:
    with mock() as m:
        m.get(URL, status=404, body=b"nope")
        res = await fetcher.fetch(URL)
    assert res.status == 404 and res.error == "http_404" and res.retries == 0


async def test_503_recovers_after_retries(fetcher: Fetcher) -> None:
    col = Collect()
    with mock() as m:
        m.get(URL, status=503)
        m.get(URL, status=500)
        m.get(URL, status=200, body=b"<p>ok", content_type="text/html")
        res = await fetcher.fetch(URL, col)
    assert res.status == 200 and res.error is None and res.retries == 2
    assert len(col.calls) == 1  # on_headers only sees the final response


async def test_503_forever_gives_up_after_retries(fetcher: Fetcher) -> None:
    with mock() as m:
        for _ in range(3):
            m.get(URL, status=503)
        res = await fetcher.fetch(URL)
    assert res.status == 503 and res.error == "http_503" and res.retries == 2


async def test_retry_after_is_honoured_and_capped() -> None:
    f = Fetcher(cfg(retries=1, max_retry_after=0.3, backoff=0.0), plain=False)
    try:
        with mock() as m:
            m.get(URL, status=429, headers={"Retry-After": "3600"})
            m.get(URL, status=200, body=b"x", content_type="text/html")
            t0 = time.monotonic()
            res = await f.fetch(URL)
            waited = time.monotonic() - t0
    finally:
        await f.close()
    assert res.status == 200 and res.retries == 1
    assert 0.25 <= waited < 2.0


_KEY = SimpleNamespace(ssl=True, host="site.test", port=80)


@pytest.mark.parametrize(
    ("exc", "kind", "retried"),
    [
        (aiohttp.ClientConnectorError(_KEY, OSError(111, "refused")), "connect", True),  # type: ignore[arg-type]
        (aiohttp.ClientConnectorDNSError(_KEY, socket.gaierror(-2, "unknown")), "dns", False),  # type: ignore[arg-type]
        (TimeoutError(), "timeout", True),
        (aiohttp.ServerDisconnectedError(), "disconnected", True),
        (aiohttp.ClientPayloadError("Can not decode content-encoding: gzip"), "decode", False),
    ],
)
async def test_errors_classified_and_retried(
    fetcher: Fetcher, exc: Exception, kind: str, retried: bool
) -> None:
    with mock() as m:
        for _ in range(3):
            m.get(URL, exception=exc)
        res = await fetcher.fetch(URL)
    assert res.error == kind and res.status is None
    assert res.retries == (2 if retried else 0)
    assert res.error_detail


async def test_redirect_not_followed(fetcher: Fetcher) -> None:
    with mock() as m:
        m.get(URL, status=301, headers={"Location": "/elsewhere"})
        res = await fetcher.fetch(URL, Collect())
    assert res.status == 301 and res.location == "/elsewhere" and res.error is None


async def test_size_cap_truncates(fetcher: Fetcher) -> None:
    f = Fetcher(cfg(max_body_bytes=10), plain=False)
    col = Collect()
    try:
        with mock() as m:
            m.get(URL, status=200, body=b"0123456789abcdef", content_type="text/html")
            res = await f.fetch(URL, col)
    finally:
        await f.close()
    assert res.error == "too_large" and res.truncated and res.bytes == 10
    assert b"".join(col.chunks) == b"0123456789"


def test_parse_retry_after() -> None:
    assert parse_retry_after("2") == 2.0
    assert parse_retry_after("") is None
    assert parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert 9 < parse_retry_after("Thu, 01 Jan 1970 00:00:20 GMT", now=10.0) <= 10  # type: ignore[operator]


def test_classify_reset_vs_short_body() -> None:
    reset = aiohttp.ClientPayloadError(
        "Response payload is not completed: <ContentLengthError>. ConnectionResetError(104)"
    )
    assert classify_error(reset)[0] == "disconnected"
    short = aiohttp.ClientPayloadError("Response payload is not completed: <ContentLengthError>")
    assert classify_error(short)[0] == "protocol"


# -- against a real server: both the plain path (crawler.http.http1) and aiohttp's --


@pytest.fixture(params=[True, False], ids=["plain", "aiohttp"])
def plain(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


async def test_gzip_and_cap_on_decompressed_bytes(serve, plain: bool) -> None:  # type: ignore[no-untyped-def]
    page = b"<a href=/x>x</a>" + b" " * 100_000
    bomb = gzip.compress(b"\0" * 50_000_000, 9)

    async def gz(request: web.Request) -> web.Response:
        return web.Response(
            body=gzip.compress(page), headers={"Content-Encoding": "gzip"}, content_type="text/html"
        )

    async def bomb_h(request: web.Request) -> web.Response:
        return web.Response(
            body=bomb, headers={"Content-Encoding": "gzip"}, content_type="text/html"
        )

    app = web.Application()
    app.router.add_get("/gz", gz)
    app.router.add_get("/bomb", bomb_h)
    server = await serve(app)
    f = Fetcher(cfg(max_body_bytes=1_000_000), plain=plain)
    try:
        col = Collect()
        res = await f.fetch(str(server.make_url("/gz")), col)
        assert res.error is None and b"".join(col.chunks) == page
        col = Collect()
        res = await f.fetch(str(server.make_url("/bomb")), col)
        assert res.error == "too_large" and res.truncated and res.bytes == 1_000_000
        assert sum(map(len, col.chunks)) == 1_000_000
    finally:
        await f.close()


async def test_stalled_body_times_out_and_keeps_partial(serve, plain: bool) -> None:  # type: ignore[no-untyped-def]
    async def stall(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        await resp.write(b"<a href=/a>a</a>")
        await asyncio.sleep(3)
        return resp

    app = web.Application()
    app.router.add_get("/stall", stall)
    server = await serve(app)
    f = Fetcher(cfg(read_timeout=0.3, retries=0), plain=plain)
    col = Collect()
    try:
        t0 = time.monotonic()
        res = await f.fetch(str(server.make_url("/stall")), col)
        assert time.monotonic() - t0 < 2.0
    finally:
        await f.close()
    assert res.status == 200 and res.error == "timeout"
    assert b"".join(col.chunks) == b"<a href=/a>a</a>"


async def test_url_sent_byte_for_byte(serve, plain: bool) -> None:  # type: ignore[no-untyped-def]
    seen: list[str] = []

    async def h(request: web.Request) -> web.Response:
        seen.append(request.raw_path)
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", h)
    server = await serve(app)
    f = Fetcher(cfg(), plain=plain)
    try:
        base = str(server.make_url("")).rstrip("/")
        for path in ["/pct/%zz%4", "/a%2Fb?q=%7e&x=%E9", "/100%"]:
            res = await f.fetch(base + path)
            assert res.status == 200
    finally:
        await f.close()
    assert seen == ["/pct/%zz%4", "/a%2Fb?q=%7e&x=%E9", "/100%"]


async def _raw_server(*responses: bytes):  # type: ignore[no-untyped-def]
    """A server answering the n-th request with ``responses[n]`` verbatim (no HTTP library)."""
    targets: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        targets.append(head.split(b" ")[1])
        writer.write(responses[min(len(targets), len(responses)) - 1])
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], targets


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        (b"/caf\xe9", "/caf%E9"),  # a latin-1 byte: not UTF-8
        (b"/caf\xe9/\xc3\xbc?q=\xff", "/caf%E9/\xfc?q=%FF"),  # valid UTF-8 is kept as text
        (b"/\xc3", "/%C3"),  # a cut sequence
        (b"/\xed\xa0\x80", "/%ED%A0%80"),  # an encoded surrogate is not UTF-8
        (b"/plain", "/plain"),
        (b"/\xc3\xbc", "/\xfc"),
    ],
)
async def test_non_utf8_location_kept_as_its_bytes(
    location: bytes, expected: str, plain: bool
) -> None:
    close = b"Connection: close\r\nContent-Length: 0\r\n\r\n"
    moved = b"HTTP/1.1 301 Moved\r\nLocation: " + location + b"\r\n" + close
    ok = b"HTTP/1.1 200 OK\r\n" + close
    server, port, targets = await _raw_server(moved, ok)
    fetcher = Fetcher(cfg(retries=0), plain=plain)
    try:
        res = await fetcher.fetch(f"http://127.0.0.1:{port}/")
        assert (res.status, res.error, res.location) == (301, None, expected)
        # Followed (as the engine does: resolve, then fetch), the server gets its bytes back.
        target = join(res.url, res.location)
        assert target is not None
        again = await fetcher.fetch(target)
    finally:
        await fetcher.close()
        server.close()
    assert again.status == 200
    assert unquote_to_bytes(targets[1]) == location


async def test_an_awaitable_consumer_is_awaited_before_the_next_chunk(serve, plain: bool) -> None:  # type: ignore[no-untyped-def]
    # Pull-based bodies: a consumer may return a coroutine (the engine offers a chunk's links
    # to the crawl state); the next chunk is read only once it has finished, the capped last
    # chunk included, and a sync consumer still works.
    parts = [bytes([65 + i]) * 1000 for i in range(6)]

    async def slow(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        for part in parts:
            await resp.write(part)
            await asyncio.sleep(0.02)
        return resp

    app = web.Application()
    app.router.add_get("/slow", slow)
    server = await serve(app)
    log: list[str] = []
    got: list[bytes] = []

    async def consume(chunk: bytes) -> None:
        log.append("start")
        await asyncio.sleep(0.03)
        got.append(chunk)
        log.append("end")

    def on_headers(res: Response):  # type: ignore[no-untyped-def]
        return consume

    f = Fetcher(cfg(max_body_bytes=5500), plain=plain)
    try:
        res = await f.fetch(str(server.make_url("/slow")), on_headers)
        assert res.error == "too_large" and res.bytes == 5500
        assert b"".join(got) == b"".join(parts)[:5500]
        assert log == ["start", "end"] * len(got)  # never two chunks at once
        col = Collect()
        res = await f.fetch(str(server.make_url("/slow")), col)
        assert b"".join(col.chunks) == b"".join(parts)[:5500]
    finally:
        await f.close()
