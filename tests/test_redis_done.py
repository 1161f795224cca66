"""The Redis state's completions written in batches (crawler.state._redis_done).

A worker ends a completion in its own bookkeeping at once and writes the completions of a
short window in one script call: N completions of a window cost O(shards) Redis commands,
not O(N); a worker killed between a completion and its write loses nothing (the page is
fetched again by the shard's next owner, counted once). Against a real redis-server
(tests/redisserver.py), the killed worker a real process.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from crawler.state import Candidate, Outcome
from crawler.state._redis_done import DONE_GAP
from crawler.state.redis import RedisState
from crawler.urls.policy import host_of, origin_of
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(90)

ROOT = str(Path(__file__).resolve().parent.parent)


def cand(state: RedisState, url: str) -> Candidate:
    return Candidate(url, state.fingerprint(url), origin_of(url), host_of(url), 0)


def commandstats(server: RedisServer) -> dict[str, int]:
    """Calls of each command since the last ``CONFIG RESETSTAT`` (Redis's own counting)."""
    text = server.command("INFO", "commandstats").decode()
    calls: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("cmdstat_"):
            name, _, fields = line[len("cmdstat_") :].partition(":")
            calls[name] = int(fields.split(",")[0].split("=")[1])
    return calls


async def opened(server: RedisServer, **kw: Any) -> RedisState:
    state = RedisState(server.url, name="t", **kw)
    await state.open(per_host=100, delay=0.0, max_pages_per_host=0)
    return state


async def test_completions_of_a_window_cost_a_call_not_one_each(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    state = await opened(redis_server)
    try:
        urls = [f"http://h{i % 4}.test/{i}" for i in range(40)]
        await state.offer_many([cand(state, u) for u in urls])
        leases = await state.lease(40, time.time())
        assert len(leases) == 40
        shards = {state.book.shard(x.origin) for x in leases}
        redis_server.command("CONFIG", "RESETSTAT")
        # half of them one at a time, as the engine's small batches come: below the bound
        # (the leases out), so they wait for the window and go together
        for lease in leases[:20]:
            await state.complete_many([(lease, Outcome())], time.time())
        await asyncio.sleep(DONE_GAP * 8)
        first = commandstats(redis_server)
        # one HDEL a shard, one HINCRBY done and one pages/s bucket a call: not 1, 2 a page
        assert 1 <= first.get("hdel", 0) <= len(shards)
        assert 1 <= first.get("hincrby", 0) <= 2
        counts = await state.counts()  # (written already: nothing left to write first)
        assert (counts.done, counts.queued, counts.leased) == (20, 0, 20)
        # ten more: the counts read at once see them (written first: the crawl's end and
        # the page budget read these counts)
        for lease in leases[20:30]:
            await state.complete_many([(lease, Outcome())], time.time())
        counts = await state.counts()
        assert (counts.done, counts.queued, counts.leased) == (30, 0, 10)
        calls = commandstats(redis_server)
        assert calls.get("hdel", 0) <= 2 * len(shards)
        assert calls.get("hincrby", 0) <= 4
        # the rest, a failed one last: a close at once writes them (not lost at the window)
        for lease in leases[30:39]:
            await state.complete_many([(lease, Outcome())], time.time())
        await state.complete_many([(leases[39], Outcome(error="timeout"))], time.time())
    finally:
        await state.close()
    status = RedisState.read_status(redis_server.url, "t").counts
    assert (status.done, status.failed, status.queued, status.leased) == (40, {"timeout": 1}, 0, 0)


async def test_a_worker_killed_before_its_completions_are_written_loses_nothing(
    redis_server: RedisServer,  # noqa: F811
) -> None:
    urls = [f"http://h{i}.test/" for i in range(5)]
    code = (
        "import asyncio, json, os, signal, sys, time\n"
        "from crawler.state import Candidate, Outcome\n"
        "from crawler.state.redis import RedisState\n"
        "from crawler.urls.policy import host_of, origin_of\n"
        f"state = RedisState({redis_server.url!r}, name='t', lease_timeout=1.0)\n"
        "async def main():\n"
        "    await state.open(per_host=1, delay=0.0, max_pages_per_host=0)\n"
        "    cands = [Candidate(u, state.fingerprint(u), origin_of(u), host_of(u), 0)\n"
        f"             for u in {urls!r}]\n"
        "    await state.offer_many(cands)\n"
        "    leases = await state.lease(5, time.time())\n"
        "    for lease in leases[:3]:  # completed here, not yet written\n"
        "        await state.complete_many([(lease, Outcome())], time.time())\n"
        "    print(json.dumps([x.url for x in leases[:3]]), flush=True)\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "asyncio.run(main())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert proc.returncode == -9, proc.stderr
    completed = json.loads(proc.stdout)
    assert len(completed) == 3
    b = await opened(redis_server, lease_timeout=1.0)
    try:
        await asyncio.sleep(1.2)
        await b._membership()  # the dead worker's claims lapsed: B takes its shards
        got = await b.lease(10, time.time())
        # every page again, the three it had completed included: nothing lost
        assert sorted(x.url for x in got) == sorted(urls)
        assert set(completed) <= {x.url for x in got}
        await b.complete_many([(x, Outcome()) for x in got], time.time())
        counts = await b.counts()
        assert (counts.done, counts.queued, counts.leased) == (5, 0, 0)  # each counted once
    finally:
        await b.close()


@pytest.mark.parametrize("when", ["pending", "after"])
async def test_a_page_leased_before_redis_came_back_is_fetched_again(
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    when: str,
) -> None:
    # A page's link offered in the second a power loss takes from Redis. Its completion,
    # written to the Redis that came back, counted the page done with its link gone (pages
    # never fetched: tests/test_redis_cluster.py's rollback test). "pending": the completion
    # was still pending here when Redis went (1 run in 4 of that test, stop 32); "after": it
    # was made after another call had met the new Redis (the page CI lost in stop 34: nothing
    # pending, the completion took the new epoch). Either way it is of its lease's epoch, the
    # one before: not written, the page leased again, and its link offered again is new.
    monkeypatch.setattr("crawler.state._redis_done.DONE_GAP", 30.0)  # (written at counts)
    state = await opened(redis_server, lease_timeout=30.0)
    try:
        await state.offer_many([cand(state, "http://a.test/0"), cand(state, "http://a.test/1")])
        page, other = sorted(await state.lease(2, time.time()), key=lambda x: x.url)
        await asyncio.sleep(1.5)  # (appendfsync everysec: the AOF holds every write so far)
        aof = redis_server.directory / "appendonlydir"
        snapshot = tmp_path / "aof-before"
        shutil.copytree(aof, snapshot)
        assert await state.offer_many([cand(state, "http://a.test/link")])  # (then lost)
        if when == "pending":
            await state.complete_many([(page, Outcome())], time.time())  # (1 of 2 out)
        redis_server.kill()  # a power loss: Redis back with the AOF of before the link
        shutil.rmtree(aof)
        shutil.copytree(snapshot, aof)
        redis_server.start()
        epoch = state.epoch
        assert (await state.counts()).done == 0  # (this call meets the new Redis)
        assert state.epoch > epoch
        if when == "after":
            await state.complete_many([(page, Outcome())], time.time())
            assert (await state.counts()).done == 0
        await state._membership()  # (the epoch turned: this worker's shards read again)
        again = await state.lease(5, time.time())
        assert "http://a.test/0" in [x.url for x in again]
        # its fetch offers the link again (new to Redis), and everything ends: each page once
        await state.offer_many([cand(state, "http://a.test/link")])
        again += await state.lease(5, time.time())
        assert sorted(x.url for x in again) == ["http://a.test/0", "http://a.test/link"]
        # the other page was leased before Redis came back too: fetched again, counted once
        await state.complete_many([(x, Outcome()) for x in (*again, other)], time.time())
        assert (await state.counts()).done == 2
        await state._membership()
        last = await state.lease(5, time.time())
        assert [x.url for x in last] == ["http://a.test/1"]
        await state.complete_many([(last[0], Outcome())], time.time())
        counts = await state.counts()
        assert (counts.done, counts.queued, counts.leased) == (3, 0, 0)
    finally:
        await state.close()
