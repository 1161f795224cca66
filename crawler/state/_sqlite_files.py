"""The files of a SQLite crawl state: the directory, the lock, the checks, the creation.

Everything here happens before the state is written to, so that a refusal changes nothing:
the directory is inspected (anything but a state's own files is refused), the lock is taken
(an exclusive ``fcntl.flock`` on DIR/lock), and the database is checked read-only (SQLite
header and file size, format name and version in ``meta``, ``PRAGMA quick_check``).
A new state is built under a temporary name and renamed, so DIR never holds half a state.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import sys
import time
from array import array

from crawler.state.base import StateError
from crawler.urls.fingerprint import new_key

#: The format name stored in ``meta`` (a database with another is not a crawl state).
FORMAT = "crawler-state"
#: The format version this module reads and writes.
VERSION = 1
DB_NAME = "state.db"
LOCK_NAME = "lock"
_NEW = DB_NAME + ".new"  # a state being created, renamed to DB_NAME when complete
#: What a state directory may hold: the database, the lock, a state being created, and the
#: page journal ``crawler check --state DIR`` keeps beside the state (crawler/check/journal.py).
OWN_FILES = frozenset(
    {DB_NAME, DB_NAME + "-wal", DB_NAME + "-shm", LOCK_NAME, "check-pages.jsonl"}
    | {"audit-graph.sqlite" + s for s in ("", "-wal", "-shm")}  # (crawler/audit/diskgraph.py)
    | {_NEW + s for s in ("", "-wal", "-shm", "-journal")}
)

# Request rows are never deleted: a row is its URL's "seen" mark. No index (nor column) for
# the fingerprint: the seen probe is in memory, loaded from ``fps``; a hash index costs a
# random page write per URL (it took offering from 2.3 to 5.2 CPU s per 200,000 URLs).
_SCHEMA = """
CREATE TABLE meta(key TEXT PRIMARY KEY, value NOT NULL);
CREATE TABLE totals(id INTEGER PRIMARY KEY CHECK (id = 0), queued INTEGER NOT NULL,
    leased INTEGER NOT NULL, done INTEGER NOT NULL, seen INTEGER NOT NULL);
CREATE TABLE origins(id INTEGER PRIMARY KEY, origin TEXT NOT NULL UNIQUE, host TEXT NOT NULL);
CREATE TABLE hosts(host TEXT PRIMARY KEY, admitted INTEGER NOT NULL);
CREATE TABLE requests(
    id INTEGER PRIMARY KEY,  -- discovery order
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
CREATE INDEX requests_queued ON requests(origin_id, depth, id) WHERE state = 0;
CREATE INDEX requests_open ON requests(state) WHERE state = 1 OR state = 5;
CREATE INDEX requests_referrer ON requests(referrer_id) WHERE referrer_id IS NOT NULL;
-- The fingerprints of the requests, one row per offer_many (64-bit little-endian words,
-- the rows' order): open() reads 8 bytes a URL here, not every row of requests.
CREATE TABLE fps(first_id INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE seeds(id INTEGER PRIMARY KEY);
CREATE TABLE failures(kind TEXT PRIMARY KEY, n INTEGER NOT NULL);
CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE robots(origin TEXT PRIMARY KEY, fetched_at REAL NOT NULL, status INTEGER,
    body BLOB NOT NULL, error TEXT);
"""


def pack_fps(fps: list[int]) -> bytes:
    """A row of ``fps``: the fingerprints as 64-bit little-endian words."""
    words = array("Q", fps)
    if sys.byteorder == "big":
        words.byteswap()
    return words.tobytes()


def unpack_fps(data: bytes) -> array[int]:
    """The fingerprints of a row of ``fps``."""
    words = array("Q")
    words.frombytes(data)
    if sys.byteorder == "big":
        words.byteswap()
    return words


def check_owner(directory: str) -> None:
    """Refuse a state directory that someone else could have written.

    A state holds what a run is told to do (its stored settings name a proxy, the environment
    variable to read credentials from, output, WARC and cookie paths, headers). As git refuses
    a repository another user owns (CVE-2022-24765), a directory, or a database in it, that is
    not owned by the user running the crawl, or that group or others may write, is refused,
    before anything in it is read. A missing directory is fine (it is created 0700).

    Raises:
        StateError: naming the directory, the reason, and the fix.
    """
    uid = os.geteuid()
    for path in (directory, os.path.join(directory, DB_NAME)):
        try:
            st = os.stat(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            raise StateError(f"{path}: cannot inspect: {e}") from e
        if st.st_uid != uid:
            raise StateError(
                f"{path}: owned by uid {st.st_uid}, not by this user (uid {uid}); a state "
                "someone else wrote is not trusted: use a directory of your own"
            )
        if st.st_mode & 0o022:
            who = {0o022: "group and others", 0o020: "group", 0o002: "others"}
            raise StateError(
                f"{path}: writable by {who[st.st_mode & 0o022]} (mode {st.st_mode & 0o777:04o});"
                f" a state others can change is not trusted: chmod go-w {path}"
            )


def inspect_directory(directory: str) -> bool:
    """Whether ``directory`` holds a state (False: missing or empty, created now, mode 0700).

    Raises:
        StateError: it holds anything else than a state's files (never taken over), or
            someone else could have written it (``check_owner``).
    """
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as e:
            raise StateError(f"{directory}: cannot create the state directory: {e}") from e
        check_owner(directory)
        return False
    except NotADirectoryError:
        raise StateError(f"{directory}: not a directory") from None
    except OSError as e:
        raise StateError(f"{directory}: cannot read the state directory: {e}") from e
    check_owner(directory)
    others = sorted(set(names) - OWN_FILES)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise StateError(
            f"{directory}: not a crawl state (it holds {shown}); give an empty or new directory"
        )
    if DB_NAME not in names and (DB_NAME + "-wal") in names:
        raise StateError(f"{directory}: {DB_NAME} is missing but its -wal file is there")
    return DB_NAME in names


def take_lock(directory: str) -> int:
    """An exclusive flock on DIR/lock (retried for 0.2 s), before anything is written."""
    path = os.path.join(directory, LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
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


def lock_holder(directory: str) -> int | None:
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


def check_header(db: str) -> None:
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
    # A kill in the middle of a WAL checkpoint can leave page 1 (with the new page count)
    # written before the file is extended: the WAL still holds every frame and SQLite's
    # recovery completes it, so with a -wal file beside it the size says nothing (quick_check,
    # after SQLite has opened it, catches real damage).
    if _has_wal(db):
        if page_size < 512:
            raise StateError(f"{db}: not a SQLite database (page size {page_size})")
        return
    if page_size < 512 or size % page_size or (valid and size < pages * page_size):
        raise StateError(
            f"{db}: truncated ({size} bytes, the header says {pages} pages of {page_size})"
        )


def _has_wal(db: str) -> bool:
    try:
        return os.path.getsize(db + "-wal") > 0
    except OSError:
        return False


def open_ro(db: str, *, immutable: bool = True) -> sqlite3.Connection:
    """A read-only connection that creates no file.

    Without a -wal file the database file is the whole state: ``immutable=1`` reads it
    without creating -wal and -shm files (a plain ``mode=ro`` connection would create them).
    """
    flags = "&immutable=1" if immutable and not os.path.exists(db + "-wal") else ""
    try:
        return sqlite3.connect(f"file:{_quote(db)}?mode=ro{flags}", uri=True)
    except sqlite3.Error as e:
        raise StateError(f"{db}: cannot open: {e}") from e


def _quote(path: str) -> str:
    return path.replace("%", "%25").replace("?", "%3f").replace("#", "%23")


def check_meta(conn: sqlite3.Connection, directory: str) -> int:
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


def check_database(directory: str) -> None:
    """Header, size, format, version and ``PRAGMA quick_check``, all read-only."""
    db = os.path.join(directory, DB_NAME)
    check_header(db)
    conn = open_ro(db)
    try:
        check_meta(conn, directory)
        result = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        if result != ["ok"]:
            raise StateError(f"{db}: corrupt ({'; '.join(result)})")
    except sqlite3.DatabaseError as e:
        raise StateError(f"{db}: corrupt ({e})") from e
    finally:
        conn.close()


def create_database(directory: str) -> None:
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
