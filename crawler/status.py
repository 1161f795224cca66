"""``crawler status --state DIR``: where a stored crawl stands, for people (text) and scripts
(json), read without running or changing it (``SQLiteState.read_status``: read-only, no lock,
so it also works while the crawl runs).
"""

from __future__ import annotations

import json
import time
from typing import Any

from crawler.config import CrawlConfig, as_toml_value
from crawler.progress import human_bytes
from crawler.settings import CRAWL_DEFINING, PER_RUN, stored_config
from crawler.state.base import StateError

# The error kind of a URL robots.txt disallowed (a completion, but not a fetch that failed).
ROBOTS_DISALLOWED = "robots_disallowed"

__all__ = ["as_dict", "render"]


def _read(directory: str) -> Any:
    from crawler.state.sqlite import SQLiteState  # noqa: PLC0415  (sqlite3 only when asked)

    return SQLiteState.read_status(directory)


def as_dict(status: Any) -> dict[str, Any]:
    """The status as JSON-able data (the ``--format json`` schema, one object)."""
    counts = status.counts
    failed = dict(counts.failed)
    return {
        "state": status.location,
        "version": status.version,
        "in_use_by": status.in_use_by,
        "created": status.created,
        "files": dict(status.files),
        "queued": counts.queued,
        "in_flight": counts.leased,
        "done": counts.done,
        "ok": counts.done - sum(failed.values()),  # failed includes robots_disallowed
        "failed": failed,
        "seen": counts.seen,
        "hosts": status.hosts,
        "origins_with_work": counts.origins,
        "seeds": list(status.seeds),
        "counters": dict(status.counters),
        "settings": status.settings,
    }


def _changed(cfg: CrawlConfig, keys: dict[str, str]) -> str:
    base = CrawlConfig()
    shown = [
        f"{key} = {as_toml_value(getattr(cfg, key))}"
        for key in keys
        if getattr(cfg, key) != getattr(base, key)
    ]
    return ", ".join(shown) if shown else "all at their defaults"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _text(status: Any) -> str:
    d = as_dict(status)
    size = sum(d["files"].values())
    pid = d["in_use_by"]
    if pid is None:
        running = "not running"
        flight = "at the last stop" + (" (fetched again on resume)" if d["in_flight"] else "")
    else:
        running = f"running as process {pid}" if pid > 0 else "running"
        flight = "now"
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(d["created"]))
    failed = dict(d["failed"])
    skipped = failed.pop(ROBOTS_DISALLOWED, 0)
    kinds = ", ".join(f"{k} {n}" for k, n in sorted(failed.items(), key=lambda kv: (-kv[1], kv[0])))
    done = (
        f"done:      {d['done']} ({d['ok']} ok, {sum(failed.values())} failed"
        + (f": {kinds}" if kinds else "")
        + (f"; {skipped} disallowed by robots.txt" if skipped else "")
        + ")"
    )
    lines = [
        f"state:     {d['state']} ({running}; format {d['version']}; {human_bytes(size)}"
        f" on disk; created {created})",
        f"queued:    {d['queued']}",
        f"in flight: {d['in_flight']} {flight}",
        done,
        f"seen:      {_plural(d['seen'], 'URL')} on {_plural(d['hosts'], 'host')}"
        f" ({_plural(d['origins_with_work'], 'origin')} with work left)",
        f"seeds:     {' '.join(d['seeds']) if d['seeds'] else 'none'}",
    ]
    if d["settings"] is None:
        lines.append("settings:  none stored yet")
    else:
        try:
            cfg = stored_config(d["settings"])
        except StateError as exc:
            lines.append(f"settings:  unreadable ({exc})")
        else:
            lines.append(f"crawl:     {_changed(cfg, CRAWL_DEFINING)} (fixed for this crawl)")
            lines.append(f"last run:  {_changed(cfg, PER_RUN)}")
    if d["queued"] == 0 and d["in_flight"] == 0:
        lines.append("nothing left to crawl")
    return "\n".join(lines) + "\n"


def render(directory: str, fmt: str = "text") -> str:
    """The status of the crawl stored in ``directory`` as text or JSON (one line).

    Raises:
        StateError: no state there, not a crawl state, another version, corrupt.
    """
    status = _read(directory)
    if fmt == "json":
        return json.dumps(as_dict(status), sort_keys=True) + "\n"
    return _text(status)
