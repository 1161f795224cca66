"""The frontier (what to fetch next) and the seen set (what was ever discovered).

Both sit behind small Protocols so a persistent or distributed backend can replace the
in-memory ones without touching the engine. The crawl state protocol (``crawler.state``) is
built on them: ``OriginQueues`` is MemoryFrontier's machinery for any item (MemoryState
queues compact tuples in it), and MemorySeenSet's fingerprint API (``add_fp``/``contains_fp``)
is the in-memory probe of every backend, whatever its fingerprint.

MemoryFrontier keeps one sub-queue per origin (``scheme://host:port``) and serves the origins
round-robin, so a slow or delayed host never starves the others. Inside an origin, requests
come out breadth-first: one FIFO per depth, lowest depth first. Politeness lives here too,
because only the frontier can skip a busy host without blocking: an origin is handed out again
only while it has fewer than ``per_host`` requests in flight and its delay has passed.

An origin with nothing queued and nothing in flight is forgotten, at once or, when it has a
delay, as soon as that delay has passed (until then it must still hold its next slot), so the
table holds the origins with work plus those of the last delay's worth of time, not every
origin the crawl ever met. A forgotten origin comes back with the default delay: whoever set
a longer one (robots.txt Crawl-delay) sets it again (``knows`` tells whether that is needed).

MemorySeenSet (8-byte fingerprints in a compact table, its layout and collision odds) lives in
``crawler.urls.seen``; it is re-exported here.
"""

from __future__ import annotations

import heapq
from collections import deque
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from crawler.urls.seen import MemorySeenSet  # re-export: the seen set lives in crawler.urls.seen

__all__ = [
    "Frontier",
    "MemoryFrontier",
    "MemorySeenSet",
    "OriginQueues",
    "Request",
    "SeenSet",
    "Slots",
    "borrow_slot",
]


class Request(NamedTuple):
    """One queued URL: canonical ``url``, its link ``depth``, the page that linked it."""

    url: str
    depth: int
    referrer: str | None
    origin: str


class SeenSet(Protocol):
    """Every URL ever discovered, in canonical form."""

    def add(self, url: str) -> bool:
        """Add ``url``; True if it was new."""
        ...

    def __contains__(self, url: object) -> bool: ...

    def __len__(self) -> int: ...


class Frontier(Protocol):
    """Queued requests, handed out breadth-first and politely (per-origin limits)."""

    def push(self, request: Request) -> None: ...

    def pop(self, now: float) -> Request | None:
        """The next request whose origin may be fetched at ``now``, or None."""
        ...

    def release(self, origin: str, now: float) -> None:
        """A request of ``origin`` handed out by pop() is finished."""
        ...

    def set_delay(self, origin: str, delay: float) -> None:
        """Seconds between two requests to ``origin`` (e.g. robots.txt Crawl-delay)."""
        ...

    def wait_time(self, now: float) -> float | None:
        """Seconds until a delayed origin becomes ready; None if none is waiting on a delay."""
        ...

    def knows(self, origin: str) -> bool:
        """Whether ``origin`` has state here (work, requests in flight, a delay running)."""
        ...

    def __len__(self) -> int: ...


class Slots(Protocol):
    """An origin's politeness as ``borrow_slot`` reads and takes it (both states' origins)."""

    active: int
    delay: float
    last: float | None
    next_time: float


def borrow_slot(slots: Slots, per_host: int, now: float) -> float | None:
    """Take one of an origin's ``per_host`` slots as a lease would, for a request that is not
    a queued item (a browser's, ``--render``): 0.0 if taken, else the seconds until its
    delay has passed, or None while every slot is out."""
    if slots.active >= per_host:
        return None
    if slots.next_time > now:
        return slots.next_time - now
    slots.active += 1
    slots.last = now
    if slots.delay > 0:
        slots.next_time = now + slots.delay
    return 0.0


class _Host:
    __slots__ = (
        "active",
        "delay",
        "last",
        "depths",
        "levels",
        "next_time",
        "origin",
        "size",
        "state",
        "wanted",
    )

    def __init__(self, origin: str, delay: float) -> None:
        self.origin = origin
        # One FIFO per depth that has requests, and a heap of those depths: memory and time
        # follow the depths queued, not the depth reached (a 100,000-deep chain of origins
        # must not give each new origin 100,000 empty queues).
        self.levels: dict[int, deque[Any]] = {}
        self.depths: list[int] = []
        self.size = 0
        self.active = 0
        self.wanted = 0  # requests of the browser waiting for a slot (``want``): theirs next
        self.delay = delay
        self.next_time = 0.0
        self.last: float | None = None  # when its last request was handed out
        self.state = _IDLE


_IDLE, _READY, _SLEEPING = 0, 1, 2


T = TypeVar("T")


class OriginQueues(Generic[T]):
    """Per-origin breadth-first queues of any item, served round-robin and politely.

    The machinery of MemoryFrontier, for items that are not ``Request``s:
    ``crawler.state.memory.MemoryState`` queues its own compact tuples with it. The caller
    says which origin and depth an item has (``push_item``); ``pop`` hands items back.

    Args:
        per_host: items of one origin out (popped, not released) at once.
        delay: default seconds between two pops of an origin (from the start of one to
            the start of the next).
    """

    def __init__(self, per_host: int = 8, delay: float = 0.0) -> None:
        self._per_host = max(1, per_host)
        self._delay = delay
        self._hosts: dict[str, _Host] = {}
        self._ready: deque[_Host] = deque()
        self._sleeping: list[tuple[float, int, _Host]] = []
        # idle origins whose delay is still running: forgotten once it has passed
        self._retired: list[tuple[float, int, _Host]] = []
        self._seq = 0
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def _host(self, origin: str) -> _Host:
        host = self._hosts.get(origin)
        if host is None:
            host = self._hosts[origin] = _Host(origin, self._delay)
        return host

    def push_item(self, origin: str, depth: int, item: T) -> None:
        """Queue ``item`` under ``origin`` at link depth ``depth``."""
        host = self._hosts.get(origin)
        if host is None:
            host = self._hosts[origin] = _Host(origin, self._delay)
        level = host.levels.get(depth)
        if level is None:
            level = host.levels[depth] = deque()
            heapq.heappush(host.depths, depth)
        level.append(item)
        host.size += 1
        self._size += 1
        if host.state == _IDLE:
            self._schedule(host, None)

    def _schedule(self, host: _Host, now: float | None) -> None:
        # Put an idle host where it belongs: the ready ring, the sleep heap, or nowhere.
        if host.size == 0 or host.active + host.wanted >= self._per_host:
            return
        if host.next_time and (now is None or host.next_time > now):
            self._seq += 1
            heapq.heappush(self._sleeping, (host.next_time, self._seq, host))
            host.state = _SLEEPING
        else:
            self._ready.append(host)
            host.state = _READY

    def _wake(self, now: float) -> None:
        sleeping = self._sleeping
        while sleeping and sleeping[0][0] <= now:
            host = heapq.heappop(sleeping)[2]
            host.state = _IDLE
            self._schedule(host, now)

    def pop(self, now: float) -> T | None:
        """The next item whose origin may be handed out at ``now``, or None."""
        items = self.pop_many(1, now)
        return items[0] if items else None

    def pop_many(self, n: int, now: float) -> list[T]:
        """Up to ``n`` items, as ``n`` calls of ``pop`` would give them (one call: faster)."""
        if self._sleeping:
            self._wake(now)
        if self._retired:
            self._sweep(now)
        ready = self._ready
        per_host = self._per_host
        out: list[T] = []
        while len(out) < n and ready:
            host = ready.popleft()
            host.state = _IDLE
            if host.next_time > now:
                self._schedule(host, now)  # its delay grew while it waited in the ring
                continue
            if host.active + host.wanted >= per_host:
                continue  # a slot borrowed or wanted meanwhile (``borrow``): release wakes it
            low = host.depths[0]
            level = host.levels[low]
            out.append(level.popleft())
            if not level:
                del host.levels[low]
                heapq.heappop(host.depths)
            host.size -= 1
            host.active += 1
            host.last = now
            if host.delay > 0:
                host.next_time = now + host.delay
                self._schedule(host, now)
            elif host.size and host.active + host.wanted < per_host:  # _schedule's ready case
                ready.append(host)
                host.state = _READY
        self._size -= len(out)
        return out

    def release(self, origin: str, now: float) -> None:
        host = self._hosts.get(origin)
        if host is None:
            return
        host.active -= 1
        if host.state == _IDLE:
            self._schedule(host, now)
        self._forget(host, now)
        if self._retired:
            self._sweep(now)

    def _forget(self, host: _Host, now: float) -> None:
        if host.active == 0 and host.size == 0 and host.state == _IDLE and not host.wanted:
            # keep the table small on wide crawls; a running delay keeps the host a while
            if host.next_time <= now:
                del self._hosts[host.origin]
            else:
                self._seq += 1
                heapq.heappush(self._retired, (host.next_time, self._seq, host))

    def borrow(self, origin: str, now: float) -> float | None:
        """Take one of ``origin``'s slots for a request that is not a queued item (a
        browser's request to a crawled host, ``--render``), as ``pop`` would: 0.0 if taken
        (give it back with ``release``), else the seconds until its delay has passed, or None
        while its ``per_host`` slots are all out (a ``release`` frees one). A borrower that
        has to wait says so with ``want``: the origin's items are not handed out while
        borrowers wait for a slot, so they get the next one."""
        return borrow_slot(self._host(origin), self._per_host, now)

    def want(self, origin: str, delta: int, now: float) -> None:
        """A borrower starts (``delta`` 1) or stops (-1) waiting for ``origin``'s next slot."""
        host = self._host(origin)
        host.wanted = max(0, host.wanted + delta)
        if delta < 0 and host.state == _IDLE:
            self._schedule(host, now)
            self._forget(host, now)

    def _sweep(self, now: float) -> None:
        retired = self._retired
        hosts = self._hosts
        while retired and retired[0][0] <= now:
            host = heapq.heappop(retired)[2]
            if (
                host.active == 0
                and not host.wanted
                and host.size == 0
                and host.state == _IDLE
                and hosts.get(host.origin) is host
            ):
                del hosts[host.origin]

    def knows(self, origin: str) -> bool:
        return origin in self._hosts

    def ahead(self, origin: str, depth: int) -> int:
        """Items of ``origin`` an item queued now at ``depth`` would wait behind: those at its
        depth or less (lower depths first, FIFO inside one)."""
        host = self._hosts.get(origin)
        if host is None:
            return 0
        return sum(len(level) for d, level in host.levels.items() if d <= depth)

    @property
    def origins(self) -> int:
        """Origins held (with work, in flight, or within their delay): bounded on wide crawls."""
        return len(self._hosts)

    def set_delay(self, origin: str, delay: float) -> None:
        host = self._host(origin)
        host.delay = max(self._delay, delay)
        if host.last is not None:  # counts from the request already made
            host.next_time = max(host.next_time, host.last + host.delay)

    def wait_time(self, now: float) -> float | None:
        if not self._sleeping:
            return None
        return max(0.0, self._sleeping[0][0] - now)

    def due_time(self, now: float) -> float | None:
        """Wall-clock time at which an origin with work comes out of its delay (> ``now``),
        or None if none is waiting on a delay."""
        if self._sleeping:
            self._wake(now)
        return self._sleeping[0][0] if self._sleeping else None

    def working_origins(self) -> set[str]:
        """Origins with items queued or out (not those only waiting out a delay)."""
        return {h.origin for h in self._hosts.values() if h.size or h.active}

    def active(self, origin: str) -> int:
        host = self._hosts.get(origin)
        return host.active if host else 0


class MemoryFrontier(OriginQueues[Request]):
    """In-memory Frontier: per-origin breadth-first queues of Requests served round-robin.

    Args:
        per_host: requests of one origin in flight at once.
        delay: default seconds between two requests to an origin (from the start of one to
            the start of the next).
    """

    def push(self, request: Request) -> None:
        self.push_item(request.origin, request.depth, request)
