"""A stored SQLite crawl read from outside: its settings and where it stands, without the lock.

For ``crawler status --state DIR`` and for the CLI's check of the stored settings before a
crawl opens the state: read-only connections (``mode=ro``, or ``immutable`` when no -wal
file exists), no lock taken, nothing written, so it works while a crawl runs on the state.
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from crawler.state._sqlite_files import (
    DB_NAME,
    OWN_FILES,
    check_header,
    check_meta,
    check_owner,
    inspect_directory,
    lock_holder,
    open_ro,
)
from crawler.state.base import Counts, StateError

__all__ = ["StateStatus", "read_settings", "read_status"]


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


def read_settings(directory: str | os.PathLike[str]) -> dict[str, Any] | None:
    """``SQLiteState.read_settings``: the settings stored in ``directory`` (None: none yet)."""
    directory = os.fspath(directory)
    db = os.path.join(directory, DB_NAME)
    try:
        names = set(os.listdir(directory))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StateError(f"{directory}: cannot read the state directory: {e}") from e
    if DB_NAME not in names:
        inspect_directory(directory)  # refuses a directory of other files, or of others
        return None
    check_owner(directory)
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


def read_status(directory: str | os.PathLike[str]) -> StateStatus:
    """``SQLiteState.read_status``: where the crawl stored in ``directory`` stands."""
    directory = os.fspath(directory)
    db = os.path.join(directory, DB_NAME)
    if not os.path.exists(db):
        raise StateError(f"{directory}: no crawl state here (no {DB_NAME})")
    check_owner(directory)
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
