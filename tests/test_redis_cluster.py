"""Proof of the Redis cluster (issue 11): real ``crawler crawl --state redis://`` worker
processes on one real redis-server crawl one multi-origin site served by its own process.

The site (tests/countsite.py) logs every GET with its start and end time and how many requests
were in progress to its origin at that moment, so the test checks politeness ACROSS the workers
from the server's side. Each worker is a separate ``python -m crawler`` process with its own
``-f jsonl`` output; the first is given the seed URLs, the others none (they join). One worker is
killed with SIGKILL mid-crawl, and redis-server is restarted once mid-crawl (a clean stop and a
start on the same port and AOF directory: tests/redisserver.py).

What is checked (:func:`check_cluster_crawl`):

* the union of the pages fetched is exactly the site (:meth:`CountSite.expected`): nothing
  lost, nothing outside it (never a ``/private/`` URL robots.txt disallows);
* a page is fetched more than once only if the killed worker had it in flight or had completed
  it without writing that yet (its first GET came from that worker, by the ``X-Worker`` header
  each worker sends, before the kill), and there are at most twice ``--concurrency`` of them
  (in flight, and the completions pending: ``crawler.state._redis_done``); or Redis went
  away and came back while a live worker had completed it without writing that yet (first
  fetched before Redis went down; at most ``--concurrency`` a worker: such completions are
  fetched again, not written to a Redis that may lack its last second): leases and
  unwritten completions, not lost requests, and not duplicates
  by the dozen (the victim is killed only while it has requests in flight, so its leases
  must come back for the crawl to end: with ``--lease-timeout 1000`` this test fails);
* robots.txt is fetched at most once per origin per worker;
* the survivors exit 0 by themselves (nothing queued, nothing leased, for the grace period);
* the site never saw more than ``--per-host`` requests in progress to one origin at once, over
  all workers together;
* every worker's output parses (the killed one's may end in a cut line), and together they hold
  a record of every page;
* ``crawler status --state redis://... -f json`` agrees at the end: nothing queued or leased,
  every page done.

Also: a worker started before any crawl exists waits and joins, and ``--name`` keeps two crawls
apart in one database (every request to a site comes from a worker of its own crawl). The
default run keeps to one schedule (the three default tests take 30-40 s here); behind
``@pytest.mark.slow``: six random schedules, a SIGKILL of redis-server itself, and a Redis
brought back with its AOF of one second before (what ``appendfsync everysec`` keeps after a
power loss), which must still lose no page.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.countsite import CountSite, Key
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 4  # each worker's --concurrency
PER_HOST = 2  # --per-host: across the whole cluster
LEASE_TIMEOUT = 3.0  # --lease-timeout: how soon a dead worker's leases return
RUN_LIMIT = 60.0  # seconds a worker may take before the test gives up on it
KILL_SLACK = 1.0  # seconds a busy site may take to log a request sent just before a kill


# ------------------------------------------------------------------ the site process


class SiteServer:
    """``python -m tests.countsite`` in its own process; its log over the control port."""

    def __init__(self, site: CountSite) -> None:
        self.site = site
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.countsite", "--pages", str(site.pages)]
            + ["--origins", str(site.origins), "--seed", str(site.seed)]
            + ["--latency", str(site.latency), "--slow-seconds", str(site.slow_seconds)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        info = json.loads(self.proc.stdout.readline())
        self.control: str = info["control"]
        self.origins: list[str] = info["origins"]

    def _get(self, path: str) -> bytes:
        with urllib.request.urlopen(self.control + path, timeout=10) as r:
            return bytes(r.read())

    def count(self) -> int:
        return int(self._get("/count"))

    def log(self) -> list[list[object]]:
        data: list[list[object]] = json.loads(self._get("/log"))
        return data

    def stats(self) -> dict[str, object]:
        data: dict[str, object] = json.loads(self._get("/stats"))
        return data

    def url(self, key: Key) -> str:
        return self.origins[key[0]] + key[1]

    def key(self, url: str) -> Key | None:
        for i, origin in enumerate(self.origins):
            if url.startswith(origin + "/"):
                return (i, url[len(origin) :])
        return None

    def seeds(self) -> list[str]:
        return [o + "/" for o in self.origins]

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def site_factory() -> Iterator[Callable[..., SiteServer]]:
    started: list[SiteServer] = []

    def start(**kw: object) -> SiteServer:
        s = SiteServer(CountSite(**kw))  # type: ignore[arg-type]
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


# ------------------------------------------------------------------ worker processes


@dataclass
class Worker:
    """One ``crawler crawl --state redis://...`` process with its own output and stderr."""

    label: str
    workdir: Path
    cmd: list[str]
    proc: subprocess.Popen[bytes] = field(init=False)
    started: float = 0.0
    killed_at: float | None = None
    exit: int | None = None

    def __post_init__(self) -> None:
        self.started = time.time()
        with open(self.err_path, "wb") as err:
            self.proc = subprocess.Popen(
                self.cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=self.workdir
            )

    @property
    def out(self) -> Path:
        return self.workdir / f"{self.label}.jsonl"

    @property
    def err_path(self) -> Path:
        return self.workdir / f"{self.label}.err"

    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        self.killed_at = time.time()
        self.proc.send_signal(signal.SIGKILL)
        self.exit = self.proc.wait(10)

    def wait(self, timeout: float = RUN_LIMIT) -> int:
        try:
            self.exit = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(
                f"{self.label} did not exit by itself in {timeout} s; stderr:\n{self.stderr()}"
            ) from None
        return self.exit

    def records(self) -> list[dict[str, object]]:
        """The output's records. Every line must parse; only a killed worker's last line may
        be cut (SIGKILL between two writes), and it is dropped."""
        data = self.out.read_bytes() if self.out.exists() else b""
        lines = data.split(b"\n")
        tail = lines.pop()  # b"" when the file ends with a newline
        if tail:
            assert self.killed_at is not None, f"{self.label}: the output's last line is cut"
        return [json.loads(line) for line in lines]


@dataclass
class Cluster:
    """Workers of one crawl on one Redis database (one ``--name``)."""

    redis: RedisServer
    site: SiteServer
    workdir: Path
    name: str | None = None
    workers: list[Worker] = field(default_factory=list)
    #: When redis-server was stopped or killed (to come back), if it was.
    redis_down_at: float | None = None

    def start(
        self, *, seed: bool, concurrency: int = CONCURRENCY, extra: tuple[str, ...] = ()
    ) -> Worker:
        label = f"{self.name or 'default'}-w{len(self.workers)}"
        cmd = [sys.executable, "-m", "crawler", "crawl"]
        if seed:
            cmd += self.site.seeds()
        cmd += ["--state", self.redis.url, "-c", str(concurrency), "--per-host", str(PER_HOST)]
        cmd += ["--lease-timeout", str(LEASE_TIMEOUT), "-f", "jsonl"]
        cmd += ["-o", str(self.workdir / f"{label}.jsonl"), *extra]
        cmd += ["--header", f"X-Worker: {label}"]  # the site logs who sent each request
        if self.name:
            cmd += ["--name", self.name]
        w = Worker(label, self.workdir, cmd)
        self.workers.append(w)
        return w

    def status(self) -> dict[str, object]:
        cmd = [sys.executable, "-m", "crawler", "status", "--state", self.redis.url]
        cmd += ["--format", "json"] + (["--name", self.name] if self.name else [])
        res = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=self.workdir)
        assert res.returncode == 0, f"crawler status exited {res.returncode}:\n{res.stderr}"
        data: dict[str, object] = json.loads(res.stdout)
        return data

    def stop_all(self) -> None:
        for w in self.workers:
            if w.running():
                w.proc.kill()
                w.proc.wait()


@pytest.fixture
def clusters(redis_server: RedisServer) -> Iterator[list[Cluster]]:  # noqa: F811
    made: list[Cluster] = []
    yield made
    for c in made:
        c.stop_all()


def wait_until(pred: Callable[[], bool], timeout: float, why: str) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {why}")
        time.sleep(0.01)


def wait_requests(site: SiteServer, n: int, workers: list[Worker], timeout: float = 30) -> None:
    """Until the site has logged ``n`` requests (fails early if every worker has exited)."""

    def ok() -> bool:
        if not any(w.running() for w in workers):
            raise AssertionError(
                f"every worker exited before {n} requests; stderr:\n"
                + "\n".join(f"--- {w.label}: exit {w.exit}\n{w.stderr()}" for w in workers)
            )
        return site.count() >= n

    wait_until(ok, timeout, f"{n} requests at the site")


# ------------------------------------------------------------------ the checks


def summary(cluster: Cluster, starts: dict[Key, list[tuple[float, str]]]) -> str:
    """One line for ``pytest -s``: what each worker did, duplicates, the peaks per origin."""
    recs = {w.label: len(w.records()) for w in cluster.workers}
    gets = Counter(w for s in starts.values() for _, w in s)
    first: dict[str, float | None] = {}
    for w in cluster.workers:
        mine = [t for s in starts.values() for t, x in s if x == w.label]
        first[w.label] = round(min(mine) - w.started, 2) if mine else None
    dups = sum(len(s) - 1 for s in starts.values())
    return (
        f"{describe(cluster.workers)}; GETs {dict(gets)}; records {recs}; first GET after "
        f"start (s) {first}; {len(starts)} pages, {dups} fetched again; peak in flight per "
        f"origin {cluster.site.stats()['max_in_flight']}"
    )


def gets_of(
    site: SiteServer,
) -> tuple[dict[Key, list[tuple[float, str]]], Counter[tuple[int, str]]]:
    """(each page's GETs as (start, worker) in order, robots.txt GETs per (origin, worker))."""
    starts: dict[Key, list[tuple[float, str]]] = {}
    robots: Counter[tuple[int, str]] = Counter()
    for origin, path, start, _end, _n, _port, worker in site.log():
        assert isinstance(origin, int) and isinstance(path, str) and isinstance(start, float)
        if path == "/robots.txt":
            robots[origin, str(worker)] += 1
        else:
            starts.setdefault((origin, path), []).append((start, str(worker)))
    return starts, robots


def requests_of(site: SiteServer, workers: list[Worker]) -> dict[str, tuple[int, int]]:
    """Per worker label: (requests the site has logged from it, those it is answering now),
    by each request's X-Worker header; one read of the site's log."""
    out = {w.label: (0, 0) for w in workers}
    for *_, end, _n, _p, label in site.log():
        if label in out:
            done, now = out[label]
            out[label] = (done + 1, now + (end is None))
    return out


def describe(workers: list[Worker]) -> str:
    return "; ".join(
        f"{w.label} exit {w.exit}{' (SIGKILL)' if w.killed_at else ''}" for w in workers
    )


def check_cluster_crawl(
    cluster: Cluster, *, extra_dups: int = 0, why: str = ""
) -> dict[Key, list[tuple[float, str]]]:
    """The checks of the module docstring; ``extra_dups``: duplicates allowed beyond the
    killed workers' in-flight requests (a Redis crash loses the last second of writes)."""
    site, workers = cluster.site, cluster.workers
    why = why or describe(workers)
    expected = site.site.expected(tuple(range(site.site.origins)))
    starts, robots = gets_of(site)
    fetched = set(starts)
    assert fetched - expected == set(), f"{why}: fetched outside the site"
    assert expected - fetched == set(), f"{why}: never fetched (lost)"
    # robots.txt: at most once an origin per worker (the state keeps it for the others)
    assert all(n == 1 for n in robots.values()), f"{why}: robots.txt GETs {robots}"
    labels = {w.label for w in workers}
    assert {w for (_, w) in robots} | {w for s in starts.values() for _, w in s} <= labels

    # duplicates: only what a killed worker may have had in flight (at most its concurrency)
    # and the completions it had ended but not yet written (written a window at a time, at
    # once when as many are pending as it had leases out: at most its concurrency again);
    # and when Redis went away and came back, each live worker's completions pending then
    # and its leases out then (not written to the Redis that came back, which may lack its
    # last second and the links those pages offered in it: fetched again, first fetched
    # before Redis went down)
    killed = [w for w in workers if w.killed_at is not None]
    twice = {k: s for k, s in starts.items() if len(s) > 1}
    down = cluster.redis_down_at
    allowed = 2 * CONCURRENCY * len(killed) + extra_dups
    if down is not None:
        allowed += 2 * CONCURRENCY * (len(workers) - len(killed))
    extra = sum(len(s) - 1 for s in twice.values())
    assert extra <= allowed, (
        f"{why}: {extra} duplicate GETs of {len(twice)} pages (allowed {allowed}): "
        f"{sorted((site.url(k), s) for k, s in twice.items())}"
    )
    if not extra_dups:
        # each page fetched again was first fetched by a killed worker (its X-Worker header:
        # a dead process sends nothing, so that request left it before the kill; the site,
        # short of CPU, may log it a little after killed_at, hence the slack)
        dead = {w.label: w.killed_at for w in killed}
        bad = [
            (site.url(k), s)
            for k, s in twice.items()
            if (s[0][1] not in dead or s[0][0] >= (dead[s[0][1]] or 0.0) + KILL_SLACK)
            and (down is None or s[0][0] >= down + KILL_SLACK)
        ]
        assert not bad, f"{why}: fetched twice, yet not in flight at a kill or a restart: {bad}"

    # politeness across the cluster, as the server saw it
    stats = site.stats()
    peak = stats["max_in_flight"]
    assert isinstance(peak, list)
    assert max(peak) <= PER_HOST, f"{why}: {peak} requests in progress at once per origin"

    # outputs: every line parses; together a record of every page
    covered: set[Key] = set()
    per_url: Counter[str] = Counter()
    for w in workers:
        for rec in w.records():
            for u in (rec.get("url"), rec.get("final_url")):
                if isinstance(u, str) and (k := site.key(u)) is not None:
                    covered.add(k)
            per_url[str(rec.get("url"))] += 1
    missing = sorted(site.url(k) for k in expected - covered)
    assert not missing, f"{why}: pages with no record in any worker's output: {missing}"
    for url, n in per_url.items():
        k = site.key(url)
        gets = len(starts.get(k, [])) if k else 0
        assert n <= max(gets, 1), f"{why}: {n} records of {url}, fetched {gets} times"

    # crawler status agrees
    status = cluster.status()
    assert status.get("queued") == 0, f"{why}: status at the end: {status}"
    assert status.get("leased", status.get("in_flight")) == 0, f"{why}: status: {status}"
    failed = status.get("failed") or {}
    assert isinstance(failed, dict)
    done = status.get("done")
    assert isinstance(done, int)
    assert done - failed.get("robots_disallowed", 0) == len(expected), (
        f"{why}: status says {done} done ({failed}), the site has {len(expected)} pages: {status}"
    )
    return starts


# ------------------------------------------------------------------ the tests


def _kill_and_restart(
    clusters: list[Cluster],
    redis: RedisServer,
    site: SiteServer,
    tmp_path: Path,
    *,
    kill_after: int,
    restart_after: int,
    victim_gets: int = 5,
    crash_redis: bool = False,
    rollback: float = 0.0,
) -> Cluster:
    """Three workers (the first seeds, two join); SIGKILL a joining one once the site has seen
    ``kill_after`` requests and that worker has sent ``victim_gets`` and has some in flight;
    restart redis-server after ``restart_after`` requests; the other two must finish.

    The victim is whichever joiner is first so: under the cluster-wide ``--per-host`` cap the
    workers already holding an origin's slots lease them again as each request ends, so one
    joiner may wait seconds for its first lease (the slots are busy, not lost) while the other
    works; a victim named in advance could be the waiting one until the crawl is over.

    ``crash_redis``: SIGKILL redis-server instead of a clean stop. ``rollback``: also bring it
    back with the AOF as it was that many seconds before the kill (a copy taken then), as a
    power loss with ``appendfsync everysec`` would (the kernel loses what was not fsynced)."""
    cluster = Cluster(redis, site, tmp_path)
    clusters.append(cluster)
    first = cluster.start(seed=True)
    wait_requests(site, 3, cluster.workers)  # the crawl exists: the others join it
    joiners = [cluster.start(seed=False), cluster.start(seed=False)]
    wait_requests(site, kill_after, cluster.workers)
    chosen: list[Worker] = []

    def working() -> bool:  # a joiner has done some work, and has requests in flight to lose
        counts = requests_of(site, joiners)
        chosen[:] = [w for w in joiners if counts[w.label][0] >= victim_gets and counts[w.label][1]]
        return bool(chosen)

    wait_until(working, 30, f"a joining worker to fetch {victim_gets} and have some in flight")
    victim = chosen[0]
    assert victim.running(), f"{victim.label} ended before the kill:\n{victim.stderr()}"
    victim.kill()
    wait_requests(site, restart_after, cluster.workers)
    aof = redis.directory / "appendonlydir"
    if rollback:
        snapshot = redis.directory.parent / "aof-snapshot"
        shutil.copytree(aof, snapshot)
        time.sleep(rollback)
        cluster.redis_down_at = time.time()
        redis.kill()
        shutil.rmtree(aof)
        shutil.copytree(snapshot, aof)
        redis.start()
    elif crash_redis:
        cluster.redis_down_at = time.time()
        redis.kill()
        time.sleep(0.3)
        redis.start()
    else:
        cluster.redis_down_at = time.time()
        redis.restart(down=0.3)
    assert any(w.running() for w in cluster.workers), "the crawl ended before the restart"
    for w in cluster.workers:
        if w is not victim:
            code = w.wait()
            assert code == 0, f"{w.label} exited {code}:\n{w.stderr()}"
    assert first.exit == 0
    return cluster


def test_three_workers_one_killed_redis_restarted(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
) -> None:
    # six origins: each origin's shard has one owner, so a joiner works only if it owns one
    # (the seeder owns all six with odds 1/3**6)
    site = site_factory(pages=300, origins=6, seed=1, latency=0.06)
    cluster = _kill_and_restart(
        clusters, redis_server, site, tmp_path, kill_after=60, restart_after=150
    )
    starts = check_cluster_crawl(cluster)
    print(summary(cluster, starts))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2, 8), ids=lambda s: f"seed-{s}")
def test_three_workers_random_schedules(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
    seed: int,
) -> None:
    rng = random.Random(seed)
    site = site_factory(pages=rng.randrange(300, 700), origins=rng.randrange(2, 5), seed=seed)
    n = len(site.site.expected(tuple(range(site.site.origins))))
    kill_after = rng.randrange(5, n // 2)
    restart_after = rng.randrange(kill_after + 1, n * 3 // 4)
    cluster = _kill_and_restart(
        clusters,
        redis_server,
        site,
        tmp_path,
        kill_after=kill_after,
        restart_after=restart_after,
        victim_gets=rng.randrange(1, 30),
    )
    starts = check_cluster_crawl(cluster, why=f"seed {seed}: {describe(cluster.workers)}")
    print(f"seed {seed}: {summary(cluster, starts)}")


@pytest.mark.slow
def test_redis_crash_loses_at_most_a_second(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
) -> None:
    """SIGKILL of redis-server (AOF everysec): the crawl still ends complete. (Redis hands
    its writes to the kernel in every turn of its event loop, so a kill of the process alone
    loses at most a write in progress; the next test makes it lose a whole second.)"""
    site = site_factory(pages=400, origins=3, seed=9, latency=0.06)
    cluster = _kill_and_restart(
        clusters, redis_server, site, tmp_path, kill_after=60, restart_after=200, crash_redis=True
    )
    # a second of the cluster's work: PER_HOST per origin, each request >= latency
    per_second = int(site.site.origins * PER_HOST / site.site.latency) + 1
    starts = check_cluster_crawl(cluster, extra_dups=2 * per_second)
    print(f"redis SIGKILLed: {summary(cluster, starts)}")


@pytest.mark.slow
def test_redis_losing_its_last_second_loses_no_page(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
) -> None:
    """Redis comes back with the state of a second ago (what AOF everysec keeps after a power
    loss): the offers, leases and completions of that second are gone, yet every page of the
    site is fetched (those pages again), and the workers finish by themselves."""
    site = site_factory(pages=400, origins=3, seed=10, latency=0.06)
    cluster = _kill_and_restart(
        clusters, redis_server, site, tmp_path, kill_after=60, restart_after=150, rollback=1.0
    )
    per_second = int(site.site.origins * PER_HOST / site.site.latency) + 1
    starts = check_cluster_crawl(cluster, extra_dups=2 * per_second)
    print(f"redis rolled back 1 s: {summary(cluster, starts)}")


def test_workers_joining_mid_crawl_take_shards_and_the_cap_holds(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
) -> None:
    """One worker crawls alone (it owns every shard); two join mid-crawl: the shards they win
    change hands (the owner stops leasing from them, lets what it has out end, releases them)
    and they work on them; the site never sees more than --per-host requests in progress to
    one origin, over the three workers, while shards move; nothing is lost or fetched twice."""
    site = site_factory(pages=400, origins=12, seed=6, latency=0.05)
    cluster = Cluster(redis_server, site, tmp_path)
    clusters.append(cluster)
    first = cluster.start(seed=True)
    wait_requests(site, 60, cluster.workers)
    joiners = [cluster.start(seed=False), cluster.start(seed=False)]
    for w in [first, *joiners]:
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    starts = check_cluster_crawl(cluster)  # (the per-host peak as the site counted it)
    print(summary(cluster, starts))
    gets = Counter(w for s in starts.values() for _, w in s)
    assert all(gets[w.label] > 0 for w in joiners), gets  # each joiner won shards and worked


def test_one_origin_four_workers(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
) -> None:
    """A single-origin crawl with four workers, one seeding, three joining: the host is
    split into --per-host (2) parts, each with one owner, within --per-host together; the
    workers without a part wait on their inboxes without polling, and all stop by themselves
    when the crawl is done (tests/test_redis_hot.py: four parts, four workers)."""
    site = site_factory(pages=120, origins=1, seed=7, latency=0.03)
    cluster = Cluster(redis_server, site, tmp_path)
    clusters.append(cluster)
    cluster.start(seed=True)
    wait_requests(site, 3, cluster.workers)
    for _ in range(3):
        cluster.start(seed=False)
    for w in cluster.workers:
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    starts = check_cluster_crawl(cluster)
    print(summary(cluster, starts))
    assert len({w for s in starts.values() for _, w in s}) >= 1


def test_worker_started_first_waits_and_joins(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
) -> None:
    """A worker started on an empty database waits for the crawl, then works on it. (Ten
    origins: each origin's shard has one owner, and the joiner owns none of them with odds
    1/2**10.)"""
    site = site_factory(pages=150, origins=10, seed=3, latency=0.08)
    cluster = Cluster(redis_server, site, tmp_path)
    clusters.append(cluster)
    joiner = cluster.start(seed=False)
    wait_until(
        lambda: "waiting for one to start" in joiner.stderr() or not joiner.running(),
        30,
        "the joiner to say it waits",
    )
    time.sleep(0.5)
    assert joiner.running(), f"the joiner did not wait: exit {joiner.exit}:\n{joiner.stderr()}"
    assert site.count() == 0
    seeder = cluster.start(seed=True)
    for w in (joiner, seeder):
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    print(summary(cluster, check_cluster_crawl(cluster)))
    assert joiner.records(), f"the joiner fetched nothing:\n{joiner.stderr()}"


def test_names_keep_two_crawls_apart(
    clusters: list[Cluster],
    redis_server: RedisServer,  # noqa: F811
    site_factory: Callable[..., SiteServer],
    tmp_path: Path,
) -> None:
    """Two crawls of two sites in ONE database at once, told apart by --name: every request
    to a site comes from a worker of its own crawl, each crawl is complete, and each name's
    status counts its own pages."""
    a = Cluster(
        redis_server, site_factory(pages=50, origins=1, seed=4, latency=0.03), tmp_path, "a"
    )
    b = Cluster(
        redis_server, site_factory(pages=40, origins=2, seed=5, latency=0.03), tmp_path, "b"
    )
    clusters += [a, b]
    a.start(seed=False)  # the joiners first: each waits for ITS crawl
    b.start(seed=False)
    time.sleep(1.0)
    a.start(seed=True)
    b.start(seed=True)
    for w in a.workers + b.workers:
        assert w.wait() == 0, f"{w.label} exited {w.exit}:\n{w.stderr()}"
    print(f"a: {summary(a, check_cluster_crawl(a))}")
    print(f"b: {summary(b, check_cluster_crawl(b))}")
    # and the default name holds no crawl
    res = subprocess.run(
        [sys.executable, "-m", "crawler", "status", "--state", redis_server.url],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
