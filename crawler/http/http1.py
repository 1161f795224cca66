"""Plain HTTP/1.1 GETs on asyncio: the crawl's common request, without aiohttp's cost a request.

Most of a crawl is GETs of ``http://`` URLs over a few keep-alive connections, with no proxy,
no cookie jar in use and no archive. aiohttp spends about 0.25 ms of CPU on each of those on
the benchmark machine (its request and response objects, tracing hooks, the connector's
bookkeeping, multidicts, a task per connect) and 0.2 s to import, more than the whole rest of
a page's work; through this module the same crawls cost 28-34% less CPU in all (benchmarks/
CRAWL.md, ``--crawlers ours-aiohttp``). The fetcher
(:mod:`crawler.http.client`) chooses it per request and sends everything else through aiohttp:
https, proxies, a WARC archive, cookies (from the first ``Set-Cookie`` on), a caller's session.

The wire format is parsed by httptools (llhttp, the parser of Node.js and, vendored, of
aiohttp's own C parser), with aiohttp's leniencies and limits so that both paths accept and
refuse the same responses: a header line at most 8,190 bytes, at most 128 header fields,
whitespace after a value stripped, a NUL in a value refused; here also a response head still
not complete after 64 KB is cut off (a server that sends headers without end). Faults are
:class:`HttpError` with the fetcher's error kinds (``dns``, ``connect``, ``timeout``,
``disconnected``, ``protocol``) and aiohttp's wording where a test or a user reads it.

A connection serves one exchange at a time. It goes back to its origin's idle list only when
its response was read to the end and both sides keep it alive; at most ``max_idle`` idle
connections are kept overall (the least recently used origin's oldest closed first), each for
at most ``keepalive`` seconds. A request is sent once per call: a kept connection that the
server closed meanwhile is a ``disconnected`` fault, retried by the fetcher's own loop (with
backoff, counted in ``retries``), never resent here behind its back (aiohttp's hidden resend is
turned off on the other path for the same reason).
"""

from __future__ import annotations

import asyncio
import re
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from typing import Any

import httptools

__all__ = [
    "MAX_FIELD",
    "MAX_HEAD",
    "MAX_HEADERS",
    "Connection",
    "HttpError",
    "Pool",
    "content_type_of",
    "split_http_url",
]

#: The most bytes of one header line (name and value), aiohttp's ``max_field_size``.
MAX_FIELD = 8190
#: The most header fields of one response, aiohttp's ``max_headers``.
MAX_HEADERS = 128
#: Bytes read for a response head (status line and fields) before it is given up on.
MAX_HEAD = 64 * 1024
#: Body bytes buffered before the socket is paused (the consumer is slower than the wire).
HIGH_WATER = 256 * 1024
#: Seconds a resolved host name is kept (aiohttp's ``ttl_dns_cache`` of the crawl).
DNS_TTL = 300.0


async def _getaddrinfo(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[Any]:
    return await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)


#: How a host name becomes addresses (getaddrinfo tuples); tests put a local resolver here, as
#: they do in aiohttp's ``DefaultResolver``, so that no name lookup leaves the machine.
resolve: Callable[[asyncio.AbstractEventLoop, str, int], Awaitable[list[Any]]] = _getaddrinfo


class HttpError(Exception):
    """A fault of one exchange; ``kind`` is the fetcher's error kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


# The common crawl URL in one match: a lower-case name or IPv4 host, an optional port, a path
# of printable ASCII without "#". Anything else takes the general reading below (the same
# answer: tests/test_http1.py holds the two equal).
_PLAIN_URL = re.compile(r"http://([a-z0-9.-]+)(?::([0-9]{1,5}))?(/[!\"$-~]*)\Z")


def split_http_url(url: str) -> tuple[str, int, str, str] | None:
    """(host, port, authority, request-target) of a plain ``http://`` URL, else None.

    The URL is WHATWG-serialised (the crawl's URLs are): lower-case scheme, no default port,
    a path. None for anything this module does not send: another scheme, userinfo, a byte
    outside printable ASCII (the request line and ``Host`` must be sent as they are).
    """
    m = _PLAIN_URL.match(url)
    if m is not None:
        host, port_text, target = m.groups()
        if port_text is None:
            return host, 80, host, target
        port = int(port_text)
        if 0 < port < 65536:
            return host, port, f"{host}:{port_text}", target
        return None
    return _split_http_url(url)


def _split_http_url(url: str) -> tuple[str, int, str, str] | None:
    if not url.startswith("http://"):
        return None
    if not url.isascii() or not url.isprintable() or " " in url:
        return None
    end = len(url)
    for sep in "/?#":
        i = url.find(sep, 7)
        if 0 <= i < end:
            end = i
    authority = url[7:end]
    if not authority or "@" in authority:
        return None
    target = url[end:].partition("#")[0]
    if not target.startswith("/"):
        target = "/" + target
    if authority.startswith("["):
        close = authority.find("]")
        if close < 0:
            return None
        host, rest = authority[1:close], authority[close + 1 :]
    else:
        host, colon, port_text = authority.partition(":")
        rest = colon + port_text
    port = 80
    if rest:
        if not rest.startswith(":") or not rest[1:].isdigit():
            return None
        port = int(rest[1:])
        if not 0 < port < 65536:
            return None
    if not host:
        return None
    return host, port, authority, target


_TOKEN = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_SIMPLE_CONTENT_TYPE = re.compile(rf"({_TOKEN}/{_TOKEN})(?:[ \t]*;[ \t]*charset=({_TOKEN}))?")


def content_type_of(raw: str) -> tuple[str, str | None]:
    """(media type, charset) of a Content-Type value, as aiohttp reads it.

    The value is parsed as an e-mail header with the standard library's HTTP policy; a media
    type that is not one ``type/subtype`` is ``application/octet-stream`` (RFC 9110 section
    8.3); the charset is the ``charset`` parameter as the parser unquotes it. A value the
    parser cannot take (aiohttp raises, and its fetch fails) keeps its media type and has no
    charset: the page is still read. Called once per
    distinct value (the fetcher caches), so the cost of the email package does not matter.
    """
    simple = _SIMPLE_CONTENT_TYPE.fullmatch(raw)
    if simple is not None:  # "text/html", "text/html; charset=utf-8": no parser needed
        return simple[1].lower(), simple[2]
    from email.message import EmailMessage  # noqa: PLC0415  (first Content-Type only)
    from email.parser import HeaderParser  # noqa: PLC0415
    from email.policy import HTTP  # noqa: PLC0415

    try:
        message = HeaderParser(EmailMessage, policy=HTTP).parsestr(f"Content-Type: {raw}")
        value = str(message.get("content-type", ""))
        params = message.get_params(())
    except Exception:  # a value the email parser chokes on (aiohttp raises): the media type
        value, params = raw, None
    media, _, _ = value.lower().partition(";")
    media = media.strip()
    if media.count("/") != 1:
        media = "application/octet-stream"
    charset = dict(params[1:]).get("charset") if params else None
    return media, charset


class Connection(asyncio.Protocol):
    """One keep-alive connection and the response being read on it (httptools callbacks)."""

    def __init__(self, pool: Pool, key: tuple[str, int]) -> None:
        self._pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_optional_cr_before_lf=True,
            lenient_spaces_after_chunk_size=True,
        )
        self.closed = False
        self.idle_since = 0.0
        #: loop.time() by which the exchange must be over (None: no total timeout)
        self.deadline: float | None = None
        #: whether this connection's exchange holds one of the pool's slots (freed at release)
        self.slot_held = False
        self._active = False
        self._waiter: asyncio.Future[None] | None = None
        self._clear()

    def _clear(self) -> None:
        self.status = 0
        self.reason = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_done = False
        self.done = False
        self._interim = False
        self._until_eof = False
        self._keep = False
        self._head_bytes = 0
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._exc: HttpError | None = None

    # -- asyncio.Protocol --
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if not self._active:  # bytes nobody asked for: the connection is not usable
            self._abort()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._keep = False
            if self.head_done:
                self._message_done()
        except httptools.HttpParserCallbackError:
            self._fail(self._exc or HttpError("protocol", "BadHttpMessage: bad response"))
        except httptools.HttpParserError as exc:
            self._fail(HttpError("protocol", f"BadHttpMessage: 400, message: {exc}"))
        if not self.head_done and not self.closed:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD:
                self._fail(HttpError("protocol", f"LineTooLong: response head over {MAX_HEAD}"))
        self._wake()  # bytes came: the reader looks, and its read timeout starts again

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool._lost(self)
        if not self._active or self.done or self._exc is not None:
            self._wake()
            return
        if self.head_done and self._until_eof and exc is None:
            self._message_done()  # a body delimited by the close: complete
            return
        if not self.head_done:
            detail = "ServerDisconnectedError: Server disconnected"
            if exc is not None:
                detail = f"ClientOSError: {exc}"
            self._exc = HttpError("disconnected", detail)
        elif isinstance(exc, ConnectionResetError):
            self._exc = HttpError(
                "disconnected", f"ClientPayloadError: Response payload is not completed ({exc})"
            )
        else:
            self._exc = HttpError(
                "protocol",
                "ClientPayloadError: Response payload is not completed: "
                "<ContentLengthError: 400, message='Not enough data to satisfy content length "
                "header.'>",
            )
        self._wake()

    # -- httptools callbacks --
    def on_message_begin(self) -> None:
        if self.done:  # a second response to one request: the connection is not reusable
            self._keep = False

    def on_status(self, reason: bytes) -> None:
        self.reason += reason
        if len(self.reason) > MAX_FIELD:
            self._exc = HttpError("protocol", "LineTooLong: status line too long")
            raise ValueError(self._exc)

    def on_header(self, name: bytes, value: bytes) -> None:
        headers = self.headers
        value = value.rstrip(b" \t")
        if len(name) + len(value) > MAX_FIELD:
            self._exc = HttpError("protocol", f"LineTooLong: header over {MAX_FIELD} bytes")
            raise ValueError(self._exc)
        if b"\x00" in value:
            self._exc = HttpError("protocol", "InvalidHeader: NUL in a header value")
            raise ValueError(self._exc)
        headers.append((name, value))
        if len(headers) > MAX_HEADERS:
            self._exc = HttpError("protocol", "BadHttpMessage: Too many headers received")
            raise ValueError(self._exc)

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._interim = True  # 100 Continue, 103 Early Hints: the response is still to come
            self.headers = []
            self.reason = b""
            return
        self.status = status
        self.head_done = True
        self._keep = self._parser.should_keep_alive()
        if status not in (101, 204, 304):
            framed = False
            for name, value in self.headers:
                lower = name.lower()
                if lower == b"content-length" or (
                    lower == b"transfer-encoding" and b"chunked" in value.lower()
                ):
                    framed = True
                    break
            self._until_eof = not framed
        self._wake()

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered > HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            return
        self._message_done()

    # -- the exchange --
    def _message_done(self) -> None:
        self.done = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _fail(self, exc: HttpError) -> None:
        if self._exc is None:
            self._exc = exc
        self._abort()
        self._wake()

    def _abort(self) -> None:
        self._keep = False
        if self.transport is not None and not self.closed:
            self.transport.close()

    def _on_timeout(self) -> None:
        self._fail(HttpError("timeout", "ServerTimeoutError: Timeout on reading data from socket"))

    def _on_deadline(self) -> None:
        self._fail(HttpError("timeout", "TimeoutError: the total timeout of the request passed"))

    async def _wait(self) -> None:
        """Until bytes come (or the connection ends): at most the read timeout, and never past
        the request's deadline. Only the time spent waiting for the server counts, as on
        aiohttp's path: a consumer that holds the body back (the crawl state is slow) does not
        time the request out while what it waits for is already here."""
        loop = self._pool.loop
        timeout = self._pool.read_timeout
        on_timeout = self._on_timeout
        if self.deadline is not None:
            left = self.deadline - loop.time()
            if left <= 0:
                self._on_deadline()
                return
            if timeout is None or left < timeout:
                timeout, on_timeout = left, self._on_deadline
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(timeout, on_timeout) if timeout else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    def send(self, head: bytes) -> None:
        """Start an exchange: the request ``head`` (a GET has no body) goes out."""
        self._clear()
        self._active = True
        if self.closed or self.transport is None or self.transport.is_closing():
            self._exc = HttpError("disconnected", "ServerDisconnectedError: Server disconnected")
            return
        self.transport.write(head)

    async def read_head(self) -> None:
        """Until the final response's status and headers are in (HttpError if they never are)."""
        while not self.head_done:
            if self._exc is not None:
                raise self._exc
            await self._wait()

    async def read(self) -> bytes:
        """The next body bytes as they came (joined if several), ``b""`` at the body's end."""
        while True:
            body = self._body
            if body:
                chunk = body.popleft() if len(body) == 1 else b"".join(body)
                body.clear()
                self._buffered = 0
                if self._paused and self.transport is not None and not self.closed:
                    self._paused = False
                    self.transport.resume_reading()
                return chunk
            if self.done:
                return b""
            if self._exc is not None:
                raise self._exc
            await self._wait()

    def release(self) -> None:
        """The exchange is over: the connection goes back to the pool, or is closed."""
        self._active = False
        self._waiter = None
        if self.slot_held:
            self.slot_held = False
            self._pool._free(self.key)
        if self.done and self._keep and not self.closed:
            self._body.clear()  # a body read whole but not asked for (a redirect's, say)
            self._buffered = 0
            self._pool._put(self)
        else:
            self._abort()


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
    ) -> None:
        self.max_idle = max(0, max_idle)
        self.keepalive = keepalive
        self.connect_timeout = connect_timeout or None
        self.read_timeout = read_timeout or None
        self.loop = asyncio.get_running_loop()
        self._idle: OrderedDict[tuple[str, int], deque[Connection]] = OrderedDict()
        self._n_idle = 0
        self._all: set[Connection] = set()
        self._dns: dict[tuple[str, int], tuple[float, list[Any]]] = {}
        self.limit = max(1, limit)
        self.per_host = max(1, per_host)
        self._in_use = 0
        self._by_key: dict[tuple[str, int], int] = {}
        self._slot_waiters: deque[tuple[tuple[str, int], asyncio.Future[None]]] = deque()

    @property
    def idle_connections(self) -> int:
        return self._n_idle

    @property
    def in_use(self) -> int:
        """Exchanges holding a slot now."""
        return self._in_use

    def _fits(self, key: tuple[str, int]) -> bool:
        return self._in_use < self.limit and self._by_key.get(key, 0) < self.per_host

    def _hold(self, key: tuple[str, int]) -> None:
        self._in_use += 1
        self._by_key[key] = self._by_key.get(key, 0) + 1

    def _free(self, key: tuple[str, int]) -> None:
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
        kept: deque[tuple[tuple[str, int], asyncio.Future[None]]] = deque()
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

    async def _slot(self, key: tuple[str, int], deadline: float | None) -> None:
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
        self, host: str, port: int, head: bytes, deadline: float | None = None
    ) -> Connection:
        """A connection on which ``head`` was sent and the response's head is in.

        ``deadline`` (``loop.time()``) bounds the connect and every wait for the server.

        The caller reads the body (:meth:`Connection.read`) and then must call
        :meth:`Connection.release`, also on a fault.
        """
        key = (host, port)
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

    def _take(self, key: tuple[str, int]) -> Connection | None:
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

    async def _connect(self, key: tuple[str, int], deadline: float | None) -> Connection:
        host, port = key
        last: OSError | None = None
        limit = self.connect_timeout
        if deadline is not None:
            limit = (
                min(limit, deadline - self.loop.time()) if limit else deadline - self.loop.time()
            )
        try:
            async with asyncio.timeout(limit):
                for family, _type, proto, _, address in await self._addresses(host, port):
                    conn = Connection(self, key)
                    try:
                        await self.loop.create_connection(
                            lambda conn=conn: conn,  # type: ignore[misc]
                            address[0],
                            address[1],
                            family=family,
                            proto=proto,
                        )
                    except OSError as exc:
                        last = exc
                        continue
                    self._all.add(conn)
                    return conn
        except TimeoutError as exc:
            raise HttpError(
                "timeout",
                f"ConnectionTimeoutError: Connection timeout to host http://{host}:{port}",
            ) from exc
        why = f"[{last.strerror or last}]" if last is not None else "[no address]"
        message = f"ClientConnectorError: Cannot connect to host {host}:{port} ssl:default {why}"
        raise HttpError("connect", message) from last

    def close(self) -> None:
        """Close every connection, idle or not."""
        for conn in list(self._all):
            conn._abort()
        self._all.clear()
        self._idle.clear()
        self._n_idle = 0
