"""Plain HTTP/1.1 GETs on asyncio: the crawl's common request, without aiohttp's cost a request.

Most of a crawl is GETs of ``http://`` or ``https://`` URLs over a few keep-alive connections
(TLS by the event loop, :mod:`crawler.http.tls_context`), with no proxy,
no cookie jar in use and no archive. aiohttp spends about 0.25 ms of CPU on each of those on
the benchmark machine (its request and response objects, tracing hooks, the connector's
bookkeeping, multidicts, a task per connect) and 0.2 s to import, more than the whole rest of
a page's work; through this module the same crawls cost 28-34% less CPU in all (benchmarks/
CRAWL.md, ``--crawlers ours-aiohttp``). The fetcher's request preparation
(:mod:`crawler.http.prepare`) chooses it per request and sends everything else through aiohttp:
proxies, a WARC archive, cookies (from the first ``Set-Cookie`` on), a caller's session.

This module is the wire: the request URL read into what goes on the wire
(:func:`split_url`), one keep-alive :class:`Connection` and the response read on it, and
the Content-Type reading aiohttp makes; the connections are kept by :mod:`crawler.http.pool`
and driven by :mod:`crawler.http.plain`.

The wire format is parsed by httptools (llhttp, the parser of Node.js and, vendored, of
aiohttp's own C parser), with aiohttp's leniencies and limits so that both paths accept and
refuse the same responses: a header line at most 8,190 bytes, at most 128 header fields,
whitespace after a value stripped, a NUL in a value refused; here also a response head still
not complete after 64 KB is cut off (a server that sends headers without end). Faults are
:class:`~crawler.http.errors.HttpError` with the fetcher's error kinds (``dns``, ``connect``,
``timeout``, ``disconnected``, ``protocol``) and aiohttp's wording where a test or a user reads
it.

A connection serves one exchange at a time. A request is sent once per call: a kept connection
that the server closed meanwhile is a ``disconnected`` fault, retried by the fetcher's own loop
(with backoff, counted in ``retries``), never resent here behind its back (aiohttp's hidden
resend is turned off on the other path for the same reason).
"""

from __future__ import annotations

import asyncio
import re
import ssl
from collections import deque
from typing import TYPE_CHECKING, Any

import httptools

from crawler.http.errors import NOT_HTTP, HttpError, tls_detail

if TYPE_CHECKING:
    from crawler.http.pool import Pool

__all__ = [
    "MAX_FIELD",
    "MAX_HEAD",
    "MAX_HEADERS",
    "Connection",
    "content_type_of",
    "split_url",
]

#: The most bytes of one header line (name and value), aiohttp's ``max_field_size``.
MAX_FIELD = 8190
#: The most header fields of one response, aiohttp's ``max_headers``.
MAX_HEADERS = 128
#: Bytes read for a response head (status line and fields) before it is given up on.
MAX_HEAD = 64 * 1024
#: Body bytes buffered before the socket is paused (the consumer is slower than the wire).
HIGH_WATER = 256 * 1024


# The common crawl URL in one match: a lower-case name or IPv4 host, an optional port, a path
# of printable ASCII without "#". Anything else takes the general reading below (the same
# answer: tests/test_http1.py holds the two equal).
_PLAIN_URL = re.compile(r"http(s?)://([a-z0-9.-]+)(?::([0-9]{1,5}))?(/[!\"$-~]*)\Z")


def split_url(url: str) -> tuple[bool, str, int, str, str] | None:
    """(tls, host, port, authority, request-target) of an ``http://`` or ``https://`` URL
    (``tls`` True for https), else None.

    The URL is WHATWG-serialised (the crawl's URLs are): lower-case scheme, no default port,
    a path. None for anything this module does not send: another scheme, userinfo, a byte
    outside printable ASCII (the request line and ``Host`` must be sent as they are).
    """
    m = _PLAIN_URL.match(url)
    if m is not None:
        s, host, port_text, target = m.groups()
        if port_text is None:
            return bool(s), host, 443 if s else 80, host, target
        port = int(port_text)
        if 0 < port < 65536:
            return bool(s), host, port, f"{host}:{port_text}", target
        return None
    return _split_url(url)


def _split_url(url: str) -> tuple[bool, str, int, str, str] | None:
    if url.startswith("http://"):
        tls, start, port = False, 7, 80
    elif url.startswith("https://"):
        tls, start, port = True, 8, 443
    else:
        return None
    if not url.isascii() or not url.isprintable() or " " in url:
        return None
    end = len(url)
    for sep in "/?#":
        i = url.find(sep, start)
        if 0 <= i < end:
            end = i
    authority = url[start:end]
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
    if rest:
        if not rest.startswith(":") or not rest[1:].isdigit():
            return None
        port = int(rest[1:])
        if not 0 < port < 65536:
            return None
    if not host:
        return None
    return tls, host, port, authority, target


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

    def __init__(self, pool: Pool, key: tuple[str, int, bool]) -> None:
        self._pool = pool
        self.key = key
        self.transport: asyncio.Transport | None = None
        #: the TLS context whose session store gets this connection's session once a response
        #: was read on it (a TLS 1.3 ticket comes after the handshake), then None
        self.resumable: Any = None
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
            if not self.reason and not self.headers:  # not even a status line: not HTTP
                self._fail(HttpError("protocol", NOT_HTTP))
            else:
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
        if isinstance(exc, ssl.SSLError):  # an alert after the handshake (a client certificate)
            self._exc = HttpError("tls", tls_detail(exc))
        elif not self.head_done:
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
        if self.resumable is not None and self.done and self.transport is not None:
            ssl_object = self.transport.get_extra_info("ssl_object")
            self.resumable.remember(
                f"{self.key[0]}:{self.key[1]}",
                ssl_object,
                resumed=bool(getattr(ssl_object, "session_reused", 0)),
            )
            self.resumable = None
        if self.done and self._keep and not self.closed:
            self._body.clear()  # a body read whole but not asked for (a redirect's, say)
            self._buffered = 0
            self._pool._put(self)
        else:
            self._abort()
