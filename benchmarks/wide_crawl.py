"""Memory of a long, wide crawl: 100,000 origins, each with its own robots.txt.

    python benchmarks/wide_crawl.py                 # 100,000 origins (several minutes)
    python benchmarks/wide_crawl.py --origins 20000 # quicker

The site is tests/widesite.py, served by its own process (so that its memory is not ours):
origins ``localhost`` and ``o<i>.localhost`` (all 127.0.0.1 through a test resolver), each
with a robots.txt (a third ask for a Crawl-delay, a seventh name a sitemap), a front page
linking the next 64 origins (so that the crawl front, what is queued at any time, stays the
same width however long the crawl), a leaf page and links that are out of scope. The crawler runs in
this process as a library (``--scope subdomains`` of ``localhost``, a counting sink: nothing
kept per page) and prints, each time another quarter of the origins has been fetched, the
resident memory (VmRSS now, VmHWM peak) and the sizes of its per-origin and per-URL state.

Flat means: the RSS at 100k origins is about the RSS at 25k plus the seen set's growth (8 B
fingerprints, per URL, in a table that doubles), not a multiple of it.

Measured 2026-12-01 on this machine (2 vCPU, load average ~6 from other jobs, so wall times
are not comparable between runs), 242,858 pages, all ok, RSS MB at 25k / 50k / 75k / 100k
origins:

* before the frontier fix (a new origin at depth d got d empty per-depth queues; this graph is
  ~1,560 hops deep at the end): 169.9 / 191.8 / 225.3 / 270.7 MB, growing ~33 MB a quarter;
* after it: 134.8 / 160.6 / 168.4 / 174.4 MB: from 50k to 100k +14 MB, 4 of them the seen
  set (4 -> 8 MB). Frontier: 140-148 origins, 154-178 requests queued, throughout; robots
  rules: 4,096 cached (robots.py's bound) from the first quarter on.
* what still moves is the idle keep-alive pool (aiohttp keeps an origin's idle connection for
  30 s): 4,437 / 12,175 / 13,603 / 10,744 open fds. With ``--keepalive 2``: 75.1 / 78.9 /
  86.1 / 86.1 MB, 465-893 fds, and 655 pages/s instead of 444: flat. The pool is fetch.py's.
* with fetch.py's cap on idle connections (2 x concurrency overall, commit 49a5b1c) and the
  default 30 s keep-alive: 66.1 / 70.6 / 75.4 / 75.5 MB (peak 79.3), 168-176 open fds,
  716 pages/s: flat; from 50k to 100k origins +4.9 MB, the seen set's doubling (4 -> 8 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from crawler.config import CrawlConfig  # noqa: E402
from crawler.core.engine import Crawler  # noqa: E402
from crawler.core.results import PageResult  # noqa: E402
from crawler.http import options as fetch_options  # noqa: E402
from tests.widesite import patch_resolver  # noqa: E402


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class CountingSink:
    def __init__(self) -> None:
        self.links = 0
        self.pages = 0

    def link(self, url: str, referrer: str, kind: str) -> None:
        self.links += 1

    def page(self, page: PageResult) -> None:
        self.pages += 1

    def close(self) -> None:
        pass


async def run(origins: int, port: int, concurrency: int) -> int:
    patch_resolver()
    sink = CountingSink()
    config = CrawlConfig(
        seeds=(f"http://localhost:{port}/",),
        scope="subdomains",
        sitemaps=True,
        concurrency=concurrency,
        per_host=2,
        retries=0,
        max_depth=0,
    )
    crawler = Crawler(config, sink=sink)
    marks = [origins * q // 4 for q in (1, 2, 3, 4)]
    fronts = 0
    t0 = time.monotonic()
    print(
        f"{'origins':>8} {'pages':>8} {'wall s':>7} {'pages/s':>8} {'RSS MB':>7} {'peak MB':>8}"
        f" {'frontier origins':>16} {'queued':>7} {'seen URLs':>9} {'seen MB':>7}"
        f" {'robots cached':>13} {'fds':>5}",
        flush=True,
    )

    def report() -> None:
        wall = time.monotonic() - t0
        robots = crawler._robots
        cached = len(getattr(robots, "_rules", ())) if robots is not None else 0
        # a benchmark may look inside: the memory state's seen set and per-origin queues, the
        # admission's set of links beyond --max-depth (issue 22 moved them behind these)
        state = crawler.state
        seen = state._seen  # type: ignore[attr-defined]
        queues = state._queues  # type: ignore[attr-defined]
        admission = crawler._admission
        beyond = admission._beyond.nbytes if admission is not None else 0
        print(
            f"{fronts:>8} {crawler.stats.pages:>8} {wall:>7.1f} {crawler.stats.pages / wall:>8.0f}"
            f" {_status_kb('VmRSS') / 1024:>7.1f} {_status_kb('VmHWM') / 1024:>8.1f}"
            f" {queues.origins:>16} {len(queues):>7} {len(seen):>9}"
            f" {(seen.nbytes + beyond) / 2**20:>7.1f} {cached:>13}"
            f" {len(os.listdir('/proc/self/fd')):>5}",
            flush=True,
        )

    def on_page(page: PageResult) -> None:
        nonlocal fronts
        if page.url.endswith(f".localhost:{port}/") or page.depth == 0:
            fronts += 1
            if marks and fronts >= marks[0]:
                marks.pop(0)
                report()

    crawler._ledger.on_page = on_page
    async with crawler:
        await crawler.run()
    if marks:
        report()
    stats = crawler.stats
    print(
        f"done: {stats.pages} pages ({stats.pages_ok} ok) in {stats.duration:.1f}s,"
        f" errors {dict(stats.errors)}, {sink.links} links listed",
        flush=True,
    )
    return 0 if fronts >= origins else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--origins", type=int, default=100_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--window", type=int, default=64, help="each front page links the next N origins"
    )
    parser.add_argument(
        "--keepalive",
        type=float,
        default=None,
        help="experiment: seconds an idle keep-alive connection is kept"
        " (crawler.http.options.KEEPALIVE_TIMEOUT, default 30)",
    )
    args = parser.parse_args()
    if args.keepalive is not None:
        fetch_options.KEEPALIVE_TIMEOUT = args.keepalive
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.widesite",
            "--origins",
            str(args.origins),
            "--window",
            "--fanout",
            str(args.window),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        print(
            f"wide crawl: {args.origins} origins on 127.0.0.1:{port} (server pid {server.pid}),"
            f" concurrency {args.concurrency}, keep-alive {fetch_options.KEEPALIVE_TIMEOUT:g} s,"
            f" Python {sys.version.split()[0]}, pid {os.getpid()}",
            flush=True,
        )
        try:
            import uvloop  # noqa: PLC0415

            return uvloop.run(run(args.origins, port, args.concurrency))
        except ImportError:
            return asyncio.run(run(args.origins, port, args.concurrency))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
