"""Crawl state backends behind one protocol (`crawler.state.base.CrawlState`).

``open_state(url)`` picks the backend from the state URL, so that the engine never builds
one itself: None or "" is memory, ``redis://`` is Redis (not yet), anything else is a
directory for SQLite.
"""

from __future__ import annotations

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
    "open_state",
]


def open_state(url: str | None, *, synchronous: str = "normal") -> CrawlState:
    """The backend for state URL ``url`` (not opened yet: call ``await state.open(...)``).

    Args:
        url: None or "" for memory, a directory for SQLite.
        synchronous: SQLite's ``synchronous`` ("normal" or "full", config key
            ``state_sync``); a memory state has nothing to sync and ignores it.

    Raises:
        StateError: a scheme no backend serves.
    """
    if not url:
        from crawler.state.memory import MemoryState  # noqa: PLC0415

        return MemoryState()
    if url.startswith(("redis://", "rediss://", "unix://")):
        raise StateError(f"{url}: Redis state is not available in this version")
    from crawler.state.sqlite import SQLiteState  # noqa: PLC0415

    return SQLiteState(url, synchronous=synchronous)
