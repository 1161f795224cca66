"""``--warc`` under SIGKILL (issue 25): a real ``crawler crawl --warc FILE`` (no state) of a
local site streaming 3 MB pages slowly, killed while it writes a 3 MB record; then
``crawler warc repair FILE``. The repaired file must pass what its consumers run: ``gzip -t``,
FastWARC's ``check`` (block and payload digests), warcio's reader with every digest checked,
and pywb's replay of every page (when a pywb is found: see :func:`pywb_bin`), with each record's
payload equal to the bytes the server sent.

Also: the brotli decision (with --warc the crawler does not ask for ``br``, so a server that
would answer br sends gzip, which ``warcio check`` reads), and ``crawler warc`` on files it
must refuse or must not cut.
"""

from __future__ import annotations

import asyncio
import gzip
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import brotli  # type: ignore[import-untyped]
import pytest
from aiohttp import ClientSession, ClientTimeout, web
from warcio.archiveiterator import ArchiveIterator

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.output.warc_scan import scan

ROOT = str(Path(__file__).resolve().parent.parent)
ENV = {**os.environ, "PYTHONPATH": ROOT}
BIG = 3_000_000
CHUNK = 64 * 1024


class SlowSite:
    """``/`` links 6 pages of 3 MB (incompressible: their gzip members are 3 MB too, so a
    kill lands inside one) streamed in 64 KiB pieces with a pause between, and 8 small ones.
    Remembers every body it sent whole, and the paths whose body it finished sending."""

    def __init__(self) -> None:
        self.bodies: dict[str, bytes] = {}
        self.finished: list[str] = []

    def body(self, path: str) -> bytes:
        if path == "/robots.txt":
            return b"User-agent: *\nDisallow:\n"
        if path == "/":
            links = [f"/big/{i}" for i in range(6)] + [f"/small/{i}" for i in range(8)]
            return "".join(f'<a href="{h}">{h}</a>\n' for h in links).encode()
        if path.startswith("/big/"):
            noise = random.Random(path).randbytes(BIG)
            return b"<html><body><p>big</p><!-- " + noise.replace(b"-->", b"--_") + b" -->"
        return b'<p>small</p><a href="/">home</a>' + path.encode() * 50

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        body = self.body(path)
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.content_length = len(body)
        await resp.prepare(request)
        for i in range(0, len(body), CHUNK):
            await resp.write(body[i : i + CHUNK])
            if path.startswith("/big/"):
                await asyncio.sleep(0.004)
        await resp.write_eof()
        self.bodies[request.url.human_repr()] = body
        self.finished.append(path)
        return resp

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self.handle)
        return app


def crawler_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "crawler", *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


async def killed_crawl(serve: Any, tmp_path: Path) -> tuple[Path, SlowSite, str]:
    """Run ``crawler crawl --warc`` and SIGKILL it while it writes a 3 MB record (the file
    grew 256 KiB past its size when a 3 MB body had just been sent: the record's gzip member
    is being written); tries again (at most 3 times) until the kill left a torn tail."""
    site = SlowSite()
    server = await serve(site.app())
    origin = str(server.make_url("")).rstrip("/")
    path = tmp_path / "crawl.warc.gz"
    work = tmp_path / "crawl.warc.gz.open"
    for _attempt in range(3):
        site.finished.clear()
        site.bodies.clear()
        cmd = [
            sys.executable, "-m", "crawler", "crawl", origin + "/", "--warc", str(path),
            "-o", str(tmp_path / "urls.txt"), "--concurrency", "2", "--retries", "0", "-q",
        ]  # fmt: skip
        proc = await asyncio.create_subprocess_exec(*cmd, env=ENV, stderr=subprocess.DEVNULL)
        start = 0
        for _ in range(20_000):
            await asyncio.sleep(0.001)
            size = work.stat().st_size if work.exists() else 0
            if not start:
                # a first 3 MB record is whole in the file (the few small ones before it
                # take less than 200 KB), and another 3 MB body has just been sent
                bigs = sum(p.startswith("/big/") for p in site.finished)
                if size > BIG + 200_000 and bigs >= 2 and site.finished[-1].startswith("/big/"):
                    start = size
            elif size >= start + 256 * 1024:
                break
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        assert proc.returncode == -signal.SIGKILL
        assert work.exists() and not path.exists()  # unfinished: never under the final name
        with open(work, "rb") as fh:
            if scan(fh).tail == "torn":
                return path, site, origin
    raise AssertionError("three kills, none inside a record's write")


def read_all(path: Path) -> list[Any]:
    """(type, target URI, payload) of every record, every digest checked by warcio."""
    out = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, check_digests="raise"):
            uri = rec.rec_headers.get_header("WARC-Target-URI")
            out.append((rec.rec_type, uri, rec.content_stream().read()))
    return out


async def test_a_sigkilled_crawl_is_repaired_to_what_readers_accept(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, site, _ = await killed_crawl(serve, tmp_path)
    work = Path(str(path) + ".open")
    killed = work.read_bytes()
    # the kill cut a record: what readers reject (issue 25's report)
    assert subprocess.run(["gzip", "-t", str(work)], capture_output=True).returncode != 0
    check = crawler_cli("warc", "check", str(path))  # the name given to --warc finds FILE.open
    assert check.returncode == 1 and "a torn tail" in check.stdout, check
    repaired = crawler_cli("warc", "repair", str(path))
    assert repaired.returncode == 0, repaired.stderr
    assert "cut " in repaired.stdout and "renamed to" in repaired.stdout
    assert path.exists() and not work.exists()
    data = path.read_bytes()
    assert killed.startswith(data) and len(data) < len(killed)  # only the tail was cut
    assert len(killed) - len(data) < BIG + 100_000  # one record at most
    assert subprocess.run(["gzip", "-t", str(path)], capture_output=True).returncode == 0
    assert crawler_cli("warc", "check", str(path)).returncode == 0
    records = read_all(path)
    assert records[0][0] == "warcinfo"
    got = {uri: payload for kind, uri, payload in records if kind == "response"}
    assert sum(uri.endswith(tuple(f"/big/{i}" for i in range(6))) for uri in got) >= 1
    for uri, payload in got.items():
        assert payload == site.bodies[uri], uri  # what the server sent, byte for byte
    # every whole record the killed run flushed is kept: all but the one being written
    finished_bigs = [p for p in site.finished if p.startswith("/big/")]
    assert len([u for u in got if "/big/" in u]) >= len(finished_bigs) - 2
    fastwarc_check(path, len(records))


def fastwarc_check(path: Path, records: int) -> None:
    fastwarc = shutil.which("fastwarc", path=os.path.dirname(sys.executable))
    if fastwarc is None:
        pytest.skip("FastWARC is not installed (pip install -e '.[test]' installs it)")
    done = subprocess.run(
        [fastwarc, "check", "--verify-payloads", "--quiet", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    from fastwarc.warc import ArchiveIterator as FastIterator  # noqa: PLC0415

    with open(path, "rb") as fh:
        seen = [rec.verify_block_digest() for rec in FastIterator(fh, parse_http=False)]
    assert len(seen) == records and all(seen)


def pywb_bin() -> str | None:
    """The directory of pywb's ``wayback`` and ``wb-manager``: ``CRAWLER_PYWB``, or PATH.
    pywb is not in the test extra: it cannot share the crawler's environment (it installs
    brotlipy, whose ``brotli`` module replaces the brotli package the crawler uses, and pins
    redis-py below 3). Install it in a virtualenv of its own and point CRAWLER_PYWB at its bin."""
    given = os.environ.get("CRAWLER_PYWB")
    if given:
        return given
    found = shutil.which("wayback")
    return os.path.dirname(found) if found else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.skipif(
    pywb_bin() is None,
    reason="pywb not found: install it in its own virtualenv (it replaces the brotli package"
    " and pins redis<3) and set CRAWLER_PYWB to that virtualenv's bin directory",
)
async def test_pywb_replays_every_page_of_a_repaired_file(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path, site, _ = await killed_crawl(serve, tmp_path)
    assert crawler_cli("warc", "repair", str(path)).returncode == 0
    bindir = pywb_bin()
    assert bindir is not None
    root = tmp_path / "pywb"
    root.mkdir()
    for step in (["init", "c"], ["add", "c", str(path)]):
        done = subprocess.run(
            [os.path.join(bindir, "wb-manager"), *step],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    port = free_port()
    log = open(tmp_path / "wayback.log", "wb")  # noqa: SIM115  (closed below)
    wayback = subprocess.Popen(
        [os.path.join(bindir, "wayback"), "-b", "127.0.0.1", "-p", str(port), "-t", "2"],
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        with open(path, "rb") as fh:
            uris = [
                rec.rec_headers.get_header("WARC-Target-URI")
                for rec in ArchiveIterator(fh)
                if rec.rec_type == "response"
            ]
        assert uris
        async with ClientSession(timeout=ClientTimeout(total=30)) as session:
            for _ in range(200):  # until it listens
                try:
                    async with session.get(f"http://127.0.0.1:{port}/") as resp:
                        await resp.read()
                    break
                except OSError:
                    await asyncio.sleep(0.05)
            for uri in uris:
                # id_: the payload as archived, no rewriting
                async with session.get(f"http://127.0.0.1:{port}/c/2999id_/{uri}") as resp:
                    assert resp.status == 200, uri
                    assert await resp.read() == site.bodies[uri], uri
    finally:
        wayback.terminate()
        wayback.wait(timeout=30)
        log.close()


async def test_with_warc_no_br_is_asked_so_warcio_check_reads_all(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A server that answers brotli whenever ``br`` is acceptable: with --warc the crawler
    asks for gzip and deflate only, so the archive holds gzip bodies, which ``warcio check``
    verifies (it crashes on a br body: warcio #73) and warcio's reader decodes."""
    page = b'<a href="/p">p</a>' * 500
    asked: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        accept = request.headers.get("Accept-Encoding", "")
        asked.append(accept)
        text = page + request.path.encode()
        if "br" in [c.strip().split(";")[0] for c in accept.split(",")]:
            return web.Response(
                body=brotli.compress(text),
                headers={"Content-Type": "text/html", "Content-Encoding": "br"},
            )
        return web.Response(
            body=gzip.compress(text),
            headers={"Content-Type": "text/html", "Content-Encoding": "gzip"},
        )

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    server = await serve(app)
    path = tmp_path / "c.warc.gz"
    config = CrawlConfig(seeds=(str(server.make_url("/")),), warc=str(path), retries=0)
    async with Crawler(config) as crawler:
        await crawler.run()
    assert len(asked) >= 3 and all("br" not in a for a in asked)
    done = subprocess.run(
        [os.path.join(os.path.dirname(sys.executable), "warcio"), "check", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    bodies = [p for kind, uri, p in read_all(path) if kind == "response" and "robots" not in uri]
    assert bodies and all(body.startswith(page) for body in bodies)  # decoded by warcio
