"""``--warc FILE`` (issue 14): the writer on its own, then real crawls of a local aiohttp
server read back with warcio's ArchiveIterator (``check_digests="raise"``): one response
record per exchange with its request record, payloads identical to the bytes the server
sent, truncation marked, secrets absent, and a SIGKILLed ``crawler crawl --state`` resumed
into a file that is still valid."""

from __future__ import annotations

import asyncio
import gzip
import io
import os
import re
import signal
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from warcio.archiveiterator import ArchiveIterator
from warcio.warcwriter import WARCWriter

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.output import warc

ROOT = str(Path(__file__).resolve().parent.parent)
DATE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


def read_back(path: Path) -> list[dict[str, Any]]:
    """Every record of ``path``, digests checked by warcio (raises on a bad one)."""
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests="raise"):
            h = rec.http_headers
            out.append(
                {
                    "type": rec.rec_type,
                    "warc": dict(rec.rec_headers.headers),
                    "version": rec.rec_headers.protocol,
                    "status": h.get_statuscode()
                    if h is not None and rec.rec_type == "response"
                    else None,
                    "http": list(h.headers) if h is not None else [],
                    "payload": rec.raw_stream.read(),
                }
            )
    return out


def exchange(writer: warc.WarcWriter, url: str, body: bytes, **kw: Any) -> None:
    truncated = kw.pop("truncated", None)
    args: dict[str, Any] = {
        "url": url,
        "method": "GET",
        "request_headers": [("Host", "127.0.0.1"), ("Accept", "*/*")],
        "http_version": "HTTP/1.1",
        "status": 200,
        "reason": "OK",
        "response_version": "HTTP/1.1",
        "response_headers": [(b"Content-Type", b"text/html")],
        "peer_ip": "127.0.0.1",
    }
    args.update(kw)
    record = writer.begin(**args)
    for i in range(0, len(body), 1000):
        record.write(body[i : i + 1000])
    record.end(truncated)


def new_writer(path: Path, **kw: Any) -> warc.WarcWriter:
    return warc.open_archive(CrawlConfig(seeds=("http://127.0.0.1/",)), path=str(path), **kw)


# -- the writer --


def test_a_pair_per_exchange_with_the_standards_fields(tmp_path: Path) -> None:
    path = tmp_path / "t.warc.gz"
    writer = new_writer(path)
    body = os.urandom(300_000)  # past the in-memory spool: spilled to disk
    exchange(
        writer,
        "http://127.0.0.1:8/a?b=c",
        body,
        request_headers=[("Host", "127.0.0.1:8"), ("Authorization", "Basic dTpzZWtyaXQ=")],
        response_headers=[
            (b"content-TYPE", b"application/octet-stream"),
            (b"X-Odd", b"caf\xe9  spaced"),
            (b"Transfer-Encoding", b"chunked"),
        ],
    )
    exchange(writer, "http://127.0.0.1:8/cut", b"x" * 10, truncated="length", peer_ip=None)
    writer.close()
    records = read_back(path)
    assert [r["type"] for r in records] == ["warcinfo", "response", "request"] * 1 + [
        "response",
        "request",
    ]
    assert all(r["version"] == "WARC/1.1" for r in records)
    resp, req = records[1], records[2]
    w = resp["warc"]
    assert w["WARC-Target-URI"] == "http://127.0.0.1:8/a?b=c"
    assert DATE.match(w["WARC-Date"])
    assert w["Content-Type"] == "application/http;msgtype=response"
    assert w["WARC-IP-Address"] == "127.0.0.1"
    assert w["WARC-Block-Digest"].startswith("sha1:") and w["WARC-Payload-Digest"].startswith(
        "sha1:"
    )
    assert "WARC-Truncated" not in w
    assert resp["payload"] == body
    assert req["warc"]["WARC-Concurrent-To"] == w["WARC-Record-ID"]
    assert req["warc"]["Content-Type"] == "application/http;msgtype=request"
    assert req["warc"]["WARC-Date"] == w["WARC-Date"]
    assert ("Authorization", "[redacted]") in req["http"]
    assert "WARC-IP-Address" not in records[3]["warc"]
    assert records[3]["warc"]["WARC-Truncated"] == "length"
    # the header lines as received, byte for byte; chunked renamed (the body is dechunked)
    raw = gzip.decompress(path.read_bytes())
    assert b"\r\ncontent-TYPE: application/octet-stream\r\nX-Odd: caf\xe9  spaced\r\n" in raw
    assert b"\r\nX-Crawler-Transfer-Encoding: chunked\r\n" in raw
    assert b"\r\nTransfer-Encoding" not in raw
    assert b"GET /a?b=c HTTP/1.1\r\nHost: 127.0.0.1:8\r\n" in raw
    assert b"dTpzZWtyaXQ=" not in raw


def test_credential_headers_are_redacted_in_request_records(tmp_path: Path) -> None:
    path = tmp_path / "t.warc.gz"
    writer = new_writer(path)
    sent = [
        ("Host", "127.0.0.1"),
        ("Accept", "text/html"),
        ("Cookie", "sid=abc999"),
        ("X-Api-Key", "k-123"),
        ("X-Session-Id", "s-456"),
        ("Proxy-Authorization", "Basic cDpx"),
        ("X-Trace", "visible-1"),
    ]
    exchange(writer, "http://127.0.0.1/", b"<p>x</p>", request_headers=sent,
             response_headers=[(b"Set-Cookie", b"sid=new1; Path=/")])  # fmt: skip
    writer.close()
    raw = gzip.decompress(path.read_bytes())
    for secret in (b"abc999", b"k-123", b"s-456", b"cDpx"):
        assert secret not in raw
    request = read_back(path)[2]["http"]
    assert ("Cookie", "[redacted]") in request and ("X-Api-Key", "[redacted]") in request
    assert ("X-Trace", "visible-1") in request and ("Accept", "text/html") in request
    assert b"Set-Cookie: sid=new1; Path=/\r\n" in raw  # the response as the server sent it


def test_one_gzip_member_per_record(tmp_path: Path) -> None:
    path = tmp_path / "t.warc.gz"
    writer = new_writer(path)
    for i in range(3):
        exchange(writer, f"http://127.0.0.1/{i}", b"<p>%d</p>" % i)
    writer.close()
    data, members = path.read_bytes(), 0
    while data:
        unzip = zlib.decompressobj(zlib.MAX_WBITS + 16)
        text = unzip.decompress(data)
        assert unzip.eof and text.startswith(b"WARC/1.1\r\n") and text.count(b"WARC/1.1\r\n") == 1
        data = unzip.unused_data
        members += 1
    assert members == 1 + 3 * 2


def test_warcinfo_holds_settings_but_no_secret(tmp_path: Path) -> None:
    path = tmp_path / "t.warc.gz"
    config = CrawlConfig(
        seeds=("http://127.0.0.1/",),
        auth="alice:s3cr3t-pw",
        headers=("Authorization: Bearer tok-123", "X-Api-Key: key-456"),
        proxy="http://bob:proxy-pw@127.0.0.1:3128",
        origin_auth={"http://127.0.0.1:9": "carol:origin-pw"},
        cookies=str(tmp_path / "cookies.txt"),
        warc=str(path),
    )
    warc.open_archive(config).close()
    records = read_back(path)
    assert [r["type"] for r in records] == ["warcinfo"]
    info = records[0]["payload"].decode()
    assert "software: crawler/" in info and "format: WARC File Format 1.1" in info
    assert '"seeds":["http://127.0.0.1/"]' in info and "X-Api-Key" in info  # names only
    for secret in ("s3cr3t-pw", "tok-123", "key-456", "proxy-pw", "origin-pw", "alice", "bob"):
        assert secret not in info


class FailingFile(io.BytesIO):
    """A disk that fills up at ``room`` bytes: a write past it lands in part, then fails."""

    def __init__(self, room: int) -> None:
        super().__init__()
        self.room = room

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > self.room:
            super().write(bytes(data[: max(0, self.room - self.tell())]))
            raise OSError(28, "No space left on device")
        return super().write(data)

    def close(self) -> None:  # keep the bytes readable after the writer closes it
        pass


def test_a_failed_write_leaves_whole_records_only(tmp_path: Path) -> None:
    stream = FailingFile(room=6_000)
    failures = []
    writer = warc.WarcWriter(stream, filename="t.warc.gz", on_failure=lambda: failures.append(1))
    writer.write_warcinfo({"software": "test"})
    exchange(writer, "http://127.0.0.1/small", b"<p>ok</p>")
    exchange(writer, "http://127.0.0.1/big", os.urandom(20_000))  # does not fit
    exchange(writer, "http://127.0.0.1/later", b"<p>dropped</p>")
    writer.close()
    assert isinstance(writer.error, OSError) and failures == [1]
    assert writer.records == 1
    path = tmp_path / "t.warc.gz"
    path.write_bytes(stream.getvalue())
    records = read_back(path)
    assert [r["warc"].get("WARC-Target-URI") for r in records] == [
        None,
        "http://127.0.0.1/small",
        "http://127.0.0.1/small",
    ]


def build_file(path: Path, pairs: int) -> list[int]:
    """A WARC of ``pairs`` exchanges; the offsets where each member ends."""
    writer = new_writer(path)
    for i in range(pairs):
        exchange(writer, f"http://127.0.0.1/{i}", os.urandom(200 + 50 * i))
    writer.close()
    data, ends = path.read_bytes(), []
    pos = 0
    while pos < len(data):
        unzip = zlib.decompressobj(zlib.MAX_WBITS + 16)
        unzip.decompress(data[pos:])
        pos = len(data) - len(unzip.unused_data)
        ends.append(pos)
    return ends


def test_repair_tail_cuts_back_to_the_last_whole_pair(tmp_path: Path) -> None:
    path = tmp_path / "t.warc.gz"
    ends = build_file(path, 3)  # warcinfo, (resp, req) x 3
    whole = path.read_bytes()
    assert warc.repair_tail(str(path)) == 0 and path.read_bytes() == whole
    # a cut anywhere in the last pair (in its response, between the two, in its request)
    for cut in [ends[4] + 1, ends[4] + 57, ends[5] - 3, ends[5], ends[5] + 9, ends[6] - 1]:
        path.write_bytes(whole[:cut])
        assert warc.repair_tail(str(path)) == cut - ends[4]
        assert path.read_bytes() == whole[: ends[4]]
        assert [r["type"] for r in read_back(path)][-2:] == ["response", "request"]
    # a cut inside the warcinfo member (the first run killed at once): nothing of it left
    path.write_bytes(whole[: ends[0] - 5])
    warc.repair_tail(str(path))
    assert path.read_bytes() == b""


def test_repair_is_not_fooled_by_a_gzip_body_inside_a_record(tmp_path: Path) -> None:
    """A gzip body is archived as sent, and deflate stores incompressible bytes as they are:
    the members of a multi-member gzip body (a .warc.gz fetched from a web archive, a BGZF
    file) sit whole, CRC-valid, and byte for byte inside our record's member. A cut after
    one of them must not be taken for the end of a complete member of the file."""
    members = [
        gzip.compress(b"WARC/1.1\r\nWARC-Type: request\r\n\r\n" + os.urandom(1_500), mtime=i)
        for i in range(12)
    ]
    # random bytes between them: deflate emits stored blocks, where they stay as they are
    body = b"".join(os.urandom(20_000) + m for m in members)
    path = tmp_path / "t.warc.gz"
    writer = new_writer(path)
    exchange(writer, "http://127.0.0.1/first", b"<p>first</p>")
    exchange(
        writer,
        "http://127.0.0.1/archive.warc.gz",
        body,
        response_headers=[(b"Content-Type", b"application/warc"), (b"Content-Encoding", b"gzip")],
    )
    writer.close()
    whole = path.read_bytes()
    assert any(whole.find(m) > 0 for m in members)  # deflate kept some byte for byte
    assert read_back(path)[-2]["payload"] == body
    good = _end_of_pair(whole, 1)  # the file after the first pair: what a repair comes back to
    for m in members:
        at = whole.find(m)
        if at < 0:
            continue
        for cut in (at + len(m), at + len(m) + 1):
            path.write_bytes(whole[:cut])
            warc.repair_tail(str(path))
            assert path.read_bytes() == whole[:good], cut
    path.write_bytes(whole[:-2])  # the request member of the second pair cut
    warc.repair_tail(str(path))
    assert path.read_bytes() == whole[:good]


def _end_of_pair(data: bytes, pairs: int) -> int:
    """Offset after the warcinfo member and ``pairs`` pairs (members walked from the start)."""
    pos = 0
    for _ in range(1 + 2 * pairs):
        unzip = zlib.decompressobj(zlib.MAX_WBITS + 16)
        unzip.decompress(data[pos:])
        pos = len(data) - len(unzip.unused_data)
    return pos


def test_repair_of_a_file_without_our_tag_uses_the_gzip_magic(tmp_path: Path) -> None:
    """A .warc.gz written by warcio itself (no tag in its members) is repaired too."""
    path = tmp_path / "other.warc.gz"
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True, warc_version="1.1")
        for i in range(3):
            record = writer.create_warc_record(
                f"urn:x:{i}", "resource", payload=io.BytesIO(b"x" * 500), length=500
            )
            writer.write_record(record)
    whole = path.read_bytes()
    ends = [m.start() for m in re.finditer(b"\x1f\x8b\x08", whole)]
    path.write_bytes(whole[:-7])
    assert warc.repair_tail(str(path)) == len(whole) - 7 - ends[-1]
    assert [r["warc"]["WARC-Target-URI"] for r in read_back(path)] == ["urn:x:0", "urn:x:1"]


def test_one_writer_a_file(tmp_path: Path) -> None:
    """Two crawls on one file would interleave records (and one's repair cut the other's
    record in progress): the second is refused, the first's file untouched."""
    path = tmp_path / "t.warc.gz"
    first = new_writer(path)
    exchange(first, "http://127.0.0.1/a", b"<p>a</p>")
    work = tmp_path / "t.warc.gz.open"  # the name while it is written
    before = work.read_bytes()
    for resumed in (False, True):
        with pytest.raises(warc.WarcError, match="another process is writing"):
            new_writer(path, resumed=resumed)
        assert work.read_bytes() == before
    first.close()
    assert not work.exists() and path.read_bytes() == before
    new_writer(path, resumed=True).close()  # free again once closed
    assert [r["type"] for r in read_back(path)] == ["warcinfo", "response", "request", "warcinfo"]


def test_repair_refuses_a_file_that_is_not_ours(tmp_path: Path) -> None:
    path = tmp_path / "t.warc.gz"
    path.write_bytes(b"WARC/1.1\r\nnot gzip at all\r\n")
    with pytest.raises(warc.WarcError):
        warc.repair_tail(str(path))
    assert path.read_bytes() == b"WARC/1.1\r\nnot gzip at all\r\n"


def test_resumed_writer_appends_after_the_repair(tmp_path: Path) -> None:
    path = tmp_path / "t.warc.gz"
    ends = build_file(path, 2)
    path.write_bytes(path.read_bytes()[: ends[-1] - 4])  # the last request record cut
    writer = new_writer(path, resumed=True)
    exchange(writer, "http://127.0.0.1/new", b"<p>new</p>")
    writer.close()
    records = read_back(path)
    assert [r["type"] for r in records] == [
        "warcinfo", "response", "request", "warcinfo", "response", "request",
    ]  # fmt: skip
    assert records[3]["payload"].count(b"resumed") == 1
    # a new crawl (not resumed) truncates
    new_writer(path).close()
    assert [r["type"] for r in read_back(path)] == ["warcinfo"]


# -- real crawls --


class Origin:
    """A site that remembers the exact body bytes it sent for each path."""

    BIG = 300_000

    def __init__(self, delay: float = 0.0, pages: int = 0) -> None:
        self.sent: dict[str, bytes] = {}
        self.hits: Counter[str] = Counter()
        self.delay = delay
        self.pages = pages

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path_qs
        self.hits[path] += 1
        if self.delay:
            await asyncio.sleep(self.delay)
        links = ["/plain", "/gz", "/chunked", "/img.png", "/missing", "/moved", "/big"]
        links += [f"/p/{i}" for i in range(self.pages)]
        if path == "/":
            return self.send(path, "".join(f'<a href="{h}">x</a>' for h in links).encode())
        if path == "/plain" or path.startswith("/p/"):
            return self.send(path, b'<a href="/">home</a> ' + path.encode() * 20)
        if path == "/gz":
            body = gzip.compress(b'<a href="/plain">again</a>' * 200)
            return self.send(path, body, headers={"Content-Encoding": "gzip"})
        if path == "/img.png":
            return self.send(path, b"\x89PNG\r\n\x1a\n" + os.urandom(5000), ctype="image/png")
        if path == "/big":
            return self.send(path, b"<p>" + b"z" * self.BIG)
        if path == "/moved":
            self.sent[path] = b"go"
            return web.Response(status=302, body=b"go", headers={"Location": "/plain"})
        if path == "/chunked":
            resp = web.StreamResponse(headers={"Content-Type": "text/html"})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            parts = [b"<p>part %d</p>" % i for i in range(5)]
            for part in parts:
                await resp.write(part)
            await resp.write_eof()
            self.sent[path] = b"".join(parts)
            return resp
        return self.send(path, b"<p>no</p>", status=404)

    def send(
        self,
        path: str,
        body: bytes,
        *,
        status: int = 200,
        ctype: str = "text/html",
        headers: dict[str, str] | None = None,
    ) -> web.Response:
        self.sent[path] = body
        return web.Response(
            status=status, body=body, headers={"Content-Type": ctype, **(headers or {})}
        )


def responses(records: list[dict[str, Any]], origin: str) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for i, r in enumerate(records):
        if r["type"] == "response":
            path = r["warc"]["WARC-Target-URI"][len(origin) :]
            assert path not in out, f"two response records for {path}"
            out[path] = r
            req = records[i + 1]
            assert req["type"] == "request"
            assert req["warc"]["WARC-Concurrent-To"] == r["warc"]["WARC-Record-ID"]
    return out


async def test_a_crawl_archives_every_exchange_as_sent(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    site = Origin()
    server = await serve(site.app())
    origin = str(server.make_url("")).rstrip("/")
    path = tmp_path / "crawl.warc.gz"
    config = CrawlConfig(seeds=(origin + "/",), warc=str(path), max_body_bytes=100_000, retries=0)
    async with Crawler(config) as crawler:
        result = await crawler.run()
    assert result.stats.pages >= 8
    records = read_back(path)
    assert records[0]["type"] == "warcinfo"
    got = responses(records, origin)
    # one response record per request the server answered (robots.txt too), no more
    assert set(got) == set(site.hits) and all(n == 1 for n in site.hits.values())
    for p, body in site.sent.items():
        r = got[p]
        if p == "/big":
            assert r["warc"]["WARC-Truncated"] == "length"
            assert r["payload"] == body[: len(r["payload"])] and len(r["payload"]) == 100_000
        else:
            assert "WARC-Truncated" not in r["warc"], p
            assert r["payload"] == body, p  # gzip bytes as sent, dechunked bytes as sent
    assert got["/gz"]["payload"][:2] == b"\x1f\x8b"
    assert ("Content-Encoding", "gzip") in got["/gz"]["http"]
    assert ("X-Crawler-Transfer-Encoding", "chunked") in got["/chunked"]["http"]
    assert got["/missing"]["status"] == "404" and got["/moved"]["status"] == "302"
    assert all(r["warc"].get("WARC-IP-Address") == "127.0.0.1" for r in got.values())


async def test_a_crawl_with_credentials_archives_none_of_them(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    site = Origin()
    server = await serve(site.app())
    origin = str(server.make_url("")).rstrip("/")
    path = tmp_path / "crawl.warc.gz"
    config = CrawlConfig(
        seeds=(origin + "/",),
        warc=str(path),
        auth="alice:pw-s3cr3t",
        headers=("X-Api-Key: k-123", "Cookie: sid=abc999", "X-Visible: yes-1"),
        retries=0,
    )
    async with Crawler(config) as crawler:
        await crawler.run()
    raw = gzip.decompress(path.read_bytes())
    assert raw.count(b"X-Visible: yes-1\r\n") >= 8  # the headers were sent, and archived
    assert raw.count(b"\r\nAuthorization: [redacted]\r\n") >= 8
    for secret in (b"pw-s3cr3t", b"YWxpY2U6cHctczNjcjN0", b"k-123", b"abc999"):
        assert secret not in raw


async def test_sigkill_then_resume_leaves_a_valid_file(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A real ``crawler crawl --state DIR --warc F`` SIGKILLed mid-crawl; half a record is
    added to its tail as a kill inside a write would leave it; the resumed run repairs the
    tail and appends; the whole file reads back with every digest checked."""
    site = Origin(delay=0.06, pages=30)
    server = await serve(site.app())
    origin = str(server.make_url("")).rstrip("/")
    path = tmp_path / "crawl.warc.gz"
    cmd = [
        sys.executable, "-m", "crawler", "crawl", origin + "/", "--state", str(tmp_path / "st"),
        "--warc", str(path), "-o", str(tmp_path / "urls.txt"), "--concurrency", "2",
        "--retries", "0", "-q",
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, stderr=subprocess.PIPE)
    for _ in range(400):
        if sum(site.hits.values()) >= 12:
            break
        await asyncio.sleep(0.025)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    work = tmp_path / "crawl.warc.gz.open"  # a killed run's file keeps its unfinished name
    assert not path.exists()
    killed = work.read_bytes()
    assert len(read_back(work)) >= 3  # what the killed run flushed is valid as it is
    # as if the kill had landed inside a write: a member cut in half at the end
    half = gzip.compress(b"WARC/1.1\r\nWARC-Type: response\r\n" + os.urandom(4000))
    work.write_bytes(killed + half[: len(half) // 2])
    proc = await asyncio.create_subprocess_exec(*cmd, env=env, stderr=subprocess.PIPE)
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    assert not work.exists()  # repaired, appended to, and renamed at the end
    assert path.read_bytes()[: len(killed)] == killed  # the first run's records kept as they were
    records = read_back(path)
    assert [r["type"] for r in records].count("warcinfo") == 2
    got: dict[str, int] = Counter()
    for r in records:
        if r["type"] == "response":
            got[r["warc"]["WARC-Target-URI"][len(origin) :]] += 1
    # every path the server answered has its record; one answered twice (in flight at the
    # kill, fetched again) may have two. Only the exchanges the kill cut (at most the two
    # requests in flight) have none.
    assert set(got) == set(site.hits)
    assert all(got[p] <= n for p, n in site.hits.items())
    assert sum(site.hits.values()) - sum(got.values()) <= 2


async def test_ctrl_c_leaves_a_valid_file(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGINT to a real ``crawler crawl --warc F`` mid-crawl (no state): it stops, closes
    the archive, and every record in it reads back with its digests."""
    site = Origin(delay=0.2, pages=40)  # about 1.4 s in all at 8 per host: SIGINT comes first
    server = await serve(site.app())
    origin = str(server.make_url("")).rstrip("/")
    path = tmp_path / "crawl.warc.gz"
    cmd = [sys.executable, "-m", "crawler", "crawl", origin + "/", "--warc", str(path), "-q"]
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = await asyncio.create_subprocess_exec(
        *cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    for _ in range(400):
        if sum(site.hits.values()) >= 20:
            break
        await asyncio.sleep(0.025)
    proc.send_signal(signal.SIGINT)
    _, err = await proc.communicate()
    assert proc.returncode == 130, err.decode()
    records = read_back(path)
    assert records[0]["type"] == "warcinfo"
    kinds = [r["type"] for r in records[1:]]
    assert kinds == ["response", "request"] * (len(kinds) // 2) and len(kinds) >= 8
    assert sum(site.hits.values()) < 9 + 40  # it did stop before the end


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
async def test_a_full_disk_stops_the_crawl_with_an_error(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """``--warc /dev/full``: every write fails with ENOSPC; the crawl stops and says so."""
    site = Origin()
    server = await serve(site.app())
    origin = str(server.make_url("")).rstrip("/")
    cmd = [sys.executable, "-m", "crawler", "crawl", origin + "/", "--warc", "/dev/full"]
    proc = await asyncio.create_subprocess_exec(
        *cmd,
        env={**os.environ, "PYTHONPATH": ROOT},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 1, err.decode()
    assert "cannot write the WARC file /dev/full: No space left on device" in err.decode()
    assert sum(site.hits.values()) <= 2  # stopped at once (robots.txt and the seed at most)
