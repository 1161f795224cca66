"""The crawl state protocol: what the engine asks of memory, SQLite and (next) Redis alike.

One async, batched protocol, shaped by what a durable and a shared backend need:

* ``offer_many`` is the only way in: it deduplicates (by 64-bit fingerprint) and enqueues in
  one atomic step, once per chunk of links, so that no URL is ever marked seen without being
  queued (the crash the issue names: Scrapy's dupefilter holds URLs no queue holds).
* ``lease`` hands requests out politely (per-origin concurrency and delay, round-robin, and
  breadth-first inside an origin), each with an expiry; ``complete`` and ``retry`` end a lease.
  A lease still open when its process dies returns to the queue when the state is next opened
  (one process: SQLite) or when it expires (many: Redis).
* Times are wall-clock seconds (``time.time()``), so that a delay or an expiry means the same
  in every process and after a restart.

The engine never constructs a backend: ``crawler.state.open_state(url)`` picks it from the
state URL (None: memory; a path: SQLite; ``redis://``: Redis).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = [
    "KIND_PAGE",
    "KIND_SITEMAP",
    "MAX_ROBOTS_CACHE_BYTES",
    "MAX_ROBOTS_ORIGINS",
    "Candidate",
    "Counts",
    "CrawlState",
    "Lease",
    "Outcome",
    "StateError",
    "StoredRobots",
    "wait_event",
]

#: A request for an HTML page (or any in-scope URL): fetched, its links extracted.
KIND_PAGE = 0
#: A request for a sitemap (robots.txt named it): fetched, its <loc> URLs offered.
KIND_SITEMAP = 1

# Bounds of what is kept per origin for robots.txt, so that memory stays bounded on wide
# crawls: the memory state's stored bodies and Crawl-delays (LRU tables), and the engine's
# verdict cache (``crawler.core.robots.RobotsCache``), least recently used first out.
#: Origins whose robots.txt (or verdict) is kept at once; beyond it the least recently used
#: is dropped.
MAX_ROBOTS_ORIGINS = 4096
#: Budget for the robots.txt kept: the memory state's stored bodies, the verdict cache's
#: estimated memory of the parsed rules (``crawler.core.robots.RobotsRules.weight``).
MAX_ROBOTS_CACHE_BYTES = 64 * 1024 * 1024


class StateError(Exception):
    """The state cannot be used: incompatible version, corrupt, locked by another process.

    The message says which and what to do; nothing was changed. The CLI exits 2 on it.
    """


# Candidate, Lease and Outcome are built once per URL or page: plain slotted dataclasses,
# because a frozen one costs ~4x to build (every field through object.__setattr__). Treat
# them as immutable all the same.


@dataclass(slots=True)
class Candidate:
    """A URL offered to the state: canonical, in scope, within the URL length limit.

    Attributes:
        url: canonical URL (``crawler.urls.policy.UrlPolicy.canonical``).
        fp: its fingerprint, from the state's own ``fingerprint(url)``.
        origin: ``scheme://host:port`` (the politeness key).
        host: the host name (the ``max_pages_per_host`` budget key).
        depth: link hops from a seed.
        referrer: the page that linked it (None for a seed).
        kind: KIND_PAGE or KIND_SITEMAP.
        queue: False: mark it seen only, never queue it (a redirect target fetched in-line
            by the page job that followed the redirect).
    """

    url: str
    fp: int
    origin: str
    host: str
    depth: int
    referrer: str | None = None
    kind: int = KIND_PAGE
    queue: bool = True


@dataclass(slots=True)
class Lease:
    """A request handed out by ``lease``: the holder fetches it, then completes or retries it.

    Attributes:
        id: the backend's handle of this request (opaque to the engine).
        url, depth, referrer, origin, kind: as offered.
        attempts: leases of this request before this one (> 0: it was in flight when a
            process stopped or its lease expired, or it was retried).
        expires: wall-clock time after which another holder may get it.
        checked: the backend vouches that this process's own admission queued it (a shared
            backend's other requests, which anyone who can write to it could have put there,
            have their URL checked again before they are fetched).
    """

    id: int
    url: str
    depth: int
    referrer: str | None
    origin: str
    kind: int
    attempts: int
    expires: float
    checked: bool = False


@dataclass(slots=True)
class Outcome:
    """How a leased request ended: ``error`` None for success, else the PageResult's kind."""

    error: str | None = None
    status: int | None = None
    bytes: int = 0


@dataclass(frozen=True, slots=True)
class Counts:
    """Where the crawl stands, across every run of it.

    Attributes:
        queued: waiting to be leased.
        leased: handed out and not completed (in flight, or held by a stopped process).
        done: completed (ok or failed).
        failed: completed with an error, by kind.
        seen: URLs ever discovered (fingerprints held).
        origins: origins with queued or leased work.
        recovered: leases returned to the queue when this state was opened (in flight at
            the last stop).
    """

    queued: int = 0
    leased: int = 0
    done: int = 0
    failed: Mapping[str, int] = field(default_factory=dict)
    seen: int = 0
    origins: int = 0
    recovered: int = 0


@dataclass(frozen=True, slots=True)
class StoredRobots:
    """A robots.txt as fetched: the body the rules are parsed from and when it was fetched.

    ``status`` and ``error`` keep the verdicts that have no body (unavailable: everything
    allowed; unreachable: everything disallowed).
    """

    origin: str
    fetched_at: float
    status: int | None
    body: bytes
    error: str | None = None


async def wait_event(event: asyncio.Event, timeout: float) -> None:
    """The body of every backend's ``wait``: return at once if ``event`` was set since the
    last call, else when it is set or after ``timeout`` seconds; then clear it.

    A cancelled wait leaves the event as it is, so that a wake-up that came with the
    cancellation is not lost to the next wait; and the cancellation is not lost to the
    wake-up (``asyncio.timeout``, not Python 3.11's ``wait_for``, which returned the
    wake-up and dropped a cancel that came in the same turn of the loop: a Ctrl-C lost).
    """
    if not event.is_set() and timeout > 0:
        try:
            async with asyncio.timeout(timeout):
                await event.wait()
        except TimeoutError:
            pass
    event.clear()


@runtime_checkable
class CrawlState(Protocol):
    """One crawl's state: frontier, seen fingerprints, leases, counters, robots, settings.

    Every method is a coroutine (a remote backend does I/O); a batch method is one round trip
    and one transaction. Implementations: ``crawler.state.memory.MemoryState``,
    ``crawler.state.sqlite.SQLiteState`` (and ``crawler.state.redis`` next).

    Optional, outside the protocol: ``probe_parts()`` (the local seen set and fingerprint, for
    the intake to probe in C) and ``offer_seen(fps) -> int`` (mark fingerprints seen, none
    queued: what the memory state takes instead of ``queue=False`` candidates for URLs the host
    rule refuses; a backend that must keep each URL, to re-list it after a kill, leaves it out).
    """

    #: The state URL it was opened from ("" for memory), for messages.
    location: str

    #: True when other processes may work on the same crawl at once (Redis): the engine then
    #: joins without seeds, waits for other workers' leases, and stops only after nothing was
    #: queued or leased for a grace period. False (memory, SQLite): one process owns the state,
    #: so "nothing queued, nothing leased" means done at once.
    shared: bool

    async def open(self, *, per_host: int, delay: float, max_pages_per_host: int) -> None:
        """Open (create or continue): take the lock, check the version, recover open leases.

        Raises:
            StateError: incompatible version, corrupt, or in use by another process.
        """
        ...

    async def close(self) -> None:
        """Commit what is pending and release the lock. Safe to call twice."""
        ...

    def fingerprint(self, url: str) -> int:
        """The 64-bit fingerprint this state deduplicates ``url`` by (never 0).

        Stable across processes and runs for a persistent backend (keyed per crawl).
        """
        ...

    def seen(self, fp: int) -> bool:
        """True if ``fp`` was certainly accepted by ``offer_many`` before: a local,
        synchronous probe, so that a repeated link costs no Candidate and no round trip.

        False means "not known here" (new, or a backend without a local probe may always say
        False); ``offer_many`` stays the one that decides.
        """
        ...

    # -- the frontier --

    async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """Dedup and enqueue together, atomically; return the candidates that were new.

        A new candidate whose host has reached ``max_pages_per_host`` queued-or-done is
        marked seen but not queued (it is still returned: it was new). Duplicates inside the
        batch count once (the first).
        """
        ...

    async def lease(self, n: int, now: float) -> list[Lease]:
        """Up to ``n`` requests whose origins may be fetched at ``now`` (wall-clock).

        Politeness: fewer than ``per_host`` leases of one origin open at once, ``delay`` (or
        the origin's own, see ``set_delay``) between the start of two; origins round-robin,
        lowest depth first inside one.
        """
        ...

    async def complete(self, lease: Lease, outcome: Outcome, now: float) -> None:
        """The request is done: it is never handed out again. Frees its origin's slot."""
        ...

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        """``complete`` for several leases in one transaction."""
        ...

    async def retry(self, lease: Lease, not_before: float, now: float) -> None:
        """Put the request back, not to be leased before ``not_before``. Frees its slot."""
        ...

    def set_delay(self, origin: str, delay: float) -> None:
        """Seconds between two request starts to ``origin`` (robots.txt Crawl-delay)."""
        ...

    # -- a host's politeness slots, lent to the browser (``--render``) --
    # A request the browser sends for a rendered page to ANOTHER crawled host must count
    # against that host's ``per_host`` and delay, the same slots the leases take
    # (crawler.core.render_gate). These three are synchronous: they only touch the local
    # frontier's bookkeeping. A state whose slots are not all here may refuse.

    def borrow_slot(self, origin: str, now: float) -> float | None | Literal[False]:
        """Take one of ``origin``'s ``per_host`` slots, as a lease would (the delay counts
        from now): 0.0 when taken (``return_slot`` gives it back); a positive number, the
        seconds until the origin's delay has passed, or None while every slot is out (ask
        again later, ``want_slot`` meanwhile); False when this state lends no slots at all
        (refused for good: the request is not sent).
        """
        ...

    def want_slot(self, origin: str, delta: int, now: float) -> None:
        """A borrower starts (``delta`` 1) or stops (-1) waiting for ``origin``'s next slot;
        while one waits, no request of the origin is leased (the next free slot is the
        borrower's). Only after a ``borrow_slot`` that did not refuse."""
        ...

    def return_slot(self, origin: str, now: float) -> None:
        """Give back a slot ``borrow_slot`` took (the origin may be leased from again)."""
        ...

    def next_due(self, now: float) -> float | None:
        """Wall-clock time at which a queued request becomes leasable, if one waits on a
        delay or a ``not_before``; None when nothing waits (empty, or ready now)."""
        ...

    async def wait(self, timeout: float) -> None:
        """Return when new work may be leasable (an offer, a completion) or after
        ``timeout`` seconds. Never a busy poll."""
        ...

    async def counts(self) -> Counts:
        """Queued, leased, done, failed by kind, seen, origins: across every run."""
        ...

    # -- the crawl's counters, robots rules and settings --

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        """Add to the crawl's named counters (links found, redirects, ...)."""
        ...

    async def counters(self) -> dict[str, int]:
        """The crawl's named counters, summed over every run."""
        ...

    async def get_robots(self, origin: str) -> StoredRobots | None:
        """The stored robots.txt of ``origin``, if any (the caller checks its age)."""
        ...

    async def put_robots(self, robots: StoredRobots) -> None:
        """Store (replace) the robots.txt of ``robots.origin``."""
        ...

    async def load_settings(self) -> dict[str, Any] | None:
        """The settings stored when the crawl began (JSON-able), or None for a new crawl."""
        ...

    async def save_settings(self, settings: Mapping[str, Any]) -> None:
        """Store the crawl's settings (first run; or the merged ones of a resumed run)."""
        ...
