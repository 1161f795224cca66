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
  ``crawler.state.frontier.MemoryFrontier``, so memory follows the origins with work.
* The counts (queued, leased, done, failed by kind, seen), kept incrementally and written
  in each transaction (no COUNT(*) at run time).

Every row is kept, done ones too: a request's row *is* its "seen" mark, so marking seen and
queueing are one INSERT; ``discovered_by`` (index on referrer) and ``read_status`` read them.

Transactions (group commit): every write made in one turn of the event loop joins ONE
transaction, committed by a callback at the next turn (``loop.call_soon``); each writer
(``offer_many``, ``lease``, ``complete``/``complete_many``, ``retry``, robots, settings)
awaits that commit, so when it returns its rows are committed. Never a transaction per URL,
and under load many writers share one (about 5 pages per transaction in
benchmarks/sqlite_state.py) with no timer to wait for. ``add_counters`` joins without
waiting: it commits with the completions that follow it. A write that fails rolls back the
whole transaction, fails every writer waiting on it (StateError), and leaves this object
unusable: reopen the state, which is consistent (memory is rebuilt from the rows).

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

  A power loss keeps a prefix of the transactions (WAL frames carry chained checksums), so
  a page whose discoveries were lost has lost its later completion too and is fetched again:
  no URL is lost either way.

Open checks the state before anything is written: the directory (anything but a state's own
files is refused), the lock (a second process gets "in use by process PID"), the SQLite
header and file size (a truncated file), the format name and version in ``meta``, and
``PRAGMA quick_check`` (every page: O(size), ~1 s per 100 MB here), then reads every
fingerprint (8 bytes a URL, from the ``fps`` table) before the one write of the open, the
recovery of open leases. Any failure: StateError, nothing changed.

Measured (tests/test_state_sqlite.py, benchmarks/sqlite_state.py; 2 shared cores, loaded):
1,000,000 queued URLs of one origin: peak RSS 59.5 MiB (34 B/URL over the process once
open), 86 B/URL on disk; 10,000,000: peak RSS 419 MiB (41 B/URL: the probe's table doubling
from 128 to 256 MiB is most of it), 88 B/URL on disk. Offering costs 6-7 CPU us per URL.
``open()`` at 1M URLs: 0.74-0.82 CPU s whether 0% or 90% of them are done (O(seen), not
pages fetched), of which the checks 0.3 s; at 10M: 12.2 CPU s, of which the checks 3.1.
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
import sys
from array import array
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from crawler.state._sqlite_files import (
    DB_NAME,
    FORMAT,
    LOCK_NAME,
    OWN_FILES,
    VERSION,
    check_database,
    check_header,
    check_meta,
    create_database,
    inspect_directory,
    lock_holder,
    open_ro,
    take_lock,
)
from crawler.state.base import (
    KIND_PAGE,
    Candidate,
    Counts,
    Lease,
    Outcome,
    StateError,
    StoredRobots,
    wait_event,
)
from crawler.urls.fingerprint import Fingerprinter
from crawler.urls.seen import MemorySeenSet

__all__ = ["DB_NAME", "FORMAT", "LOCK_NAME", "VERSION", "SQLiteState", "StateStatus"]

# Request states (the ``state`` column).
_QUEUED, _LEASED, _OK, _FAILED, _SEEN, _HELD = 0, 1, 2, 3, 4, 5


# A queued request in memory: (depth, id, url, referrer, kind, attempts); sorted by (depth, id).
_Item = tuple[int, int, str, str | None, int, int]
_ITEM_SQL = (
    "SELECT r.depth, r.id, r.url, COALESCE(p.url, r.ref_url), r.kind, r.attempts"
    " FROM requests r LEFT JOIN requests p ON p.id = r.referrer_id"
)
_T = TypeVar("_T")


def _pack(fps: list[int]) -> bytes:
    words = array("Q", fps)
    if sys.byteorder == "big":
        words.byteswap()
    return words.tobytes()


def _unpack(data: bytes) -> array[int]:
    words = array("Q")
    words.frombytes(data)
    if sys.byteorder == "big":
        words.byteswap()
    return words


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
        busiest: up to 10 origins with the most queued requests, as (origin, queued).
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
    busiest: list[tuple[str, int]] = field(default_factory=list)

    @property
    def disk_bytes(self) -> int:
        """The state's size on disk (database, WAL, lock)."""
        return sum(self.files.values())


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

    shared = False

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
        self._conn: Any = None
        self._lock_fd: int | None = None
        self._broken: str | None = None
        self._txn: asyncio.Future[None] | None = None  # the open group transaction's commit
        #: Transactions committed since open (for tests and benchmarks).
        self.commits = 0
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
        self._leases: dict[int, tuple[_Origin, str, int]] = {}  # id -> (origin, url, attempts)
        self._leased_urls: dict[str, int] = {}
        # Recent seen-only rows (redirect targets fetched in-line): url -> id, so that the
        # links of such a page get their referrer's row without an index on URLs.
        self._recent: OrderedDict[str, int] = OrderedDict()
        self._admitted: dict[str, int] = {}  # host -> queued-or-done (with a budget only)
        self._queued = self._leased = self._done = 0
        self._failed: dict[str, int] = {}
        self._counters: dict[str, int] = {}
        self._recovered = 0
        self._next_id = 1
        self._event = asyncio.Event()

    # -- open and close --

    def _connect(self, path: str) -> Any:
        """The read-write connection (a seam: tests wrap it to inject faults)."""
        return sqlite3.connect(path, isolation_level=None)

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
        existing = inspect_directory(directory)
        try:
            if existing and not os.path.exists(os.path.join(directory, LOCK_NAME)):
                # No lock file, so no process uses it (each one creates it): check first,
                # so that a refused database does not gain a lock file.
                check_database(directory)
                self._lock_fd = take_lock(directory)
            else:
                self._lock_fd = take_lock(directory)
                if existing:
                    check_database(directory)
            if not existing:
                create_database(directory)
            os.ftruncate(self._lock_fd, 0)
            os.pwrite(self._lock_fd, f"{os.getpid()}\n".encode(), 0)
            self._conn = self._connect(os.path.join(directory, DB_NAME))
            self._load(self._conn)
        except sqlite3.Error as e:
            self._close_files()
            raise StateError(f"{self.location}: cannot open the state database: {e}") from e
        except BaseException:
            self._close_files()
            raise

    def _load(self, conn: Any) -> None:
        """Recover open leases and rebuild the in-memory parts from the database."""
        conn.execute(f"PRAGMA synchronous={self._synchronous}")
        conn.execute("PRAGMA cache_size=-8192")  # 8 MiB of pages
        key = conn.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()[0]
        self._fp = Fingerprinter(bytes.fromhex(key))
        q, leased, done, seen = conn.execute(
            "SELECT queued, leased, done, seen FROM totals"
        ).fetchone()
        self._next_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM requests").fetchone()[0]
        # Every fingerprint is read (and counted against the totals) before the one write
        # of open, the recovery below: a state that does not add up is refused unchanged.
        self._seen = MemorySeenSet(max(seen, 1 << 14))
        add = self._seen.add_fp
        for (data,) in conn.execute("SELECT data FROM fps"):
            for fp in _unpack(data):
                add(fp)
        if len(self._seen) != seen:
            raise StateError(f"{self.location}: {len(self._seen)} requests, the totals say {seen}")
        conn.execute("BEGIN IMMEDIATE")
        recovered = conn.execute("UPDATE requests SET state = 0 WHERE state = 1").rowcount
        conn.execute(
            "UPDATE totals SET queued = queued + ?, leased = leased - ?", (recovered, recovered)
        )
        conn.execute("COMMIT")
        self._recovered = recovered
        self._queued, self._leased, self._done = q + recovered, leased - recovered, done
        rows = conn.execute(
            "SELECT o.id, o.origin, o.host, q.n FROM (SELECT origin_id, count(*) AS n"
            " FROM requests WHERE state = 0 GROUP BY origin_id) q"
            " JOIN origins o ON o.id = q.origin_id"
        )
        for oid, origin, host, n in rows:
            o = self._origins[origin] = _Origin(origin, host, oid, self._delay)
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
                h = self._origins[origin] = _Origin(origin, host, oid, self._delay)
            self._hold(h, tuple(item), not_before or 0.0)
        self._failed = dict(conn.execute("SELECT kind, n FROM failures"))
        self._counters = dict(conn.execute("SELECT name, value FROM counters"))

    async def close(self) -> None:
        """Commit what is pending, close the database and release the lock. Idempotent."""
        if self._txn is not None and self._broken is None:
            self._commit()
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
        """Keyed BLAKE2b of ``url`` (``crawler.urls.fingerprint``), the key stored in the state."""
        fp = self._fp
        if fp is None:
            raise StateError(f"{self.location}: not open")
        return fp(url)

    def seen(self, fp: int) -> bool:
        """Whether ``fp`` has a request row: the in-memory probe, exact for this backend."""
        return self._seen.contains_fp(fp)

    def probe_parts(self) -> tuple[MemorySeenSet, Fingerprinter | None] | None:
        """What ``seen`` reads and the ``fingerprint`` function (None before ``open``)."""
        return None if self._fp is None else (self._seen, self._fp)

    # -- writing: one group transaction per turn of the event loop --

    def _db(self) -> Any:
        if self._broken is not None:
            raise StateError(f"{self.location}: unusable after a failed write ({self._broken})")
        if self._conn is None:
            raise StateError(f"{self.location}: not open")
        return self._conn

    def _begin(self) -> asyncio.Future[None]:
        """The open group transaction (BEGIN now if none), committed at the loop's next turn.

        Every write of one turn shares it; each caller awaits its commit, so a method returns
        only once its writes are committed (group commit: fewer transactions, same promise).
        """
        fut = self._txn
        if fut is None:
            conn = self._db()
            loop = asyncio.get_running_loop()
            try:
                conn.execute("BEGIN IMMEDIATE")
            except BaseException as e:
                err = self._fail(e)
                if isinstance(e, sqlite3.Error):
                    raise err from e
                raise
            fut = self._txn = loop.create_future()
            fut.add_done_callback(_consume)
            loop.call_soon(self._commit)
        return fut

    def _commit(self) -> None:
        fut = self._txn
        if fut is None or self._conn is None:
            return
        try:
            self._conn.execute(
                "UPDATE totals SET queued = ?, leased = ?, done = ?, seen = ?",
                (self._queued, self._leased, self._done, len(self._seen)),
            )
            self._conn.execute("COMMIT")
        except Exception as e:  # a callback: the waiting writers get it as a StateError
            self._fail(e)
            return
        self._txn = None
        self.commits += 1
        if not fut.done():
            fut.set_result(None)

    def _fail(self, e: BaseException) -> StateError:
        """A write failed: roll back, fail the pending commit, refuse any further use."""
        self._broken = f"{type(e).__name__}: {e}"
        err = StateError(f"{self.location}: write failed, reopen the state: {e}")
        conn = self._conn
        if conn is not None:
            with contextlib.suppress(sqlite3.Error):
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
        fut, self._txn = self._txn, None
        if fut is not None and not fut.done():
            fut.set_exception(err)
        return err

    async def _write(self, work: Callable[[Any], _T], *, wait: bool = True) -> _T:
        """Run ``work(conn)`` in the group transaction and (``wait``) wait for its commit.

        ``work`` updates memory as it goes: if anything fails the object is broken (the
        database, rolled back, is the truth for the next open).
        """
        fut = self._begin()
        try:
            result = work(self._conn)
        except BaseException as e:
            err = self._fail(e)
            if isinstance(e, sqlite3.Error):
                raise err from e
            raise
        if wait:
            await asyncio.shield(fut)
        return result

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
        queued: list[tuple[_Origin, _Item]] = []
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
            (self._next_id, _pack([c.fp for c in new])),
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
                if o is not None and o.last is None and not (o.active or o.held or o.has_work()):
                    del origins[c.origin]
        self._event.set()

    def _origin(self, conn: Any, origin: str, host: str) -> _Origin:
        """The in-memory origin with its row id (both created if new)."""
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

    def _remember(self, url: str, rid: int) -> None:
        recent = self._recent
        recent[url] = rid
        if len(recent) > 4096:
            recent.popitem(last=False)

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
            raise self._fail(e) from e
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

    def _end_lease(self, lease: Lease, now: float) -> _Origin | None:
        entry = self._leases.pop(lease.id, None)
        if entry is None:
            return None
        o, url, _ = entry
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
            if o.state == _IDLE:
                self._schedule(o, now)
            self._event.set()

        await self._write(work)

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

    # -- counters, robots, settings --

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        """Add to the named counters: joins the group transaction without waiting for it.

        So the counters commit with the writes that follow in the same turn of the event loop
        (the engine's completions), or at the next turn: one transaction, not two.
        """
        items = [(k, v) for k, v in deltas.items() if v]
        if not items:
            return

        def work(conn: Any) -> None:
            conn.executemany(
                "INSERT INTO counters(name, value) VALUES (?, ?) ON CONFLICT(name)"
                " DO UPDATE SET value = value + excluded.value",
                items,
            )
            for k, v in items:
                self._counters[k] = self._counters.get(k, 0) + v

        await self._write(work, wait=False)

    async def counters(self) -> dict[str, int]:
        """The named counters, summed over every run."""
        self._db()
        return dict(self._counters)

    async def get_robots(self, origin: str) -> StoredRobots | None:
        """The stored robots.txt of ``origin``."""
        conn = self._db()
        row = conn.execute(
            "SELECT fetched_at, status, body, error FROM robots WHERE origin = ?", (origin,)
        ).fetchone()
        if row is None:
            return None
        return StoredRobots(origin, row[0], row[1], bytes(row[2]), row[3])

    async def put_robots(self, robots: StoredRobots) -> None:
        """Store (replace) the robots.txt of ``robots.origin``."""
        r = robots
        await self._write(
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
        await self._write(
            lambda conn: conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('settings', ?)", (text,)
            )
        )

    # -- status and settings, without the lock --

    @staticmethod
    def read_settings(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
        """The settings stored in ``directory``, read before a crawl opens the state.

        Read-only and cheap (the header and ``meta``; no lock, nothing written). None when
        the directory does not exist or holds no state yet (a new crawl).

        Raises:
            StateError: not a crawl state, incompatible version, corrupt header.
        """
        directory = os.fspath(directory)
        db = os.path.join(directory, DB_NAME)
        try:
            names = set(os.listdir(directory))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise StateError(f"{directory}: cannot read the state directory: {e}") from e
        if DB_NAME not in names:
            inspect_directory(directory)  # refuses a directory of other files
            return None
        check_header(db)
        conn = open_ro(db)
        try:
            check_meta(conn, directory)
            row = conn.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
        except sqlite3.DatabaseError as e:
            raise StateError(f"{directory}: cannot read the state database: {e}") from e
        finally:
            conn.close()
        return None if row is None else dict(json.loads(row[0]))

    @staticmethod
    def read_status(directory: str | os.PathLike[str]) -> StateStatus:
        """Where the crawl stored in ``directory`` stands, for ``crawler status --state DIR``.

        Reads only (a ``mode=ro`` connection, or ``immutable`` when no -wal file exists; no
        lock taken, nothing written), so it works while a crawl runs on the state. Checks
        the header, format and version but not every page (no ``quick_check``: a status
        stays fast on a big state).

        Raises:
            StateError: no state there, not a crawl state, incompatible version, corrupt.
        """
        directory = os.fspath(directory)
        db = os.path.join(directory, DB_NAME)
        if not os.path.exists(db):
            raise StateError(f"{directory}: no crawl state here (no {DB_NAME})")
        try:
            return _read_status(directory, db, immutable=True)
        except StateError:
            # Without a -wal file the file is read as immutable; a crawl that started
            # meanwhile may be changing it: read again the ordinary (WAL-aware) way.
            if os.path.exists(db + "-wal"):
                return _read_status(directory, db, immutable=False)
            raise


def _read_status(directory: str, db: str, *, immutable: bool) -> StateStatus:
    """``read_status`` with the immutable (no -wal file) read or the WAL-aware one."""
    check_header(db)
    conn = open_ro(db, immutable=immutable)
    try:
        version = check_meta(conn, directory)
        q, leased, done, seen = conn.execute(
            "SELECT queued, leased, done, seen FROM totals"
        ).fetchone()
        origins = conn.execute(
            "SELECT count(*) FROM (SELECT origin_id FROM requests WHERE state = 0"
            " UNION SELECT origin_id FROM requests WHERE state = 1 OR state = 5)"
        ).fetchone()[0]
        busiest = [
            (origin, n)
            for origin, n in conn.execute(
                "SELECT o.origin, q.n FROM (SELECT origin_id, count(*) AS n FROM requests"
                " WHERE state = 0 GROUP BY origin_id ORDER BY n DESC LIMIT 10) q"
                " JOIN origins o ON o.id = q.origin_id ORDER BY q.n DESC, o.origin"
            )
        ]
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
                "SELECT r.url FROM seeds s JOIN requests r ON r.id = s.id ORDER BY s.id LIMIT 1000"
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
            in_use_by=lock_holder(directory),
            files={
                name: os.path.getsize(os.path.join(directory, name))
                for name in sorted(os.listdir(directory))
                if name in OWN_FILES
            },
            busiest=busiest,
        )
    except sqlite3.DatabaseError as e:
        raise StateError(f"{directory}: cannot read the state database: {e}") from e
    finally:
        conn.close()
    return status


def _consume(fut: asyncio.Future[None]) -> None:
    # A failed commit nobody awaited (every writer had been cancelled) is not an error to log.
    if not fut.cancelled():
        fut.exception()
