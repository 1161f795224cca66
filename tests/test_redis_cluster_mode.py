"""The crawl state on a real Redis Cluster (issue 23): three masters on 127.0.0.1
(tests/rediscluster.py), real ``crawler crawl`` worker processes, a real multi-origin site.

The crawler finds the cluster by itself (``INFO cluster`` at open) from one node's URL. What
is checked: a crawl of a multi-origin site by three workers is the site exactly (the checks of
tests/test_redis_cluster.py's ``check_cluster_crawl``: nothing lost, no duplicate beyond a
killed worker's in-flight requests, politeness across the workers, ``crawler status`` agrees)
and its keys really spread over the three masters; a worker SIGKILLed mid-crawl loses
nothing; scripts a node lost (SCRIPT FLUSH, as on a new master after a failover) are loaded
again; a master down and back is an outage retried, not an error; a crawl of key layout 2 is
refused with what to do; a worker opening while a master is down waits for it. The
crawls and the outages are behind the ``cluster`` marker (.ci/run
runs them); the quick ones run by default.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import redis.exceptions as rexc

from crawler.state import Candidate, Outcome, StateError
from crawler.state.redis import RedisState
from crawler.urls.policy import host_of, origin_of
from tests.rediscluster import RedisCluster, redis_cluster  # noqa: F401  (the fixture)
from tests.test_redis_cluster import (
    Cluster,
    SiteServer,
    check_cluster_crawl,
    requests_of,
    site_factory,  # noqa: F401  (the fixture)
    summary,
    wait_requests,
    wait_until,
)

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent


def _cluster_client(cluster: RedisCluster) -> object:
    from redis.cluster import RedisCluster as Client  # noqa: PLC0415

    return Client.from_url(cluster.url)


def crawl_keys_per_node(cluster: RedisCluster, name: str = "default") -> list[int]:
    """Keys of crawl ``name``'s shards on each master (KEYS on each node)."""
    out = []
    for node in cluster.nodes:
        listed = cluster.cli_call(node, "--raw", "KEYS", f"crawler:{{{name}:s*")
        out.append(len([line for line in listed.splitlines() if line.strip()]))
    return out


@pytest.fixture
def crawls(redis_cluster: RedisCluster) -> Iterator[list[Cluster]]:  # noqa: F811
    made: list[Cluster] = []
    yield made
    for c in made:
        c.stop_all()


def _three_workers(
    redis_cluster: RedisCluster,  # noqa: F811
    site: SiteServer,
    tmp_path: Path,
    crawls: list[Cluster],
) -> Cluster:
    crawl = Cluster(redis_cluster, site, tmp_path)  # type: ignore[arg-type]  (a .url: all it uses)
    crawls.append(crawl)
    crawl.start(seed=True)
    wait_requests(site, 3, crawl.workers)  # the crawl exists: the others join it
    crawl.start(seed=False)
    crawl.start(seed=False)
    return crawl


# ------------------------------------------------------------------ crawls (marker: cluster)


@pytest.mark.cluster
def test_three_workers_crawl_a_site_spread_over_three_masters(
    crawls: list[Cluster],
    redis_cluster: RedisCluster,  # noqa: F811
    site_factory: Callable[..., SiteServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    # ten hosts (127.0.0.1-10): ten shards, whose slots (CRC16 of each shard's hash tag) fall
    # on all three masters (redis-cli's even split of the slots); six would leave one empty
    site = site_factory(pages=200, origins=10, seed=11, latency=0.03)
    crawl = _three_workers(redis_cluster, site, tmp_path, crawls)
    for w in crawl.workers:
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    assert all("cluster" not in w.stderr().lower() for w in crawl.workers), [
        w.stderr() for w in crawl.workers
    ]
    starts = check_cluster_crawl(crawl)  # the site exactly, status agrees (c)
    print(summary(crawl, starts))
    spread = crawl_keys_per_node(redis_cluster)
    assert all(n > 0 for n in spread), spread  # the shards' keys on every master
    assert all(n > 0 for n in redis_cluster.keys_per_node())


@pytest.mark.cluster
def test_a_worker_killed_on_the_cluster_loses_nothing(
    crawls: list[Cluster],
    redis_cluster: RedisCluster,  # noqa: F811
    site_factory: Callable[..., SiteServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    site = site_factory(pages=240, origins=6, seed=12, latency=0.05)
    crawl = _three_workers(redis_cluster, site, tmp_path, crawls)
    joiners = crawl.workers[1:]
    wait_requests(site, 40, crawl.workers)
    chosen: list = []

    def working() -> bool:  # a joiner with work done and requests in flight to lose
        counts = requests_of(site, joiners)
        chosen[:] = [w for w in joiners if counts[w.label][0] >= 3 and counts[w.label][1]]
        return bool(chosen)

    wait_until(working, 30, "a joining worker with requests in flight")
    victim = chosen[0]
    victim.kill()
    for w in crawl.workers:
        if w is not victim:
            assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    starts = check_cluster_crawl(crawl)  # duplicates: the victim's in flight or unwritten
    print(summary(crawl, starts))
    gets = Counter(w for s in starts.values() for _, w in s)
    assert gets[victim.label] > 0


# ------------------------------------------------------------------ the state on a cluster


def cand(state: RedisState, url: str) -> Candidate:
    return Candidate(url, state.fingerprint(url), origin_of(url), host_of(url), 0, None, 0, True)


@pytest.fixture
async def opened(redis_cluster: RedisCluster) -> AsyncIterator[list[RedisState]]:  # noqa: F811
    states: list[RedisState] = []
    yield states
    for s in states:
        await s.close()


async def _open(url: str, states: list[RedisState], **kw: object) -> RedisState:
    state = RedisState(url, name="t", **kw)  # type: ignore[arg-type]
    await state.open(per_host=4, delay=0.0, max_pages_per_host=0)
    states.append(state)
    return state


async def test_the_state_finds_the_cluster_and_spreads_shards_over_its_masters(
    redis_cluster: RedisCluster,  # noqa: F811
    opened: list[RedisState],
) -> None:
    a = await _open(redis_cluster.url, opened)
    assert a.cluster
    urls = [f"http://h{i}.test/p{j}" for i in range(30) for j in range(4)]
    assert len(await a.offer_many([cand(a, u) for u in urls])) == 120
    assert await a.offer_many([cand(a, u) for u in urls]) == []  # dedup, exact
    leases = await a.lease(1000, time.time())
    assert len(leases) == 120
    await a.complete_many([(x, Outcome("http_404")) for x in leases[:50]], time.time())
    await a.retry(leases[60], time.time(), time.time())
    counts = await a.counts()
    assert (counts.queued, counts.leased, counts.done, counts.seen) == (1, 69, 50, 120)
    assert counts.failed == {"http_404": 50}
    assert all(n > 0 for n in crawl_keys_per_node(redis_cluster, "t"))
    status = RedisState.read_status(redis_cluster.url, "t")
    assert (status.counts.done, status.counts.seen, status.workers) == (50, 120, 1)


async def test_scripts_a_node_lost_are_loaded_again(
    redis_cluster: RedisCluster,  # noqa: F811
    opened: list[RedisState],
) -> None:
    # SCRIPT FLUSH on every master: what a master promoted in a failover, or a new one, has
    a = await _open(redis_cluster.url, opened)
    await a.offer_many([cand(a, f"http://h{i}.test/") for i in range(20)])
    for node in redis_cluster.nodes:
        assert "OK" in redis_cluster.cli_call(node, "SCRIPT", "FLUSH")
    more = [f"http://h{i}.test/more" for i in range(20)]
    assert len(await a.offer_many([cand(a, u) for u in more])) == 20
    leases = await a.lease(100, time.time())
    assert len(leases) == 40
    for node in redis_cluster.nodes:
        redis_cluster.cli_call(node, "SCRIPT", "FLUSH")
    await a.complete_many([(x, Outcome()) for x in leases], time.time())
    counts = await a.counts()
    assert (counts.done, counts.queued, counts.leased) == (40, 0, 0)


@pytest.mark.cluster
async def test_a_master_down_and_back_is_an_outage_retried(
    redis_cluster: RedisCluster,  # noqa: F811
    opened: list[RedisState],
    caplog: pytest.LogCaptureFixture,
) -> None:
    a = await _open(redis_cluster.url, opened, lease_timeout=30.0)
    urls = [f"http://h{i}.test/" for i in range(30)]
    await a.offer_many([cand(a, u) for u in urls])
    down = redis_cluster.nodes[1]
    down.stop()  # a master with no replica: its slots are down until it is back
    task = asyncio.ensure_future(a.offer_many([cand(a, f"http://h{i}.test/x") for i in range(30)]))
    await asyncio.sleep(3.0)
    assert not task.done()  # retried, not failed
    down.start()
    accepted = await asyncio.wait_for(task, 60)
    assert len(accepted) <= 30
    assert "Redis unreachable" in caplog.text and "Redis reconnected" in caplog.text
    leases = await a.lease(1000, time.time())
    await a.complete_many([(x, Outcome()) for x in leases], time.time())
    await a._membership()
    for _ in range(3):  # the epoch turned: the shards are read again at the heartbeat
        leases = await a.lease(1000, time.time())
        await a.complete_many([(x, Outcome()) for x in leases], time.time())
        await a._membership()
    counts = await a.counts()
    assert (counts.queued, counts.leased, counts.done) == (0, 0, 60), counts


@pytest.mark.cluster
async def test_a_worker_opening_while_a_master_is_down_waits_for_it(
    redis_cluster: RedisCluster,  # noqa: F811
    opened: list[RedisState],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # As a worker started during a failover: the entry node answers, a master does not.
    # Which step of ``open`` meets the dead node depends on redis-py's own retries: a script
    # load sent to every master (a connection refused, which ``open`` used to turn into exit
    # 2 at once: seen in test_redis_cluster_failover.py under load) or a later call ("the
    # cluster is down", retried as an outage). Either way the worker waits for it.
    down = redis_cluster.nodes[1]
    down.kill()
    task = asyncio.ensure_future(_open(redis_cluster.url, opened, lease_timeout=30.0))
    await asyncio.sleep(2.0)
    assert not task.done()  # waiting, not failed
    down.start()
    a = await asyncio.wait_for(task, 60)
    assert "failed while opening" in caplog.text or "Redis unreachable" in caplog.text
    await a.offer_many([cand(a, f"http://h{i}.test/") for i in range(30)])
    leases = await a.lease(1000, time.time())
    assert len(leases) == 30


async def test_open_retries_a_cluster_node_refusing_connections_and_only_on_a_cluster() -> None:
    state = RedisState("redis://127.0.0.1:9/0", name="t")
    calls: list[float] = []

    async def steps() -> str:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise rexc.ConnectionError("Error 111 connecting to 127.0.0.1:9. Connection refused.")
        return "opened"

    state.cluster = True  # (a node of a cluster failing over: waited out, with backoff)
    assert await state._opening(steps) == "opened"
    assert len(calls) == 3 and calls[2] - calls[1] >= calls[1] - calls[0] > 0.05
    calls.clear()
    state.cluster = False  # (one server unreachable at open: an error at once)
    with pytest.raises(rexc.ConnectionError):
        await state._opening(steps)
    assert len(calls) == 1


def test_a_layout_2_crawl_on_the_cluster_is_refused(
    redis_cluster: RedisCluster,  # noqa: F811
    tmp_path: Path,
) -> None:
    client = _cluster_client(redis_cluster)
    client.set("crawler:{old}:v", "2")  # type: ignore[attr-defined]
    for args in (["crawl", "http://127.0.0.1:9/"], ["status"]):
        done = subprocess.run(
            [sys.executable, "-m", "crawler", *args, "--state", redis_cluster.url]
            + ["--name", "old"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
            check=False,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 2, (args, done.returncode, done.stderr)
        assert "version '2'" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert "--name" in done.stderr  # what to do
    assert client.get("crawler:{old}:v") == b"2"  # type: ignore[attr-defined]
    assert client.dbsize() == 1  # type: ignore[attr-defined]  (nothing written beside it)


async def test_a_layout_2_crawl_is_refused_naming_what_to_do(
    redis_cluster: RedisCluster,  # noqa: F811
) -> None:
    client = _cluster_client(redis_cluster)
    client.set("crawler:{old}:v", "2")  # type: ignore[attr-defined]
    state = RedisState(redis_cluster.url, name="old")
    with pytest.raises(StateError, match=r"version '2'.*reads version '5'.*--name"):
        await state.open(per_host=1, delay=0.0, max_pages_per_host=0)


@pytest.mark.cluster
async def test_a_master_restarted_is_seen_and_turns_the_epoch(
    redis_cluster: RedisCluster,  # noqa: F811
    opened: list[RedisState],
    caplog: pytest.LogCaptureFixture,
) -> None:
    # each node's run_id is noted at every new connection: a master restarted at its address
    # may have lost its last writes, so the worker starts a new epoch (offers again, reads
    # its shards again), as with one Redis server
    a = await _open(redis_cluster.url, opened, lease_timeout=30.0)
    await a.offer_many([cand(a, f"http://h{i}.test/") for i in range(30)])
    assert len(a._run_id) == 3  # one a master it talked to
    epoch = a.epoch
    restarted = redis_cluster.nodes[2]
    restarted.restart()
    wait_until(lambda: redis_cluster.ok(restarted), 30, "the cluster to be ok again")
    more = [cand(a, f"http://h{i}.test/x") for i in range(30)]
    # (those the healthy masters took before the pipeline failed are answered "seen" when it
    # is sent again: they are in Redis all the same, counted below)
    await asyncio.wait_for(a.offer_many(more), 60)
    assert a.epoch > epoch
    assert f"a new run_id at 127.0.0.1:{restarted.port}" in caplog.text
    counts = await a.counts()
    assert (counts.seen, counts.queued + counts.leased) == (60, 60)  # nothing lost
