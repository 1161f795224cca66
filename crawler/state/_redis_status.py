"""A crawl in Redis read from outside: its settings and where it stands.

For ``crawler status --state redis://...`` and for the CLI's check of the stored settings
before a worker opens the state: a synchronous client, no lease taken, nothing written,
while workers run or not. Everything is read through the ``read`` script (types and sizes
checked inside Redis, ``crawler.state._redis_check``) and checked again here: a damaged
crawl is a StateError naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from crawler.state._redis_check import (
    MAX_FIELDS,
    MAX_SETTINGS,
    READ,
    as_float,
    as_int,
    bad_state,
    damaged,
    int_hash,
    json_object,
    read_args,
    text_of,
)
from crawler.state._redis_cluster import sync_client
from crawler.state._redis_link import reason, redacted
from crawler.state._redis_scripts import (
    DEFAULT_NAME,
    READABLE,
    SCRIPTS,
    VERSION,
    prefix_of,
    shard_prefix,
)
from crawler.state.base import Counts, StateError

__all__ = [
    "RedisStatus",
    "Tally",
    "counter_blob",
    "counters_of",
    "counts_of",
    "read_settings",
    "read_status",
    "tally_of",
]


def counter_blob(totals: dict[str, int]) -> str:
    """A worker run's named counters as ``P kw`` keeps them."""
    return "\n".join(f"{name}={n}" for name, n in totals.items() if "\n" not in name)


def counters_of(where: str, prefix: str, k: Any, kw: Any) -> dict[str, int]:
    """The crawl's named counters: ``P k`` (as the ``read`` script returns it) plus every
    worker run's totals in ``P kw`` (HGETALL)."""
    out = int_hash(where, prefix + "k", k)
    items = kw.items() if isinstance(kw, dict) else zip(kw[::2], kw[1::2], strict=True)
    for _field, blob in items:
        text = text_of(where, prefix + "kw", bytes(blob))
        for line in text.split("\n") if text else ():
            name, sep, n = line.rpartition("=")
            if not sep:
                raise damaged(where, prefix + "kw", "holds a line that is not name=number")
            out[name] = out.get(name, 0) + as_int(where, prefix + "kw", n)
    return out


@dataclass(frozen=True, slots=True)
class RedisStatus:
    """Where a crawl in Redis stands (``RedisState.read_status``; nothing written, no lease).

    Attributes:
        location: the Redis URL (password hidden) and, after " name=", the crawl name.
        name: the crawl name.
        version: the key layout version found.
        counts: queued (held retries included), leased (cluster-wide, now), done, failed by
            kind, seen, origins with work, recovered (leases returned, crawl's lifetime).
        hosts: hosts with at least one request queued or done (with a split K: the host
            parts counted, divided by K, rounded up).
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
    import redis.exceptions as rexc  # noqa: PLC0415

    try:
        return sync_client(url, redacted(url))
    except (rexc.RedisError, OSError) as e:
        raise StateError(f"{redacted(url)}: cannot use Redis: {reason(e)}") from None


def _tally_sync(client: Any, name: str, shards: int) -> tuple[Any, list[Any]]:
    """``tally`` and ``sums`` read by a synchronous client (one script a shard on a
    cluster, pipelined)."""
    from redis.cluster import RedisCluster  # noqa: PLC0415

    p = prefix_of(name)
    raw = client.eval(SCRIPTS["tally"], 1, p, shards, 1)
    # (``P c`` first: the counts of a crawl that keeps them there; the shards' ``S c`` are
    # empty then, their ``S h`` and ``HLEN S p`` still read)
    keys = [p] + [shard_prefix(name, int(k)) for k in sorted(int(k) for k in raw[3])]
    if not isinstance(client, RedisCluster):
        return raw, [client.eval(SCRIPTS["sums"], len(keys), *keys, 1)]
    sha = client.script_load(SCRIPTS["sums"])
    pipe: Any = client.pipeline()  # type: ignore[no-untyped-call]
    for key in keys:
        pipe.evalsha(sha, 1, key, 1)
    return raw, list(pipe.execute())


def _used_memory(client: Any) -> int:
    """Redis's ``used_memory``: summed over the nodes of a cluster."""
    from redis.cluster import RedisCluster  # noqa: PLC0415

    if isinstance(client, RedisCluster):
        found = client.info("memory", target_nodes=RedisCluster.PRIMARIES)
        if isinstance(found, dict) and "used_memory" not in found:
            return sum(int(v.get("used_memory", 0)) for v in found.values())
        return int(found.get("used_memory", 0))
    return int(client.info("memory").get("used_memory", 0))


def _read(client: Any, where: str, name: str, *items: tuple[str, str, int]) -> list[Any]:
    """The ``read`` script's values of crawl ``name``'s version key and ``items``."""
    import redis.exceptions as rexc  # noqa: PLC0415

    try:
        values: list[Any] = client.eval(
            READ, 1, prefix_of(name), *read_args(("v", "s", 64), *items)
        )
    except (rexc.RedisError, OSError) as e:
        found = bad_state(where, str(e)) if isinstance(e, rexc.ResponseError) else None
        raise found or StateError(f"{where}: cannot use Redis: {reason(e)}") from None
    return values


def _check_version(where: str, name: str, found: Any, *, missing_ok: bool) -> bool:
    if found is None:
        if missing_ok:
            return False
        raise StateError(f"{where}: no crawl named {name!r} in this database")
    if found.decode("utf-8", "replace") not in READABLE:
        raise StateError(
            f"{where}: key layout version {found.decode('utf-8', 'replace')!r}, this crawler"
            f" reads version {VERSION!r} (crawls made by an older crawler cannot be continued:"
            " finish it with that version, or use another --name or another database)"
        )
    return True


def read_settings(url: str, name: str | None = None) -> dict[str, Any] | None:
    """``RedisState.read_settings``: the stored settings of crawl ``name`` (None: none yet)."""
    name = name or DEFAULT_NAME
    where = f"{redacted(url)} name={name}"
    client = _sync_client(url)
    try:
        found, raw = _read(client, where, name, ("settings", "s", MAX_SETTINGS))
    finally:
        client.close()
    if not _check_version(where, name, found, missing_ok=True) or raw is None:
        return None
    return json_object(where, prefix_of(name) + "settings", raw)


def read_status(url: str, name: str | None = None) -> RedisStatus:
    """``RedisState.read_status``: where crawl ``name`` stands."""
    import redis.exceptions as rexc  # noqa: PLC0415

    name = name or DEFAULT_NAME
    p = prefix_of(name)
    where = f"{redacted(url)} name={name}"
    client = _sync_client(url)
    try:
        found, cfg, k, settings, created, rate, now, workers = _read(
            client, where, name,
            ("cfg", "h", MAX_FIELDS),
            ("k", "h", MAX_FIELDS), ("settings", "s", MAX_SETTINGS), ("created", "s", 64),
            ("rate", "h", MAX_FIELDS), ("", "t", 0), ("workers", "w", 0),
        )  # fmt: skip
        _check_version(where, name, found, missing_ok=False)
        fixed = int_hash(where, p + "cfg", [x.split(b".")[0] for x in cfg])
        shards, split = fixed.get("shards", 0), max(1, fixed.get("split", 1))
        try:
            raw, sums = _tally_sync(client, name, shards)
            tally = tally_of(where, raw, sums, "", 0)
            hosts = -(-counts_of(where, sums)[1] // split)  # a split host: in K shards' S h
            kw = client.hgetall(p + "kw")
            memory = _used_memory(client)
        except (rexc.RedisError, OSError) as e:
            found = bad_state(where, str(e)) if isinstance(e, rexc.ResponseError) else None
            raise found or StateError(f"{where}: cannot read: {reason(e)}") from e
    finally:
        client.close()
    stored = None if settings is None else json_object(where, p + "settings", settings)
    seeds = stored.get("seeds", []) if stored else []
    if not isinstance(seeds, list) or not all(isinstance(s, str) for s in seeds):
        raise damaged(where, p + "settings", "holds seeds that are not a list of URLs")
    server_now = float(now)
    born = as_float(where, p + "created", created)
    return RedisStatus(
        location=where,
        name=name,
        version=int(found),
        counts=tally.counts,
        hosts=int(hosts) or tally.counts.origins,
        counters=counters_of(where, p, k, kw),
        settings=stored,
        seeds=list(seeds),
        created=born,
        workers=int(workers),
        pages_per_second=_rate(int_hash(where, p + "rate", rate), server_now, born),
        redis_memory=memory,
    )


@dataclass(frozen=True, slots=True)
class Tally:
    """The whole crawl as the ``tally`` script reads it: ``counts`` (queued: open requests
    less those the workers last reported out; leased: those; origins: with work, summed over
    the workers' reports), whether another worker is busy, requests waiting in inboxes,
    shards without a live claim."""

    counts: Counts
    open_requests: int
    others_busy: bool
    inbox: int
    orphans: int


def tally_of(where: str, raw: Any, sums: list[Any], me: str, mine: int) -> Tally:
    """The ``tally`` script's answer and the ``sums`` replies (one or one a shard); worker
    ``me`` (if any) counts ``mine`` leases out and its own report is left aside."""
    reports, inbox, orphans = raw[:3]
    leased = mine
    origins = 0
    others_busy = False
    for i in range(0, len(reports), 2):
        if reports[i].decode("utf-8", "replace") == me:
            continue
        parts = reports[i + 1].split()
        if len(parts) >= 4:
            try:
                leased += max(0, int(parts[1]))
                others_busy = others_busy or parts[2] == b"1"
                origins += max(0, int(parts[3]))
            except ValueError:
                continue
    counts, _hosts = counts_of(where, sums)
    opened = counts.queued
    return Tally(
        Counts(
            queued=max(0, opened - leased),
            leased=leased,
            done=counts.done,
            failed=counts.failed,
            seen=counts.seen,
            origins=origins,
            recovered=counts.recovered,
        ),
        opened,
        others_busy,
        int(inbox),
        int(orphans),
    )


def counts_of(where: str, sums: list[Any]) -> tuple[Counts, int]:
    """The Counts that the ``sums`` replies add up to (the shards' open requests and ``S c``,
    checked inside Redis), and the hosts in the ``max_pages_per_host`` budget."""
    totals: dict[str, int] = {}
    failed: dict[str, int] = {}
    hosts = 0
    for flat, h in sums:
        for name, n in int_hash(where, "the shards' counts", flat).items():
            into, name = (failed, name[2:]) if name.startswith("f:") else (totals, name)
            into[name] = into.get(name, 0) + n
        hosts += int(h)

    if "q" in totals:  # (a crawl with its counts in P c: what is open is q - done)
        totals["queued"] = totals.pop("q") - totals.get("done", 0)

    def get(key: str) -> int:
        return max(0, totals.get(key, 0))

    counts = Counts(
        queued=get("queued"),
        leased=0,
        done=get("done"),
        failed={k: v for k, v in failed.items() if v},
        seen=get("queued") + get("done") + get("x"),
        origins=0,
        recovered=get("recovered"),
    )
    return counts, hosts


def _rate(buckets: dict[str, int], now: float, created: float, window: int = 60) -> float:
    """Completions a second over the last ``window`` seconds (10-second buckets; the
    bucket in progress counts for the part of it that has passed), or over the crawl's
    age when it is younger (at least a second)."""
    current = int(now // 10)
    first = current - window // 10
    total = sum(v for k, v in buckets.items() if k.isdigit() and first < int(k) <= current)
    span = window - 10 + (now - current * 10)
    if created > 0:
        span = min(span, max(1.0, now - created))
    return total / span if span > 0 else 0.0
