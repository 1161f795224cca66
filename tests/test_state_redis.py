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
from collections.abc import AsyncIterator
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
        for key in client.scan_iter(match=prefix_of(name) + "s:*", count=1000):
            pipe.scard(key)
        return sum(pipe.execute())
    finally:
        client.close()


# -- two workers on one crawl --


async def test_per_host_holds_across_workers(workers: Workers) -> None:
    a = await workers.open(per_host=2)
    b = await workers.open(per_host=2)
    await offer(a, *(f"http://slow.test/{i}" for i in range(6)))
    first = await a.lease(10, T0)
    assert len(first) == 2
    assert await b.lease(10, T0) == []  # the other worker's two leases fill the origin
    await a.complete(first[0], Outcome(status=200), T0)
    (taken,) = await b.lease(10, T0)  # one slot freed, whoever asks gets it
    assert await a.lease(10, T0) == []
    assert (await b.counts()).leased == 2
    await b.complete(taken, Outcome(status=200), T0)
    await a.complete(first[1], Outcome(status=200), T0)
    assert len(await a.lease(1, T0)) + len(await b.lease(10, T0)) == 2


async def test_delay_holds_across_workers(workers: Workers) -> None:
    a = await workers.open(per_host=4, delay=2.0)
    b = await workers.open(per_host=4, delay=2.0)
    await offer(a, "http://a.test/0", "http://a.test/1", "http://a.test/2")
    assert len(await a.lease(10, T0)) == 1
    assert await b.lease(10, T0 + 1.0) == []  # the delay runs from A's start, for B too
    assert b.next_due(T0 + 1.0) == pytest.approx(T0 + 2.0, abs=1e-3)
    assert len(await b.lease(10, T0 + 2.0)) == 1
    assert await a.lease(10, T0 + 3.9) == []
    assert len(await a.lease(10, T0 + 4.0)) == 1


async def test_crawl_delay_told_by_one_worker_holds_for_the_other(workers: Workers) -> None:
    a = await workers.open(per_host=4)
    b = await workers.open(per_host=4)
    await offer(a, *(f"http://a.test/{i}" for i in range(3)))
    (first,) = await a.lease(1, T0)
    a.set_delay("http://a.test", 5.0)  # robots.txt Crawl-delay, learnt by A
    await a.complete(first, Outcome(), T0 + 0.5)  # A's next call writes it crawl-wide
    assert await b.lease(10, T0 + 4.9) == []
    assert b.next_due(T0 + 4.9) == pytest.approx(T0 + 5.0, abs=1e-3)
    assert len(await b.lease(10, T0 + 5.0)) == 1


async def test_retry_after_holds_across_workers(workers: Workers) -> None:
    a = await workers.open(per_host=1)
    b = await workers.open(per_host=1)
    await offer(a, "http://a.test/0")
    (lease,) = await a.lease(1, T0)
    await a.retry(lease, T0 + 30.0, T0)  # a Retry-After of 30 s
    assert await b.lease(10, T0 + 29.0) == []
    assert b.next_due(T0 + 29.0) == pytest.approx(T0 + 30.0, abs=1e-3)
    (again,) = await b.lease(10, T0 + 30.0)
    assert again.url == "http://a.test/0" and again.attempts == 1


async def test_the_last_opener_sets_politeness_for_every_worker(workers: Workers) -> None:
    a = await workers.open(per_host=1)
    await offer(a, *(f"http://a.test/{i}" for i in range(5)))
    (first,) = await a.lease(10, T0)
    b = await workers.open(per_host=3)  # another worker joins with other settings: they win
    # (an origin at its old limit takes the new one from its next completion on)
    await b.complete(first, Outcome(), T0)
    assert len(await a.lease(10, T0)) == 3  # A enforces 3 as well
    assert await b.lease(10, T0) == []


async def test_dedup_across_workers(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    urls = [f"http://a.test/{i}" for i in range(300)]
    assert [a.fingerprint(u) for u in urls] == [b.fingerprint(u) for u in urls]  # stored key
    assert await offer(a, *urls[:200]) == urls[:200]
    assert await offer(b, *urls[100:]) == urls[200:]  # B knew none of A's from its cache
    assert not b.seen(a.fingerprint("http://a.test/0"))  # B's cache holds its own offers only
    assert b.seen(b.fingerprint(urls[150]))
    counts = await b.counts()
    assert (counts.seen, counts.queued) == (300, 300)
    got: list[Lease] = []
    while batch := (await a.lease(37, T0)) + (await b.lease(41, T0)):
        got += batch
        await a.complete_many([(x, Outcome()) for x in batch], T0)  # frees their slots
    assert sorted(x.url for x in got) == sorted(urls)  # each handed out once


async def test_wait_wakes_on_another_workers_offer(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    await asyncio.sleep(0.2)  # B's pub/sub reader has subscribed
    await b.wait(0.01)
    waiter = asyncio.ensure_future(b.wait(10.0))
    await asyncio.sleep(0.1)
    assert not waiter.done()
    t = time.monotonic()
    await offer(a, "http://a.test/")
    await asyncio.wait_for(waiter, 3.0)
    assert time.monotonic() - t < 2.0
    # and a cancelled wait leaves the state usable (the engine cancels it when a local page
    # finishes first)
    w = asyncio.ensure_future(b.wait(10.0))
    await asyncio.sleep(0.05)
    w.cancel()
    await asyncio.gather(w, return_exceptions=True)
    assert (await b.counts()).queued == 1


async def test_wake_ups_come_back_after_a_redis_restart(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    a = await workers.open()
    b = await workers.open()
    redis_server.restart()
    await a.counts()  # A's pool reconnects
    deadline = time.monotonic() + 10
    while True:  # both readers subscribe again
        await b.wait(0.5)
        if command(redis_server, "PUBSUB", "NUMSUB", prefix_of("t") + "wake")[1] == 2:
            break
        assert time.monotonic() < deadline
    await b.wait(0.01)
    waiter = asyncio.ensure_future(b.wait(10.0))
    await asyncio.sleep(0.05)
    assert not waiter.done()
    await offer(a, "http://a.test/")
    await asyncio.wait_for(waiter, 3.0)


async def test_a_budget_holds_across_workers(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    await offer(a, *(f"http://h{i}.test/" for i in range(10)))
    first = await a.lease(10, T0, budget=4)
    assert len(first) == 4
    assert await b.lease(10, T0, budget=4) == []  # done + leased reached the budget
    await a.complete_many([(x, Outcome(error="robots_disallowed")) for x in first[:2]], T0)
    assert len(await b.lease(10, T0, budget=4)) == 2  # robots skips are not pages
    assert len(await b.lease(10, T0)) == 4  # no budget: the rest


# -- leases of dead and live workers --


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


async def test_a_dead_workers_leases_come_back_after_they_expire(
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
    assert (await b.counts()).leased == 3
    first = await b.lease(10, time.time())
    assert len(first) == 2  # the two never leased; the dead worker's are not expired yet
    await asyncio.sleep(1.2)
    again = await b.lease(10, time.time())
    assert sorted(x.url for x in again) == sorted(dead)
    assert all(x.attempts == 1 for x in again)
    counts = await b.counts()
    assert (counts.recovered, counts.leased, counts.queued) == (3, 5, 0)
    # at-least-once: the dead worker's completions would now be no-ops, the pages go out once more
    await b.complete_many([(x, Outcome()) for x in first + again], time.time())
    assert (await b.counts()).done == 5


async def test_heartbeats_keep_a_live_workers_leases(workers: Workers) -> None:
    a = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    b = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    await offer(a, "http://a.test/0", "http://b.test/0")
    mine = await a.lease(10, time.time())
    assert len(mine) == 2
    await asyncio.sleep(2.0)  # twice the lease timeout: a slow fetch
    assert await b.lease(10, time.time()) == []  # A renewed them: still A's
    counts = await b.counts()
    assert (counts.leased, counts.recovered) == (2, 0)
    await a.complete_many([(x, Outcome()) for x in mine], time.time())
    assert (await b.counts()).done == 2


async def test_an_outage_longer_than_the_lease_timeout_takes_no_live_lease(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # while Redis is away nobody can renew; when it is back, the live holder's heartbeat
    # renews its leases before another worker may take them as expired
    a = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    b = await workers.open(lease_timeout=1.0, heartbeat=0.2)
    await offer(a, "http://a.test/0", "http://b.test/0", "http://c.test/0")
    mine = await a.lease(2, time.time())
    redis_server.stop()
    await asyncio.sleep(1.5)  # longer than the lease timeout; both heartbeats fail meanwhile
    redis_server.start()
    got = await b.lease(10, time.time())  # B right away: only what was never leased
    assert [x.url for x in got] == ["http://c.test/0"]
    await asyncio.sleep(0.6)  # A's heartbeat has renewed by now
    assert await b.lease(10, time.time()) == []
    counts = await b.counts()
    assert (counts.leased, counts.recovered) == (3, 0)
    await a.complete_many([(x, Outcome()) for x in mine], time.time())
    assert (await b.counts()).done == 2


async def test_a_clean_close_hands_leases_back_at_once(workers: Workers) -> None:
    a = await workers.open()
    b = await workers.open()
    await offer(a, "http://a.test/0", "http://b.test/0")
    assert len(await a.lease(10, T0)) == 2
    await a.close()
    again = await b.lease(10, T0)
    assert len(again) == 2 and all(x.attempts == 1 for x in again)
    assert (await b.counts()).recovered == 2


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
    (again,) = await b.lease(1, time.time())  # it came back by expiring
    assert again.url == held.url


async def test_idle_origins_are_forgotten_after_their_delay(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    a = await workers.open(per_host=1, delay=0.4)
    await offer(a, *(f"http://h{i}.test/" for i in range(5)))
    now = time.time()
    leases = await a.lease(10, now)
    await a.complete_many([(x, Outcome()) for x in leases], now)  # within their delay
    origins = prefix_of("t") + "o:*"
    assert len(command(redis_server, "KEYS", origins)) == 5  # kept while the delay runs
    await offer(a, "http://h0.test/again")  # new work on one of them: it stays
    assert await a.lease(10, time.time()) == []  # and the delay still holds for it
    await asyncio.sleep(0.6)
    assert [k.decode() for k in command(redis_server, "KEYS", origins)] == [
        prefix_of("t") + "o:http://h0.test"
    ]
    (again,) = await a.lease(10, time.time())
    await a.complete(again, Outcome(), time.time() + 1.0)  # past its delay: forgotten at once
    assert command(redis_server, "KEYS", origins) == []


async def test_a_lease_id_handed_out_again_does_not_end_anothers_lease(
    workers: Workers,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    # a Redis crash with appendfsync everysec may lose the last INCR of the lease ids: the
    # same id then goes to another worker for another request
    a = await workers.open(per_host=1)
    b = await workers.open(per_host=1)
    await offer(a, "http://a.test/0", "http://a.test/1")
    (old,) = await a.lease(1, T0)
    await a.complete(old, Outcome(), T0)
    command(redis_server, "SET", prefix_of("t") + "ids", "0")  # the lost write
    (theirs,) = await b.lease(1, T0)
    assert theirs.id == old.id and theirs.url != old.url
    await a.complete(old, Outcome(error="timeout"), T0)  # A's stale lease: no effect
    await a.retry(old, T0, T0)
    counts = await b.counts()
    assert (counts.leased, counts.done, dict(counts.failed)) == (1, 1, {})
    assert await a.lease(1, T0) == []  # B's request still holds the origin's one slot
    await b.complete(theirs, Outcome(), T0)
    assert (await b.counts()).done == 2


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
    assert (counts.done, counts.queued, counts.leased, counts.seen) == (10, 90, 0, 100)

    # down for a while, in the middle of calls: they wait, then carry on
    redis_server.stop()

    def back() -> None:
        time.sleep(1.0)
        redis_server.start()

    thread = threading.Thread(target=back)
    thread.start()
    try:
        t = time.monotonic()
        more = await a.lease(10, T0)
        assert time.monotonic() - t >= 0.5
        assert await offer(a, "http://new.test/") == ["http://new.test/"]
    finally:
        thread.join()
    assert len(more) == 10
    await a.complete_many([(x, Outcome()) for x in more], T0)
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
            await offer(a, "http://a.test/0", "http://a.test/1")
            (lease,) = await b.lease(10, T0)  # one crawl, reached both ways
            assert await a.lease(10, T0) == []  # per_host 1 across the two
            await b.complete(lease, Outcome(), T0)
            assert len(await a.lease(10, T0)) == 1
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
    assert keys and all(k.startswith(("crawler:{one}:", "crawler:{two}:")) for k in keys)


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
    a = await workers.open(seen_bits=8)  # 256 buckets: ~20 fingerprints each below
    urls = [f"http://a.test/page/{i}?q={i * 7}" for i in range(5000)]
    await a.offer_many([cand(a, u, queue=False) for u in urls])
    import redis  # noqa: PLC0415

    client = redis.Redis.from_url(redis_server.url)
    try:
        buckets = list(client.scan_iter(match=prefix_of("t") + "s:*", count=1000))
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
    await a.save_settings({"seeds": ["http://a.test/"], "max_depth": 2})
    await offer(a, *(f"http://h{i % 3}.test/{i}" for i in range(12)))
    leases = await b.lease(5, time.time())
    await b.complete_many(
        [(leases[0], Outcome(error="timeout"))] + [(x, Outcome()) for x in leases[1:4]],
        time.time(),
    )
    await a.add_counters({"links_found": 7})
    before = command(redis_server, "DBSIZE")
    status = RedisState.read_status(url, "st")
    assert command(redis_server, "DBSIZE") == before  # read only
    assert isinstance(status, RedisStatus)
    c = status.counts
    assert (c.queued, c.leased, c.done, c.seen, c.origins) == (7, 1, 4, 12, 3)
    assert dict(c.failed) == {"timeout": 1}
    assert (status.hosts, status.workers, status.name) == (3, 2, "st")
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
    options: dict[str, Any] = {"state": redis_server.url, "name": "site", "concurrency": 4}
    first = asyncio.ensure_future(crawl(seed, **options))
    await asyncio.sleep(0.2)
    joined = asyncio.ensure_future(crawl((), **options))
    a, b = await asyncio.wait_for(asyncio.gather(first, joined), 60)
    pages_a, pages_b = [p.url for p in a.pages], [p.url for p in b.pages]
    assert pages_a and pages_b  # both worked
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
    await asyncio.sleep(1.5)  # everysec: the AOF on disk holds all of it
    aof = redis_server.directory / "appendonlydir"
    snapshot = redis_server.directory.parent / (redis_server.directory.name + "-snapshot")
    shutil.copytree(aof, snapshot)
    await offer(a, "http://b.test/lost")
    (lost_lease,) = await a.lease(1, time.time())  # its id will be handed out again
    assert a.seen(a.fingerprint("http://b.test/lost"))
    epoch = a.epoch
    redis_server.kill()
    shutil.rmtree(aof)
    shutil.copytree(snapshot, aof)
    redis_server.start()
    await a.counts()  # the first call after the restart: the epoch turns
    assert a.epoch > epoch
    assert not a.seen(a.fingerprint("http://b.test/lost"))
    assert await offer(a, "http://b.test/lost") == ["http://b.test/lost"]
    (again,) = await a.lease(1, time.time())
    assert again.url == "http://b.test/lost"
    assert again.id != lost_lease.id  # same Redis id, another epoch
    await a.complete_many([(first, Outcome()), (again, Outcome())], time.time())
    counts = await a.counts()
    assert (counts.done, counts.leased, counts.queued) == (2, 0, 0)


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
