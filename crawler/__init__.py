"""crawler: an asynchronous, streaming link-extraction web crawler.

Names are imported lazily so that ``import crawler.extract`` (sans-I/O, no aiohttp) and
``crawler --help`` stay cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from crawler._version import __version__

if TYPE_CHECKING:
    from crawler.config import ConfigError, CrawlConfig
    from crawler.engine import Crawler, crawl, crawl_sync
    from crawler.extract import Link, LinkExtractor, extract_links
    from crawler.results import CrawlResult, CrawlStats, PageResult, Sink

__all__ = [
    "ConfigError",
    "CrawlConfig",
    "CrawlResult",
    "CrawlStats",
    "Crawler",
    "Link",
    "LinkExtractor",
    "PageResult",
    "Sink",
    "__version__",
    "crawl",
    "crawl_sync",
    "extract_links",
]

_WHERE = {
    "ConfigError": "crawler.config",
    "CrawlConfig": "crawler.config",
    "CrawlResult": "crawler.results",
    "CrawlStats": "crawler.results",
    "Crawler": "crawler.engine",
    "Link": "crawler.extract",
    "LinkExtractor": "crawler.extract",
    "PageResult": "crawler.results",
    "Sink": "crawler.results",
    "crawl": "crawler.engine",
    "crawl_sync": "crawler.engine",
    "extract_links": "crawler.extract",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'crawler' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
