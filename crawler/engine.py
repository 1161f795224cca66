"""The crawl engine: frontier -> fetch -> extract -> canonicalise/scope/dedup -> frontier.

Theory of operation
-------------------
One *dispatcher* task pops requests from the frontier (which applies per-origin concurrency,
delays and round-robin) and starts one *page task* per request, at most ``concurrency`` at
once. A page task checks robots.txt, fetches the URL hop by hop (each redirect target is
canonicalised, scope-checked, robots-checked and deduplicated here, not inside aiohttp), and
feeds every body chunk to the page's LinkExtractor as it arrives; the links of each chunk go
through canonicalisation, the seen set and scope, and new ones are pushed to the frontier (and
reported to the sink) before the rest of the body has arrived. Only new URLs pay for the scope
check: a link already in the seen set costs a canonical check and one hash probe.

Rules this module keeps:

* Every discovered in-scope URL is listed (``links``, ``Sink.link``) exactly once, fetched or
  not: one hop past ``max_depth`` it is listed without being marked seen (``_beyond``), so
  that a shallower page still queues it, and it is not listed a second time then.
* Marking seen and queueing cannot be separated by an error: a URL is queued before the sink
  hears of it, and every call of the user's code (``Sink.link``/``page``, ``on_page``) is
  guarded; its exception is logged, counted (``sink_errors``) and marks the page ``sink``.
  An exception of the extractor or of our own link handling ends that body's read with kind
  ``extract``/``internal``, never a wire error, and is not retried.
* No per-origin state outlives the origin's work: the frontier forgets idle origins (after
  their delay), robots delays are re-applied from the robots cache, sitemap URLs are kept
  only while queued. What grows with the crawl is per URL: the seen sets (8-byte
  fingerprints) and the queued requests.
* A ``Link`` whose ``url`` is None (a value that does not resolve) is counted
  (``links_invalid``) and, with ``all_links``, listed once by its raw value; never crawled.

The crawl ends when the frontier is empty (or the page budget is spent) and no page task is
left. Leaving the ``async with`` block, leaving an ``async for`` over the crawler early
(break, an exception, ``aclose()``), cancelling the task that runs ``run()``, or ``stop()``
cancels the dispatcher and page tasks; the session is closed and the stats completed when
the crawler is closed; ``Sink.close()`` is called once at the end in every case.

Limits not in CrawlConfig are module constants: MAX_CRAWL_DELAY caps a robots.txt
Crawl-delay, ITER_QUEUE bounds the pages buffered for ``async for``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any

from crawler.config import CrawlConfig
from crawler.extract import Link, LinkExtractor
from crawler.fetch import Fetcher, Response
from crawler.frontier import MemoryFrontier, MemorySeenSet, Request
from crawler.results import CrawlResult, CrawlStats, PageResult, Sink
from crawler.robots import RobotsCache, RobotsRules, SitemapParser
from crawler.urls import UrlPolicy, host_of, join, origin_of

__all__ = ["Crawler", "crawl", "crawl_sync"]

log = logging.getLogger("crawler")

#: Longest robots.txt Crawl-delay honoured, in seconds (a hostile value must not stall a crawl).
MAX_CRAWL_DELAY = 30.0
#: Pages buffered for ``async for`` before page tasks wait for the consumer.
ITER_QUEUE = 256
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# Prefix of the seen-set key of an invalid link's raw value (--all-links lists each once); a
# canonical URL never starts with NUL, so the two kinds of key cannot meet.
_INVALID = "\0invalid:"


class Crawler:
    """A crawl, as an async context manager and an async iterator of PageResult.

    Args:
        config: the crawl's settings (validated here).
        sink: receives ``link``/``page`` calls as things happen and ``close`` once at the end.
        on_page: called with each PageResult when its page is done (may be a coroutine
            function).
        keep_results: keep ``pages`` and ``links`` in memory for ``run()``'s CrawlResult.
            Default: only when no sink is given (a sink is how long crawls stream results out).
        page_links: fill ``PageResult.links``. Turn off when nothing reads them (the command
            line's ``urls`` format): a hostile 10 MB page of ``<a href=x>`` is ~950,000 Link
            objects, ~190 MB held until the page is done, times the pages in flight. The
            links are crawled and counted either way.

    Example::

        async with Crawler(CrawlConfig(seeds=("https://example.org/",))) as crawler:
            async for page in crawler:
                print(page.url, page.status, len(page.links))
    """

    def __init__(
        self,
        config: CrawlConfig,
        *,
        sink: Sink | None = None,
        on_page: Callable[[PageResult], object] | None = None,
        keep_results: bool | None = None,
        page_links: bool = True,
    ) -> None:
        cfg = config.validated()
        self.config = cfg
        self.stats = CrawlStats()
        self.links: list[str] = []
        self.pages: list[PageResult] = []
        self._sink = sink
        self._on_page = on_page
        self._keep = sink is None if keep_results is None else keep_results
        self._page_links = page_links
        self._policy = UrlPolicy(
            cfg.seeds,
            scope=cfg.scope,
            include=cfg.include,
            exclude=cfg.exclude,
            sort_query=cfg.sort_query,
            drop_params=cfg.drop_params,
            max_url_length=cfg.max_url_length,
        )
        self._seen = MemorySeenSet()
        self._beyond = MemorySeenSet(16)  # listed, one hop past max_depth, not queued
        self._frontier = MemoryFrontier(cfg.per_host, cfg.delay)
        self._fetcher: Fetcher | None = None
        self._robots: RobotsCache | None = None
        self._sitemaps: set[str] = set()
        self._host_count: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._dispatcher: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Event | None = None
        self._idle = False
        self._admitted = 0
        self._records: deque[PageResult] = deque()
        self._queue: asyncio.Queue[PageResult] | None = None
        self._opened = False
        self._closed = False
        self._stopped = False
        self._t0 = 0.0

    # -- public API --

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    @property
    def queued(self) -> int:
        return len(self._frontier)

    def stop(self) -> None:
        """Ask for a prompt, clean stop (safe from a signal handler callback in the loop)."""
        if self._closed or self._stopped:
            return
        self._stopped = True
        self.stats.cancelled = True
        if self._dispatcher is not None:
            self._dispatcher.cancel()

    async def __aenter__(self) -> Crawler:
        await self._open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def run(self) -> CrawlResult:
        """Run the crawl to its end (or to stop()) and return its result."""
        if not self._opened:
            async with self:
                return await self.run()
        dispatcher = self._start()
        await asyncio.wait({dispatcher})
        if not dispatcher.cancelled() and dispatcher.exception() is not None:
            raise dispatcher.exception()  # type: ignore[misc]
        self._update_duration()
        return CrawlResult(links=self.links, pages=self.pages, stats=self.stats)

    def __aiter__(self) -> AsyncIterator[PageResult]:
        return self._iterate()

    async def aclose(self) -> None:
        """Stop whatever runs, close the session, complete the stats, close the sink."""
        if self._closed:
            return
        self._closed = True
        try:
            dispatcher = self._dispatcher
            if dispatcher is not None and not dispatcher.done():
                self.stats.cancelled = True
                dispatcher.cancel()
            if dispatcher is not None:
                await asyncio.gather(dispatcher, return_exceptions=True)
            await self._cancel_tasks()
        finally:
            if self._fetcher is not None:
                await self._fetcher.close()
            self._update_duration()
            if self._sink is not None:
                try:
                    self._sink.close()
                except Exception:
                    log.exception("sink.close() failed")

    # -- lifecycle --

    async def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        cfg = self.config
        self._wakeup = asyncio.Event()
        self._fetcher = Fetcher(cfg)
        self._robots = RobotsCache(self._fetcher, cfg.user_agent, self._policy.in_scope)
        self.stats.started = time.time()
        self._t0 = time.monotonic()
        for seed in cfg.seeds:
            url = self._policy.canonical(seed)
            if url is None or not self._seen.add(url):
                continue
            self._report(url, "", 0)  # a sink error here is logged and counted

    def _start(self) -> asyncio.Task[None]:
        if self._dispatcher is None:
            self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch())
        return self._dispatcher

    async def _iterate(self) -> AsyncIterator[PageResult]:
        opened_here = not self._opened
        if opened_here:
            await self._open()
        queue: asyncio.Queue[PageResult] = asyncio.Queue(ITER_QUEUE)
        self._queue = queue
        dispatcher = self._start()
        finished = False
        try:
            while True:
                if not queue.empty():
                    yield queue.get_nowait()
                    continue
                if dispatcher.done():
                    finished = True
                    break
                getter = asyncio.ensure_future(queue.get())
                try:
                    await asyncio.wait({getter, dispatcher}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not getter.done():
                        getter.cancel()
                if getter.done() and not getter.cancelled():
                    yield getter.result()
        finally:
            if self._queue is queue:
                self._queue = None
            if not finished:
                # Leaving the loop early (break, an exception, aclose(), the task cancelled)
                # stops the crawl: no page task may wait forever on a queue nobody reads.
                self.stop()
                await asyncio.gather(dispatcher, return_exceptions=True)
            if opened_here:
                await self.aclose()

    def _update_duration(self) -> None:
        if self._t0:
            self.stats.duration = time.monotonic() - self._t0

    async def _cancel_tasks(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    # -- the dispatcher --

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        frontier = self._frontier
        tasks = self._tasks
        wakeup = self._wakeup
        assert wakeup is not None
        limit = max(1, self.config.concurrency)
        max_pages = self.config.max_pages
        try:
            while not self._stopped:
                now = loop.time()
                while len(tasks) < limit and not (max_pages and self._admitted >= max_pages):
                    request = frontier.pop(now)
                    if request is None:
                        break
                    self._admitted += 1
                    task = loop.create_task(self._process(request))
                    tasks.add(task)
                    task.add_done_callback(self._task_done)
                if not tasks and (not len(frontier) or (max_pages and self._admitted >= max_pages)):
                    break
                wait = frontier.wait_time(now) if len(tasks) < limit else None
                timer = loop.call_later(wait, wakeup.set) if wait is not None else None
                wakeup.clear()
                self._idle = True
                try:
                    await wakeup.wait()
                finally:
                    self._idle = False
                    if timer is not None:
                        timer.cancel()
            await self._flush_records()
        finally:
            if tasks:
                self.stats.cancelled = True
                await self._cancel_tasks()

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("page task failed", exc_info=task.exception())
        if self._wakeup is not None:
            self._wakeup.set()

    # -- one page --

    async def _process(self, request: Request) -> None:
        loop = asyncio.get_running_loop()
        try:
            try:
                page = await self._fetch_page(request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must not kill the crawl: record it, go on
                log.exception("internal error on %s", request.url)
                page = PageResult(request.url, request.depth, request.referrer)
                page.error, page.error_detail = "internal", f"{type(exc).__name__}: {exc}"
        finally:
            self._frontier.release(request.origin, loop.time())
        if page is not None:
            await self._finish(page)
        await self._flush_records()

    async def _flush_records(self) -> None:
        # PageResults of URLs found but never fetched (url_too_long), made in sync code.
        records = self._records
        while records:
            await self._finish(records.popleft())

    async def _rules(self, origin: str) -> RobotsRules:
        robots = self._robots
        assert robots is not None
        rules = robots.cached(origin)
        if rules is None:
            # Fetched (or awaited) now: its sitemaps are offered each time the rules are
            # (re)loaded (the cache expires entries; the seen set drops the repeats), so no
            # per-origin "done" set grows with the crawl.
            rules = await robots.get(origin)
            if self.config.sitemaps:
                for sitemap in rules.sitemaps:
                    self._offer_sitemap(sitemap, origin + "/robots.txt", 0)
        # Told on every request, not once per origin: the frontier forgets idle origins.
        self._apply_delay(origin, rules)
        return rules

    async def _fetch_page(self, request: Request) -> PageResult | None:
        cfg = self.config
        policy = self._policy
        fetcher = self._fetcher
        assert fetcher is not None
        url = request.url
        depth = request.depth
        page = PageResult(url, depth, request.referrer)
        current = url
        origin = request.origin
        chain = {url}
        hops = 0
        while True:
            if not cfg.ignore_robots:
                rules = await self._rules(origin)
                if rules.error is not None:
                    page.error, page.error_detail = rules.error, rules.why
                    return page
                if not await rules.allowed_async(current):  # a long file: off the loop
                    self.stats.robots_disallowed += 1
                    if hops == 0:
                        self._admitted -= 1
                        return None
                    page.error_detail = f"redirect target disallowed by robots.txt: {current}"
                    return page
            state = _PageState(self, page, current, depth)
            res = await fetcher.fetch(current, state.on_headers)
            state.close()
            if self._sitemaps:
                self._sitemaps.discard(current)
            self._record(page, res, current)
            if state.failure is not None:  # our own code failed on the body, not the wire
                page.error, page.error_detail = state.failure
                return page
            status = res.status
            if status not in REDIRECT_STATUSES or res.error is not None or not res.location:
                return page
            # -- a redirect hop --
            hops += 1
            self.stats.redirects += 1
            target_raw = join(current, res.location)
            if target_raw is None:
                return _fail(page, "redirect_invalid", f"Location {res.location!r} is not a URL")
            if not target_raw.startswith(("http://", "https://")):
                return _fail(page, "redirect_bad_scheme", f"redirect to {target_raw[:200]!r}")
            target = policy.canonical(target_raw)
            if target is None:
                return _fail(page, "redirect_invalid", f"Location {res.location!r} is not a URL")
            if target in chain:
                return _fail(page, "redirect_loop", f"redirect loop back to {target}")
            if hops > cfg.max_redirects:
                return _fail(page, "too_many_redirects", f"more than {cfg.max_redirects} hops")
            if policy.too_long(target):
                return _fail(page, "url_too_long", f"redirect target of {len(target)} characters")
            if not policy.in_scope(target):
                self.stats.out_of_scope += 1
                return _fail(page, "redirect_out_of_scope", f"redirect to {target}")
            page.redirects.append(target)
            chain.add(target)
            if not self._seen.add(target):
                page.final_url = target  # known already: fetched (or queued) on its own
                return page
            self._report(target, current, depth, queue=False, page=page)
            current = target
            origin = origin_of(target)

    def _record(self, page: PageResult, res: Response, url: str) -> None:
        page.final_url = url
        page.status = res.status
        page.content_type = res.content_type
        page.bytes += res.bytes
        page.elapsed_ms += res.elapsed_ms
        page.retries += res.retries
        page.truncated = res.truncated
        if res.error is not None or page.error != "sink":  # a sink error while reading stays
            page.error = res.error
            page.error_detail = res.error_detail

    async def _finish(self, page: PageResult) -> None:
        stats = self.stats
        stats.pages += 1
        if page.error is None:
            stats.pages_ok += 1
        else:
            stats.errors[page.error] += 1
        if page.status is not None:
            stats.status[page.status] += 1
        stats.bytes += page.bytes
        stats.retries += page.retries
        self._update_duration()
        if self._keep:
            self.pages.append(page)
        # A user's sink or hook that raises marks the page "sink" (counted as such), and the
        # page still reaches the others: the hook, the iterator.
        if self._sink is not None:
            try:
                self._sink.page(page)
            except Exception as exc:
                self._late_sink_failure("sink.page", exc, page)
        if self._on_page is not None:
            try:
                result = self._on_page(page)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self._late_sink_failure("on_page", exc, page)
        queue = self._queue
        if queue is not None:
            await queue.put(page)

    def _late_sink_failure(self, where: str, exc: Exception, page: PageResult) -> None:
        # The page is counted already: move it from ok to the "sink" errors.
        was_ok = page.error is None
        self._sink_failed(where, exc, page)
        if was_ok:
            self.stats.pages_ok -= 1
            self.stats.errors["sink"] += 1

    # -- links --

    def take_links(
        self, links: list[Link], page: PageResult, referrer: str, depth: int, nofollow: bool
    ) -> None:
        """Canonicalise, dedup, scope-check and enqueue the links of one chunk (the hot path)."""
        if self._page_links:
            page.links.extend(links)
        self.stats.links_found += len(links)
        if nofollow:
            return
        cfg = self.config
        if cfg.max_depth and depth >= cfg.max_depth:
            self._take_beyond(links, referrer, depth, page)
            return
        policy = self._policy
        canonical = policy.canonical_resolved
        scope_origin = policy.scope_origin
        max_len = policy.max_url_length
        seen_add = self._seen.add
        respect_nofollow = cfg.respect_nofollow
        all_links = cfg.all_links
        report = self._report
        child = depth + 1
        for link in links:
            if respect_nofollow and link.nofollow:
                continue
            raw_url = link.url
            if raw_url is None:
                self._invalid(link, referrer, page)
                continue
            url = canonical(raw_url)
            if url is None:
                if all_links and seen_add(raw_url):
                    self._list(raw_url, referrer, "other", page)
                continue
            if seen_add(url):
                origin = scope_origin(url)
                if origin is not None and not (max_len and len(url) > max_len):
                    report(url, referrer, child, origin=origin, page=page)
                else:
                    self._new_url(url, referrer, depth, page)

    def _take_beyond(
        self, links: list[Link], referrer: str, depth: int, page: PageResult | None
    ) -> None:
        # Links one hop past max_depth are listed but not queued, and NOT marked seen: a page
        # at a lower depth that is still in flight may link the same URL and must queue it
        # (it is then not listed again: _beyond remembers what was listed this way).
        # Out-of-scope and non-HTTP links are what they are at any depth (never queued): they
        # are marked seen, counted and, with all_links, listed as on any other page.
        policy = self._policy
        canonical = policy.canonical_resolved
        seen = self._seen
        beyond = self._beyond
        respect_nofollow = self.config.respect_nofollow
        all_links = self.config.all_links
        for link in links:
            if respect_nofollow and link.nofollow:
                continue
            raw_url = link.url
            if raw_url is None:
                self._invalid(link, referrer, page)
                continue
            url = canonical(raw_url)
            if url is None:
                if all_links and seen.add(raw_url):
                    self._list(raw_url, referrer, "other", page)
                continue
            if url in seen or url in beyond:
                continue
            if policy.scope_origin(url) is None:
                if seen.add(url):
                    self.stats.out_of_scope += 1
                    if all_links:
                        self._list(url, referrer, "external", page)
            elif not policy.too_long(url):
                beyond.add(url)
                self._list(url, referrer, "internal", page)

    def _invalid(self, link: Link, referrer: str, page: PageResult | None) -> None:
        # A value that does not resolve to a URL: never crawled; counted, and listed (once,
        # by its raw value) with --all-links, so that a link checker can report it.
        self.stats.links_invalid += 1
        if self.config.all_links and self._sink is not None and self._seen.add(_INVALID + link.raw):
            self._list(link.raw, referrer, "invalid", page)

    def _new_url(self, url: str, referrer: str, depth: int, page: PageResult | None = None) -> None:
        policy = self._policy
        if not policy.in_scope(url):
            self.stats.out_of_scope += 1
            if self.config.all_links:
                self._list(url, referrer, "external", page)
            return
        if policy.too_long(url):
            record = PageResult(url, depth + 1, referrer)
            record.error, record.error_detail = "url_too_long", f"URL of {len(url)} characters"
            self._records.append(record)
            return
        self._report(url, referrer, depth + 1, page=page)

    def _report(
        self,
        url: str,
        referrer: str,
        depth: int,
        *,
        queue: bool = True,
        origin: str = "",
        page: PageResult | None = None,
    ) -> None:
        """A new in-scope URL: queue it if the limits allow, then list it and tell the sink.

        Queueing comes first and cannot fail on a user's code: a URL marked seen is always
        queued, whatever the sink does with it.
        """
        if queue:
            self._enqueue(url, referrer, depth, origin)
        if self._beyond and url in self._beyond:
            return  # listed already, when it was first found one hop past max_depth
        self._list(url, referrer, "internal", page)

    def _enqueue(self, url: str, referrer: str, depth: int, origin: str) -> None:
        cfg = self.config
        if cfg.max_depth and depth > cfg.max_depth:
            return
        if cfg.max_pages_per_host:
            host = host_of(url)
            count = self._host_count.get(host, 0)
            if count >= cfg.max_pages_per_host:
                return
            self._host_count[host] = count + 1
        origin = origin or origin_of(url)
        frontier = self._frontier
        if not frontier.knows(origin):
            # An origin the frontier forgot (or never had): its robots.txt delay, if the rules
            # are still cached, holds from its first request again.
            self._apply_delay(origin, None)
        frontier.push(Request(url, depth, referrer or None, origin))
        if self._idle and self._wakeup is not None:
            self._wakeup.set()

    def _apply_delay(self, origin: str, rules: RobotsRules | None) -> None:
        if rules is None:
            if self._robots is None or self.config.ignore_robots:
                return
            rules = self._robots.cached(origin)
            if rules is None:
                return
        delay = min(rules.crawl_delay or 0.0, MAX_CRAWL_DELAY)
        if delay > self.config.delay:
            self._frontier.set_delay(origin, delay)

    def _list(self, url: str, referrer: str, kind: str, page: PageResult | None) -> None:
        """Count and keep an in-scope URL, and tell the sink of any ``kind``."""
        if kind == "internal":
            self.stats.links_new += 1
            if self._keep:
                self.links.append(url)
        sink = self._sink
        if sink is not None:
            try:
                sink.link(url, referrer, kind)
            except Exception as exc:
                self._sink_failed("sink.link", exc, page)

    def _sink_failed(self, where: str, exc: Exception, page: PageResult | None) -> None:
        """A user's sink or hook raised: log it, count it, and mark the page it was about."""
        log.error("%s raised %s: %s", where, type(exc).__name__, exc, exc_info=exc)
        self.stats.sink_errors += 1
        if page is not None and page.error is None:
            page.error = "sink"
            page.error_detail = f"{where} raised {type(exc).__name__}: {exc}"[:500]

    def _offer_sitemap(
        self, raw: str, referrer: str, depth: int, page: PageResult | None = None
    ) -> None:
        url = self._policy.canonical(raw)
        if url is None or not self._seen.add(url):
            return
        # Only a sitemap that is really queued is remembered (and forgotten once fetched):
        # a sitemap index that names millions of duplicates or foreign files costs nothing.
        if self._policy.in_scope(url) and not self._policy.too_long(url):
            self._sitemaps.add(url)
        self._new_url(url, referrer, depth - 1, page)

    def take_urls(
        self, urls: list[str], referrer: str, depth: int, page: PageResult | None = None
    ) -> None:
        """URLs from a sitemap (any form): canonicalise fully, then as links."""
        for raw in urls:
            if raw.endswith((".xml", ".xml.gz")):
                self._offer_sitemap(raw, referrer, depth + 1, page)
                continue
            url = self._policy.canonical(raw)
            if url is not None and self._seen.add(url):
                self._new_url(url, referrer, depth, page)


def _fail(page: PageResult, kind: str, detail: str) -> PageResult:
    page.error, page.error_detail = kind, detail
    return page


class _BodyAbort(Exception):
    """Raised from a body consumer to stop reading: our own code failed on this body.

    The fetcher reports it as a wire error (it cannot tell); the engine replaces that with
    the failure kept on the _PageState. Not an OSError, so it is never retried.
    """


class _PageState:
    """One fetch attempt's body handling: the extractor (or sitemap parser) and its links.

    Whatever raises in here (the extractor, our own link handling) is caught, kept as
    ``failure`` (kind ``extract`` or ``internal``, with the exception named) and ends the
    read; the links handed over before it stay handed over. A user's sink cannot raise in
    here: the engine catches its errors where it calls it.
    """

    __slots__ = ("crawler", "depth", "extractor", "failure", "found", "page", "sitemap", "url")

    def __init__(self, crawler: Crawler, page: PageResult, url: str, depth: int) -> None:
        self.crawler = crawler
        self.page = page
        self.url = url
        self.depth = depth
        self.extractor: Any = None
        self.sitemap: SitemapParser | None = None
        self.failure: tuple[str, str] | None = None
        self.found = 0  # links of this attempt, counted in stats.links_found

    def _fail(self, kind: str, what: str, exc: Exception) -> _BodyAbort:
        log.error("%s failed on %s", what, self.url, exc_info=exc)
        self.failure = (kind, f"{what} raised {type(exc).__name__}: {exc}"[:500])
        self.extractor = None
        self.sitemap = None
        return _BodyAbort(self.failure[1])

    def on_headers(self, res: Response) -> Callable[[bytes], object] | None:
        status = res.status
        if status is None or not 200 <= status < 300:
            return None
        crawler = self.crawler
        self.failure = None  # a retried attempt starts the page over
        if self.url in crawler._sitemaps:
            # A .xml.gz sitemap is inflated by the parser: the body cap applies to what it
            # inflates too, as it does to Content-Encoding bodies.
            self.sitemap = SitemapParser(crawler.config.max_body_bytes)
            return self.feed_sitemap
        if not res.is_html:
            return None
        if self.found:  # a retried attempt starts the page over: uncount the last one
            crawler.stats.links_found -= self.found
            self.found = 0
            self.page.links = []
        try:
            self.extractor = LinkExtractor(self.url, res.charset, link_set=crawler.config.link_set)
        except Exception as exc:
            self._fail("extract", "the extractor", exc)
            return None
        return self.feed

    def feed(self, chunk: bytes) -> None:
        ex = self.extractor
        if ex is None:
            raise _BodyAbort("extraction failed")
        try:
            links = ex.feed(chunk)
        except Exception as exc:
            raise self._fail("extract", "the extractor", exc) from exc
        if links:
            self._take(links, ex)

    def _take(self, links: list[Link], ex: LinkExtractor) -> None:
        self.found += len(links)
        try:
            nofollow = self.crawler.config.respect_nofollow and ex.nofollow
            self.crawler.take_links(links, self.page, self.url, self.depth, nofollow)
        except Exception as exc:
            raise self._fail("internal", "link handling", exc) from exc

    def feed_sitemap(self, chunk: bytes) -> None:
        parser = self.sitemap
        if parser is None:
            raise _BodyAbort("sitemap parsing failed")
        try:
            urls = parser.feed(chunk)
            if urls:
                self.crawler.take_urls(urls, self.url, self.depth, self.page)
        except Exception as exc:
            raise self._fail("internal", "sitemap handling", exc) from exc

    def close(self) -> None:
        ex = self.extractor
        if ex is None:
            return
        self.extractor = None
        try:
            links = ex.close()
        except Exception as exc:  # the extractor never raises by contract; belt and braces
            self._fail("extract", "the extractor", exc)
            return
        if links:
            try:
                self._take(links, ex)
            except _BodyAbort:
                pass  # kept in self.failure


async def crawl(
    seeds: str | Iterable[str] = (),
    *,
    config: CrawlConfig | None = None,
    sink: Sink | None = None,
    on_page: Callable[[PageResult], object] | None = None,
    keep_results: bool | None = None,
    **options: Any,
) -> CrawlResult:
    """Crawl from ``seeds`` to the end and return links, pages and stats.

    Args:
        seeds: one URL or several (added to ``config.seeds`` if a config is given).
        config: a CrawlConfig; ``options`` (CrawlConfig field names) override its fields.
        sink: optional streaming output (see :class:`crawler.results.Sink`).
        on_page: optional hook called with each PageResult.
        keep_results: keep every PageResult and discovered URL for the result. Default:
            only without a sink; with one, ``result.links`` and ``result.pages`` stay empty
            (the sink has them) and memory stays flat however long the crawl.

    Raises:
        ConfigError: a bad option, naming the key.
    """
    seed_list = (seeds,) if isinstance(seeds, str) else tuple(seeds)
    if config is None:
        config = CrawlConfig(seeds=seed_list, **options)
    else:
        if seed_list:
            options["seeds"] = tuple(config.seeds) + seed_list
        if options:
            config = config.replace(**options)
    crawler = Crawler(config.validated(), sink=sink, on_page=on_page, keep_results=keep_results)
    return await crawler.run()


def crawl_sync(
    seeds: str | Iterable[str] = (),
    *,
    config: CrawlConfig | None = None,
    sink: Sink | None = None,
    on_page: Callable[[PageResult], object] | None = None,
    keep_results: bool | None = None,
    **options: Any,
) -> CrawlResult:
    """``crawl()`` for scripts: runs its own event loop (uvloop when installed)."""
    factory: Callable[[], asyncio.AbstractEventLoop] | None = None
    try:
        import uvloop  # noqa: PLC0415  (optional accelerator)

        factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover
        factory = None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(
            crawl(
                seeds,
                config=config,
                sink=sink,
                on_page=on_page,
                keep_results=keep_results,
                **options,
            )
        )
