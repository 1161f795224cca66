"""Checking a URL without crawling it: HEAD first, GET when needed, redirects hop by hop.

Used for out-of-scope ("external") links, in-scope URLs the crawl did not fetch (past
``--max-depth`` or ``--max-pages``), and the second look at a link that failed in a way that
may pass (timeout, 403, 429, 5xx). Never crawls: no link of a probed page is followed; a GET
reads the body only when a fragment must be looked up, and then only for its ids.

Politeness is the crawl's: one aiohttp session made by ``crawler.http.session.make_session`` (the
same per-host connection limit, timeouts, User-Agent, headers), the crawl's credentials for the
origins they are for and its proxy (decided per hop: ``Fetcher.session_request``), at most
``per_host`` requests at once per origin and ``delay`` seconds between two of them (the
robots.txt Crawl-delay too, when the caller passes it), retries with the Fetcher's backoff for
connection errors, timeouts, 429 and 5xx, honouring ``Retry-After`` up to ``max_retry_after``.

A circuit breaker per origin: after timeouts of ``host_timeouts`` different URLs in a row on
one origin (a tarpit that accepts and never answers, a host that drops packets), the probes
of that origin still to come are not sent (one URL that hangs, retried and looked at again,
counts once: it never shuts its host out alone); their verdict is ``host_unresponsive`` (not
checked, a warning, never broken). So a page of 1,000 links to a tarpit costs a few
timeouts, not 1,000 times (retries included) ``--timeout``. A probe whose own request timed
out keeps its ``timeout``.

Bot walls (walls.py): a 4xx/5xx answer with a challenge header, or a 403/429/503 whose first
32 KB hold a known challenge page, is ``blocked``, not broken; so is a 429 still there after
the retries. On the second look, a 403 that is no wall by its markers gets one more GET with a
browser's headers (``browser_retry``): if that one passes, the site refuses the checker, not
the link, and the verdict is ``blocked`` too. Nothing else is ever sent with those headers.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crawler.check.model import HOST_TIMEOUTS
from crawler.check.walls import BLOCKED, BODY_BYTES, BODY_STATUSES, BROWSER_HEADERS, wall
from crawler.config import CrawlConfig
from crawler.extract import LinkExtractor
from crawler.http.client import Fetcher
from crawler.http.errors import RETRY_KINDS, classify_error
from crawler.http.response import HTML_TYPES, location_header, parse_retry_after
from crawler.urls.policy import UrlPolicy, join, origin_of

if TYPE_CHECKING:  # (aiohttp is loaded by the session that needs it: ~0.1 s of start-up)
    import aiohttp

__all__ = [
    "HOST_TIMEOUTS",
    "PERMANENT",
    "REDIRECTS",
    "UNRESPONSIVE",
    "Prober",
    "Verdict",
    "error_kind",
]

REDIRECTS = frozenset({301, 302, 303, 307, 308})
PERMANENT = frozenset({301, 308})
#: The verdict's kind of a probe not sent because its origin stopped answering.
UNRESPONSIVE = "host_unresponsive"


@dataclass(slots=True)
class Verdict:
    """What checking one URL (without its fragment) found.

    ``error`` is None when the URL works, else a broken kind (``http_404``, ``timeout`` ...).
    ``ids`` is the set of fragment targets of the final page when it was read (HTML), with
    ``ids_complete`` False when the page had more than the extractor keeps.
    """

    url: str
    status: int | None = None
    error: str | None = None
    detail: str = ""
    redirects: list[str] = field(default_factory=list)
    hop_statuses: list[int] = field(default_factory=list)
    final_url: str | None = None
    html: bool = False
    ids: frozenset[str] | None = None
    ids_complete: bool = True
    external: bool = False
    crawled: bool = False  # from the crawl's own PageResult
    failed_at: float = 0.0  # monotonic time of a failure worth a second look

    @property
    def permanent(self) -> bool:
        """The URL as linked answers with a permanent redirect (link the final URL instead)."""
        return bool(self.hop_statuses) and self.hop_statuses[0] in PERMANENT


def error_kind(kind: str | None, detail: str | None) -> str | None:
    """A fetch error kind (``crawler.http.client``/engine) as a checker kind, None if not broken.

    The checker's kinds are the issue's list (model.BROKEN_KINDS); the crawl's finer ones
    map onto them: a reset is a connection failure, an answer that is not HTTP (or malformed
    HTTP) is ``protocol``, a TLS failure is told apart by its exception. ``blocked_address``
    (the address rules refused the connection) is a warning: not checked. A body over the
    size cap, or a fault of our own (``extract``, ``internal``, ``sink``), is not the link's
    fault: not broken.
    """
    if kind is None or kind in ("too_large", "extract", "internal", "sink"):
        return None
    if kind in ("redirect_invalid", "redirect_bad_scheme"):
        return "invalid_url"
    if kind == "http_429":  # the crawl's retries did not lift it: a rate limit, not the link
        return BLOCKED
    if kind in ("disconnected", "protocol", "decode", "connect"):
        text = detail or ""
        if "SSL" in text or "Certificate" in text or "certificate" in text:
            return "tls"
        return "protocol" if kind == "protocol" else "connect"
    return kind


class Prober:
    """HEAD/GET checks over one session, per-origin politeness, retries.

    Args:
        config: the crawl's config (limits, timeouts, retries, delay, link set).
        policy: the crawl's UrlPolicy: canonicalises each redirect target.
        host_timeouts: timeouts in a row to one origin after which its remaining probes
            are not sent (``host_unresponsive``); 0 = always send.
    """

    def __init__(
        self,
        config: CrawlConfig,
        policy: UrlPolicy,
        *,
        host_timeouts: int = HOST_TIMEOUTS,
        browser_retry: bool = True,
    ) -> None:
        self.config = config
        self.policy = policy
        self.host_timeouts = host_timeouts
        self.browser_retry = browser_retry
        self._timeouts: dict[str, set[str]] = {}  # origin -> its URLs that timed out in a row
        #: origins whose probes are no longer sent (the breaker tripped), for the report
        self.unresponsive: set[str] = set()
        self.fetcher = Fetcher(config)  # its session, backoff and (for robots) fetch
        self._sem: dict[str, asyncio.Semaphore] = {}
        self._next: dict[str, float] = {}
        self._delay: dict[str, float] = {}
        self.requests: dict[str, int] = {"HEAD": 0, "GET": 0}

    async def close(self) -> None:
        await self.fetcher.close()

    def _note(self, origin: str, url: str, timed_out: bool) -> None:
        """A timeout of ``url`` on ``origin`` in a row (any other outcome there resets it)."""
        if not timed_out:
            self._timeouts.pop(origin, None)
            return
        urls = self._timeouts.setdefault(origin, set())
        urls.add(url)
        if self.host_timeouts and len(urls) >= self.host_timeouts:
            self.unresponsive.add(origin)

    def _skipped(self, origin: str) -> str:
        return (
            f"not checked: {self.host_timeouts} URLs of {origin} timed out in a row"
            " (--host-timeouts); its other links were not requested"
        )

    def set_delay(self, origin: str, delay: float) -> None:
        """A longer delay for one origin (robots.txt Crawl-delay)."""
        self._delay[origin] = delay

    @asynccontextmanager
    async def _slot(self, origin: str) -> AsyncIterator[None]:
        sem = self._sem.get(origin)
        if sem is None:
            sem = self._sem[origin] = asyncio.Semaphore(max(1, self.config.per_host))
        async with sem:
            delay = max(self.config.delay, self._delay.get(origin, 0.0))
            if delay > 0:
                loop = asyncio.get_running_loop()
                now = loop.time()
                due = self._next.get(origin, now)
                self._next[origin] = max(due, now) + delay
                if due > now:
                    await asyncio.sleep(due - now)
            yield

    async def probe(
        self,
        url: str,
        *,
        need_ids: bool = False,
        follow: Callable[[str], bool] | None = None,
        once: bool = False,
        excluded: Callable[[str], bool] | None = None,
    ) -> Verdict:
        """Check ``url``: follow its redirects; HEAD, or GET when ``need_ids`` (or HEAD failed).

        ``follow(target)`` False: a redirect to ``target`` is not followed (``--no-external``
        and a redirect off the site): the verdict ends there, not broken.
        ``excluded(target)`` True: ``--include``/``--exclude`` rule the hop out; it is not
        requested and the verdict is the warning ``excluded`` (every hop, not only the first).
        ``once``: the second look at a failure: one GET a hop, no retries (it is the retry),
        except that a 429/503 with a Retry-After is waited out (up to ``max_retry_after``)
        and asked once more, and that a plain 403 is asked once with a browser's headers.
        Never raises for a fault of the wire or the server: it is the verdict's ``error``.
        """
        cfg = self.config
        verdict = Verdict(url)
        current = url
        chain = {url}
        while True:
            status, location, kind, detail, read = await self._one(current, need_ids, once)
            verdict.status = status
            verdict.final_url = current
            if read is not None:
                verdict.html, verdict.ids, verdict.ids_complete = read
            if kind is not None:
                verdict.error, verdict.detail = kind, detail
                return verdict
            if status is None or status not in REDIRECTS or not location:
                return verdict
            verdict.hop_statuses.append(status)
            target_raw = join(current, location)
            target = None
            if target_raw is not None and target_raw.startswith(("http://", "https://")):
                target = self.policy.canonical(target_raw)
            if target is None:
                verdict.error = "invalid_url"
                verdict.detail = f"redirect to {location[:200]!r}, not an http(s) URL"
                return verdict
            if target in chain:
                verdict.redirects.append(target)
                verdict.error, verdict.detail = "redirect_loop", f"redirect loop back to {target}"
                return verdict
            if len(verdict.hop_statuses) > cfg.max_redirects:
                verdict.error = "too_many_redirects"
                verdict.detail = f"more than {cfg.max_redirects} redirects"
                return verdict
            verdict.redirects.append(target)
            chain.add(target)
            if excluded is not None and excluded(target):
                verdict.final_url = target
                verdict.error = "excluded"
                verdict.detail = "redirects to a URL --include/--exclude rule out: not requested"
                return verdict
            if follow is not None and not follow(target):
                verdict.final_url = target
                return verdict
            current = target

    async def _one(
        self, url: str, need_ids: bool, once: bool
    ) -> tuple[
        int | None, str | None, str | None, str, tuple[bool, frozenset[str] | None, bool] | None
    ]:
        """One hop: HEAD (then GET if it failed) or GET; (status, location, kind, detail, ids)."""
        if once:
            got = await self._retrying(url, "GET", need_ids, 0, wait_told=True)
            if got[2] == "http_403" and self.browser_retry:
                seen = await self._as_browser(url)
                if seen is not None and seen < 400:
                    detail = (
                        f"refused to the checker; a GET with a browser's headers got HTTP {seen}"
                    )
                    return got[0], got[1], BLOCKED, detail, got[4]
            return got
        retries = self.config.retries
        if not need_ids:
            status, location, kind, detail, _ = await self._retrying(url, "HEAD", False, retries)
            head_failed = kind is not None or (status is not None and status >= 400)
            if not head_failed:
                return status, location, None, "", None
            if kind in ("blocked_address", UNRESPONSIVE):  # nothing sent: a GET would not be
                return status, location, kind, detail, None
            # 405/501 (no HEAD here) or any other failure: GET decides; after a timeout
            # (retried already) once, so that a URL that hangs does not cost twice the waits;
            # not at all when its host has stopped answering (the HEAD's timeout stands).
            if kind == "timeout":
                if origin_of(url) in self.unresponsive:
                    return status, location, kind, detail, None
                retries = 0
        return await self._retrying(url, "GET", need_ids, retries)

    async def _retrying(
        self, url: str, method: str, need_ids: bool, retries: int, *, wait_told: bool = False
    ) -> tuple[
        int | None, str | None, str | None, str, tuple[bool, frozenset[str] | None, bool] | None
    ]:
        cfg = self.config
        origin = origin_of(url)
        attempt = 0
        failed: tuple[str | None, str] | None = None  # the last attempt's error (kind, detail)
        while True:
            wait: float | None = None
            try:
                if origin in self.unresponsive:  # the breaker: send nothing more there
                    raise _Unresponsive
                async with self._slot(origin):
                    if origin in self.unresponsive:  # tripped while this one waited
                        raise _Unresponsive
                    try:
                        status, location, retry_after, read, found = await self._exchange(
                            url, method, need_ids
                        )
                    except asyncio.CancelledError:
                        raise
                    except Exception as exc:
                        kind, detail = _classify(exc)
                        self._note(origin, url, kind == "timeout")
                        raise _Failed(kind, detail) from None
                    self._note(origin, url, False)
            except _Unresponsive:
                if failed is not None:  # this URL's own attempt timed out: that is its verdict
                    return None, None, failed[0], failed[1], None
                return None, None, UNRESPONSIVE, self._skipped(origin), None
            except _Failed as exc:
                kind, detail = exc.kind, exc.detail
                failed = (error_kind(kind, detail), detail)
                if kind not in RETRY_KINDS or attempt >= retries:
                    return None, None, failed[0], failed[1], None
            else:
                told = parse_retry_after(retry_after) if status in (429, 503) else None
                if (status == 429 or status >= 500) and (
                    attempt < retries or (wait_told and attempt == 0 and told is not None)
                ):
                    wait = None if told is None else min(told, cfg.max_retry_after)
                else:
                    if status < 400:
                        return status, location, None, "", read
                    told_text = f" (Retry-After: {retry_after[:40]})" if retry_after else ""
                    # a blocked verdict's detail names the wall (its status is said apart)
                    if found is not None:
                        return status, location, BLOCKED, found + told_text, read
                    if status == 429:  # still limited after the retries: the client's rate
                        return status, location, BLOCKED, "rate limited" + told_text, read
                    return status, location, f"http_{status}", f"HTTP {status}{told_text}", read
            if wait is None:
                wait = self.fetcher.backoff(attempt)
            await asyncio.sleep(wait)
            attempt += 1

    async def _as_browser(self, url: str) -> int | None:
        """The status of one GET of ``url`` with a browser's headers (the second look at a
        403, once a URL): None if it failed on the wire or the origin stopped answering."""
        origin = origin_of(url)
        if origin in self.unresponsive:
            return None
        try:
            async with self._slot(origin):
                return (await self._exchange(url, "GET", False, browser=True))[0]
        except asyncio.CancelledError:
            raise
        except Exception:  # the 403 stands
            return None

    async def _exchange(
        self, url: str, method: str, need_ids: bool, *, browser: bool = False
    ) -> tuple[
        int, str | None, str | None, tuple[bool, frozenset[str] | None, bool] | None, str | None
    ]:
        """One request: (status, Location, Retry-After, the ids read, the bot wall it is)."""
        self.requests[method] += 1
        session = self.fetcher.session
        # the session sends the headers every request gets; the credentials (Basic auth,
        # credential headers) go only to the origins they are for, decided for this hop, and
        # the request takes the crawl's proxy as the crawl's own requests do
        target, kwargs = self.fetcher.session_request(url)
        if browser:  # a browser's headers over the session's (the credentials stay)
            kwargs["headers"] = [*BROWSER_HEADERS.items(), *(kwargs.get("headers") or ())]
        async with session.request(method, target, allow_redirects=False, **kwargs) as r:
            status = r.status
            location = location_header(r.headers.get("Location"))
            retry_after = r.headers.get("Retry-After")
            read = None
            if method == "GET" and need_ids and 200 <= status < 300:
                html = r.content_type in HTML_TYPES
                if html:
                    read = await self._read_ids(url, r)
                else:
                    read = (False, None, True)
            found = None
            if status >= 400:
                body = b""
                if method == "GET" and status in BODY_STATUSES:
                    body = await _head_of(r, BODY_BYTES)
                found = wall(status, r.headers, body)
            return status, location, retry_after, read, found

    async def _read_ids(
        self, url: str, r: aiohttp.ClientResponse
    ) -> tuple[bool, frozenset[str] | None, bool]:
        """Stream the body through an extractor that only collects ids."""
        ex = LinkExtractor(url, r.charset, link_set="links", collect_ids=True)
        cap = self.config.max_body_bytes
        read = 0
        complete = True
        async for chunk in r.content.iter_any():
            read += len(chunk)
            ex.feed(chunk)
            if cap and read >= cap:
                complete = False
                break
        ex.close()
        return True, frozenset(ex.ids), complete and ex.ids_complete


async def _head_of(r: aiohttp.ClientResponse, limit: int) -> bytes:
    """The first ``limit`` bytes of the body (fewer if it is shorter); the rest unread."""
    chunks: list[bytes] = []
    got = 0
    async for chunk in r.content.iter_any():
        chunks.append(chunk)
        got += len(chunk)
        if got >= limit:
            break
    return b"".join(chunks)[:limit]


class _Unresponsive(Exception):
    """The origin's breaker has tripped: the request is not sent."""


class _Failed(Exception):
    """One attempt failed on the wire (its kind and detail, as ``classify_error`` says)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(kind)
        self.kind = kind
        self.detail = detail


def _classify(exc: BaseException) -> tuple[str, str]:
    kind, detail = classify_error(exc)
    aio = sys.modules.get("aiohttp")  # (an aiohttp error: aiohttp is loaded)
    if aio is not None and isinstance(exc, aio.ClientSSLError):
        return "tls", detail
    return kind, detail
