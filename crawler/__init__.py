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
    from crawler.core.engine import Crawler, crawl, crawl_sync
    from crawler.core.results import CrawlResult, CrawlStats, PageResult, Sink
    from crawler.extract import Link, LinkExtractor, extract_links

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
    "CrawlResult": "crawler.core.results",
    "CrawlStats": "crawler.core.results",
    "Crawler": "crawler.core.engine",
    "Link": "crawler.extract",
    "LinkExtractor": "crawler.extract",
    "PageResult": "crawler.core.results",
    "Sink": "crawler.core.results",
    "crawl": "crawler.core.engine",
    "crawl_sync": "crawler.core.engine",
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
