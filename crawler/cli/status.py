"""``crawler status --state DIR``: where a stored crawl stands, for people (text) and scripts
(json), read without running or changing it (``SQLiteState.read_status``: read-only, no lock,
so it also works while the crawl runs).

``crawler status --state redis://HOST:PORT/DB [--name NAME]``: the cluster's view of a shared
crawl (``RedisState.read_status``: reads only, while workers run): the same counts, plus the
workers alive (by heartbeat), pages a second (over the last minute, or the crawl's age if
shorter) and Redis's memory.

The command's parser and ``cmd_status`` live here too; crawler/cli/main.py imports this module
only for ``crawler status`` (it imports the config, the settings and the state's errors).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from crawler.cli.options import COMMAND_HELP, EXIT_OK, EXIT_USAGE, Formatter, err
from crawler.config import ConfigError, CrawlConfig, as_toml_value, is_redis_url
from crawler.core.settings import CRAWL_DEFINING, PER_RUN, stored_config
from crawler.output.controls import escape_controls
from crawler.output.progress import human_bytes
from crawler.state.base import StateError

# The error kind of a URL robots.txt disallowed (a completion, but not a fetch that failed).
ROBOTS_DISALLOWED = "robots_disallowed"

__all__ = ["add_parser", "as_dict", "cmd_status", "render"]


def _read(state: str, name: str | None = None) -> Any:
    if is_redis_url(state):
        try:
            from crawler.state.redis import RedisState  # noqa: PLC0415  (redis-py when asked)
        except ImportError as exc:
            raise StateError(f"the Redis state is not available: {exc}") from None
        return RedisState.read_status(state, name)
    from crawler.state.sqlite import SQLiteState  # noqa: PLC0415  (sqlite3 only when asked)

    return SQLiteState.read_status(state)


def _shared(status: Any) -> bool:
    return hasattr(status, "workers")


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
    } | (
        {
            "name": status.name,
            "workers": status.workers,
            "pages_per_second": status.pages_per_second,
            "redis_memory": status.redis_memory,
        }
        if _shared(status)
        else {}
    )


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
    created = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(d["created"]))
    if _shared(status):
        workers = d["workers"]
        running = f"{_plural(workers, 'worker')} alive" if workers else "no worker alive"
        flight = (
            "now (leased by workers)"
            if workers
            else (
                "leased by workers that stopped (loaded again when their claims lapse)"
                if d["in_flight"]
                else "now"
            )
        )
        where = f"{human_bytes(d['redis_memory'])} Redis memory (the whole database)"
    elif pid is None:
        running = "not running"
        flight = "at the last stop" + (" (fetched again on resume)" if d["in_flight"] else "")
        where = f"{human_bytes(size)} on disk"
    else:
        running = f"running as process {pid}" if pid > 0 else "running"
        flight = "now"
        where = f"{human_bytes(size)} on disk"
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
        f"state:     {d['state']} ({running}; format {d['version']}; {where}; created {created})",
        f"queued:    {d['queued']}",
        f"in flight: {d['in_flight']} {flight}",
        done,
    ]
    if _shared(status):
        lines.append(
            f"rate:      {d['pages_per_second']:.1f} pages/s over the last minute (or since the"
            " crawl started, if later)"
        )
    lines += [
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
    return "\n".join(_printable(line) for line in lines) + "\n"


def _printable(line: str) -> str:
    """A line of the text status with what was read from the state made safe to print:
    controls (ESC, BEL, C1 such as U+009B, and a newline that would fake another line) as
    ``\\xNN``, a lone surrogate (JSON may hold one) as ``\\udNNN``."""
    return escape_controls(line).encode("utf-8", "backslashreplace").decode("utf-8")


def render(state: str, fmt: str = "text", name: str | None = None) -> str:
    """The status of the crawl stored at ``state`` (a directory, or a redis:// URL and the
    crawl's ``name``) as text or JSON (one line).

    Raises:
        StateError: no state there, not a crawl state, another version, corrupt; Redis
            unreachable or no such crawl in it.
    """
    status = _read(state, name)
    if fmt == "json":
        return json.dumps(as_dict(status), sort_keys=True) + "\n"
    return _text(status)


def add_parser(sub: Any) -> None:
    """Add the ``status`` command to the ``crawler`` parser's subparsers."""
    st = sub.add_parser(
        "status",
        help=COMMAND_HELP["status"],
        description="Print where the crawl kept in --state DIR stands: queued, in flight at "
        "the last stop, fetched, failed by kind, hosts, seeds and settings; with a "
        "redis://HOST:PORT/DB state, the cluster: also workers alive and pages/s. Read-only: "
        "it neither runs nor changes the crawl, and works while the crawl runs.",
        formatter_class=Formatter,
        epilog="exit codes: 0 printed, 2 no such state (or crawl in Redis), a state this"
        " version cannot read, or Redis unreachable",
    )
    st.add_argument(
        "--state",
        required=True,
        metavar="DIR|URL",
        help="the crawl's state directory, or its redis://HOST:PORT/DB",
    )
    st.add_argument(
        "--name",
        metavar="NAME",
        help="with a redis:// state: the crawl's name (default: the crawl without --name)",
    )
    st.add_argument(
        "--format",
        "-f",
        choices=("text", "json"),
        default="text",
        help="text for people, json for scripts (default: text)",
    )


def cmd_status(args: argparse.Namespace) -> int:
    """``crawler status --state DIR``: print where the stored crawl stands; change nothing."""
    try:
        state = CrawlConfig(state=args.state, name=args.name).validated().state
        assert state is not None
        text = render(state, args.format, args.name)
    except ConfigError as exc:
        err(f"--{exc.key}: {exc.reason}" if exc.key in ("state", "name") else str(exc))
        return EXIT_USAGE
    except StateError as exc:
        err(str(exc))
        return EXIT_USAGE
    sys.stdout.write(text)
    sys.stdout.flush()
    return EXIT_OK
