"""The library calls: ``audit`` (async) and ``audit_sync``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from crawler.audit.auditor import MAX_CLICK_DEPTH, Auditor
from crawler.audit.graph import GRAPH_FORMATS, graph_format
from crawler.audit.model import AuditReport
from crawler.check.api import split_options
from crawler.config import ConfigError, CrawlConfig

__all__ = ["audit", "audit_sync"]


async def audit(
    seeds: str | Iterable[str] = (),
    *,
    config: CrawlConfig | None = None,
    sitemaps: Iterable[str] = (),
    max_click_depth: int = MAX_CLICK_DEPTH,
    graph: str | None = None,
    **options: Any,
) -> AuditReport:
    """Crawl from ``seeds`` and audit the site's link graph.

    Args:
        seeds: one URL or several (added to ``config.seeds`` if a config is given).
        config: a CrawlConfig; CrawlConfig field names in ``options`` override its fields.
        sitemaps: sitemap URLs to read besides the ones the seeds' robots.txt names.
        max_click_depth: pages more clicks than this from a seed are reported.
        graph: write the link graph to this file: ``.graphml``, ``.gexf`` or ``.csv`` (then
            ``NAME.nodes.csv`` and ``NAME.edges.csv``).
        options: CrawlConfig fields (default ``link_set="links"``: the pages' navigational
            links) and the checker's (``external``, default off for an audit).

    Raises:
        ConfigError: a bad option, naming the key.
    """
    if max_click_depth < 0:
        raise ConfigError("must be 0 or more", key="max_click_depth")
    if graph is not None and graph_format(graph) is None:
        raise ConfigError(f"the name must end in {', '.join(GRAPH_FORMATS)}", key="graph")
    opts = dict(options)
    if config is None:
        opts.setdefault("link_set", "links")
    opts.setdefault("external", False)
    opts.setdefault("ignore_fragments", True)
    cfg, check_opts = split_options(seeds, config, opts)
    auditor = Auditor(
        cfg, check_opts, sitemaps=tuple(sitemaps), max_click_depth=max_click_depth, graph=graph
    )
    return await auditor.audit()


def audit_sync(
    seeds: str | Iterable[str] = (), *, config: CrawlConfig | None = None, **options: Any
) -> AuditReport:
    """``audit()`` for scripts: runs its own event loop."""
    return asyncio.run(audit(seeds, config=config, **options))
