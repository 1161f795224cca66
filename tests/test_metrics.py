"""Prometheus metrics (crawler.output.metrics, ``--metrics-port``): the mapping from fetches and
page tallies to metric families, the /metrics server, and a real crawl scraped during and after it
whose totals must equal the crawl's own stats and what the test server saw."""

from __future__ import annotations

import asyncio
import errno
import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from crawler.config import ConfigError, CrawlConfig
from crawler.core.admission import Tally
from crawler.core.engine import Crawler
from crawler.core.results import CrawlStats
from crawler.http.response import Response
from crawler.output.metrics import (
    DURATION_BUCKETS,
    ERROR_KINDS,
    SKIP_REASONS,
    STATUS_CLASSES,
    Metrics,
    MetricsError,
    error_label,
)
from crawler.output.sinks import UrlSink
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)
from tests.sitegen import ROBOTS, Site

ROOT = Path(__file__).resolve().parent.parent

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Samples:
    """Every sample of an exposition, keyed by (sample name, sorted labels)."""
    out: Samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def samples_of(m: Metrics) -> Samples:
    """The registry's samples without a server (the same collector the server uses)."""
    out: Samples = {}
    for family in m.registry.collect():
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def one(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    return {dict(k[1])[label]: v for k, v in samples.items() if k[0] == name}


async def scrape(url: str) -> Samples:
    async with aiohttp.ClientSession() as session, session.get(url) as r:
        assert r.status == 200
        assert r.content_type == "text/plain"
        return parse(await r.text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def refused(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return True
    writer.close()
    return False


# -- the mapping --


def test_a_404_counts_4xx_and_its_error_kind() -> None:
    m = Metrics()
    m.on_response(Response("http://h/x", status=404, error="http_404", bytes=120, elapsed_ms=4.0))
    s = samples_of(m)
    assert by_label(s, "crawler_requests_total", "status_class") == {
        c: (1.0 if c == "4xx" else 0.0) for c in STATUS_CLASSES
    }
    assert by_label(s, "crawler_request_errors_total", "kind") == {
        k: (1.0 if k == "http_4xx" else 0.0) for k in ERROR_KINDS
    }
    assert one(s, "crawler_response_bytes_total") == 120


def test_status_classes_and_error_kinds_are_bounded() -> None:
    m = Metrics()
    for status, error in [
        (None, "timeout"),
        (None, "dns"),
        (200, None),
        (204, None),
        (301, None),
        (503, "http_503"),
        (101, None),
        (799, "http_799"),  # not a real status: both labels "other"
        (200, "something_new"),  # a kind the fetcher may add one day
        (200, "too_large"),
        (None, "proxy"),
        (200, "archive"),  # the WARC writer failed on this exchange
    ]:
        m.on_response(Response("http://h/", status=status, error=error))
    s = samples_of(m)
    assert by_label(s, "crawler_requests_total", "status_class") == {
        "none": 3, "1xx": 1, "2xx": 5, "3xx": 1, "4xx": 0, "5xx": 1, "other": 1,
    }  # fmt: skip
    errors = by_label(s, "crawler_request_errors_total", "kind")
    assert set(errors) == set(ERROR_KINDS)  # every label always exported, no other
    assert {k: v for k, v in errors.items() if v} == {
        "timeout": 1, "dns": 1, "http_5xx": 1, "other": 2, "too_large": 1, "proxy": 1, "archive": 1,
    }  # fmt: skip
    assert error_label("http_404") == "http_4xx"
    assert error_label("http_599") == "http_5xx"
    assert error_label("http_200") == "other"
    assert error_label("redirect_loop") == "other"


def test_retries_and_bytes_add_up() -> None:
    m = Metrics()
    m.on_response(Response("http://h/a", status=200, bytes=1000, retries=2))
    m.on_response(Response("http://h/b", status=503, error="http_503", bytes=50, retries=3))
    m.on_response(Response("http://h/c", error="connect", retries=1))
    s = samples_of(m)
    assert one(s, "crawler_retries_total") == 6
    assert one(s, "crawler_response_bytes_total") == 1050


def test_duration_histogram_observes_in_seconds() -> None:
    m = Metrics()
    # 0.5 ms, exactly 5 ms (le is "<=": in the 0.005 bucket), 300 ms, 90 s (above every bound)
    for ms in (0.5, 5.0, 300.0, 90_000.0):
        m.on_response(Response("http://h/", status=200, elapsed_ms=ms))
    s = samples_of(m)
    buckets = {
        float(dict(k[1])["le"]): v
        for k, v in s.items()
        if k[0] == "crawler_fetch_duration_seconds_bucket"
    }
    assert sorted(buckets) == [*DURATION_BUCKETS, float("inf")]
    assert DURATION_BUCKETS[0] == 0.001 and DURATION_BUCKETS[-1] == 60.0
    expect = {b: (b >= 0.001) + (b >= 0.005) + (b >= 0.3) for b in DURATION_BUCKETS}
    expect[float("inf")] = 4
    assert buckets == expect
    assert one(s, "crawler_fetch_duration_seconds_count") == 4
    assert one(s, "crawler_fetch_duration_seconds_sum") == pytest.approx(90.3055)


def test_tally_counts_links_discovered_and_skipped() -> None:
    m = Metrics()
    for found, new, invalid, out, robots, redirects in [(10, 4, 1, 2, 0, 1), (7, 0, 0, 3, 2, 0)]:
        t = Tally()
        t.links_found, t.links_new, t.links_invalid = found, new, invalid
        t.out_of_scope, t.robots_disallowed, t.redirects = out, robots, redirects
        m.on_tally(t)
    s = samples_of(m)
    assert one(s, "crawler_links_extracted_total") == 17
    assert one(s, "crawler_urls_discovered_total") == 4
    assert by_label(s, "crawler_urls_skipped_total", "reason") == {
        "invalid": 1, "out_of_scope": 5, "robots_disallowed": 2,
    }  # fmt: skip
    assert set(SKIP_REASONS) == {"invalid", "out_of_scope", "robots_disallowed"}
    assert one(s, "crawler_redirects_total") == 1


def test_each_metrics_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()
    a.on_response(Response("http://h/", status=200, bytes=5))
    assert one(samples_of(a), "crawler_response_bytes_total") == 5
    assert one(samples_of(b), "crawler_response_bytes_total") == 0
    assert a.registry is not b.registry
    assert REGISTRY.get_sample_value("crawler_response_bytes_total") is None


# -- the server --


@dataclass
class View:
    """A stand-in for the Crawler's gauges and stats (the CrawlView protocol)."""

    queued: int = 0
    in_flight: int = 0
    stats: CrawlStats = field(default_factory=CrawlStats)


async def test_server_serves_the_registry_and_reads_gauges_at_scrape_time() -> None:
    m = Metrics()
    view = View(queued=7, in_flight=3)
    view.stats.pages, view.stats.resumed_pages = 12, 2  # a resumed crawl: 10 done here
    port = free_port()
    await m.start("127.0.0.1", port, view)
    try:
        assert m.url == f"http://127.0.0.1:{port}/metrics"
        m.on_response(Response("http://h/", status=200, bytes=9))
        s = await scrape(m.url)
        assert one(s, "crawler_queued_urls") == 7
        assert one(s, "crawler_requests_in_flight") == 3
        assert one(s, "crawler_pages_total") == 10
        assert one(s, "crawler_response_bytes_total") == 9
        assert one(s, "crawler_info", version=__import__("crawler").__version__) == 1
        assert one(s, "process_cpu_seconds_total") > 0
        view.queued, view.in_flight, view.stats.pages = 0, 0, 15
        s = await scrape(m.url)
        assert (one(s, "crawler_queued_urls"), one(s, "crawler_requests_in_flight")) == (0, 0)
        assert one(s, "crawler_pages_total") == 13
        async with aiohttp.ClientSession() as session, session.get(m.url[:-8] + "/x") as r:
            assert r.status == 404  # only /metrics
    finally:
        await m.stop()
    assert await refused(port)
    await m.stop()  # idempotent


async def test_openmetrics_is_served_to_a_prometheus_that_asks_for_it() -> None:
    # Prometheus asks for OpenMetrics first; its parser is strict (types, suffixes, # EOF).
    from prometheus_client.openmetrics.parser import (  # noqa: PLC0415
        text_string_to_metric_families as parse_openmetrics,
    )

    m = Metrics()
    m.on_response(Response("http://h/", status=200, bytes=3, elapsed_ms=2.0))
    port = free_port()
    await m.start("127.0.0.1", port, View(queued=1))
    try:
        accept = {"Accept": "application/openmetrics-text; version=1.0.0"}
        async with aiohttp.ClientSession() as session, session.get(m.url, headers=accept) as r:
            assert r.content_type == "application/openmetrics-text"
            text = await r.text()
    finally:
        await m.stop()
    types = {f.name: f.type for f in parse_openmetrics(text)}
    assert types["crawler"] == "info"
    assert types["crawler_requests"] == types["crawler_pages"] == "counter"
    assert types["crawler_fetch_duration_seconds"] == "histogram"
    assert types["crawler_queued_urls"] == types["crawler_requests_in_flight"] == "gauge"


async def test_port_in_use_is_a_clear_error_naming_host_and_port() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        m = Metrics()
        with pytest.raises(MetricsError) as info:
            await m.start("127.0.0.1", port, View())
        await m.stop()  # safe after a failed start
    exc = info.value
    assert isinstance(exc, ConfigError)  # the CLI's exit 2 for an unusable setting
    assert exc.key == "metrics_port"
    assert exc.errno == errno.EADDRINUSE
    assert f"127.0.0.1:{port}" in str(exc) and "already in use" in str(exc)
    # the port is free again: the failed start left nothing bound
    m = Metrics()
    await m.start("127.0.0.1", port, View())
    await m.stop()


async def test_metrics_host_is_honoured() -> None:
    m = Metrics()
    port = free_port()
    await m.start("127.0.0.2", port, View())  # 127.0.0.0/8 is all loopback on Linux
    try:
        assert m.url == f"http://127.0.0.2:{port}/metrics"
        assert await refused(port)  # not on 127.0.0.1
        s = await scrape(m.url)
        assert one(s, "crawler_requests_in_flight") == 0
    finally:
        await m.stop()


# -- a real crawl --


class StatusLog:
    """Middleware: the status of every response the test server sent (raised ones too)."""

    def __init__(self) -> None:
        self.statuses: list[int] = []

    @web.middleware
    async def middleware(self, request: web.Request, handler):  # type: ignore[no-untyped-def]
        try:
            resp = await handler(request)
        except web.HTTPException as exc:
            self.statuses.append(exc.status)
            raise
        self.statuses.append(resp.status)
        return resp


async def start_logged_site(serve, **kw):  # type: ignore[no-untyped-def]
    site = Site(**kw)
    log = StatusLog()
    app = web.Application(middlewares=[log.middleware])
    app.router.add_route("GET", "/{tail:.*}", site.handle)
    server = await serve(app)
    site.origin = str(server.make_url("")).rstrip("/")
    return site, log


def classes(statuses: list[int]) -> dict[str, float]:
    got = Counter(f"{s // 100}xx" for s in statuses)
    return {c: float(got.get(c, 0)) for c in STATUS_CLASSES}


async def test_a_crawl_scraped_during_and_after_matches_its_stats(serve) -> None:  # type: ignore[no-untyped-def]
    site, log = await start_logged_site(serve, n=80, slow_seconds=0.3, delay_all=0.005)
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    during: list[tuple[int, Samples]] = []
    done = 0

    async def on_page(page: object) -> None:
        nonlocal done
        done += 1
        if done in (5, 30):
            during.append((crawler.stats.pages, await scrape(url)))

    cfg = CrawlConfig(seeds=(site.url("/p/0.html"),), metrics_port=port, concurrency=4)
    async with Crawler(cfg, on_page=on_page) as crawler:
        await crawler.run()
        after = await scrape(url)
        stats = crawler.stats
    assert await refused(port)  # stopped at close

    # during: live values, never above the final ones
    assert len(during) == 2
    for pages_then, s in during:
        assert pages_then <= one(s, "crawler_pages_total") <= stats.pages
        assert 0 <= one(s, "crawler_requests_in_flight") <= cfg.concurrency
        assert one(s, "crawler_queued_urls") >= 0
        assert sum(by_label(s, "crawler_requests_total", "status_class").values()) <= sum(
            by_label(after, "crawler_requests_total", "status_class").values()
        )
    assert one(during[0][1], "crawler_pages_total") < one(during[1][1], "crawler_pages_total")

    # after: the crawl's own stats, and every response the server sent (robots.txt included)
    assert stats.pages > 80 and not stats.cancelled
    requests = by_label(after, "crawler_requests_total", "status_class")
    assert requests == classes(log.statuses)
    assert one(after, "crawler_retries_total") == stats.retries == 0
    assert one(after, "crawler_pages_total") == stats.pages
    assert one(after, "crawler_response_bytes_total") == stats.bytes + len(ROBOTS)
    errors = by_label(after, "crawler_request_errors_total", "kind")
    http_4xx = sum(n for kind, n in stats.errors.items() if kind.startswith("http_4"))
    assert http_4xx > 0
    assert errors["http_4xx"] == http_4xx == requests["4xx"]
    assert sum(errors.values()) == errors["http_4xx"]  # nothing else failed on the wire
    assert one(after, "crawler_links_extracted_total") == stats.links_found > 0
    assert one(after, "crawler_urls_discovered_total") == stats.links_new > 0
    skipped = by_label(after, "crawler_urls_skipped_total", "reason")
    assert skipped == {
        "invalid": stats.links_invalid,
        "out_of_scope": stats.out_of_scope,
        "robots_disallowed": stats.robots_disallowed,
    }
    assert skipped["out_of_scope"] > 0 and skipped["robots_disallowed"] > 0
    assert one(after, "crawler_redirects_total") == stats.redirects > 0
    n = one(after, "crawler_fetch_duration_seconds_count")
    assert n == sum(requests.values()) == len(log.statuses)
    # /slow.html took 0.3 s: one observation above the 0.25 s bound, the sum at least that
    assert one(after, "crawler_fetch_duration_seconds_bucket", le="0.25") <= n - 1
    assert one(after, "crawler_fetch_duration_seconds_sum") >= 0.3
    assert (one(after, "crawler_requests_in_flight"), one(after, "crawler_queued_urls")) == (0, 0)


async def test_two_crawls_in_one_process_keep_their_own_metrics(serve) -> None:  # type: ignore[no-untyped-def]
    async def one_crawl(n: int) -> tuple[CrawlStats, Samples]:
        site, _ = await start_logged_site(serve, n=n)
        port = free_port()
        cfg = CrawlConfig(seeds=(site.url("/p/1.html"),), metrics_port=port, max_depth=2)
        async with Crawler(cfg) as crawler:
            await crawler.run()
            return crawler.stats, await scrape(f"http://127.0.0.1:{port}/metrics")

    (sa, a), (sb, b) = await asyncio.gather(one_crawl(30), one_crawl(60))
    assert sa.links_found != sb.links_found
    for stats, s in ((sa, a), (sb, b)):
        assert one(s, "crawler_pages_total") == stats.pages
        assert one(s, "crawler_links_extracted_total") == stats.links_found
        assert one(s, "crawler_response_bytes_total") == stats.bytes + len(ROBOTS)


async def test_a_resumed_crawl_counts_this_run_only(serve, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Counters start at 0 in each process (Prometheus' rule), whatever the stored totals.
    site, log = await start_logged_site(serve, n=60)
    state = str(tmp_path / "state")
    seed = (site.url("/p/0.html"),)
    first = CrawlConfig(seeds=seed, state=state, max_pages=20, retries=0)
    async with Crawler(first) as crawler:
        await crawler.run()
        before = crawler.stats
    assert before.pages == 20
    log.statuses.clear()
    port = free_port()
    again = CrawlConfig(seeds=seed, state=state, max_pages=10_000, retries=0, metrics_port=port)
    async with Crawler(again) as crawler:
        await crawler.run()
        s = await scrape(f"http://127.0.0.1:{port}/metrics")
        after = crawler.stats
    assert after.resumed_pages == 20 < after.pages
    assert one(s, "crawler_pages_total") == after.pages - 20
    assert by_label(s, "crawler_requests_total", "status_class") == classes(log.statuses)
    assert one(s, "crawler_links_extracted_total") == after.links_found - before.links_found > 0
    assert one(s, "crawler_urls_discovered_total") == after.links_new - before.links_new > 0
    assert one(s, "crawler_response_bytes_total") == after.bytes - before.bytes


async def test_each_redis_worker_serves_its_own_share(
    serve,  # type: ignore[no-untyped-def]
    redis_server: RedisServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two workers on one redis:// crawl, each with its own metrics port: every response the
    # server sent is counted by exactly one of them, and each counts the pages it did.
    from crawler.state.redis import RedisState  # noqa: PLC0415  (needs the redis package)

    monkeypatch.setattr(RedisState, "idle_grace", 0.5)  # stop 0.5 s after the work ran out
    site, log = await start_logged_site(serve, n=60, delay_all=0.01)
    seed = (site.url("/p/0.html"),)

    async def worker(seeds: tuple[str, ...]) -> tuple[CrawlStats, Samples]:
        port = free_port()
        cfg = CrawlConfig(seeds=seeds, state=redis_server.url, concurrency=2, metrics_port=port)
        async with Crawler(cfg) as crawler:
            await crawler.run()
            return crawler.stats, await scrape(f"http://127.0.0.1:{port}/metrics")

    joiner = asyncio.ensure_future(worker(()))  # waits for the crawl to exist
    await asyncio.sleep(0.3)
    results = await asyncio.wait_for(asyncio.gather(worker(seed), joiner), 60)
    total: Counter[str] = Counter()
    done = 0
    for stats, s in results:
        mine = one(s, "crawler_pages_total")
        # (one origin: its owner fetches it all, the other may do nothing: issue 23's shards)
        assert mine == stats.pages - stats.resumed_pages
        done += mine
        total.update(by_label(s, "crawler_requests_total", "status_class"))
    assert done > 0
    assert dict(total) == classes(log.statuses)


# -- off by default --

_WITHOUT = """
import asyncio, json, os, sys
from crawler import CrawlConfig, crawl

def listening() -> list[int]:
    # TCP sockets of this process in LISTEN state (/proc/net/tcp{,6} state 0A)
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(name) as f:
            for line in f.readlines()[1:]:
                parts = line.split()
                if parts[3] == "0A" and parts[9] in inodes:
                    ports.append(int(parts[1].rsplit(":", 1)[1], 16))
    return ports

seen = []

def on_page(page) -> None:
    seen.append(listening())

result = asyncio.run(crawl(sys.argv[1], on_page=on_page, max_pages=5))
print(json.dumps({
    "pages": result.stats.pages,
    "listening": seen,
    "modules": sorted(
        m for m in sys.modules if m.startswith(("crawler.output.metrics", "prometheus"))
    ),
}))
"""


async def test_without_metrics_port_nothing_listens_or_imports(serve) -> None:  # type: ignore[no-untyped-def]
    site, _ = await start_logged_site(serve, n=10)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", _WITHOUT, site.url("/p/0.html"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    got = json.loads(out)
    assert got["pages"] == 5 and len(got["listening"]) == 5
    assert got["listening"] == [[]] * 5  # no listening socket while crawling
    assert got["modules"] == []
    # the same probe sees the metrics server when it is on (the check can fail)
    port = free_port()
    probe = _WITHOUT.replace(
        "crawl(sys.argv[1], on_page=on_page, max_pages=5)",
        f"crawl(sys.argv[1], on_page=on_page, max_pages=5, metrics_port={port})",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", probe, site.url("/p/0.html"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    got = json.loads(out)
    assert got["listening"] == [[port]] * 5
    assert "crawler.output.metrics" in got["modules"] and "prometheus_client" in got["modules"]


def test_version_does_not_import_prometheus_client() -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "crawler", "--version"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines()}
    assert "crawler.cli.main" in imported  # the probe reads the import log
    assert not {
        m for m in imported if m.startswith(("prometheus_client", "crawler.output.metrics"))
    }


# -- --metrics-linger --


class ClosedSink(UrlSink):
    """A sink that tells when the crawler closed it: the crawl is over, its state closed."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO())
        self.closed_at: float | None = None

    def close(self) -> None:
        super().close()
        self.closed_at = self.closed_at or time.monotonic()


async def crawl_in_background(site: Site, **options: object) -> tuple[Crawler, ClosedSink, int]:
    port = free_port()
    cfg = CrawlConfig(seeds=(site.url("/p/0.html"),), metrics_port=port, **options)  # type: ignore[arg-type]
    sink = ClosedSink()
    crawler = Crawler(cfg, sink=sink)

    async def go() -> None:
        async with crawler:
            await crawler.run()

    crawler.task = asyncio.ensure_future(go())  # type: ignore[attr-defined]
    for _ in range(600):
        if sink.closed_at is not None or crawler.task.done():  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.05)
    assert sink.closed_at is not None, "the crawl did not end"
    return crawler, sink, port


async def test_metrics_linger_serves_the_final_values_after_the_crawl(serve) -> None:  # type: ignore[no-untyped-def]
    site, _ = await start_logged_site(serve, n=30)
    # Lingering: the crawl is over (its sink closed), the task is not, a scrape sees the end.
    crawler, sink, port = await crawl_in_background(site, metrics_linger=1.5)
    task = crawler.task  # type: ignore[attr-defined]
    s = await scrape(f"http://127.0.0.1:{port}/metrics")
    assert not task.done()
    assert one(s, "crawler_pages_total") == crawler.stats.pages > 20
    assert (one(s, "crawler_requests_in_flight"), one(s, "crawler_queued_urls")) == (0, 0)
    assert one(s, "crawler_fetch_duration_seconds_count") == sum(
        by_label(s, "crawler_requests_total", "status_class").values()
    )
    await asyncio.wait_for(task, 10)
    assert sink.closed_at is not None and time.monotonic() - sink.closed_at >= 1.4
    assert await refused(port)  # and then it stops by itself

    # stop() (what Ctrl-C calls) cuts a long linger short.
    crawler, sink, port = await crawl_in_background(site, metrics_linger=60)
    assert not await refused(port)
    crawler.stop()
    await asyncio.wait_for(crawler.task, 5)  # type: ignore[attr-defined]
    assert await refused(port)

    # Without it the server stops with the crawl: nothing to scrape once it has ended.
    crawler, sink, port = await crawl_in_background(site)
    await asyncio.wait_for(crawler.task, 5)  # type: ignore[attr-defined]
    assert sink.closed_at is not None and time.monotonic() - sink.closed_at < 1.0
    assert await refused(port)


async def test_cli_metrics_linger_keeps_the_exit_code_when_ctrl_c_ends_it(  # type: ignore[no-untyped-def]
    serve, tmp_path: Path
) -> None:
    site, _ = await start_logged_site(serve, n=20)
    port = free_port()
    out = tmp_path / "pages.jsonl"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", "crawl", site.url("/p/0.html"), "-o", str(out),
        "-f", "jsonl",
        "--metrics-port", str(port), "--metrics-linger", "60",
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    try:
        for _ in range(300):  # until the crawl looks done: nothing queued, nothing in flight
            await asyncio.sleep(0.1)
            if await refused(port):
                continue
            s = await scrape(f"http://127.0.0.1:{port}/metrics")
            busy = one(s, "crawler_requests_in_flight") + one(s, "crawler_queued_urls")
            if one(s, "crawler_pages_total") > 0 and not busy:
                break
        await asyncio.sleep(1.5)  # well past the end: still served, with the final count
        s = await scrape(f"http://127.0.0.1:{port}/metrics")
        assert proc.returncode is None
        lines = out.read_text().splitlines()  # the sink is closed before the linger: whole
        assert one(s, "crawler_pages_total") == len(lines) > 10
        assert one(s, "crawler_requests_in_flight") == one(s, "crawler_queued_urls") == 0
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()  # a finished crawl, not "stopped by SIGINT"
    assert await refused(port)
