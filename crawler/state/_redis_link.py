"""One worker's link to Redis: calls retried through outages, restarts seen.

``RedisLink`` is the part of ``RedisState`` (a mixin: it holds no state of its own, it
reads and sets the worker's) that talks to Redis: a script (EVALSHA, loaded again on
NOSCRIPT: on a cluster, a node that never had it, after a failover or a resharding) or a
pipeline of commands is retried with exponential backoff while Redis is unreachable (on a
cluster also while it is down or a slot has no master: ``_redis_cluster.cluster_errors``),
and an outage or a restart of a Redis server (a new ``run_id`` at the same address) starts
a new epoch. ``_sharded`` runs a per-shard script over records of many shards: one call on
one server, one call a shard in one pipeline on a cluster.
The background tasks (heartbeat, inbox) are ``crawler.state._redis_shards``'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, TypeVar

from crawler.config import redact_url
from crawler.state._redis_check import (
    MAX_FIELDS,
    MAX_SETTINGS,
    MAX_SMALL,
    bad_state,
    damaged,
    expected_type,
)
from crawler.state._redis_cluster import Call, calls_for, cluster_errors
from crawler.state._redis_owner import ShardBook
from crawler.state._redis_scripts import FRAMED, SCRIPTS
from crawler.state.base import StateError
from crawler.urls.seen import MemorySeenSet

__all__ = [
    "BACKOFF_MAX",
    "BACKOFF_MIN",
    "HEARTBEAT_MAX",
    "RedisLink",
    "StaleWrite",
    "reason",
    "redacted",
    "redis_errors",
]

# The Redis state's one logger, named after its public module as before (logging is
# configured by that name).
log = logging.getLogger("crawler.state.redis")

#: Backoff bounds (seconds) when Redis is unreachable.
BACKOFF_MIN, BACKOFF_MAX = 0.1, 5.0
#: The longest heartbeat interval (seconds): a live worker renews its leases at least this
#: often, so after an outage two of them are enough for every worker to have renewed.
HEARTBEAT_MAX = 5.0

_T = TypeVar("_T")


class StaleWrite(Exception):  # noqa: N818  (a decision, not a failure)
    """A write made for an epoch that has ended, not sent: Redis came back (restarted, failed
    over, or after an outage) and may lack the writes it relied on (`RedisLink.writing_in`)."""


#: The epoch the write being made in this task belongs to (``RedisLink.writing_in``).
_WRITING_IN: ContextVar[int | None] = ContextVar("crawler_redis_writing_in", default=None)
_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*", re.IGNORECASE)


def redacted(url: str) -> str:
    """``url`` without its password (for messages, logs and status): the userinfo's
    (``crawler.config.redact_url``) and a ``password=`` query option's (redis-py takes both)."""
    return _QUERY_PASSWORD.sub(r"\1***", redact_url(url))


def redis_errors() -> tuple[type[BaseException], ...]:
    """The errors of an unreachable Redis, or a cluster down or failing over (retried;
    imports redis-py)."""
    import redis.exceptions as rexc  # noqa: PLC0415

    return (
        rexc.ConnectionError,
        rexc.TimeoutError,
        ConnectionError,
        TimeoutError,
        OSError,
        *cluster_errors(),
    )


def reason(e: BaseException) -> str:
    """The first line of ``e``'s message (its type's name if empty), for messages."""
    text = str(e) or type(e).__name__
    return text.splitlines()[0]


class RedisLink:
    """Calls to Redis with retries, and the background tasks, of ``RedisState``."""

    # Set by RedisState.__init__.
    location: str
    prefix: str
    lease_timeout: float
    heartbeat: float
    epoch: int
    calls: int
    _next_id: int
    #: Leases with an id up to this one were handed out in an earlier epoch (``_forget``).
    _lease_floor: int
    _local: MemorySeenSet
    _wid: bytes
    _r: Any
    _sha: dict[str, str]
    _run_id: dict[str, str]
    _sprefix: list[str]
    _used: set[int]
    cluster: bool
    _home: str | None
    _qflag: str
    _event: asyncio.Event
    _tasks: list[asyncio.Task[None]]
    _reload: bool
    book: ShardBook
    _outage: bool
    _quiet_until: float
    _closed: bool
    #: A cluster's current epoch when last read (``_seen_failover``).
    _cluster_epoch: int | None = None

    # -- calls with retries --

    @contextlib.contextmanager
    def writing_in(self, epoch: int) -> Iterator[None]:
        """What this task sends inside the block belongs to ``epoch``: from the moment Redis
        comes back in another epoch (a restart seen on a new connection, a failover, an
        outage), each attempt raises StaleWrite instead of sending. A completion written to
        a Redis that came back without the last second would count its page done while that
        page's links, offered in the lost second, are gone: it must be fetched again."""
        token = _WRITING_IN.set(epoch)
        try:
            yield
        finally:
            _WRITING_IN.reset(token)

    def _guard(self) -> None:
        """Raise StaleWrite if this task writes for an epoch that ended (see writing_in)."""
        epoch = _WRITING_IN.get()
        if epoch is not None and (epoch != self.epoch or self._outage):
            raise StaleWrite(f"{self.location}: a write of epoch {epoch} in epoch {self.epoch}")

    async def _retrying(self, call: Callable[[], Awaitable[_T]]) -> _T:
        """``call()``, retried with backoff while Redis is unreachable."""
        errors = redis_errors()
        pause = BACKOFF_MIN
        while True:
            try:
                result = await call()
            except errors as e:
                if self._closed and self._r is None:
                    raise
                if not self._outage:
                    self._outage = True
                    log.warning(
                        "%s: Redis unreachable (%s); retrying with backoff up to %.0f s",
                        self.location,
                        reason(e),
                        BACKOFF_MAX,
                    )
                await asyncio.sleep(pause)
                pause = min(pause * 2, BACKOFF_MAX)
                continue
            if self._outage:
                self._outage = False
                # nobody could renew a lease while Redis was away: take none back as expired
                # until every live worker's heartbeat has had time to renew its own (two
                # beats of the slowest heartbeat there can be, or the lease timeout if shorter)
                self._quiet_until = time.monotonic() + min(
                    self.lease_timeout, 2 * HEARTBEAT_MAX + 1.0
                )
                self._forget()
                log.warning("%s: Redis reconnected", self.location)
            return result

    async def _seen_failover(self) -> None:
        """On a cluster: a failover (a replica promoted, which may lack its master's last
        writes; redis-py may follow it with no error at all, a ``MOVED`` taken in its stride)
        raises the cluster's current epoch. Read at open, at each heartbeat and before each
        count (the crawl's end is decided on counts): a change starts a new epoch here, as a
        restart does."""
        if not self.cluster or self._r is None:
            return
        info = await self._retrying(lambda: self._r.cluster_info())
        epoch = int(info.get("cluster_current_epoch", 0)) if isinstance(info, dict) else 0
        known, self._cluster_epoch = self._cluster_epoch, epoch
        if known is not None and epoch != known:
            log.warning("%s: the cluster's epoch moved (a failover)", self.location)
            self._forget()
            self._quiet_until = time.monotonic() + min(self.lease_timeout, 2 * HEARTBEAT_MAX + 1)

    def _forget(self) -> None:
        """Redis may have come back without its last writes: what this worker remembers as
        seen may be unknown there, so forget it (``offer_many`` decides again), and start a
        new epoch (the engine's admission empties its own caches on it; lease ids of the
        new epoch cannot collide with ids Redis hands out a second time)."""
        self.epoch += 1
        # a lease out now may have had its page's links offered to the Redis of before: its
        # completion must not be written to this one (``CompletionPath.complete_many``)
        self._lease_floor = self._next_id
        self._local = MemorySeenSet()
        self._used = set()  # (``P used`` may have lost shards too: written again)
        self._reload = True  # this worker's shards are read again at its next heartbeat
        # a completion it lost (its HDEL) brings the request back: fetched again, not refused
        self.book.forget_completed()

    async def _on_connect(self, conn: Any) -> None:
        """Every new connection: note the server's ``run_id`` (one a node address on a
        cluster). redis-py reconnects by itself (a pool's dead connection is replaced at
        checkout), so a restart of Redis may raise no error at all: a new ``run_id`` at the
        same address is how a restart is seen."""
        await conn.on_connect()
        try:
            await conn.send_command("INFO", "server")
            info = await conn.read_response()
        except Exception:  # noqa: BLE001  (an ACL may forbid INFO: then no restart is seen)
            return
        text = info.decode("latin-1") if isinstance(info, bytes) else str(info)
        found = re.search(r"^run_id:(\w+)", text, re.MULTILINE)
        if found is None:
            return
        run_id = found.group(1)
        node = f"{getattr(conn, 'host', '')}:{getattr(conn, 'port', '')}"
        known = self._run_id.get(node)
        if known is not None and run_id != known:
            log.warning("%s: Redis restarted (a new run_id at %s)", self.location, node)
            self._forget()
            self._quiet_until = time.monotonic() + min(self.lease_timeout, 2 * HEARTBEAT_MAX + 1)
        self._run_id[node] = run_id
        self._guard()  # (a write of the epoch before: not sent on this connection)

    async def _script(self, name: str, *args: Any) -> Any:
        """Run script ``name`` on the crawl's prefix, retried on outages."""
        return await self._script_keys(name, [self.prefix], *args)

    async def _script_keys(self, name: str, keys: list[str], *args: Any) -> Any:
        """Run script ``name`` on ``keys`` (EVALSHA; loaded again on NOSCRIPT), retried on
        outages."""
        import redis.exceptions as rexc  # noqa: PLC0415

        async def call() -> Any:
            self.calls += 1
            self._guard()
            try:
                return await self._r.evalsha(self._sha[name], len(keys), *keys, *args)
            except rexc.NoScriptError:
                self._sha[name] = await self._r.script_load(SCRIPTS[name])
                self.calls += 1
                return await self._r.evalsha(self._sha[name], len(keys), *keys, *args)

        try:
            return await self._retrying(call)
        except rexc.ResponseError as e:
            raise await self._refused(name, e) from None

    async def _sharded(
        self,
        name: str,
        head: Sequence[Any],
        records: Sequence[tuple[int, Sequence[Any]]],
        also: Sequence[Call] = (),
        extra: Callable[[Any], object] | None = None,
    ) -> tuple[list[tuple[list[int], Any]], list[Any]]:
        """Script ``name`` over ``records`` (shard, ARGV fields) of many shards, in one round
        trip (a node), with the calls ``also`` and ``extra``'s commands in the same
        pipeline: ([(positions of the records a call carried, its reply)], the replies of
        ``also`` and ``extra``)."""
        calls, positions = calls_for(
            name,
            head,
            records,
            self._sprefix,
            cluster=self.cluster,
            home=self._home,
            framed=name in FRAMED,
        )
        new = {k for k, _ in records} - self._used
        before = None
        if new:  # ``P used`` first: what ``tally`` sums is never short of a shard
            key, members = self.prefix + "used", sorted(new)

            def before(pipe: Any) -> None:
                pipe.sadd(key, *members)

        replies = await self._batch([*calls, *also], extra, before)
        self._used |= new
        start = 1 if new else 0
        replies = replies[start:]
        return list(zip(positions, replies, strict=False)), replies[len(calls) :]

    async def _batch(
        self,
        calls: list[Call],
        extra: Callable[[Any], object] | None = None,
        before: Callable[[Any], object] | None = None,
    ) -> list[Any]:
        """``before``'s commands, the script calls, ``extra``'s commands in one pipeline,
        retried on outages; the calls a node answers NOSCRIPT to are loaded and sent again.
        Their replies in that order."""
        import redis.exceptions as rexc  # noqa: PLC0415

        if len(calls) == 1 and extra is None and before is None:
            name, keys, args = calls[0]
            return [await self._script_keys(name, keys, *args)]

        async def call() -> list[Any]:
            self.calls += 1
            pipe = self._r.pipeline(transaction=False)
            if before is not None:
                before(pipe)
            first = len(pipe)
            for name, keys, args in calls:
                pipe.evalsha(self._sha[name], len(keys), *keys, *args)
            if extra is not None:
                extra(pipe)
            self._guard()
            out: list[Any] = await pipe.execute(raise_on_error=False)
            lost = [
                first + i
                for i, r in enumerate(out[first : first + len(calls)])
                if isinstance(r, rexc.NoScriptError)
            ]
            if lost:
                for name in {calls[i - first][0] for i in lost}:
                    self._sha[name] = await self._r.script_load(SCRIPTS[name])
                self.calls += 1
                again = self._r.pipeline(transaction=False)
                for i in lost:
                    name, keys, args = calls[i - first]
                    again.evalsha(self._sha[name], len(keys), *keys, *args)
                for i, reply in zip(lost, await again.execute(raise_on_error=False), strict=True):
                    out[i] = reply
            for reply in out:
                if isinstance(reply, errors):
                    raise reply
                if isinstance(reply, rexc.ResponseError):
                    raise reply
            return out

        errors = redis_errors()
        try:
            return await self._retrying(call)
        except rexc.ResponseError as e:
            raise await self._refused(calls[0][0] if calls else "command", e) from None

    async def _cmd(self, build: Callable[[Any], object]) -> list[Any]:
        """Commands queued by ``build(pipeline)``, one round trip, retried on outages."""
        import redis.exceptions as rexc  # noqa: PLC0415

        async def call() -> list[Any]:
            self.calls += 1
            pipe = self._r.pipeline(transaction=False)
            build(pipe)
            result: list[Any] = await pipe.execute()
            return result

        try:
            return await self._retrying(call)
        except rexc.ResponseError as e:
            raise await self._refused("command", e) from None

    async def _refused(self, call: str, e: BaseException) -> StateError:
        """The StateError of a call Redis refused (not an outage): the key a script named,
        else the first key of the crawl that is not what the crawl keeps there (``check``,
        then a scan of the crawl's keys' types), else Redis's own reason."""
        found = bad_state(self.location, str(e))
        if found is not None:
            return found
        try:
            await self.check_keys()
            found = await self._wrong_type()
        except StateError as exc:
            return exc
        except Exception:  # noqa: BLE001  (the diagnosis is best effort: the reason below)
            found = None
        if found is not None:
            return found
        return StateError(f"{self.location}: Redis refused the {call} call: {reason(e)}")

    async def check_keys(self) -> None:
        """The ``check`` script: the crawl's fixed keys hold what the crawl keeps there.

        Raises:
            StateError: the key that does not, and why.
        """
        import redis.exceptions as rexc  # noqa: PLC0415

        try:
            await self._r.eval(SCRIPTS["check"], 1, self.prefix, MAX_SMALL, MAX_FIELDS,
                               MAX_SETTINGS)  # fmt: skip
        except rexc.ResponseError as e:
            found = bad_state(self.location, str(e))
            if found is None:
                raise StateError(f"{self.location}: Redis refused the check: {reason(e)}") from None
            raise found from None

    async def _wrong_type(self) -> StateError | None:
        """The first of the crawl's keys whose type is not the crawl's (SCAN: a failed call
        only), or None."""
        pattern = re.sub(r"([*?\[\]\\])", r"\\\1", self.prefix) + "*"
        start = len(self.prefix.encode())
        cursor = 0
        while True:
            cursor, keys = await self._r.scan(cursor, match=pattern, count=1000)
            if keys:
                pipe = self._r.pipeline(transaction=False)
                for key in keys:
                    pipe.type(key)
                for key, found in zip(keys, await pipe.execute(), strict=True):
                    found = found.decode() if isinstance(found, bytes) else str(found)
                    want = expected_type(key[start:].decode("utf-8", "replace"))
                    if want is not None and found != want:
                        shown = ascii(key.decode("utf-8", "replace"))[1:-1]
                        return damaged(
                            self.location, shown, f"is a {found}, where the crawl keeps a {want}"
                        )
            if not cursor:
                return None

    async def _stop_tasks(self) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=2.0)
        for task in pending:
            log.warning("%s: a background task did not stop: %r", self.location, task)
