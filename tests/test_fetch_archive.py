"""The fetcher's taps: the WARC archive (raw bytes, own decoding) and the observer."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import brotli  # type: ignore[import-untyped]
import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator  # type: ignore[import-untyped]

from crawler.config import CrawlConfig
from crawler.extract import LinkExtractor
from crawler.http.client import Fetcher
from crawler.http.response import Response
from crawler.output.warc import open_archive

PAGE = (
    b"<!doctype html><html><body>"
    + b"".join(b"<p>filler %d <a href='/link/%d'>l</a></p>\n" % (i, i) for i in range(6000))
    + b"</body></html>"
)
ENCODINGS: dict[str, tuple[str | None, bytes]] = {
    "identity": (None, PAGE),
    "gzip": ("gzip", gzip.compress(PAGE)),
    "deflate-zlib": ("deflate", zlib.compress(PAGE)),
    "deflate-raw": ("deflate", zlib.compress(PAGE)[2:-4]),
    "br": ("br", brotli.compress(PAGE)),
    "gzip-members": ("gzip", gzip.compress(PAGE[:1000]) + gzip.compress(PAGE[1000:])),
    "x-gzip": ("x-gzip", gzip.compress(PAGE)),  # aiohttp does not decode it: we do
}


class Rec:
    def __init__(self, meta: dict[str, Any]) -> None:
        self.meta = meta
        self.chunks: list[bytes] = []
        self.ends: list[str | None] = []

    def write(self, chunk: bytes) -> None:
        assert not self.ends, "write after end"
        self.chunks.append(bytes(chunk))

    def end(self, truncated: str | None) -> None:
        self.ends.append(truncated)

    @property
    def body(self) -> bytes:
        return b"".join(self.chunks)


class Archive:
    """Records what the fetcher hands over (the protocol of crawler.output.warc)."""

    def __init__(self) -> None:
        self.records: list[Rec] = []

    def begin(self, **meta: Any) -> Rec:
        rec = Rec(meta)
        self.records.append(rec)
        return rec


def _app() -> web.Application:
    attempts: dict[str, int] = {}

    async def encoded(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        enc, body = ENCODINGS[name]
        res = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        if enc:
            res.headers["Content-Encoding"] = enc
        res.enable_chunked_encoding()
        await res.prepare(request)
        for i in range(0, len(body), 7000):  # several chunks on the wire
            await res.write(body[i : i + 7000])
        await res.write_eof()
        return res

    async def flaky(request: web.Request) -> web.Response:
        n = attempts[request.path] = attempts.get(request.path, 0) + 1
        if n < 3:
            return web.Response(status=503, text=f"busy {n}", headers={"Retry-After": "0"})
        return web.Response(text="<a href=/x>ok</a>", content_type="text/html")

    async def bomb(request: web.Request) -> web.Response:
        return web.Response(
            body=BOMB, headers={"Content-Encoding": "gzip", "Content-Type": "text/html"}
        )

    async def bad_gzip(request: web.Request) -> web.Response:
        return web.Response(
            body=b"\x1f\x8b\x08\x00garbage-garbage-garbage",
            headers={"Content-Encoding": "gzip", "Content-Type": "text/html"},
        )

    async def cut(request: web.Request) -> web.StreamResponse:
        res = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Length": "5000"})
        await res.prepare(request)
        await res.write(b"<a href=/one>" + b"x" * 1000)
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.close()
        return res

    async def stall(request: web.Request) -> web.StreamResponse:
        res = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Length": "5000"})
        await res.prepare(request)
        await res.write(b"<a href=/one>")
        await asyncio.sleep(2)
        return res

    async def image(request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG" + b"\0" * 3000, content_type="image/png")

    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="not here", content_type="text/html")

    async def moved(request: web.Request) -> web.Response:
        raise web.HTTPFound("/enc/identity")

    async def cookie(request: web.Request) -> web.Response:
        res = web.Response(text="c", content_type="text/html")
        res.set_cookie("sid", "abc")
        return res

    app = web.Application()
    app.router.add_get("/enc/{name}", encoded)
    app.router.add_get("/flaky", flaky)
    app.router.add_get("/bomb", bomb)
    app.router.add_get("/bad-gzip", bad_gzip)
    app.router.add_get("/cut", cut)
    app.router.add_get("/stall", stall)
    app.router.add_get("/image.png", image)
    app.router.add_get("/missing", missing)
    app.router.add_get("/moved", moved)
    app.router.add_get("/cookie", cookie)
    return app


BOMB = gzip.compress(b"\0" * 50_000_000, compresslevel=9)  # 50 MB of zeros, ~50 KB on the wire


def _cfg(**kw: Any) -> CrawlConfig:
    base: dict[str, Any] = {"retries": 2, "backoff": 0.001, "max_retry_after": 0.01}
    base.update(kw)
    return CrawlConfig(**base)


async def _get(
    url: str, archive: Archive | None, **kw: Any
) -> tuple[Response, bytes, list[str], list[Response]]:
    """Fetch with a consumer that collects the body and the links; and what the observer saw."""
    seen: list[Response] = []
    fetcher = Fetcher(_cfg(**kw), observer=seen.append, archive=archive)
    chunks: list[bytes] = []
    extractor: list[Any] = []

    def on_headers(res: Response):  # type: ignore[no-untyped-def]
        chunks.clear()
        if res.status != 200 or not res.is_html:
            return None
        extractor[:] = [LinkExtractor(url, res.charset)]
        links: list[str] = []
        extractor.append(links)

        def consume(chunk: bytes) -> None:
            chunks.append(chunk)
            links.extend(link.url for link in extractor[0].feed(chunk))

        return consume

    try:
        res = await fetcher.fetch(url)
        res = await fetcher.fetch(url, on_headers)
    finally:
        await fetcher.close()
    links: list[str] = []
    if extractor:
        links = extractor[1] + [link.url for link in extractor[0].close()]
    return res, b"".join(chunks), links, seen


def _same(a: Response, b: Response) -> None:
    da, db = Fetcher.describe(a), Fetcher.describe(b)
    da.pop("elapsed_ms"), db.pop("elapsed_ms")
    assert da == db


@pytest.mark.parametrize("name", list(ENCODINGS))
async def test_both_paths_give_the_consumer_the_same_bytes_and_links(serve, name: str) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    url = str(server.make_url(f"/enc/{name}"))
    plain, plain_body, plain_links, _ = await _get(url, None)
    archive = Archive()
    res, body, links, _ = await _get(url, archive)
    _same(plain, res)
    assert body == plain_body == PAGE and res.bytes == len(PAGE)
    assert links == plain_links and len(links) == 6000
    # both fetches archived (the first has no consumer: read for the archive only)
    enc, wire = ENCODINGS[name]
    assert [r.body for r in archive.records] == [wire, wire]  # as received: still encoded
    assert [r.ends for r in archive.records] == [[None], [None]]
    assert dict(archive.records[1].meta["response_headers"]).get(b"Content-Encoding") == (
        enc.encode() if enc else None
    )
    sent = dict(archive.records[1].meta["request_headers"])
    assert sent["Accept-Encoding"] == "gzip, deflate"  # not br with an archive (issue 25)
    assert archive.records[1].meta["peer_ip"] == "127.0.0.1"


async def test_the_body_cap_is_on_decoded_bytes_and_bounds_a_bomb(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    url = str(server.make_url("/bomb"))
    plain, plain_body, _, _ = await _get(url, None, max_body_bytes=100_000)
    archive = Archive()
    tracemalloc.start()
    try:
        res, body, _, _ = await _get(url, archive, max_body_bytes=100_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000, peak  # 50 MB inflated whole would show here
    _same(plain, res)
    assert res.error == "too_large" and res.truncated and res.bytes == 100_000
    assert body == plain_body == b"\0" * 100_000
    rec = archive.records[1]
    assert rec.ends == ["length"] and rec.body == BOMB[: len(rec.body)]


async def test_a_bad_stream_is_decode_on_both_paths(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    url = str(server.make_url("/bad-gzip"))
    plain, *_ = await _get(url, None, retries=0)
    archive = Archive()
    res, *_ = await _get(url, archive, retries=0)
    assert plain.error == res.error == "decode"
    assert archive.records[1].ends == ["unspecified"]


async def test_every_exchange_is_archived_with_the_request_as_sent(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    origin = str(server.make_url("")).rstrip("/")
    archive = Archive()
    fetcher = Fetcher(
        _cfg(seeds=(origin + "/",), auth="user:pw-not-in-warc", headers=("X-Extra: 1",)),
        archive=archive,
    )
    try:
        await fetcher.fetch(origin + "/cookie")  # sets sid=abc
        flaky = await fetcher.fetch(origin + "/flaky")
        moved = await fetcher.fetch(origin + "/moved")
        await fetcher.fetch(origin + "/missing")
        await fetcher.fetch(origin + "/image.png")
    finally:
        await fetcher.close()
    assert flaky.status == 200 and flaky.retries == 2 and moved.status == 302
    got = [(r.meta["url"].removeprefix(origin), r.meta["status"], r.body) for r in archive.records]
    assert got == [
        ("/cookie", 200, b"c"),
        ("/flaky", 503, b"busy 1"),
        ("/flaky", 503, b"busy 2"),
        ("/flaky", 200, b"<a href=/x>ok</a>"),
        ("/moved", 302, b"302: Found"),
        ("/missing", 404, b"not here"),
        ("/image.png", 200, b"\x89PNG" + b"\0" * 3000),
    ]
    assert all(r.ends == [None] for r in archive.records)
    sent = archive.records[1].meta["request_headers"]
    names = [k for k, _ in sent]
    assert names[0] == "Host" and "User-Agent" in names and ("X-Extra", "1") in sent
    assert ("Cookie", "sid=abc") in sent and ("Authorization", "[redacted]") in sent
    assert all("pw-not-in-warc" not in v for _, v in sent)
    meta = archive.records[4].meta
    assert meta["method"] == "GET" and meta["http_version"] == "HTTP/1.1"
    assert meta["reason"] == "Found" and meta["response_version"] == "HTTP/1.1"
    assert any(k.lower() == b"location" for k, _ in meta["response_headers"])


async def test_truncated_reasons(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    archive = Archive()
    fetcher = Fetcher(_cfg(retries=0, read_timeout=0.3), archive=archive)
    try:
        cut = await fetcher.fetch(str(server.make_url("/cut")), lambda r: lambda c: None)
        stall = await fetcher.fetch(str(server.make_url("/stall")), lambda r: lambda c: None)
        # nobody consumes the body: the archive's read fails, the Response does not
        quiet = await fetcher.fetch(str(server.make_url("/cut")))
    finally:
        await fetcher.close()
    assert cut.error in ("protocol", "disconnected") and stall.error == "timeout"
    assert quiet.error is None and quiet.status == 200
    assert [r.ends for r in archive.records] == [["disconnect"], ["time"], ["disconnect"]]
    assert archive.records[0].body.startswith(b"<a href=/one>x")


async def test_the_observer_sees_each_fetch_once_after_its_retries(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    seen: list[Response] = []
    fetcher = Fetcher(_cfg(), observer=seen.append)
    try:
        res = await fetcher.fetch(str(server.make_url("/flaky")))
        missing = await fetcher.fetch(str(server.make_url("/missing")))
    finally:
        await fetcher.close()
    assert seen == [res, missing]
    assert (res.status, res.retries, missing.error) == (200, 2, "http_404")

    def broken(res: Response) -> None:
        raise RuntimeError("metrics bug")

    fetcher = Fetcher(_cfg(), observer=broken)
    try:  # a failing observer never fails a fetch
        again = await fetcher.fetch(str(server.make_url("/missing")))
    finally:
        await fetcher.close()
    assert again.status == 404


async def test_the_real_writer_reads_back_with_warcio(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    path = tmp_path / "out.warc.gz"
    config = _cfg(warc=str(path))
    writer = open_archive(config)
    fetcher = Fetcher(config, archive=writer)
    try:
        for name in ("gzip", "br", "identity"):
            await fetcher.fetch(str(server.make_url(f"/enc/{name}")), lambda r: lambda c: None)
    finally:
        await fetcher.close()
        writer.close()
    bodies = []
    with path.open("rb") as fh:
        for record in ArchiveIterator(fh, check_digests="raise"):
            if record.rec_type == "response":
                bodies.append(record.raw_stream.read())  # the payload as stored
    assert bodies == [ENCODINGS[name][1] for name in ("gzip", "br", "identity")]


async def test_a_users_accept_encoding_is_sent_as_given_with_an_archive(serve) -> None:  # type: ignore[no-untyped-def]
    server = await serve(_app())
    archive = Archive()
    fetcher = Fetcher(_cfg(headers=("Accept-Encoding: identity",)), archive=archive)
    try:
        await fetcher.fetch(str(server.make_url("/enc/identity")))
    finally:
        await fetcher.close()
    assert ("Accept-Encoding", "identity") in archive.records[0].meta["request_headers"]
