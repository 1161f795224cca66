"""Load test (issue 5): many pages at high concurrency, 5% failing, memory flat.

The site (``faultserver.LoadPlan``) runs in a subprocess (``python tests/faultserver.py load``)
so that it gets the other core and the crawler's RSS is measured alone. Each page links to
its eight tree children and to two pseudo-random pages; 5% of the pages always fail, a third
each with a reset before the headers, a 500, or a response that never comes (timeout). The
test computes from the plan which pages are reachable through pages that do not fail, and
checks against the server's own request counts and the crawler's results that:

* every reachable page that works is fetched exactly once and reported ok once;
* every reachable failing page is reported once with its kind (``disconnected``, ``http_500``,
  ``timeout``), requested exactly 1 + retries times, and ``stats.errors`` counts exactly
  those kinds;
* no other path is ever requested;
* memory stays flat: RSS is sampled as pages complete; after the first quarter it may grow
  only by what the crawl must keep per URL, bounded per page below (results stream out
  through a sink, as in a long crawl, so the engine keeps no PageResults).

``pytest -m slow tests/test_load.py -s`` runs the 200,000-page version and prints its figures;
the default run has a 3,000-page version.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from tests.faultserver import LoadPlan

FAULTSERVER = Path(__file__).with_name("faultserver.py")
PAGE = os.sysconf("SC_PAGE_SIZE")
KIND = {"reset": "disconnected", "500": "http_500", "timeout": "timeout"}


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class CountingSink:
    """Streams results out the way a long crawl does (the engine then keeps no results)."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.pages = 0
        self.closed = 0

    def link(self, url: str, referrer: str, kind: str) -> None:
        self.kinds[kind] += 1

    def page(self, page: object) -> None:
        self.pages += 1

    def close(self) -> None:
        self.closed += 1


class LoadServer:
    def __init__(self, plan: LoadPlan, hang: float) -> None:
        cmd = [sys.executable, str(FAULTSERVER), "load", "--pages", str(plan.n)]
        cmd += ["--fail", str(plan.fail_rate), "--seed", str(plan.seed), "--hang", str(hang)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"load server did not start: {line!r}")
        self.port = int(line)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:  # pragma: no cover
            self.proc.kill()
            self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    async def stats(self) -> dict[str, Any]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.port}/__stats") as resp,
        ):
            data: dict[str, Any] = await resp.json()
            return data


async def run_load(n: int, *, concurrency: int, retries: int = 1, seed: int = 1) -> dict[str, Any]:
    plan = LoadPlan(n, 0.05, seed)
    ok_expected, failed_expected = plan.expected()
    reached = ok_expected | failed_expected
    server = LoadServer(plan, hang=30.0)
    try:
        base = f"http://127.0.0.1:{server.port}"
        config = CrawlConfig(
            seeds=(f"{base}/p/0",),
            concurrency=concurrency,
            per_host=concurrency,
            max_depth=0,
            timeout=10.0,
            connect_timeout=5.0,
            # Generous enough that a busy 2-core box does not turn a slow answer into a
            # timeout; the server's "timeout" pages answer after 30 s.
            read_timeout=2.0,
            retries=retries,
            backoff=0.01,
            quiet=True,
        ).validated()
        ok_seen = bytearray(n)  # times each page was reported ok
        failures: dict[int, str | None] = {}
        details: dict[int, str | None] = {}
        samples: list[tuple[int, int]] = []  # (pages done, RSS)
        every = max(1, n // 40)
        done = 0
        rss0 = rss()
        cpu0 = cpu_seconds()
        t0 = time.monotonic()
        sink = CountingSink()
        async with Crawler(config, sink=sink) as crawler:
            async for page in crawler:
                i = int(page.url.rsplit("/", 1)[1])
                if page.error is None:
                    ok_seen[i] += 1
                else:
                    assert i not in failures, f"page {i} reported twice"
                    failures[i] = page.error
                    if page.error != KIND[plan.fault[i] or ""]:
                        details[i] = f"{page.error_detail} after {page.retries} retries"
                done += 1
                if done % every == 0:
                    samples.append((done, rss()))
            stats = crawler.stats
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds() - cpu0
        counts: list[int] = (await server.stats())["counts"]
        other: dict[str, int] = (await server.stats())["other"]
    finally:
        server.close()

    # Flat memory: from a quarter of the way to the end, RSS may grow only by what a crawl
    # must keep per URL (the seen set, the frontier), not by page bodies or results.
    quarter = [r for d, r in samples if d >= len(reached) // 4] or [rss()]
    growth = max(quarter) - quarter[0]
    per_page = growth / max(1, len(reached) - len(reached) // 4)
    figures = {
        "pages": stats.pages,
        "ok": stats.pages_ok,
        "errors": dict(stats.errors),
        "requests": sum(counts) + sum(other.values()),
        "seconds": round(elapsed, 2),
        "pages_per_s": round(stats.pages / elapsed, 1),
        "cpu_s": round(cpu, 2),
        "rss_start_mib": round(rss0 / 2**20, 1),
        "rss_mib": [round(r / 2**20, 1) for _, r in samples[:: max(1, len(samples) // 8)]],
        "peak_rss_mib": round(peak_rss() / 2**20, 1),
        "growth_after_first_quarter_mib": round(growth / 2**20, 1),
        "growth_per_page_bytes": round(per_page),
    }
    print(f"\nload {n} pages, concurrency {concurrency}: {figures}")

    # every reachable working page fetched exactly once, reported ok exactly once
    bad_ok = [i for i in ok_expected if ok_seen[i] != 1 or counts[i] != 1]
    assert not bad_ok, [(i, ok_seen[i], counts[i], failures.get(i)) for i in bad_ok[:20]]
    assert sum(ok_seen) == len(ok_expected)
    # every reachable failing page reported once with its kind, retried the right number of times
    want = {i: KIND[plan.fault[i] or ""] for i in failed_expected}
    wrong = sorted(set(failures.items()) ^ set(want.items()))
    assert failures == want, [(i, k, plan.fault[i], details.get(i)) for i, k in wrong[:20]]
    for i in failed_expected:
        assert counts[i] == 1 + retries, (i, plan.fault[i], counts[i])
    # nothing else requested
    assert all(counts[i] == 0 for i in range(n) if i not in reached)
    assert set(other) <= {"/robots.txt"}, other
    assert stats.errors == Counter(want.values()), (dict(stats.errors), Counter(want.values()))
    assert stats.pages == len(reached)
    assert stats.pages_ok == len(ok_expected)
    assert sink.kinds["internal"] == len(reached)
    assert sink.closed == 1 and sink.pages == stats.pages
    # (16 MiB of slack for allocator arenas, which matter only in the small run)
    limit = 1024 * (len(reached) - len(reached) // 4) + 16 * 2**20
    assert growth < limit, f"memory grows {per_page:.0f} bytes a page"
    return figures


@pytest.mark.timeout(120)
async def test_load_small() -> None:
    figures = await run_load(3_000, concurrency=64)
    assert figures["seconds"] < 60


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_load_200k() -> None:
    figures = await run_load(200_000, concurrency=256)
    assert figures["pages"] > 190_000
