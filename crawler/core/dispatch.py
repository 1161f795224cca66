"""The dispatcher: lease requests from the crawl state and run one page task per lease.

One dispatcher task a crawler (``Dispatcher.run``) leases requests from the state (which
applies per-origin concurrency, delays and round-robin) and starts one page task per lease
(``crawler.core.page.PageJob.run``), at most ``concurrency`` at once; a finished page holds
its slot until the ledger (``crawler.core.ledger``) has committed its completion, once per
dispatcher turn. With nothing to lease, it waits for a wake-up: a page task finishing, an
offer of new links while it is idle, the state's next due time. It never polls.

With a shared state (``CrawlState.shared``: Redis, many worker processes on one crawl), other
workers' leases are work in progress (their pages may offer more links): a worker with room
and nothing to lease waits on ``state.wait`` (the state's wake-up when any worker offers,
completes or retries) as well as on its own pages: never a busy poll (at most one re-check a
second while idle, and after a lease that found nothing, the next one a wake-up triggers no
sooner than ``_SHARED_RELEASE_GAP``). So when politeness is the limit (few origins, their
``per_host`` slots all taken), a worker that finishes a page takes the freed slot again
before the waiting ones ask: the work gathers on the workers that hold the slots (the
throughput is the slots' either way) and the others wait cheaply. It stops only after
nothing was queued and nothing leased anywhere for a grace period (``SHARED_IDLE_GRACE``, or
the state's ``idle_grace``), as a normal end; a clean stop gives the unfinished leases back
(``give_back``: ``retry`` due now), so that no one waits for them to expire. ``max_pages``
is the whole crawl's budget: checked by the backend's lease (``budget=``) when it takes one
(Redis: atomic across workers), else read from ``counts()``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from functools import partial

from crawler.core.admission import Tally
from crawler.core.ledger import Ledger
from crawler.core.page import ROBOTS_DISALLOWED, PageJob
from crawler.core.results import PageResult
from crawler.state import Counts, CrawlState, Lease, Outcome

__all__ = ["SHARED_IDLE_GRACE", "Dispatcher"]

log = logging.getLogger("crawler")

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
# worker's wake-up may trigger (see Dispatcher.run).
_SHARED_RELEASE_GAP = 0.1
# Seconds a clean stop waits to give a shared state back its unfinished leases.
_GIVE_BACK_TIMEOUT = 10.0


class Dispatcher:
    """The leases of one crawler and the page tasks that run on them.

    Made with the crawler (``queued`` and ``tasks`` are read before the crawl opens);
    ``open`` when the crawl opens; ``run`` is the body of the dispatcher task.

    Args:
        state: the crawl state leases are taken from.
        ledger: where finished pages are counted, handed on and committed.
    """

    def __init__(self, state: CrawlState, ledger: Ledger) -> None:
        self.state = state
        self.ledger = ledger
        #: Other processes work on the same crawl (``CrawlState.shared``).
        self.shared = bool(getattr(state, "shared", False))
        self.tasks: set[asyncio.Task[None]] = set()
        #: Leases taken and not yet finished (a page task runs on each): given back to a
        #: shared state at a clean stop, so that no other worker waits for them to expire.
        self.held: dict[int, Lease] = {}
        self.wakeup: asyncio.Event | None = None
        self.idle = False
        #: Set by ``Crawler.stop``: lease nothing more.
        self.stopped = False
        self.admitted = 0  # pages of the budget leased (robots.txt skips given back)
        self.queued = 0  # an estimate for progress lines (the state has the truth)

    def open(self, counts: Counts, skipped: int) -> None:
        """The crawl opens with ``counts`` (``skipped``: leases completed as robots.txt skips)."""
        self.admitted = counts.done - skipped + counts.leased
        self.queued = counts.queued
        self.wakeup = asyncio.Event()

    def offered(self, queued: int) -> None:
        """Admission queued ``queued`` new requests (its ``on_offer``)."""
        self.queued += queued
        if self.idle and self.wakeup is not None:
            self.wakeup.set()

    async def run(self, job: PageJob, concurrency: int, max_pages: int) -> None:
        """Lease and run pages until the crawl ends, ``stopped`` is set or the task is
        cancelled; page tasks still running then are cancelled."""
        loop = asyncio.get_running_loop()
        state = self.state
        ledger = self.ledger
        tasks = self.tasks
        wakeup = self.wakeup
        assert wakeup is not None
        limit = max(1, concurrency)
        shared = self.shared
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
            while not self.stopped:
                if ledger.done:
                    await ledger.commit()
                if shared and time.monotonic() >= refresh:
                    # other workers lease and offer too: the local estimate drifts
                    refresh = time.monotonic() + _QUEUED_REFRESH
                    self.queued = (await state.counts()).queued
                # A finished page holds its slot until its completion is committed: a kill
                # gives back at most `concurrency` leases (the pages "in flight").
                room = limit - len(tasks) - len(ledger.done) - ledger.committing
                if max_pages and room > 0 and not budgeted:
                    # shared: the budget is the whole crawl's, every worker's leases in it
                    used = await self._crawl_used() if shared else self.admitted
                    room = min(room, max_pages - used)
                if room > 0:
                    if budgeted:  # checked in the state's lease, atomically across workers
                        leases = await state.lease(room, time.time(), budget=max_pages)  # type: ignore[call-arg]
                    else:
                        leases = await state.lease(room, time.time())
                    self.queued -= len(leases)
                    for lease in leases:
                        self.admitted += 1
                        self.held[lease.id] = lease
                        task = loop.create_task(self._process(job, lease))
                        tasks.add(task)
                        task.add_done_callback(partial(self._task_done, lease))
                    if leases:
                        idle_since = None
                        if len(leases) == room:
                            continue  # the room is full, or more may be due: look again
                    else:
                        futile = time.monotonic()
                if not tasks:
                    if ledger.done:
                        continue
                    await ledger.flush_records()
                    if max_pages and not shared and self.admitted >= max_pages:
                        break
                    counts = await state.counts()
                    self.queued = counts.queued
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
                self.idle = True
                try:
                    if not ledger.done:
                        if shared and room > 0:
                            # Other workers' completions and offers free slots and add work:
                            # the state's wake-up counts as much as our own page finishing.
                            await self._wait_local_or_state(wakeup, futile)
                        else:
                            await wakeup.wait()
                finally:
                    self.idle = False
                    if timer is not None:
                        timer.cancel()
            await ledger.flush_records()
        finally:
            if tasks:
                ledger.stats.cancelled = True
                await self.cancel_tasks()

    async def _state_wait(self, timeout: float, futile: float) -> None:
        """``state.wait(timeout)``; with a shared state, not over before _SHARED_RELEASE_GAP
        has passed since ``futile`` (the last lease that found nothing)."""
        if self.shared:
            gap = futile + _SHARED_RELEASE_GAP - time.monotonic()
            if gap > 0:
                await asyncio.sleep(min(gap, timeout))
                timeout -= gap
        await self.state.wait(max(0.0, timeout))

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
        counts = await self.state.counts()
        self.queued = counts.queued
        return _pages_done(counts) + counts.leased

    def _task_done(self, lease: Lease, task: asyncio.Task[None]) -> None:
        self.tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("page task failed on %s", lease.url, exc_info=task.exception())
            if self.held.pop(lease.id, None) is not None:
                # It died before its completion was queued (a bug outside the page job's own
                # guard): complete it as failed, or its lease would stay open forever (and a
                # shared state's heartbeat would keep it alive: no worker would ever stop).
                self.ledger.done.append((lease, Outcome("internal")))
        if self.wakeup is not None:
            self.wakeup.set()

    async def cancel_tasks(self) -> None:
        tasks = list(self.tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def give_back(self) -> None:
        """Return the leases of unfinished pages to a shared state, due at once.

        Another worker takes them now rather than when they expire. A state of one process
        (memory, SQLite) recovers them when it is next opened (``counts().recovered``).
        """
        held, self.held = self.held, {}
        if not self.shared or not held:
            return
        now = time.time()
        state = self.state
        try:
            # bounded: a stop during an outage must not hang on it (the leases expire)
            await asyncio.wait_for(
                asyncio.gather(*(state.retry(lease, now, now) for lease in held.values())),
                _GIVE_BACK_TIMEOUT,
            )
        except Exception as exc:
            log.warning("could not give back %d leases: %s", len(held), exc or type(exc).__name__)

    # -- one page --

    async def _process(self, job: PageJob, lease: Lease) -> None:
        ledger = self.ledger
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
                self.admitted -= 1  # not a page: robots.txt disallows it
                ledger.skipped()
            if page is not None:
                await ledger.finish(page, counted=not skipped)
            ledger.add_tally(tally)
            if page is None:
                outcome = Outcome(ROBOTS_DISALLOWED)
            else:
                outcome = Outcome(page.error, page.status, page.bytes)
            self.held.pop(lease.id, None)
            ledger.done.append((lease, outcome))
        finally:
            if self.wakeup is not None:
                self.wakeup.set()
        if job.admission.records:  # rare: no coroutine a page for an empty deque
            await ledger.flush_records()


def _takes_budget(state: CrawlState) -> bool:
    try:
        return "budget" in inspect.signature(state.lease).parameters
    except (TypeError, ValueError):  # pragma: no cover  (a lease with no signature)
        return False


def _pages_done(counts: Counts) -> int:
    # robots.txt skips are completed without being pages (an approximation across workers:
    # a redirect target disallowed with report_skipped counts here too)
    return counts.done - counts.failed.get(ROBOTS_DISALLOWED, 0)
