"""The crawl engine: the crawl's lifecycle and dispatch, behind one crawl state protocol.

Theory of operation
-------------------
The crawl's state (frontier, seen set, leases, counters, robots.txt, settings) lives behind
``crawler.state.CrawlState``: memory by default, SQLite under ``config.state``, or the one
injected with ``Crawler(config, state=...)``. The engine never builds a backend itself
(``open_state`` picks it from the state URL). Three pieces, one concern each:

* this module, ``Crawler``: open the state (settings stored or checked, stats seeded from the
  whole crawl so far, seeds offered), then one *dispatcher* task that leases requests from the
  state (which applies per-origin concurrency, delays and round-robin) and starts one page
  task per lease, at most ``concurrency`` at once, and commits finished pages in batches;
* ``crawler.core.page``: the page job (robots.txt, fetch hop by hop, feed the extractor chunk by
  chunk, a pull-based body);
* ``crawler.core.admission``: the one admission rule (canonical URL, scope, depth, URL length,
  nofollow, ``offer_many`` once per chunk) and what is listed to the sink.

Rules this module keeps:

* A page's completion is committed to the state only after ``sink.flush()`` (when the sink
  has one): a kill after the commit cannot lose the page's output lines. Completions and the
  counters' deltas go to the state in one batch per dispatcher turn, not one per link.
* A lease with ``attempts > 0`` was in flight when an earlier run stopped: its page's output
  may have been cut, so when the backend can say what that page discovered
  (``discovered_by``, SQLite), those URLs are listed again before it is fetched anew.
* The stats are the whole crawl's: ``pages``/``errors`` from ``counts()`` (completions), the
  rest from ``counters()``; ``max_pages`` counts every page leased in every run.
* Every call of the user's code (``Sink.link``/``page``, ``on_page``) is guarded; its
  exception is logged, counted (``sink_errors``) and marks the page ``sink``.

The crawl ends when the state has nothing queued or leased (or the page budget is spent) and
no page task is left. Leaving the ``async with`` block, leaving an ``async for`` over the
crawler early (break, an exception, ``aclose()``), cancelling the task that runs ``run()``,
or ``stop()`` cancels the dispatcher and page tasks; the pages finished by then are
committed, the state and the session are closed and the stats completed when the crawler is
closed; ``Sink.close()`` is called once at the end in every case.

A shared state (``CrawlState.shared``: Redis, many worker processes on one crawl) changes
four things, and nothing else:

* joining: a worker may start with no seeds; if the crawl does not exist yet it waits for the
  first worker's settings (their seeds are its scope) instead of storing a crawl of nothing;
* waiting: other workers' leases are work in progress (their pages may offer more links); a
  worker with room and nothing to lease waits on ``state.wait`` (the state's wake-up when any
  worker offers, completes or retries) as well as on its own pages: never a busy poll (at
  most one re-check a second while idle, and after a lease that found nothing, the next
  one a wake-up triggers no sooner than ``_SHARED_RELEASE_GAP``). So when politeness is
  the limit (few origins, their ``per_host`` slots all taken), a worker that finishes a page
  takes the freed slot again before the waiting ones ask: the work gathers on the workers
  that hold the slots (the throughput is the slots' either way) and the others wait cheaply;
* stopping: only after nothing was queued and nothing leased anywhere for a grace period
  (``SHARED_IDLE_GRACE``, or the state's ``idle_grace``), as a normal end; a clean stop gives
  the unfinished leases back (``retry`` due now), so that no one waits for them to expire;
* ``max_pages`` is the whole crawl's budget: checked by the backend's lease (``budget=``)
  when it takes one (Redis: atomic across workers), else read from ``counts()``.
A state call that blocks (the Redis backend retrying through an outage) just blocks: the
engine puts no timeout on a state call while crawling.

The open step also starts what the config asks for besides the state, each imported only
then: the metrics server (``metrics_port``: ``crawler.output.metrics``, fed by the fetcher's
observer and each page's Tally) and the WARC writer (``warc``: ``crawler.output.warc``, given to
the fetcher). They are closed when the crawler is, after the fetcher (which saves the cookie
jar), on every path: a normal end, a stop, a cancelled task, an open step that failed.

Limits not in CrawlConfig are module constants: ``crawler.core.page.MAX_CRAWL_DELAY`` caps a
robots.txt Crawl-delay, ITER_QUEUE bounds the pages buffered for ``async for``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from functools import partial
from typing import Any

from crawler.config import CrawlConfig
from crawler.core import settings as crawl_settings
from crawler.core.admission import Admission, Tally
from crawler.core.page import MAX_CRAWL_DELAY, REDIRECT_STATUSES, ROBOTS_DISALLOWED, PageJob
from crawler.core.results import CrawlResult, CrawlStats, PageResult, Sink
from crawler.core.robots import RobotsCache
from crawler.http.client import Fetcher
from crawler.state import Counts, CrawlState, Lease, Outcome, open_state
from crawler.urls.policy import UrlPolicy

__all__ = ["Crawler", "crawl", "crawl_sync"]

log = logging.getLogger("crawler")

#: Pages buffered for ``async for`` before page tasks wait for the consumer.
ITER_QUEUE = 256
# Re-exported for code that imported them from here before the split.
_COMPAT = (MAX_CRAWL_DELAY, REDIRECT_STATUSES)
# CrawlStats fields kept in the state's counters (summed over every run).
_COUNTED = (
    "bytes",
    "links_found",
    "links_new",
    "links_invalid",
    "retries",
    "redirects",
    "robots_disallowed",
    "out_of_scope",
    "sink_errors",
)
# Counter names: pages that were no lease (url_too_long records), their errors, statuses;
# leases robots.txt disallowed (completed, but no page).
_RECORDS = "records"
_SKIPPED = "skipped"
_ERROR = "error:"
_STATUS = "status:"
_STATUS_KEYS: dict[int, str] = {}  # status -> its counter name, "status:200" (made once)
_END = PageResult("", 0)  # the iterator's end marker (see _iterate)
# Seconds to wait for work when nothing is in flight here and the state has no due time
# (leases held by another process, for a shared backend): a re-check, not a poll loop.
_IDLE_RECHECK = 1.0
#: With a shared state (``CrawlState.shared``: Redis), seconds with nothing queued and nothing
#: leased anywhere before a worker stops (another worker may still be about to offer links).
#: A state's own ``idle_grace`` attribute, if it has one, wins.
SHARED_IDLE_GRACE = 2.0
# Seconds between two reads of the queue's length from a shared state (``queued``, for
# progress lines and the frontier gauge: other workers change it too).
_QUEUED_REFRESH = 2.0
# Seconds, with a shared state, from a lease that found nothing to the next one another
# worker's wake-up may trigger (see _dispatch).
_SHARED_RELEASE_GAP = 0.1
# Seconds a clean stop waits to give a shared state back its unfinished leases.
_GIVE_BACK_TIMEOUT = 10.0
# Seconds between two looks for the settings of a crawl a seedless worker waits to join.
_SETTINGS_RECHECK = 0.5


class Crawler:
    """A crawl, as an async context manager and an async iterator of PageResult.

    Args:
        config: the crawl's settings (validated here). ``config.state`` picks the backend.
        sink: receives ``link``/``page`` calls as things happen and ``close`` once at the end;
            its ``flush()``, if it has one, is called before finished pages are committed.
        on_page: called with each PageResult when its page is done (may be a coroutine
            function).
        keep_results: keep ``pages`` and ``links`` in memory for ``run()``'s CrawlResult.
            Default: only when no sink is given (a sink is how long crawls stream results out).
        page_links: fill ``PageResult.links``. Turn off when nothing reads them (the command
            line's ``urls`` format): a hostile 10 MB page of ``<a href=x>`` is ~950,000 Link
            objects, ~190 MB held until the page is done, times the pages in flight. The
            links are crawled and counted either way.
        link_record: with ``page_links`` and the compiled extractor, ``PageResult.links`` is
            a ``crawler.extract.LinkRecord``: the same Links in a compact record, made when
            read, so that the page's links take the compiled path to the state (what the
            command line's ``jsonl`` and ``csv`` formats and ``crawler check`` use). Without
            the compiled extractor, a list as always.
        state: a CrawlState to use instead of ``open_state(config.state)`` (opened and
            closed by the crawler all the same).
        given: the config keys the user set explicitly (the CLI's flags and file), for the
            settings check on resume; None: those that differ from the defaults.
        collect_ids: fill ``PageResult.ids`` with each page's fragment targets.
        report_skipped: a URL robots.txt disallows gives a PageResult with error
            ``robots_disallowed`` (not fetched, not counted as a page) instead of nothing.

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
        link_record: bool = False,
        state: CrawlState | None = None,
        given: Collection[str] | None = None,
        collect_ids: bool = False,
        report_skipped: bool = False,
    ) -> None:
        cfg = config.validated()
        self.config = cfg
        self.stats = CrawlStats()
        self.pages: list[PageResult] = []
        self._sink = sink
        self._on_page = on_page
        self._keep = sink is None if keep_results is None else keep_results
        self._page_links = page_links
        self._link_record = link_record
        self._given = given
        self._collect_ids = collect_ids
        self._report_skipped = report_skipped
        self._state: CrawlState = (
            state
            if state is not None
            else open_state(
                cfg.state,
                synchronous=cfg.state_sync,
                name=cfg.name,
                lease_timeout=cfg.lease_timeout,
                request_timeout=cfg.timeout,
            )
        )
        self._shared = bool(getattr(self._state, "shared", False))
        self._state_open = False
        self._policy = UrlPolicy.from_config(cfg)
        self._admission: Admission | None = None
        self._job: PageJob | None = None
        self._fetcher: Fetcher | None = None
        self._robots: RobotsCache | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Leases taken and not yet finished (a page task runs on each): given back to a
        # shared state at a clean stop, so that no other worker waits for them to expire.
        self._held: dict[int, Lease] = {}
        self._metrics: Any = None  # crawler.output.metrics.Metrics, with config.metrics_port
        self._archive: Any = None  # crawler.output.warc's writer, with config.warc
        self._io_closed = False
        self._dispatcher: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Event | None = None
        self._idle = False
        self._admitted = 0
        self._queued = 0  # an estimate for progress lines (the state has the truth)
        self._done: list[tuple[Lease, Outcome]] = []
        self._pending: Counter[str] = Counter()  # counter deltas for the next commit
        self._sink_errors_pushed = 0
        self._resumed = False
        self._recovered = 0
        self._committing = 0  # completions being committed now
        self._queue: asyncio.Queue[PageResult] | None = None
        self._opened = False
        self._closed = False
        self._stopped = False
        self._t0 = 0.0

    # -- public API --

    @property
    def links(self) -> list[str]:
        """The discovered in-scope URLs of this run, in order (with ``keep_results``)."""
        return self._admission.links if self._admission is not None else []

    @property
    def state(self) -> CrawlState:
        """The crawl state this crawler runs on."""
        return self._state

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    @property
    def queued(self) -> int:
        """Requests waiting in the state: an estimate kept between reads of ``counts()``
        (with a shared state, read again every couple of seconds)."""
        return max(0, self._queued)

    @property
    def archive_error(self) -> OSError | None:
        """The error that stopped the WARC file's writing (disk full...), if one did."""
        error = getattr(self._archive, "error", None)
        return error if isinstance(error, OSError) else None

    @property
    def cookies_error(self) -> ValueError | None:
        """Why ``save_cookies`` could not be written when the crawler closed, if it could not
        (``crawler.http.errors.OptionError``, naming the option and the file)."""
        error = getattr(self._fetcher, "cookies_error", None)
        return error if isinstance(error, ValueError) else None

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
        """Stop whatever runs, commit finished pages, close the state, the session, the sink."""
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
            if self._state_open:
                try:
                    await self._commit()
                    await self._give_back()
                finally:
                    self._state_open = False
                    await self._state.close()
        finally:
            await self._close_io()
            self._update_duration()
            if self._sink is not None:
                try:
                    self._sink.close()
                except Exception:
                    log.exception("sink.close() failed")

    async def _give_back(self) -> None:
        """Return the leases of unfinished pages to a shared state, due at once.

        Another worker takes them now rather than when they expire. A state of one process
        (memory, SQLite) recovers them when it is next opened (``counts().recovered``).
        """
        held, self._held = self._held, {}
        if not self._shared or not held:
            return
        now = time.time()
        state = self._state
        try:
            # bounded: a stop during an outage must not hang on it (the leases expire)
            await asyncio.wait_for(
                asyncio.gather(*(state.retry(lease, now, now) for lease in held.values())),
                _GIVE_BACK_TIMEOUT,
            )
        except Exception as exc:
            log.warning("could not give back %d leases: %s", len(held), exc or type(exc).__name__)

    async def _close_io(self) -> None:
        """Close what the open step made besides the state, each on its own (one failing
        must not keep the others open): the fetcher (it saves the cookie jar), the WARC
        writer (after the fetcher: no record can start after it), the metrics server."""
        if self._io_closed:
            return
        self._io_closed = True
        fetcher, archive, metrics = self._fetcher, self._archive, self._metrics
        if fetcher is not None:
            try:
                await fetcher.close()
            except Exception:
                log.exception("closing the fetcher failed")
        if archive is not None:
            try:
                result = archive.close()
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("closing the WARC file failed")
        if metrics is not None:
            try:
                await metrics.stop()
            except Exception:
                log.exception("stopping the metrics server failed")

    # -- lifecycle --

    async def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        state = self._state
        cfg = self.config
        await state.open(
            per_host=cfg.per_host, delay=cfg.delay, max_pages_per_host=cfg.max_pages_per_host
        )
        self._state_open = True
        try:
            await self._settle(state)
            await self._begin(state)
        except BaseException:
            self._state_open = False
            try:
                await state.close()
            finally:
                await self._close_io()
            raise

    async def _settle(self, state: CrawlState) -> None:
        """Store the settings of a new crawl; on resume, merge them (ConfigError on a clash)."""
        cfg = self.config
        stored = await state.load_settings()
        if stored is None and self._shared and not cfg.seeds:
            stored = await self._await_crawl(state)
        if stored is not None:
            merged = crawl_settings.resume(stored, cfg, self._given)
            if merged.state != cfg.state:
                merged = merged.replace(state=cfg.state)
            if (merged.per_host, merged.delay, merged.max_pages_per_host) != (
                cfg.per_host,
                cfg.delay,
                cfg.max_pages_per_host,
            ):
                # the frontier's politeness and budget are given at open: open it again
                # (the first open recovered the leases of the last stop: keep that count)
                self._recovered = (await state.counts()).recovered
                await state.close()
                await state.open(
                    per_host=merged.per_host,
                    delay=merged.delay,
                    max_pages_per_host=merged.max_pages_per_host,
                )
            self.config = cfg = merged
            self._policy = UrlPolicy.from_config(cfg)
        await state.save_settings(crawl_settings.to_stored(cfg))
        self._resumed = stored is not None

    async def _await_crawl(self, state: CrawlState) -> dict[str, Any]:
        """A worker with no seeds that came up before the crawl it joins was started: wait
        for the first worker's settings (its seeds are the scope). Storing our own instead
        would start a crawl of nothing. Cancel the task to give up."""
        log.info("no crawl in %s yet: waiting for one to start", state.location or "the state")
        while True:
            await asyncio.sleep(_SETTINGS_RECHECK)
            stored = await state.load_settings()
            if stored is not None:
                return stored

    async def _begin(self, state: CrawlState) -> None:
        cfg = self.config
        counts = await state.counts()
        self._seed_stats(counts, await state.counters())
        self._wakeup = asyncio.Event()
        self._fetcher = await self._open_io(cfg)
        self._robots = RobotsCache(
            self._fetcher, cfg.user_agent, self._policy.in_scope, store=state
        )
        self._admission = Admission(
            cfg, self._policy, state, self.stats, self._sink, keep=self._keep,
            on_offer=self._offered,
        )  # fmt: skip
        self._job = PageJob(
            cfg,
            self._policy,
            self._fetcher,
            self._robots,
            self._admission,
            state,
            page_links=self._page_links,
            link_record=self._link_record,
            collect_ids=self._collect_ids,
            report_skipped=self._report_skipped,
        )
        self.stats.started = time.time()
        self._t0 = time.monotonic()
        start = getattr(self._sink, "start", None)
        if start is not None:
            # the sink's output: truncated for a new crawl, its cut last line repaired on resume
            try:
                start(self._resumed)
            except Exception as exc:
                self._admission.sink_failed("sink.start", exc, None)
        tally = Tally()
        await self._admission.seeds(cfg.seeds, tally)  # a sink error here is logged, counted
        self._add_tally(tally)
        await self._commit()  # the seeds' lines out and their counts in, before any page

    async def _open_io(self, cfg: CrawlConfig) -> Fetcher:
        """The fetcher, with the metrics server and the WARC writer when they are asked for
        (each imported only then: start-up must not pay for what is not used)."""
        options: dict[str, Any] = {}
        if cfg.metrics_port:
            from crawler.output.metrics import Metrics  # noqa: PLC0415  (only with metrics_port)

            metrics = Metrics()
            await metrics.start(cfg.metrics_host, cfg.metrics_port, self)
            self._metrics = metrics
            options["observer"] = metrics.on_response
        if cfg.warc:
            from crawler.output import warc  # noqa: PLC0415  (only with --warc)

            # a write error (disk full) stops the crawl: an archive that silently stops
            # archiving is worse than a stopped crawl (the writer keeps whole records)
            self._archive = warc.open_archive(cfg, resumed=self._resumed, on_failure=self.stop)
            options["archive"] = self._archive
        return Fetcher(cfg, **options)

    def _seed_stats(self, counts: Counts, counters: dict[str, int]) -> None:
        """The whole crawl's stats so far: pages and errors from completions, the rest counted."""
        stats = self.stats
        failed = Counter(counts.failed)
        skipped = counters.get(_SKIPPED, 0)  # completed as robots_disallowed, not pages
        failed[ROBOTS_DISALLOWED] -= skipped
        for name, value in counters.items():
            if name.startswith(_ERROR):
                failed[name[len(_ERROR) :]] += value
            elif name.startswith(_STATUS):
                try:
                    stats.status[int(name[len(_STATUS) :])] += value
                except ValueError:
                    pass
        stats.errors = Counter({k: v for k, v in failed.items() if v})
        stats.pages = counts.done - skipped + counters.get(_RECORDS, 0)
        stats.pages_ok = stats.pages - sum(stats.errors.values())
        for name in _COUNTED:
            setattr(stats, name, counters.get(name, 0))
        stats.resumed_pages = stats.pages
        stats.recovered = max(counts.recovered, self._recovered)
        self._sink_errors_pushed = stats.sink_errors
        self._admitted = counts.done - skipped + counts.leased
        self._queued = counts.queued

    def _add_tally(self, tally: Tally) -> None:
        # Once a page: the fields by name (tests/test_engine.py checks these are all of
        # Tally's), not through Tally.items() and getattr/setattr by string (~3x the time).
        stats = self.stats
        pending = self._pending
        n = tally.links_found
        if n:
            stats.links_found += n
            pending["links_found"] += n
        n = tally.links_new
        if n:
            stats.links_new += n
            pending["links_new"] += n
        n = tally.out_of_scope
        if n:
            stats.out_of_scope += n
            pending["out_of_scope"] += n
        n = tally.links_invalid
        if n:
            stats.links_invalid += n
            pending["links_invalid"] += n
        n = tally.redirects
        if n:
            stats.redirects += n
            pending["redirects"] += n
        n = tally.robots_disallowed
        if n:
            stats.robots_disallowed += n
            pending["robots_disallowed"] += n
        if self._metrics is not None:
            self._metrics.on_tally(tally)

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

        def wake(_: object) -> None:
            # The dispatcher's end wakes a reader waiting on the empty queue, with a marker
            # never yielded: the reader awaits queue.get() alone, where waiting for "a page or
            # the end" with asyncio.wait cost a task and a wait a page.
            if queue.empty():
                queue.put_nowait(_END)

        dispatcher.add_done_callback(wake)
        finished = False
        try:
            while True:
                if queue.empty():
                    if dispatcher.done():
                        finished = True
                        break
                    page = await queue.get()
                else:
                    page = queue.get_nowait()
                if page is not _END:
                    yield page
        finally:
            dispatcher.remove_done_callback(wake)
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

    def _offered(self, queued: int) -> None:
        self._queued += queued
        if self._idle and self._wakeup is not None:
            self._wakeup.set()

    async def _dispatch(self) -> None:
        loop = asyncio.get_running_loop()
        state = self._state
        tasks = self._tasks
        wakeup = self._wakeup
        assert wakeup is not None
        limit = max(1, self.config.concurrency)
        max_pages = self.config.max_pages
        shared = self._shared
        grace = float(getattr(state, "idle_grace", SHARED_IDLE_GRACE)) if shared else 0.0
        idle_since: float | None = None  # shared: when nothing was queued or leased anywhere
        # A shared backend whose lease takes the crawl-wide page budget (Redis) checks it in
        # its lease step; otherwise it is read from counts() before each lease (racy across
        # processes by up to another worker's room; exact for workers of one process).
        budgeted = bool(max_pages) and shared and _takes_budget(state)
        refresh = time.monotonic() + _QUEUED_REFRESH
        # When the last lease found nothing: with a shared state, another worker's wake-up
        # leads to the next try no sooner than _SHARED_RELEASE_GAP after it (every worker's
        # offers and completions wake every worker: without it, a worker waiting for a slot
        # would ask once per wake, several futile leases a page).
        futile = 0.0
        try:
            while not self._stopped:
                if self._done:
                    await self._commit()
                if shared and time.monotonic() >= refresh:
                    # other workers lease and offer too: the local estimate drifts
                    refresh = time.monotonic() + _QUEUED_REFRESH
                    self._queued = (await state.counts()).queued
                # A finished page holds its slot until its completion is committed: a kill
                # gives back at most `concurrency` leases (the pages "in flight").
                room = limit - len(tasks) - len(self._done) - self._committing
                if max_pages and room > 0 and not budgeted:
                    # shared: the budget is the whole crawl's, every worker's leases in it
                    used = await self._crawl_used() if shared else self._admitted
                    room = min(room, max_pages - used)
                if room > 0:
                    if budgeted:  # checked in the state's lease, atomically across workers
                        leases = await state.lease(room, time.time(), budget=max_pages)  # type: ignore[call-arg]
                    else:
                        leases = await state.lease(room, time.time())
                    self._queued -= len(leases)
                    for lease in leases:
                        self._admitted += 1
                        self._held[lease.id] = lease
                        task = loop.create_task(self._process(lease))
                        tasks.add(task)
                        task.add_done_callback(partial(self._task_done, lease))
                    if leases:
                        idle_since = None
                        if len(leases) == room:
                            continue  # the room is full, or more may be due: look again
                    else:
                        futile = time.monotonic()
                if not tasks:
                    if self._done:
                        continue
                    await self._flush_records()
                    if max_pages and not shared and self._admitted >= max_pages:
                        break
                    counts = await state.counts()
                    self._queued = counts.queued
                    if max_pages and shared and _pages_done(counts) >= max_pages:
                        break  # the whole crawl's budget is spent (done, not just leased)
                    if not counts.queued and not counts.leased:
                        if not shared:
                            break
                        # Another worker may be about to offer links: done only when the
                        # crawl stayed empty for the grace period (a wake ends the wait).
                        now = time.monotonic()
                        if idle_since is None:
                            idle_since = now
                        left = grace - (now - idle_since)
                        if left <= 0:
                            break
                        await self._state_wait(min(left, _IDLE_RECHECK), futile)
                        continue
                    idle_since = None
                    # queued but not leasable here (politeness, other workers' leases): wait
                    due = state.next_due(time.time())
                    timeout = max(0.0, due - time.time()) if due is not None else _IDLE_RECHECK
                    await self._state_wait(min(timeout, _IDLE_RECHECK), futile)
                    continue
                due = state.next_due(time.time()) if room > 0 else None
                timer = (
                    loop.call_later(max(0.0, due - time.time()), wakeup.set)
                    if due is not None
                    else None
                )
                wakeup.clear()
                self._idle = True
                try:
                    if not self._done:
                        if shared and room > 0:
                            # Other workers' completions and offers free slots and add work:
                            # the state's wake-up counts as much as our own page finishing.
                            await self._wait_local_or_state(wakeup, futile)
                        else:
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

    async def _state_wait(self, timeout: float, futile: float) -> None:
        """``state.wait(timeout)``; with a shared state, not over before _SHARED_RELEASE_GAP
        has passed since ``futile`` (the last lease that found nothing)."""
        if self._shared:
            gap = futile + _SHARED_RELEASE_GAP - time.monotonic()
            if gap > 0:
                await asyncio.sleep(min(gap, timeout))
                timeout -= gap
        await self._state.wait(max(0.0, timeout))

    async def _wait_local_or_state(self, wakeup: asyncio.Event, futile: float) -> None:
        """Until the local wake-up is set or the state's wait returns (at most _IDLE_RECHECK)."""
        local = asyncio.ensure_future(wakeup.wait())
        remote = asyncio.ensure_future(self._state_wait(_IDLE_RECHECK, futile))
        try:
            await asyncio.wait({local, remote}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (local, remote):
                if not waiter.done():
                    waiter.cancel()
            await asyncio.gather(local, remote, return_exceptions=True)

    async def _crawl_used(self) -> int:
        """Pages of the whole crawl in its budget: done (robots skips aside) plus leased."""
        counts = await self._state.counts()
        self._queued = counts.queued
        return _pages_done(counts) + counts.leased

    def _task_done(self, lease: Lease, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("page task failed on %s", lease.url, exc_info=task.exception())
            if self._held.pop(lease.id, None) is not None:
                # It died before its completion was queued (a bug outside the page job's own
                # guard): complete it as failed, or its lease would stay open forever (and a
                # shared state's heartbeat would keep it alive: no worker would ever stop).
                self._done.append((lease, Outcome("internal")))
        if self._wakeup is not None:
            self._wakeup.set()

    async def _commit(self) -> None:
        """Commit the finished pages: output flushed first, then counters and completions."""
        done, self._done = self._done, []
        self._committing += len(done)
        try:
            await self._commit_batch(done)
        finally:
            self._committing -= len(done)

    async def _commit_batch(self, done: list[tuple[Lease, Outcome]]) -> None:
        sink = self._sink
        flush = getattr(sink, "flush", None) if sink is not None else None
        if flush is not None:
            try:
                flush()
            except Exception as exc:
                assert self._admission is not None
                self._admission.sink_failed("sink.flush", exc, None)
        deltas = self._deltas()
        if deltas:
            await self._state.add_counters(deltas)
        if done:
            await self._state.complete_many(done, time.time())

    def _deltas(self) -> dict[str, int]:
        # Page counters ride with their pages' completions (tallies); sink errors are the
        # crawl's own (a sink may fail outside any page).
        deltas = self._pending
        self._pending = Counter()
        errors = self.stats.sink_errors - self._sink_errors_pushed
        if errors:
            deltas["sink_errors"] += errors
            self._sink_errors_pushed = self.stats.sink_errors
        return {k: v for k, v in deltas.items() if v}

    # -- one page --

    async def _process(self, lease: Lease) -> None:
        job = self._job
        assert job is not None and self._admission is not None
        page: PageResult | None
        tally = Tally()
        try:
            try:
                page = await job.run(lease, tally)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug must not kill the crawl: record it, go on
                log.exception("internal error on %s", lease.url)
                page = PageResult(lease.url, lease.depth, lease.referrer)
                page.error, page.error_detail = "internal", f"{type(exc).__name__}: {exc}"
            skipped = page is None or (page.error == ROBOTS_DISALLOWED and page.status is None)
            if skipped:
                self._admitted -= 1  # not a page: robots.txt disallows it
                self._pending[_SKIPPED] += 1
            if page is not None:
                await self._finish(page, counted=not skipped)
            self._add_tally(tally)
            if page is None:
                outcome = Outcome(ROBOTS_DISALLOWED)
            else:
                outcome = Outcome(page.error, page.status, page.bytes)
            self._held.pop(lease.id, None)
            self._done.append((lease, outcome))
        finally:
            if self._wakeup is not None:
                self._wakeup.set()
        if self._admission.records:  # rare: no coroutine a page for an empty deque
            await self._flush_records()

    async def _flush_records(self) -> None:
        # PageResults of URLs found but never fetched (url_too_long): no lease, counted here.
        admission = self._admission
        if admission is None:
            return
        records = admission.records
        while records:
            page = records.popleft()
            self._pending[_RECORDS] += 1
            if page.error is not None:
                self._pending[_ERROR + page.error] += 1
            await self._finish(page)

    async def _finish(self, page: PageResult, *, counted: bool = True) -> None:
        stats = self.stats
        if counted:
            stats.pages += 1
            if page.error is None:
                stats.pages_ok += 1
            else:
                stats.errors[page.error] += 1
            pending = self._pending
            status = page.status
            if status is not None:
                stats.status[status] += 1
                key = _STATUS_KEYS.get(status)
                if key is None:
                    key = _STATUS_KEYS[status] = f"{_STATUS}{status}"
                pending[key] += 1
            stats.bytes += page.bytes
            stats.retries += page.retries
            pending["bytes"] += page.bytes
            pending["retries"] += page.retries
        self._update_duration()
        if self._keep:
            self.pages.append(page)
        # A user's sink or hook that raises marks the page "sink" (counted as such), and the
        # page still reaches the others: the hook, the iterator.
        if self._sink is not None:
            try:
                self._sink.page(page)
            except Exception as exc:
                self._late_sink_failure("sink.page", exc, page, counted)
        if self._on_page is not None:
            try:
                result = self._on_page(page)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self._late_sink_failure("on_page", exc, page, counted)
        queue = self._queue
        if queue is not None:
            if queue.full():
                await queue.put(page)  # the reader is behind: wait for room
            else:
                queue.put_nowait(page)

    def _late_sink_failure(
        self, where: str, exc: Exception, page: PageResult, counted: bool
    ) -> None:
        # The page is counted already: move it from ok to the "sink" errors.
        was_ok = page.error is None
        assert self._admission is not None
        self._admission.sink_failed(where, exc, page)
        if was_ok and counted:
            self.stats.pages_ok -= 1
            self.stats.errors["sink"] += 1


def _takes_budget(state: CrawlState) -> bool:
    try:
        return "budget" in inspect.signature(state.lease).parameters
    except (TypeError, ValueError):  # pragma: no cover  (a lease with no signature)
        return False


def _pages_done(counts: Counts) -> int:
    # robots.txt skips are completed without being pages (an approximation across workers:
    # a redirect target disallowed with report_skipped counts here too)
    return counts.done - counts.failed.get(ROBOTS_DISALLOWED, 0)


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
        sink: optional streaming output (see :class:`crawler.core.results.Sink`).
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
