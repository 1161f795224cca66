"""Our crawler on the benchmark site, as its own process (for its CPU time and peak RSS).

    python run_ours.py URL --concurrency 16 --time-limit 300

Uses the library: ``Crawler(config)`` iterated page by page with a sink that only counts,
so nothing is kept but what the engine itself keeps. robots.txt is ignored (nginx has none
and the other crawlers do not ask). Prints one JSON line.
"""

# ruff: noqa: E402, I001  (the project root goes on sys.path before the crawler imports)
from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the project root

from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.core.results import PageResult


class CountingSink:
    """A sink that keeps nothing: counts links and pages."""

    def __init__(self) -> None:
        self.links = 0
        self.pages = 0

    def link(self, url: str, referrer: str | None, kind: str) -> None:
        self.links += 1

    def page(self, page: PageResult) -> None:
        self.pages += 1

    def close(self) -> None:
        pass


async def run(url: str, concurrency: int, time_limit: float) -> dict[str, object]:
    config = CrawlConfig(
        seeds=(url,),
        concurrency=concurrency,
        per_host=concurrency,
        ignore_robots=True,
        max_depth=1000,
        quiet=True,
    ).validated()
    sink = CountingSink()
    errors: dict[str, int] = {}
    ok = 0
    t0 = time.perf_counter()
    async with Crawler(config, sink=sink) as crawler:
        loop = asyncio.get_running_loop()
        timer = loop.call_later(time_limit, crawler.stop) if time_limit > 0 else None
        async for page in crawler:
            if page.error is None:
                ok += 1
            else:
                errors[page.error] = errors.get(page.error, 0) + 1
        if timer is not None:
            timer.cancel()
        stats = crawler.stats
    return {
        "pages": ok,
        "errors": errors,
        "links_new": sink.links,
        "seconds": round(time.perf_counter() - t0, 3),
        "stats_pages": stats.pages,
        "cancelled": stats.cancelled,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=0)
    ap.add_argument("--no-uvloop", action="store_true")
    ap.add_argument(
        "--gc-tuned",
        action="store_true",
        help="experiment: gc.freeze() after start-up and a gen-0 threshold of 50,000",
    )
    args = ap.parse_args()
    if args.gc_tuned:
        gc.freeze()
        gc.set_threshold(50_000, 20, 20)
    coro = run(args.url, args.concurrency, args.time_limit)
    if args.no_uvloop:
        out = asyncio.run(coro)
    else:
        try:
            import uvloop  # noqa: PLC0415 - optional
        except ImportError:  # pragma: no cover
            out = asyncio.run(coro)
        else:
            out = uvloop.run(coro)
    print(json.dumps(out))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
