"""Where the Redis crawl state keeps its counts (key layout 5, one server): ``P c``.

A crawl's counts used to be the sums of every shard's ``S c`` and ``HLEN S p``: each
``counts()`` cost an HGETALL and an HLEN a shard the crawl ever used (external links' hosts
included: 82 shards on the 16-origin benchmark site, up to all 256 on a crawl of many hosts),
and workers read it about once a second each. On one server the scripts now count in one
hash, ``P c``, with ``q`` (requests ever queued) beside done, so that what is open is
q - done. Checked against a real redis-server: the numbers equal the shards' own (HLEN S p,
the seen set), a read costs one HGETALL whatever the shards, and a crawl of layout 4 goes on
counting in its shards.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis

from crawler.state import Candidate, Outcome
from crawler.state._redis_scripts import prefix_of
from crawler.state.redis import RedisState
from crawler.urls.policy import host_of, origin_of
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(90)


def cand(state: RedisState, url: str, *, queue: bool = True) -> Candidate:
    return Candidate(url, state.fingerprint(url), origin_of(url), host_of(url), 0, None, 0, queue)


@pytest.fixture
def client(redis_server: RedisServer) -> Any:  # noqa: F811
    c = redis.Redis.from_url(redis_server.url)
    yield c
    c.close()


@pytest.fixture
async def opened(redis_server: RedisServer) -> AsyncIterator[list[RedisState]]:  # noqa: F811
    states: list[RedisState] = []
    yield states
    for s in states:
        await s.close()


async def open_worker(server: RedisServer, states: list[RedisState], **kw: Any) -> RedisState:
    state = RedisState(server.url, name="t", lease_timeout=30.0, **kw)
    await state.open(per_host=100, delay=0.0, max_pages_per_host=0)
    states.append(state)
    return state


def truth(c: Any) -> tuple[int, int]:
    """(open requests, seen fingerprints) as the shards themselves hold them."""
    pipe = c.pipeline(transaction=False)
    opened = sum(c.hlen(k) for k in c.scan_iter(match="crawler:{t:s*}:p"))
    for k in c.scan_iter(match="crawler:{t:s*}:s:*"):
        pipe.scard(k)
    return opened, sum(pipe.execute())


def commandstats(c: Any) -> dict[str, int]:
    return {k[len("cmdstat_") :]: v["calls"] for k, v in c.info("commandstats").items()}


async def crawl_some(state: RedisState, hosts: int, *more: RedisState) -> tuple[int, int]:
    """Offer two pages on each of ``hosts`` hosts (and a link not queued on each); then each
    worker (``state``, ``more``) completes half its leases fine, a quarter failed, and leaves
    the rest open: (the leases completed, those left open)."""
    cands = []
    for i in range(hosts):
        cands += [cand(state, f"http://h{i}.test/a"), cand(state, f"http://h{i}.test/b")]
        cands.append(cand(state, f"http://x{i}.test/", queue=False))
    assert len(await state.offer_many(cands)) == len(cands)
    out = completed = 0
    for w in (state, *more):
        leases = await w.lease(hosts * 2, time.time())
        half, quarter = len(leases) // 2, len(leases) // 4
        done = [(x, Outcome()) for x in leases[:half]]
        failed = leases[half : half + quarter]
        done += [(x, Outcome(error="http_status", status=404)) for x in failed]
        await w.complete_many(done, time.time())
        await w.counts()  # (completions are written before a count)
        out += len(leases) - len(done)
        completed += len(done)
    return completed, out


async def test_the_counts_are_one_hash_whatever_the_shards_used(
    redis_server: RedisServer,  # noqa: F811
    opened: list[RedisState],
    client: Any,
) -> None:
    a = await open_worker(redis_server, opened)
    completed, leased = await crawl_some(a, 120)
    assert (completed, leased) == (180, 60)
    p = prefix_of("t")
    used = client.scard(p + "used")
    assert used > 100  # (240 hosts over 256 shards)
    client.config_resetstat()
    counts = await a.counts()
    calls = commandstats(client)
    # one HGETALL (P c), the tally's own HLEN (P own) and P p's; not two a shard
    assert calls.get("hgetall", 0) == 1, calls
    assert calls.get("hlen", 0) <= 2, calls
    opened_now, seen = truth(client)
    assert (counts.queued, counts.leased) == (opened_now - leased, leased)
    assert (counts.done, counts.seen) == (180, seen)
    assert counts.failed == {"http_status": 60}
    assert client.exists(p + "c") and not list(client.scan_iter(match="crawler:{t:s*}:c"))


async def test_two_workers_a_give_back_and_status_agree_with_the_shards(
    redis_server: RedisServer,  # noqa: F811
    opened: list[RedisState],
    client: Any,
) -> None:
    a = await open_worker(redis_server, opened)
    b = await open_worker(redis_server, opened)
    for _ in range(4):
        await a._membership()
        await b._membership()
    completed, held = await crawl_some(a, 40, b)
    assert await b.offer_many([cand(b, f"http://h{i}.test/a") for i in range(40)]) == []
    await b.offer_many([cand(b, f"http://m{i}.test/") for i in range(50)])
    await b._membership()
    leases = await b.lease(100, time.time())
    fine = leases[:10]  # (b's share of the 50 new hosts' shards: about half of them)
    assert fine
    await b.complete_many([(x, Outcome()) for x in fine], time.time())
    await b.counts()
    before = await a.counts()
    await b.close()  # gives back its open leases: counted recovered
    opened.remove(b)
    counts = await a.counts()
    opened_now, seen = truth(client)
    assert (counts.queued + counts.leased, counts.seen) == (opened_now, seen)
    assert counts.done == completed + len(fine) and counts.recovered > before.recovered
    assert 0 < held and completed >= 58
    status = RedisState.read_status(redis_server.url, "t")
    assert (status.counts.done, status.counts.seen) == (counts.done, counts.seen)
    assert status.counts.queued + status.counts.leased == opened_now


async def test_a_crawl_of_layout_4_goes_on_counting_in_its_shards(
    redis_server: RedisServer,  # noqa: F811
    opened: list[RedisState],
    client: Any,
) -> None:
    p = prefix_of("t")
    first = await open_worker(redis_server, opened)
    await first.close()
    opened.remove(first)
    client.set(p + "v", "4")  # as a crawler of layout 4 left it: no ``counts`` in its cfg
    client.hdel(p + "cfg", "counts")
    a = await open_worker(redis_server, opened)
    assert await crawl_some(a, 20) == (30, 10)
    counts = await a.counts()
    opened_now, seen = truth(client)
    assert (counts.queued + counts.leased, counts.done, counts.seen) == (opened_now, 30, seen)
    assert not client.exists(p + "c")  # (its counts are in its shards, where layout 4 reads)
    assert client.get(p + "v") == b"4"
