"""The Redis state's client: one Redis server, or a Redis Cluster found at open.

A Redis URL names one server (``redis://``, ``rediss://``, ``unix://``). At open the crawler
asks it ``INFO cluster``: a node with ``cluster_enabled:1`` is one of a cluster's, and the
state then talks to the whole cluster through redis-py's ``RedisCluster`` (its slot map,
MOVED/ASK redirections and node discovery: nothing hand-made here), with the URL's node as
the first one it asks. So the same ``--state redis://HOST:PORT/0`` works with either; a
cluster takes database 0 only (Redis Cluster has no other).

What changes on a cluster is how the per-shard scripts are sent (``calls_for``): on one
server a chunk's records of many shards go in one script call (its keys the shards'
prefixes); on a cluster each shard's records are one call (a script's keys must be in one
slot, and each shard is one slot), the calls of a chunk sent in one pipeline, which redis-py
splits by node and sends to the nodes at once: one round trip a node.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from crawler.state.base import StateError

__all__ = ["Call", "calls_for", "cluster_errors", "connect", "is_cluster_info", "sync_client"]

#: One script call: (script name, its KEYS, its ARGV).
Call = tuple[str, list[str], list[Any]]

_ENABLED = re.compile(rb"^cluster_enabled:1\s*$", re.MULTILINE)


def is_cluster_info(info: Any) -> bool:
    """True if an ``INFO cluster`` reply (parsed dict or raw bytes) says cluster mode."""
    if isinstance(info, dict):
        return str(info.get("cluster_enabled", 0)) == "1"
    raw = info if isinstance(info, bytes) else str(info).encode()
    return _ENABLED.search(raw) is not None


def cluster_errors() -> tuple[type[BaseException], ...]:
    """A cluster's errors that are an outage (retried like a connection error): the cluster
    down or a slot not served (a failover under way), redirections redis-py gave up on."""
    import redis.exceptions as rexc  # noqa: PLC0415

    return (
        rexc.ClusterDownError,
        rexc.TryAgainError,
        rexc.ClusterError,
        rexc.SlotNotCoveredError,
        rexc.MovedError,
        rexc.AskError,
    )


async def connect(
    url: str, where: str, on_connect: Callable[[Any], Awaitable[None]]
) -> tuple[Any, bool]:
    """An asyncio client for ``url`` (its first connection made) and whether it is a
    cluster's. Raises what redis-py raises when Redis does not answer; StateError on a URL
    it cannot use."""
    import redis.asyncio as aioredis  # noqa: PLC0415
    from redis.asyncio.cluster import RedisCluster  # noqa: PLC0415
    from redis.exceptions import RedisClusterException  # noqa: PLC0415

    options: dict[str, Any] = {
        "socket_connect_timeout": 5.0,
        "socket_timeout": 10.0,
        "redis_connect_func": on_connect,
    }
    try:
        client: Any = aioredis.Redis.from_url(url, **options)
    except ValueError as e:
        raise StateError(f"{where}: not a usable Redis URL: {e}") from e
    try:
        await client.ping()
        info = await client.execute_command("INFO", "cluster")
    except BaseException:
        await client.aclose()
        raise
    if not is_cluster_info(info):
        return client, False
    await client.aclose()
    del options["redis_connect_func"]
    try:
        cluster = RedisCluster.from_url(url, **options)
    except (ValueError, RedisClusterException) as e:
        raise StateError(f"{where}: not a usable Redis Cluster URL: {e}") from e
    # The asyncio RedisCluster takes no redis_connect_func; its connection options (one dict,
    # shared with its node manager, which makes every node it discovers from it; the startup
    # node holds a copy) are public (``get_connection_kwargs``): the hook that sees a node's
    # restart (its run_id) goes there, before the first connection.
    cluster.get_connection_kwargs()["redis_connect_func"] = on_connect
    for node in cluster.startup_nodes:
        node.connection_kwargs["redis_connect_func"] = on_connect
    try:
        await cluster.initialize()
    except BaseException:
        await cluster.aclose()
        raise
    return cluster, True


def sync_client(url: str, where: str) -> Any:
    """A synchronous client for ``url`` (``crawler status``): a ``RedisCluster`` when the
    node says it is a cluster's."""
    import redis  # noqa: PLC0415
    from redis.cluster import RedisCluster  # noqa: PLC0415

    options: dict[str, Any] = {"socket_connect_timeout": 5.0, "socket_timeout": 10.0}
    try:
        client: Any = redis.Redis.from_url(url, **options)
    except ValueError as e:
        raise StateError(f"{where}: not a usable Redis URL: {e}") from e
    try:
        info = client.execute_command("INFO", "cluster")
    except redis.exceptions.ResponseError:
        return client  # (an ACL without INFO: one server)
    except BaseException:
        client.close()
        raise
    if not is_cluster_info(info):
        return client
    client.close()
    try:
        return RedisCluster.from_url(url, **options)
    except (ValueError, redis.exceptions.RedisClusterException) as e:
        raise StateError(f"{where}: not a usable Redis Cluster URL: {e}") from e


def calls_for(
    name: str,
    head: Sequence[Any],
    records: Sequence[tuple[int, Sequence[Any]]],
    prefixes: Sequence[str],
    *,
    cluster: bool,
    home: str | None = None,
    framed: bool = False,
) -> tuple[list[Call], list[list[int]]]:
    """The script calls of ``records`` (shard, its ARGV fields), each record prefixed with
    its key's index in its call, and the positions of the records each call carries (in
    order): one call on one server, one a shard on a cluster. ``head`` starts every call's
    ARGV. A script's counts go to its first key: on one server, ``home`` (the crawl's
    prefix, in a crawl that keeps its counts in ``P c``) comes first when given.

    ``framed``: each record is one ``bytes`` field, and a call's records go in ONE argument
    after ``head``, each framed "<length>:<key index>\t<record>" (the scripts' ``unframe``):
    redis-py encodes every argument in Python, so one a call instead of two a record is the
    cheaper packing of the hot calls (``put``, ``complete``)."""
    calls: list[Call] = []
    positions: list[list[int]] = []
    if not cluster:
        keys: list[str] = [home] if home else []
        index: dict[int, int] = {}
        args: list[Any] = list(head)
        frames: list[bytes] = []
        for k, fields in records:
            ki = index.get(k)
            if ki is None:
                keys.append(prefixes[k])
                ki = index[k] = len(keys)
            if framed:
                body = b"%d\t%b" % (ki, fields[0])
                frames.append(b"%d:%b" % (len(body), body))
            else:
                args.append(ki)
                args.extend(fields)
        if records:
            if framed:
                args.append(b"".join(frames))
            calls.append((name, keys, args))
            positions.append(list(range(len(records))))
        return calls, positions
    by_shard: dict[int, tuple[list[Any], list[int]]] = {}
    for i, (k, fields) in enumerate(records):
        entry = by_shard.get(k)
        if entry is None:
            entry = by_shard[k] = ([], [])
        if framed:
            body = b"1\t%b" % fields[0]
            entry[0].append(b"%d:%b" % (len(body), body))
        else:
            entry[0].append(1)
            entry[0].extend(fields)
        entry[1].append(i)
    for k, (fields, where) in by_shard.items():
        args = [*head, b"".join(fields)] if framed else [*head, *fields]
        calls.append((name, [prefixes[k]], args))
        positions.append(where)
    return calls, positions
