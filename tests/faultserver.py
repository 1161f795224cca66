"""A hostile web site on 127.0.0.1 for the crawler's fault tests (issue 5).

``FaultServer`` runs an aiohttp application in its own thread and event loop, on
``127.0.0.1`` and an ephemeral port, so that the test's loop holds only the crawler's tasks
(the task-leak check compares ``asyncio.all_tasks()``) and a busy crawler cannot starve the
server's timers. Every request is logged (method, raw path, Host header, time) before its
handler runs, so a test can assert that nothing outside scope was ever asked for.

Faults that aiohttp's response objects cannot produce (a reset, invalid HTTP, a short body,
a truncated chunked body) are written straight to the transport: the handler writes raw
bytes, then closes (FIN) or aborts with ``SO_LINGER`` 0 (RST). aiohttp then fails to write
its own response and quietly drops it (``finish_response`` swallows ``ConnectionError``).

Each fault test seeds ``/hub/<tag>``: the hub links to the fault route(s) of ``HUBS[tag]``, to
three ordinary pages ``/ok/<tag>/{a,b,c}`` (the "rest of the site"), and to links that must
never be fetched: the same server under another host name (``localhost``: out of scope
with the default host scope, yet visible in the log if fetched), ``file:``, ``javascript:``,
``data:`` and ``mailto:``.

``python tests/faultserver.py load --pages N`` serves the load-test site instead (in a
subprocess, so the crawler's RSS is measured alone); see ``LoadPlan``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import random
import socket
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NamedTuple

import brotli  # type: ignore[import-untyped]
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# --- sizes and pacing (tests may override per server) ---------------------------------------
HUGE_SIZE = 100 * 1024 * 1024  # the "100 MB page", with a Content-Length
BOMB_INFLATED = 1 << 30  # the gzip bomb inflates to 1 GiB of zeros
MANY_LINKS = 100_000
LONG_URL_LEN = 100 * 1024
TRAP_ROOT = "/cal/2026/11/30/"

# The route(s) each hub links to, besides the ordinary pages.
HUBS: dict[str, list[str]] = {
    "never": ["/slow/never"],
    "loris": ["/slow/loris"],
    "stall": ["/slow/stall"],
    "loris-headers": ["/slow/loris-headers"],
    "reset-before-headers": ["/broken/reset-before-headers"],
    "reset-mid-body": ["/broken/reset-mid-body"],
    "chunked-truncated": ["/broken/chunked-truncated"],
    "short-body": ["/broken/short-body"],
    "invalid-http": ["/broken/invalid-http"],
    "empty-200": ["/broken/empty-200"],
    "bad-gzip": ["/broken/bad-gzip"],
    "refused": [],  # the refused connection is a second seed on a closed port
    "dns": [],  # the DNS fault is a second seed under .invalid, see test_hostile
    "redirect-loop": ["/redir/loop/a", "/redir/self"],
    "redirect-utf8": ["/redir/utf8"],
    "tls-mismatch": [],  # an https:// link to this plain-HTTP port, added by the hub
    "redirect-chain": ["/redir/chain/30"],
    "redirect-out": ["/redir/out"],
    "redirect-schemes": ["/redir/file", "/redir/js", "/redir/data"],
    "redirect-invalid": ["/redir/invalid"],
    "redirect-dedup": ["/redir/to-seen", "/redir/to-private"],
    "slow-host": [f"/slow/never/{i}" for i in range(6)],
    "gzip-bomb": ["/bomb/gzip"],
    "br-bomb": ["/bomb/br"],
    "huge-header": ["/broken/huge-header"],
    "http10": ["/broken/http10"],
    "endless": ["/endless"],
    "huge": ["/huge"],
    "many-links": ["/many-links"],
    "trap": [TRAP_ROOT],
    "long-url": ["/long-url"],
    "weird-links": ["/weird-links"],
    "charset-lies": ["/charset/lies", "/charset/unknown"],
    "userinfo": [],  # links with user:password@ to this server, added by the hub
    "status-4xx": ["/status/404", "/status/410", "/status/403"],
    "status-429": ["/status/429-then-ok"],
    "status-recover": ["/status/500-recover", "/status/503-recover"],
    "status-503-forever": ["/status/503-forever"],
    "content": [
        "/content/fake.html",
        "/content/octet",
        "/content/image-as-html",
        "/content/garbage-html",
        "/content/huge-binary",
    ],
    "robots": ["/public/page", "/private/page"],
}


class Req(NamedTuple):
    method: str
    path: str  # raw path with query, as sent on the wire
    host: str  # Host header
    t: float  # time.monotonic() on arrival


def page(body: str, title: str = "page") -> bytes:
    head = f"<!doctype html><html><head><title>{title}</title></head>"
    return f"{head}<body>{body}</body></html>".encode()


def _rst(request: web.Request) -> None:
    """Reset the connection: SO_LINGER 0 then abort sends RST instead of FIN."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


def _raw(request: web.Request, data: bytes) -> None:
    if request.transport is not None and not request.transport.is_closing():
        request.transport.write(data)


BOMB_PREFIX = b'<html><a href="/ok/gzip-bomb/early">early</a>'


@functools.lru_cache(maxsize=4)
def gzip_bomb_parts(inflated: int) -> tuple[bytes, bytes, int, bytes]:
    """Head, one repeatable deflate block (1 MiB of zeros), its count, and the tail.

    A full flush empties the compressor's window and byte-aligns the output, so compressing
    the same MiB again yields the same bytes: the stream is the gzip header with a small
    HTML prefix, the block ``count`` times, an empty final block and the trailer. About
    1 KiB on the wire per MiB inflated (deflate tops out near 1:1030).
    """
    mib = b"\0" * (1 << 20)
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)
    head = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    head += comp.compress(BOMB_PREFIX) + comp.flush(zlib.Z_FULL_FLUSH)
    block = comp.compress(mib) + comp.flush(zlib.Z_FULL_FLUSH)
    count = max(1, inflated >> 20)
    final = comp.flush(zlib.Z_FINISH)
    crc = zlib.crc32(BOMB_PREFIX)
    for _ in range(count):
        crc = zlib.crc32(mib, crc)
    size = len(BOMB_PREFIX) + (count << 20)
    tail = final + struct.pack("<II", crc & 0xFFFFFFFF, size & 0xFFFFFFFF)
    return head, block, count, tail


@functools.lru_cache(maxsize=2)
def br_bomb(inflated: int) -> bytes:
    """A small HTML prefix and ``inflated`` bytes of zeros, brotli-compressed (~5500:1)."""
    comp = brotli.Compressor(quality=1, lgwin=24)
    zeros = b"\0" * (16 << 20)
    out = [comp.process(BR_PREFIX)]
    out += [comp.process(zeros) for _ in range(max(1, inflated // len(zeros)))]
    out.append(comp.finish())
    return b"".join(out)


BR_PREFIX = b'<html><a href="/ok/br-bomb/early">early</a>'


class FaultServer:
    """The hostile site. ``robots`` picks the robots.txt fault: ``allow`` (Disallow: /private/),
    ``404``, ``500``, ``redirect``, ``redirect-loop``, ``redirect-other-host``,
    ``redirect-elsewhere``, ``redirect-dead-host``, ``never`` (no answer), ``endless``,
    ``enormous``, ``garbage``, ``sitemaps``.
    """

    def __init__(
        self,
        *,
        robots: str = "allow",
        loris_interval: float = 1.0,
        huge_size: int = HUGE_SIZE,
        bomb_inflated: int = BOMB_INFLATED,
        many_links: int = MANY_LINKS,
        enormous_robots: int = 8 * 1024 * 1024,
    ) -> None:
        self.robots = robots
        self.loris_interval = loris_interval
        self.huge_size = huge_size
        self.bomb_inflated = bomb_inflated
        self.many_links = many_links
        self.enormous_robots = enormous_robots
        self.log: list[Req] = []
        self.authorization: list[str] = []  # Authorization headers received
        self.sent: Counter[str] = Counter()  # body bytes written per path (streamed routes)
        self._hits: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base + path

    def start(self) -> FaultServer:
        self._thread = threading.Thread(target=self._run, name="faultserver", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fault server did not start")
        if self._error is not None:
            raise RuntimeError("fault server failed to start") from self._error
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        fut.result(15)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(15)
        self._loop = None

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._startup())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _startup(self) -> None:
        self._stopping = asyncio.Event()
        # The gzip bomb's parts (1,024 crc32 passes over 1 MiB) are made now, once a process
        # (cached), not on the first request: made then, in a thread that waits for the GIL
        # after every pass while the crawler under test runs Python (the pure-Python twins),
        # they took over the crawl's 5 s read timeout to come.
        await asyncio.to_thread(gzip_bomb_parts, self.bomb_inflated)
        app = web.Application(middlewares=[self._log_middleware])
        self._routes(app)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.base_events.Server)
        self.port = server.sockets[0].getsockname()[1]

    async def _shutdown(self) -> None:
        assert self._stopping is not None and self._runner is not None
        self._stopping.set()
        await self._runner.cleanup()

    # -- log ---------------------------------------------------------------------------------
    @web.middleware
    async def _log_middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self.log.append(Req(request.method, request.raw_path, request.host, time.monotonic()))
        if "Authorization" in request.headers:
            self.authorization.append(request.headers["Authorization"])
        return await handler(request)

    def paths(self) -> list[str]:
        return [r.path for r in self.log]

    def count(self, path: str) -> int:
        return sum(1 for r in self.log if r.path == path)

    def times(self, path: str) -> list[float]:
        return [r.t for r in self.log if r.path == path]

    @staticmethod
    async def _write(resp: web.StreamResponse, data: bytes) -> bool:
        """Write, or return False once the client has gone (expected on these routes)."""
        try:
            await resp.write(data)
        except ConnectionError:
            return False
        return True

    async def _forever(self) -> None:
        """Block a handler until the server stops (or the client leaves: handler cancellation)."""
        assert self._stopping is not None
        await self._stopping.wait()

    def _hit(self, key: str) -> int:
        self._hits[key] += 1
        return self._hits[key]

    # -- routes ------------------------------------------------------------------------------
    def _routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/robots.txt", self.robots_txt)
        r.add_get("/robots-real.txt", self.robots_real)
        r.add_get("/sitemap-index.xml", self.sitemap_index)
        r.add_get("/sitemap-pages.xml", self.sitemap_pages)
        r.add_get("/sitemap-endless.xml", self.sitemap_endless)
        r.add_get("/sitemap-bomb.xml.gz", self.sitemap_bomb)
        r.add_get("/hub/{tag}", self.hub)
        r.add_get("/ok/{tag}/{name}", self.ok)
        r.add_get("/outside/{tail:.*}", self.ok_plain)
        r.add_get("/public/{tail:.*}", self.ok_plain)
        r.add_get("/private/{tail:.*}", self.ok_plain)
        r.add_get("/slow/never", self.slow_never)
        r.add_get("/slow/never/{n}", self.slow_never)
        r.add_get("/slow/loris", self.slow_loris)
        r.add_get("/slow/stall", self.slow_stall)
        r.add_get("/slow/loris-headers", self.slow_loris_headers)
        r.add_get("/broken/reset-before-headers", self.reset_before_headers)
        r.add_get("/broken/reset-mid-body", self.reset_mid_body)
        r.add_get("/broken/chunked-truncated", self.chunked_truncated)
        r.add_get("/broken/short-body", self.short_body)
        r.add_get("/broken/invalid-http", self.invalid_http)
        r.add_get("/broken/empty-200", self.empty_200)
        r.add_get("/broken/bad-gzip", self.bad_gzip)
        r.add_get("/redir/loop/a", self.redirect_to("/redir/loop/b"))
        r.add_get("/redir/loop/b", self.redirect_to("/redir/loop/a"))
        r.add_get("/redir/chain/{n}", self.redirect_chain)
        r.add_get("/redir/out", self.redirect_out)
        r.add_get("/redir/file", self.redirect_to("file:///etc/passwd"))
        r.add_get("/redir/js", self.redirect_to("javascript:alert(1)"))
        r.add_get("/redir/data", self.redirect_to("data:text/html,<a href=/data-link>x</a>"))
        r.add_get("/redir/invalid", self.redirect_to("http://[oops/"))
        r.add_get("/redir/self", self.redirect_to("/redir/self"))
        r.add_get("/redir/utf8", self.redirect_utf8)
        r.add_get("/redir/to-seen", self.redirect_to("/ok/redirect-dedup/a"))
        r.add_get("/redir/to-private", self.redirect_to("/private/redirected"))
        r.add_get("/robots-loop-{n}.txt", self.robots_loop)
        r.add_get("/bomb/gzip", self.gzip_bomb)
        r.add_get("/bomb/br", self.br_bomb)
        r.add_get("/broken/huge-header", self.huge_header)
        r.add_get("/broken/http10", self.http10)
        r.add_get("/content/huge-binary", self.huge_binary)
        r.add_get("/endless", self.endless)
        r.add_get("/huge", self.huge)
        r.add_get("/many-links", self.many_links_page)
        r.add_get("/many/{n}", self.ok_plain)
        r.add_get("/cal/{tail:.*}", self.trap)
        r.add_get("/long-url", self.long_url)
        r.add_get("/weird-links", self.weird_links)
        r.add_get("/pct/{tail:.*}", self.ok_plain)
        r.add_get("/charset/lies", self.charset_lies)
        r.add_get("/charset/unknown", self.charset_unknown)
        r.add_get("/status/{code:\\d+}", self.status)
        r.add_get("/status/429-then-ok", self.status_429_then_ok)
        r.add_get("/status/500-recover", self.status_recover(500))
        r.add_get("/status/503-recover", self.status_recover(503))
        r.add_get("/status/503-forever", self.status_503_forever)
        r.add_get("/content/fake.html", self.fake_html)
        r.add_get("/content/octet", self.octet)
        r.add_get("/content/image-as-html", self.image_as_html)
        r.add_get("/content/garbage-html", self.garbage_html)

    # ordinary pages ---------------------------------------------------------------------------
    async def hub(self, request: web.Request) -> web.Response:
        tag = request.match_info["tag"]
        faults = "".join(f'<a href="{p}">fault {p}</a>\n' for p in HUBS.get(tag, []))
        never = (
            f'<a href="http://localhost:{self.port}/outside/{tag}">other host</a>\n'
            '<a href="file:///etc/passwd">file</a>\n'
            '<a href="javascript:alert(1)">js</a>\n'
            '<a href="data:text/html,&lt;a href=/data-link&gt;x&lt;/a&gt;">data</a>\n'
            '<a href="mailto:nobody@example.invalid">mail</a>\n'
        )
        if tag == "userinfo":
            for who in ("evil:secret", "a", "b:"):
                faults += f'<a href="http://{who}@127.0.0.1:{self.port}/ok/userinfo/a">u</a>\n'
        if tag == "tls-mismatch":
            faults += f'<a href="https://127.0.0.1:{self.port}/tls/page">TLS to plain HTTP</a>\n'
        body = f"{faults}<a href='/ok/{tag}/a'>a</a>\n{never}"
        return web.Response(body=page(body, f"hub {tag}"), content_type="text/html")

    async def ok(self, request: web.Request) -> web.Response:
        tag, name = request.match_info["tag"], request.match_info["name"]
        nxt = {"a": "b", "b": "c", "c": "a"}.get(name, "a")
        body = f'<a href="/ok/{tag}/{nxt}">next</a> <a href="/hub/{tag}">hub</a>'
        return web.Response(body=page(body, name), content_type="text/html")

    async def ok_plain(self, request: web.Request) -> web.Response:
        return web.Response(body=page("leaf"), content_type="text/html")

    # robots.txt ---------------------------------------------------------------------------------
    async def robots_txt(self, request: web.Request) -> web.StreamResponse:
        rules = "User-agent: *\nDisallow: /private/\n"
        mode = self.robots
        if mode == "allow":
            return web.Response(text=rules, content_type="text/plain")
        if mode == "404":
            return web.Response(status=404, text="no robots here")
        if mode == "500":
            return web.Response(status=500, text="robots broke")
        if mode == "redirect":
            raise web.HTTPFound("/robots-real.txt")
        if mode == "redirect-other-host":  # to the same file under another host name
            if request.host.startswith("localhost:"):
                return web.Response(text=rules, content_type="text/plain")
            raise web.HTTPFound(f"http://localhost:{self.port}/robots.txt")
        if mode == "redirect-elsewhere":  # to some other URL on another host
            raise web.HTTPFound(f"http://localhost:{self.port}/outside/admin?delete=1")
        if mode == "redirect-dead-host":
            raise web.HTTPFound("http://robots.nonexistent.invalid/robots.txt")
        if mode == "redirect-loop":
            raise web.HTTPFound("/robots-loop-1.txt")
        if mode == "never":
            await self._forever()
        if mode == "endless":
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            await self._write(resp, rules.encode())
            line = b"Allow: /" + b"x" * 70 + b"\n"
            while await self._write(resp, line * 800):
                self.sent["/robots.txt"] += len(line) * 800
            return resp
        if mode == "sitemaps":
            text = (
                rules
                + f"Sitemap: http://localhost:{self.port}/sitemap-outside.xml\n"
                + f"Sitemap: http://127.0.0.1:{self.port}/sitemap-index.xml\n"
                + "Sitemap: javascript:alert(1)\n"
            )
            return web.Response(text=text, content_type="text/plain")
        if mode == "garbage":
            rnd = random.Random(5)
            junk = bytes(rnd.getrandbits(8) for _ in range(4096))
            body = b"<html><body><h1>Welcome!</h1>" + junk + b"</body></html>"
            return web.Response(body=body, content_type="text/plain")
        if mode == "enormous":
            resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
            resp.content_length = self.enormous_robots
            await resp.prepare(request)
            head = rules.encode()
            await self._write(resp, head)
            left = self.enormous_robots - len(head)
            line = b"# " + b"x" * 60 + b"\nAllow: /some/very/long/path/that/matches/nothing/\n"
            block = line * (65536 // len(line))
            while left > 0:
                chunk = block[:left]
                if not await self._write(resp, chunk):
                    break
                self.sent["/robots.txt"] += len(chunk)
                left -= len(chunk)
            return resp
        raise AssertionError(f"unknown robots mode {mode!r}")

    async def sitemap_index(self, request: web.Request) -> web.Response:
        locs = [
            "/sitemap-pages.xml",
            "/sitemap-endless.xml",
            "/sitemap-bomb.xml.gz",
            "/sitemap-index.xml",  # itself: a loop
        ]
        body = '<?xml version="1.0"?><sitemapindex>' + "".join(
            f"<sitemap><loc>{self.base}{loc}</loc></sitemap>" for loc in locs
        )
        return web.Response(text=body + "</sitemapindex>", content_type="application/xml")

    async def sitemap_pages(self, request: web.Request) -> web.Response:
        locs = [
            f"{self.base}/public/from-sitemap",
            f"{self.base}/private/from-sitemap",  # disallowed by robots.txt
            f"http://localhost:{self.port}/outside/from-sitemap",  # out of scope
            "file:///etc/passwd",
            "javascript:alert(1)",
            f"{self.base}/public/from-sitemap?a=1&amp;b=2",  # XML-escaped
        ]
        body = '<?xml version="1.0"?><urlset>' + "".join(
            f"<url><loc>{loc}</loc></url>" for loc in locs
        )
        return web.Response(text=body + "</urlset>", content_type="application/xml")

    async def sitemap_endless(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/xml"})
        await resp.prepare(request)
        await self._write(resp, b'<?xml version="1.0"?><urlset>')
        n = 0
        while True:  # a new in-scope URL every entry, forever
            block = "".join(
                f"<url><loc>{self.base}/public/sm/{n + i}</loc></url>" for i in range(1000)
            ).encode()
            n += 1000
            if not await self._write(resp, block):
                return resp
            self.sent[request.path] += len(block)

    async def sitemap_bomb(self, request: web.Request) -> web.StreamResponse:
        # A .xml.gz file (not Content-Encoding): the crawler inflates it itself.
        head, block, count, tail = await asyncio.to_thread(gzip_bomb_parts, self.bomb_inflated)
        resp = web.StreamResponse(headers={"Content-Type": "application/gzip"})
        await resp.prepare(request)
        await self._write(resp, head)
        for _ in range(count):
            if not await self._write(resp, block):
                return resp
            self.sent[request.path] += len(block)
        await self._write(resp, tail)
        return resp

    async def robots_loop(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        raise web.HTTPFound(f"/robots-loop-{(n % 3) + 1}.txt")  # 1 -> 2 -> 3 -> 1 ...

    async def robots_real(self, request: web.Request) -> web.Response:
        return web.Response(text="User-agent: *\nDisallow: /private/\n", content_type="text/plain")

    # slow ---------------------------------------------------------------------------------------
    async def slow_never(self, request: web.Request) -> web.Response:
        await self._forever()
        return web.Response(text="too late")

    async def _html_stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        await resp.prepare(request)
        return resp

    async def slow_loris(self, request: web.Request) -> web.StreamResponse:
        resp = await self._html_stream(request)
        await self._write(resp, b'<html><a href="/ok/loris/early">early</a>')
        while True:  # a byte a second, forever: only the total timeout can end this page
            await asyncio.sleep(self.loris_interval)
            if not await self._write(resp, b" "):
                return resp
            self.sent[request.path] += 1

    async def slow_loris_headers(self, request: web.Request) -> web.Response:
        # The status line, then a header that never ends, a byte at a time.
        _raw(request, b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: ")
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(self.loris_interval)
            _raw(request, b"z")
            self.sent[request.path] += 1
        return web.Response(text="never sent")

    async def slow_stall(self, request: web.Request) -> web.StreamResponse:
        resp = await self._html_stream(request)
        await self._write(resp, b'<html><a href="/ok/stall/early">early</a>' + b" " * 2000)
        await self._forever()
        return resp

    # broken -------------------------------------------------------------------------------------
    async def reset_before_headers(self, request: web.Request) -> web.Response:
        _rst(request)
        return web.Response(text="never sent")

    async def reset_mid_body(self, request: web.Request) -> web.Response:
        body = b'<html><a href="/ok/reset-mid-body/early">early</a>' + b" " * 20000
        _raw(
            request,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n" + body,
        )
        await asyncio.sleep(0.3)  # let the client read what was sent before the RST
        _rst(request)
        return web.Response(text="never sent")

    async def chunked_truncated(self, request: web.Request) -> web.Response:
        first = b'<html><a href="/ok/chunked-truncated/early">early</a>'
        _raw(
            request,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n"
            + b"%x\r\n%s\r\n" % (len(first), first)
            + b"2000\r\n"
            + b" " * 100,  # 0x2000 bytes announced, 100 sent, then FIN: no final chunk
        )
        await asyncio.sleep(0.1)
        if request.transport is not None:
            request.transport.close()
        return web.Response(text="never sent")

    async def short_body(self, request: web.Request) -> web.Response:
        body = b'<html><a href="/ok/short-body/early">early</a>' + b" " * 2000
        _raw(
            request,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 50000\r\n\r\n" + body,
        )
        await asyncio.sleep(0.1)
        if request.transport is not None:
            request.transport.close()  # FIN after 2 KB of the announced 50 KB
        return web.Response(text="never sent")

    async def invalid_http(self, request: web.Request) -> web.Response:
        _raw(
            request,
            b"HTTP/1.1 2x0 OK\r\nContent-Type: text/html\r\n\x00\x01garbage\r\n\r\n"
            b'<a href="/invalid-link">x</a>',
        )
        await asyncio.sleep(0.1)
        if request.transport is not None:
            request.transport.close()
        return web.Response(text="never sent")

    async def huge_header(self, request: web.Request) -> web.Response:
        _raw(
            request,
            b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Junk: "
            + b"j" * 100_000
            + b"\r\nContent-Length: 5\r\n\r\nhello",
        )
        await asyncio.sleep(0.1)
        if request.transport is not None:
            request.transport.close()
        return web.Response(text="never sent")

    async def http10(self, request: web.Request) -> web.Response:
        # HTTP/1.0, no length: the body ends when the server closes. A valid response.
        _raw(
            request,
            b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n"
            b'<html><a href="/ok/http10/early">early</a>' + b" " * 5000,
        )
        await asyncio.sleep(0.1)
        if request.transport is not None:
            request.transport.close()
        return web.Response(text="never sent")

    async def empty_200(self, request: web.Request) -> web.Response:
        return web.Response(body=b"", content_type="text/html")

    async def bad_gzip(self, request: web.Request) -> web.Response:
        # A valid gzip header, then bytes that are not deflate data.
        body = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + b"\xff\xfenot deflate at all" * 50
        headers = {"Content-Type": "text/html", "Content-Encoding": "gzip"}
        return web.Response(body=body, headers=headers)

    # redirects ----------------------------------------------------------------------------------
    @staticmethod
    def redirect_to(location: str) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(status=302, headers={"Location": location})

        return handler

    async def redirect_utf8(self, request: web.Request) -> web.Response:
        # A Location of raw UTF-8 bytes (not percent-encoded), as some servers send. The
        # connection is closed after it: aiohttp would otherwise write the "never sent"
        # response behind it on the same keep-alive connection, and the crawler's next
        # request on that connection would read it as its own answer (a flaky test: the
        # page after it came back with no links, 1 run in 8 or so).
        _raw(
            request,
            b"HTTP/1.1 302 Found\r\nLocation: /ok/redirect-utf8/caf\xc3\xa9 x\r\n"
            b"Content-Length: 0\r\nConnection: close\r\n\r\n",
        )
        if request.transport is not None:
            request.transport.close()
        return web.Response(text="never sent")

    async def redirect_chain(self, request: web.Request) -> web.Response:
        n = int(request.match_info["n"])
        if n <= 0:
            return web.Response(body=page("end of the chain"), content_type="text/html")
        return web.Response(status=301, headers={"Location": f"/redir/chain/{n - 1}"})

    async def redirect_out(self, request: web.Request) -> web.Response:
        return web.Response(
            status=302, headers={"Location": f"http://localhost:{self.port}/outside/redirected"}
        )

    # hostile bodies -----------------------------------------------------------------------------
    async def gzip_bomb(self, request: web.Request) -> web.StreamResponse:
        head, block, count, tail = await asyncio.to_thread(gzip_bomb_parts, self.bomb_inflated)
        resp = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Encoding": "gzip"})
        await resp.prepare(request)
        await self._write(resp, head)
        for _ in range(count):
            if not await self._write(resp, block):
                return resp
            self.sent[request.path] += len(block)
        if await self._write(resp, tail):
            await resp.write_eof()
        return resp

    async def br_bomb(self, request: web.Request) -> web.StreamResponse:
        data = await asyncio.to_thread(br_bomb, self.bomb_inflated)
        resp = web.StreamResponse(headers={"Content-Type": "text/html", "Content-Encoding": "br"})
        resp.content_length = len(data)
        await resp.prepare(request)
        for i in range(0, len(data), 16384):
            if not await self._write(resp, data[i : i + 16384]):
                return resp
            self.sent[request.path] += len(data[i : i + 16384])
        return resp

    async def huge_binary(self, request: web.Request) -> web.StreamResponse:
        # 100 MB of a type that is not parsed: the body should not be downloaded at all.
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        resp.content_length = self.huge_size
        await resp.prepare(request)
        block = b"\x00\x01binary" * 8192
        left = self.huge_size
        while left > 0:
            chunk = block[:left]
            if not await self._write(resp, chunk):
                break
            self.sent[request.path] += len(chunk)
            left -= len(chunk)
        return resp

    async def endless(self, request: web.Request) -> web.StreamResponse:
        resp = await self._html_stream(request)
        await self._write(resp, b'<html><a href="/ok/endless/early">early</a>')
        filler = b"<p>" + b"all work and no play " * 3000 + b"</p>\n"
        while await self._write(resp, filler):  # no length, no end
            self.sent[request.path] += len(filler)
        return resp

    async def huge(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/html"})
        resp.content_length = self.huge_size
        await resp.prepare(request)
        head = b'<html><a href="/ok/huge/early">early</a>'
        await self._write(resp, head)
        left = self.huge_size - len(head)
        filler = b"<p>" + b"lorem ipsum dolor " * 3600 + b"</p>\n"
        while left > 0:
            chunk = filler[:left]
            if not await self._write(resp, chunk):
                break
            self.sent[request.path] += len(chunk)
            left -= len(chunk)
        return resp

    async def many_links_page(self, request: web.Request) -> web.Response:
        links = "\n".join(f'<a href="/many/{i}">{i}</a>' for i in range(self.many_links))
        return web.Response(body=page(links, "many"), content_type="text/html")

    async def trap(self, request: web.Request) -> web.Response:
        # Every page links one level deeper, forever; "today" and "week" are the same few
        # URLs a level (the root is already seen, the week view is one more page a level).
        body = (
            f'<a href="next/">next day</a> <a href="{TRAP_ROOT}">today</a>'
            ' <a href="?view=week">week</a>'
        )
        return web.Response(body=page(body, "calendar"), content_type="text/html")

    async def long_url(self, request: web.Request) -> web.Response:
        huge = "/long/" + "a" * LONG_URL_LEN
        longish = "/long/" + "b" * 3000
        body = (
            f'<a href="{huge}">100 KB</a> <a href="{longish}">3 KB</a> '
            '<a href="/ok/long-url/after">after</a>'
        )
        return web.Response(body=page(body), content_type="text/html")

    async def weird_links(self, request: web.Request) -> web.Response:
        body = (
            '<a href="/pct/%zz%4">bad escapes</a>\n'
            '<a href="/pct/100%">bare percent</a>\n'
            '<a href="/pct/%E9t%C3%A9">latin-1 escape</a>\n'
            '<a href="/pct/%7e%2F%41">mixed case escapes</a>\n'
            '<a href="/pct/caf\u00e9 x">raw non-ASCII and space</a>\n'
            '<a href="http://b\u00fccher.example/path">IDNA</a>\n'
            '<a href="http://\u0645\u062b\u0627\u0644.example/">IDNA rtl</a>\n'
            '<a href="http://xn--invalid-.example/">bad punycode</a>\n'
            '<a href="http://exa mple.com/">space in host</a>\n'
        )
        return web.Response(body=page(body), content_type="text/html", charset="utf-8")

    async def charset_lies(self, request: web.Request) -> web.Response:
        # Says UTF-8, is windows-1252: the e-acute byte is not valid UTF-8.
        body = (
            b'<html><a href="/ok/charset-lies/caf\xe9">latin1</a>'
            b'<a href="/ok/charset-lies/ascii">ascii</a></html>'
        )
        return web.Response(body=body, headers={"Content-Type": "text/html; charset=utf-8"})

    async def charset_unknown(self, request: web.Request) -> web.Response:
        body = b'<html><a href="/ok/charset-lies/unknown-label">x</a></html>'
        return web.Response(body=body, headers={"Content-Type": "text/html; charset=x-no-such"})

    # status codes -------------------------------------------------------------------------------
    async def status(self, request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        return web.Response(status=code, body=page(f"status {code}"), content_type="text/html")

    async def status_429_then_ok(self, request: web.Request) -> web.Response:
        if self._hit(request.path) == 1:
            return web.Response(status=429, headers={"Retry-After": "2"}, text="slow down")
        return web.Response(
            body=page('<a href="/ok/status-429/after">x</a>'), content_type="text/html"
        )

    def status_recover(self, code: int) -> Handler:
        async def handler(request: web.Request) -> web.Response:
            if self._hit(request.path) <= 2:
                return web.Response(status=code, text="try again")
            body = page(f'<a href="/ok/status-recover/after{code}">x</a>')
            return web.Response(body=body, content_type="text/html")

        return handler

    async def status_503_forever(self, request: web.Request) -> web.Response:
        return web.Response(status=503, headers={"Retry-After": "0"}, text="down")

    # content types ------------------------------------------------------------------------------
    async def fake_html(self, request: web.Request) -> web.Response:
        body = (
            b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + b'<a href="/content/from-pdf">x</a>' + b"\0" * 5000
        )
        return web.Response(body=body, content_type="application/pdf")

    async def octet(self, request: web.Request) -> web.Response:
        body = page('<a href="/content/from-octet">x</a>')
        return web.Response(body=body, content_type="application/octet-stream")

    async def image_as_html(self, request: web.Request) -> web.Response:
        rnd = random.Random(7)
        body = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x10\0\0\0\x10\x08\x06\0\0\0" + bytes(
            rnd.getrandbits(8) for _ in range(20000)
        )
        return web.Response(body=body, content_type="text/html")

    async def garbage_html(self, request: web.Request) -> web.Response:
        body = garbage_html_body()
        return web.Response(body=body, headers={"Content-Type": "text/html"})


def garbage_html_body() -> bytes:
    """Random bytes with one real link in the middle, after a tag/comment/quote reset."""
    rnd = random.Random(11)
    junk = bytes(rnd.getrandbits(8) for _ in range(100_000))
    reset = b"\"'-->]]>></script></style></title></textarea>\n"
    return junk[:50_000] + reset + b'<a href="/ok/content/found">found</a>' + junk[50_000:]


# --- the load-test site ---------------------------------------------------------------------


@dataclass
class LoadPlan:
    """A deterministic site of ``n`` pages ``/p/<i>``; a fraction fail, always the same way.

    Page i links to its tree children ``8i+1..8i+8`` and to two pseudo-random pages, so a
    failing page rarely cuts others off; the test computes which pages are reachable
    through pages that do not fail, and that is exactly what must be fetched.
    """

    n: int
    fail_rate: float = 0.05
    seed: int = 1

    def __post_init__(self) -> None:
        rnd = random.Random(self.seed)
        kinds = ("reset", "500", "timeout")
        self.fault: list[str | None] = [None] * self.n
        for i in range(1, self.n):
            if rnd.random() < self.fail_rate:
                self.fault[i] = kinds[rnd.randrange(3)]

    def links(self, i: int) -> list[int]:
        n = self.n
        out = [c for c in range(8 * i + 1, 8 * i + 9) if c < n]
        out.append((i * 7919 + 13) % n)
        out.append((i * 104729 + 7) % n)
        return out

    def expected(self) -> tuple[set[int], set[int]]:
        """(pages fetched successfully, failing pages reached), by BFS from page 0."""
        ok: set[int] = set()
        failed: set[int] = set()
        seen = {0}
        todo = [0]
        while todo:
            nxt: list[int] = []
            for i in todo:
                if self.fault[i] is not None:
                    failed.add(i)
                    continue
                ok.add(i)
                for j in self.links(i):
                    if j not in seen:
                        seen.add(j)
                        nxt.append(j)
            todo = nxt
        return ok, failed


def load_page(plan: LoadPlan, i: int, port: int) -> bytes:
    parts = [f"<!doctype html><html><head><title>page {i}</title></head><body><h1>Page {i}</h1>"]
    for k, j in enumerate(plan.links(i)):
        if k % 3 == 0:  # some absolute, most relative
            parts.append(f'<p><a href="http://127.0.0.1:{port}/p/{j}">page {j}</a></p>')
        else:
            parts.append(f'<p><a href="/p/{j}#s{k}">page {j}</a> some text around it.</p>')
    parts.append("</body></html>")
    return "".join(parts).encode()


async def serve_load(plan: LoadPlan, hang: float) -> None:
    counts = [0] * plan.n
    other: Counter[str] = Counter()
    port = 0

    async def handler(request: web.BaseRequest) -> web.StreamResponse:
        path = request.path
        if path == "/__stats":
            return web.json_response({"counts": counts, "other": other})
        if path == "/robots.txt":
            other[path] += 1
            return web.Response(status=404)
        if not path.startswith("/p/") or not path[3:].isdigit() or int(path[3:]) >= plan.n:
            other[request.raw_path] += 1
            return web.Response(status=404)
        i = int(path[3:])
        counts[i] += 1
        fault = plan.fault[i]
        if fault == "500":
            return web.Response(status=500, text="error")
        if fault == "reset":
            _rst(request)  # type: ignore[arg-type]
            return web.Response(text="never sent")
        if fault == "timeout":
            await asyncio.sleep(hang)
        return web.Response(body=load_page(plan, i, port), content_type="text/html")

    server = web.Server(handler, handler_cancellation=True, access_log=None)
    runner = web.ServerRunner(server, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=4096)
    await site.start()
    assert site._server is not None  # uvloop's Server has .sockets too
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    print(port, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("load", help="serve the load-test site, print the port")
    lp.add_argument("--pages", type=int, default=200_000)
    lp.add_argument("--fail", type=float, default=0.05)
    lp.add_argument("--seed", type=int, default=1)
    lp.add_argument("--hang", type=float, default=30.0)
    sub.add_parser("faults", help="serve the fault site until Ctrl-C, print its base URL")
    args = ap.parse_args(argv)
    if args.cmd == "load":
        try:
            import uvloop  # noqa: PLC0415  (optional: the server gets its own core)

            uvloop.install()
        except ImportError:  # pragma: no cover
            pass
        plan = LoadPlan(args.pages, args.fail, args.seed)
        try:
            asyncio.run(serve_load(plan, args.hang))
        except KeyboardInterrupt:
            pass
    else:
        with FaultServer() as srv:
            print(srv.base + "/hub/<tag>  tags:", ", ".join(HUBS), flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass


if __name__ == "__main__":
    main()
