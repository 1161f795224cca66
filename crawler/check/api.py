"""The library calls: ``check`` (async) and ``check_sync``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import fields
from typing import Any

from crawler.check.checker import Checker, CheckOptions
from crawler.check.model import CheckReport
from crawler.config import ConfigError, CrawlConfig

__all__ = ["check", "check_sync", "split_options"]

_CHECK_KEYS = frozenset(f.name for f in fields(CheckOptions))


def split_options(
    seeds: str | Iterable[str], config: CrawlConfig | None, options: dict[str, Any]
) -> tuple[CrawlConfig, CheckOptions]:
    """Keyword options into (the crawl's config, the checker's options).

    A checker's crawl reads every resource a page uses unless ``link_set`` says otherwise.

    Raises:
        ConfigError: an unknown option, naming it.
    """
    seed_list = (seeds,) if isinstance(seeds, str) else tuple(seeds)
    check_opts = {k: options.pop(k) for k in list(options) if k in _CHECK_KEYS}
    crawl_keys = {f.name for f in fields(CrawlConfig)}
    for key in options:
        if key not in crawl_keys:
            raise ConfigError("unknown option", key=key)
    if config is None:
        options.setdefault("link_set", "resources")
        config = CrawlConfig(seeds=seed_list, **options)
    else:
        if seed_list:
            options["seeds"] = tuple(config.seeds) + seed_list
        if options:
            config = config.replace(**options)
    return config.validated(), CheckOptions(**check_opts)


async def check(
    seeds: str | Iterable[str] = (), *, config: CrawlConfig | None = None, **options: Any
) -> CheckReport:
    """Crawl from ``seeds`` and check every link found; the report of broken links.

    Args:
        seeds: one URL or several (added to ``config.seeds`` if a config is given).
        config: a CrawlConfig; CrawlConfig field names in ``options`` override its fields.
        options: CrawlConfig fields (``max_depth``, ``scope``, ``link_set`` ... default
            ``link_set="resources"``) and CheckOptions fields (``external``,
            ``ignore_fragments``, ``cache``, ``cache_max_age``, ``recheck_delay``).

    Raises:
        ConfigError: a bad option, naming the key.
    """
    cfg, opts = split_options(seeds, config, dict(options))
    return await Checker(cfg, opts).run()


def check_sync(
    seeds: str | Iterable[str] = (), *, config: CrawlConfig | None = None, **options: Any
) -> CheckReport:
    """``check()`` for scripts: runs its own event loop."""
    return asyncio.run(check(seeds, config=config, **options))
