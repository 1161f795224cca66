"""HTTP for the crawl: one aiohttp session, one request at a time, bodies streamed.

:class:`Fetcher` makes exactly one HTTP exchange per :meth:`Fetcher.fetch` (plus retries):
redirects are *not* followed here (``allow_redirects=False``), because the engine checks every
hop against scope, robots and the seen set. The body is never held whole: after the headers the
caller's ``on_headers`` hook looks at the response and returns a chunk consumer (or None to
leave the body unread), and each decompressed chunk goes to it as it arrives.

The body is pull-based: a consumer may return an awaitable (a coroutine), and the next chunk is
read only once it has been awaited. So a page task can ``await`` the crawl state once per chunk
(``offer_many`` of that chunk's links) and the wire waits for it: backpressure, no chunk queue.
An awaited consumer rather than an async iterator of chunks, because the retry loop, the body
cap, the timeouts and the release of the connection stay in one place (here): an iterator would
hand the open response to the caller across its own awaits, and every caller would have to
restart a retried body itself. A plain (sync) consumer such as ``list.append`` still works.

Failures become a short error kind (see the common contract): ``dns``, ``connect``,
``timeout``, ``disconnected``, ``protocol``, ``decode``, ``http_<status>``, ``too_large``,
``proxy`` (the proxy could not be reached or refused the tunnel: never a silent direct
connection), ``archive`` (the WARC archive raised).
Connection errors, timeouts, resets, 429 and 5xx are retried with exponential backoff and
jitter, honouring ``Retry-After`` up to ``max_retry_after``, at most ``retries`` times.

What the config adds to every request is decided here, per request, so per redirect hop:
the extra ``headers``; the cookie jar (aiohttp's, RFC 6265 matching, loaded from ``cookies``,
saved to ``save_cookies`` at :meth:`Fetcher.close`); Basic ``Authorization`` only for the
origins it was given for (:mod:`crawler.auth`); the proxy (:mod:`crawler.proxy`). Two taps:
``observer(response)`` once per fetch, and ``archive`` (:mod:`crawler.warc`), which gets every
exchange with the body bytes as received (the session then reads raw and
:mod:`crawler.fetch_decode` decodes for the consumer).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import socket
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any

from crawler import fetch_tls  # noqa: F401  (first: aiohttp without its TLS contexts)

# isort: split
import aiohttp
from multidict import CIMultiDict
from yarl import URL

from crawler.auth import AuthMap, redact_userinfo
from crawler.config import CrawlConfig, header_problem
from crawler.fetch_archive import (
    ArchiveFailed,
    archive_only,
    begin_record,
    end_record,
    read_decoded,
)
from crawler.fetch_decode import DecodeError, accept_encoding
from crawler.fetch_errors import OptionError
from crawler.proxy import Proxy, ProxyChooser

if TYPE_CHECKING:
    from crawler.cookies import Cookie
    from crawler.warc import WarcArchive

__all__ = [
    "HTML_TYPES",
    "BoundedPoolConnector",
    "Fetcher",
    "Observer",
    "OptionError",
    "Response",
    "check_options",
    "classify_error",
    "idle_cap",
    "location_header",
    "make_session",
    "parse_headers",
    "parse_retry_after",
]

log = logging.getLogger("crawler")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
# Seconds the connection pool keeps an idle keep-alive connection.
KEEPALIVE_TIMEOUT = 30.0
# Seconds a resolved host name stays cached.
DNS_CACHE_TTL = 300
# Idle keep-alive connections kept overall: IDLE_PER_REQUEST x concurrency, at least IDLE_MIN.
IDLE_PER_REQUEST = 2
IDLE_MIN = 16
# Content-Type value -> (media type, charset) as aiohttp parses it, at most this many values.
_MEDIA_TYPES: dict[str, tuple[str, str | None]] = {}
_MEDIA_TYPES_MAX = 256
# Kinds worth another try: the next attempt may well succeed.
RETRY_KINDS = frozenset({"connect", "timeout", "disconnected", "proxy"})


#: A body chunk consumer: returns None, or an awaitable that is awaited before the next read.
Consumer = Callable[[bytes], "Awaitable[object] | None"]
#: Told the final Response of every fetch (after its retries): the metrics' hook.
Observer = Callable[["Response"], None]


@dataclass(slots=True)
class Response:
    """What one fetch produced (after retries). ``error`` is None on success."""

    url: str
    status: int | None = None
    content_type: str | None = None  # media type, lower-case, no parameters
    charset: str | None = None
    location: str | None = None
    retry_after: str | None = None
    bytes: int = 0
    truncated: bool = False
    error: str | None = None
    error_detail: str | None = None
    retries: int = 0
    elapsed_ms: float = 0.0

    @property
    def is_html(self) -> bool:
        return self.content_type in HTML_TYPES

    def mark_too_large(self, cap: int) -> None:
        """The body cap stopped the read."""
        self.truncated = True
        self.error = "too_large"
        self.error_detail = f"body over {cap} bytes (decompressed); read stopped"


class _RetryStatus(Exception):
    def __init__(self, wait: float | None) -> None:
        self.wait = wait


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` value; None when it is unusable (the caller backs off).

    RFC 9110: delay-seconds (ASCII digits only: ``str.isdigit`` also accepts ``²`` and other
    scripts' digits) or an HTTP-date with its zone. Anything else, however malformed, is
    None, never an exception: a bad header must not turn a retryable 503 into a final error.
    """
    if not value:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():
        return float(value)  # any length: float() gives inf, which max_retry_after caps
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    except (TypeError, ValueError, IndexError, OverflowError, OSError):
        return None


def location_header(value: str | None) -> str | None:
    """A Location header as a URL string, whatever its bytes.

    aiohttp decodes header bytes as UTF-8 with ``surrogateescape``: a byte that is not UTF-8
    (``/caf\xe9`` from a latin-1 server) arrives as a lone surrogate, which no URL parser
    takes, so the redirect would be lost. Such bytes become percent-escapes of themselves, so
    the server gets back the bytes it sent; valid UTF-8 around them stays text (the URL parser
    percent-encodes it as UTF-8, which is again the bytes sent).
    """
    if value is None or value.isascii():
        return value
    return "".join(f"%{ord(c) - 0xDC00:02X}" if "\udc80" <= c <= "\udcff" else c for c in value)


def classify_error(exc: BaseException) -> tuple[str, str]:
    """(kind, human message) for an exception raised while fetching."""
    try:
        detail = f"{type(exc).__name__}: {exc}".strip()
    except Exception:  # a half-built exception's __str__ may itself fail
        detail = type(exc).__name__
    if isinstance(exc, DecodeError):
        return "decode", detail
    if isinstance(exc, ArchiveFailed):
        return "archive", str(exc)
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "dns", detail
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, socket.gaierror):
            return "dns", detail
        return "connect", detail
    if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError, TimeoutError)):
        return "timeout", detail or "timeout"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "disconnected", detail
    if isinstance(exc, aiohttp.ClientPayloadError):
        text = str(exc).lower()
        cause = exc.__cause__
        if (
            "decode" in text
            or "decompress" in text
            or (cause is not None and "decompress" in str(cause).lower())
        ):
            return "decode", detail
        # A reset (RST) mid-body is a disconnect; a clean close before Content-Length or the
        # last chunk is a framing fault ("protocol").
        if "reset" in text or isinstance(
            cause, (ConnectionResetError, aiohttp.ClientConnectionResetError)
        ):
            return "disconnected", detail
        return "protocol", detail
    if isinstance(exc, aiohttp.ClientResponseError):
        return "protocol", detail
    if isinstance(exc, (aiohttp.ClientOSError, ConnectionError, OSError)):
        return "disconnected", detail
    if isinstance(exc, aiohttp.ClientConnectionError):
        return "connect", detail
    if isinstance(exc, (aiohttp.InvalidURL, ValueError, UnicodeError, aiohttp.ClientError)):
        return "protocol", detail
    return "protocol", detail


def idle_cap(config: CrawlConfig) -> int:
    """How many idle keep-alive connections the crawl's pool keeps, all origins together."""
    return max(IDLE_MIN, IDLE_PER_REQUEST * max(1, config.concurrency))


class BoundedPoolConnector(aiohttp.TCPConnector):
    """A TCPConnector that keeps at most ``max_idle`` idle keep-alive connections overall.

    aiohttp keeps every idle connection for ``keepalive_timeout`` per (host, port, ssl) key with
    no cap (``limit`` counts only connections in use), so a wide crawl held one open socket per
    origin met in the last 30 s: 3,500 fds after 4,000 origins, EMFILE at ``ulimit -n 1024``.
    Here, each time a connection goes back to the pool and the pool holds more than
    ``max_idle``, idle connections are closed, those of the least recently used origin (pool
    key) first, its oldest first. The origins being crawled right now are the recently used
    ones, so their keep-alive reuse is unchanged.

    aiohttp has no public knob for this: the trim reads the private pool (``_conns``: key ->
    deque of ``(protocol, last_used)``) and hooks ``_release`` (its first argument is the key).
    Should an aiohttp release change that layout, :attr:`idle_cap_active` turns False and the
    pool behaves as aiohttp's own (uncapped), never an error; tests/test_fetch_pool.py fails
    if that happens on the pinned version.
    """

    def __init__(self, *, max_idle: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_idle = max(0, max_idle)
        self.idle_cap_active = isinstance(getattr(self, "_conns", None), dict)
        # Pool keys, least recently released first. May hold keys the pool has since dropped
        # (taken by a request, expired): skipped when met, pruned when it grows past bounds.
        self._lru: OrderedDict[Any, None] = OrderedDict()

    def _release(self, *args: Any, **kwargs: Any) -> None:
        super()._release(*args, **kwargs)
        if self.idle_cap_active:
            try:
                self._trim_idle(args[0] if args else kwargs.get("key"))
            except Exception:  # a changed private layout: keep aiohttp's behaviour, uncapped
                self.idle_cap_active = False

    @property
    def idle_connections(self) -> int:
        """Idle keep-alive connections in the pool now (0 if the layout is not understood)."""
        conns = getattr(self, "_conns", None)
        return sum(map(len, conns.values())) if isinstance(conns, dict) else 0

    def _trim_idle(self, key: Any) -> None:
        """Mark ``key`` most recently used; close idle connections beyond ``max_idle``.

        O(1) per connection closed, plus a sum over the idle keys (at most ``max_idle`` + 1).
        """
        conns = self._conns
        lru = self._lru
        if key in conns:
            lru[key] = None
            lru.move_to_end(key)
        if len(lru) > 2 * self.max_idle + 64:
            self._lru = lru = OrderedDict((k, None) for k in lru if k in conns)
        excess = sum(map(len, conns.values())) - self.max_idle
        while excess > 0:
            if not lru:  # keys we did not see released (the pool was rebuilt): oldest first
                lru.update(dict.fromkeys(conns))
                if not lru:
                    break
            oldest = next(iter(lru))
            idle = conns.get(oldest)
            if not idle:
                del lru[oldest]
                if idle is not None:
                    del conns[oldest]
                continue
            proto, used = idle[0]  # unpack before changing anything
            if not isinstance(used, (int, float)):
                raise TypeError(f"unknown pool entry {idle[0]!r}")
            transport = proto.transport
            idle.popleft()
            proto.close()
            if oldest.is_ssl and not getattr(self, "_cleanup_closed_disabled", True):
                self._cleanup_closed_transports.append(transport)
            excess -= 1
            if not idle:
                del conns[oldest]
                del lru[oldest]


def parse_headers(headers: tuple[str, ...] | list[str]) -> list[tuple[str, str]]:
    """("Name", "value") pairs of ``--header`` values; OptionError naming the bad one."""
    out: list[tuple[str, str]] = []
    for header in headers:
        reason = header_problem(header)
        if reason:
            raise OptionError("--header", reason)
        name, _, value = header.partition(":")
        out.append((name, value.strip(" \t")))
    return out


def session_headers(config: CrawlConfig) -> CIMultiDict[str]:
    """The crawl's default request headers: ours, then the user's (a user's name replaces ours)."""
    headers: CIMultiDict[str] = CIMultiDict({"User-Agent": config.user_agent, "Accept": ACCEPT})
    replaced: set[str] = set()
    for name, value in parse_headers(config.headers):
        key = name.lower()
        if key not in replaced:
            headers.popall(name, None)
            replaced.add(key)
        headers.add(name, value)
    return headers


def new_cookie_jar() -> aiohttp.CookieJar:
    """The crawl's cookie jar: RFC 6265 matching, as a browser does it.

    ``unsafe=True``: aiohttp's jar otherwise drops every cookie set by a host that is an IP
    address (``http://127.0.0.1:8080/``, an intranet box), which no browser does: a site on
    an address is a site. That is all ``unsafe`` changes (aiohttp: an IP host gets its own
    cookies back, exact host only, never "subdomains" of an address).
    ``quote_cookie=False``: send a value as the server set it. aiohttp's default re-quotes any
    value outside RFC 2109's token characters, so ``s=abc==`` (base64, the usual session id)
    went back as ``s="abc=="``, which a server that compares the bytes does not recognise.
    """
    return aiohttp.CookieJar(unsafe=True, quote_cookie=False)


def make_session(
    config: CrawlConfig, *, cookies: list[Cookie] | None = None
) -> aiohttp.ClientSession:
    """The crawl's session: pooled keep-alive connections, global and per-host limits.

    The idle connections kept are capped (:func:`idle_cap`, least recently used closed first)
    so that the open sockets stay flat however many origins a crawl meets. The cookie jar
    starts with ``cookies`` (default: those of ``config.cookies``, loaded now).
    """
    if cookies is None and config.cookies:
        cookies = _cookies().load_cookies(config.cookies)
    headers = session_headers(config)
    connector = BoundedPoolConnector(
        max_idle=idle_cap(config),
        limit=max(1, config.concurrency),
        limit_per_host=max(1, config.per_host),
        ttl_dns_cache=DNS_CACHE_TTL,
        keepalive_timeout=KEEPALIVE_TIMEOUT,
    )
    timeout = aiohttp.ClientTimeout(
        total=config.timeout or None,
        sock_connect=config.connect_timeout or None,
        sock_read=config.read_timeout or None,
    )
    jar = new_cookie_jar()
    if cookies:
        _cookies().fill_jar(jar, cookies)
    session = aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers=headers,
        cookie_jar=jar,
        auto_decompress=True,
        trust_env=False,  # proxies are ours (crawler.proxy); no netrc either
        raise_for_status=False,
    )
    # aiohttp silently resends a GET once when the connection drops before the response
    # (ServerDisconnectedError / ClientOSError), on top of our own retries: a server that
    # resets got 2 x (1 + retries) requests. Our retry loop already covers that case (with
    # backoff), so turn the hidden one off and let ``retries`` mean what it says.
    if hasattr(session, "_retry_connection"):
        session._retry_connection = False
    return session


def _cookies() -> Any:
    """crawler.cookies, imported by the crawls that load or save a cookies file only."""
    import crawler.cookies  # noqa: PLC0415  (start-up time)

    return crawler.cookies


def _initial_cookies(config: CrawlConfig) -> list[Cookie] | None:
    """The cookies the jar starts with: ``config.cookies``, read now.

    The same file for ``cookies`` and ``save_cookies`` (the jar carried from run to run)
    may not exist yet: the first run starts with an empty jar.
    """
    path = config.cookies
    if not path:
        return None
    if path == config.save_cookies and not os.path.lexists(path):
        return []
    result: list[Cookie] = _cookies().load_cookies(path)
    return result


def check_options(config: CrawlConfig) -> None:
    """OptionError now for a fetch option that cannot work (the CLI's exit 2, before crawling).

    The headers, the cookies file (read and parsed), the directory of ``save_cookies``, the
    credentials (``auth_env`` must be set), ``origin_auth``'s origins, the proxy (``--proxy``
    or the environment's). Messages name the option and the reason, never a secret.
    """
    parse_headers(config.headers)
    _initial_cookies(config)
    if config.save_cookies:
        _cookies().check_save_path(config.save_cookies)
    AuthMap(config.seeds, config.auth, config.auth_env, config.origin_auth)
    ProxyChooser(config.proxy)


class Fetcher:
    """Streaming GETs with retries over one shared session.

    Args:
        config: timeouts, retries, backoff, body cap, the limits of the pool, and what goes
            with every request (headers, cookies, auth, proxy).
        session: an existing session to use (not closed by :meth:`close`); made if None.
            Its headers and cookie jar are its own; auth, proxy and the taps still apply.
        observer: called with the final Response of every :meth:`fetch` (the metrics).
        archive: gets every exchange as it happens (a WARC writer, :mod:`crawler.warc`).

    Raises OptionError (naming the option) if the config's headers, cookies file,
    credentials or proxy cannot be used.
    """

    def __init__(
        self,
        config: CrawlConfig,
        session: aiohttp.ClientSession | None = None,
        *,
        observer: Observer | None = None,
        archive: WarcArchive | None = None,
    ) -> None:
        self.config = config
        self._own = session is None
        self._session = session
        self._rng = random.Random()
        self.observer = observer
        self.archive = archive
        headers = parse_headers(config.headers)
        # a user's Accept-Encoding is sent as given, also with an archive
        self._user_accept_encoding = any(k.lower() == "accept-encoding" for k, _ in headers)
        self._cookies = _initial_cookies(config)
        if config.save_cookies:
            _cookies().check_save_path(config.save_cookies)
        self._auth = AuthMap(config.seeds, config.auth, config.auth_env, config.origin_auth)
        self._proxies = ProxyChooser(config.proxy)
        # per request, only what applies (both are fixed for the crawl)
        self._auth_on = bool(self._auth)
        self._proxies_on = bool(self._proxies)
        self._observer_failed = False
        #: Why ``save_cookies`` could not be written at :meth:`close` (None: it was, or none).
        self.cookies_error: OptionError | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = make_session(self.config, cookies=self._cookies)
        return self._session

    async def close(self) -> None:
        """Save the cookies (``save_cookies``) and close the session if it is ours.

        A jar that cannot be written (its directory went away) is logged and kept in
        :attr:`cookies_error`; the close goes on.
        """
        session, self._session = self._session, None
        if session is None:
            return
        try:
            path = self.config.save_cookies
            jar = session.cookie_jar
            if path and isinstance(jar, aiohttp.CookieJar):
                try:
                    count = _cookies().save_cookies(jar, path)
                except OptionError as exc:  # the crawl is done: say so, do not fail the close
                    self.cookies_error = exc
                    log.error("cannot save the cookies: %s", exc)
                else:
                    log.info("saved %d cookie(s) to %s", count, path)
        finally:
            if self._own:
                await session.close()

    def backoff(self, attempt: int) -> float:
        """Exponential backoff with full jitter in [0.5, 1.5) of the nominal wait."""
        base = self.config.backoff * (2.0**attempt)
        return base * (0.5 + self._rng.random())

    async def fetch(
        self,
        url: str,
        on_headers: Callable[[Response], Consumer | None] | None = None,
        *,
        max_bytes: int | None = None,
        retries: int | None = None,
    ) -> Response:
        """GET ``url`` once (redirects not followed), with retries; never raises for HTTP faults.

        ``on_headers(response)`` is called when a final response's headers are in (a response
        that will not be retried); it returns a consumer for the body chunks, or None to leave
        the body unread. The consumer may return an awaitable: it is awaited before the next
        chunk is read (pull-based). ``on_headers`` may be called again for a later attempt if
        the body fails midway and the fetch is retried (the caller starts the body over).
        ``max_bytes`` caps the decompressed body (default: the config's ``max_body_bytes``;
        0 = no cap): reading stops there, the response is marked ``truncated`` with error
        ``too_large``.
        """
        cfg = self.config
        cap = cfg.max_body_bytes if max_bytes is None else max_bytes
        tries = cfg.retries if retries is None else retries
        session = self._session if self._session is not None else self.session
        start = time.monotonic()
        try:
            target, proxy, extra = self._prepare(url)
        except Exception as exc:  # a URL yarl cannot take: no request at all
            res = Response(url)
            res.error, res.error_detail = classify_error(exc)
            return self._finish(res, start)
        attempt = 0
        while True:
            res = Response(url, retries=attempt)
            wait: float | None = None
            try:
                await self._exchange(
                    session, target, res, on_headers, cap, attempt < tries, proxy, extra
                )
            except _RetryStatus as retry:
                wait = retry.wait
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every fault of the wire becomes a kind
                kind, detail = classify_error(exc)
                if proxy is not None:
                    kind, detail = _proxy_kind(exc, kind, detail, proxy)
                res.error, res.error_detail = kind, detail
                if kind not in RETRY_KINDS or attempt >= tries:
                    break
            else:
                break
            if wait is None:
                wait = self.backoff(attempt)
            await asyncio.sleep(wait)
            attempt += 1
        return self._finish(res, start)

    def _prepare(self, url: str) -> tuple[URL, Proxy | None, dict[str, str] | None]:
        """The URL to send, its proxy and its own headers (credentials for its origin only)."""
        target = URL(url, encoded=True)
        # (userinfo needs an "@": the usual URL skips the two lookups)
        if "@" in url and (target.raw_user is not None or target.raw_password is not None):
            target = target.with_user(None)  # never sent: credentials are --auth's
        proxy = self._proxies.for_url(target) if self._proxies_on else None
        extra: dict[str, str] | None = None
        if self._auth_on:
            authorization = self._auth.header_for(target)
            if authorization is not None:
                extra = {"Authorization": authorization}
        if proxy is not None and proxy.authorization is not None and target.scheme == "http":
            # A plain-http request goes TO the proxy: its credentials ride on it (aiohttp
            # puts ``proxy_headers`` only on a CONNECT, the https case, below).
            extra = dict(extra or {})
            extra["Proxy-Authorization"] = proxy.authorization
        if self.archive is not None and not self._user_accept_encoding:
            extra = dict(extra or {})
            extra["Accept-Encoding"] = accept_encoding()  # what fetch_decode can decode
        return target, proxy, extra

    def _finish(self, res: Response, start: float) -> Response:
        res.elapsed_ms = (time.monotonic() - start) * 1000.0
        if res.error_detail is not None:
            res.error_detail = self._auth.redact(res.error_detail)
        observer = self.observer
        if observer is not None:
            try:
                observer(res)
            except Exception:  # the metrics must never fail a fetch
                if not self._observer_failed:
                    self._observer_failed = True
                    log.exception("the fetch observer raised (reported once)")
        return res

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        target: URL,
        res: Response,
        on_headers: Callable[[Response], Consumer | None] | None,
        cap: int,
        may_retry: bool,
        proxy: Proxy | None,
        extra: dict[str, str] | None,
    ) -> None:
        archive = self.archive
        kwargs: dict[str, Any] = {}
        if extra is not None:
            kwargs["headers"] = extra
        if proxy is not None:
            kwargs["proxy"] = proxy.url
            if proxy.authorization is not None and target.scheme == "https":
                kwargs["proxy_headers"] = {"Proxy-Authorization": proxy.authorization}
        if archive is not None:
            kwargs["auto_decompress"] = False
        # encoded=True: the URL is already WHATWG-serialised; send it byte for byte as the
        # seen set knows it (yarl would re-quote "%zz" as "%25zz").
        async with session.get(target, allow_redirects=False, **kwargs) as r:
            status = r.status
            res.status = status
            headers = r.headers
            ctype = headers.get("Content-Type")
            if ctype is not None:
                parsed = _MEDIA_TYPES.get(ctype)
                if parsed is None:  # a site sends few distinct values: each parsed once
                    parsed = (r.content_type, r.charset)
                    if len(_MEDIA_TYPES) >= _MEDIA_TYPES_MAX:
                        _MEDIA_TYPES.clear()
                    _MEDIA_TYPES[ctype] = parsed
                res.content_type, res.charset = parsed
            res.location = location_header(headers.get("Location"))
            record = None
            if archive is not None:
                record = begin_record(archive, r, target, direct=proxy is None)
            if status == 429 or status >= 500:
                res.retry_after = headers.get("Retry-After")
                if may_retry:
                    wait = parse_retry_after(res.retry_after)
                    if wait is not None:
                        wait = min(wait, self.config.max_retry_after)
                    if record is not None:
                        await archive_only(r, record, cap)
                    raise _RetryStatus(wait)
            if status >= 400:
                res.error = f"http_{status}"
                res.error_detail = f"HTTP {status} {r.reason or ''}".strip()
            try:
                consumer = on_headers(res) if on_headers is not None else None
            except BaseException:
                if record is not None:
                    end_record(record, "unspecified")
                raise
            if record is not None:
                if consumer is None:
                    await archive_only(r, record, cap)
                else:
                    await read_decoded(r, res, record, consumer, cap)
                return
            if consumer is None:
                return
            encoding = headers.get("Content-Encoding")
            if encoding is not None and encoding.strip().lower() == "x-gzip":
                # gzip by another name (RFC 9110 8.4.1.3), which aiohttp does not decode
                await read_decoded(r, res, None, consumer, cap)
                return
            read = 0
            async for chunk in r.content.iter_any():
                n = len(chunk)
                if cap and read + n > cap:
                    chunk = chunk[: cap - read]
                    read = cap
                    if chunk:
                        pending = consumer(chunk)
                        if pending is not None:
                            await pending
                    res.mark_too_large(cap)
                    break
                read += n
                res.bytes = read
                pending = consumer(chunk)
                if pending is not None:
                    await pending
            res.bytes = read

    @staticmethod
    def describe(res: Response) -> dict[str, Any]:
        """A dict view of a Response (for logs and tests)."""
        return {k: getattr(res, k) for k in Response.__slots__}


def _proxy_kind(exc: BaseException, kind: str, detail: str, proxy: Proxy) -> tuple[str, str]:
    """Faults of reaching the proxy are kind ``proxy``, with the proxy named (no credentials).

    Through a proxy the only connection we open is to the proxy (the target's is the
    proxy's), so a connect-phase failure is the proxy's: refused, unresolvable, timed out,
    or a CONNECT tunnel the proxy refused.
    """
    if isinstance(exc, aiohttp.ClientSSLError):
        return kind, detail  # TLS is with the server, through the tunnel: not the proxy's
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return "proxy", f"proxy {proxy.shown} refused the tunnel: HTTP {exc.status} {exc.message}"
    if kind in ("connect", "dns") or isinstance(exc, aiohttp.ConnectionTimeoutError):
        cause = getattr(exc, "os_error", None) or exc
        why = redact_userinfo(f"{type(cause).__name__}: {cause}")
        return "proxy", f"proxy {proxy.shown} unreachable ({why})"
    return kind, detail
