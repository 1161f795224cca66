"""Each request's preparation, in one step: which transport it takes, and all that transport
needs to send it.

:meth:`Preparer.prepare` consults, once per request (so per redirect hop), everything the
config adds to it: the extra ``headers``; the credentials (Basic ``Authorization``, credential
headers, ``--header-for``, ``--bearer-env``) only for the origins they are for
(:mod:`crawler.http.credentials`: a dict lookup by the request's origin); the proxy
(:mod:`crawler.http.proxy`); the cookie jar (a jar in use, a caller's session, a proxy or a
WARC archive send the request through aiohttp, :mod:`crawler.http.aio`; an ``http://`` or
``https://`` GET otherwise goes through our own keep-alive pool, :mod:`crawler.http.plain`).
Both transports take the crawl's one TLS context (:mod:`crawler.http.tls_context`), whose
building starts in a thread here when a seed is https. It returns the
transport and the request as that transport takes it: for the plain path the host, the port
and the whole request head (the shared one, or its origin's own when that origin gets
credentials); for aiohttp's the URL, its proxy and its own headers. The fetcher
(:mod:`crawler.http.client`) hands the one to the other, and nothing below calls back into the
fetcher.

The first ``Set-Cookie`` on the plain path ends it: the cookie goes to aiohttp's jar
(:meth:`Preparer.take_cookies`), and every later request is prepared for aiohttp. aiohttp,
yarl and multidict are imported only when a request needs them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from crawler.config import CrawlConfig
from crawler.http.credentials import Header, OriginHeaders, merge_headers
from crawler.http.errors import OptionError
from crawler.http.http1 import split_url
from crawler.http.options import (
    cookies_module,
    head_lines,
    header_list,
    initial_cookies,
    parse_headers,
    request_head_base,
)
from crawler.http.plain import PlainTransport
from crawler.http.proxy import ProxyChooser
from crawler.http.response import Consumer, Response
from crawler.http.tls_context import check_tls_options, start_for_seeds, tls_client, tls_custom

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL

    from crawler.http.aio import AioRequest, AioTransport
    from crawler.http.response import WarcArchive

__all__ = ["NO_PLAIN_HTTP", "Preparer", "Transport"]

#: Set (to anything but "" or "0") to send every request through aiohttp (A/B, a workaround).
NO_PLAIN_HTTP = os.environ.get("CRAWLER_NO_PLAIN_HTTP", "") not in ("", "0")
#: Accept-Encoding with an archive (--warc): the codings every WARC reader decodes (not br).
ARCHIVE_ACCEPT_ENCODING = "gzip, deflate"


class Transport(Protocol):
    """One exchange of a prepared request: the plain path's or aiohttp's."""

    async def exchange(
        self,
        request: Any,
        url: str,
        res: Response,
        on_headers: Callable[[Response], Consumer | None] | None,
        cap: int,
        may_retry: bool,
    ) -> None:
        """Fill ``res`` from the response; its body to the consumer ``on_headers`` returns.
        Raises on a fault of the wire, RetryStatus for a 429/5xx that may be tried again."""

    def classify(self, exc: BaseException, request: Any) -> tuple[str, str]:
        """(kind, message) of a fault ``exchange`` raised."""


class Preparer:
    """The crawl's requests prepared, each in one step, for one of two transports.

    Args:
        config: what goes with every request (headers, cookies, auth, proxy) and the
            transports' settings.
        session: a caller's aiohttp session (its headers and cookie jar are its own).
        archive: the WARC archive every exchange goes to (aiohttp's path), or None.
        plain: send http(s) GETs through :mod:`crawler.http.plain` when nothing of
            aiohttp's is needed for them (no caller's session, proxy, archive or cookie jar in
            use; ``CRAWLER_NO_PLAIN_HTTP`` turns it off).

    Raises OptionError (naming the option) if the config's headers, cookies file,
    credentials or proxy cannot be used.
    """

    def __init__(
        self,
        config: CrawlConfig,
        session: aiohttp.ClientSession | None,
        archive: WarcArchive | None,
        plain: bool,
    ) -> None:
        self.config = config
        self.archive = archive
        headers = parse_headers(config.headers)
        # a user's Accept-Encoding is sent as given, also with an archive
        self._user_accept_encoding = any(k.lower() == "accept-encoding" for k, _ in headers)
        self._cookies = initial_cookies(config)
        if config.save_cookies:
            cookies_module().check_save_path(config.save_cookies)
        #: The headers only some origins get (credentials), and their redaction.
        self.creds = OriginHeaders(config)
        self.auth = self.creds.auth
        self._proxies = ProxyChooser(config.proxy)
        # per request, only what applies (both are fixed for the crawl)
        self._auth_on = bool(self.creds)
        self._proxies_on = bool(self._proxies)
        #: Whether http(s) GETs go through the plain path now (until a cookie comes).
        self.plain_on = (
            plain
            and not NO_PLAIN_HTTP
            and session is None
            and archive is None
            and not self._proxies_on
            and not self._cookies
            and not config.save_cookies
        )
        self._head_base = request_head_base(self._user_accept_encoding, config)
        # The plain path's whole head per http origin that gets headers of its own: one dict
        # lookup a request, by (host, port) as the URL is split, no URL parsing.
        self._plain_heads: dict[tuple[bool, str, int], bytes] = {}
        if self._auth_on:
            common = header_list(config)
            for (scheme, host, port), pairs in self.creds.items():
                if scheme in ("http", "https"):
                    merged = merge_headers(common, list(pairs))
                    key = (scheme == "https", host, port)
                    self._plain_heads[key] = head_lines(merged, self._user_accept_encoding)
        if tls_custom(config) or config.client_key:
            check_tls_options(config)  # the files, now: never mid-crawl
        #: The crawl's TLS context (built in a thread from now on if a seed is https).
        self.tls = tls_client(config)
        start_for_seeds(config)
        self.plain = PlainTransport(config, self.take_cookies, self.tls)
        self._session = session
        self._aio: AioTransport | None = None
        #: Why ``save_cookies`` could not be written at :meth:`close` (None: it was, or none).
        self.cookies_error: OptionError | None = None
        if session is not None:  # its jar is saved at close, even if no request used it
            self._aio = self._make_aio()

    def _make_aio(self) -> AioTransport:
        from crawler.http.aio import AioTransport  # noqa: PLC0415  (start-up: aiohttp when used)

        self._aio = AioTransport(
            self.config, self._session, self._cookies, self.archive, tls=self.tls
        )
        return self._aio

    @property
    def aio(self) -> AioTransport:
        """aiohttp's path (made, and aiohttp imported, the first time it is asked for)."""
        return self._aio if self._aio is not None else self._make_aio()

    def prepare(self, url: str) -> tuple[Transport, Any]:
        """The transport for ``url`` and the request as it takes it (ValueError and the like
        for a URL that cannot be sent at all)."""
        if self.plain_on:
            parts = split_url(url)
            if parts is not None:
                tls, host, port, authority, target = parts
                head = b"".join(
                    (
                        b"GET ",
                        target.encode("ascii"),
                        b" HTTP/1.1\r\nHost: ",
                        authority.encode("ascii"),
                        b"\r\n",
                        self._plain_heads.get((tls, host.lower(), port), self._head_base)
                        if self._auth_on
                        else self._head_base,
                        b"\r\n",
                    )
                )
                return self.plain, (host, port, head, tls)
        request = self._aio_request(url)  # (a URL yarl cannot take: aiohttp not imported)
        return self.aio, request

    def session_request(self, url: str) -> tuple[URL, dict[str, Any]]:
        """The URL and the keyword arguments of a request sent on aiohttp's session outside
        :meth:`prepare` (the checker's probes): the same credentials for its origin only,
        the same proxy (``--proxy``, the environment's) as the crawl's own requests."""
        request = self._aio_request(url)
        return request[0], self.aio.request_kwargs(request)

    def _aio_request(self, url: str) -> AioRequest:
        """The URL to send, its proxy and its own headers (credentials for its origin only)."""
        target = _yarl_url(url)
        # (userinfo needs an "@": the usual URL skips the two lookups)
        if "@" in url and (target.raw_user is not None or target.raw_password is not None):
            target = target.with_user(None)  # never sent: credentials are --auth's
        proxy = self._proxies.for_url(target) if self._proxies_on else None
        extra: list[Header] | None = None
        if self._auth_on:
            pairs = self.creds.for_url(target)
            if pairs is not None:
                extra = list(pairs)
        if proxy is not None and proxy.authorization is not None and target.scheme == "http":
            # A plain-http request goes TO the proxy: its credentials ride on it (aiohttp
            # puts ``proxy_headers`` only on a CONNECT, the https case, in crawler.http.aio).
            extra = [*(extra or ()), ("Proxy-Authorization", proxy.authorization)]
        if self.archive is not None and not self._user_accept_encoding:
            if extra is None or not any(n.lower() == "accept-encoding" for n, _ in extra):
                # not br: every WARC reader decodes gzip and deflate, warcio's check crashes
                # on a br body (warcio #73; docs/archive.md)
                extra = [*(extra or ()), ("Accept-Encoding", ARCHIVE_ACCEPT_ENCODING)]
        return target, proxy, extra

    def take_cookies(self, values: list[str], url: str) -> None:
        """A server set cookies on the plain path: they go to aiohttp's jar, and from now on
        every request goes through aiohttp, which sends them where RFC 6265 says."""
        self.plain_on = False
        self.aio.take_cookies(values, url)

    async def close(self) -> None:
        """Close both transports (aiohttp's saves the cookies, ``save_cookies``)."""
        self.plain.close()
        aio, self._aio = self._aio, None
        if aio is not None:
            try:
                await aio.close()
            finally:
                if aio.cookies_error is not None:
                    self.cookies_error = aio.cookies_error


def _yarl_url(url: str) -> URL:
    """yarl's URL of a crawl URL as it is (already encoded): what aiohttp, the credentials
    and the cookie jar take. yarl is imported here, on first use: the plain path needs none."""
    from yarl import URL  # noqa: PLC0415  (start-up)

    return URL(url, encoded=True)
