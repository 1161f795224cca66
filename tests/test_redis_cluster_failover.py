"""A Redis Cluster failover under a crawl (issue 23: "a Redis restart or failover keeps
today's guarantees"): three masters, each with a replica (tests/rediscluster.py), three real
``crawler crawl`` workers on a multi-origin site, and one master SIGKILLed mid-crawl. Its
replica is promoted (``--cluster-node-timeout`` 2 s, then an election); meanwhile that
master's slots are down, which the workers retry as an outage; when they are served again the
workers start a new epoch (what the dead master had not yet passed to its replica may be lost:
admission offers again, the shards are read again). The crawl must end in every worker with
exit 0 and be the site exactly: nothing lost, politeness held, ``crawler status`` agreeing;
pages fetched twice only within what a lost second of writes allows.

Behind the ``cluster`` marker (``pytest -m cluster``; .ci/run runs it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from crawler.state.redis import RedisState
from tests.rediscluster import RedisCluster, started_cluster
from tests.test_redis_cluster import (
    CONCURRENCY,
    Cluster,
    SiteServer,
    check_cluster_crawl,
    site_factory,  # noqa: F401  (the fixture)
    summary,
    wait_requests,
    wait_until,
)
from tests.test_redis_cluster_mode import cand

pytestmark = [pytest.mark.timeout(180), pytest.mark.cluster]


@pytest.fixture
def replicated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """Three masters and three replicas."""
    cluster = started_cluster(tmp_path_factory, replicas=1)
    try:
        yield cluster
    finally:
        cluster.stop()


def _crawl_keys(cluster: RedisCluster, node: object) -> int:
    listed = cluster.cli_call(node, "--raw", "KEYS", "crawler:{default:s*")  # type: ignore[arg-type]
    return len([line for line in listed.splitlines() if line.strip()])


def test_a_master_killed_mid_crawl_fails_over_and_loses_nothing(
    replicated: RedisCluster,
    site_factory: Callable[..., SiteServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    masters = replicated.masters()
    assert len(masters) == 3, [replicated.role(n) for n in replicated.nodes]
    entry = masters[0]  # the workers' URL: kept alive (a client finds the cluster through it)
    site = site_factory(pages=240, origins=10, seed=21, latency=0.04)
    crawl = Cluster(replicated, site, tmp_path)  # type: ignore[arg-type]  (a .url: all it uses)
    crawl.redis = entry  # type: ignore[assignment]
    try:
        crawl.start(seed=True)
        wait_requests(site, 3, crawl.workers)
        crawl.start(seed=False)
        crawl.start(seed=False)
        wait_requests(site, 60, crawl.workers)
        # a master other than the entry node that holds some of the crawl's shards
        victims = [m for m in masters[1:] if _crawl_keys(replicated, m) > 0]
        assert victims, "no master but the entry node holds the crawl's keys"
        victim = victims[0]
        killed_at = time.monotonic()
        victim.kill()
        wait_until(
            lambda: len(replicated.masters()) == 3 and replicated.ok(entry),
            60,
            "a replica promoted in the killed master's place",
        )
        promoted_after = time.monotonic() - killed_at
        for w in crawl.workers:
            assert w.wait(120) == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
        # what a master had not passed on when it died is lost: its requests are offered
        # again (a new epoch), so a page may be fetched twice, never lost: at most each
        # worker's completions not yet written and its leases out then (their pages' links
        # may have gone with the master)
        starts = check_cluster_crawl(
            crawl,
            extra_dups=2 * CONCURRENCY * len(crawl.workers),
            why=f"failover after {promoted_after:.1f} s",
        )
        print(summary(crawl, starts), f"failover took {promoted_after:.1f} s")
        outage = [w for w in crawl.workers if "Redis" in w.stderr()]
        assert outage, "no worker noticed the failover"
        assert _crawl_keys(replicated, entry) > 0
    finally:
        crawl.stop_all()


async def test_a_failover_redis_py_rides_through_still_turns_the_epoch(
    replicated: RedisCluster, caplog: pytest.LogCaptureFixture
) -> None:
    # A manual failover (CLUSTER FAILOVER on a replica) raises no error at all: redis-py
    # follows the MOVED to the promoted replica and carries on. A replica promoted after a
    # crash may lack its master's last writes, and a worker cannot tell the two apart, so a
    # failover (the cluster's current epoch moved) starts a new epoch (it offers again what
    # it may have lost, reads its shards again), as a restarted master does.
    state = RedisState(replicated.url, name="t", lease_timeout=30.0)
    await state.open(per_host=4, delay=0.0, max_pages_per_host=0)
    try:
        await state.offer_many([cand(state, f"http://h{i}.test/") for i in range(30)])
        epoch = state.epoch
        entry = replicated.nodes[0]
        replica = next(
            n
            for n in replicated.nodes
            if replicated.role(n) == "slave"
            and f"master_port:{entry.port}"
            not in replicated.cli_call(n, "--raw", "INFO", "replication")
        )
        # FORCE: no handshake with the master (which may time out on a loaded machine), as
        # an operator does when the master is unreachable; asked again until it takes
        deadline = time.monotonic() + 60
        while replicated.role(replica) != "master":
            assert time.monotonic() < deadline, "the manual failover never took"
            assert "OK" in replicated.cli_call(replica, "CLUSTER", "FAILOVER", "FORCE")
            wait = time.monotonic() + 8
            while replicated.role(replica) != "master" and time.monotonic() < wait:
                time.sleep(0.1)
        more = [cand(state, f"http://h{i}.test/x") for i in range(30)]
        await asyncio.wait_for(state.offer_many(more), 60)
        # seen at the next heartbeat or count (the crawl's end is decided on counts)
        await state.counts()
        assert state.epoch > epoch
        assert "the cluster's epoch moved (a failover)" in caplog.text
        # what the promoted replica lacks (FORCE does not wait for it to catch up) is offered
        # again, as the engine's admission does on a new epoch: the worker's cache of what it
        # offered was forgotten, so none is taken for seen here and missing there
        first = [cand(state, f"http://h{i}.test/") for i in range(30)]
        await state.offer_many(first + more)
        counts = await state.counts()
        assert (counts.seen, counts.queued + counts.leased) == (60, 60)  # nothing lost
    finally:
        await state.close()
