"""The crawl's books: each finished page counted and handed on, completions committed in batches.

The dispatcher (``crawler.core.dispatch``) brings every page task's result here: ``finish``
counts the page in the stats and in the counters' deltas for the state, and hands it to the
sink, the ``on_page`` hook and the iterator's queue; ``add_tally`` adds the page's link
counters; the page's lease waits in ``done`` with its outcome until ``commit``, once per
dispatcher turn. One ``Ledger`` a crawler, made with it (its stats are the crawler's).

Of the engine's rules (``crawler.core.engine``), these are kept here:

* A page's completion is committed to the state only after ``sink.flush()`` (when the sink
  has one): a kill after the commit cannot lose the page's output lines. Completions and the
  counters' deltas go to the state in one batch per dispatcher turn, not one per link.
* The stats are the whole crawl's: ``pages``/``errors`` from ``counts()`` (completions), the
  rest from ``counters()`` (``seed_stats``, at open).
* A call of the user's code here (``Sink.page``, ``on_page``) is guarded; its exception is
  logged, counted (``sink_errors``) and marks the page ``sink``, and the page still reaches
  the others.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from crawler.core.admission import Admission, Tally
from crawler.core.page import ROBOTS_DISALLOWED
from crawler.core.results import CrawlStats, PageResult, Sink
from crawler.state import Counts, CrawlState, Lease, Outcome

__all__ = ["Ledger"]

# CrawlStats fields kept in the state's counters (summed over every run).
_COUNTED = (
    "bytes",
    "links_found",
    "links_new",
    "links_invalid",
    "links_capped",
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


class Ledger:
    """The stats, the counters' deltas and the completions of one crawler, and where each
    finished page goes (kept, the sink, ``on_page``, the iterator's queue).

    Args:
        stats: the crawler's CrawlStats (the one its user reads).
        pages: the crawler's list of kept PageResults (``keep``).
        state: the crawl state the completions and counters are committed to.
        sink: the user's sink, if any: ``page`` for each page, ``flush`` before a commit.
        on_page: the user's hook, called with each PageResult (may be a coroutine function).
        keep: keep every PageResult in ``pages``.
    """

    def __init__(
        self,
        stats: CrawlStats,
        pages: list[PageResult],
        state: CrawlState,
        sink: Sink | None,
        on_page: Callable[[PageResult], object] | None,
        *,
        keep: bool,
    ) -> None:
        self.stats = stats
        self.pages = pages
        self.state = state
        self.sink = sink
        self.on_page = on_page
        self.keep = keep
        #: The crawl's admission, set when the crawl opens (a sink's failure is told there;
        #: its ``records`` are pages to finish).
        self.admission: Admission | None = None
        #: ``crawler.output.metrics.Metrics``, set when the crawl opens with ``metrics_port``.
        self.metrics: Any = None
        #: The iterator's queue while ``async for`` reads the crawler.
        self.queue: asyncio.Queue[PageResult] | None = None
        #: Finished pages' leases and outcomes, for the next commit.
        self.done: list[tuple[Lease, Outcome]] = []
        self.pending: Counter[str] = Counter()  # counter deltas for the next commit
        self.committing = 0  # completions being committed now
        self._sink_errors_pushed = 0
        self._t0 = 0.0

    def seed_stats(self, counts: Counts, counters: dict[str, int], recovered: int) -> int:
        """The whole crawl's stats so far: pages and errors from completions, the rest counted.

        ``recovered``: leases an earlier open of this run recovered. Returns the leases
        completed as robots.txt skips (completed, not pages).
        """
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
        stats.recovered = max(counts.recovered, recovered)
        self._sink_errors_pushed = stats.sink_errors
        return skipped

    def start_clock(self) -> None:
        """The crawl starts now (``stats.started``; ``stats.duration`` counts from here)."""
        self.stats.started = time.time()
        self._t0 = time.monotonic()

    def update_duration(self) -> None:
        if self._t0:
            self.stats.duration = time.monotonic() - self._t0

    def add_tally(self, tally: Tally) -> None:
        # Once a page: the fields by name (tests/test_engine.py checks these are all of
        # Tally's), not through Tally.items() and getattr/setattr by string (~3x the time).
        stats = self.stats
        pending = self.pending
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
        n = tally.links_capped
        if n:
            stats.links_capped += n
            pending["links_capped"] += n
        n = tally.redirects
        if n:
            stats.redirects += n
            pending["redirects"] += n
        n = tally.robots_disallowed
        if n:
            stats.robots_disallowed += n
            pending["robots_disallowed"] += n
        if self.metrics is not None:
            self.metrics.on_tally(tally)

    def skipped(self) -> None:
        """A lease robots.txt disallowed: completed, but not a page (counted apart)."""
        self.pending[_SKIPPED] += 1

    async def commit(self) -> None:
        """Commit the finished pages: output flushed first, then counters and completions."""
        done, self.done = self.done, []
        self.committing += len(done)
        try:
            await self._commit_batch(done)
        finally:
            self.committing -= len(done)

    async def _commit_batch(self, done: list[tuple[Lease, Outcome]]) -> None:
        sink = self.sink
        flush = getattr(sink, "flush", None) if sink is not None else None
        if flush is not None:
            try:
                flush()
            except Exception as exc:
                assert self.admission is not None
                self.admission.sink_failed("sink.flush", exc, None)
        deltas = self._deltas()
        if deltas:
            await self.state.add_counters(deltas)
        if done:
            await self.state.complete_many(done, time.time())

    def _deltas(self) -> dict[str, int]:
        # Page counters ride with their pages' completions (tallies); sink errors are the
        # crawl's own (a sink may fail outside any page).
        deltas = self.pending
        self.pending = Counter()
        errors = self.stats.sink_errors - self._sink_errors_pushed
        if errors:
            deltas["sink_errors"] += errors
            self._sink_errors_pushed = self.stats.sink_errors
        return {k: v for k, v in deltas.items() if v}

    async def flush_records(self) -> None:
        # PageResults of URLs found but never fetched (url_too_long): no lease, counted here.
        admission = self.admission
        if admission is None:
            return
        records = admission.records
        while records:
            page = records.popleft()
            self.pending[_RECORDS] += 1
            if page.error is not None:
                self.pending[_ERROR + page.error] += 1
            await self.finish(page)

    async def finish(self, page: PageResult, *, counted: bool = True) -> None:
        """Count a finished page (unless ``counted`` is False: a robots.txt skip reported)
        and hand it to what takes it: kept, the sink, ``on_page``, the iterator's queue."""
        stats = self.stats
        if counted:
            stats.pages += 1
            if page.error is None:
                stats.pages_ok += 1
            else:
                stats.errors[page.error] += 1
                if page.error == "tls" and page.error_detail:  # "REASON (OpenSSL's words)"
                    detail = page.error_detail.removeprefix("host unreachable: ")  # (robots)
                    stats.tls_reasons[detail.partition(" (")[0]] += 1
            pending = self.pending
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
        self.update_duration()
        if self.keep:
            self.pages.append(page)
        # A user's sink or hook that raises marks the page "sink" (counted as such), and the
        # page still reaches the others: the hook, the iterator.
        if self.sink is not None:
            try:
                self.sink.page(page)
            except Exception as exc:
                self._late_sink_failure("sink.page", exc, page, counted)
        if self.on_page is not None:
            try:
                result = self.on_page(page)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                self._late_sink_failure("on_page", exc, page, counted)
        queue = self.queue
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
        assert self.admission is not None
        self.admission.sink_failed(where, exc, page)
        if was_ok and counted:
            self.stats.pages_ok -= 1
            self.stats.errors["sink"] += 1
