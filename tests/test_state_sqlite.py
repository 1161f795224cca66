"""The SQLite crawl state beyond the shared protocol suite (tests/test_state_protocol.py).

Refusals change nothing (bytes of every file before == after); a process killed with
SIGKILL loses nothing it committed and its leases come back; a fault at every database
call (raised, or the process exiting on the spot) leaves a state that reopens consistent
and finishes the crawl; memory and bytes per URL at 1,000,000 queued URLs.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.state import KIND_PAGE, Candidate, Lease, Outcome, StateError, open_state
from crawler.state.sqlite import DB_NAME, LOCK_NAME, SQLiteState
from crawler.urls.fingerprint import Fingerprinter

pytestmark = pytest.mark.timeout(120)

ROOT = str(Path(__file__).resolve().parent.parent)
T0 = 1_800_000_000.0
ORIGIN, HOST = "http://a.test:80", "a.test"


def cand(
    state: SQLiteState,
    url: str,
    *,
    depth: int = 1,
    referrer: str | None = None,
    queue: bool = True,
    origin: str = ORIGIN,
    host: str = HOST,
) -> Candidate:
    return Candidate(url, state.fingerprint(url), origin, host, depth, referrer, KIND_PAGE, queue)


async def opened(path: Path, state: SQLiteState | None = None, **kw: Any) -> SQLiteState:
    state = state if state is not None else SQLiteState(path)
    await state.open(
        per_host=kw.pop("per_host", 100),
        delay=kw.pop("delay", 0.0),
        max_pages_per_host=kw.pop("max_pages_per_host", 0),
    )
    return state


def snapshot(path: Path) -> dict[str, bytes]:
    """Every file under ``path`` with its bytes (a refusal must leave them all as they were)."""
    return {p.name: p.read_bytes() for p in sorted(path.iterdir())} if path.exists() else {}


async def drain(state: SQLiteState, now: float = T0) -> list[Lease]:
    """Lease and complete everything that is queued."""
    out: list[Lease] = []
    while leases := await state.lease(1000, now):
        await state.complete_many([(le, Outcome()) for le in leases], now)
        out.extend(leases)
    return out


async def make_state(path: Path, n: int = 50) -> None:
    state = await opened(path)
    await state.offer_many([cand(state, f"http://a.test/{i}", depth=0) for i in range(n)])
    await state.close()


def audit(path: Path) -> dict[str, int]:
    """Counts by state straight from the rows; the stored totals must agree with them."""
    conn = sqlite3.connect(f"file:{path / DB_NAME}?mode=ro", uri=True)
    try:
        by_state = dict(conn.execute("SELECT state, count(*) FROM requests GROUP BY state"))
        queued, leased, done, seen = conn.execute(
            "SELECT queued, leased, done, seen FROM totals"
        ).fetchone()
        (rows,) = conn.execute("SELECT count(*) FROM requests").fetchone()
        (urls,) = conn.execute("SELECT count(DISTINCT url) FROM requests").fetchone()
        rows_by_id = conn.execute("SELECT id, url FROM requests ORDER BY id").fetchall()
        batches = conn.execute("SELECT first_id, data FROM fps ORDER BY first_id").fetchall()
        (key,) = conn.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()
    finally:
        conn.close()
    assert seen == rows == urls  # a URL is seen iff it has a row, one row per URL
    # one fingerprint per row: each batch's words are its consecutive rows' fingerprints
    fp = Fingerprinter(bytes.fromhex(key))
    stored = [
        (first + k, int.from_bytes(data[8 * k : 8 * k + 8], "little"))
        for first, data in batches
        for k in range(len(data) // 8)
    ]
    assert stored == [(i, fp(url)) for i, url in rows_by_id]
    assert queued == by_state.get(0, 0) + by_state.get(5, 0)
    assert leased == by_state.get(1, 0)
    assert done == by_state.get(2, 0) + by_state.get(3, 0)
    assert queued + leased + done + by_state.get(4, 0) == seen
    return {"queued": queued, "leased": leased, "done": done, "seen": seen}


# -- layout and creation --


async def test_a_new_directory_gets_a_database_and_a_lock(tmp_path: Path) -> None:
    where = tmp_path / "a" / "state"
    state = await opened(where)
    assert (where / LOCK_NAME).read_text().strip() == str(os.getpid())
    conn = sqlite3.connect(f"file:{where / DB_NAME}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()
    await state.offer_many([cand(state, "http://a.test/")])
    await state.close()
    await state.close()  # twice is fine
    assert sorted(os.listdir(where)) == [LOCK_NAME, DB_NAME]  # the WAL checkpointed away


async def test_an_empty_directory_and_a_half_created_state_are_new(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    state = await opened(tmp_path / "empty")
    assert (await state.counts()).seen == 0
    await state.close()
    half = tmp_path / "half"  # killed while creating: only the temporary file and the lock
    half.mkdir()
    (half / "state.db.new").write_bytes(b"SQLite format 3\x00 and then nothing")
    (half / LOCK_NAME).write_text("123\n")
    state = await opened(half)
    await state.close()
    assert sorted(os.listdir(half)) == [LOCK_NAME, DB_NAME]


async def test_the_link_checkers_journal_may_sit_in_the_state(tmp_path: Path) -> None:
    await make_state(tmp_path)
    (tmp_path / "check-pages.jsonl").write_text("{}\n")
    state = await opened(tmp_path)
    assert (await state.counts()).seen == 50
    await state.close()


def test_open_state_gives_sqlite_for_a_path(tmp_path: Path) -> None:
    assert isinstance(open_state(str(tmp_path / "s")), SQLiteState)


async def test_synchronous_full_is_an_option(tmp_path: Path) -> None:
    state = await opened(tmp_path / "s", SQLiteState(tmp_path / "s", synchronous="full"))
    assert state._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    await state.close()
    with pytest.raises(ValueError, match="synchronous"):
        SQLiteState(tmp_path / "t", synchronous="off")


# -- refusals: a clear StateError, and nothing changed --


async def refused(path: Path, match: str) -> StateError:
    before = snapshot(path)
    with pytest.raises(StateError, match=match) as info:
        await opened(path)
    assert snapshot(path) == before
    return info.value


async def test_a_directory_of_other_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    await refused(tmp_path, "not a crawl state .*notes.txt")
    with pytest.raises(StateError, match="not a directory"):
        await opened(tmp_path / "notes.txt")


async def test_another_programs_database_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("CREATE TABLE t(x)")
    conn.commit()
    conn.close()
    await refused(tmp_path, "not a crawl state")
    assert not (tmp_path / LOCK_NAME).exists()


async def test_another_format_version_is_refused(tmp_path: Path) -> None:
    await make_state(tmp_path)
    conn = sqlite3.connect(tmp_path / DB_NAME)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'version'")
    conn.commit()
    conn.close()
    error = await refused(tmp_path, "version 99")
    assert "reads version 1" in str(error)
    with pytest.raises(StateError, match="version 99"):
        SQLiteState.read_status(tmp_path)


async def test_corrupt_bytes_in_the_middle_are_refused(tmp_path: Path) -> None:
    await make_state(tmp_path, 3000)
    db = tmp_path / DB_NAME
    data = bytearray(db.read_bytes())
    pages = len(data) // 4096
    assert pages > 10
    middle = pages // 2 * 4096
    data[middle : middle + 4096] = os.urandom(4096)
    db.write_bytes(bytes(data))
    await refused(tmp_path, "corrupt")


async def test_a_corrupt_header_is_refused(tmp_path: Path) -> None:
    await make_state(tmp_path)
    db = tmp_path / DB_NAME
    data = bytearray(db.read_bytes())
    data[0:16] = b"garbage garbage!"
    db.write_bytes(bytes(data))
    await refused(tmp_path, "not a SQLite database")


@pytest.mark.parametrize("keep", [0.5, 0.5 + 1 / 3000, 100 / 1e9])
async def test_a_truncated_file_is_refused(tmp_path: Path, keep: float) -> None:
    await make_state(tmp_path, 3000)
    db = tmp_path / DB_NAME
    data = db.read_bytes()
    db.write_bytes(data[: max(1, int(len(data) * keep))])
    await refused(tmp_path, "truncated|not a SQLite database|corrupt")


async def test_a_kill_inside_a_checkpoint_is_not_taken_for_truncation(tmp_path: Path) -> None:
    # A SIGKILL in the middle of a WAL checkpoint can leave page 1, with the new page count,
    # written before the file is extended (tests/test_resume_kill.py seed 106 found it): the
    # file looks truncated, but the WAL holds every frame and SQLite's recovery completes it.
    live, copy = tmp_path / "live", tmp_path / "copy"
    await make_state(live, 50)
    state = await opened(live)
    await state.offer_many([cand(state, f"http://a.test/more/{i}") for i in range(3000)])
    copy.mkdir()  # the files as a kill leaves them: main file, a WAL not checkpointed, lock
    for p in live.iterdir():
        (copy / p.name).write_bytes(p.read_bytes())
    await state.close()
    db, wal = copy / DB_NAME, (copy / (DB_NAME + "-wal")).read_bytes()
    data = bytearray(db.read_bytes())
    page_size = int.from_bytes(data[16:18], "big")
    frames = range(32, len(wal) - 24 - page_size + 1, 24 + page_size)
    last_page = max(int.from_bytes(wal[i : i + 4], "big") for i in frames)
    assert last_page * page_size > len(data)  # the WAL reaches past the main file's end
    data[28:32] = last_page.to_bytes(4, "big")  # page 1 written first by the cut checkpoint
    db.write_bytes(bytes(data))
    reopened = await opened(copy)
    try:
        counts = await reopened.counts()
        assert (counts.seen, counts.queued) == (3050, 3050)
    finally:
        await reopened.close()


HOLDER = textwrap.dedent(
    """
    import asyncio, sys
    from crawler.state.sqlite import SQLiteState
    async def main():
        state = SQLiteState(sys.argv[1])
        await state.open(per_host=8, delay=0.0, max_pages_per_host=0)
        print("ready", flush=True)
        sys.stdin.readline()
        await state.close()
    asyncio.run(main())
    """
)


async def test_a_second_process_is_refused_with_its_pid(tmp_path: Path) -> None:
    await make_state(tmp_path)
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        await refused(tmp_path, f"in use by process {child.pid}")
        status = SQLiteState.read_status(tmp_path)  # status works while it runs
        assert status.in_use_by == child.pid and status.counts.queued == 50
    finally:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.close()
        child.wait(30)
        child.stdout.close()
    state = await opened(tmp_path)  # free again
    await state.close()


# -- kill -9 --

KILLED = textwrap.dedent(
    """
    import asyncio, os, signal, sys, time
    from crawler.state import Candidate, Outcome
    from crawler.state.sqlite import SQLiteState
    T0 = 1_800_000_000.0
    async def main():
        state = SQLiteState(sys.argv[1])
        await state.open(per_host=100, delay=0.0, max_pages_per_host=0)
        def c(url, ref, depth):
            return Candidate(url, state.fingerprint(url), "http://a.test:80", "a.test", depth, ref)
        await state.offer_many([c("http://a.test/", None, 0)])
        (seed,) = await state.lease(1, T0)
        for b in range(3):
            await state.offer_many(
                [c(f"http://a.test/{b}/{i}", seed.url, 1) for i in range(100)]
            )
        await state.complete(seed, Outcome(), T0)
        leases = await state.lease(20, T0)
        await state.complete_many([(le, Outcome()) for le in leases[:5]], T0)
        await state.retry(leases[5], T0 + 5, T0)
        print(" ".join(le.url for le in leases), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    asyncio.run(main())
    """
)


async def test_sigkill_loses_nothing_and_gives_the_leases_back(tmp_path: Path) -> None:
    child = subprocess.run(
        [sys.executable, "-c", KILLED, str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    leased = child.stdout.split()
    assert len(leased) == 20
    assert (tmp_path / (DB_NAME + "-wal")).exists()  # died with its WAL: nothing checkpointed
    before = audit(tmp_path)
    assert before == {"queued": 281, "leased": 14, "done": 6, "seen": 301}
    state = await opened(tmp_path)
    counts = await state.counts()
    assert (counts.recovered, counts.queued, counts.leased, counts.done) == (14, 295, 0, 6)
    assert [le.url for le in await drain(state, T0 + 4) if le.attempts] == leased[6:]
    assert [(le.url, le.attempts) for le in await drain(state, T0 + 5)] == [(leased[5], 1)]
    assert audit(tmp_path)["done"] == 301
    await state.close()
    assert audit(tmp_path) == {"queued": 0, "leased": 0, "done": 301, "seen": 301}


# -- faults at every database call: the power-loss stand-in --


class Fault(Exception):
    pass


class FaultyConnection:
    """A sqlite3 connection proxy that fails at its ``at``-th execute/executemany call.

    ``mode``: "raise" before the call, "raise-after" once it ran, "exit" (os._exit before the
    call: the process dies with the transaction open), "exit-after" (dies once it ran).
    """

    def __init__(self, conn: sqlite3.Connection, at: int, mode: str, calls: list[str]) -> None:
        self._conn = conn
        self._at = at
        self._mode = mode
        self.calls = calls

    def _call(self, name: str, sql: str, *args: Any) -> Any:
        self.calls.append(sql.split()[0])
        hit = len(self.calls) == self._at
        if hit and self._mode == "exit":
            os._exit(17)
        if hit and self._mode == "raise":
            raise Fault(sql)
        result = getattr(self._conn, name)(sql, *args)
        if hit and self._mode == "exit-after":
            os._exit(17)
        if hit and self._mode == "raise-after":
            raise sqlite3.OperationalError(f"injected after: {sql}")
        return result

    def execute(self, sql: str, *args: Any) -> Any:
        return self._call("execute", sql, *args)

    def executemany(self, sql: str, *args: Any) -> Any:
        return self._call("executemany", sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


class FaultyState(SQLiteState):
    def __init__(self, path: Path, at: int, mode: str) -> None:
        super().__init__(path, window=16)
        self.at, self.mode, self.calls = at, mode, []

    def _connect(self, path: str) -> Any:
        return FaultyConnection(super()._connect(path), self.at, self.mode, self.calls)


BATCHES = [[f"http://a.test/{b}/{i}" for i in range(b * 7 % 23 + 5)] for b in range(8)]


async def workload(state: SQLiteState) -> None:
    """Offers, leases, completions, retries, counters, robots, settings: the write paths."""
    await state.save_settings({"seeds": ["http://a.test/"]})
    await state.offer_many([cand(state, "http://a.test/", depth=0)])
    (seed,) = await state.lease(1, T0)
    for urls in BATCHES[:4]:
        await state.offer_many([cand(state, u, referrer=seed.url) for u in urls])
    await state.complete(seed, Outcome(), T0)
    leases = await state.lease(10, T0)
    await asyncio.gather(  # several writers in one turn: one group transaction
        state.offer_many([cand(state, u, depth=2, referrer=leases[0].url) for u in BATCHES[4]]),
        state.offer_many([cand(state, u, depth=2, referrer=leases[1].url) for u in BATCHES[5]]),
        state.add_counters({"links": 12}),
    )
    await state.retry(leases[2], T0 + 1, T0)
    await state.complete_many([(le, Outcome("http_500", 500)) for le in leases[3:6]], T0)
    for urls in BATCHES[6:]:
        await state.offer_many([cand(state, u, depth=2, referrer=leases[6].url) for u in urls])
    await drain(state, T0 + 2)


ALL = {"http://a.test/"} | {u for urls in BATCHES for u in urls}


async def finish_and_check(path: Path) -> None:
    """After a fault: the state reopens, is consistent, and the crawl can still finish."""
    counts = audit(path)
    state = await opened(path)
    assert (await state.counts()).seen == counts["seen"]
    # Every batch went in whole or not at all.
    for urls in BATCHES:
        assert len({state.seen(state.fingerprint(u)) for u in urls}) == 1
    await state.offer_many([cand(state, "http://a.test/", depth=0)])
    for urls in BATCHES:
        await state.offer_many([cand(state, u) for u in urls])
    await drain(state, T0 + 2)
    final = await state.counts()
    await state.close()
    assert final.queued == final.leased == 0
    assert final.done == final.seen == len(ALL)
    assert audit(path) == {"queued": 0, "leased": 0, "done": len(ALL), "seen": len(ALL)}


async def count_calls(path: Path) -> list[str]:
    state = FaultyState(path, 0, "none")
    await opened(path, state)
    await workload(state)
    await state.close()
    return state.calls


# Every call (-m slow) or every third one, from the first to the last.
STRIDES = [pytest.param(1, marks=pytest.mark.slow, id="every"), pytest.param(3, id="third")]


@pytest.mark.parametrize("stride", STRIDES)
@pytest.mark.parametrize("mode", ["raise", "raise-after"])
async def test_a_failing_call_anywhere_leaves_a_consistent_state(
    tmp_path: Path, mode: str, stride: int
) -> None:
    calls = await count_calls(tmp_path / "count")
    assert {"BEGIN", "COMMIT", "INSERT", "UPDATE"} <= set(calls)
    for at in [*range(1, len(calls), stride), len(calls)]:
        where = tmp_path / f"{mode}{at}"
        state = FaultyState(where, at, mode)
        with pytest.raises((StateError, Fault)):
            await opened(where, state)
            await workload(state)
        if state._conn is not None and state._broken is None:
            assert calls[at - 1] == "SELECT", at  # a failed read breaks nothing
        elif state._conn is not None:
            with pytest.raises(StateError, match="unusable"):  # broken: no further use
                await state.offer_many([cand(state, "http://a.test/new")])
        await state.close()
        if (where / DB_NAME).exists():
            await finish_and_check(where)


def _run_with_fault(path: Path, at: int, mode: str) -> int:
    pid = os.fork()
    if pid == 0:  # the child: run the workload until the fault ends the process
        try:
            asyncio.run(_child(path, at, mode))
        finally:
            os._exit(0)
    return os.waitpid(pid, 0)[1]


async def _child(path: Path, at: int, mode: str) -> None:
    state = FaultyState(path, at, mode)
    await opened(path, state)
    await workload(state)
    await state.close()


@pytest.mark.parametrize("stride", STRIDES)
@pytest.mark.parametrize("mode", ["exit", "exit-after"])
def test_a_process_dying_at_any_call_leaves_a_consistent_state(
    tmp_path: Path, mode: str, stride: int
) -> None:
    calls = asyncio.run(count_calls(tmp_path / "count"))
    for at in [*range(1, len(calls), stride), len(calls)]:
        where = tmp_path / f"{mode}{at}"
        status = _run_with_fault(where, at, mode)
        assert os.waitstatus_to_exitcode(status) == 17, at
        if (where / DB_NAME).exists():
            asyncio.run(finish_and_check(where))


# -- what survives a reopen --


async def test_a_held_retry_keeps_its_time_across_a_reopen(tmp_path: Path) -> None:
    state = await opened(tmp_path)
    await state.offer_many([cand(state, "http://a.test/r")])
    (lease,) = await state.lease(1, T0)
    await state.retry(lease, T0 + 60, T0)
    await state.close()
    state = await opened(tmp_path)
    assert state.next_due(T0) == T0 + 60
    assert await state.lease(5, T0 + 59) == []
    (again,) = await state.lease(5, T0 + 60)
    assert (again.url, again.attempts) == ("http://a.test/r", 1)
    await state.close()


async def test_the_per_host_budget_counts_across_runs(tmp_path: Path) -> None:
    state = await opened(tmp_path, max_pages_per_host=3)
    await state.offer_many([cand(state, f"http://a.test/{i}") for i in range(2)])
    await state.close()
    state = await opened(tmp_path, max_pages_per_host=3)
    new = await state.offer_many([cand(state, f"http://a.test/x{i}") for i in range(3)])
    assert len(new) == 3  # all new, one queued
    assert (await state.counts()).queued == 3
    await state.close()


async def test_breadth_first_holds_beyond_the_window(tmp_path: Path) -> None:
    """Windows of 16 in memory, the rest on disk: the lease order is still (depth, offer)."""
    state = await opened(tmp_path, SQLiteState(tmp_path, window=16))
    offered: list[tuple[int, str]] = []

    async def offer(depth: int, n: int) -> None:
        urls = [f"http://a.test/d{depth}/{len(offered)}-{i}" for i in range(n)]
        await state.offer_many([cand(state, u, depth=depth) for u in urls])
        offered.extend((depth, u) for u in urls)

    await offer(2, 50)
    first = await state.lease(3, T0)  # a window loaded
    await offer(1, 40)
    await offer(2, 30)
    await offer(0, 5)  # sorts before everything in the window
    await offer(1, 20)
    await state.close()
    state = await opened(tmp_path, SQLiteState(tmp_path, window=16))
    rest = []
    while leases := await state.lease(1, T0):
        rest.extend(leases)
        await state.complete(leases[0], Outcome(), T0)
    assert [le.url for le in first] == [u for _, u in offered[:3]]
    recovered = [le.url for le in rest if le.attempts]
    assert recovered == [u for _, u in offered[:3]]  # in flight at the stop: queued again
    order = sorted(range(len(offered)), key=lambda i: (offered[i][0], i))
    assert [le.url for le in rest] == [offered[i][1] for i in order]
    await state.close()


async def test_discovered_by_lists_a_pages_links_and_its_redirect_targets(
    tmp_path: Path,
) -> None:
    state = await opened(tmp_path)
    page = "http://a.test/p"
    await state.offer_many([cand(state, page, depth=0)])
    (lease,) = await state.lease(1, T0)
    await state.offer_many([cand(state, "http://a.test/moved", referrer=page, queue=False)])
    await state.offer_many(
        [cand(state, f"http://a.test/l{i}", referrer="http://a.test/moved") for i in range(3)]
        + [cand(state, page, referrer=page)]
    )
    await state.offer_many([cand(state, "http://a.test/l9", referrer=page)])
    expected = ["http://a.test/moved"] + [f"http://a.test/l{i}" for i in (0, 1, 2, 9)]
    assert await state.discovered_by(page) == expected
    assert await state.discovered_by("http://a.test/never") == []
    await state.close()  # killed in flight, in effect: the lease is open
    state = await opened(tmp_path)
    (again,) = [le for le in await state.lease(10, T0) if le.url == page]
    assert again.attempts == 1
    assert await state.discovered_by(page) == expected
    assert await state.discovered_by("http://a.test/moved") == expected[1:4]  # by a scan
    await state.close()


# -- group commit --


async def test_writers_of_one_turn_share_one_commit_and_return_committed(
    tmp_path: Path,
) -> None:
    state = await opened(tmp_path)
    before = state.commits
    await asyncio.gather(
        *(
            state.offer_many([cand(state, f"http://a.test/{b}/{i}") for i in range(10)])
            for b in range(20)
        )
    )
    assert state.commits == before + 1
    # committed on return: another connection sees every row
    assert SQLiteState.read_status(tmp_path).counts.queued == 200
    await state.add_counters({"links": 3})  # joins the next transaction, does not wait
    leases = await state.lease(5, T0)
    assert state.commits == before + 2
    assert SQLiteState.read_status(tmp_path).counters == {"links": 3}
    await state.complete_many([(le, Outcome()) for le in leases], T0)
    await state.close()


# -- status and settings, without the lock --


async def test_read_status_changes_nothing(tmp_path: Path) -> None:
    state = await opened(tmp_path)
    await state.save_settings({"seeds": ["http://a.test/"], "max_depth": 3})
    await state.offer_many([cand(state, "http://a.test/", depth=0)])
    (seed,) = await state.lease(1, T0)
    await state.offer_many(
        [cand(state, f"http://a.test/{i}", referrer=seed.url) for i in range(5)]
        + [
            cand(
                state, "http://b.test/", referrer=seed.url, origin="http://b.test:80", host="b.test"
            )
        ]
    )
    await state.complete(seed, Outcome("http_500", 500), T0)
    await state.add_counters({"links": 6})
    await state.lease(2, T0)
    status = SQLiteState.read_status(tmp_path)
    assert status.in_use_by == os.getpid()
    await state.close()
    before = snapshot(tmp_path)
    status = SQLiteState.read_status(tmp_path)
    assert snapshot(tmp_path) == before
    assert status.in_use_by is None and status.version == 1
    counts = status.counts
    assert (counts.queued, counts.leased, counts.done, counts.seen) == (4, 2, 1, 7)
    assert (counts.failed, counts.origins, status.hosts) == ({"http_500": 1}, 2, 2)
    assert status.settings == {"seeds": ["http://a.test/"], "max_depth": 3}
    assert status.seeds == ["http://a.test/"]
    assert status.counters == {"links": 6}
    assert status.busiest == [(ORIGIN, 4)]  # one of each origin leased: round-robin
    assert status.disk_bytes == sum(len(b) for b in before.values())
    assert SQLiteState.read_settings(tmp_path) == status.settings
    assert snapshot(tmp_path) == before
    json.dumps(status.settings)


def test_read_settings_and_status_of_no_state(tmp_path: Path) -> None:
    assert SQLiteState.read_settings(tmp_path / "missing") is None
    assert SQLiteState.read_settings(tmp_path) is None  # empty
    assert not (tmp_path / "missing").exists()
    with pytest.raises(StateError, match="no crawl state"):
        SQLiteState.read_status(tmp_path)
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(StateError, match="not a crawl state"):
        SQLiteState.read_settings(tmp_path)


# -- memory and disk at 1,000,000 queued URLs --

MILLION = textwrap.dedent(
    """
    import asyncio, os, sys
    from crawler.state import Candidate
    from crawler.state.sqlite import SQLiteState
    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    async def main(where, n):
        state = SQLiteState(where)
        await state.open(per_host=8, delay=0.0, max_pages_per_host=0)
        fp = state.fingerprint
        page = "http://a.test/"
        await state.offer_many([Candidate(page, fp(page), "http://a.test:80", "a.test", 0)])
        (seed,) = await state.lease(1, 1.8e9)
        base = status("VmRSS:")
        for start in range(0, n, 1000):
            urls = [f"http://a.test/s{i % 97}/page-{i}.html" for i in range(start, start + 1000)]
            await state.offer_many(
                [Candidate(u, fp(u), "http://a.test:80", "a.test", 1, page) for u in urls]
            )
        counts = await state.counts()
        await state.close()
        disk = sum(os.path.getsize(os.path.join(where, f)) for f in os.listdir(where))
        print(counts.queued, status("VmHWM:"), base, disk)
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


@pytest.mark.timeout(600)
def test_a_million_queued_urls_fit_in_100_mb(tmp_path: Path) -> None:
    n = 1_000_000
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", MILLION, str(tmp_path / "s"), str(n)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=True,
    ).stdout.split()
    queued, peak, base, disk = map(int, out)
    print(
        f"\n{n} queued: peak RSS {peak / 2**20:.1f} MiB ({(peak - base) / n:.1f} B/URL over"
        f" the {base / 2**20:.1f} MiB once open), disk {disk / n:.1f} B/URL,"
        f" {time.perf_counter() - started:.1f} s"
    )
    assert queued == n
    assert peak < 100 * 2**20


async def test_per_origin_memory_follows_the_origins_with_work(tmp_path: Path) -> None:
    """A wide crawl: origins with work are held, origins done or with seen-only rows are not."""
    state = await opened(tmp_path)

    def at(i: int, kind: str, **kw: Any) -> Candidate:
        return cand(
            state,
            f"http://{kind}{i}.test/",
            origin=f"http://{kind}{i}.test:80",
            host=f"{kind}{i}.test",
            **kw,
        )

    await state.offer_many([at(i, "h") for i in range(300)])
    await state.offer_many([at(i, "r", queue=False) for i in range(300)])  # redirect targets
    assert len(state._origins) == 300
    assert len(await drain(state)) == 300
    assert len(state._origins) == 0
    await state.close()
