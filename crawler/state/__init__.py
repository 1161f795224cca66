"""Crawl state backends behind one protocol (`crawler.state.base.CrawlState`).

``open_state(url)`` picks the backend from the state URL, so that the engine never builds
one itself: None or "" is memory, ``redis://``, ``rediss://`` and ``unix://`` are Redis
(``crawler.state.redis``, which imports redis-py: only then), anything else is a directory
for SQLite.
"""

from __future__ import annotations

from crawler.config import is_redis_url  # the one rule (case-insensitive), with the config's
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
]


def open_state(
    url: str | None,
    *,
    synchronous: str = "normal",
    name: str | None = None,
    lease_timeout: float = 0.0,
    request_timeout: float = 30.0,
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
    """
    if not url:
        from crawler.state.memory import MemoryState  # noqa: PLC0415

        return MemoryState()
    if is_redis_url(url):
        from crawler.state.redis import RedisState  # noqa: PLC0415

        return RedisState(
            url, name=name, lease_timeout=lease_timeout, request_timeout=request_timeout
        )
    from crawler.state.sqlite import SQLiteState  # noqa: PLC0415

    return SQLiteState(url, synchronous=synchronous)
