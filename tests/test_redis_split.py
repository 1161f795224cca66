"""A host split into parts (``crawler.state._redis_split``), on a real redis-server: the
shares of ``per_host``, ``delay`` and ``max_pages_per_host``, the layout versions, and the
browser's slots (``borrow_slot``) from the parts a worker owns."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from crawler.state import Candidate, Outcome
from crawler.state._redis_scripts import prefix_of
from crawler.state._redis_split import auto_split, budget_parts, share
from crawler.state.redis import RedisState
from crawler.urls.policy import host_of, origin_of
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(90)

SITE = "http://one.test"


def cand(state: RedisState, url: str) -> Candidate:
    return Candidate(url, state.fingerprint(url), origin_of(url), host_of(url), 0, None, 0, True)


class States:
    def __init__(self, server: RedisServer) -> None:
        self.server = server
        self.opened: list[RedisState] = []

    async def open(
        self, name: str = "t", *, per_host: int, delay: float = 0.0, **kw: Any
    ) -> RedisState:
        budget = kw.pop("max_pages_per_host", 0)
        state = RedisState(self.server.url, name=name, **kw)
        await state.open(per_host=per_host, delay=delay, max_pages_per_host=budget)
        self.opened.append(state)
        return state


@pytest.fixture
async def states(redis_server: RedisServer) -> AsyncIterator[States]:  # noqa: F811
    s = States(redis_server)
    try:
        yield s
    finally:
        for state in s.opened:
            await state.close()


def test_shares_add_up_and_auto_split() -> None:
    assert [share(6, 4, j) for j in range(4)] == [2, 2, 1, 1]
    assert sum(share(1000, 7, j) for j in range(7)) == 1000
    assert budget_parts(4, 10) == ["1:3", "1:3", "1:2", "1:2"]
    assert budget_parts(4, 2) == ["1:1", "1:1", "0", "0"]  # a part with no share queues none
    assert budget_parts(1, 10) == [] and budget_parts(4, 0) == []
    assert auto_split([f"{SITE}/", f"{SITE}/a"], 8, 0) == 8
    assert auto_split([f"{SITE}/"], 64, 0) == 16
    assert auto_split([f"{SITE}/", "http://two.test/"], 8, 0) == 1
    assert auto_split([], 8, 0) == 0  # no seeds: the crawl's own
    assert auto_split([], 8, 20) == 8  # never above per_host
    # a per-host page budget divided by hash could stop a part short: not split unless asked
    assert auto_split([f"{SITE}/"], 8, 0, budget=100) == 1
    assert auto_split([f"{SITE}/"], 8, 4, budget=100) == 4


async def test_per_host_is_shared_among_the_parts(states: States) -> None:
    state = await states.open(per_host=6, host_split=4)
    assert state.book.split == 4
    await state.offer_many([cand(state, f"{SITE}/{i}") for i in range(200)])
    shards = {state.book.shard(SITE, state.fingerprint(f"{SITE}/{i}")) for i in range(200)}
    assert len(shards) == 4  # four shards, one a part
    now = time.time()
    got = await state.lease(100, now)
    assert len(got) == 6  # 2 + 2 + 1 + 1: the host's cap, not 6 a part
    assert await state.lease(100, now) == []


async def test_delay_is_the_hosts_rate_over_its_parts(states: States) -> None:
    state = await states.open(per_host=4, delay=1.0, host_split=4)
    await state.offer_many([cand(state, f"{SITE}/{i}") for i in range(200)])
    now = time.time()
    times = []
    for step in range(76):  # 7.5 seconds in 0.1 s steps
        t = now + step * 0.1
        for lease in await state.lease(100, t):
            times.append(t)
            await state.complete(lease, Outcome(), t)
    # one request a second, the host's delay, though each part waits 4 s
    assert len(times) == 8, times
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert min(gaps) >= 1.0 - 1e-6, gaps


async def test_max_pages_per_host_is_shared_exactly(states: States) -> None:
    state = await states.open(per_host=4, max_pages_per_host=10, host_split=4)
    accepted = await state.offer_many([cand(state, f"{SITE}/{i}") for i in range(300)])
    assert len(accepted) == 300  # all new (seen), 10 of them queued
    assert (await state.counts()).queued == 10


async def test_a_layout_3_crawl_is_continued_unsplit(
    states: States,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    import redis  # noqa: PLC0415

    first = await states.open("old", per_host=8, seeds=[f"{SITE}/"])
    assert first.book.split == 8  # a new crawl of one host: split
    await first.close()
    client = redis.Redis.from_url(redis_server.url)
    p = prefix_of("old")
    client.set(p + "v", "3")  # as a crawler of layout 3 left it
    client.hdel(p + "cfg", "split")
    again = await states.open("old", per_host=8, seeds=[f"{SITE}/"])
    assert again.book.split == 1
    assert client.get(p + "v") == b"3"  # still readable by the crawler that made it
    client.close()


async def test_the_browser_borrows_from_the_parts_this_worker_owns(states: States) -> None:
    state = await states.open(per_host=3, host_split=3)
    await state.offer_many([cand(state, f"{SITE}/{i}") for i in range(30)])
    now = time.time()
    assert [state.borrow_slot(SITE, now) for _ in range(4)] == [0.0, 0.0, 0.0, None]
    assert await state.lease(10, now) == []  # the host's three slots are the browser's
    state.return_slot(SITE, now)
    assert len(await state.lease(10, now)) == 1


async def test_an_origin_another_worker_owns_is_refused(states: States) -> None:
    a = await states.open("two", per_host=2, host_split=1)
    b = await states.open("two", per_host=2, host_split=1)
    for _ in range(50):
        await a._membership()
        await b._membership()
        if a.book.held and b.book.held:
            break
    theirs = next(
        f"http://h{i}.test"
        for i in range(10_000)
        if b.book.active(b.book.shard(f"http://h{i}.test")) is not None
        and a.book.active(a.book.shard(f"http://h{i}.test")) is None
    )
    now = time.time()
    assert a.borrow_slot(theirs, now) is False
    assert b.borrow_slot(theirs, now) == 0.0
