"""HTTP for the crawl: one request at a time, bodies streamed, over two paths.

Plain ``http://`` GETs go through :mod:`crawler.http.http1` (our keep-alive pool on asyncio,
httptools' parser) while nothing of aiohttp's is needed for them; everything else (https, a
proxy, a WARC archive, a cookie jar in use, a caller's session) through one aiohttp session
(:mod:`crawler.http.session`, imported only then). Both give the same :class:`Response`,
error kinds, timeouts and body cap (tests/test_http1.py holds them to each other).

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
origins it was given for (:mod:`crawler.http.auth`); the proxy (:mod:`crawler.http.proxy`).
Two taps:
``observer(response)`` once per fetch, and ``archive`` (:mod:`crawler.output.warc`), which gets
every
exchange with the body bytes as received (the session then reads raw and
:mod:`crawler.http.decode` decodes for the consumer).
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
import random
import socket
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crawler.config import CrawlConfig, header_problem
from crawler.http import http1
from crawler.http.auth import AuthMap, redact_userinfo
from crawler.http.decode import DecodeError, accept_encoding, decoder_for, deliver
from crawler.http.errors import ArchiveFailed, OptionError
from crawler.http.proxy import Proxy, ProxyChooser

if TYPE_CHECKING:
    import aiohttp
    from multidict import CIMultiDict
    from yarl import URL

    from crawler.http.cookies import Cookie
    from crawler.http.session import BoundedPoolConnector, make_session
    from crawler.output.warc import WarcArchive

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

#: Set (to anything but "" or "0") to send every request through aiohttp (A/B, a workaround).
NO_PLAIN_HTTP = os.environ.get("CRAWLER_NO_PLAIN_HTTP", "") not in ("", "0")
_SESSION_NAMES = frozenset({"BoundedPoolConnector", "make_session", "new_cookie_jar"})


def __getattr__(name: str) -> Any:
    """aiohttp's side (crawler.http.session), imported when one of its names is asked for."""
    if name in _SESSION_NAMES:
        from crawler.http import session as fetch_session  # noqa: PLC0415  (start-up: aiohttp only when used)

        return getattr(fetch_session, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _aiohttp() -> Any:
    """aiohttp, imported (with its TLS contexts deferred) the first time a request needs it."""
    from crawler.http import tls as fetch_tls  # noqa: F401, PLC0415  (first: aiohttp without TLS contexts)

    return importlib.import_module("aiohttp")


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
# The response headers the plain path reads (their first values), by position.
_PLAIN_HEADERS = {b"content-type": 0, b"location": 1, b"retry-after": 2, b"content-encoding": 3}
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
    from email.utils import parsedate_to_datetime  # noqa: PLC0415  (an HTTP-date: rare)

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
    if isinstance(exc, http1.HttpError):
        return exc.kind, str(exc)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout", detail or "timeout"
    aiohttp = sys.modules.get("aiohttp")  # its faults exist only once it was imported
    if aiohttp is None:
        if isinstance(exc, (ConnectionError, OSError)):
            return "disconnected", detail
        return "protocol", detail
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "dns", detail
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, socket.gaierror):
            return "dns", detail
        return "connect", detail
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


def header_list(config: CrawlConfig) -> list[tuple[str, str]]:
    """The crawl's default request headers in order: ours, then the user's (a user's name
    replaces ours, case-insensitively; a name the user gives twice is sent twice)."""
    headers = [("User-Agent", config.user_agent), ("Accept", ACCEPT)]
    replaced: set[str] = set()
    for name, value in parse_headers(config.headers):
        key = name.lower()
        if key not in replaced:
            headers = [(n, v) for n, v in headers if n.lower() != key]
            replaced.add(key)
        headers.append((name, value))
    return headers


def session_headers(config: CrawlConfig) -> CIMultiDict[str]:
    """`header_list` as the aiohttp session takes it."""
    from multidict import CIMultiDict  # noqa: PLC0415  (start-up: aiohttp's path only)

    return CIMultiDict(header_list(config))


def _request_head_base(user_accept_encoding: bool, config: CrawlConfig) -> bytes:
    """The header lines every plain request sends (after ``Host``): the session's headers and,
    unless the user gave one, the Accept-Encoding of what :mod:`crawler.http.decode` decodes
    (aiohttp's own choice, less the codings it could not decode either)."""
    lines = [f"{name}: {value}\r\n" for name, value in header_list(config)]
    if not user_accept_encoding:
        lines.append(f"Accept-Encoding: {accept_encoding()}\r\n")
    return "".join(lines).encode("utf-8")


def _cookies() -> Any:
    """crawler.http.cookies, imported by the crawls that load or save a cookies file only."""
    import crawler.http.cookies  # noqa: PLC0415  (start-up time)

    return crawler.http.cookies


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
        archive: gets every exchange as it happens (a WARC writer, :mod:`crawler.output.warc`).
        plain: send plain ``http://`` GETs through :mod:`crawler.http.http1` when nothing of
            aiohttp's is needed for them (no caller's session, proxy, archive or cookie jar in
            use; ``CRAWLER_NO_PLAIN_HTTP`` turns it off); every other request, and every
            request once a server has set a cookie, goes through aiohttp.

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
        plain: bool = True,
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
        self._plain_on = (
            plain
            and not NO_PLAIN_HTTP
            and session is None
            and archive is None
            and not self._proxies_on
            and not self._cookies
            and not config.save_cookies
        )
        self._pool: http1.Pool | None = None
        self._head_base = _request_head_base(self._user_accept_encoding, config)
        self._observer_failed = False
        #: Why ``save_cookies`` could not be written at :meth:`close` (None: it was, or none).
        self.cookies_error: OptionError | None = None

    @property
    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session (made, and aiohttp imported, the first time it is asked for)."""
        if self._session is None:
            from crawler.http.session import make_session  # noqa: PLC0415  (start-up)

            self._session = make_session(self.config, cookies=self._cookies)
        return self._session

    @property
    def plain_http(self) -> bool:
        """Whether plain ``http://`` GETs go through :mod:`crawler.http.http1` now."""
        return self._plain_on

    async def close(self) -> None:
        """Save the cookies (``save_cookies``) and close the session if it is ours.

        A jar that cannot be written (its directory went away) is logged and kept in
        :attr:`cookies_error`; the close goes on.
        """
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()
        session, self._session = self._session, None
        if session is None:
            return
        try:
            path = self.config.save_cookies
            jar = session.cookie_jar
            if path and isinstance(jar, _aiohttp().CookieJar):
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
        start = time.monotonic()
        plain = http1.split_http_url(url) if self._plain_on else None
        proxy: Proxy | None = None
        try:
            if plain is None:
                target, proxy, extra = self._prepare(url)
            else:
                plain_extra = self._plain_extra(url)
        except Exception as exc:  # a URL yarl cannot take: no request at all
            res = Response(url)
            res.error, res.error_detail = classify_error(exc)
            return self._finish(res, start)
        attempt = 0
        while True:
            res = Response(url, retries=attempt)
            wait: float | None = None
            try:
                if plain is not None and not self._plain_on:  # a cookie came: aiohttp's jar
                    plain = None
                    target, proxy, extra = self._prepare(url)
                if plain is not None:
                    await self._exchange_plain(
                        plain, url, res, on_headers, cap, attempt < tries, plain_extra
                    )
                else:
                    session = self._session if self._session is not None else self.session
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
        target = _yarl_url(url)
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
        from crawler.http.archive import (  # noqa: PLC0415  (aiohttp's path only)
            archive_only,
            begin_record,
            end_record,
            read_decoded,
        )

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

    def _plain_extra(self, url: str) -> bytes:
        """The request's own header lines on the plain path: credentials for its origin."""
        if not self._auth_on:
            return b""
        authorization = self._auth.header_for(_yarl_url(url))
        if authorization is None:
            return b""
        return b"Authorization: " + authorization.encode("utf-8") + b"\r\n"

    def _plain_pool(self) -> http1.Pool:
        cfg = self.config
        self._pool = http1.Pool(
            limit=cfg.concurrency,
            per_host=cfg.per_host,
            max_idle=idle_cap(cfg),
            keepalive=KEEPALIVE_TIMEOUT,
            connect_timeout=cfg.connect_timeout,
            read_timeout=cfg.read_timeout,
        )
        return self._pool

    async def _exchange_plain(
        self,
        parts: tuple[str, int, str, str],
        url: str,
        res: Response,
        on_headers: Callable[[Response], Consumer | None] | None,
        cap: int,
        may_retry: bool,
        extra: bytes,
    ) -> None:
        """:meth:`_exchange` through :mod:`crawler.http.http1`: the same Response and kinds."""
        host, port, authority, target = parts
        pool = self._pool if self._pool is not None else self._plain_pool()
        head = b"".join(
            (
                b"GET ",
                target.encode("ascii"),
                b" HTTP/1.1\r\nHost: ",
                authority.encode("ascii"),
                b"\r\n",
                self._head_base,
                extra,
                b"\r\n",
            )
        )
        total = self.config.timeout
        deadline = pool.loop.time() + total if total else None
        conn = await pool.exchange(host, port, head, deadline)
        try:
            await self._read_plain(conn, url, res, on_headers, cap, may_retry)
        finally:
            conn.release()

    async def _read_plain(
        self,
        conn: http1.Connection,
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
            elif lower == b"set-cookie":
                if cookies is None:
                    cookies = []
                cookies.append(raw.decode("utf-8", "surrogateescape"))
        ctype, location, retry_after, encoding = first
        if ctype is not None:
            parsed = _MEDIA_TYPES.get(ctype)
            if parsed is None:
                parsed = http1.content_type_of(ctype)
                if len(_MEDIA_TYPES) >= _MEDIA_TYPES_MAX:
                    _MEDIA_TYPES.clear()
                _MEDIA_TYPES[ctype] = parsed
            res.content_type, res.charset = parsed
        res.location = location_header(location)
        if cookies is not None:
            self._take_cookies(cookies, url)
        if status == 429 or status >= 500:
            res.retry_after = retry_after
            if may_retry:
                wait = parse_retry_after(retry_after)
                if wait is not None:
                    wait = min(wait, self.config.max_retry_after)
                raise _RetryStatus(wait)
        if status >= 400:
            res.error = f"http_{status}"
            reason = conn.reason.decode("utf-8", "surrogateescape")
            res.error_detail = f"HTTP {status} {reason}".strip()
        consumer = on_headers(res) if on_headers is not None else None
        if consumer is None:
            return
        await deliver(_BodyOf(conn), decoder_for(encoding), res, consumer, cap)

    def _take_cookies(self, values: list[str], url: str) -> None:
        """A server set cookies: they go to aiohttp's jar, and from now on every request goes
        through aiohttp, which sends them where RFC 6265 says."""
        self._plain_on = False
        jar = self.session.cookie_jar
        update = getattr(jar, "update_cookies_from_headers", None)
        response_url = _yarl_url(url)
        if update is not None:
            update(values, response_url)
            return
        from http.cookies import CookieError, SimpleCookie  # noqa: PLC0415  (aiohttp < 3.12)

        cookies: SimpleCookie = SimpleCookie()
        for value in values:
            try:
                cookies.load(value)
            except CookieError:
                log.warning("cannot load a Set-Cookie header of %s", url)
        jar.update_cookies(cookies, response_url)

    @staticmethod
    def describe(res: Response) -> dict[str, Any]:
        """A dict view of a Response (for logs and tests)."""
        return {k: getattr(res, k) for k in Response.__slots__}


def _yarl_url(url: str) -> URL:
    """yarl's URL of a crawl URL as it is (already encoded): what aiohttp, the credentials
    and the cookie jar take. yarl is imported here, on first use: the plain path needs none."""
    from yarl import URL  # noqa: PLC0415  (start-up)

    return URL(url, encoded=True)


class _BodyOf:
    """The body bytes of the response on ``conn``, as they come (an async iterator, not an
    async generator: one of those a page costs the event loop's hooks a registration)."""

    __slots__ = ("_conn",)

    def __init__(self, conn: http1.Connection) -> None:
        self._conn = conn

    def __aiter__(self) -> _BodyOf:
        return self

    async def __anext__(self) -> bytes:
        chunk = await self._conn.read()
        if not chunk:
            raise StopAsyncIteration
        return chunk


def _proxy_kind(exc: BaseException, kind: str, detail: str, proxy: Proxy) -> tuple[str, str]:
    """Faults of reaching the proxy are kind ``proxy``, with the proxy named (no credentials).

    Through a proxy the only connection we open is to the proxy (the target's is the
    proxy's), so a connect-phase failure is the proxy's: refused, unresolvable, timed out,
    or a CONNECT tunnel the proxy refused.
    """
    aiohttp = _aiohttp()
    if isinstance(exc, aiohttp.ClientSSLError):
        return kind, detail  # TLS is with the server, through the tunnel: not the proxy's
    if isinstance(exc, aiohttp.ClientHttpProxyError):
        return "proxy", f"proxy {proxy.shown} refused the tunnel: HTTP {exc.status} {exc.message}"
    if kind in ("connect", "dns") or isinstance(exc, aiohttp.ConnectionTimeoutError):
        cause = getattr(exc, "os_error", None) or exc
        why = redact_userinfo(f"{type(cause).__name__}: {cause}")
        return "proxy", f"proxy {proxy.shown} unreachable ({why})"
    return kind, detail
