"""The crawl engine: the crawl's lifecycle, behind one crawl state protocol.

Theory of operation
-------------------
The crawl's state (frontier, seen set, leases, counters, robots.txt, settings) lives behind
``crawler.state.CrawlState``: memory by default, SQLite under ``config.state``, or the one
injected with ``Crawler(config, state=...)``. The engine never builds a backend itself
(``open_state`` picks it from the state URL). Five pieces, one concern each:

* this module, ``Crawler``: open the state (settings stored or checked, stats seeded from the
  whole crawl so far, seeds offered), start the dispatcher, close everything at the end;
* ``crawler.core.dispatch``: one *dispatcher* task that leases requests from the state (which
  applies per-origin concurrency, delays and round-robin) and starts one page task per lease,
  at most ``concurrency`` at once;
* ``crawler.core.ledger``: the books: each finished page counted and handed on (the sink,
  ``on_page``, the iterator), finished pages committed in batches;
* ``crawler.core.page``: the page job (robots.txt, fetch hop by hop, feed the extractor chunk by
  chunk, a pull-based body);
* ``crawler.core.admission``: the one admission rule (canonical URL, scope, depth, URL length,
  nofollow, ``offer_many`` once per chunk) and what is listed to the sink.

Rules the engine keeps:

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
no page task is left; ``max_time`` seconds after it opened it is stopped as by ``stop()``
(``stats.time_limit`` says so). Leaving the ``async with`` block, leaving an ``async for`` over the
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
  worker offers, completes or retries) as well as on its own pages: never a busy poll
  (``crawler.core.dispatch`` says how the work then gathers on the workers that hold the
  ``per_host`` slots, and the others wait cheaply);
* stopping: only after nothing was queued and nothing leased anywhere for a grace period
  (``crawler.core.dispatch.SHARED_IDLE_GRACE``, or the state's ``idle_grace``), as a normal
  end; a clean stop gives the unfinished leases back (``retry`` due now), so that no one waits
  for them to expire;
* ``max_pages`` is the whole crawl's budget: checked by the backend's lease (``budget=``)
  when it takes one (Redis: atomic across workers), else read from ``counts()``.
A state call that blocks (the Redis backend retrying through an outage) just blocks: the
engine puts no timeout on a state call while crawling.

The open step also starts what the config asks for besides the state, each imported only
then: the metrics server (``metrics_port``: ``crawler.output.metrics``), the WARC writer
(``warc``: ``crawler.output.warc``), the page job's renderer (``render``). They are closed
when the crawler is (the browser first, the WARC writer after the fetcher, which saves the
cookie jar), on every path: a normal end, a stop, a cancelled task, a failed open step.

Limits not in CrawlConfig are module constants: ``crawler.core.page.MAX_CRAWL_DELAY`` caps a
robots.txt Crawl-delay, ITER_QUEUE bounds the pages buffered for ``async for``, and
``crawler.core.dispatch``'s bound the dispatcher's waits.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from typing import Any

from crawler.config import CrawlConfig
from crawler.core import settings as crawl_settings
from crawler.core.admission import Admission, Tally
from crawler.core.dispatch import Dispatcher
from crawler.core.ledger import Ledger
from crawler.core.page import MAX_CRAWL_DELAY, REDIRECT_STATUSES, PageJob
from crawler.core.results import CrawlResult, CrawlStats, PageResult, Sink
from crawler.core.robots import RobotsCache, robots_agent
from crawler.http.client import Fetcher
from crawler.state import CrawlState, state_for
from crawler.urls.policy import UrlPolicy

__all__ = ["Crawler", "crawl", "crawl_sync"]

log = logging.getLogger("crawler")

#: Pages buffered for ``async for`` before page tasks wait for the consumer.
ITER_QUEUE = 256
# Re-exported for code that imported them from here before the split.
_COMPAT = (MAX_CRAWL_DELAY, REDIRECT_STATUSES)
_END = PageResult("", 0)  # the iterator's end marker (see _iterate)
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
        head_facts: fill ``PageResult.head_facts`` (the extractor reads each HTML head).

    Example: ``async with Crawler(cfg) as c: async for page in c: print(page.url)``.
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
        head_facts: bool = False,
    ) -> None:
        cfg = config.validated()
        self.config = cfg
        self.stats = CrawlStats()
        self.pages: list[PageResult] = []
        self._sink = sink
        self._page_links = page_links
        self._link_record = link_record
        self._given = given
        self._collect_ids = collect_ids
        self._report_skipped = report_skipped
        self._head_facts = head_facts
        self._state: CrawlState = state if state is not None else state_for(cfg)
        self._state_open = False
        # An in-memory state made here dies with this crawler: nobody resumes it, so what its
        # page budget cannot reach need not be queued (`_bound_queues`).
        self._own_memory = state is None and not cfg.state
        self._policy = UrlPolicy.from_config(cfg)
        # The books (stats, pages kept, commits) and the leases' dispatcher: made now, so
        # that stats, queued and in_flight read true before the crawl opens.
        self._ledger = Ledger(
            self.stats,
            self.pages,
            self._state,
            sink,
            on_page,
            keep=sink is None if keep_results is None else keep_results,
        )
        self._dispatcher = Dispatcher(self._state, self._ledger)
        self._admission: Admission | None = None
        self._job: PageJob | None = None
        self._fetcher: Fetcher | None = None
        self._robots: RobotsCache | None = None
        self._metrics: Any = None  # crawler.output.metrics.Metrics, with config.metrics_port
        self._archive: Any = None  # crawler.output.warc's writer, with config.warc
        self._io_closed = False
        self._dispatch_task: asyncio.Task[None] | None = None
        self._deadline: asyncio.TimerHandle | None = None  # max_time's timer
        self._resumed = False
        self._recovered = 0
        self._opened = False
        self._closed = False

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
        return len(self._dispatcher.tasks)

    @property
    def queued(self) -> int:
        """Requests waiting in the state: an estimate kept between reads of ``counts()``
        (with a shared state, read again every couple of seconds)."""
        return max(0, self._dispatcher.queued)

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
        """Ask for a prompt, clean stop (safe from a signal handler); ends a metrics linger too."""
        if self._metrics is not None:
            self._metrics.interrupt()
        self._halt()

    def _halt(self) -> None:
        if self._closed or self._dispatcher.stopped:
            return
        self._dispatcher.stopped = True
        self.stats.cancelled = True
        if self._dispatch_task is not None:
            self._dispatch_task.cancel()

    def _time_up(self) -> None:
        """``max_time`` passed: stop as ``stop()`` does, the stats saying why."""
        if self._closed or self._dispatcher.stopped:
            return
        self.stats.time_limit = True
        self._halt()  # not stop(): a crawl that ran its time still lingers

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
        self._ledger.update_duration()
        return CrawlResult(links=self.links, pages=self.pages, stats=self.stats)

    def __aiter__(self) -> AsyncIterator[PageResult]:
        return self._iterate()

    async def aclose(self) -> None:
        """Stop whatever runs, commit finished pages, close the state, the session, the sink."""
        if self._closed:
            return
        self._closed = True
        if self._deadline is not None:
            self._deadline.cancel()
        try:
            dispatcher = self._dispatch_task
            if dispatcher is not None and not dispatcher.done():
                self.stats.cancelled = True
                dispatcher.cancel()
            if dispatcher is not None:
                await asyncio.gather(dispatcher, return_exceptions=True)
            await self._dispatcher.cancel_tasks()
            if self._state_open:
                try:
                    await self._ledger.commit()
                    await self._dispatcher.give_back()
                finally:
                    self._state_open = False
                    await self._state.close()
        finally:
            await self._close_io(keep_metrics=True)
            self._ledger.update_duration()
            if self._sink is not None:
                try:
                    self._sink.close()
                except Exception:
                    log.exception("sink.close() failed")
            if self._metrics is not None:  # last: a linger's scrape sees the final values
                await self._metrics.stop(self.config.metrics_linger)

    async def _close_io(self, *, keep_metrics: bool = False) -> None:
        """Close what the open step made besides the state, each on its own (one failing must
        not keep the others open): the browser, the fetcher (it saves the cookie jar), the WARC
        writer (after the fetcher), the metrics server (unless ``keep_metrics``: aclose's)."""
        if self._io_closed:
            return
        self._io_closed = True
        fetcher, archive = self._fetcher, self._archive
        if self._job is not None:
            await self._job.close()  # (the browser, with --render)
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
        if self._metrics is not None and not keep_metrics:
            await self._metrics.stop()  # logs its own failure: it must not fail the close

    # -- lifecycle --

    async def _open(self) -> None:
        if self._opened:
            return
        self._opened = True
        state = self._state
        cfg = self.config
        if cfg.max_time:  # the run's clock starts as it opens (a state that waits counts)
            self._deadline = asyncio.get_running_loop().call_later(cfg.max_time, self._time_up)
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
        if stored is None and self._dispatcher.shared and not cfg.seeds:
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
        ledger = self._ledger
        skipped = ledger.seed_stats(counts, await state.counters(), self._recovered)
        self._dispatcher.open(counts, skipped)
        self._fetcher = await self._open_io(cfg)
        self._robots = RobotsCache(
            self._fetcher, robots_agent(cfg), self._policy.in_scope, store=state
        )
        self._admission = Admission(
            cfg, self._policy, state, self.stats, self._sink, keep=ledger.keep,
            on_offer=self._dispatcher.offered,
        )  # fmt: skip
        ledger.admission = self._admission
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
            head_facts=self._head_facts,
        )
        self._bound_queues(state)
        ledger.start_clock()
        start = getattr(self._sink, "start", None)
        if start is not None:
            # the sink's output: truncated for a new crawl, its cut last line repaired on resume
            try:
                start(self._resumed)
            except Exception as exc:
                self._admission.sink_failed("sink.start", exc, None)
        tally = Tally()
        await self._admission.seeds(cfg.seeds, tally)  # a sink error here is logged, counted
        ledger.add_tally(tally)
        await ledger.commit()  # the seeds' lines out and their counts in, before any page

    def _bound_queues(self, state: CrawlState) -> None:
        """With ``max_pages``, this crawler's own memory state queues only what the budget can
        still reach (``MemoryState.bound_queues``): an origin whose every lease is sure to be
        a page (robots.txt allows all, or is ignored) gets at most as many requests queued
        ahead of a new URL as pages are left; the rest are listed, not kept."""
        bound = getattr(state, "bound_queues", None)
        cfg = self.config
        if not (cfg.max_pages and self._own_memory and callable(bound)):
            return
        budget = cfg.max_pages - self._dispatcher.admitted
        job, robots, ignore = self._job, self._robots, cfg.ignore_robots
        assert job is not None and robots is not None

        def room(origin: str) -> int | None:
            if not ignore and not robots.allows_all(origin):
                return None  # a lease may be disallowed, and give its budget back
            return budget - job.fetched

        bound(room)

    async def _open_io(self, cfg: CrawlConfig) -> Fetcher:
        """The fetcher, with the metrics server and the WARC writer when they are asked for
        (each imported only then: start-up must not pay for what is not used)."""
        options: dict[str, Any] = {}
        if cfg.metrics_port:
            from crawler.output.metrics import Metrics  # noqa: PLC0415  (only with metrics_port)

            metrics = Metrics()
            await metrics.start(cfg.metrics_host, cfg.metrics_port, self)
            self._metrics = self._ledger.metrics = metrics
            options["observer"] = metrics.on_response
        if cfg.warc:
            from crawler.output import warc  # noqa: PLC0415  (only with --warc)

            # a write error (disk full) stops the crawl: an archive that silently stops
            # archiving is worse than a stopped crawl (the writer keeps whole records)
            self._archive = warc.open_archive(cfg, resumed=self._resumed, on_failure=self.stop)
            options["archive"] = self._archive
        return Fetcher(cfg, **options)

    def _start(self) -> asyncio.Task[None]:
        if self._dispatch_task is None:
            job = self._job
            assert job is not None
            cfg = self.config
            run = self._dispatcher.run(job, cfg.concurrency, cfg.max_pages)
            self._dispatch_task = asyncio.get_running_loop().create_task(run)
        return self._dispatch_task

    async def _iterate(self) -> AsyncIterator[PageResult]:
        opened_here = not self._opened
        if opened_here:
            await self._open()
        queue: asyncio.Queue[PageResult] = asyncio.Queue(ITER_QUEUE)
        self._ledger.queue = queue
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
            if self._ledger.queue is queue:
                self._ledger.queue = None
            if not finished:
                # Leaving the loop early (break, an exception, aclose(), the task cancelled)
                # stops the crawl: no page task may wait forever on a queue nobody reads.
                self.stop()
                await asyncio.gather(dispatcher, return_exceptions=True)
            if opened_here:
                await self.aclose()


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
