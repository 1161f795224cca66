"""The Redis crawl state beyond the shared protocol suite (tests/test_state_protocol.py).

Two RedisState objects on one crawl are two workers (as two processes would be: each has its
own pool, heartbeat and pub/sub reader). Everything runs against a real redis-server started
on a free port (tests/redisserver.py), restarted mid-test where the test says so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from crawler.state import Candidate, Lease, Outcome, StateError, open_state
from crawler.state._redis_scripts import prefix_of
from crawler.state.redis import RedisState, RedisStatus, redacted
from crawler.urls.policy import host_of, origin_of
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(90)

ROOT = str(Path(__file__).resolve().parent.parent)
T0 = 1_800_000_000.0


def cand(state: RedisState, url: str, depth: int = 0, *, queue: bool = True) -> Candidate:
    return Candidate(
        url, state.fingerprint(url), origin_of(url), host_of(url), depth, None, 0, queue
    )


async def offer(state: RedisState, *urls: str, depth: int = 0) -> list[str]:
    return [c.url for c in await state.offer_many([cand(state, u, depth) for u in urls])]


class Workers:
    """Opens RedisStates on one server; closes every one at the end."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.opened: list[RedisState] = []

    async def open(
        self,
        name: str = "t",
        *,
        per_host: int = 100,
        delay: float = 0.0,
        max_pages_per_host: int = 0,
        **kw: Any,
    ) -> RedisState:
        state = RedisState(self.server.url, name=name, **kw)
        await state.open(per_host=per_host, delay=delay, max_pages_per_host=max_pages_per_host)
        self.opened.append(state)
        return state

    async def close(self) -> None:
        for state in self.opened:
            await state.close()


@pytest.fixture
async def workers(redis_server: RedisServer) -> AsyncIterator[Workers]:  # noqa: F811
    w = Workers(redis_server)
    try:
        yield w
    finally:
        await w.close()


def command(server: RedisServer, *args: str) -> Any:
    """A command through redis-py's sync client (a full reply, unlike RedisServer.command)."""
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(server.url)
    try:
        return client.execute_command(*args)
    finally:
        client.close()


def seen_members(server: RedisServer, name: str) -> int:
    """Fingerprints in the seen set of crawl ``name`` (every bucket's SCARD)."""
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(server.url)
    try:
        pipe = client.pipeline(transaction=False)
        for key in client.scan_iter(match=f"crawler:{{{name}:s*}}:s:*", count=1000):
            pipe.scard(key)
        return sum(pipe.execute())
    finally:
        client.close()


async def settle(*states: RedisState) -> None:
    """Heartbeats (as each worker's background task runs them) until every shard is held by
    its rendezvous winner among ``states``: a shard changes hands at most once a beat."""
    for _ in range(4):
        for state in states:
            await state._membership()
    shards = states[0].book.shards
    held = [k for state in states for k in state.book.held if state.book.active(k)]
    assert sorted(held) == list(range(shards))


def owns(state: RedisState, url: str) -> bool:
    return state.book.active(state.book.shard(origin_of(url))) is not None


def origins_of(state: RedisState, n: int, other: RedisState | None = None) -> list[str]:
    """``n`` origins whose shard ``state`` holds (and ``other`` does not)."""
    found = []
    for i in range(100_000):
        origin = f"http://h{i}.test"
        if owns(state, origin + "/") and (other is None or not owns(other, origin + "/")):
            found.append(origin)
            if len(found) == n:
                return found
    raise AssertionError("no such origins")


async def until(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not await condition():
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


# -- two workers on one crawl: each origin's requests go to its shard's owner --


async def test_shards_are_shared_out_among_the_live_workers(workers: Workers) -> None:
    a = await workers.open()
    assert len(a.book.held) == a.book.shards  # alone: every shard is A's
    b = await workers.open()
    await settle(a, b)
    assert 0.3 < len(b.book.held) / b.book.shards < 0.7  # rendezvous: about half each
    assert not set(a.book.held) & set(b.book.held)


async def test_per_host_holds_across_workers(workers: Workers) -> None:
    a = await workers.open(per_host=2)
    b = await workers.open(per_host=2)
    await settle(a, b)
    (origin,) = origins_of(a, 1)
    # offered by B (not the owner): it lands at A, B never leases it
    await offer(b, *(f"{origin}/{i}" for i in range(6)))
    await until(lambda: _nonzero(a.book.backlog()))
    first = await a.lease(10, T0)
    assert len(first) == 2
    assert await b.lease(10, T0) == []
    assert await a.lease(10, T0) == []  # its two slots are taken
    await a.complete(first[0], Outcome(status=200), T0)
    assert len(await a.lease(10, T0)) == 1
    await until(lambda: _leased(b, 2))  # as A last reported (at most REPORT_GAP ago)


async def _leased(state: RedisState, n: int) -> bool:
    return (await state.counts()).leased == n


async def _nonzero(n: int) -> bool:
    return n > 0


async def test_delay_and_retry_after_are_the_owners_timers(workers: Workers) -> None:
    a = await workers.open(per_host=4, delay=2.0)
    b = await workers.open(per_host=4, delay=2.0)
    await settle(a, b)
    (origin,) = origins_of(a, 1)
    await offer(a, f"{origin}/0", f"{origin}/1", f"{origin}/2")
    (first,) = await a.lease(10, T0)
    assert await a.lease(10, T0 + 1.0) == []
    assert a.next_due(T0 + 1.0) == pytest.approx(T0 + 2.0, abs=1e-3)
    assert len(await a.lease(10, T0 + 2.0)) == 1
    await a.retry(first, T0 + 30.0, T0 + 2.0)  # a Retry-After of 30 s
    assert len(await a.lease(10, T0 + 4.0)) == 1  # the third: the retry waits
    assert await a.lease(10, T0 + 29.0) == []
    (again,) = await a.lease(10, T0 + 30.0)
    assert again.url == first.url and again.attempts == 1
    assert await b.lease(10, T0 + 60.0) == []


async def test_a_new_owner_reads_delays_and_retries_from_redis(workers: Workers) -> None:
    a = await workers.open(per_host=4)
    await offer(a, *(f"http://a.test/{i}" for i in range(4)))
    first, second = await a.lease(2, T0)
    a.set_delay("http://a.test", 5.0)  # robots.txt Crawl-delay, learnt by A
    await a.retry(first, T0 + 30.0, T0)  # written to the shard with its not_before
    await a.complete(second, Outcome(), T0)
    await a.close()  # A leaves: its shards go to B, read from Redis
    b = await workers.open(per_host=4)
    got = await b.lease(10, T0)
    assert len(got) == 1 and got[0].url in ("http://a.test/2", "http://a.test/3")
    assert await b.lease(10, T0 + 4.9) == []  # the Crawl-delay holds at the new owner
    assert b.next_due(T0 + 4.9) == pytest.approx(T0 + 5.0, abs=1e-3)
    assert len(await b.lease(10, T0 + 5.0)) == 1
    assert await b.lease(10, T0 + 29.0) == []  # and the not_before
    (again,) = await b.lease(10, T0 + 30.0)
    assert again.url == first.url and again.attempts == 1


async def test_the_last_opener_sets_politeness_for_every_worker(workers: Workers) -> None:
    a = await workers.open(per_host=1)
    await offer(a, *(f"http://a.test/{i}" for i in range(5)))
    (first,) = await a.lease(10, T0)
    b = await workers.open(per_host=3)  # another worker joins with other settings: they win
    await a.complete(first, Outcome(), T0)
    await settle(a, b)  # their heartbeats read them (and share the shards out)
    owner = a if owns(a, "http://a.test/") else b
    assert len(await owner.lease(10, T0)) == 3


async def test_an_offer_of_hundreds_of_links_to_one_shard(workers: Workers) -> None:
    """The offer script writes a shard's new requests with one HSET a run of 500 (Lua's
    unpack has a limit): a chunk of 512 links of one origin is two runs; none is lost."""
    a = await workers.open()
    await settle(a)
    urls = [f"http://one.test/{i}" for i in range(1200)]
    assert await offer(a, *urls) == urls
    k = a.book.shard(origin_of(urls[0]))
    assert command(workers.server, "HLEN", f"crawler:{{t:s{k}}}:p") == 1200
    assert (await a.counts()).queued == 1200
    got: list[Lease] = []
    while len(got) < 1200:
        batch = await a.lease(100, T0)
        assert batch
        got += batch
        await a.complete_many([(x, Outcome()) for x in batch], T0)
    assert sorted(x.url for x in got) == sorted(urls)
    assert (await a.counts()).queued == 0


async def test_dedup_across_workers(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    await settle(a, b)
    urls = [f"http://h{i % 40}.test/{i}" for i in range(300)]
    assert [a.fingerprint(u) for u in urls] == [b.fingerprint(u) for u in urls]  # stored key
    assert await offer(a, *urls[:200]) == urls[:200]
    assert await offer(b, *urls[100:]) == urls[200:]  # B knew none of A's from its cache
    assert b.seen(b.fingerprint(urls[150]))
    counts = await b.counts()
    assert (counts.seen, counts.queued) == (300, 300)
    got: list[Lease] = []
    deadline = time.monotonic() + 10
    while len(got) < 300:
        assert time.monotonic() < deadline
        for w in (a, b):
            batch = await w.lease(37, T0)
            got += batch
            await w.complete_many([(x, Outcome()) for x in batch], T0)  # frees their slots
        await asyncio.sleep(0.01)  # the inboxes are read
    assert sorted(x.url for x in got) == sorted(urls)  # each handed out once
    assert all(owns(a, x.url) != owns(b, x.url) for x in got)


async def test_wait_wakes_on_another_workers_offer(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    await settle(a, b)
    (origin,) = origins_of(b, 1)
    await b.wait(0.01)
    waiter = asyncio.ensure_future(b.wait(10.0))
    await asyncio.sleep(0.1)
    assert not waiter.done()
    t = time.monotonic()
    await offer(a, origin + "/")  # B's shard: A sends it to B's inbox
    await asyncio.wait_for(waiter, 3.0)
    assert time.monotonic() - t < 1.0
    assert [x.url for x in await b.lease(10, T0)] == [origin + "/"]
    # and a cancelled wait leaves the state usable (the engine cancels it when a local page
    # finishes first)
    w = asyncio.ensure_future(b.wait(10.0))
    await asyncio.sleep(0.05)
    w.cancel()
    await asyncio.gather(w, return_exceptions=True)
    assert (await b.counts()).leased == 1


async def test_no_page_event_is_published(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    a = await workers.open()
    b = await workers.open()
    await settle(a, b)
    command(redis_server, "CONFIG", "RESETSTAT")
    urls = [f"http://h{i % 30}.test/{i}" for i in range(200)]
    await offer(a, *urls)
    for _ in range(50):
        for w in (a, b):
            batch = await w.lease(50, T0)
            await w.complete_many([(x, Outcome()) for x in batch], T0)
        await asyncio.sleep(0.01)
    assert (await a.counts()).done == 200
    stats = command(redis_server, "INFO", "commandstats")
    stats = stats.decode() if isinstance(stats, bytes) else str(stats)
    assert "cmdstat_publish" not in stats and "cmdstat_subscribe" not in stats


async def test_wake_ups_come_back_after_a_redis_restart(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    a = await workers.open()
    b = await workers.open()
    await settle(a, b)
    (origin,) = origins_of(b, 1)
    redis_server.restart()
    await a.counts()  # A's pool reconnects
    await b.counts()
    await b.wait(0.01)
    waiter = asyncio.ensure_future(b.wait(10.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await offer(a, origin + "/")
    await asyncio.wait_for(waiter, 5.0)


async def test_a_budget_holds_across_workers(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    await settle(a, b)
    urls = [o + "/" for o in origins_of(a, 5) + origins_of(b, 5)]
    await offer(a, *urls)
    await until(lambda: _nonzero(b.book.backlog()))
    first = await a.lease(10, T0, budget=4)
    assert len(first) == 4
    assert await b.lease(10, T0, budget=4) == []  # done + leased reached the budget
    await a.complete_many([(x, Outcome(error="robots_disallowed")) for x in first[:2]], T0)
    assert len(await b.lease(10, T0, budget=4)) == 2  # robots skips are not pages
    assert len(await b.lease(10, T0)) + len(await a.lease(10, T0)) == 4  # no budget: the rest


# -- dead, leaving and joining workers --


def run_worker(server: RedisServer, name: str, body: str, **kw: Any) -> str:
    """``body`` in another process holding RedisState ``state`` (it may ``os._exit``)."""
    indented = "".join("    " + line + "\n" for line in body.splitlines())
    code = (
        "import asyncio, json, os, sys, time\n"
        "from crawler.state import Candidate, Outcome\n"
        "from crawler.state.redis import RedisState\n"
        "from crawler.urls.policy import host_of, origin_of\n"
        f"state = RedisState({server.url!r}, name={name!r}, **{kw!r})\n"
        "def cand(url):\n"
        "    return Candidate(url, state.fingerprint(url), origin_of(url), host_of(url), 0)\n"
        "async def main():\n"
        f"{indented}"
        "asyncio.run(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


async def test_a_dead_workers_shards_are_taken_over_when_its_claims_lapse(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    out = run_worker(
        redis_server,
        "t",
        "await state.open(per_host=1, delay=0.0, max_pages_per_host=0)\n"
        "await state.offer_many([cand(f'http://h{i}.test/') for i in range(5)])\n"
        "leases = await state.lease(3, time.time())\n"
        "print(json.dumps([x.url for x in leases]))\n"
        "sys.stdout.flush()\n"
        "os._exit(0)  # dies with its leases: no close, no heartbeat any more\n",
        lease_timeout=1.0,
    )
    dead = json.loads(out)
    b = await workers.open(lease_timeout=1.0)
    counts = await b.counts()
    assert counts.queued + counts.leased == 5
    assert await b.lease(10, time.time()) == []  # the dead worker's claims hold a while
    await asyncio.sleep(1.2)
    await b._membership()  # B's next heartbeat: the claims lapsed, B wins them all
    got = await b.lease(10, time.time())
    assert sorted(x.url for x in got) == sorted([f"http://h{i}.test/" for i in range(5)])
    assert set(dead) <= {x.url for x in got}  # what it had in flight: fetched again
    await b.complete_many([(x, Outcome()) for x in got], time.time())
    counts = await b.counts()
    assert (counts.done, counts.queued, counts.leased) == (5, 0, 0)


async def test_heartbeats_keep_a_live_workers_shards(workers: Workers) -> None:
    a = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    b = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    await settle(a, b)
    urls = [o + "/" for o in origins_of(a, 2)]
    await offer(a, *urls)
    mine = await a.lease(10, time.time())
    assert len(mine) == 2
    await asyncio.sleep(2.0)  # twice the lease timeout: a slow fetch
    assert await b.lease(10, time.time()) == []  # A renewed its claims: still A's
    assert not set(a.book.held) & set(b.book.held)
    await until(lambda: _leased(b, 2))
    assert (await b.counts()).recovered == 0
    await a.complete_many([(x, Outcome()) for x in mine], time.time())
    assert (await b.counts()).done == 2


async def test_an_outage_longer_than_the_lease_timeout_takes_no_live_claim(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # while Redis is away nobody can renew; when it is back, the live owner's heartbeat
    # renews its claims before another worker may take them as lapsed
    a = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    b = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    await settle(a, b)
    held_a = set(a.book.held)
    redis_server.stop()
    await asyncio.sleep(1.5)  # longer than the lease timeout; both heartbeats fail meanwhile
    redis_server.start()
    await b.counts()  # B is back first
    await b._membership()
    assert not set(b.book.held) & held_a  # B took none of A's lapsed claims
    await asyncio.sleep(0.6)  # A's heartbeat has renewed by now
    await b._membership()
    assert not set(b.book.held) & set(a.book.held)
    assert set(a.book.held) == held_a


async def test_a_clean_close_hands_its_shards_over(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    await settle(a, b)
    urls = [o + "/" for o in origins_of(a, 2)]
    await offer(a, *urls)
    assert len(await a.lease(10, T0)) == 2
    await a.close()
    await b._membership()  # B's next heartbeat: A's shards are free, B claims and reads them
    again = await b.lease(10, T0)
    assert sorted(x.url for x in again) == sorted(urls) and all(x.attempts == 1 for x in again)
    assert (await b.counts()).recovered == 2
    assert len(b.book.held) == b.book.shards


async def test_a_joining_worker_takes_shards_only_once_their_owner_let_go(
    workers: Workers,
) -> None:
    a = await workers.open(per_host=2)
    urls = [f"http://h{i}.test/{j}" for i in range(40) for j in range(3)]
    await offer(a, *urls)
    out = await a.lease(200, T0)  # two of each origin out at A
    assert len(out) == 80
    b = await workers.open(per_host=2)  # joins: wins about half the shards
    for _ in range(3):
        await b._membership()
        await a._membership()
    assert not set(a.book.held) & set(b.book.held)
    # A's shards that B won are leaving: A leases nothing more of them, B cannot claim them
    # while A has requests of them out: no origin has more than 2 out over both
    assert await b.lease(200, T0) == []
    leaving = [x for x in out if not owns(a, x.url)]
    assert leaving
    assert all(a.book.held[a.book.shard(x.origin)].leaving for x in leaving)
    await a.complete_many([(x, Outcome()) for x in out], T0)
    await a._membership()  # released
    await b._membership()  # claimed and read
    rest = await a.lease(200, T0) + await b.lease(200, T0)
    assert sorted(x.url for x in rest) == sorted(u for u in urls if u.endswith("/2"))
    assert len(a.book.held) + len(b.book.held) == a.book.shards


async def test_close_with_redis_down_gives_up_in_bounded_time(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import crawler.state.redis as module  # noqa: PLC0415

    monkeypatch.setattr(module, "CLOSE_TIMEOUT", 0.5)
    a = await workers.open(lease_timeout=1.0)
    await offer(a, "http://a.test/0")
    (held,) = await a.lease(1, time.time())
    redis_server.stop()
    t = time.monotonic()
    await a.close()
    assert time.monotonic() - t < 3.0
    assert any("could not hand leases back" in r.getMessage() for r in caplog.records)
    redis_server.start()
    b = await workers.open(lease_timeout=1.0)
    await asyncio.sleep(1.1)
    await b._membership()
    (again,) = await b.lease(1, time.time())  # A's claims lapsed: B took the shard over
    assert again.url == held.url


async def test_no_key_per_origin_or_lease_in_redis(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    a = await workers.open(per_host=1, delay=0.4)
    await offer(a, *(f"http://h{i}.test/" for i in range(50)))
    leases = await a.lease(100, time.time())
    assert len(leases) == 50
    keys = {k.decode() for k in command(redis_server, "KEYS", "*")}
    shard_keys = {k for k in keys if not k.startswith(prefix_of("t"))}
    # per shard with work (50 origins: at most 50 shards): one hash of its open requests, its
    # seen buckets (a few fingerprints each), its counts once a page is done: nothing per
    # origin or per lease
    tails = {k.split("}:", 1)[1] for k in shard_keys}
    assert "p" in tails and any(t.startswith("s:") for t in tails)
    assert all(t in ("p", "c") or t.startswith("s:") for t in tails), tails
    assert len([k for k in shard_keys if k.endswith("}:p")]) <= 50
    await a.complete_many([(x, Outcome()) for x in leases], time.time())
    keys = {k.decode() for k in command(redis_server, "KEYS", "*")}
    assert not [k for k in keys if k.endswith("}:p")]  # nothing left open


# -- Redis restarts and lost scripts --


async def test_the_crawl_carries_on_across_a_redis_restart(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="crawler.state.redis")
    a = await workers.open(per_host=2)
    urls = [f"http://h{i % 5}.test/{i}" for i in range(100)]
    await offer(a, *urls)
    leases = await a.lease(10, T0)
    await a.complete_many([(x, Outcome()) for x in leases[:5]], T0)
    redis_server.restart()  # a clean stop: the AOF has everything
    await a.complete_many([(x, Outcome()) for x in leases[5:]], T0)
    counts = await a.counts()
    # The completions pending when Redis restarted are not written: a restart may have lost
    # its last second, and with it the links those pages offered. They are fetched again.
    assert (counts.done, counts.queued, counts.leased, counts.seen) == (0, 100, 0, 100)
    await a._membership()  # (the new epoch: this worker reads its shards again)

    # down for a while, in the middle of calls: they wait, then carry on
    redis_server.stop()

    def back() -> None:
        time.sleep(1.0)
        redis_server.start()

    thread = threading.Thread(target=back)
    thread.start()
    try:
        t = time.monotonic()
        more = await a.lease(10, T0)  # from the shards held here: no call to Redis
        assert await offer(a, "http://new.test/") == ["http://new.test/"]  # waits for Redis
        assert time.monotonic() - t >= 0.5
    finally:
        thread.join()
    assert len(more) == 10
    await a.complete_many([(x, Outcome()) for x in more], T0)
    await a._membership()
    while batch := await a.lease(50, T0):
        await a.complete_many([(x, Outcome()) for x in batch], T0)
    counts = await a.counts()
    assert (counts.done, counts.queued, counts.leased, counts.seen) == (101, 0, 0, 101)
    messages = [r.getMessage() for r in caplog.records]
    # once per outage (the restart and the stop), however many calls retried meanwhile
    assert sum("unreachable" in m for m in messages) == 2, messages
    assert sum("reconnected" in m for m in messages) == 2, messages


async def test_a_redis_crash_mid_crawl_leaves_a_consistent_state(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # SIGKILL of redis-server while a worker offers, leases and completes: with appendfsync
    # everysec the last second may be lost, but only whole script calls (MULTI/EXEC in the
    # AOF): afterwards every URL seen is queued, leased or done, and the crawl finishes with
    # every seen URL done exactly once in the counts
    a = await workers.open(per_host=4, lease_timeout=1.0, heartbeat=0.2)
    await offer(a, *(f"http://h{i}.test/" for i in range(8)))
    stop = asyncio.Event()
    serial = 0

    async def crawl() -> None:
        nonlocal serial
        while not stop.is_set():
            batch = await a.lease(8, time.time())
            for x in batch:
                serial += 1
                await offer(a, *(f"{x.origin}/p{serial}-{j}" for j in range(3)), depth=1)
            await a.complete_many([(x, Outcome()) for x in batch], time.time())
            if not batch:
                await asyncio.sleep(0.01)

    task = asyncio.ensure_future(crawl())
    await asyncio.sleep(0.5)
    redis_server.kill()  # a crash: what was not fsynced yet is lost
    await asyncio.sleep(0.3)
    redis_server.start()
    await asyncio.sleep(0.5)
    stop.set()
    await asyncio.wait_for(task, 30)
    assert serial > 0
    c = await a.counts()
    assert c.seen == c.queued + c.leased + c.done
    deadline = time.monotonic() + 20
    while (c := await a.counts()).queued or c.leased:  # lost leases come back by expiring
        assert time.monotonic() < deadline, c
        batch = await a.lease(100, time.time())
        await a.complete_many([(x, Outcome()) for x in batch], time.time())
        if not batch:
            await asyncio.sleep(0.2)
    assert c.done == c.seen and c.failed == {}
    assert seen_members(redis_server, "t") == c.seen


async def test_lost_scripts_are_loaded_again(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    a = await workers.open()
    await offer(a, "http://a.test/0")
    command(redis_server, "SCRIPT", "FLUSH")  # as a restart without persistence would
    assert await offer(a, "http://a.test/1") == ["http://a.test/1"]
    assert len(await a.lease(10, T0)) == 2


async def test_an_appendonly_restart_keeps_what_a_killed_worker_left(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    run_worker(
        redis_server,
        "t",
        "await state.open(per_host=8, delay=0.0, max_pages_per_host=0)\n"
        "await state.offer_many([cand(f'http://a.test/{i}') for i in range(200)])\n"
        "os._exit(0)\n",
    )
    redis_server.restart()
    a = await workers.open()
    counts = await a.counts()
    assert counts.seen == counts.queued == 200
    assert await offer(a, "http://a.test/0", "http://a.test/new") == ["http://a.test/new"]


def _self_signed(directory: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (the TLS test makes a self-signed certificate)")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key)]
        + ["-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    return cert, key


async def test_rediss_and_unix_socket_urls(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    tls_port = _closed_port()
    sock = tmp_path / "redis.sock"
    extra = ["--tls-port", str(tls_port), "--tls-cert-file", str(cert)]
    extra += ["--tls-key-file", str(key), "--tls-ca-cert-file", str(cert)]
    extra += ["--tls-auth-clients", "no", "--unixsocket", str(sock), "--unixsocketperm", "700"]
    with RedisServer(tmp_path / "data", extra=extra):
        tls = f"rediss://127.0.0.1:{tls_port}/0?ssl_ca_certs={cert}"
        unix = f"unix://{sock}?db=0"
        a, b = open_state(tls, name="both"), open_state(unix, name="both")
        assert isinstance(a, RedisState) and isinstance(b, RedisState)
        for state in (a, b):
            await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
        try:
            await settle(a, b)
            owner, other = (a, b) if owns(a, "http://a.test/") else (b, a)
            await offer(other, "http://a.test/0", "http://a.test/1")  # sent to the owner
            await until(lambda: _nonzero(owner.book.backlog()))
            (lease,) = await owner.lease(10, T0)  # one crawl, reached both ways
            assert await other.lease(10, T0) == [] and await owner.lease(10, T0) == []
            await owner.complete(lease, Outcome(), T0)
            assert len(await owner.lease(10, T0)) == 1
        finally:
            for state in (a, b):
                await state.close()
        assert RedisState.read_status(unix, "both").counts.done == 1
        assert RedisState.read_status(tls, "both").counts.leased == 0  # a's close gave it back
        # without the CA the self-signed certificate is refused: a clear error at open
        with pytest.raises(StateError, match="cannot use Redis.*(?i:certificate)"):
            await open_state(f"rediss://127.0.0.1:{tls_port}/0").open(
                per_host=1, delay=0.0, max_pages_per_host=0
            )


async def test_a_password_is_used_and_never_shown(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with RedisServer(tmp_path, extra=["--requirepass", "s3cret-pw"]) as server:
        good = f"redis://:s3cret-pw@127.0.0.1:{server.port}/0"
        bad = f"redis://:wrong-pw@127.0.0.1:{server.port}/0"
        state = open_state(good, name="pw")
        await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
        try:
            await offer(state, "http://a.test/")  # type: ignore[arg-type]
            assert "s3cret" not in state.location and "***" in state.location
            status = RedisState.read_status(good, "pw")
            assert status.counts.queued == 1 and "s3cret" not in status.location
        finally:
            await state.close()
        with pytest.raises(StateError) as err:
            await open_state(bad, name="pw").open(per_host=1, delay=0.0, max_pages_per_host=0)
        assert "wrong-pw" not in str(err.value) and "cannot use Redis" in str(err.value)
        with pytest.raises(StateError) as err:
            RedisState.read_settings(bad, "pw")
        assert "wrong-pw" not in str(err.value)
    assert not any(
        "s3cret" in r.getMessage() or "wrong-pw" in r.getMessage() for r in caplog.records
    )


# -- names, versions, errors --


async def test_two_names_are_two_crawls(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    one = await workers.open("one")
    two = await workers.open("two")
    assert one.fingerprint("http://a.test/") != two.fingerprint("http://a.test/")  # own keys
    await offer(one, "http://a.test/", "http://b.test/")
    assert await offer(two, "http://a.test/") == ["http://a.test/"]
    await one.save_settings({"seeds": ["http://a.test/"]})
    assert await two.load_settings() is None
    assert ((await one.counts()).seen, (await two.counts()).seen) == (2, 1)
    keys = [k.decode() for k in command(redis_server, "KEYS", "*")]
    assert keys and all(k.startswith(("crawler:{one", "crawler:{two")) for k in keys)
    assert {k.split("}")[0].split(":s")[0] for k in keys} == {"crawler:{one", "crawler:{two"}


async def test_another_version_is_refused(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    command(redis_server, "SET", prefix_of("old") + "v", "0")
    with pytest.raises(StateError, match="version '0'.*--name") as err:
        await workers.open("old")
    assert "name=old" in str(err.value)
    with pytest.raises(StateError, match="version"):
        RedisState.read_status(redis_server.url, "old")
    with pytest.raises(StateError, match="version"):
        RedisState.read_settings(redis_server.url, "old")
    assert command(redis_server, "KEYS", "*") == [prefix_of("old").encode() + b"v"]  # untouched


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_an_unreachable_redis_is_a_state_error_naming_it() -> None:
    port = _closed_port()
    url = f"redis://:s3cret-pw@127.0.0.1:{port}/0"
    state = open_state(url, name="x")
    t = time.monotonic()
    with pytest.raises(StateError) as err:
        await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
    assert time.monotonic() - t < 10  # no endless retry at open
    message = str(err.value)
    assert f"127.0.0.1:{port}" in message and "s3cret" not in message
    assert "onnect" in message  # the reason (connection refused)
    for read in (RedisState.read_status, RedisState.read_settings):
        with pytest.raises(StateError) as err:
            read(url, "x")  # type: ignore[operator]
        assert f"127.0.0.1:{port}" in str(err.value) and "s3cret" not in str(err.value)
    assert redacted("redis://u:pw@h:1/0") == "redis://u:***@h:1/0"
    assert redacted("redis://h:1/0") == "redis://h:1/0"
    assert redacted("rediss://[::1]:6380/0?password=pw&ssl_ca_certs=/ca") == (
        "rediss://[::1]:6380/0?password=***&ssl_ca_certs=/ca"
    )
    assert "pw" not in redacted("unix:///r.sock?db=0&PASSWORD=pw")


# -- what is stored, and status --


async def test_the_seen_set_is_buckets_of_integers(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    a = await workers.open(seen_bits=8, shards=1)  # 256 buckets: ~20 fingerprints each below
    urls = [f"http://a.test/page/{i}?q={i * 7}" for i in range(5000)]
    await a.offer_many([cand(a, u, queue=False) for u in urls])
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(redis_server.url)
    try:
        buckets = list(client.scan_iter(match="crawler:{t:s0}:s:*", count=1000))
        assert 200 < len(buckets) <= 256  # never a key per URL
        pipe = client.pipeline(transaction=False)
        for key in buckets:
            pipe.object("encoding", key)
            pipe.dump(key)
        replies = pipe.execute()
    finally:
        client.close()
    assert set(replies[0::2]) == {b"intset"}
    assert seen_members(redis_server, "t") == 5000
    dumps = b"".join(replies[1::2])
    assert not any(u.encode() in dumps for u in urls[:100])  # integers, not URL strings
    # the bucket width is fixed at creation: a later opener with other bits follows it
    b = await workers.open(seen_bits=16)
    assert await offer(b, urls[0]) == []


def used_memory(server: RedisServer) -> int:
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(server.url)
    try:
        return int(client.info("memory")["used_memory"])
    finally:
        client.close()


async def seen_bytes_per_url(server: RedisServer, workers: Workers, bits: int, n: int) -> float:
    a = await workers.open(f"mem{bits}", seen_bits=bits)
    before = used_memory(server)
    for start in range(0, n, 4096):
        urls = [
            f"http://h{i % 97}.test/section/{i // 7}/page-{i}.html"
            for i in range(start, min(n, start + 4096))
        ]
        await a.offer_many([cand(a, u, queue=False) for u in urls])
    return (used_memory(server) - before) / n


async def test_seen_set_bytes_per_url_at_the_fill_of_a_million(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # 4,096 buckets holding 65,536 URLs are filled as 65,536 buckets holding 1M (16 a
    # bucket): the README's ~16 bytes a URL at 1M, at a size the default run affords (the
    # real 1M: the slow test below and benchmarks/redis_memory.py; much smaller runs show
    # Redis's fixed costs instead, e.g. the connection's query buffer)
    per_url = await seen_bytes_per_url(redis_server, workers, 12, 65_536)
    assert per_url < 20, per_url


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_seen_set_bytes_per_url_at_a_million(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    per_url = await seen_bytes_per_url(redis_server, workers, 16, 1_000_000)
    assert per_url < 20, per_url


async def test_read_status_and_settings(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    url = redis_server.url
    with pytest.raises(StateError, match="no crawl named 'st'"):
        RedisState.read_status(url, "st")
    assert RedisState.read_settings(url, "st") is None
    born = time.monotonic()
    a = await workers.open("st", heartbeat=0.2)
    b = await workers.open("st", heartbeat=0.2)
    await settle(a, b)
    await a.save_settings({"seeds": ["http://a.test/"], "max_depth": 2})
    origins = origins_of(b, 3)
    await offer(a, *(f"{origins[i % 3]}/{i}" for i in range(12)))  # B's shards, sent to B
    await until(lambda: _nonzero(b.book.backlog()))
    leases = await b.lease(5, time.time())
    await b.complete_many(
        [(leases[0], Outcome(error="timeout"))] + [(x, Outcome()) for x in leases[1:4]],
        time.time(),
    )
    await asyncio.sleep(0.6)  # B's report (REPORT_GAP)
    await a.add_counters({"links_found": 7})
    assert await a.counters() == {"links_found": 7}  # (written with the next completions, or now)
    before = command(redis_server, "DBSIZE")
    status = RedisState.read_status(url, "st")
    assert command(redis_server, "DBSIZE") == before  # read only
    assert isinstance(status, RedisStatus)
    c = status.counts
    assert (c.queued, c.leased, c.done, c.seen) == (7, 1, 4, 12)
    # (origins with work: a sum of the workers' reports; three origins on two workers are
    # balanced two and one, and while that shard changes hands both may report it)
    assert c.origins in (3, 4)
    assert dict(c.failed) == {"timeout": 1}
    assert (status.workers, status.name) == (2, "st")
    assert status.hosts in (3, 4)  # (no max_pages_per_host: the origins with work, as above)
    assert status.settings == {"seeds": ["http://a.test/"], "max_depth": 2}
    assert status.seeds == ["http://a.test/"]
    assert status.counters == {"links_found": 7}
    # 4 completions over the crawl's age (seconds), not over a whole minute
    age = time.monotonic() - born
    assert 4 / max(1.0, age + 0.5) <= status.pages_per_second <= 4.0, (status.pages_per_second, age)
    assert status.created > 0 and status.redis_memory > 0
    assert RedisState.read_settings(url, "st") == status.settings
    await a.close()
    assert RedisState.read_status(url, "st").workers == 1  # A left
    assert "name=st" in status.location


async def test_round_trips_per_page_are_constant(workers: Workers) -> None:
    # the engine's pattern: one lease per batch, one offer per page, one complete_many per
    # batch: the calls do not grow with the links offered
    a = await workers.open(per_host=4)
    await offer(a, *(f"http://h{i}.test/" for i in range(20)))
    calls = a.calls
    pages = 0
    while batch := await a.lease(10, T0):
        for x in batch:
            links = [f"{x.url}p{j}" for j in range(40)]
            await a.offer_many([cand(a, u, 1, queue=False) for u in links])
        await a.complete_many([(x, Outcome()) for x in batch], T0)
        pages += len(batch)
    per_page = (a.calls - calls) / pages
    assert pages == 20 and per_page <= 1.3, per_page  # 1 offer + 2 calls a batch of 10


async def test_two_engine_workers_crawl_a_site_once_between_them(
    serve: Any,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # the engine on this backend, two workers in one process (RC's tests run processes):
    # the one with the seed starts the crawl, the other joins with none; between them they
    # fetch what one memory crawl fetches, each page once, and both stop by themselves
    from crawler.core.engine import crawl  # noqa: PLC0415
    from tests.sitegen import start_site  # noqa: PLC0415

    site, _ = await start_site(serve, n=120)
    seed = site.url("/p/0.html")
    ref = await crawl(seed, concurrency=8)
    # (host_split 1: one part, one owner, the memory crawl's breadth-first order, so that a
    # page reached both by a link and by a redirect is fetched the same way; a split host's
    # parts go at their own pace: tests/test_redis_hot.py)
    options: dict[str, Any] = {
        "state": redis_server.url,
        "name": "site",
        "concurrency": 4,
        "host_split": 1,
    }
    first = asyncio.ensure_future(crawl(seed, **options))
    await asyncio.sleep(0.2)
    joined = asyncio.ensure_future(crawl((), **options))
    a, b = await asyncio.wait_for(asyncio.gather(first, joined), 60)
    pages_a, pages_b = [p.url for p in a.pages], [p.url for p in b.pages]
    # (one origin: one shard, one owner; tests/test_redis_cluster.py shares many origins)
    assert sorted(pages_a + pages_b) == sorted(p.url for p in ref.pages)  # each page once
    status = RedisState.read_status(redis_server.url, "site")
    assert (status.counts.queued, status.counts.leased, status.workers) == (0, 0, 0)
    assert status.counts.done == len(ref.pages) + status.counts.failed.get("robots_disallowed", 0)


def test_redisserver_fixture_skips_without_a_binary_and_fails_under_ci(tmp_path: Path) -> None:
    code = (
        "import os, pytest\n"
        "from tests.redisserver import redis_server_binary\n"
        "try:\n"
        "    redis_server_binary()\n"
        "except pytest.skip.Exception:\n"
        "    print('skip')\n"
        "except pytest.fail.Exception:\n"
        "    print('fail')\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["PATH"] = str(tmp_path)  # no redis-server on it
    run = [sys.executable, "-c", code]
    skip = subprocess.run(run, capture_output=True, text=True, env=env, cwd=ROOT)
    fail = subprocess.run(run, capture_output=True, text=True, env=env | {"CI": "1"}, cwd=ROOT)
    assert (skip.stdout.strip(), fail.stdout.strip()) == ("skip", "fail")


async def aof_snapshot(server: RedisServer) -> Callable[[], None]:
    """Wait until the AOF on disk holds every write so far (appendfsync everysec), copy it;
    the function returned kills Redis and brings it back with that copy: a power loss that
    takes the last writes with it."""
    await asyncio.sleep(1.5)
    aof = server.directory / "appendonlydir"
    snapshot = server.directory.parent / (server.directory.name + "-snapshot")
    shutil.copytree(aof, snapshot)

    def rollback() -> None:
        server.kill()
        shutil.rmtree(aof)
        shutil.copytree(snapshot, aof)
        server.start()

    return rollback


async def test_a_redis_back_without_its_last_writes_is_a_new_epoch(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # a power loss under appendfsync everysec: Redis comes back with the AOF of a moment
    # before. What this worker remembers as seen must be forgotten (else the lost links are
    # dropped as known before they reach Redis), and a lease id Redis hands out again must
    # not be taken for one this worker still holds.
    a = await workers.open(lease_timeout=30.0)
    await offer(a, "http://a.test/0")
    (first,) = await a.lease(1, time.time())
    rollback = await aof_snapshot(redis_server)
    await offer(a, "http://b.test/lost")
    (lost_lease,) = await a.lease(1, time.time())  # its id will be handed out again
    assert a.seen(a.fingerprint("http://b.test/lost"))
    epoch = a.epoch
    rollback()
    await a.counts()  # the first call after the restart: the epoch turns
    assert a.epoch > epoch
    assert not a.seen(a.fingerprint("http://b.test/lost"))
    assert await offer(a, "http://b.test/lost") == ["http://b.test/lost"]
    assert await a.lease(1, time.time()) == []  # it is out here already: not twice
    # both were leased before Redis came back (their pages' links may be gone with it):
    # not written, both fetched again, and done once each
    await a.complete_many([(first, Outcome()), (lost_lease, Outcome())], time.time())
    counts = await a.counts()
    assert (counts.done, counts.leased, counts.queued) == (0, 0, 2)
    await a._membership()
    again = await a.lease(5, time.time())
    assert sorted(x.url for x in again) == ["http://a.test/0", "http://b.test/lost"]
    await a.complete_many([(x, Outcome()) for x in again], time.time())
    counts = await a.counts()
    assert (counts.done, counts.leased, counts.queued) == (2, 0, 0)


async def test_a_page_whose_offer_redis_lost_is_done_once_and_not_offered_again(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # Redis comes back without the offer of a page that is out here. Its completion, and the
    # other one's, are not written to the Redis that came back (the links those pages offered
    # in the lost second are gone with it): both requests are offered again (the lost one is
    # queued anew: no page would offer it again if it were a seed), fetched again and done
    # once; a link to it offered meanwhile is refused (before, the offer queued it again in
    # Redis and this worker, remembering the completion, never leased it: the crawl never
    # ended; seen in the cluster test that rolls Redis back 1 s)
    a = await workers.open(lease_timeout=30.0)
    await offer(a, "http://a.test/0")
    rollback = await aof_snapshot(redis_server)
    await offer(a, "http://b.test/lost")
    leases = await a.lease(2, time.time())
    assert sorted(x.url for x in leases) == ["http://a.test/0", "http://b.test/lost"]
    rollback()
    await a.complete_many([(x, Outcome()) for x in leases], time.time())
    assert await offer(a, "http://b.test/lost") == []  # offered again already: seen
    counts = await a.counts()
    assert (counts.done, counts.leased, counts.queued, counts.seen) == (0, 0, 2, 2)
    await a._membership()  # (the new epoch: this worker reads its shards again)
    again = await a.lease(5, time.time())
    assert sorted(x.url for x in again) == ["http://a.test/0", "http://b.test/lost"]
    await a.complete_many([(x, Outcome()) for x in again], time.time())
    counts = await a.counts()
    assert (counts.done, counts.leased, counts.queued, counts.seen) == (2, 0, 0, 2)
    assert await a.lease(5, time.time()) == []


async def test_a_completion_redis_lost_is_fetched_again(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # Redis comes back with a request open that this worker completed in the lost second:
    # the worker forgets its completions with the epoch and leases the request again
    # (at-least-once), else it stays open in Redis and the crawl never ends
    a = await workers.open(lease_timeout=30.0)
    await offer(a, "http://a.test/0")
    (lease,) = await a.lease(1, time.time())
    rollback = await aof_snapshot(redis_server)
    await a.complete_many([(lease, Outcome())], time.time())
    rollback()
    assert (await a.counts()).queued == 1  # (the epoch turns: read again at the heartbeat)
    await a._membership()
    (again,) = await a.lease(1, time.time())
    assert again.url == "http://a.test/0"
    await a.complete_many([(again, Outcome())], time.time())
    counts = await a.counts()
    assert (counts.done, counts.queued) == (1, 0)


async def test_any_restart_of_redis_turns_the_epoch(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # redis-py may reconnect by itself (no error reaches the state): the server's run_id
    # is what tells a restart
    a = await workers.open()
    await offer(a, "http://a.test/0")
    epoch = a.epoch
    redis_server.restart()
    await a.counts()
    await offer(a, "http://a.test/1")
    assert a.epoch > epoch
    assert not a.seen(a.fingerprint("http://a.test/0"))
    assert a.seen(a.fingerprint("http://a.test/1"))


async def test_named_counters_ride_with_their_completions(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # the engine adds a batch's counters just before completing it: one call writes both,
    # so a page's counters are in Redis exactly when its completion is (counted once)
    a = await workers.open()
    await offer(a, "http://a.test/0", "http://a.test/1")
    leases = await a.lease(10, T0)
    await a.add_counters({"links_found": 5, "redirects": 1})
    assert RedisState.read_status(redis_server.url, "t").counters == {}  # not written alone
    calls = a.calls
    await a.complete_many([(x, Outcome()) for x in leases], T0)
    assert a.calls == calls + 1
    status = RedisState.read_status(redis_server.url, "t")
    assert status.counters == {"links_found": 5, "redirects": 1}
    assert status.counts.done == 2
    await a.add_counters({"links_found": 2})
    await a.close()  # written at close too
    assert RedisState.read_status(redis_server.url, "t").counters["links_found"] == 7


def test_shards_with_work_are_spread_evenly_over_the_workers() -> None:
    # hashing alone gives the busiest of 16 workers 3-4 of 16 busy origins (balls into
    # bins): the crawl then lasts as long as that worker. balance() caps each at ceil(16/16)
    from crawler.state._redis_owner import balance, rendezvous, shard_of  # noqa: PLC0415

    workers = [f"host:{i}:w{i:02d}" for i in range(16)]
    active = {shard_of(f"http://127.0.0.{i + 1}", 256) for i in range(16)}
    hashed = rendezvous(workers, 256)
    assert max(sum(hashed[k] == w for k in active) for w in workers) > 1  # uneven by hash
    owners = balance(workers, active, 256)
    per_worker = [sum(owners[k] == w for k in active) for w in workers]
    assert max(per_worker) == -(-len(active) // len(workers))
    assert owners == balance(list(reversed(workers)), set(active), 256)  # any worker's view
    idle = [k for k in range(256) if k not in active]
    assert all(owners[k] == hashed[k] for k in idle)  # shards without work: by hash


def test_a_late_copy_of_a_completed_request_is_not_queued_again() -> None:
    """A request this worker completed, reaching it again (an inbox message sent before the
    shard's load queued it, a load that read it before the completion's HDEL): not queued,
    not fetched twice (seen in CI: one worker GET a page twice, 48 ms apart)."""
    from crawler.state._redis_owner import ShardBook  # noqa: PLC0415

    book = ShardBook(shards=4, per_host=2, delay=0.0)
    origin = "http://a.test"
    k = book.shard(origin)
    book.take(k)
    value = (0, 0.0, 1, origin, 0, None, origin + "/p")
    assert book.add(k, 42, value, now=0.0)
    assert not book.add(k, 42, value, now=0.0)  # known while open
    (item,) = book.pop(5, now=0.0)
    assert book.ended(item, now=0.0, completed=True)
    assert not book.add(k, 42, value, now=0.0)  # the late copy
    assert book.pop(5, now=0.0) == []


def test_a_shard_won_back_while_its_request_is_out_does_not_lease_it_twice() -> None:
    """A shard marked leaving (another worker won it) and won back before its release is
    read again; its request still out here is known, not queued a second time, and comes
    back in line (with the shard's new generation) only if its lease ends unfinished. (Seen
    in CI: one worker GET a seed twice, 0.2 ms apart, both leases having waited on the
    origin's robots.txt.)"""
    from crawler.state._redis_owner import ShardBook  # noqa: PLC0415

    book = ShardBook(shards=4, per_host=4, delay=0.0)
    origin = "http://a.test"
    k = book.shard(origin)
    me, other = "w-me", "w-other"
    own = {k: me}  # the shard held here is claimed by it (the others by nobody)
    book.take(k)
    value = (0, 0.0, 1, origin, 0, None, origin + "/p")
    assert book.add(k, 42, value, now=0.0)
    (item,) = book.pop(5, now=0.0)
    # another worker wins k: leaving, not released (its request is out)
    import crawler.state._redis_owner as owner_mod  # noqa: PLC0415

    real = owner_mod.balance
    try:
        owner_mod.balance = lambda ws, a, n: [other] * n  # type: ignore[assignment]
        claim, release, reread = book.plan(me, [me, other], own, {k})
        assert (claim, release, reread) == ([], [], [])
        assert book.active(k) is None
        owner_mod.balance = lambda ws, a, n: [me] * n  # type: ignore[assignment]
        claim, release, reread = book.plan(me, [me, other], own, {k})
    finally:
        owner_mod.balance = real
    assert k not in claim and (release, reread) == ([], [k])  # still claimed here
    assert not book.add(k, 42, value, now=0.0)  # the reload's copy of the request out
    assert book.pop(5, now=0.0) == []
    assert book.out() == 1
    book.ended(item, now=1.0, completed=False)  # a retry
    book.again(item, 1, 0.0, now=1.0)
    (back,) = book.pop(5, now=1.0)
    assert back[0] == 42 and back[8] == 1 and book.pop(5, now=1.0) == []
    assert book.ended(back, now=2.0, completed=True)
    assert book.out() == 0 and not book.add(k, 42, value, now=2.0)


def test_a_shard_claimed_anew_while_its_old_request_is_out_does_not_lease_it_twice() -> None:
    """A shard dropped here (its claim lapsed) and claimed again while a request of it is
    still out from here: the load's copy is known, not leased twice; completed, forgotten."""
    from crawler.state._redis_owner import ShardBook  # noqa: PLC0415

    book = ShardBook(shards=4, per_host=4, delay=0.0)
    origin = "http://a.test"
    k = book.shard(origin)
    book.take(k)
    value = (0, 0.0, 1, origin, 0, None, origin + "/p")
    assert book.add(k, 7, value, now=0.0)
    (item,) = book.pop(5, now=0.0)
    book.drop(k)
    book.take(k)
    assert not book.add(k, 7, value, now=0.0)
    assert book.pop(5, now=0.0) == []
    assert book.active_shards() == [k]  # known open here
    assert book.ended(item, now=1.0, completed=True)
    assert book.active_shards() == []
    assert not book.add(k, 7, value, now=1.0)


def test_a_shard_claimed_anew_is_not_released_while_its_old_request_is_out() -> None:
    """A shard dropped here (its claim lapsed: a long stall) and claimed again while a request
    of it is still out from here, then won by another worker: it is let go only once that
    request ended, as any other shard (released before, its winner would load the request
    and lease it while this worker still fetches it: two live workers on one request)."""
    import crawler.state._redis_owner as owner_mod  # noqa: PLC0415
    from crawler.state._redis_owner import ShardBook  # noqa: PLC0415

    book = ShardBook(shards=4, per_host=4, delay=0.0)
    origin = "http://a.test"
    k = book.shard(origin)
    me, other = "w-me", "w-other"
    book.take(k)
    value = (0, 0.0, 1, origin, 0, None, origin + "/p")
    assert book.add(k, 9, value, now=0.0)
    (item,) = book.pop(5, now=0.0)
    book.drop(k)  # its claim lapsed and was taken
    book.take(k)  # claimed back (the other worker died)
    assert not book.add(k, 9, value, now=0.0)  # the load's copy: out from here
    real = owner_mod.balance
    try:
        owner_mod.balance = lambda ws, a, n: [other] * n  # type: ignore[assignment]
        own = {k: me}  # the shard held here is claimed by it (the others by nobody)
        claim, release, reread = book.plan(me, [me, other], own, {k})
        assert (claim, release, reread) == ([], [], [])  # leaving, its request out
        assert book.active_shards() == [k]
        assert book.ended(item, now=1.0, completed=True)
        assert book.let_go
        claim, release, reread = book.plan(me, [me, other], own, {k})
        assert (claim, release, reread) == ([], [k], [])
    finally:
        owner_mod.balance = real


def test_a_claim_redis_gives_back_to_a_worker_that_let_the_shard_go_is_released() -> None:
    """Redis rolled back to before a release (or a claim's answer was lost): Redis says this
    worker claims a shard it does not hold. Its winner cannot claim it while this worker
    lives (claims lapse per worker), so it is released: else its requests stay open with
    nobody to lease them and the crawl never ends (the slow rollback test hung so)."""
    import crawler.state._redis_owner as owner_mod  # noqa: PLC0415
    from crawler.state._redis_owner import ShardBook  # noqa: PLC0415

    book = ShardBook(shards=4, per_host=4, delay=0.0)
    me, other = "w-me", "w-other"
    real = owner_mod.balance
    try:
        owner_mod.balance = lambda ws, a, n: [other, other, me, me]  # type: ignore[assignment]
        own = {0: me, 1: other, 2: me}  # 0: given back by the rollback; 3: free
        claim, release, reread = book.plan(me, [me, other], own, {0})
    finally:
        owner_mod.balance = real
    assert (claim, release, reread) == ([2, 3], [0], [])
