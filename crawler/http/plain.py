"""The plain path: one prepared ``http://`` or ``https://`` GET through our keep-alive pool
(:mod:`crawler.http.pool`, :mod:`crawler.http.http1`), read into the same :class:`Response`,
error kinds, timeouts and body cap as aiohttp's path (:mod:`crawler.http.aio`;
tests/test_http1.py holds them to each other).

The request comes prepared (:mod:`crawler.http.prepare`: the host, the port and the request
head, credentials in it); the body is read raw and decoded by :mod:`crawler.http.decode`. A
response that sets a cookie is handed to ``on_cookies`` at once (the preparation step's: the
cookie goes to aiohttp's jar, and every later request through aiohttp, which sends it where
RFC 6265 says). Nothing of aiohttp, yarl or multidict is imported here.
"""

from __future__ import annotations

from collections.abc import Callable

from crawler.config import CrawlConfig
from crawler.http import options
from crawler.http.decode import decoder_for, deliver
from crawler.http.errors import RetryStatus, classify_error
from crawler.http.guard import AddressGuard
from crawler.http.http1 import Connection, content_type_of
from crawler.http.pool import Pool
from crawler.http.response import (
    MEDIA_TYPES,
    MEDIA_TYPES_MAX,
    Consumer,
    Response,
    location_header,
    parse_retry_after,
)
from crawler.http.tls_context import TlsClient, tls_client

__all__ = ["PlainRequest", "PlainTransport"]

#: What the plain path sends: (host, port, the request head, https or not).
PlainRequest = tuple[str, int, bytes, bool]

# The response headers the plain path reads (their first values), by position.
_PLAIN_HEADERS = {b"content-type": 0, b"location": 1, b"retry-after": 2, b"content-encoding": 3}


class PlainTransport:
    """One exchange of a prepared plain request at a time per call, over the crawl's pool.

    Args:
        config: the pool's limits and the timeouts (``timeout`` is the request's total).
        on_cookies: told the ``Set-Cookie`` values of a response, with its URL, before the
            response goes on (the caller stops sending requests this way).
        tls: the crawl's TLS context, for https origins (one made here if None).
    """

    def __init__(
        self,
        config: CrawlConfig,
        on_cookies: Callable[[list[str], str], None],
        tls: TlsClient | None = None,
    ) -> None:
        self.config = config
        self._on_cookies = on_cookies
        self.tls = tls if tls is not None else tls_client(config)
        #: The keep-alive pool (made with the first request: it needs the running loop).
        self.pool: Pool | None = None

    def _make_pool(self) -> Pool:
        cfg = self.config
        self.pool = Pool(
            limit=cfg.concurrency,
            per_host=cfg.per_host,
            max_idle=options.idle_cap(cfg),
            keepalive=options.KEEPALIVE_TIMEOUT,  # read now: benchmarks/wide_crawl.py sets it
            connect_timeout=cfg.connect_timeout,
            read_timeout=cfg.read_timeout,
            guard=AddressGuard.from_config(cfg),
            tls=self.tls,
        )
        return self.pool

    def close(self) -> None:
        """Close every connection of the pool."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.close()

    @staticmethod
    def classify(exc: BaseException, request: PlainRequest) -> tuple[str, str]:
        """(kind, message) of a fault of this exchange."""
        return classify_error(exc)

    async def exchange(
        self,
        request: PlainRequest,
        url: str,
        res: Response,
        on_headers: Callable[[Response], Consumer | None] | None,
        cap: int,
        may_retry: bool,
    ) -> None:
        """The exchange through :mod:`crawler.http.http1`: the same Response and kinds as
        aiohttp's path."""
        host, port, head, tls = request
        pool = self.pool if self.pool is not None else self._make_pool()
        total = self.config.timeout
        deadline = pool.loop.time() + total if total else None
        conn = await pool.exchange(host, port, head, deadline, tls)
        try:
            await self._read(conn, url, res, on_headers, cap, may_retry)
        finally:
            conn.release()

    async def _read(
        self,
        conn: Connection,
        url: str,
        res: Response,
        on_headers: Callable[[Response], Consumer | None] | None,
        cap: int,
        may_retry: bool,
    ) -> None:
        status = conn.status
        res.status = status
        first: list[str | None] = [None, None, None, None]  # as _PLAIN_HEADERS numbers them
        cookies: list[str] | None = None
        for name, raw in conn.headers:
            lower = name.lower()
            i = _PLAIN_HEADERS.get(lower)
            if i is not None:
                if first[i] is None:  # the first value counts, as aiohttp's headers.get
                    first[i] = raw.decode("utf-8", "surrogateescape")
            elif lower == b"link" or lower == b"x-robots-tag":
                value = raw.decode("utf-8", "surrogateescape")
                if lower == b"link":
                    res.link = value if res.link is None else f"{res.link}, {value}"
                else:
                    old = res.x_robots_tag
                    res.x_robots_tag = value if old is None else f"{old}, {value}"
            elif lower == b"set-cookie":
                if cookies is None:
                    cookies = []
                cookies.append(raw.decode("utf-8", "surrogateescape"))
        ctype, location, retry_after, encoding = first
        if ctype is not None:
            parsed = MEDIA_TYPES.get(ctype)
            if parsed is None:
                parsed = content_type_of(ctype)
                if len(MEDIA_TYPES) >= MEDIA_TYPES_MAX:
                    MEDIA_TYPES.clear()
                MEDIA_TYPES[ctype] = parsed
            res.content_type, res.charset = parsed
        res.location = location_header(location)
        if cookies is not None:
            self._on_cookies(cookies, url)
        if status == 429 or status >= 500:
            res.retry_after = retry_after
            if may_retry:
                wait = parse_retry_after(retry_after)
                if wait is not None:
                    wait = min(wait, self.config.max_retry_after)
                raise RetryStatus(wait)
        if status >= 400:
            res.error = f"http_{status}"
            reason = conn.reason.decode("utf-8", "surrogateescape")
            res.error_detail = f"HTTP {status} {reason}".strip()
        consumer = on_headers(res) if on_headers is not None else None
        if consumer is None:
            return
        await deliver(_BodyOf(conn), decoder_for(encoding), res, consumer, cap)


class _BodyOf:
    """The body bytes of the response on ``conn``, as they come (an async iterator, not an
    async generator: one of those a page costs the event loop's hooks a registration)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Connection) -> None:
        self._conn = conn

    def __aiter__(self) -> _BodyOf:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._conn.read()
        if not chunk:
            raise StopAsyncIteration
        return chunk
