"""A small logging forward proxy on 127.0.0.1 for the proxy tests (plain http, absolute-form).

A client sends ``GET http://host:port/path HTTP/1.1`` to it; it logs the absolute URL (and the
Proxy-Authorization it got), forwards the request to the origin with ``Via: 1.1 test-proxy``
added and the Proxy-* headers removed, and returns the origin's answer byte for byte
(Content-Encoding untouched). With ``credentials`` set it answers 407 without them. Only
127.0.0.0/8 targets are forwarded (anything else is a 403: the tests never leave the machine).
CONNECT (https) is :class:`TunnelProxy`'s, a raw asyncio server (aiohttp's web server has no
tunnel).
"""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web
from yarl import URL

VIA = "1.1 test-proxy"
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-authenticate",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
    }
)


@dataclass
class ForwardProxy:
    credentials: str | None = None  # "user:password" the proxy demands
    log: list[str] = field(default_factory=list)  # absolute URLs forwarded
    auth_seen: list[str | None] = field(default_factory=list)
    refused: int = 0

    def app(self) -> web.Application:
        expected = (
            "Basic " + base64.b64encode(self.credentials.encode()).decode()
            if self.credentials
            else None
        )
        session: dict[str, aiohttp.ClientSession] = {}

        async def startup(app: web.Application) -> None:
            session["s"] = aiohttp.ClientSession(
                auto_decompress=False, cookie_jar=aiohttp.DummyCookieJar()
            )

        async def cleanup(app: web.Application) -> None:
            await session["s"].close()

        async def forward(request: web.Request) -> web.StreamResponse:
            if request.method == "CONNECT":
                return web.Response(status=405, text="CONNECT not implemented")
            target = URL(request.raw_path) if "://" in request.raw_path else None
            if target is None or not target.is_absolute():
                return web.Response(status=400, text="not an absolute-form request")
            given = request.headers.get("Proxy-Authorization")
            self.auth_seen.append(given)
            if expected is not None and given != expected:
                self.refused += 1
                return web.Response(
                    status=407, headers={"Proxy-Authenticate": 'Basic realm="proxy"'}
                )
            if not (target.host or "").startswith("127."):
                return web.Response(status=403, text="only 127.0.0.0/8")
            self.log.append(str(target))
            headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP]
            headers.append(("Via", VIA))
            async with session["s"].get(
                URL(str(target), encoded=True),
                headers=headers,
                allow_redirects=False,
                skip_auto_headers=("Accept-Encoding", "User-Agent", "Accept"),
            ) as upstream:
                body = await upstream.read()
                out = web.Response(status=upstream.status, reason=upstream.reason, body=body)
                for k, v in upstream.headers.items():
                    if k.lower() not in HOP_BY_HOP and k.lower() != "content-length":
                        out.headers.add(k, v)
                out.headers["Via"] = VIA
                return out

        app = web.Application()
        app.on_startup.append(startup)
        app.on_cleanup.append(cleanup)
        app.router.add_route("*", "/{tail:.*}", forward)
        return app


@dataclass
class TunnelProxy:
    """A CONNECT-only proxy (https through a proxy): logs each ``CONNECT host:port``.

    Tunnels only to 127.0.0.0/8; answers 502 when the target refuses, 407 without the
    ``credentials`` it was given. Start with ``await proxy.start()``; ``await proxy.stop()``.
    """

    credentials: str | None = None
    log: list[str] = field(default_factory=list)
    auth_seen: list[str | None] = field(default_factory=list)
    port: int = 0
    _server: asyncio.base_events.Server | None = None
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        for task in list(self._tasks):
            task.cancel()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
                return
            given = headers.get("Proxy-Authorization")
            self.auth_seen.append(given)
            if self.credentials is not None:
                want = "Basic " + base64.b64encode(self.credentials.encode()).decode()
                if given != want:
                    writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                    return
            self.log.append(f"CONNECT {target}")
            host, _, port = target.rpartition(":")
            if not host.startswith("127."):
                writer.write(b"HTTP/1.1 403 Forbidden\r\n\r\n")
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(host, int(port))
            except OSError:
                writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
                return
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()

            async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
                try:
                    while data := await src.read(65536):
                        dst.write(data)
                        await dst.drain()
                finally:
                    dst.close()

            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, ValueError):
            pass
        finally:
            writer.close()
            if task is not None:
                self._tasks.discard(task)
