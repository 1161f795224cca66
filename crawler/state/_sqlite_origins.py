"""The SQLite state's schedule in memory: which origin may be fetched next, and when.

One ``Origin`` per origin with work: politeness (in flight, next start), a small sorted
*window* of its next queued requests (refilled from the queued index in batches by
``crawler.state._sqlite_frontier``), and how many more queued rows the database holds beyond
the window (``backlog``). Origins take turns in a ready ring; one waiting for its delay
sleeps in a heap, and a retried request waits in the held heap until its ``not_before``.
Idle origins are forgotten (one whose delay still runs first waits in the retired heap), as
in ``crawler.state.frontier.MemoryFrontier``, so memory follows the origins with work.
Nothing here reads or writes the database.
"""

from __future__ import annotations

import bisect
import heapq
from collections import deque

__all__ = ["IDLE", "READY", "SLEEPING", "Item", "Origin", "OriginSchedule"]

# A queued request in memory: (depth, id, url, referrer, kind, attempts); sorted by (depth, id).
Item = tuple[int, int, str, str | None, int, int]

# Where an origin is (``Origin.state``): in no queue, in the ready ring, in the sleep heap.
IDLE, READY, SLEEPING = 0, 1, 2


class Origin:
    """One origin with work: politeness, its window of due requests, its backlog on disk."""

    __slots__ = (
        "active",
        "backlog",
        "delay",
        "due",
        "held",
        "host",
        "id",
        "last",
        "next_time",
        "origin",
        "state",
        "tail",
        "wanted",
        "window",
    )

    def __init__(self, origin: str, host: str, oid: int | None, delay: float) -> None:
        self.origin = origin
        self.host = host
        self.id = oid
        # Queued rows in memory, sorted by (depth, id); every queued row of this origin whose
        # key is <= tail is here (tail None: all of them, backlog 0).
        self.window: list[Item] = []
        self.tail: tuple[int, int] | None = None
        self.backlog = 0  # queued rows on disk only (key > tail)
        self.due: deque[Item] = deque()  # retried requests whose not_before has passed
        self.held = 0  # retried requests still waiting (in the held heap)
        self.active = 0
        self.wanted = 0  # requests of the browser waiting for a slot (``borrow_slot``)
        self.delay = delay
        self.next_time = 0.0
        self.last: float | None = None
        self.state = IDLE

    def has_work(self) -> bool:
        return bool(self.due or self.window or self.backlog)


class OriginSchedule:
    """The origins with work and their turns (the base of ``SQLiteFrontier``).

    Args:
        window: the most queued requests of one origin held in memory.
    """

    def __init__(self, *, window: int) -> None:
        self._per_host = 8
        self._delay = 0.0
        self._window_max = max(1, window)
        self._window_budget = 65536  # requests in all windows together (wide crawls)
        self._origins: dict[str, Origin] = {}
        self._ready: deque[Origin] = deque()
        self._sleeping: list[tuple[float, int, Origin]] = []
        self._retired: list[tuple[float, int, Origin]] = []
        self._held: list[tuple[float, int, Origin, Item]] = []
        self._seq = 0

    def _enqueue(self, o: Origin, item: Item) -> None:
        """A new queued row of ``o``: into its window if it sorts before the backlog."""
        if o.backlog and o.tail is not None and (item[0], item[1]) > o.tail:
            o.backlog += 1
        else:
            window = o.window
            if not window or item > window[-1]:
                window.append(item)
            else:
                bisect.insort(window, item)
            if len(window) > self._window_size():
                last = window.pop()
                o.backlog += 1
                o.tail = (last[0], last[1] - 1)
        if o.state == IDLE:
            self._schedule(o, None)

    def _window_size(self) -> int:
        return max(16, min(self._window_max, self._window_budget // max(1, len(self._origins))))

    def _hold(self, o: Origin, item: Item, not_before: float) -> None:
        self._seq += 1
        heapq.heappush(self._held, (not_before, self._seq, o, item))
        o.held += 1

    def _release_held(self, now: float) -> None:
        held = self._held
        while held and held[0][0] <= now:
            _, _, o, item = heapq.heappop(held)
            o.held -= 1
            o.due.append(item)
            if o.state == IDLE:
                self._schedule(o, now)

    def _schedule(self, o: Origin, now: float | None) -> None:
        # Put an idle origin where it belongs: the ready ring, the sleep heap, or nowhere.
        if not o.has_work() or o.active + o.wanted >= self._per_host:
            return
        if o.next_time and (now is None or o.next_time > now):
            self._seq += 1
            heapq.heappush(self._sleeping, (o.next_time, self._seq, o))
            o.state = SLEEPING
        else:
            self._ready.append(o)
            o.state = READY

    def _wake(self, now: float) -> None:
        sleeping = self._sleeping
        while sleeping and sleeping[0][0] <= now:
            o = heapq.heappop(sleeping)[2]
            o.state = IDLE
            self._schedule(o, now)

    def _forget(self, o: Origin, now: float) -> None:
        # Keep the table small on wide crawls; a running delay keeps the origin a while.
        if o.active or o.wanted or o.held or o.has_work() or o.state != IDLE:
            return
        if o.next_time <= now:
            if self._origins.get(o.origin) is o:
                del self._origins[o.origin]
        else:
            self._seq += 1
            heapq.heappush(self._retired, (o.next_time, self._seq, o))

    def _sweep(self, now: float) -> None:
        retired = self._retired
        while retired and retired[0][0] <= now:
            o = heapq.heappop(retired)[2]
            if not (o.active or o.wanted or o.held or o.has_work()) and o.state == IDLE:
                if self._origins.get(o.origin) is o:
                    del self._origins[o.origin]

    def set_delay(self, origin: str, delay: float) -> None:
        """Seconds between two request starts to ``origin`` (robots.txt Crawl-delay)."""
        o = self._origins.get(origin)
        if o is None:
            host = origin.partition("://")[2].rpartition(":")[0] or origin
            o = self._origins[origin] = Origin(origin, host, None, self._delay)
        o.delay = max(self._delay, delay)
        if o.last is not None:  # counts from the request already made
            o.next_time = max(o.next_time, o.last + o.delay)

    def next_due(self, now: float) -> float | None:
        """When a request waiting on a delay or a retry's ``not_before`` becomes leasable."""
        times = []
        if self._sleeping:
            times.append(self._sleeping[0][0])
        if self._held:
            times.append(self._held[0][0])
        return min(times) if times else None
