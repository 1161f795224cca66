"""A crawl in Redis read from outside: its settings and where it stands.

For ``crawler status --state redis://...`` and for the CLI's check of the stored settings
before a worker opens the state: a synchronous client, no lease taken, nothing written,
while workers run or not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from crawler.state._redis_link import reason, redacted
from crawler.state._redis_scripts import DEFAULT_NAME, VERSION, prefix_of
from crawler.state.base import Counts, StateError

__all__ = ["RedisStatus", "counts_of", "read_settings", "read_status"]


@dataclass(frozen=True, slots=True)
class RedisStatus:
    """Where a crawl in Redis stands (``RedisState.read_status``; nothing written, no lease).

    Attributes:
        location: the Redis URL (password hidden) and, after " name=", the crawl name.
        name: the crawl name.
        version: the key layout version found.
        counts: queued (held retries included), leased (cluster-wide, now), done, failed by
            kind, seen, origins with work, recovered (leases returned, crawl's lifetime).
        hosts: hosts with at least one request queued or done.
        counters: the crawl's named counters.
        settings: the stored settings (None before a first run stored them).
        seeds: the settings' seeds (if stored).
        created: server time the crawl was created.
        workers: workers whose heartbeat has not lapsed.
        pages_per_second: completions a second over the last minute (over the crawl's age
            if it is younger; by Redis's clock and the completing workers' clocks).
        redis_memory: Redis's ``used_memory`` (bytes, the whole database).
    """

    location: str
    name: str
    version: int
    counts: Counts
    hosts: int
    counters: dict[str, int]
    settings: dict[str, Any] | None
    seeds: list[str]
    created: float
    workers: int
    pages_per_second: float
    redis_memory: int = 0
    in_use_by: int | None = None  # as SQLite's StateStatus: not a lock here (see workers)
    files: dict[str, int] = field(default_factory=dict)


def _sync_client(url: str) -> Any:
    import redis  # noqa: PLC0415

    try:
        return redis.Redis.from_url(url, socket_connect_timeout=5.0, socket_timeout=10.0)
    except ValueError as e:
        raise StateError(f"{redacted(url)}: not a usable Redis URL: {e}") from e


def _check_version(client: Any, url: str, name: str, *, missing_ok: bool) -> bool:
    import redis.exceptions as rexc  # noqa: PLC0415

    where = f"{redacted(url)} name={name}"
    try:
        found = client.get(prefix_of(name) + "v")
    except (rexc.RedisError, OSError) as e:
        raise StateError(f"{where}: cannot use Redis: {reason(e)}") from e
    if found is None:
        if missing_ok:
            return False
        raise StateError(f"{where}: no crawl named {name!r} in this database")
    if found.decode() != VERSION:
        raise StateError(
            f"{where}: key layout version {found.decode()!r}, this crawler reads"
            f" version {VERSION!r}"
        )
    return True


def read_settings(url: str, name: str | None = None) -> dict[str, Any] | None:
    """``RedisState.read_settings``: the stored settings of crawl ``name`` (None: none yet)."""
    name = name or DEFAULT_NAME
    client = _sync_client(url)
    try:
        if not _check_version(client, url, name, missing_ok=True):
            return None
        raw = client.get(prefix_of(name) + "settings")
    finally:
        client.close()
    return None if raw is None else dict(json.loads(raw))


def read_status(url: str, name: str | None = None) -> RedisStatus:
    """``RedisState.read_status``: where crawl ``name`` stands."""
    import redis.exceptions as rexc  # noqa: PLC0415

    name = name or DEFAULT_NAME
    p = prefix_of(name)
    client = _sync_client(url)
    try:
        _check_version(client, url, name, missing_ok=False)
        try:
            pipe = client.pipeline(transaction=True)
            pipe.hgetall(p + "c")
            pipe.hgetall(p + "f")
            pipe.get(p + "n")
            pipe.hlen(p + "h")
            pipe.hgetall(p + "k")
            pipe.get(p + "settings")
            pipe.get(p + "created")
            pipe.hgetall(p + "rate")
            pipe.time()
            c, f, n, hosts, k, settings, created, rate, now = pipe.execute()
            server_now = now[0] + now[1] / 1e6
            workers = client.zcount(p + "workers", server_now, "+inf")
            memory = int(client.info("memory").get("used_memory", 0))
        except (rexc.RedisError, OSError) as e:
            raise StateError(f"{redacted(url)} name={name}: cannot read: {reason(e)}") from e
    finally:
        client.close()
    stored = None if settings is None else dict(json.loads(settings))
    seeds = list(stored.get("seeds", [])) if stored else []
    return RedisStatus(
        location=f"{redacted(url)} name={name}",
        name=name,
        version=int(VERSION),
        counts=counts_of(c, f, n),
        hosts=int(hosts),
        counters={kk.decode(): int(v) for kk, v in k.items()},
        settings=stored,
        seeds=seeds,
        created=float(created or 0.0),
        workers=int(workers),
        pages_per_second=_rate(rate, server_now, float(created or 0.0)),
        redis_memory=memory,
    )


def counts_of(c: dict[bytes, bytes], f: dict[bytes, bytes], n: Any) -> Counts:
    """The Counts in the crawl's ``P c`` and ``P f`` hashes and ``P n`` (``RedisState.counts``)."""

    def get(key: bytes) -> int:
        return max(0, int(c.get(key, 0)))

    return Counts(
        queued=get(b"queued"),
        leased=get(b"leased"),
        done=get(b"done"),
        failed={k.decode(): int(v) for k, v in f.items() if int(v)},
        seen=int(n or 0),
        origins=get(b"origins"),
        recovered=get(b"recovered"),
    )


def _rate(buckets: dict[bytes, bytes], now: float, created: float, window: int = 60) -> float:
    """Completions a second over the last ``window`` seconds (10-second buckets; the
    bucket in progress counts for the part of it that has passed), or over the crawl's
    age when it is younger (at least a second)."""
    current = int(now // 10)
    first = current - window // 10
    total = sum(int(v) for k, v in buckets.items() if first < int(k) <= current)
    span = window - 10 + (now - current * 10)
    if created > 0:
        span = min(span, max(1.0, now - created))
    return total / span if span > 0 else 0.0
