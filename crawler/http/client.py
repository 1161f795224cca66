"""HTTP for the crawl: one request in, one :class:`~crawler.http.response.Response` out, its
body streamed to the caller, over two paths.

:class:`Fetcher` makes exactly one HTTP exchange per :meth:`Fetcher.fetch` (plus retries):
redirects are *not* followed here (``allow_redirects=False``), because the engine checks every
hop against scope, robots and the seen set. The way of one request goes down once:

    fetch -> prepare (:mod:`crawler.http.prepare`: headers, auth, proxy, cookies: which
    transport, and what it sends) -> one transport (:mod:`crawler.http.plain`, our keep-alive
    pool on asyncio with httptools' parser, or :mod:`crawler.http.aio`, one aiohttp session,
    imported only then; its body through the archive tap, :mod:`crawler.http.archive`) -> the
    caller's consumer

and this module keeps what is around it: the retry loop, the timing, the observer. Both paths
give the same Response, error kinds, timeouts and body cap (tests/test_http1.py holds them to
each other).

The body is never held whole: after the headers the caller's ``on_headers`` hook looks at the
response and returns a chunk consumer (or None to leave the body unread), and each
decompressed chunk goes to it as it arrives. The body is pull-based: a consumer may return an
awaitable (a coroutine), and the next chunk is read only once it has been awaited. So a page
task can ``await`` the crawl state once per chunk (``offer_many`` of that chunk's links) and
the wire waits for it: backpressure, no chunk queue. An awaited consumer rather than an async
iterator of chunks, because the retry loop, the body cap, the timeouts and the release of the
connection stay in one place (here and in the transports): an iterator would hand the open
response to the caller across its own awaits, and every caller would have to restart a
retried body itself. A plain (sync) consumer such as ``list.append`` still works.

Failures become a short error kind (:mod:`crawler.http.errors`). Connection errors, timeouts,
resets, 429 and 5xx are retried with exponential backoff and jitter, honouring
``Retry-After`` up to ``max_retry_after``, at most ``retries`` times.

Two taps: ``observer(response)`` once per fetch, and ``archive`` (:mod:`crawler.output.warc`),
which gets every exchange with the body bytes as received (aiohttp's path then reads raw and
:mod:`crawler.http.decode` decodes for the consumer).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crawler.config import CrawlConfig
from crawler.http.errors import RETRY_KINDS, OptionError, RetryStatus, classify_error
from crawler.http.prepare import Preparer
from crawler.http.response import Consumer, Observer, Response

if TYPE_CHECKING:
    import aiohttp
    from yarl import URL

    from crawler.http.response import WarcArchive

__all__ = ["Fetcher"]

log = logging.getLogger("crawler")


class Fetcher:
    """Streaming GETs with retries over one shared session.

    Args:
        config: timeouts, retries, backoff, body cap, the limits of the pool, and what goes
            with every request (headers, cookies, auth, proxy).
        session: an existing session to use (not closed by :meth:`close`); made if None.
            Its headers and cookie jar are its own; auth, proxy and the taps still apply.
        observer: called with the final Response of every :meth:`fetch` (the metrics).
        archive: gets every exchange as it happens (a WARC writer, :mod:`crawler.output.warc`).
        plain: send plain ``http://`` GETs through :mod:`crawler.http.plain` when nothing of
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
        self._rng = random.Random()
        self.observer = observer
        self.archive = archive
        self._prep = Preparer(config, session, archive, plain)
        self._observer_failed = False

    @property
    def session(self) -> aiohttp.ClientSession:
        """The aiohttp session (made, and aiohttp imported, the first time it is asked for)."""
        return self._prep.aio.session

    @property
    def cookies_error(self) -> OptionError | None:
        """Why ``save_cookies`` could not be written at :meth:`close` (None: it was, or none)."""
        return self._prep.cookies_error

    def session_request(self, url: str) -> tuple[URL, dict[str, Any]]:
        """The URL and keyword arguments for a request sent on :attr:`session` directly (the
        checker's probes), per hop: credentials for its origin only, and the crawl's proxy."""
        return self._prep.session_request(url)

    def redact(self, text: str) -> str:
        """``text`` without the crawl's credentials."""
        return self._prep.creds.redact(text)

    @property
    def plain_http(self) -> bool:
        """Whether plain ``http://`` GETs go through :mod:`crawler.http.plain` now."""
        return self._prep.plain_on

    async def close(self) -> None:
        """Save the cookies (``save_cookies``) and close the session if it is ours.

        A jar that cannot be written (its directory went away) is logged and kept in
        :attr:`cookies_error`; the close goes on.
        """
        await self._prep.close()

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
        prep = self._prep
        try:
            transport, request = prep.prepare(url)
        except Exception as exc:  # a URL yarl cannot take: no request at all
            res = Response(url)
            res.error, res.error_detail = classify_error(exc)
            return self._finish(res, start)
        attempt = 0
        while True:
            res = Response(url, retries=attempt)
            wait: float | None = None
            try:
                if transport is prep.plain and not prep.plain_on:  # a cookie came: aiohttp's jar
                    transport, request = prep.prepare(url)
                await transport.exchange(request, url, res, on_headers, cap, attempt < tries)
            except RetryStatus as retry:
                wait = retry.wait
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # every fault of the wire becomes a kind
                kind, detail = transport.classify(exc, request)
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

    def _finish(self, res: Response, start: float) -> Response:
        res.elapsed_ms = (time.monotonic() - start) * 1000.0
        if res.error_detail is not None:
            res.error_detail = self._prep.creds.redact(res.error_detail)
        observer = self.observer
        if observer is not None:
            try:
                observer(res)
            except Exception:  # the metrics must never fail a fetch
                if not self._observer_failed:
                    self._observer_failed = True
                    log.exception("the fetch observer raised (reported once)")
        return res

    @staticmethod
    def describe(res: Response) -> dict[str, Any]:
        """A dict view of a Response (for logs and tests)."""
        return {k: getattr(res, k) for k in Response.__slots__}
