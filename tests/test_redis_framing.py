"""The hot script calls' records framed in one argument, and which leases are checked again.

Against a real redis-server:

* ``put`` and ``complete`` take a call's records in ONE argument, each framed
  "<length>:<key index>\\t<record>" (``calls_for(framed=True)``): redis-py encodes every
  argument in Python, so one a call instead of two a record is the cheaper packing. A record
  holds any bytes (a raw link value may hold a colon, a tab, a newline, any UTF-8): what a
  worker leases is what was offered, byte for byte. A call whose frames cannot be read is
  refused before anything is written.
* A lease of a request this process's admission offered is ``checked`` (the engine does not
  parse its URL again); one read back from Redis (a shard loaded by another worker, a request
  anyone could have written there) is not.
* A worker that loads a shard knows its open requests as seen (its local cache): a link to
  one of them found later costs no ``SADD`` (the commands a page a takeover used to add).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
import redis

from crawler.state import Candidate, Outcome
from crawler.state._redis_cluster import calls_for
from crawler.state._redis_scripts import SCRIPTS, prefix_of, shard_prefix
from crawler.state.redis import RedisState
from crawler.urls.policy import host_of, origin_of
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

pytestmark = pytest.mark.timeout(90)

ODD = [
    "http://127.0.0.1:9/a:b?x=1:2",
    "http://127.0.0.1:9/tab\there",
    "http://127.0.0.1:9/line\nbreak:12:\t3",
    "http://127.0.0.1:9/\u00e9t\u00e9/\U0001f600",
    "http://127.0.0.1:9/" + "long:" * 400,
]


def cand(state: RedisState, url: str, referrer: str | None = None) -> Candidate:
    return Candidate(url, state.fingerprint(url), origin_of(url), host_of(url), 1, referrer)


@pytest.fixture
async def opened(redis_server: RedisServer) -> AsyncIterator[list[RedisState]]:  # noqa: F811
    states: list[RedisState] = []
    yield states
    for s in states:
        await s.close()


async def open_worker(server: RedisServer, states: list[RedisState], name: str) -> RedisState:
    state = RedisState(server.url, name=name, lease_timeout=30.0)
    await state.open(per_host=100, delay=0.0, max_pages_per_host=0)
    states.append(state)
    return state


def test_frames_carry_each_record_and_its_key_index() -> None:
    records = [(3, (b"a:b\tc",)), (7, ("\u00e9".encode(),)), (3, (b"",))]
    calls, positions = calls_for(
        "put",
        ["9", "1"],
        records,
        [f"S{k}:" for k in range(8)],
        cluster=False,
        home="P:",
        framed=True,
    )
    assert positions == [[0, 1, 2]]
    ((name, keys, args),) = calls
    assert name == "put" and keys == ["P:", "S3:", "S7:"]
    assert args == ["9", "1", b"7:2\ta:b\tc" + b"4:3\t\xc3\xa9" + b"2:2\t"]
    calls, positions = calls_for(
        "put", ["9"], records, [f"S{k}:" for k in range(8)], cluster=True, framed=True
    )
    assert positions == [[0, 2], [1]]
    assert calls == [
        ("put", ["S3:"], ["9", b"7:1\ta:b\tc2:1\t"]),
        ("put", ["S7:"], ["9", b"4:1\t\xc3\xa9"]),
    ]


async def test_any_bytes_in_a_record_come_back_as_offered(
    redis_server: RedisServer,  # noqa: F811
    opened: list[RedisState],
) -> None:
    state = await open_worker(redis_server, opened, "frames")
    offered = [
        cand(state, url, referrer=f"http://127.0.0.1:9/from:{i}\n") for i, url in enumerate(ODD)
    ]
    accepted = await state.offer_many(offered)
    assert [c.url for c in accepted] == ODD
    assert await state.offer_many(offered) == []  # all seen now: the script read each one
    leases = await state.lease(len(ODD), time.time())
    assert sorted((x.url, x.referrer) for x in leases) == sorted(
        (c.url, c.referrer) for c in offered
    )
    await state.complete_many([(x, Outcome()) for x in leases], time.time())
    await state.complete_many([], time.time())
    counts = await state.counts()
    assert counts.done == len(ODD) and counts.queued == 0 and counts.leased == 0


async def test_a_call_whose_frames_cannot_be_read_writes_nothing(
    redis_server: RedisServer,  # noqa: F811
    opened: list[RedisState],
) -> None:
    await open_worker(redis_server, opened, "bad")
    p, shard = prefix_of("bad"), shard_prefix("bad", 1)
    client = redis.Redis.from_url(redis_server.url)
    try:
        before = client.dbsize()
        good = b"0\t1\t5\t1\thost\t0\t\t1\t127.0.0.1\t0\t\thttp://127.0.0.1/"
        for blob in (
            b"99:2\t" + good,  # longer than what is left
            b"x:2\t",  # no length
            b"%d:2\t%b" % (len(good) + 2, good) + b"5",  # a tail without a colon
        ):
            with pytest.raises(redis.ResponseError, match="cannot read"):
                client.eval(SCRIPTS["put"], 2, p, shard, "0", "1", blob)
        with pytest.raises(redis.ResponseError, match="cannot read"):
            client.eval(SCRIPTS["complete"], 2, p, shard, "1", b"9:2\t1\t0\t1\t")
        assert client.dbsize() == before
        assert client.keys(shard + "*") == []
    finally:
        client.close()


async def test_only_requests_read_back_from_redis_are_checked_again(
    redis_server: RedisServer,  # noqa: F811
    opened: list[RedisState],
) -> None:
    first = await open_worker(redis_server, opened, "trusted")
    here = [f"http://127.0.0.1:9/p{i}" for i in range(6)]
    await first.offer_many([cand(first, u) for u in here])
    leases = await first.lease(3, time.time())
    assert len(leases) == 3 and all(x.checked for x in leases)  # offered by this process
    await first.retry(leases[0], 0.0, time.time())  # back in line here: still its own
    again = await first.lease(10, time.time())
    assert len(again) == 4 and all(x.checked for x in again)
    await first.close()  # what it had out is written back
    opened.remove(first)
    second = await open_worker(redis_server, opened, "trusted")
    read_back = await second.lease(10, time.time())
    assert sorted(x.url for x in read_back) == here
    assert not any(x.checked for x in read_back)  # loaded from Redis: anyone could write there
    await second.retry(read_back[0], 0.0, time.time())
    (retried,) = await second.lease(1, time.time())
    assert retried.url == read_back[0].url and not retried.checked


async def test_a_loaded_shards_open_requests_are_seen_without_asking_redis(
    redis_server: RedisServer,  # noqa: F811
    opened: list[RedisState],
) -> None:
    first = await open_worker(redis_server, opened, "loaded")
    urls = [f"http://127.0.0.1:9/q{i}" for i in range(20)]
    await first.offer_many([cand(first, u) for u in urls])
    await first.close()
    opened.remove(first)
    second = await open_worker(redis_server, opened, "loaded")
    assert len(await second.lease(100, time.time())) == len(urls)  # its shard loaded
    assert all(second.seen(second.fingerprint(u)) for u in urls)
    assert not second.seen(second.fingerprint("http://127.0.0.1:9/never"))
