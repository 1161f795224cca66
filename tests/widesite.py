"""A wide test site: many origins (``localhost``, ``o<i>.localhost``) on one small HTTP server.

For tests and benchmarks of long, wide crawls: every origin has its own robots.txt, its
front page links ``fanout`` new origins (a tree over ``n`` origins, breadth-first), a leaf
page and a disallowed path; every third origin asks for a Crawl-delay, every seventh names
a sitemap (two in-scope URLs, one duplicate, one foreign). Host names map to 127.0.0.1 through
:func:`patch_resolver` (``*.localhost`` is not in this machine's resolver), so the server
listens on 127.0.0.1 only and each name is its own origin to the crawler: its own robots.txt,
frontier queue, politeness and connection pool.

The server is plain asyncio (HTTP/1.1, keep-alive, Content-Length), fast enough not to be the
bottleneck. ``python -m tests.widesite --port 0 --origins N`` runs it alone (a benchmark's
separate process) and prints the port.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
from collections.abc import Callable
from typing import Any

import aiohttp.connector
from aiohttp.abc import AbstractResolver, ResolveResult

_HOST = re.compile(rb"\r\nhost:\s*(?:o(\d+)\.)?localhost(?::\d+)?\r\n", re.IGNORECASE)


class WideSite:
    """The link graph, and the bytes of each response."""

    def __init__(self, n: int, fanout: int = 4, port: int = 0, *, window: bool = False) -> None:
        self.n = n
        self.fanout = fanout
        self.window = window
        self.port = port
        self.requests = 0

    def origin(self, i: int) -> str:
        """Origin 0 is ``localhost`` itself (the seed: every other is a subdomain of it)."""
        return f"http://o{i}.localhost:{self.port}" if i else f"http://localhost:{self.port}"

    def children(self, i: int) -> range:
        """A tree (``fanout`` new origins a page), or with ``window`` the next ``fanout``
        origins (``i+1 .. i+fanout``): a crawl front that stays ``fanout`` wide however long
        the crawl, so that what is queued at any time does not grow with it."""
        first = i + 1 if self.window else self.fanout * i + 1
        return range(first, min(first + self.fanout, self.n))

    def robots(self, i: int) -> bytes:
        text = "User-agent: *\nDisallow: /private\n"
        if i % 3 == 0:
            text += "Crawl-delay: 0.01\n"
        if i % 7 == 0:
            text += f"Sitemap: {self.origin(i)}/sm.xml\n"
        return text.encode()

    def page(self, i: int, path: str) -> tuple[int, bytes, bytes]:
        """(status, content type, body) of ``path`` on origin ``i``."""
        if path == "/robots.txt":
            return 200, b"text/plain", self.robots(i)
        if path == "/":
            links = ['<a href="/a">a</a>', '<a href="/private/x">p</a>']
            links += [f'<a href="{self.origin(c)}/">o{c}</a>' for c in self.children(i)]
            links.append(f'<a href="http://o{i}.localhost:1/">other port</a>')
            links.append('<a href="https://elsewhere.invalid/">ext</a>')
            return 200, b"text/html", ("<!doctype html><title>o</title>" + "".join(links)).encode()
        if path in ("/a", "/s1", "/s2"):
            return 200, b"text/html", b'<!doctype html><p>leaf <a href="/">home</a>'
        if path == "/sm.xml":
            locs = [
                f"{self.origin(i)}/s1",
                f"{self.origin(i)}/s2",
                f"{self.origin(i)}/a",
                "https://elsewhere.invalid/s",
            ]
            body = "<urlset>" + "".join(f"<url><loc>{u}</loc></url>" for u in locs) + "</urlset>"
            return 200, b"application/xml", body.encode()
        return 404, b"text/plain", b"no"


class _Http(asyncio.Protocol):
    def __init__(self, site: WideSite) -> None:
        self.site = site
        self.buf = b""
        self.transport: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self.buf) > 65536:
                    self.transport.close()
                return
            head, self.buf = self.buf[: end + 4], self.buf[end + 4 :]
            self.answer(head)

    def answer(self, head: bytes) -> None:
        site = self.site
        site.requests += 1
        line = head.split(b"\r\n", 1)[0].split(b" ")
        path = line[1].decode("latin-1") if len(line) > 1 else "/"
        m = _HOST.search(head)
        i = (int(m.group(1)) if m.group(1) else 0) if m else -1
        if 0 <= i < site.n:
            status, ctype, body = site.page(i, path)
        else:
            status, ctype, body = 404, b"text/plain", b"no such origin"
        reason = b"OK" if status == 200 else b"Not Found"
        self.transport.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s"
            % (status, reason, ctype, len(body), body)
        )


async def start(site: WideSite, port: int = 0) -> asyncio.AbstractServer:
    """Serve ``site`` on 127.0.0.1; sets ``site.port`` to the real port."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: _Http(site), "127.0.0.1", port, backlog=1024)
    site.port = server.sockets[0].getsockname()[1]
    return server


class LocalhostResolver(AbstractResolver):
    """aiohttp resolver: ``localhost`` and ``*.localhost`` are 127.0.0.1 (RFC 6761), nothing
    else resolves (no lookup leaves the machine)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        if host != "localhost" and not host.endswith(".localhost"):
            raise OSError(socket.EAI_NONAME, f"Name or service not known ({host})")
        return [
            ResolveResult(
                hostname=host,
                host="127.0.0.1",
                port=port,
                family=socket.AF_INET,
                proto=0,
                flags=socket.AI_NUMERICHOST,
            )
        ]

    async def close(self) -> None:
        pass


def patch_resolver() -> Callable[[], None]:
    """Make aiohttp sessions made from now on, and crawler.http.pool's pools, resolve as
    LocalhostResolver does; returns what puts the old resolvers back."""
    import crawler.http.pool  # noqa: PLC0415

    old = aiohttp.connector.DefaultResolver
    old_plain = crawler.http.pool.resolve
    aiohttp.connector.DefaultResolver = LocalhostResolver  # type: ignore[misc]

    async def local(loop: Any, host: str, port: int) -> list[Any]:
        found = await LocalhostResolver().resolve(host, port)
        return [
            (r["family"], socket.SOCK_STREAM, r["proto"], "", (r["host"], r["port"])) for r in found
        ]

    crawler.http.pool.resolve = local

    def restore() -> None:
        aiohttp.connector.DefaultResolver = old  # type: ignore[misc]
        crawler.http.pool.resolve = old_plain

    return restore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--origins", type=int, default=100_000)
    parser.add_argument("--fanout", type=int, default=4)
    parser.add_argument("--window", action="store_true", help="link the next FANOUT origins")
    args = parser.parse_args()

    async def serve() -> None:
        site = WideSite(args.origins, args.fanout, window=args.window)
        server = await start(site, args.port)
        print(site.port, flush=True)
        async with server:
            await server.serve_forever()

    try:
        import uvloop  # noqa: PLC0415  (optional: a faster server)

        uvloop.run(serve())
    except ImportError:
        asyncio.run(serve())


if __name__ == "__main__":
    main()
