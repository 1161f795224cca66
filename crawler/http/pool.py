"""The plain path's keep-alive pool: connections of :mod:`crawler.http.http1` by origin,
the crawl's limits on them, name resolution and connecting.

An ``https`` origin's connections are TLS (asyncio's or uvloop's, with the crawl's one
context from :mod:`crawler.http.tls_context`, awaited from its thread the first time; SNI and
certificate checks on the URL's host name, the address guard on the resolved address as for
http): a handshake per connection, keep-alive as for http, a failed handshake the error kind
``tls``. ``tls_handshakes`` and ``tls_resumed`` count them (benchmarks/https.py reads them).

A connection goes back to its origin's idle list only when its response was read to the end
and both sides keep it alive; at most ``max_idle`` idle connections are kept overall (the least
recently used origin's oldest closed first), each for at most ``keepalive`` seconds. At most
``limit`` exchanges run at once, at most ``per_host`` to one origin, as aiohttp's connector
limits them on the other path. A new connection is opened only to the resolved addresses the
crawl's address rules allow (:mod:`crawler.http.guard`): checked once per connection.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from contextvars import Token
from typing import TYPE_CHECKING, Any

from crawler.http.errors import HttpError, tls_detail
from crawler.http.guard import AddressGuard
from crawler.http.http1 import Connection
from crawler.http.tls_context import CONNECTING_TO

if TYPE_CHECKING:
    from crawler.http.tls_context import TlsClient

__all__ = ["DNS_TTL", "Pool", "resolve"]

#: Seconds a resolved host name is kept (aiohttp's ``ttl_dns_cache`` of the crawl).
DNS_TTL = 300.0


async def _getaddrinfo(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[Any]:
    return await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)


#: How a host name becomes addresses (getaddrinfo tuples); tests put a local resolver here, as
#: they do in aiohttp's ``DefaultResolver``, so that no name lookup leaves the machine.
resolve: Callable[[asyncio.AbstractEventLoop, str, int], Awaitable[list[Any]]] = _getaddrinfo


class Pool:
    """Keep-alive connections by (host, port), bounded idle, with the crawl's timeouts.

    At most ``limit`` exchanges at once, at most ``per_host`` to one (host, port), as aiohttp's
    connector limits them (the crawl's ``concurrency`` and ``per_host``): a caller over either
    waits for a slot, first come first served, within its deadline.
    """

    def __init__(
        self,
        *,
        limit: int,
        per_host: int,
        max_idle: int,
        keepalive: float,
        connect_timeout: float | None,
        read_timeout: float | None,
        guard: AddressGuard | None = None,
        tls: TlsClient | None = None,
    ) -> None:
        self.guard = guard
        self.tls = tls
        #: TLS connections opened, and how many of them resumed a session (no full handshake).
        self.tls_handshakes = 0
        self.tls_resumed = 0
        self.max_idle = max(0, max_idle)
        self.keepalive = keepalive
        self.connect_timeout = connect_timeout or None
        self.read_timeout = read_timeout or None
        self.loop = asyncio.get_running_loop()
        self._idle: OrderedDict[tuple[str, int, bool], deque[Connection]] = OrderedDict()
        self._n_idle = 0
        self._all: set[Connection] = set()
        self._dns: dict[tuple[str, int], tuple[float, list[Any]]] = {}
        self.limit = max(1, limit)
        self.per_host = max(1, per_host)
        self._in_use = 0
        self._by_key: dict[tuple[str, int, bool], int] = {}
        self._slot_waiters: deque[tuple[tuple[str, int, bool], asyncio.Future[None]]] = deque()

    @property
    def idle_connections(self) -> int:
        return self._n_idle

    @property
    def in_use(self) -> int:
        """Exchanges holding a slot now."""
        return self._in_use

    def _fits(self, key: tuple[str, int, bool]) -> bool:
        return self._in_use < self.limit and self._by_key.get(key, 0) < self.per_host

    def _hold(self, key: tuple[str, int, bool]) -> None:
        self._in_use += 1
        self._by_key[key] = self._by_key.get(key, 0) + 1

    def _free(self, key: tuple[str, int, bool]) -> None:
        """A slot of ``key`` is given back: the first waiters that fit now get theirs."""
        self._in_use -= 1
        n = self._by_key[key] - 1
        if n:
            self._by_key[key] = n
        else:
            del self._by_key[key]
        waiters = self._slot_waiters
        if not waiters:
            return
        kept: deque[tuple[tuple[str, int, bool], asyncio.Future[None]]] = deque()
        while waiters and self._in_use < self.limit:
            wkey, fut = waiters.popleft()
            if fut.done():
                continue  # cancelled, timed out
            if self._fits(wkey):
                self._hold(wkey)
                fut.set_result(None)
            else:
                kept.append((wkey, fut))
        kept.extend(waiters)
        self._slot_waiters = kept

    async def _slot(self, key: tuple[str, int, bool], deadline: float | None) -> None:
        if self._fits(key):
            self._hold(key)
            return
        fut = self.loop.create_future()
        self._slot_waiters.append((key, fut))
        try:
            async with asyncio.timeout_at(deadline):
                await fut
        except TimeoutError as exc:
            if fut.done() and not fut.cancelled():
                self._free(key)  # given just as the deadline passed: give it back
            raise HttpError(
                "timeout", "TimeoutError: the total timeout passed waiting for a connection"
            ) from exc
        except BaseException:
            if fut.done() and not fut.cancelled():
                self._free(key)
            else:
                fut.cancel()
            raise

    async def exchange(
        self, host: str, port: int, head: bytes, deadline: float | None = None, tls: bool = False
    ) -> Connection:
        """A connection on which ``head`` was sent and the response's head is in.

        ``deadline`` (``loop.time()``) bounds the connect and every wait for the server;
        ``tls``: the origin is https.

        The caller reads the body (:meth:`Connection.read`) and then must call
        :meth:`Connection.release`, also on a fault.
        """
        key = (host, port, tls)
        await self._slot(key, deadline)
        try:
            conn = self._take(key)
            if conn is None:
                conn = await self._connect(key, deadline)
        except BaseException:
            self._free(key)
            raise
        conn.slot_held = True
        conn.deadline = deadline
        conn.send(head)
        try:
            await conn.read_head()
        except BaseException:
            conn.release()
            raise
        return conn

    def _take(self, key: tuple[str, int, bool]) -> Connection | None:
        idle = self._idle.get(key)
        if not idle:
            return None
        now = time.monotonic()
        while idle:
            conn = idle.pop()  # the most recently used: the likeliest to be alive
            self._n_idle -= 1
            if conn.closed or now - conn.idle_since > self.keepalive:
                conn._abort()
                continue
            if not idle:
                del self._idle[key]
            return conn
        del self._idle[key]
        return None

    def _put(self, conn: Connection) -> None:
        conn.idle_since = time.monotonic()
        idle = self._idle.get(conn.key)
        if idle is None:
            idle = self._idle[conn.key] = deque()
        else:
            self._idle.move_to_end(conn.key)
        idle.append(conn)
        self._n_idle += 1
        while self._n_idle > self.max_idle:
            oldest_key, oldest = next(iter(self._idle.items()))
            victim = oldest.popleft()
            self._n_idle -= 1
            if not oldest:
                del self._idle[oldest_key]
            victim._abort()

    def _lost(self, conn: Connection) -> None:
        self._all.discard(conn)
        idle = self._idle.get(conn.key)
        if idle is not None and conn in idle:
            idle.remove(conn)
            self._n_idle -= 1
            if not idle:
                del self._idle[conn.key]

    async def _addresses(self, host: str, port: int) -> list[Any]:
        """getaddrinfo of ``host`` (cached DNS_TTL seconds); an IP literal is itself."""
        key = (host, port)
        now = time.monotonic()
        cached = self._dns.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        for family in (socket.AF_INET, socket.AF_INET6):
            try:
                socket.inet_pton(family, host)
            except OSError:
                continue
            return [(family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (host, port))]
        try:
            infos = await resolve(self.loop, host, port)
        except (socket.gaierror, OSError) as exc:
            raise HttpError(
                "dns",
                f"ClientConnectorDNSError: Cannot connect to host {host}:{port} ssl:default "
                f"[{exc.strerror or exc}]",
            ) from exc
        if len(self._dns) > 4096:
            self._dns.clear()
        self._dns[key] = (now + DNS_TTL, infos)
        return infos

    async def _connect(self, key: tuple[str, int, bool], deadline: float | None) -> Connection:
        host, port, tls = key
        last: OSError | None = None
        limit = self.connect_timeout
        if deadline is not None:
            limit = (
                min(limit, deadline - self.loop.time()) if limit else deadline - self.loop.time()
            )
        token: Token[str | None] | None = None
        try:
            async with asyncio.timeout(limit):
                infos = await self._addresses(host, port)
                if self.guard is not None:  # on the resolved addresses: names, rebinding
                    infos = self.guard.filter(host, port, infos, 4)
                context = None
                if tls:
                    if self.tls is None:
                        raise HttpError("tls", "handshake failure (no TLS context configured)")
                    context = await self.tls.context_async()
                    # (the origin whose TLS session the connection offers: tls_context)
                    token = CONNECTING_TO.set(f"{host}:{port}")
                for family, _type, proto, _, address in infos:
                    conn = Connection(self, key)
                    try:
                        await self.loop.create_connection(
                            lambda conn=conn: conn,
                            address[0],
                            address[1],
                            family=family,
                            proto=proto,
                            ssl=context,
                            server_hostname=host if tls else None,
                        )
                    except (ssl.SSLError, ssl.CertificateError) as exc:
                        raise HttpError("tls", tls_detail(exc)) from exc
                    except OSError as exc:
                        last = exc
                        continue
                    self._all.add(conn)
                    if context is not None:
                        self._handshake(conn, context)
                    return conn
        except TimeoutError as exc:
            scheme = "https" if tls else "http"
            raise HttpError(
                "timeout",
                f"ConnectionTimeoutError: Connection timeout to host {scheme}://{host}:{port}",
            ) from exc
        finally:
            if token is not None:
                CONNECTING_TO.reset(token)
        why = f"[{last.strerror or last}]" if last is not None else "[no address]"
        message = f"ClientConnectorError: Cannot connect to host {host}:{port} ssl:default {why}"
        raise HttpError("connect", message) from last

    def _handshake(self, conn: Connection, context: Any) -> None:
        """Count a TLS connection made (resumed or not); its session is kept after its first
        response (:meth:`Connection.release`)."""
        self.tls_handshakes += 1
        transport = conn.transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        if ssl_object is not None and ssl_object.session_reused:
            self.tls_resumed += 1
        if hasattr(context, "remember"):
            conn.resumable = context

    def close(self) -> None:
        """Close every connection, idle or not."""
        for conn in list(self._all):
            conn._abort()
        self._all.clear()
        self._idle.clear()
        self._n_idle = 0
