"""aiohttp's path: one prepared request through the crawl's aiohttp session, read into the
same :class:`Response`, error kinds, timeouts and body cap as the plain path
(:mod:`crawler.http.plain`).

Everything the plain path does not take comes here (http and https alike): a proxy, a WARC
archive, a cookie jar in use, a caller's session. The request comes prepared
(:mod:`crawler.http.prepare`: the URL, its proxy, its own headers); the session
(:mod:`crawler.http.session`) adds the crawl's headers and cookies. With an archive the body
is read raw and the archive tap
(:mod:`crawler.http.archive`) gets the bytes as received, the consumer them decoded.
This module owns the session: made on first use (or the caller's), its jar saved to
``save_cookies`` at :meth:`AioTransport.close`.

Imported only when a request needs aiohttp (it imports aiohttp, yarl and multidict).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crawler.http import tls as fetch_tls  # noqa: F401  (first: aiohttp without its TLS contexts)

# isort: split
import aiohttp
from yarl import URL

from crawler.config import CrawlConfig
from crawler.http.archive import archive_only, begin_record, end_record, read_decoded
from crawler.http.auth import redact_userinfo
from crawler.http.errors import OptionError, RetryStatus, classify_error
from crawler.http.guard import AddressGuard
from crawler.http.options import cookies_module
from crawler.http.response import (
    MEDIA_TYPES,
    MEDIA_TYPES_MAX,
    Consumer,
    Response,
    location_header,
    parse_retry_after,
)
from crawler.http.session import make_session
from crawler.http.tls_context import TlsClient, tls_client, tls_custom

if TYPE_CHECKING:
    from crawler.http.cookies import Cookie
    from crawler.http.proxy import Proxy
    from crawler.http.response import WarcArchive

__all__ = ["AioRequest", "AioTransport"]

log = logging.getLogger("crawler")

#: What aiohttp's path sends: (the URL, its proxy or None, its own headers or None).
AioRequest = tuple[URL, "Proxy | None", "list[tuple[str, str]] | None"]


class AioTransport:
    """Prepared requests through one aiohttp session.

    Args:
        config: the session's settings, ``max_retry_after``.
        session: a caller's session (used, never closed here); made on first use if None.
        cookies: the cookies a session made here starts its jar with.
        archive: gets every exchange as it happens (a WARC writer, :mod:`crawler.output.warc`).
        tls: the crawl's TLS context: a session made here takes it when the config changes TLS
            (``--insecure``, ``--ca-cert``, ``--client-cert``), else aiohttp's own verified one.
    """

    def __init__(
        self,
        config: CrawlConfig,
        session: aiohttp.ClientSession | None,
        cookies: list[Cookie] | None,
        archive: WarcArchive | None,
        tls: TlsClient | None = None,
    ) -> None:
        self.config = config
        self.tls = tls
        self._own = session is None
        self._session = session
        self._cookies = cookies
        self.archive = archive
        #: Why ``save_cookies`` could not be written at :meth:`close` (None: it was, or none).
        self.cookies_error: OptionError | None = None
        # Through a proxy the proxy connects: the URL's host as written is all we can check
        # (direct connections are checked on their addresses by the session's connector).
        self._guard = AddressGuard.from_config(config)

    @property
    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session (made the first time it is asked for)."""
        if self._session is None:
            context = None
            if tls_custom(self.config):
                tls = self.tls if self.tls is not None else tls_client(self.config)
                context = tls.context()  # once a crawl (a thread may be building it already)
            self._session = make_session(self.config, cookies=self._cookies, ssl_context=context)
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
                    count = cookies_module().save_cookies(jar, path)
                except OptionError as exc:  # the crawl is done: say so, do not fail the close
                    self.cookies_error = exc
                    log.error("cannot save the cookies: %s", exc)
                else:
                    log.info("saved %d cookie(s) to %s", count, path)
        finally:
            if self._own:
                await session.close()

    def take_cookies(self, values: list[str], url: str) -> None:
        """``Set-Cookie`` values a response to ``url`` brought on the plain path: into the jar."""
        jar = self.session.cookie_jar
        update = getattr(jar, "update_cookies_from_headers", None)
        response_url = URL(url, encoded=True)
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
    def classify(exc: BaseException, request: AioRequest) -> tuple[str, str]:
        """(kind, message) of a fault of this exchange; through a proxy, the proxy's own."""
        kind, detail = classify_error(exc)
        proxy = request[1]
        if proxy is not None:
            kind, detail = _proxy_kind(exc, kind, detail, proxy)
        return kind, detail

    def request_kwargs(self, request: AioRequest) -> dict[str, Any]:
        """What the session's request call takes besides the URL: the request's own headers,
        its proxy and the proxy's credentials (the address guard checks a literal host first:
        through a proxy the proxy connects). Also for requests the fetcher does not send itself
        (the checker's HEAD probes), so that they go the same way."""
        target, proxy, extra = request
        kwargs: dict[str, Any] = {}
        if extra is not None:
            kwargs["headers"] = extra
        if proxy is not None:
            if self._guard is not None:
                self._guard.check_literal(target.raw_host or "", target.port or 0)
            kwargs["proxy"] = proxy.url
            if proxy.authorization is not None and target.scheme == "https":
                kwargs["proxy_headers"] = {"Proxy-Authorization": proxy.authorization}
        return kwargs

    async def exchange(
        self,
        request: AioRequest,
        url: str,
        res: Response,
        on_headers: Callable[[Response], Consumer | None] | None,
        cap: int,
        may_retry: bool,
    ) -> None:
        """The exchange through the session (``url`` is the request's, as the crawl has it)."""
        target, proxy, extra = request
        session = self._session if self._session is not None else self.session
        archive = self.archive
        kwargs = self.request_kwargs(request)
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
                parsed = MEDIA_TYPES.get(ctype)
                if parsed is None:  # a site sends few distinct values: each parsed once
                    parsed = (r.content_type, r.charset)
                    if len(MEDIA_TYPES) >= MEDIA_TYPES_MAX:
                        MEDIA_TYPES.clear()
                    MEDIA_TYPES[ctype] = parsed
                res.content_type, res.charset = parsed
            res.location = location_header(headers.get("Location"))
            if "Link" in headers:
                res.link = ", ".join(headers.getall("Link"))
            if "X-Robots-Tag" in headers:
                res.x_robots_tag = ", ".join(headers.getall("X-Robots-Tag"))
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
                    raise RetryStatus(wait)
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
