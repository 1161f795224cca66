"""Minimal Scrapy crawl of the benchmark site: LinkExtractor, same host, robots off, no delays.

Run by benchmarks/crawl.py as its own process (so its CPU time and peak RSS are its own):
    python scrapy_spider.py URL --concurrency 16 --time-limit 300
Prints one JSON line with the pages the spider parsed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor


class BenchSpider(scrapy.Spider):
    name = "bench"

    def __init__(self, start: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [start]
        self.allowed_domains = [urlsplit(start).hostname or ""]
        self.link_extractor = LinkExtractor()
        self.pages = 0

    def parse(self, response: Response) -> Iterator[scrapy.Request]:
        self.pages += 1
        if not isinstance(response, TextResponse):  # every page of the site is HTML
            return
        for link in self.link_extractor.extract_links(response):
            yield scrapy.Request(link.url, callback=self.parse)


def bench_settings(concurrency: int, time_limit: float, **more: Any) -> dict[str, Any]:
    """The settings every Scrapy peer of the benchmarks runs with: ``concurrency`` requests
    (all to one host if need be), no delays or throttling, robots off, quiet, no depth limit,
    closed after ``time_limit`` seconds (0: none); ``more`` adds or overrides."""
    return {
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": concurrency,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "WARNING",
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
        "CLOSESPIDER_TIMEOUT": time_limit,
        **more,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--time-limit", type=float, default=0)
    args = ap.parse_args()
    process = CrawlerProcess(bench_settings(args.concurrency, args.time_limit))
    crawler = process.create_crawler(BenchSpider)
    t0 = time.perf_counter()
    process.crawl(crawler, start=args.url)
    process.start()
    spider = crawler.spider
    stats = crawler.stats.get_stats() if crawler.stats else {}
    print(
        json.dumps(
            {
                "pages": getattr(spider, "pages", 0),
                "seconds": round(time.perf_counter() - t0, 3),
                "finish_reason": stats.get("finish_reason"),
                "responses": stats.get("downloader/response_count"),
            }
        )
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
