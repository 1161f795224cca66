"""The SQLite state's frontier over the ``requests`` table: offer, lease, complete, retry.

Every row is kept, done ones too: a request's row *is* its "seen" mark, so marking seen and
queueing are one INSERT; ``discovered_by`` (index on referrer) reads them. The seen probe is
every row's 64-bit fingerprint in a ``MemorySeenSet``; the counts (queued, leased, done,
failed by kind, seen) are kept here incrementally and written with each transaction by
``SQLiteState`` (no COUNT(*) at run time). Each method's writes go through the group
transaction of ``SQLiteState`` (``_write``) and update memory as they go; which origin goes
next is ``crawler.state._sqlite_origins``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from crawler.state._sqlite_files import pack_fps
from crawler.state._sqlite_origins import IDLE, Item, Origin, OriginSchedule
from crawler.state.base import (
    KIND_PAGE,
    Candidate,
    Counts,
    Lease,
    Outcome,
    StateError,
    wait_event,
)
from crawler.state.frontier import borrow_slot
from crawler.urls.seen import MemorySeenSet

__all__ = ["SQLiteFrontier"]

# Request states (the ``state`` column).
_QUEUED, _LEASED, _OK, _FAILED, _SEEN, _HELD = 0, 1, 2, 3, 4, 5

_ITEM_SQL = (
    "SELECT r.depth, r.id, r.url, COALESCE(p.url, r.ref_url), r.kind, r.attempts"
    " FROM requests r LEFT JOIN requests p ON p.id = r.referrer_id"
)
_T = TypeVar("_T")


class SQLiteFrontier(OriginSchedule):
    """The frontier, seen probe, leases and counts of ``SQLiteState`` (its base class).

    Args:
        lease_ttl: seconds a lease is valid (``Lease.expires``).
        window: the most queued requests of one origin held in memory.
    """

    def __init__(self, *, lease_ttl: float, window: int) -> None:
        super().__init__(window=window)
        self._ttl = lease_ttl
        self._budget = 0
        self._seen = MemorySeenSet()
        self._leases: dict[int, tuple[Origin, str, int]] = {}  # id -> (origin, url, attempts)
        self._leased_urls: dict[str, int] = {}
        # Recent seen-only rows (redirect targets fetched in-line): url -> id, so that the
        # links of such a page get their referrer's row without an index on URLs.
        self._recent: OrderedDict[str, int] = OrderedDict()
        self._admitted: dict[str, int] = {}  # host -> queued-or-done (with a budget only)
        self._queued = self._leased = self._done = 0
        self._failed: dict[str, int] = {}
        self._recovered = 0
        self._next_id = 1
        self._event = asyncio.Event()

    if TYPE_CHECKING:  # the group transaction, SQLiteState's

        def _db(self) -> Any: ...

        def _fail(self, e: BaseException) -> StateError: ...

        async def _write(self, work: Callable[[Any], _T], *, wait: bool = True) -> _T: ...

    def _load_queued(self, conn: Any) -> None:
        """Rebuild the origins with queued rows and the held (retried) requests, at open."""
        rows = conn.execute(
            "SELECT o.id, o.origin, o.host, q.n FROM (SELECT origin_id, count(*) AS n"
            " FROM requests WHERE state = 0 GROUP BY origin_id) q"
            " JOIN origins o ON o.id = q.origin_id"
        )
        for oid, origin, host, n in rows:
            o = self._origins[origin] = Origin(origin, host, oid, self._delay)
            o.backlog = n
            o.tail = (-1, 0)  # nothing in memory yet
            self._schedule(o, None)
        held = conn.execute(
            _ITEM_SQL.replace("SELECT", "SELECT r.not_before, o.origin, o.host, o.id,", 1)
            + " JOIN origins o ON o.id = r.origin_id WHERE r.state = 5"
        )
        for not_before, origin, host, oid, *item in held:
            h = self._origins.get(origin)
            if h is None:
                h = self._origins[origin] = Origin(origin, host, oid, self._delay)
            self._hold(h, tuple(item), not_before or 0.0)

    # -- the frontier --

    async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        """Dedup and enqueue together in one transaction; return the candidates that were new.

        Over ``max_pages_per_host`` (queued-or-done of its host), a new candidate is marked
        seen but not queued. Duplicates inside the batch count once (the first).
        """
        self._db()
        contains = self._seen.contains_fp
        batch: set[int] = set()
        new: list[Candidate] = []
        for c in candidates:
            fp = c.fp
            if fp in batch or contains(fp):
                continue
            batch.add(fp)
            new.append(c)
        if not new:
            return new
        await self._write(lambda conn: self._insert(conn, new))
        return new

    def _insert(self, conn: Any, new: list[Candidate]) -> None:
        next_id = self._next_id
        rows: list[tuple[Any, ...]] = []
        seeds: list[tuple[int]] = []
        queued: list[tuple[Origin, Item]] = []
        hosts: dict[str, int] = {}
        ids: dict[str, int | None] = {}  # URLs of this batch and referrers -> row id
        budget = self._budget
        origins = self._origins
        last_origin: str | None = None
        o = None
        for c in new:
            if c.origin != last_origin or o is None:  # a chunk of links is mostly one origin
                o = origins.get(c.origin)
                if o is None or o.id is None:
                    o = self._origin(conn, c.origin, c.host)
                last_origin = c.origin
            ref_url = c.referrer
            rid = None
            if ref_url is not None:
                if ref_url in ids:
                    rid = ids[ref_url]
                else:
                    rid = ids[ref_url] = self._leased_urls.get(ref_url) or self._recent.get(ref_url)
                if rid is not None:
                    ref_url = None
            state = _SEEN
            if c.queue:
                if budget <= 0:
                    state = _QUEUED
                else:
                    n = self._admitted.get(c.host)
                    if n is None:
                        n = self._host_admitted(conn, c.host)
                    if n + hosts.get(c.host, 0) < budget:
                        state = _QUEUED
            if state == _QUEUED:
                hosts[c.host] = hosts.get(c.host, 0) + 1
                queued.append((o, (c.depth, next_id, c.url, c.referrer, c.kind, 0)))
                if c.referrer is None and c.kind == KIND_PAGE:
                    seeds.append((next_id,))
            elif not c.queue:
                self._remember(c.url, next_id)
            ids[c.url] = next_id
            rows.append((next_id, o.id, c.depth, state, c.kind, rid, c.url, ref_url))
            next_id += 1
        conn.executemany(
            "INSERT INTO requests(id, origin_id, depth, state, kind, attempts,"
            " referrer_id, url, ref_url) VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?)",
            rows,
        )
        conn.execute(
            "INSERT INTO fps(first_id, data) VALUES (?, ?)",
            (self._next_id, pack_fps([c.fp for c in new])),
        )
        if hosts:
            conn.executemany(
                "INSERT INTO hosts(host, admitted) VALUES (?, ?) ON CONFLICT(host)"
                " DO UPDATE SET admitted = admitted + excluded.admitted",
                hosts.items(),
            )
            admitted = self._admitted
            for host, n in hosts.items():
                if host in admitted:
                    admitted[host] += n
        if seeds:
            conn.executemany("INSERT INTO seeds(id) VALUES (?)", seeds)
        self._next_id = next_id
        add = self._seen.add_fp
        for c in new:
            add(c.fp)
        self._queued += len(queued)
        for o, item in queued:
            self._enqueue(o, item)
        if len(queued) < len(new):
            # Origins that got seen-only rows and no work (redirect targets, over budget,
            # never leased here): not kept, or a wide crawl would keep one per origin.
            for c in new:
                o = origins.get(c.origin)
                if (
                    o is not None
                    and o.last is None
                    and not (o.active or o.wanted or o.held or o.has_work())
                ):
                    del origins[c.origin]
        self._event.set()

    def _origin(self, conn: Any, origin: str, host: str) -> Origin:
        """The in-memory origin with its row id (both created if new)."""
        o = self._origins.get(origin)
        if o is None:
            o = self._origins[origin] = Origin(origin, host, None, self._delay)
        if o.id is None:
            row = conn.execute("SELECT id FROM origins WHERE origin = ?", (origin,)).fetchone()
            if row is None:
                o.id = conn.execute(
                    "INSERT INTO origins(origin, host) VALUES (?, ?)", (origin, host)
                ).lastrowid
            else:
                o.id = row[0]
        return o

    def _remember(self, url: str, rid: int) -> None:
        recent = self._recent
        recent[url] = rid
        if len(recent) > 4096:
            recent.popitem(last=False)

    def _host_admitted(self, conn: Any, host: str) -> int:
        row = conn.execute("SELECT admitted FROM hosts WHERE host = ?", (host,)).fetchone()
        n = self._admitted[host] = 0 if row is None else int(row[0])
        return n

    def _refill(self, o: Origin) -> None:
        """Load the next queued rows of ``o`` (by depth, then discovery) into its window."""
        conn = self._db()
        tail = o.tail or (-1, 0)
        size = self._window_size()
        try:
            rows = conn.execute(
                _ITEM_SQL + " WHERE r.state = 0 AND r.origin_id = ? AND (r.depth, r.id) > (?, ?)"
                " ORDER BY r.depth, r.id LIMIT ?",
                (o.id, tail[0], tail[1], size),
            ).fetchall()
        except sqlite3.Error as e:
            raise self._fail(e) from e
        o.window.extend(rows)
        o.backlog -= len(rows)
        if len(rows) < size or o.backlog <= 0:
            o.backlog = 0
            o.tail = None
        else:
            last = rows[-1]
            o.tail = (last[0], last[1])

    async def lease(self, n: int, now: float) -> list[Lease]:
        """Up to ``n`` requests whose origins may be fetched at ``now``, in one transaction.

        Round-robin over the origins; inside one, retried requests whose time has come
        first, then lowest depth, then discovery order.
        """
        self._db()
        if self._held:
            self._release_held(now)
        if self._sleeping:
            self._wake(now)
        if self._retired:
            self._sweep(now)
        ready = self._ready
        picked: list[tuple[Origin, Item]] = []
        while len(picked) < n and ready:
            o = ready.popleft()
            o.state = IDLE
            if o.next_time > now:
                self._schedule(o, now)  # its delay grew while it waited in the ring
                continue
            if o.active + o.wanted >= self._per_host:
                continue  # a slot borrowed or wanted meanwhile (``borrow_slot``)
            if o.due:
                item = o.due.popleft()
            else:
                if not o.window and o.backlog:
                    self._refill(o)
                if not o.window:
                    self._forget(o, now)
                    continue
                item = o.window.pop(0)
            o.active += 1
            o.last = now
            if o.delay > 0:
                o.next_time = now + o.delay
            picked.append((o, item))
            self._schedule(o, now)
        if not picked:
            return []
        expires = now + self._ttl
        leases = []

        def work(conn: Any) -> None:
            conn.executemany(
                "UPDATE requests SET state = 1, attempts = attempts + 1 WHERE id = ?",
                [(item[1],) for _, item in picked],
            )
            self._queued -= len(picked)
            self._leased += len(picked)
            for o, (depth, rid, url, referrer, kind, attempts) in picked:
                self._leases[rid] = (o, url, attempts)
                self._leased_urls[url] = rid
                leases.append(Lease(rid, url, depth, referrer, o.origin, kind, attempts, expires))

        await self._write(work)
        return leases

    def _open_lease(self, lease: Lease) -> bool:
        """Whether ``lease`` is open here: a stale one (recovered by a reopen, completed
        already) has another attempts count or no entry, and changes nothing."""
        entry = self._leases.get(lease.id)
        return entry is not None and entry[2] == lease.attempts

    def _end_lease(self, lease: Lease, now: float) -> Origin | None:
        entry = self._leases.pop(lease.id, None)
        if entry is None:
            return None
        o, url, _ = entry
        self._leased_urls.pop(url, None)
        o.active -= 1
        if o.state == IDLE:
            self._schedule(o, now)
        return o

    async def complete(self, lease: Lease, outcome: Outcome, now: float) -> None:
        """The request is done (committed before this returns); frees its origin's slot."""
        await self.complete_many([(lease, outcome)], now)

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        """``complete`` for several leases in one transaction. Unknown leases are ignored."""
        self._db()
        todo: dict[int, tuple[Lease, Outcome]] = {}
        for lease, outcome in done:
            if self._open_lease(lease):
                todo[lease.id] = (lease, outcome)
        if not todo:
            return

        def work(conn: Any) -> None:
            conn.executemany(
                "UPDATE requests SET state = ? WHERE id = ?",
                [(_OK if out.error is None else _FAILED, rid) for rid, (_, out) in todo.items()],
            )
            kinds: dict[str, int] = {}
            for _, out in todo.values():
                if out.error is not None:
                    kinds[out.error] = kinds.get(out.error, 0) + 1
            if kinds:
                conn.executemany(
                    "INSERT INTO failures(kind, n) VALUES (?, ?) ON CONFLICT(kind)"
                    " DO UPDATE SET n = n + excluded.n",
                    kinds.items(),
                )
                for kind, k in kinds.items():
                    self._failed[kind] = self._failed.get(kind, 0) + k
            self._leased -= len(todo)
            self._done += len(todo)
            for lease, _ in todo.values():
                o = self._end_lease(lease, now)
                if o is not None:
                    self._forget(o, now)
            if self._retired:
                self._sweep(now)
            self._event.set()

        await self._write(work)

    async def retry(self, lease: Lease, not_before: float, now: float) -> None:
        """Put the request back, not to be leased before ``not_before``. Frees its slot."""
        self._db()
        if not self._open_lease(lease):
            return

        def work(conn: Any) -> None:
            conn.execute(
                "UPDATE requests SET state = 5, not_before = ? WHERE id = ?",
                (not_before, lease.id),
            )
            self._leased -= 1
            self._queued += 1
            o = self._end_lease(lease, now)
            assert o is not None
            item = (
                lease.depth,
                lease.id,
                lease.url,
                lease.referrer,
                lease.kind,
                lease.attempts + 1,
            )
            if not_before <= now:
                o.due.append(item)
            else:
                self._hold(o, item, not_before)
            if o.state == IDLE:
                self._schedule(o, now)
            self._event.set()

        await self._write(work)

    def borrow_slot(self, origin: str, now: float) -> float | None:
        """One of ``origin``'s politeness slots for a request of the browser (``--render``),
        as a lease takes one: 0.0 when taken (``return_slot`` gives it back), else the seconds
        until its delay has passed, or None while its ``per_host`` slots are all out (a
        borrower that waits says so with ``want_slot``: it gets the next slot, not a lease)."""
        o = self._origins.get(origin)
        if o is None:
            host = origin.partition("://")[2].rpartition(":")[0] or origin
            o = self._origins[origin] = Origin(origin, host, None, self._delay)
        return borrow_slot(o, self._per_host, now)

    def want_slot(self, origin: str, delta: int, now: float) -> None:
        """A borrower starts (``delta`` 1) or stops (-1) waiting for ``origin``'s next slot."""
        o = self._origins.get(origin)
        if o is None:
            return
        o.wanted = max(0, o.wanted + delta)
        if delta < 0:
            if o.state == IDLE:
                self._schedule(o, now)
            self._forget(o, now)
            self._event.set()

    def return_slot(self, origin: str, now: float) -> None:
        o = self._origins.get(origin)
        if o is None:
            return
        o.active -= 1
        if o.state == IDLE:
            self._schedule(o, now)
        self._forget(o, now)
        self._event.set()  # the dispatcher may lease from the origin again

    async def wait(self, timeout: float) -> None:
        """Return after an offer, completion or retry (since the last wait), or ``timeout``."""
        await wait_event(self._event, timeout)

    async def counts(self) -> Counts:
        """Kept incrementally; ``origins`` counts the in-memory origins with work."""
        origins = sum(1 for o in self._origins.values() if o.active or o.held or o.has_work())
        return Counts(
            queued=self._queued,
            leased=self._leased,
            done=self._done,
            failed=dict(self._failed),
            seen=len(self._seen),
            origins=origins,
            recovered=self._recovered,
        )

    async def discovered_by(self, url: str) -> list[str]:
        """The URLs first discovered by page ``url``, in discovery order.

        For re-listing the links of a page that was in flight when a process stopped: they
        were marked seen then, so fetching it again finds none of them new. Includes the
        links of a redirect target it led to (a seen-only row it discovered). Fast for a URL
        leased now (the engine asks before fetching it again); any other URL costs a scan.
        """
        conn = self._db()
        rid = self._leased_urls.get(url) or self._recent.get(url)
        if rid is None:
            row = conn.execute("SELECT id FROM requests WHERE url = ?", (url,)).fetchone()
            if row is None:
                return []
            rid = row[0]
        found: list[tuple[int, str]] = []
        parents = [rid]
        while parents:
            pid = parents.pop()
            for cid, curl, state in conn.execute(
                "SELECT id, url, state FROM requests WHERE referrer_id = ?", (pid,)
            ):
                found.append((cid, curl))
                if state == _SEEN:
                    parents.append(cid)
        found.sort()
        return [u for _, u in found]
