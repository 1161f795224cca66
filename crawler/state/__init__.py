"""Crawl state backends behind one protocol (`crawler.state.base.CrawlState`).

``open_state(url)`` picks the backend from the state URL, so that the engine never builds
one itself: None or "" is memory, ``redis://``, ``rediss://`` and ``unix://`` are Redis
(``crawler.state.redis``, which imports redis-py: only then), anything else is a directory
for SQLite.
"""

from __future__ import annotations

from crawler.config import CrawlConfig, is_redis_url  # the one rule, with the config's
from crawler.state.base import (
    KIND_PAGE,
    KIND_SITEMAP,
    Candidate,
    Counts,
    CrawlState,
    Lease,
    Outcome,
    StateError,
    StoredRobots,
)

__all__ = [
    "KIND_PAGE",
    "KIND_SITEMAP",
    "Candidate",
    "Counts",
    "CrawlState",
    "Lease",
    "Outcome",
    "StateError",
    "StoredRobots",
    "is_redis_url",
    "open_state",
    "state_for",
]


def open_state(
    url: str | None,
    *,
    synchronous: str = "normal",
    name: str | None = None,
    lease_timeout: float = 0.0,
    request_timeout: float = 30.0,
    host_split: int = 0,
    seeds: tuple[str, ...] = (),
) -> CrawlState:
    """The backend for state URL ``url`` (not opened yet: call ``await state.open(...)``).

    Args:
        url: None or "" for memory, ``redis://``/``rediss://``/``unix://`` for Redis, a
            directory for SQLite.
        synchronous: SQLite's ``synchronous`` ("normal" or "full", config key
            ``state_sync``); memory and Redis ignore it (Redis's persistence is its own
            configuration: appendonly, appendfsync).
        name: the crawl's name in a Redis database (key prefix; "default" if None);
            ignored by the others.
        lease_timeout: seconds a Redis lease lasts unless its worker renews it (0:
            automatic, ``max(60, 3 x request_timeout)``); ignored by the others.
        request_timeout: the crawl's request timeout (config ``timeout``), for the
            automatic lease timeout.
        host_split, seeds: a new Redis crawl's parts of a host (config ``host_split``; the
            seeds for the automatic choice); ignored by the others.
    """
    if not url:
        from crawler.state.memory import MemoryState  # noqa: PLC0415

        return MemoryState()
    if is_redis_url(url):
        from crawler.state.redis import RedisState  # noqa: PLC0415

        return RedisState(
            url,
            name=name,
            lease_timeout=lease_timeout,
            request_timeout=request_timeout,
            host_split=host_split,
            seeds=seeds,
        )
    from crawler.state.sqlite import SQLiteState  # noqa: PLC0415

    return SQLiteState(url, synchronous=synchronous)


def state_for(cfg: CrawlConfig) -> CrawlState:
    """``open_state`` with a crawl configuration's keys (what the engine opens)."""
    return open_state(
        cfg.state,
        synchronous=cfg.state_sync,
        name=cfg.name,
        lease_timeout=cfg.lease_timeout,
        request_timeout=cfg.timeout,
        host_split=cfg.host_split,
        seeds=cfg.seeds,
    )
