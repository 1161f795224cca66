"""MemoryState: the in-memory crawl state (the default backend, ``open_state(None)``).

Everything lives in this process and dies with it; nothing is written anywhere. Built on
the same two structures the engine used before the state protocol:

* the queue is ``crawler.state.frontier.OriginQueues`` (per-origin breadth-first FIFOs served
  round-robin, per-origin concurrency and delay, idle origins forgotten once their delay
  has passed), holding one compact tuple per queued request;
* the seen set is ``crawler.state.frontier.MemorySeenSet`` (8 bytes a slot) of fingerprints.

The fingerprint is Python's ``hash(str)`` (keyed SipHash, random per process): it is never
persisted, so it need not be stable, and it is free (a str caches its hash). A persistent
backend uses ``crawler.urls.fingerprint`` instead.

Leases: each lease gets an id and ``expires = now + lease_ttl``. The only holder of a memory
lease is this process, so a lease is never taken back while the state is open; a state
closed with leases open gives them back to the queue when it is opened again
(``counts().recovered``), the rule SQLite applies to a process that died. Completing or
retrying a lease that is no longer open (done already, or recovered) changes nothing.

What is kept per origin stays bounded on wide crawls: the queues forget idle origins; the
robots.txt bodies and the origins' own delays (robots Crawl-delay, re-applied when a
forgotten origin comes back) are LRU tables of at most ``MAX_ROBOTS_ORIGINS`` entries (and
``MAX_ROBOTS_CACHE_BYTES`` of bodies); the per-host page counts exist only with a
``max_pages_per_host`` budget (one int per host: the budget must remember every host).

What the crawl's limits make useless is not kept (``bound_queues``, set by the engine on the
state it made itself for a ``max_pages`` crawl): a new URL that the page budget can no longer
reach (its origin already has as many requests queued ahead of it as pages are left) is
marked seen and listed as ever, but not queued (``trimmed`` counts them). Without it, 10
pages of 500,000 links with ``--max-pages 10`` queued 5,000,000 URLs (~1 GB) to fetch none.
"""

from __future__ import annotations

import asyncio
import heapq
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from crawler.state.base import (
    MAX_ROBOTS_CACHE_BYTES,
    MAX_ROBOTS_ORIGINS,
    Candidate,
    Counts,
    Lease,
    Outcome,
    StateError,
    StoredRobots,
    wait_event,
)
from crawler.state.frontier import MemorySeenSet, OriginQueues

__all__ = ["DEFAULT_LEASE_TTL", "MemoryState"]

#: Seconds a lease is valid for (``Lease.expires = now + lease_ttl``).
DEFAULT_LEASE_TTL = 300.0

_MASK64 = (1 << 64) - 1

# A queued request: (url, depth, referrer, origin, kind, attempts). A tuple, not a Candidate
# or a Lease: ~88 bytes a request against ~130 for a Candidate holding its fingerprint.
_Item = tuple[str, int, str | None, str, int, int]


class MemoryState:
    """The in-memory CrawlState (see the module docstring).

    Args:
        lease_ttl: seconds from ``lease`` to a lease's ``expires``.
    """

    location = ""
    shared = False

    def __init__(self, *, lease_ttl: float = DEFAULT_LEASE_TTL) -> None:
        self.lease_ttl = lease_ttl
        self._opened = False
        self._ever_opened = False
        self._default_delay = 0.0
        self._max_per_host = 0
        self._queues: OriginQueues[_Item] = OriginQueues()
        self._seen = MemorySeenSet()
        # The local probe, once a link the intake has not seen lately: the seen set's own
        # (compiled) contains_fp, not a method frame around it (the method below documents it).
        self.seen = self._seen.contains_fp  # type: ignore[method-assign]
        # retried requests waiting for their not_before: (not_before, seq, item)
        self._held: list[tuple[float, int, _Item]] = []
        self._seq = 0
        self._leased: dict[int, Lease] = {}
        self._next_id = 0
        self._host_count: dict[str, int] = {}
        self._done = 0
        self._failed: dict[str, int] = {}
        self._recovered = 0
        self._counters: dict[str, int] = {}
        self._robots: OrderedDict[str, StoredRobots] = OrderedDict()
        self._robots_bytes = 0
        self._delays: OrderedDict[str, float] = OrderedDict()
        self._settings: str | None = None
        self._event = asyncio.Event()
        self._room: Callable[[str], int | None] | None = None
        #: new URLs not queued because the page budget could not reach them (``bound_queues``)
        self.trimmed = 0

    def __repr__(self) -> str:
        return f"<MemoryState queued={len(self._queues) + len(self._held)} seen={len(self._seen)}>"

    # -- lifecycle --

    async def open(self, *, per_host: int, delay: float, max_pages_per_host: int) -> None:
        """Start (or, after ``close``, continue): open leases go back to the queue.

        Raises:
            StateError: it is open already (a second open would take back live leases).
        """
        if self._opened:
            raise StateError("the memory state is open already")
        queues = self._queues
        queues._per_host = max(1, per_host)
        queues._delay = delay
        self._default_delay = delay
        self._max_per_host = max(0, max_pages_per_host)
        for host in queues._hosts.values():
            host.delay = max(delay, self._delays.get(host.origin, 0.0))
        self._event = asyncio.Event()  # bound to the loop that uses it, not an earlier one
        if self._ever_opened:
            now = time.time()  # the protocol's clock (open is not passed a "now")
            recovered = list(self._leased.values())
            self._leased.clear()
            for lease in recovered:
                queues.release(lease.origin, now)
                self._queue(_item_of(lease))
            self._recovered = len(recovered)
        self._opened = self._ever_opened = True

    async def close(self) -> None:
        """Nothing to write; the state stays usable by a later ``open`` of this object."""
        self._opened = False

    def fingerprint(self, url: str) -> int:
        """Python's keyed ``hash`` (random per process: this state is never persisted)."""
        return (hash(url) & _MASK64) or 1

    def seen(self, fp: int) -> bool:
        """Whether ``fp`` was accepted by ``offer_many`` before (a local, synchronous probe)."""
        return self._seen.contains_fp(fp)

    async def offer_seen(self, fps: Sequence[int]) -> int:
        """Mark fingerprints seen, none queued: how many were new (``offer_many`` of
        ``queue=False`` candidates, without the candidates; what the intake keeps of the URLs
        out of scope). Only here: a persistent state keeps each URL and its referrer, to list
        a killed page's discoveries again."""
        return int(self._seen.update_fps(fps))

    def probe_parts(self) -> tuple[MemorySeenSet, None]:
        """What ``seen`` reads and how ``fingerprint`` hashes (None: Python's ``hash``)."""
        return self._seen, None

    @property
    def origins_held(self) -> int:
        """Origins the queues hold (with work, in flight, or within their delay): what a wide
        crawl's memory per origin follows; idle origins are forgotten."""
        return self._queues.origins

    def bound_queues(self, room: Callable[[str], int | None] | None) -> None:
        """Queue a new URL only if it can still be leased: ``room(origin)`` is how many more
        of the origin's requests can be leased at most (the pages left in the budget, when
        each of its leases is sure to count as a page), None when that is not known (no
        bound). A URL with at least that many requests of its origin ahead of it (`ahead`)
        is marked seen, not queued. Only for a state nobody resumes (a URL not queued is
        never queued later, whatever a later run's budget); None: every URL is queued."""
        self._room = room

    # -- the frontier --

    def _queue(self, item: _Item) -> None:
        origin = item[3]
        delays = self._delays
        if delays and origin in delays and not self._queues.knows(origin):
            self._queues.set_delay(origin, delays[origin])  # a forgotten origin is back
        self._queues.push_item(origin, item[1], item)

    async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        add = self._seen.add_fp
        queues = self._queues
        push = queues.push_item
        knows = queues.knows
        delays = self._delays
        budget = self._max_per_host
        host_count = self._host_count
        accepted: list[Candidate] = []
        queued = False
        room = self._room
        at: tuple[str, int] | None = None  # (origin, depth) that `left` is of
        left: int | None = None
        for c in candidates:
            if not add(c.fp):
                continue
            accepted.append(c)
            if not c.queue:
                continue
            if budget:
                n = host_count.get(c.host, 0)
                if n >= budget:
                    continue
                host_count[c.host] = n + 1  # (counted even when trimmed: as if queued)
            origin = c.origin
            if room is not None:  # (once per origin and depth of a chunk, not once a URL)
                if at is None or at[0] != origin or at[1] != c.depth:
                    at = (origin, c.depth)
                    r = room(origin)
                    left = None if r is None else r - queues.ahead(origin, c.depth)
                if left is not None:
                    if left <= 0:
                        self.trimmed += 1
                        continue
                    left -= 1
            if delays and origin in delays and not knows(origin):
                queues.set_delay(origin, delays[origin])
            push(origin, c.depth, (c.url, c.depth, c.referrer, origin, c.kind, 0))
            queued = True
        if queued:
            self._event.set()
        return accepted

    def _release_held(self, now: float) -> None:
        held = self._held
        while held and held[0][0] <= now:
            self._queue(heapq.heappop(held)[2])

    async def lease(self, n: int, now: float) -> list[Lease]:
        if self._held and self._held[0][0] <= now:
            self._release_held(now)
        items = self._queues.pop_many(n, now)
        if not items:
            return []
        expires = now + self.lease_ttl
        first = self._next_id + 1
        self._next_id += len(items)
        # an item is (url, depth, referrer, origin, kind, attempts): Lease's fields in order
        out = [Lease(i, *item, expires) for i, item in enumerate(items, first)]
        self._leased.update(zip(range(first, first + len(out)), out, strict=True))
        return out

    async def complete(self, lease: Lease, outcome: Outcome, now: float) -> None:
        if self._leased.pop(lease.id, None) is None:
            return  # not open: completed already, or recovered by a reopen
        self._queues.release(lease.origin, now)
        self._done += 1
        if outcome.error is not None:
            self._failed[outcome.error] = self._failed.get(outcome.error, 0) + 1
        self._event.set()

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        leased = self._leased
        release = self._queues.release
        failed = self._failed
        n = 0
        for lease, outcome in done:
            if leased.pop(lease.id, None) is None:
                continue
            release(lease.origin, now)
            n += 1
            if outcome.error is not None:
                failed[outcome.error] = failed.get(outcome.error, 0) + 1
        if n:
            self._done += n
            self._event.set()

    async def retry(self, lease: Lease, not_before: float, now: float) -> None:
        if self._leased.pop(lease.id, None) is None:
            return
        self._queues.release(lease.origin, now)
        item = _item_of(lease)
        if not_before > now:
            self._seq += 1
            heapq.heappush(self._held, (not_before, self._seq, item))
        else:
            self._queue(item)
        self._event.set()

    def borrow_slot(self, origin: str, now: float) -> float | None:
        """One of ``origin``'s politeness slots for a request of the browser (``--render``):
        0.0 when taken (``return_slot`` gives it back), else ``OriginQueues.borrow``'s wait."""
        delays = self._delays
        if delays and origin in delays and not self._queues.knows(origin):
            self._queues.set_delay(origin, delays[origin])  # a forgotten origin is back
        return self._queues.borrow(origin, now)

    def want_slot(self, origin: str, delta: int, now: float) -> None:
        """A borrower starts (``delta`` 1) or stops (-1) waiting for ``origin``'s next slot:
        while one waits, the origin's requests are not leased (``OriginQueues.want``)."""
        self._queues.want(origin, delta, now)
        if delta < 0:
            self._event.set()

    def return_slot(self, origin: str, now: float) -> None:
        self._queues.release(origin, now)
        self._event.set()  # the dispatcher may lease from the origin again

    def set_delay(self, origin: str, delay: float) -> None:
        delays = self._delays
        if delay > self._default_delay:
            delays[origin] = delay
            delays.move_to_end(origin)
            while len(delays) > MAX_ROBOTS_ORIGINS:
                delays.popitem(last=False)
        else:
            delays.pop(origin, None)
        if self._queues.knows(origin):  # else applied when the origin next gets work
            self._queues.set_delay(origin, delay)

    def next_due(self, now: float) -> float | None:
        if self._held and self._held[0][0] <= now:
            self._release_held(now)
        due = self._queues.due_time(now)
        if self._held:
            held = self._held[0][0]
            due = held if due is None else min(due, held)
        return due

    async def wait(self, timeout: float) -> None:
        """Return when an offer, completion or retry happened since the last ``wait``
        returned (at once if one did), or after ``timeout`` seconds."""
        await wait_event(self._event, timeout)

    async def counts(self) -> Counts:
        origins = self._queues.working_origins()
        origins.update(item[3] for _, _, item in self._held)
        return Counts(
            queued=len(self._queues) + len(self._held),
            leased=len(self._leased),
            done=self._done,
            failed=dict(self._failed),
            seen=len(self._seen),
            origins=len(origins),
            recovered=self._recovered,
        )

    # -- the crawl's counters, robots rules and settings --

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        counters = self._counters
        for name, delta in deltas.items():
            counters[name] = counters.get(name, 0) + delta

    async def counters(self) -> dict[str, int]:
        return dict(self._counters)

    async def get_robots(self, origin: str) -> StoredRobots | None:
        robots = self._robots.get(origin)
        if robots is not None:
            self._robots.move_to_end(origin)
        return robots

    async def put_robots(self, robots: StoredRobots) -> None:
        table = self._robots
        old = table.pop(robots.origin, None)
        if old is not None:
            self._robots_bytes -= len(old.body)
        table[robots.origin] = robots
        self._robots_bytes += len(robots.body)
        while len(table) > MAX_ROBOTS_ORIGINS or (
            self._robots_bytes > MAX_ROBOTS_CACHE_BYTES and len(table) > 1
        ):
            _, dropped = table.popitem(last=False)
            self._robots_bytes -= len(dropped.body)

    async def load_settings(self) -> dict[str, Any] | None:
        if self._settings is None:
            return None
        settings: dict[str, Any] = json.loads(self._settings)
        return settings

    async def save_settings(self, settings: Mapping[str, Any]) -> None:
        # JSON, as a persistent backend stores them: what comes back is what SQLite gives
        self._settings = json.dumps(dict(settings))


def _item_of(lease: Lease) -> _Item:
    # a request handed back: its next lease is one more attempt
    return (lease.url, lease.depth, lease.referrer, lease.origin, lease.kind, lease.attempts + 1)
