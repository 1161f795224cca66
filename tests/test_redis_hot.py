"""One hot origin (issue 23): a one-site crawl shared by four worker processes.

Real ``crawler crawl --state redis://`` processes on one real redis-server crawl a site of ONE
origin served by its own process (tests/countsite.py: it logs each GET's start, end, the worker
that sent it, and counts the requests in progress to the origin). The host is split into parts
(``crawler.state._redis_split``: automatic, the seeds being one host), so that every worker
fetches a real share of it while the host's ``--per-host`` cap and ``--delay`` hold over all of
them together, as the server counts them. Before the split, the origin's one shard had one
owner: the other three workers fetched nothing (each test below fails there on the share).

The checks of tests/test_redis_cluster.py (``check_cluster_crawl``) hold too: the union of the
pages is the site, a page fetched twice only if a killed worker had it in flight, robots.txt
once an origin a worker, every output parses, ``crawler status`` agrees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

import tests.test_redis_cluster as rc
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)
from tests.test_redis_cluster import (  # noqa: F401  (the fixtures)
    Cluster,
    SiteServer,
    check_cluster_crawl,
    clusters,
    requests_of,
    site_factory,
    summary,
    wait_requests,
    wait_until,
)

PER_HOST = 8  # --per-host: automatic split into 8 parts, two a worker
WORKERS = 4
#: Each worker's share of the pages at least (an even split is 25%).
MIN_SHARE = 0.10


@pytest.fixture
def hot(monkeypatch: pytest.MonkeyPatch) -> int:
    """The cluster's --per-host and each worker's -c (``check_cluster_crawl`` reads both)."""
    monkeypatch.setattr(rc, "PER_HOST", PER_HOST)
    monkeypatch.setattr(rc, "CONCURRENCY", PER_HOST)  # each worker's -c: the duplicates allowed
    return PER_HOST


def shares(starts: dict[rc.Key, list[tuple[float, str]]], cluster: Cluster) -> dict[str, float]:
    """Each worker's share of the pages it fetched first."""
    first = Counter(s[0][1] for s in starts.values())
    return {w.label: first[w.label] / len(starts) for w in cluster.workers}


def start_four(cluster: Cluster, *extra: str) -> None:
    """All four at once, as a user would start them: one with the seeds, three without."""
    cluster.start(seed=True, concurrency=PER_HOST, extra=extra)
    for _ in range(WORKERS - 1):
        cluster.start(seed=False, concurrency=PER_HOST, extra=extra)


def test_one_site_four_workers_each_fetch_a_share(
    hot: int,
    clusters: list[Cluster],  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    """Every worker fetches at least MIN_SHARE of the pages; never more than --per-host in
    progress at the origin at once (server side); the union is the site; no page twice."""
    site = site_factory(pages=240, origins=1, seed=11, latency=0.15)
    cluster = Cluster(redis_server, site, tmp_path)
    clusters.append(cluster)
    start_four(cluster)
    for w in cluster.workers:
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    starts = check_cluster_crawl(cluster)  # (no kill: no page fetched twice)
    print(summary(cluster, starts))
    assert all(len(s) == 1 for s in starts.values())
    got = shares(starts, cluster)
    assert min(got.values()) >= MIN_SHARE, f"shares of the pages: {got}"
    peak = site.stats()["max_in_flight"]
    assert isinstance(peak, list) and max(peak) <= hot, peak


def test_one_site_a_worker_killed_loses_nothing(
    hot: int,
    clusters: list[Cluster],  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    """SIGKILL one of the four mid-crawl, once it has requests in flight: its parts are taken
    over after --lease-timeout, nothing is lost, the only pages fetched twice are those it
    had in flight, and the three others (each with its share) finish by themselves."""
    site = site_factory(pages=240, origins=1, seed=12, latency=0.15)
    cluster = Cluster(redis_server, site, tmp_path)
    clusters.append(cluster)
    start_four(cluster)
    wait_requests(site, 40, cluster.workers)
    joiners = cluster.workers[1:]

    def victim_busy() -> bool:
        counts = requests_of(site, joiners)
        return any(done >= 5 and now for done, now in counts.values())

    wait_until(victim_busy, 30, "a joining worker with requests in flight")
    counts = requests_of(site, joiners)
    victim = next(w for w in joiners if counts[w.label][0] >= 5 and counts[w.label][1])
    victim.kill()
    for w in cluster.workers:
        if w is not victim:
            assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    starts = check_cluster_crawl(cluster)
    print(summary(cluster, starts))
    got = shares(starts, cluster)
    assert min(v for k, v in got.items() if k != victim.label) >= MIN_SHARE, got


@pytest.mark.slow  # (about 15 s; .ci/run's slice of the slow tests runs it)
def test_one_site_delay_holds_for_the_host(
    hot: int,
    clusters: list[Cluster],  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    """With --delay D and the host in 8 parts over four workers (each part D x 8 apart), the
    gaps between the starts of the requests to the origin, over all workers, are D or more
    on average (the host's rate is one request every D), and every worker has its share."""
    delay = 0.1
    site = site_factory(pages=80, origins=1, seed=13, latency=0.05)
    cluster = Cluster(redis_server, site, tmp_path)
    clusters.append(cluster)
    start_four(cluster, "--delay", str(delay))
    for w in cluster.workers:
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    starts = check_cluster_crawl(cluster)
    times = sorted(t for s in starts.values() for t, _ in s)
    mean_gap = (times[-1] - times[0]) / (len(times) - 1)
    print(summary(cluster, starts), f"mean gap {mean_gap:.3f} s")
    assert mean_gap >= delay, f"{len(times)} requests, mean gap {mean_gap:.3f} s < {delay}"
    got = shares(starts, cluster)
    assert min(got.values()) >= MIN_SHARE, f"shares of the pages: {got}"


def test_host_split_is_fixed_at_creation_and_shown(
    clusters: list[Cluster],  # noqa: F811
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],  # noqa: F811
    tmp_path: Path,
) -> None:
    """``--host-split 1`` keeps a one-site crawl in one part whatever a later worker asks
    for: the split is the crawl's, fixed when the first worker created it (a worker that
    routed the host's URLs by its own K would fetch pages twice: none is)."""
    import redis  # noqa: PLC0415

    site = site_factory(pages=60, origins=1, seed=14, latency=0.05)
    cluster = Cluster(redis_server, site, tmp_path)
    clusters.append(cluster)
    cluster.start(seed=True, extra=("--host-split", "1"))
    wait_requests(site, 3, cluster.workers)
    cluster.start(seed=True, extra=("--host-split", "2"))
    for w in cluster.workers:
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    starts = check_cluster_crawl(cluster)
    assert all(len(s) == 1 for s in starts.values()), summary(cluster, starts)
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert client.hget("crawler:{default}:cfg", "split") == b"1"
    finally:
        client.close()
