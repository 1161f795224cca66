"""``--cache FILE``: results of external links kept between runs.

A JSON file ``{"version": 1, "results": {url: {...}}}``. Only a URL that worked is kept
(errors are never cached: a link down today is checked again tomorrow), each with the time it
was checked; an entry older than ``max_age`` seconds is ignored and dropped. Written
atomically (a temporary file in the same directory, then ``os.replace``): a run killed while
saving leaves the old file whole. A file that cannot be read or parsed is treated as empty
(a cache must never fail a check run); one that cannot be written is an OSError for the
caller.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from crawler.check.probe import Verdict

__all__ = ["CACHE_VERSION", "ResultCache"]

CACHE_VERSION = 1


class ResultCache:
    """External link results by URL, loaded from and saved to one JSON file."""

    def __init__(self, path: str | os.PathLike[str], max_age: float = 86400.0) -> None:
        self.path = Path(path)
        self.max_age = max_age
        self.hits = 0
        self._entries: dict[str, dict[str, Any]] = {}
        self._load()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            return
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION:
            return
        results = data.get("results")
        if not isinstance(results, dict):
            return
        oldest = time.time() - self.max_age
        for url, entry in results.items():
            if (
                isinstance(url, str)
                and isinstance(entry, dict)
                and isinstance(entry.get("checked"), (int, float))
                and entry["checked"] >= oldest
            ):
                self._entries[url] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, url: str) -> Verdict | None:
        """The cached verdict of ``url`` if it is fresh, else None."""
        entry = self._entries.get(url)
        if entry is None:
            return None
        if entry["checked"] < time.time() - self.max_age:
            del self._entries[url]
            return None
        try:
            verdict = Verdict(
                url,
                status=int(entry["status"]),
                redirects=[str(u) for u in entry.get("redirects", [])],
                hop_statuses=[int(s) for s in entry.get("hop_statuses", [])],
                final_url=str(entry.get("final_url") or url),
                external=True,
                detail="from the cache",
            )
        except (KeyError, TypeError, ValueError):
            del self._entries[url]
            return None
        self.hits += 1
        return verdict

    def put(self, verdict: Verdict) -> None:
        """Keep a verdict that worked; an error is never kept (and drops an old entry)."""
        if verdict.error is not None or verdict.status is None:
            self._entries.pop(verdict.url, None)
            return
        self._entries[verdict.url] = {
            "checked": time.time(),
            "status": verdict.status,
            "redirects": list(verdict.redirects),
            "hop_statuses": list(verdict.hop_statuses),
            "final_url": verdict.final_url,
        }

    def save(self) -> None:
        """Write the file atomically."""
        data = {"version": CACHE_VERSION, "results": self._entries}
        directory = self.path.parent
        fd, tmp = tempfile.mkstemp(prefix=self.path.name + ".", suffix=".tmp", dir=directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, separators=(",", ":"))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
