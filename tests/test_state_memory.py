"""MemoryState beyond the shared protocol suite: its bounds, its fingerprint, its leases."""

from __future__ import annotations

import pytest

from crawler.state import Candidate, Outcome, StateError, StoredRobots
from crawler.state.base import MAX_ROBOTS_CACHE_BYTES, MAX_ROBOTS_ORIGINS
from crawler.state.memory import DEFAULT_LEASE_TTL, MemoryState
from crawler.urls.policy import host_of, origin_of

T0 = 1_800_000_000.0


def cand(state: MemoryState, url: str, depth: int = 0) -> Candidate:
    return Candidate(url, state.fingerprint(url), origin_of(url), host_of(url), depth)


async def opened(**kw: int | float) -> MemoryState:
    state = MemoryState(**kw)  # type: ignore[arg-type]
    await state.open(per_host=2, delay=0.0, max_pages_per_host=0)
    return state


async def test_lease_expires_after_the_ttl() -> None:
    state = await opened()
    await state.offer_many([cand(state, "http://a.test/")])
    (lease,) = await state.lease(1, T0)
    assert lease.expires == T0 + DEFAULT_LEASE_TTL == T0 + 300
    short = await opened(lease_ttl=7.5)
    await short.offer_many([cand(short, "http://a.test/")])
    assert (await short.lease(1, T0))[0].expires == T0 + 7.5


async def test_fingerprint_is_pythons_hash() -> None:
    state = await opened()
    url = "http://a.test/x"
    assert state.fingerprint(url) == hash(url) & (2**64 - 1)
    assert state.fingerprint("") == 1  # hash("") is 0, the empty-slot mark


async def test_open_twice_is_an_error_and_close_then_open_continues() -> None:
    state = await opened()
    with pytest.raises(StateError, match="open already"):
        await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
    await state.offer_many([cand(state, "http://a.test/0")])
    leases = await state.lease(1, T0)
    assert len(leases) == 1
    await state.close()
    await state.open(per_host=1, delay=0.0, max_pages_per_host=0)
    assert (await state.counts()).recovered == 1


async def test_idle_origins_are_forgotten() -> None:
    # a wide crawl: the queues hold the origins with work, not every origin met
    state = await opened()
    for i in range(3000):
        url = f"http://o{i}.test/"
        await state.offer_many([cand(state, url)])
        (lease,) = await state.lease(10, T0 + i)
        await state.complete(lease, Outcome(status=200), T0 + i)
    assert state._queues.origins == state.origins_held == 0
    assert len(state._seen) == 3000


async def test_robots_table_is_bounded_by_count_and_bytes() -> None:
    state = await opened()
    for i in range(MAX_ROBOTS_ORIGINS + 50):
        await state.put_robots(StoredRobots(f"http://o{i}.test", T0, 200, b"x"))
    assert len(state._robots) == MAX_ROBOTS_ORIGINS
    assert await state.get_robots("http://o0.test") is None  # least recently used: out
    assert await state.get_robots(f"http://o{MAX_ROBOTS_ORIGINS + 49}.test") is not None
    big = b"d" * (MAX_ROBOTS_CACHE_BYTES // 4 + 1)
    for i in range(5):
        await state.put_robots(StoredRobots(f"http://big{i}.test", T0, 200, big))
    assert state._robots_bytes == sum(len(r.body) for r in state._robots.values())
    assert state._robots_bytes <= MAX_ROBOTS_CACHE_BYTES
    assert await state.get_robots("http://big4.test") is not None
    assert await state.get_robots("http://big0.test") is None


async def test_a_forgotten_origin_gets_its_delay_back() -> None:
    state = await opened()
    state.set_delay("http://a.test", 10.0)
    await state.offer_many([cand(state, "http://a.test/0")])
    (lease,) = await state.lease(5, T0)
    await state.complete(lease, Outcome(), T0)
    assert await state.lease(5, T0 + 11) == []  # the sweep forgets the idle origin ...
    assert not state._queues.knows("http://a.test")
    await state.offer_many([cand(state, "http://a.test/1"), cand(state, "http://a.test/2")])
    (first,) = await state.lease(5, T0 + 20)  # ... and its delay holds when it is back
    assert first.url == "http://a.test/1"
    assert await state.lease(5, T0 + 29) == []
    assert [x.url for x in await state.lease(5, T0 + 30)] == ["http://a.test/2"]


async def test_delay_table_is_bounded() -> None:
    state = await opened()
    for i in range(MAX_ROBOTS_ORIGINS + 10):
        state.set_delay(f"http://o{i}.test", 1.0)
    assert len(state._delays) == MAX_ROBOTS_ORIGINS
    state.set_delay("http://o20.test", 0.0)  # back to the default: nothing to remember
    assert "http://o20.test" not in state._delays


async def test_host_counts_only_with_a_budget() -> None:
    state = await opened()
    await state.offer_many([cand(state, f"http://o{i}.test/") for i in range(100)])
    assert state._host_count == {}
