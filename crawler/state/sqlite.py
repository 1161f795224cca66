"""The SQLite crawl state: ``--state DIR``, a crawl that survives kill -9 and resumes.

Layout under DIR: ``state.db`` (SQLite in WAL mode, with its ``-wal`` and ``-shm`` files
while open) and ``lock`` (an exclusive ``fcntl.flock`` for the process using the state, with
its PID inside). Only the standard library's ``sqlite3``.

Theory of operation
-------------------
The database is the truth; memory holds what makes the hot path fast, rebuilt at open:

* The seen probe: every request row's 64-bit fingerprint in a ``MemorySeenSet`` (8 bytes a
  slot, load factor at most 1/2: 16-32 bytes a URL), loaded at open (O(seen)).
* Per origin with work: politeness (in flight, next start), a small sorted *window* of its
  next queued requests, refilled from the queued index in batches, and how many more queued
  rows the database holds beyond the window (``backlog``). Idle origins are forgotten, as in
  ``crawler.frontier.MemoryFrontier``, so memory follows the origins with work.
* The counts (queued, leased, done, failed by kind, seen), kept incrementally and written
  in each transaction (no COUNT(*) at run time).

Every row is kept, done ones too: a request's row *is* its "seen" mark, so marking seen and
queueing are one INSERT; ``discovered_by`` (index on referrer) and ``read_status`` read them.

Transactions: ``offer_many`` (all its rows, origins, host counts, totals), ``lease`` (all the
leases it hands out), ``complete``/``complete_many``/``retry`` are one transaction each, and
are committed before the call returns: never one per URL, and no group-commit timer, so a
completion the engine was told about is durable (a timer would let a kill re-hand out pages
whose slots were already reused, more than were in flight). A write that fails rolls back
and leaves this object unusable (StateError): reopen the state, which is consistent.

Guarantees:

* A URL is seen iff it has a row; a queued one's row is inserted in the same transaction.
* A request leased and not completed when the process died is queued again at the next open
  (``counts().recovered``; its next lease has ``attempts > 0``); a completed one is never
  handed out again.
* ``synchronous=NORMAL`` (the default) in WAL mode: a kill -9 loses no committed
  transaction; a power loss or OS crash may lose the last transactions but never consistency
  (the lost work is redone: leases or completions lost mean pages fetched again).
  ``synchronous=FULL`` also makes every transaction durable against power loss (one fsync
  per commit).

Open checks the state before anything is written: the lock (a second process gets "in use by
process PID"), a directory that holds anything else than a state, the SQLite header and file
size (a truncated file), the format name and version in ``meta``, and ``PRAGMA quick_check``
(every page of the database, O(size)). Any of them: StateError, nothing changed.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import fcntl
import heapq
import json
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from crawler.fingerprint import Fingerprinter, new_key
from crawler.frontier import MemorySeenSet
from crawler.state.base import (
    KIND_PAGE,
    Candidate,
    Counts,
    Lease,
    Outcome,
    StateError,
    StoredRobots,
)

__all__ = ["DB_NAME", "FORMAT", "LOCK_NAME", "VERSION", "SQLiteState", "StateStatus"]

#: The format name stored in ``meta`` (a database with another is not a crawl state).
FORMAT = "crawler-state"
#: The format version this module reads and writes.
VERSION = 1
DB_NAME = "state.db"
LOCK_NAME = "lock"
_NEW = DB_NAME + ".new"  # a state being created, renamed to DB_NAME when complete
_OWN = frozenset(
    {DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm", LOCK_NAME}
    | {_NEW + s for s in ("", "-wal", "-shm", "-journal")}
)

# Request states (the ``state`` column).
_QUEUED, _LEASED, _OK, _FAILED, _SEEN, _HELD = 0, 1, 2, 3, 4, 5

_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL);
CREATE TABLE totals(id INTEGER PRIMARY KEY CHECK (id = 0), queued INTEGER NOT NULL,
    leased INTEGER NOT NULL, done INTEGER NOT NULL, seen INTEGER NOT NULL);
CREATE TABLE origins(id INTEGER PRIMARY KEY, origin TEXT NOT NULL UNIQUE, host TEXT NOT NULL);
CREATE TABLE hosts(host TEXT PRIMARY KEY, admitted INTEGER NOT NULL);
CREATE TABLE requests(
    id INTEGER PRIMARY KEY,  -- discovery order
    fp INTEGER NOT NULL,  -- fingerprint, as a signed 64-bit integer
    origin_id INTEGER NOT NULL,
    depth INTEGER NOT NULL,
    state INTEGER NOT NULL,
    kind INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    referrer_id INTEGER,  -- the row of the page that linked it
    url TEXT NOT NULL,
    ref_url TEXT,  -- the referrer, only when it has no row of its own
    not_before REAL  -- a held (retried) request: not leased before
);
CREATE UNIQUE INDEX requests_fp ON requests(fp);
CREATE INDEX requests_queued ON requests(origin_id, depth, id) WHERE state = 0;
CREATE INDEX requests_open ON requests(state) WHERE state = 1 OR state = 5;
CREATE INDEX requests_referrer ON requests(referrer_id) WHERE referrer_id IS NOT NULL;
CREATE TABLE seeds(id INTEGER PRIMARY KEY);
CREATE TABLE failures(kind TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE robots(origin TEXT PRIMARY KEY, fetched_at REAL NOT NULL, status INTEGER,
    body BLOB NOT NULL, error TEXT);
"""

_MASK64 = (1 << 64) - 1
_SIGN = 1 << 63

# A queued request in memory: (depth, id, url, referrer, kind, attempts); sorted by (depth, id).
_Item = tuple[int, int, str, str | None, int, int]
_ITEM_SQL = (
    "SELECT r.depth, r.id, r.url, COALESCE(p.url, r.ref_url), r.kind, r.attempts"
    " FROM requests r LEFT JOIN requests p ON p.id = r.referrer_id"
)
_T = TypeVar("_T")


def _signed(fp: int) -> int:
    return fp - (1 << 64) if fp & _SIGN else fp


_IDLE, _READY, _SLEEPING = 0, 1, 2


class _Origin:
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
        "window",
    )

    def __init__(self, origin: str, host: str, oid: int | None, delay: float) -> None:
        self.origin = origin
        self.host = host
        self.id = oid
        # Queued rows in memory, sorted by (depth, id); every queued row of this origin whose
        # key is <= tail is here (tail None: all of them, backlog 0).
        self.window: list[_Item] = []
        self.tail: tuple[int, int] | None = None
        self.backlog = 0  # queued rows on disk only (key > tail)
        self.due: deque[_Item] = deque()  # retried requests whose not_before has passed
        self.held = 0  # retried requests still waiting (in the held heap)
        self.active = 0
        self.delay = delay
        self.next_time = 0.0
        self.last: float | None = None
        self.state = _IDLE

    def has_work(self) -> bool:
        return bool(self.due or self.window or self.backlog)


@dataclass(frozen=True, slots=True)
class StateStatus:
    """Where a stored crawl stands, read without the lock (``SQLiteState.read_status``).

    Attributes:
        location: the state directory.
        version: the format version found.
        counts: queued (held retries included), leased (in flight at the last stop, or
            now if a crawl is running), done, failed by kind, seen, origins with queued or
            leased work; ``recovered`` is 0 (nothing is recovered by reading).
        hosts: hosts with at least one request queued or done.
        counters: the crawl's named counters.
        settings: the stored settings (None before the first run stored them).
        seeds: the seed URLs (requests offered without a referrer), first 1,000.
        created: wall-clock time the state was created.
        in_use_by: PID of the process holding the lock now (-1: unknown), or None.
        files: the state's files and their sizes in bytes.
    """

    location: str
    version: int
    counts: Counts
    hosts: int
    counters: dict[str, int]
    settings: dict[str, Any] | None
    seeds: list[str]
    created: float
    in_use_by: int | None = None
    files: dict[str, int] = field(default_factory=dict)


class SQLiteState:
    """The crawl state in SQLite under ``directory`` (created if missing or empty).

    Args:
        directory: the state directory (``--state DIR``).
        synchronous: "normal" (default: survives kill -9; a power loss may lose the last
            transactions, never consistency) or "full" (an fsync per transaction: survives
            power loss too).
        lease_ttl: seconds a lease is valid (``Lease.expires``); leases still open are
            recovered when the state is next opened, whatever their expiry.
        window: the most queued requests of one origin held in memory.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        synchronous: str = "normal",
        lease_ttl: float = 300.0,
        window: int = 256,
    ) -> None:
        if synchronous.lower() not in ("normal", "full"):
            raise ValueError(f"synchronous must be 'normal' or 'full', not {synchronous!r}")
        self.location = os.fspath(directory)
        self._synchronous = synchronous.upper()
        self._ttl = lease_ttl
        self._window_max = max(1, window)
        self._window_budget = 65536  # requests in all windows together (wide crawls)
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._broken: str | None = None
        self._fp: Fingerprinter | None = None
        self._per_host = 8
        self._delay = 0.0
        self._budget = 0
        self._seen = MemorySeenSet()
        self._origins: dict[str, _Origin] = {}
        self._ready: deque[_Origin] = deque()
        self._sleeping: list[tuple[float, int, _Origin]] = []
        self._retired: list[tuple[float, int, _Origin]] = []
        self._held: list[tuple[float, int, _Origin, _Item]] = []
        self._seq = 0
        self._leases: dict[int, tuple[_Origin, str]] = {}  # id -> (origin, url)
        self._leased_urls: dict[str, int] = {}
        self._admitted: dict[str, int] = {}  # host -> queued-or-done (with a budget only)
        self._queued = self._leased = self._done = 0
        self._failed: dict[str, int] = {}
        self._counters: dict[str, int] = {}
        self._recovered = 0
        self._next_id = 1
        self._event = asyncio.Event()

    # -- open and close --

    def _connect(self, path: str, uri: bool = False) -> Any:
        """A connection to ``path`` (a seam: tests wrap it to inject faults)."""
        return sqlite3.connect(path, isolation_level=None, uri=uri)

    async def open(self, *, per_host: int, delay: float, max_pages_per_host: int) -> None:
        """Open (create or continue): take the lock, check the state, recover open leases.

        Raises:
            StateError: not a crawl state, incompatible version, corrupt or truncated, or
                in use by another process. Nothing was changed.
        """
        if self._conn is not None:
            raise StateError(f"{self.location}: already open")
        self._per_host = max(1, per_host)
        self._delay = delay
        self._budget = max_pages_per_host
        directory = self.location
        db = os.path.join(directory, DB_NAME)
        existing = _inspect_directory(directory)
        try:
            self._lock_fd = _take_lock(directory)
            if existing:
                _check_database(directory)
            else:
                _create_database(directory)
            os.ftruncate(self._lock_fd, 0)
            os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)
            conn = self._conn = self._connect(db)
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA cache_size=-8192")  # 8 MiB of pages
            self._load(conn)
        except BaseException:
            self._close_files()
            raise

    def _load(self, conn: Any) -> None:
        """Recover open leases and rebuild the in-memory parts from the database."""
        try:
            key = conn.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()[0]
            self._fp = Fingerprinter(bytes.fromhex(key))
            with self._transaction(conn):
                recovered = conn.execute("UPDATE requests SET state = 0 WHERE state = 1").rowcount
                if recovered:
                    conn.execute(
                        "UPDATE totals SET queued = queued + ?, leased = leased - ?",
                        (recovered, recovered),
                    )
            self._recovered = recovered
            q, leased, done, seen = conn.execute(
                "SELECT queued, leased, done, seen FROM totals"
            ).fetchone()
            self._queued, self._leased, self._done = q, leased, done
            self._next_id = conn.execute(
                "SELECT coalesce(max(id), 0) + 1 FROM requests"
            ).fetchone()[0]
            self._seen = MemorySeenSet(max(seen, 1 << 14))
            add = self._seen.add_fp
            for (fp,) in conn.execute("SELECT fp FROM requests"):
                add(fp & _MASK64)
            rows = conn.execute(
                "SELECT o.id, o.origin, o.host, q.n FROM (SELECT origin_id, count(*) AS n"
                " FROM requests WHERE state = 0 GROUP BY origin_id) q"
                " JOIN origins o ON o.id = q.origin_id"
            )
            for oid, origin, host, n in rows:
                o = self._origins[origin] = _Origin(origin, host, oid, self._delay)
                o.backlog = n
                o.tail = (-1, 0)
                self._schedule(o, None)
            held = conn.execute(
                _ITEM_SQL.replace("SELECT", "SELECT r.not_before, o.origin, o.host, o.id,", 1)
                + " JOIN origins o ON o.id = r.origin_id WHERE r.state = 5"
            )
            for not_before, origin, host, oid, *item in held:
                h = self._origins.get(origin)
                if h is None:
                    h = self._origins[origin] = _Origin(origin, host, oid, self._delay)
                self._hold(h, tuple(item), not_before or 0.0)
            self._failed = dict(conn.execute("SELECT kind, n FROM failures"))
            self._counters = dict(conn.execute("SELECT name, value FROM counters"))
        except sqlite3.DatabaseError as e:
            raise StateError(f"{self.location}: cannot read the state database: {e}") from e

    async def close(self) -> None:
        """Release the lock and close the database (everything is committed already)."""
        self._close_files()

    def _close_files(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def fingerprint(self, url: str) -> int:
        """Keyed BLAKE2b of ``url`` (``crawler.fingerprint``), the key stored in the state."""
        fp = self._fp
        if fp is None:
            raise StateError(f"{self.location}: not open")
        return fp(url)

    # -- writing --

    def _db(self) -> Any:
        if self._broken is not None:
            raise StateError(f"{self.location}: unusable after a failed write ({self._broken})")
        if self._conn is None:
            raise StateError(f"{self.location}: not open")
        return self._conn

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[Any]:
        """BEGIN ... COMMIT; on any error roll back, and a broken object refuses further use."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            self._broken = f"{type(e).__name__}: {e}"
            raise StateError(f"{self.location}: write failed: {e}") from e
        except BaseException as e:
            self._broken = f"{type(e).__name__}: {e}"
            raise

    def _write(self, work: Callable[[Any], _T]) -> _T:
        conn = self._db()
        with self._transaction(conn):
            return work(conn)

    def _totals_sql(self, conn: Any, dq: int, dl: int, dd: int, ds: int) -> None:
        conn.execute(
            "UPDATE totals SET queued = ?, leased = ?, done = ?, seen = ?",
            (self._queued + dq, self._leased + dl, self._done + dd, len(self._seen) + ds),
        )

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
            return []

        def work(conn: Any) -> list[tuple[_Origin, _Item]]:
            next_id = self._next_id
            rows: list[tuple[Any, ...]] = []
            seeds: list[tuple[int]] = []
            queued: list[tuple[_Origin, _Item]] = []
            hosts: dict[str, int] = {}
            ids: dict[str, int | None] = {}  # urls of this batch and referrers -> row id
            admitted = self._admitted
            budget = self._budget
            for c in new:
                o = self._origin(conn, c.origin, c.host)
                rid: int | None = None
                ref_url = c.referrer
                if ref_url is not None:
                    if ref_url in ids:
                        rid = ids[ref_url]
                    else:
                        rid = ids[ref_url] = self._row_id(conn, ref_url)
                    if rid is not None:
                        ref_url = None
                state = _SEEN
                if c.queue:
                    if budget > 0:
                        n = admitted.get(c.host)
                        if n is None:
                            n = self._host_admitted(conn, c.host)
                        if n + hosts.get(c.host, 0) < budget:
                            state = _QUEUED
                    else:
                        state = _QUEUED
                if state == _QUEUED:
                    hosts[c.host] = hosts.get(c.host, 0) + 1
                    queued.append((o, (c.depth, next_id, c.url, c.referrer, c.kind, 0)))
                    if c.referrer is None and c.kind == KIND_PAGE:
                        seeds.append((next_id,))
                ids[c.url] = next_id
                rows.append(
                    (next_id, _signed(c.fp), o.id, c.depth, state, c.kind, rid, c.url, ref_url)
                )
                next_id += 1
            conn.executemany(
                "INSERT INTO requests(id, fp, origin_id, depth, state, kind, attempts,"
                " referrer_id, url, ref_url) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
                rows,
            )
            if hosts:
                conn.executemany(
                    "INSERT INTO hosts(host, admitted) VALUES (?, ?) ON CONFLICT(host)"
                    " DO UPDATE SET admitted = admitted + excluded.admitted",
                    hosts.items(),
                )
            if seeds:
                conn.executemany("INSERT INTO seeds(id) VALUES (?)", seeds)
            self._totals_sql(conn, len(queued), 0, 0, len(rows))
            self._next_id = next_id
            for host, n in hosts.items():
                if host in admitted:
                    admitted[host] += n
            return queued

        queued = self._write(work)
        add = self._seen.add_fp
        for c in new:
            add(c.fp)
        self._queued += len(queued)
        for o, item in queued:
            self._enqueue(o, item)
        self._event.set()
        return new

    def _origin(self, conn: Any, origin: str, host: str) -> _Origin:
        """The in-memory origin (created, with its row, if new), inside a transaction."""
        o = self._origins.get(origin)
        if o is None:
            o = self._origins[origin] = _Origin(origin, host, None, self._delay)
        if o.id is None:
            row = conn.execute("SELECT id FROM origins WHERE origin = ?", (origin,)).fetchone()
            if row is None:
                o.id = conn.execute(
                    "INSERT INTO origins(origin, host) VALUES (?, ?)", (origin, host)
                ).lastrowid
            else:
                o.id = row[0]
        return o

    def _row_id(self, conn: Any, url: str) -> int | None:
        rid = self._leased_urls.get(url)
        if rid is not None:
            return rid
        row = conn.execute(
            "SELECT id FROM requests WHERE fp = ?", (_signed(self.fingerprint(url)),)
        ).fetchone()
        return None if row is None else int(row[0])

    def _host_admitted(self, conn: Any, host: str) -> int:
        row = conn.execute("SELECT admitted FROM hosts WHERE host = ?", (host,)).fetchone()
        n = self._admitted[host] = 0 if row is None else int(row[0])
        return n

    def _enqueue(self, o: _Origin, item: _Item) -> None:
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
        if o.state == _IDLE:
            self._schedule(o, None)

    def _window_size(self) -> int:
        return max(16, min(self._window_max, self._window_budget // max(1, len(self._origins))))

    def _refill(self, o: _Origin) -> None:
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
            self._broken = f"{type(e).__name__}: {e}"
            raise StateError(f"{self.location}: read failed: {e}") from e
        o.window.extend(rows)
        o.backlog -= len(rows)
        if len(rows) < size or o.backlog <= 0:
            o.backlog = 0
            o.tail = None
        else:
            last = rows[-1]
            o.tail = (last[0], last[1])

    def _hold(self, o: _Origin, item: _Item, not_before: float) -> None:
        self._seq += 1
        heapq.heappush(self._held, (not_before, self._seq, o, item))
        o.held += 1

    def _release_held(self, now: float) -> None:
        held = self._held
        while held and held[0][0] <= now:
            _, _, o, item = heapq.heappop(held)
            o.held -= 1
            o.due.append(item)
            if o.state == _IDLE:
                self._schedule(o, now)

    def _schedule(self, o: _Origin, now: float | None) -> None:
        # Put an idle origin where it belongs: the ready ring, the sleep heap, or nowhere.
        if not o.has_work() or o.active >= self._per_host:
            return
        if o.next_time and (now is None or o.next_time > now):
            self._seq += 1
            heapq.heappush(self._sleeping, (o.next_time, self._seq, o))
            o.state = _SLEEPING
        else:
            self._ready.append(o)
            o.state = _READY

    def _wake(self, now: float) -> None:
        sleeping = self._sleeping
        while sleeping and sleeping[0][0] <= now:
            o = heapq.heappop(sleeping)[2]
            o.state = _IDLE
            self._schedule(o, now)

    def _forget(self, o: _Origin, now: float) -> None:
        # Keep the table small on wide crawls; a running delay keeps the origin a while.
        if o.active or o.held or o.has_work() or o.state != _IDLE:
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
            if not (o.active or o.held or o.has_work()) and o.state == _IDLE:
                if self._origins.get(o.origin) is o:
                    del self._origins[o.origin]

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
        picked: list[tuple[_Origin, _Item]] = []
        while len(picked) < n and ready:
            o = ready.popleft()
            o.state = _IDLE
            if o.next_time > now:
                self._schedule(o, now)  # its delay grew while it waited in the ring
                continue
            if o.due:
                item = o.due.popleft()
            else:
                if not o.window:
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

        def work(conn: Any) -> None:
            conn.executemany(
                "UPDATE requests SET state = 1, attempts = attempts + 1 WHERE id = ?",
                [(item[1],) for _, item in picked],
            )
            self._totals_sql(conn, -len(picked), len(picked), 0, 0)

        self._write(work)
        self._queued -= len(picked)
        self._leased += len(picked)
        expires = now + self._ttl
        leases = []
        for o, (depth, rid, url, referrer, kind, attempts) in picked:
            self._leases[rid] = (o, url)
            self._leased_urls[url] = rid
            leases.append(Lease(rid, url, depth, referrer, o.origin, kind, attempts, expires))
        return leases

    def _end_lease(self, lease: Lease, now: float) -> _Origin | None:
        entry = self._leases.pop(lease.id, None)
        if entry is None:
            return None
        o, url = entry
        self._leased_urls.pop(url, None)
        o.active -= 1
        if o.state == _IDLE:
            self._schedule(o, now)
        return o

    async def complete(self, lease: Lease, outcome: Outcome, now: float) -> None:
        """The request is done (committed before this returns); frees its origin's slot."""
        await self.complete_many([(lease, outcome)], now)

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        """``complete`` for several leases in one transaction. Unknown leases are ignored."""
        self._db()
        todo = [(le, out) for le, out in done if le.id in self._leases]
        if not todo:
            return
        kinds: dict[str, int] = {}
        for _, out in todo:
            if out.error is not None:
                kinds[out.error] = kinds.get(out.error, 0) + 1

        def work(conn: Any) -> None:
            conn.executemany(
                "UPDATE requests SET state = ? WHERE id = ?",
                [(_OK if out.error is None else _FAILED, le.id) for le, out in todo],
            )
            if kinds:
                conn.executemany(
                    "INSERT INTO failures(kind, n) VALUES (?, ?) ON CONFLICT(kind)"
                    " DO UPDATE SET n = n + excluded.n",
                    kinds.items(),
                )
            self._totals_sql(conn, 0, -len(todo), len(todo), 0)

        self._write(work)
        self._leased -= len(todo)
        self._done += len(todo)
        for kind, k in kinds.items():
            self._failed[kind] = self._failed.get(kind, 0) + k
        for le, _ in todo:
            o = self._end_lease(le, now)
            if o is not None:
                self._forget(o, now)
        if self._retired:
            self._sweep(now)
        self._event.set()

    async def retry(self, lease: Lease, not_before: float, now: float) -> None:
        """Put the request back, not to be leased before ``not_before``. Frees its slot."""
        self._db()
        if lease.id not in self._leases:
            return

        def work(conn: Any) -> None:
            conn.execute(
                "UPDATE requests SET state = 5, not_before = ? WHERE id = ?",
                (not_before, lease.id),
            )
            self._totals_sql(conn, 1, -1, 0, 0)

        self._write(work)
        self._leased -= 1
        self._queued += 1
        o = self._end_lease(lease, now)
        assert o is not None
        item = (lease.depth, lease.id, lease.url, lease.referrer, lease.kind, lease.attempts + 1)
        if not_before <= now:
            o.due.append(item)
        else:
            self._hold(o, item, not_before)
        if o.state == _IDLE:
            self._schedule(o, now)
        self._event.set()

    def set_delay(self, origin: str, delay: float) -> None:
        """Seconds between two request starts to ``origin`` (robots.txt Crawl-delay)."""
        o = self._origins.get(origin)
        if o is None:
            host = origin.partition("://")[2].rpartition(":")[0] or origin
            o = self._origins[origin] = _Origin(origin, host, None, self._delay)
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

    async def wait(self, timeout: float) -> None:
        """Return after an offer, completion or retry (since the last wait), or ``timeout``."""
        try:
            await asyncio.wait_for(self._event.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._event.clear()

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
        """The URLs first discovered by page ``url`` (its links that were new), in order.

        For re-listing the links of a page that was in flight when a process stopped: they
        were marked seen then, so fetching it again finds none of them new.
        """
        conn = self._db()
        row = conn.execute(
            "SELECT id FROM requests WHERE fp = ?", (_signed(self.fingerprint(url)),)
        ).fetchone()
        if row is None:
            return []
        rows = conn.execute(
            "SELECT url FROM requests WHERE referrer_id = ? ORDER BY id", (row[0],)
        ).fetchall()
        return [u for (u,) in rows]

    # -- counters, robots, settings --

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        """Add to the named counters, in one transaction."""
        items = [(k, v) for k, v in deltas.items() if v]
        if not items:
            return
        self._write(
            lambda conn: conn.executemany(
                "INSERT INTO counters(name, value) VALUES (?, ?) ON CONFLICT(name)"
                " DO UPDATE SET value = value + excluded.value",
                items,
            )
        )
        for k, v in items:
            self._counters[k] = self._counters.get(k, 0) + v

    async def counters(self) -> dict[str, int]:
        """The named counters, summed over every run."""
        self._db()
        return dict(self._counters)

    async def get_robots(self, origin: str) -> StoredRobots | None:
        """The stored robots.txt of ``origin``."""
        row = (
            self._db()
            .execute(
                "SELECT fetched_at, status, body, error FROM robots WHERE origin = ?", (origin,)
            )
            .fetchone()
        )
        if row is None:
            return None
        return StoredRobots(origin, row[0], row[1], bytes(row[2]), row[3])

    async def put_robots(self, robots: StoredRobots) -> None:
        """Store (replace) the robots.txt of ``robots.origin``."""
        r = robots
        self._write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO robots(origin, fetched_at, status, body, error)"
                " VALUES (?, ?, ?, ?, ?)",
                (r.origin, r.fetched_at, r.status, r.body, r.error),
            )
        )

    async def load_settings(self) -> dict[str, Any] | None:
        """The settings stored with the crawl, or None for a new crawl."""
        row = self._db().execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        return None if row is None else dict(json.loads(row[0]))

    async def save_settings(self, settings: Mapping[str, Any]) -> None:
        """Store (replace) the crawl's settings, as JSON."""
        text = json.dumps(dict(settings), sort_keys=True)
        self._write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('settings', ?)", (text,)
            )
        )

    # -- status, without the lock --

    @staticmethod
    def read_status(directory: str | os.PathLike[str]) -> StateStatus:
        """Where the crawl stored in ``directory`` stands, for ``crawler status --state DIR``.

        Reads only (a ``mode=ro`` connection; no lock taken, nothing written), so it works
        while a crawl runs on the state. Checks the header, format and version but not every
        page (no ``quick_check``: a status stays fast on a big state).

        Raises:
            StateError: no state there, not a crawl state, incompatible version, corrupt.
        """
        directory = os.fspath(directory)
        db = os.path.join(directory, DB_NAME)
        if not os.path.exists(db):
            raise StateError(f"{directory}: no crawl state here (no {DB_NAME})")
        _check_header(db)
        conn = _open_ro(db)
        try:
            version = _check_meta(conn, directory)
            q, leased, done, seen = conn.execute(
                "SELECT queued, leased, done, seen FROM totals"
            ).fetchone()
            origins = conn.execute(
                "SELECT count(*) FROM (SELECT origin_id FROM requests WHERE state = 0"
                " UNION SELECT origin_id FROM requests WHERE state = 1 OR state = 5)"
            ).fetchone()[0]
            counts = Counts(
                queued=q,
                leased=leased,
                done=done,
                failed=dict(conn.execute("SELECT kind, n FROM failures ORDER BY kind")),
                seen=seen,
                origins=origins,
            )
            meta = dict(conn.execute("SELECT key, value FROM meta"))
            settings = json.loads(meta["settings"]) if "settings" in meta else None
            seeds = [
                u
                for (u,) in conn.execute(
                    "SELECT r.url FROM seeds s JOIN requests r ON r.id = s.id ORDER BY s.id"
                    " LIMIT 1000"
                )
            ]
            status = StateStatus(
                location=directory,
                version=version,
                counts=counts,
                hosts=conn.execute("SELECT count(*) FROM hosts").fetchone()[0],
                counters=dict(conn.execute("SELECT name, value FROM counters")),
                settings=settings,
                seeds=seeds,
                created=float(meta.get("created", 0.0)),
                in_use_by=_lock_holder(directory),
                files={
                    name: os.path.getsize(os.path.join(directory, name))
                    for name in sorted(os.listdir(directory))
                    if name in _OWN
                },
            )
        except sqlite3.DatabaseError as e:
            raise StateError(f"{directory}: cannot read the state database: {e}") from e
        finally:
            conn.close()
        return status


# -- the files: directory, lock, header and integrity checks, creation --


def _inspect_directory(directory: str) -> bool:
    """Whether ``directory`` holds a state (False: missing or empty, created now).

    Raises:
        StateError: it holds anything else than a state's files (never taken over).
    """
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise StateError(f"{directory}: cannot create the state directory: {e}") from e
        return False
    except NotADirectoryError:
        raise StateError(f"{directory}: not a directory") from None
    except OSError as e:
        raise StateError(f"{directory}: cannot read the state directory: {e}") from e
    others = sorted(set(names) - _OWN)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise StateError(
            f"{directory}: not a crawl state (it holds {shown}); give an empty or new directory"
        )
    if DB_NAME not in names and (DB_NAME + "-wal") in names:
        raise StateError(f"{directory}: {DB_NAME} is missing but its -wal file is there")
    return DB_NAME in names


def _take_lock(directory: str) -> int:
    """An exclusive flock on DIR/lock (retried for 0.2 s), before anything is written."""
    path = os.path.join(directory, LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise StateError(f"{directory}: cannot open the lock file: {e}") from e
    deadline = time.monotonic() + 0.2
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.02)
                continue
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f"process {text}" if text.isdigit() else "another process"
            raise StateError(
                f"{directory}: in use by {who} (one crawl per state directory)"
            ) from None
        except OSError as e:
            os.close(fd)
            raise StateError(f"{directory}: cannot lock the state: {e}") from e


def _lock_holder(directory: str) -> int | None:
    """PID of the process holding DIR/lock, if one does (a shared flock probe, no write)."""
    try:
        fd = os.open(os.path.join(directory, LOCK_NAME), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _check_header(db: str) -> None:
    """The SQLite header and the file size: catches a truncated or overwritten file fast."""
    try:
        with open(db, "rb") as f:
            header = f.read(100)
        size = os.path.getsize(db)
    except OSError as e:
        raise StateError(f"{db}: cannot read: {e}") from e
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        raise StateError(f"{db}: not a SQLite database (corrupt or overwritten)")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[92:96] == header[24:28]
    if page_size < 512 or size % page_size or (valid and size < pages * page_size):
        raise StateError(
            f"{db}: truncated ({size} bytes, the header says {pages} pages of {page_size})"
        )


def _open_ro(db: str) -> sqlite3.Connection:
    # Without a -wal file the database file is the whole state: immutable=1 reads it without
    # creating -wal and -shm files (a plain mode=ro connection would create them).
    immutable = "&immutable=1" if not os.path.exists(db + "-wal") else ""
    try:
        return sqlite3.connect(f"file:{_quote(db)}?mode=ro{immutable}", uri=True)
    except sqlite3.Error as e:
        raise StateError(f"{db}: cannot open: {e}") from e


def _quote(path: str) -> str:
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def _check_meta(conn: sqlite3.Connection, directory: str) -> int:
    """The format name and version in ``meta``; returns the version."""
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('format', 'version')"))
    except sqlite3.OperationalError:
        raise StateError(f"{directory}: not a crawl state (no meta table)") from None
    if meta.get("format") != FORMAT:
        raise StateError(f"{directory}: not a crawl state (format {meta.get('format')!r})")
    try:
        version = int(meta.get("version", -1))
    except (TypeError, ValueError):
        version = -1
    if version != VERSION:
        raise StateError(
            f"{directory}: state format version {meta.get('version')}, this crawler reads"
            f" version {VERSION}: use the crawler version that wrote it, or a new directory"
        )
    return version


def _check_database(directory: str) -> None:
    """Header, size, format, version and ``PRAGMA quick_check``, all read-only."""
    db = os.path.join(directory, DB_NAME)
    _check_header(db)
    conn = _open_ro(db)
    try:
        _check_meta(conn, directory)
        result = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        if result != ["ok"]:
            raise StateError(f"{db}: corrupt ({'; '.join(result)})")
    except sqlite3.DatabaseError as e:
        raise StateError(f"{db}: corrupt ({e})") from e
    finally:
        conn.close()


def _create_database(directory: str) -> None:
    """A new state: built under a temporary name, then renamed (never half a state)."""
    tmp = os.path.join(directory, _NEW)
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp + suffix)
    conn = sqlite3.connect(tmp, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("BEGIN")
        for statement in _SCHEMA.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.executemany(
            "INSERT INTO meta(key, value) VALUES (?, ?)",
            [
                ("format", FORMAT),
                ("version", str(VERSION)),
                ("key", new_key().hex()),
                ("created", repr(time.time())),
            ],
        )
        conn.execute("INSERT INTO totals VALUES (0, 0, 0, 0, 0)")
        conn.execute("COMMIT")
    finally:
        conn.close()
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, os.path.join(directory, DB_NAME))
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
