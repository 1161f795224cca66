"""A minimal scrapy-redis worker for benchmarks/redis_workers.py: the crawl benchmark's
link-following spider (benchmarks/crawl/scrapy_spider.py) on scrapy-redis' shared scheduler and
dupefilter.

    python benchmarks/scrapy_redis_spider.py --redis redis://127.0.0.1:PORT/0 --host 127.0.0.1 \
        --concurrency 16 --idle-close 2 --time-limit 60

Run N of these at once on one Redis; the driver pushes the start URL first
(``LPUSH bench:start_urls '{"url": "..."}'``). Every worker is the same; the first that finds
the start URL fetches it. Prints one JSON line with the pages this worker parsed.

How it is made to stop: scrapy-redis never closes an idle spider by default (``RedisSpider``
raises ``DontCloseSpider`` on every ``spider_idle``). Its ``MAX_IDLE_TIME_BEFORE_CLOSE``
(whole seconds) lets an idle spider close; we set it to ``--idle-close`` (2, our crawler's
grace period). Caveats seen in scrapy-redis 0.9.1's source (spiders.py): the idle clock starts
when the spider class is defined and is reset only while the START-URL list is non-empty, so
in a long crawl a worker closes at the first idle signal it gets (Scrapy sends it about every 5
seconds while idle), not after 2 idle seconds; and it has no leases: a worker that closes (or
dies) while the others' requests are still to produce links simply leaves. ``SCHEDULER_PERSIST``
is on: with its default (off) the FIRST worker to close flushes the shared queue and dupefilter
for everyone. ``CLOSESPIDER_TIMEOUT`` (``--time-limit``) ends a long run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor
from scrapy_redis.spiders import RedisSpider


class BenchRedisSpider(RedisSpider):  # type: ignore[misc]
    name = "bench"
    redis_key = "bench:start_urls"

    def __init__(self, host: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.allowed_domains = [host]
        self.link_extractor = LinkExtractor()
        self.pages = 0

    def parse(self, response: Response) -> Iterator[scrapy.Request]:
        self.pages += 1
        if not isinstance(response, TextResponse):  # every page of the site is HTML
            return
        for link in self.link_extractor.extract_links(response):
            yield scrapy.Request(link.url, callback=self.parse)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--redis", required=True, help="redis://HOST:PORT/DB")
    ap.add_argument("--host", required=True, help="the site's host name (allowed_domains)")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--idle-close", type=int, default=2, help="MAX_IDLE_TIME_BEFORE_CLOSE")
    ap.add_argument("--time-limit", type=float, default=0, help="CLOSESPIDER_TIMEOUT")
    args = ap.parse_args()
    settings = {
        "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
        "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
        "SCHEDULER_PERSIST": True,
        "REDIS_URL": args.redis,
        "MAX_IDLE_TIME_BEFORE_CLOSE": args.idle_close,
        "CONCURRENT_REQUESTS": args.concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": args.concurrency,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": False,
        "ROBOTSTXT_OBEY": False,
        "LOG_LEVEL": "WARNING",
        "DEPTH_LIMIT": 0,
        "TELNETCONSOLE_ENABLED": False,
        "CLOSESPIDER_TIMEOUT": args.time_limit,
    }
    process = CrawlerProcess(settings)
    crawler = process.create_crawler(BenchRedisSpider)
    t0 = time.perf_counter()
    process.crawl(crawler, host=args.host)
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
