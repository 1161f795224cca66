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

The parts: this module opens and closes the state, runs the group transaction and stores
the counters, robots.txt and settings; its base class ``SQLiteFrontier``
(``crawler.state._sqlite_frontier``) is the frontier over the rows (offer, lease, complete,
retry, the seen probe, the counts), on ``crawler.state._sqlite_origins`` (the per-origin
schedule in memory); ``crawler.state._sqlite_files`` is the directory, lock, checks and
creation, ``crawler.state._sqlite_status`` the reading of a state without the lock.

Measured (tests/test_state_sqlite.py, benchmarks/sqlite_state.py; 2 shared cores, loaded):
1,000,000 queued URLs of one origin: peak RSS 59.5 MiB (34 B/URL over the process once
open), 86 B/URL on disk; 10,000,000: peak RSS 419 MiB (41 B/URL: the probe's table doubling
from 128 to 256 MiB is most of it), 88 B/URL on disk. Offering costs 6-7 CPU us per URL.
``open()`` at 1M URLs: 0.74-0.82 CPU s whether 0% or 90% of them are done (O(seen), not
pages fetched), of which the checks 0.3 s; at 10M: 12.2 CPU s, of which the checks 3.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import sqlite3
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from crawler.state._sqlite_files import (
    DB_NAME,
    FORMAT,
    LOCK_NAME,
    VERSION,
    check_database,
    create_database,
    inspect_directory,
    take_lock,
    unpack_fps,
)
from crawler.state._sqlite_frontier import SQLiteFrontier
from crawler.state._sqlite_status import StateStatus, read_settings, read_status
from crawler.state.base import StateError, StoredRobots
from crawler.urls.fingerprint import Fingerprinter
from crawler.urls.seen import MemorySeenSet

__all__ = ["DB_NAME", "FORMAT", "LOCK_NAME", "VERSION", "SQLiteState", "StateStatus"]

_T = TypeVar("_T")


class SQLiteState(SQLiteFrontier):
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
        self._conn: Any = None
        self._lock_fd: int | None = None
        self._broken: str | None = None
        self._txn: asyncio.Future[None] | None = None  # the open group transaction's commit
        #: Transactions committed since open (for tests and benchmarks).
        self.commits = 0
        self._fp: Fingerprinter | None = None
        self._counters: dict[str, int] = {}
        super().__init__(lease_ttl=lease_ttl, window=window)

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
            for fp in unpack_fps(data):
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
        self._load_queued(conn)
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
        return read_settings(directory)

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
        return read_status(directory)


def _consume(fut: asyncio.Future[None]) -> None:
    # A failed commit nobody awaited (every writer had been cancelled) is not an error to log.
    if not fut.cancelled():
        fut.exception()
