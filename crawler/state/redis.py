"""RedisState: the crawl state in Redis, shared by any number of worker processes.

``open_state("redis://HOST:PORT/DB", name=NAME)`` (also ``rediss://`` and ``unix://``; the
URL of a Redis Cluster node works too: ``crawler.state._redis_cluster`` finds the cluster at
open). The key layout (version 3) is in ``crawler.state._redis_scripts``: crawl-wide keys
under ``crawler:{NAME}:``, each of the crawl's virtual shards under ``crawler:{NAME:sK}:``
(one cluster slot a shard; every key a per-page script touches is its shard's). redis-py's
asyncio client, one connection pool per worker (a node), imported only when a Redis URL is
used.

How it scales (issue 23): every origin belongs to one of ``shards`` virtual shards (a hash of
its host, fixed at creation), every shard to one live worker (rendezvous hashing over the
live workers, a claim renewed by the heartbeat: ``crawler.state._redis_owner``). So:

* **Leasing is local**: a worker leases only from its own shards, with their politeness
  (per-host cap, delay, Crawl-delay, Retry-After) in local timers (the memory state's
  ``OriginQueues``): no Redis call a lease, and the per-host cap holds cluster-wide by
  construction (one owner an origin, or a share of the host's politeness to each owner of
  a part of a split host: ``crawler.state._redis_split``, one hot origin).
* **Offers dedup exactly in Redis, in one atomic step with the enqueue** (the ``put`` script:
  ``SADD`` to the shard's seen bucket, an ``HSET`` a shard into its open requests), one round trip
  a chunk of links whatever their shards (on a cluster, one a node: a call a shard); the answer (new
  or not) is exact and immediate, because the engine lists each new internal URL once, by the worker
  that found it. A bounded local cache of every fingerprint this worker offered or was sent makes a
  repeated link cost nothing. A new request of a shard this worker owns goes straight into its
  queues; one of another owner's shard is sent to that owner point to point, batched (one ``XADD`` a
  destination every ``FORWARD_GAP`` seconds to its inbox stream), after it is safe in Redis: the
  inbox is how the owner hears of it, not where it is kept. An owner that misses a message (a stale
  view of the owners, an inbox of a worker gone) finds the request when it checks its shards while
  idle (``heal``), and any new owner when it loads the shard.
* **Completions** end here at once (slots, delays, the next lease) and are written in one
  script call a window (``HDEL`` of the open request, the counts: ``crawler.state._redis_done``),
  before any ``counts``, a heartbeat that hands shards over, and ``close``; a retry is one call.
  Never a broadcast: there is no ``PUBLISH`` at all. A worker wakes on its own inbox
  (``XREAD BLOCK``), its own pages and its own timers.
* **The crawl's end**: each shard's open requests are its ``S p`` (its length: what the
  atomic steps write); "nothing queued and nothing leased anywhere" is
  their sum over the shards the crawl used (``P used``) and the workers' reports: one call on
  one server (``tally``), one round trip a node on a cluster; the dispatcher's grace period
  covers a worker about to offer. On one server (layout 5) the scripts keep the crawl's
  counts in one hash (``P c``: open = q - done), so a ``tally`` reads one hash, not two keys
  a shard.
* **Membership**: a worker that joins wins shards by rendezvous; their owner stops leasing
  from them, lets what it has out end, and releases the claims; the winner claims and loads
  them at its next heartbeat. A worker that dies stops renewing: its claims lapse after
  ``lease_timeout`` and the winners among the living load its shards, its requests in flight
  included (at-least-once: duplicates at most what it had in flight and the completions it had
  not yet written, each bounded by its concurrency). A clean ``close``
  writes back what it had out and releases its claims at once.
* **Outages**: a connection error or timeout in any call (on a cluster also ``CLUSTERDOWN``
  and the like) is retried with exponential backoff
  (0.1 s doubling to 5 s), a warning logged once per outage and "reconnected" when Redis
  answers again; a restart (a new ``run_id``) or an outage starts a new ``epoch`` (the engine's
  admission then offers again what it may have lost) and for two heartbeats no lapsed claim
  is taken (every live owner renews first). This worker's shards are then read again.
* **Seen set**: exact 64-bit keyed fingerprints in small SETs of integers, each shard's own
  (``shard_seen_bits``: about 2**``seen_bits`` in all; docs/distributed.md has the bytes a URL
  of a spread crawl and of a one-host one); no Bloom filter (a false positive would be a
  page never fetched). **Persistence** is Redis's (``docs/distributed.md``): every script's
  effects are one MULTI/EXEC in the AOF, so the state stays consistent whatever is lost.

The parts: this module is ``RedisState`` (open and close, the offers and leases, counters, robots
and settings); ``crawler.state._redis_done`` the completions and retries;
``crawler.state._redis_shards`` the heartbeat, the claims, the loads and the inbox;
``crawler.state._redis_link`` the calls with retries; ``crawler.state._redis_cluster`` the client
(one server or a cluster) and how per-shard calls are grouped; ``crawler.state._redis_owner`` the
shards held and their queues in memory; ``crawler.state._redis_scripts`` the scripts and the layout;
``crawler.state._redis_status`` reads a crawl from outside.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from crawler.state._redis_check import (
    MAX_ROBOTS_VALUE,
    MAX_SETTINGS,
    as_int,
    bad_state,
    damaged,
    json_object,
    refused_version,
    robots_record,
)
from crawler.state._redis_cluster import connect
from crawler.state._redis_done import CompletionPath
from crawler.state._redis_link import (
    BACKOFF_MAX,
    BACKOFF_MIN,
    HEARTBEAT_MAX,
    reason,
    redacted,
    redis_errors,
)
from crawler.state._redis_owner import FromRedis, Item, ShardBook, pack_value, payload_of
from crawler.state._redis_scripts import (
    DEFAULT_NAME,
    DEFAULT_SHARDS,
    READABLE,
    SCRIPTS,
    VERSION,
    prefix_of,
    shard_prefix,
    shard_seen_bits,
)
from crawler.state._redis_split import auto_split, budget_parts
from crawler.state._redis_status import RedisStatus, read_settings, read_status
from crawler.state.base import (
    Candidate,
    Counts,
    Lease,
    StateError,
    StoredRobots,
    wait_event,
)
from crawler.urls.fingerprint import KEY_BYTES, Fingerprinter, new_key
from crawler.urls.policy import origin_of
from crawler.urls.seen import MemorySeenSet

__all__ = [
    "DEFAULT_NAME",
    "ROBOTS_TTL",
    "RedisState",
    "RedisStatus",
    "default_lease_timeout",
    "redacted",
]

log = logging.getLogger(__name__)

#: Seconds a stored robots.txt is kept (the engine checks its age before that).
ROBOTS_TTL = 86400
#: Candidates per offer script call (one round trip each).
OFFER_CHUNK = 512
#: Seconds ``close`` tries to write back what it had out while Redis is unreachable.
CLOSE_TIMEOUT = 10.0
#: Seconds a worker opening on a Redis Cluster waits out a failed node (a failover).
OPEN_FAILOVER_WAIT = 60.0


def default_lease_timeout(request_timeout: float) -> float:
    """The automatic lease timeout: a few request timeouts, at least a minute."""
    return max(60.0, 3.0 * request_timeout)


class RedisState(CompletionPath):
    """The CrawlState in Redis (see the module docstring).

    Args:
        url: ``redis://[user:password@]host:port/db``, ``rediss://...``, ``unix:///path``.
        name: the crawl name (key prefix ``crawler:{NAME}:``), "default" if None.
        lease_timeout: seconds a dead worker's shards wait before another worker takes them
            (its claims lapse); 0: ``default_lease_timeout``.
        request_timeout: the crawl's request timeout (for the automatic lease timeout).
        seen_bits: seen-set bucket bits (2**bits buckets); fixed when the crawl is created.
        heartbeat: seconds between renewals; None: ``min(lease_timeout / 3, 5)``.
        local_seen: fingerprints the local ``seen`` cache holds before it starts over.
        shards: virtual shards of a new crawl (fixed when the crawl is created).
        host_split, seeds: the parts of a host in a new crawl (``_redis_split.auto_split``).
    """

    shared = True
    #: Seconds with nothing queued or leased anywhere before a worker stops (the engine's).
    idle_grace = 2.0

    def __init__(
        self,
        url: str,
        *,
        name: str | None = None,
        lease_timeout: float = 0.0,
        request_timeout: float = 30.0,
        seen_bits: int = 16,
        heartbeat: float | None = None,
        local_seen: int = 1 << 20,
        shards: int = DEFAULT_SHARDS,
        host_split: int = 0,
        seeds: Sequence[str] = (),
    ) -> None:
        if not 1 <= seen_bits <= 32:
            raise ValueError(f"seen_bits must be in 1..32, not {seen_bits}")
        if not 1 <= shards <= 65536:
            raise ValueError(f"shards must be in 1..65536, not {shards}")
        self.url = url
        self.name = name or DEFAULT_NAME
        self.location = f"{redacted(url)} name={self.name}"
        self.prefix = prefix_of(self.name)
        self.lease_timeout = lease_timeout or default_lease_timeout(request_timeout)
        self.heartbeat = heartbeat or min(self.lease_timeout / 3.0, HEARTBEAT_MAX)
        self._seen_bits_wanted = seen_bits
        self._shards_wanted = shards
        self._seeds, self._split_wanted = tuple(seeds), host_split
        self._bits = seen_bits
        self._local_max = max(1024, local_seen)
        self._local = MemorySeenSet()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wid = self.worker_id.encode()
        self._r: Any = None
        self._sha: dict[str, str] = {}
        self._fp: Fingerprinter | None = None
        self.book = ShardBook(shards, 8, 0.0)
        self._sprefix: list[str] = []
        #: open leases of this worker: Lease.id -> its item
        self._mine: dict[int, Item] = {}
        self._next_id = 0
        self._lease_floor = 0
        #: Incremented each time Redis answers again after a failure, or restarted: it may
        #: have lost its last writes. The engine's admission empties its caches when it changes.
        self.epoch = 0
        self._run_id: dict[str, str] = {}  # node -> its run_id: a new one means a restart
        self.cluster = False  # a Redis Cluster (found at open), not one server
        # A crawl of layout 5 on one server keeps its counts in ``P c`` (``_redis_scripts``):
        # the scripts that count get the crawl's prefix as their first key, and q ("1").
        self._home: str | None = None
        self._qflag = "0"
        self._used: set[int] = set()  # shards known to be in ``P used``
        self._delays: dict[str, float] = {}  # set_delay calls not yet written
        self._event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._outage = False
        self._quiet_until = 0.0  # monotonic: no lapsed claim taken before then
        self._closed = True
        self._init_shard_link()
        self._init_completion_path()
        self._host_budget = 0  # max_pages_per_host, as the last heartbeat read it
        self._counted: Counter[str] = Counter()  # this run's named counters (totals)
        self._counted_dirty = False
        self._kfield = self.worker_id
        #: Script and command calls sent (round trips), for benchmarks.
        self.calls = 0

    def __repr__(self) -> str:
        return f"<RedisState {self.location}>"

    # -- lifecycle --

    async def open(self, *, per_host: int, delay: float, max_pages_per_host: int) -> None:
        """Connect, create or check the crawl, store the politeness settings crawl-wide,
        claim and load this worker's shards.

        Raises:
            StateError: Redis unreachable (the URL, password hidden, and the reason), a
                key layout of another version, or open already.
        """
        if not self._closed:
            raise StateError(f"{self.location}: already open")
        import redis.exceptions as rexc  # noqa: PLC0415

        try:
            client, self.cluster = await connect(self.url, self.location, self._on_connect)
        except (rexc.RedisError, OSError) as e:
            raise StateError(f"{self.location}: cannot use Redis: {reason(e)}") from e
        self._r = client

        async def steps() -> Any:
            for name, src in SCRIPTS.items():
                self._sha[name] = await client.script_load(src)
            await self.check_keys()
            await self._seen_failover()
            return await client.evalsha(
                self._sha["init"],
                1,
                self.prefix,
                VERSION,
                new_key(),
                max(1, per_host),
                repr(float(delay)),
                max(0, max_pages_per_host),
                self._seen_bits_wanted,
                self._shards_wanted,
                auto_split(self._seeds, max(1, per_host), self._split_wanted, max_pages_per_host),
                "0" if self.cluster else "1",  # (a new crawl's counts: in P c on one server)
            )

        try:
            found, key, bits, shards, split, central = await self._opening(steps)
        except (rexc.RedisError, OSError, StateError) as e:
            self._r = None
            await client.aclose()
            if isinstance(e, StateError):
                raise
            raise bad_state(self.location, str(e)) or StateError(
                f"{self.location}: cannot use Redis: {reason(e)}"
            ) from e
        if found.decode("utf-8", "replace") not in READABLE:
            self._r = None
            await client.aclose()
            raise refused_version(self.location, self.name, found, VERSION)
        p = self.prefix
        bits = as_int(self.location, p + "cfg", bits)
        shards = as_int(self.location, p + "cfg", shards)
        if len(key) != KEY_BYTES or not 1 <= bits <= 32 or not 1 <= shards <= 65536:
            self._r = None
            await client.aclose()
            what = f"holds {len(key)} bytes, not {KEY_BYTES}" if len(key) != KEY_BYTES else ""
            raise damaged(
                self.location,
                p + ("fpkey" if what else "cfg"),
                what or f"holds bits = {bits}, shards = {shards}: not 1 to 32, 1 to 65536",
            )
        self._fp = Fingerprinter(key)
        self._home = p if central == b"1" and not self.cluster else None
        self._qflag = "1" if self._home else "0"
        self._bits = shard_seen_bits(bits, shards)
        self.book = ShardBook(shards, max(1, per_host), float(delay), int(split or 1))
        self._split_pending = not split  # none stored yet: read again before leasing
        self._sprefix = [shard_prefix(self.name, k) for k in range(shards)]
        self._host_budget = max(0, max_pages_per_host)
        self._event = asyncio.Event()
        self._rebalance = asyncio.Event()
        self._member_lock = asyncio.Lock()
        self._closed = False
        self._outage = False
        self._mine.clear()
        self._used = set()
        self._counted = Counter()
        self._counted_dirty = False
        self._kfield = f"{self.worker_id}:{uuid.uuid4().hex[:8]}"  # this run's counters
        # lease ids: unique to this open (a lease of an earlier open ends nothing here)
        self._next_id = int.from_bytes(os.urandom(5), "big") << 16
        self._lease_floor = self._next_id
        try:
            await self._membership()
        except BaseException:
            # (a shard Redis holds damaged, say): what it claimed is free again at once
            self._closed = True
            with contextlib.suppress(Exception):
                await self._script("release", self._wid, "1", *range(self.book.shards))
            self._r = None
            await client.aclose()
            raise
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._heartbeat_loop()),
            loop.create_task(self._inbox_loop()),
        ]

    async def _opening(self, steps: Callable[[], Awaitable[Any]]) -> Any:
        """``steps()`` of ``open``. On a cluster whose node fails while a worker opens (a master
        killed, its replica not yet promoted) they are retried with backoff for up to
        ``OPEN_FAILOVER_WAIT`` seconds, as every later call would be; a Redis unreachable
        at open otherwise is an error at once (a wrong URL, a server not started)."""
        errors = redis_errors()
        pause, told = BACKOFF_MIN, False
        deadline = time.monotonic() + OPEN_FAILOVER_WAIT
        while True:
            try:
                return await steps()
            except errors as e:
                if not self.cluster or time.monotonic() + pause > deadline:
                    raise
                if not told:
                    told = True
                    log.warning(
                        "%s: a Redis Cluster node failed while opening (%s); retrying for up"
                        " to %.0f s",
                        self.location,
                        reason(e),
                        OPEN_FAILOVER_WAIT,
                    )
                await asyncio.sleep(pause)
                pause = min(pause * 2, BACKOFF_MAX)

    async def close(self) -> None:
        """Write back what is out, release the claims, leave the workers, close the pool.
        Safe twice.

        With Redis unreachable it gives up after ``CLOSE_TIMEOUT`` seconds (a warning):
        the claims then lapse and the shards are taken over."""
        if self._closed:
            return
        self._closed = True
        await self._stop_tasks()
        r = self._r
        errors: tuple[type[BaseException], ...] = (TimeoutError, *redis_errors())

        async def leave() -> None:
            await self._flush_done()
            if self._delays:
                await self._flush_delays()
            await self._flush_counters()
            await self._flush_outbox()
            if self._mine:
                held = list(self._mine.values())
                self._mine.clear()
                await self._requeue(
                    [(item, item[8] + 1, 0.0) for item in held], recovered=len(held)
                )
            await self._script("release", self._wid, "1", *self.book.held)
            await self._tell_members(self.book.live)  # their shards now: claim them at once

        try:
            # bounded: with Redis down, the claims lapse by themselves
            await asyncio.wait_for(leave(), CLOSE_TIMEOUT)
        except errors as e:
            log.warning("%s: could not hand leases back at close: %s", self.location, reason(e))
        finally:
            await r.aclose()
            self._init_completion_path()  # (what could not be written stays open in Redis)

    # -- fingerprints --

    def fingerprint(self, url: str) -> int:
        """Keyed BLAKE2b under the crawl's stored key: the same in every worker and run."""
        if self._fp is None:
            raise StateError(f"{self.location}: open the state before fingerprinting")
        return self._fp(url)

    def seen(self, fp: int) -> bool:
        """True if this worker offered ``fp`` before or was sent it (a local, bounded cache)."""
        return self._local.contains_fp(fp)

    def probe_parts(self) -> tuple[MemorySeenSet, Fingerprinter] | None:
        """What ``seen`` reads now (the cache is replaced when it starts over: ask again for
        each chunk) and the ``fingerprint`` function (None before ``open``)."""
        return None if self._fp is None else (self._local, self._fp)

    def _remember(self, fps: Sequence[int]) -> None:
        if len(self._local) + len(fps) > self._local_max:
            self._local = MemorySeenSet()
        for fp in fps:
            self._local.add_fp(fp)

    # -- the frontier --

    async def offer_many(self, candidates: Sequence[Candidate]) -> list[Candidate]:
        if self._delays or self._split_pending:
            await (self._settle_split() if self._split_pending else self._flush_delays())
        accepted: list[Candidate] = []
        shift = 64 - self._bits
        low = (1 << shift) - 1
        width = f"0{(self._bits + 3) // 4}x"
        book = self.book
        parts = budget_parts(book.split, self._host_budget)
        queued_here = False
        now = time.time()
        for start in range(0, len(candidates), OFFER_CHUNK):
            chunk = candidates[start : start + OFFER_CHUNK]
            records: list[tuple[int, tuple[bytes]]] = []
            values: list[str] = []
            for c in chunk:
                fp = c.fp
                origin = c.origin or origin_of(c.url)
                k = book.shard(origin, fp)
                value = pack_value(0, 0.0, c.depth, origin, payload_of(c.kind, c.referrer, c.url))
                values.append(value)
                q = (parts[fp % len(parts)] if parts else "1") if c.queue else "0"
                record = f"{fp >> shift:{width}}\t{fp & low}\t{fp}\t{q}"
                record += f"\t{c.host}\t{value}"
                records.append((k, (record.encode("utf-8", "surrogatepass"),)))
            flags = bytearray(len(chunk))
            head = [self._host_budget, self._qflag]
            for where, answer in (await self._sharded("put", head, records))[0]:
                for i, flag in zip(where, answer, strict=True):
                    flags[i] = flag
            for c, (k, _), value, flag in zip(chunk, records, values, flags, strict=True):
                if flag == 0x30:  # "0": seen before
                    continue
                accepted.append(c)
                if flag != 0x31:  # "2": new, not queued
                    continue
                origin = c.origin or origin_of(c.url)
                parsed = (0, 0.0, c.depth, origin, c.kind, c.referrer, c.url)
                if book.add(k, c.fp, parsed, now, offered=True):
                    queued_here = True
                elif book.active(k) is None:
                    self._forward(k, c.fp, value)
            self._remember([c.fp for c in chunk])
        if queued_here:
            self._event.set()
            self._busy_changed()
        return accepted

    async def lease(self, n: int, now: float, *, budget: int = 0) -> list[Lease]:
        """The protocol's ``lease``, from this worker's own shards (no Redis call);
        ``budget`` > 0 is a crawl-wide page budget (max_pages) taken in one atomic step
        (``P a``: leases granted, less those given back and robots.txt skips)."""
        if n <= 0:
            return []
        if self._delays or self._split_pending:
            await (self._settle_split() if self._split_pending else self._flush_delays())
        items = self.book.pop(n, now)
        if budget > 0 and items:
            self._budgeted = True
            granted = int(await self._script("admit", budget, len(items)))
            if granted < len(items):
                for item in items[granted:]:  # back in line, their slots freed
                    self.book.ended(item, now, completed=False)
                    self.book.again(item, item[8], 0.0, now)
                items = items[:granted]
        expires = now + self.lease_timeout
        out: list[Lease] = []
        for item in items:
            self._next_id += 1
            lease_id = self._next_id
            self._mine[lease_id] = item
            fp, _k, _g, url, depth, referrer, origin, kind, attempts = item
            checked = type(item) is not FromRedis  # (offered here: admission's own)
            out.append(
                Lease(lease_id, url, depth, referrer, origin, kind, attempts, expires, checked)
            )
        if out:
            self._busy_changed()
        return out

    def set_delay(self, origin: str, delay: float) -> None:
        """Applied here at once (this worker owns the origin's shard, or will write it for
        the owner), written to the shard before this worker's next call that writes."""
        self._delays[origin] = delay
        self.book.queues.set_delay(origin, delay)

    def next_due(self, now: float) -> float | None:
        """When a request of this worker's shards waiting on a delay or a ``not_before``
        becomes leasable (local timers)."""
        due = self.book.next_due(now)
        if due is None or due <= now:
            return None
        return due

    async def wait(self, timeout: float) -> None:
        """Return when this worker's shards got new work (its own offers, its inbox, a
        shard loaded) or a slot freed, since the last ``wait`` returned; or after
        ``timeout`` seconds."""
        await wait_event(self._event, timeout)

    async def counts(self) -> Counts:
        await self._seen_failover()  # (a cluster: what a failover lost is offered again)
        await self._flush_done()  # what it sums (open requests, done) includes them
        return await self._counts()

    # -- the crawl's counters, robots rules and settings --

    async def get_robots(self, origin: str) -> StoredRobots | None:
        key = "r:" + origin
        (raw,) = await self._script("read", key, "s", MAX_ROBOTS_VALUE)
        return None if raw is None else robots_record(self.location, self.prefix + key, origin, raw)

    async def put_robots(self, robots: StoredRobots) -> None:
        head = json.dumps({"t": robots.fetched_at, "s": robots.status, "e": robots.error})
        value = head.encode() + b"\n" + bytes(robots.body)
        key = self.prefix + "r:" + robots.origin
        await self._cmd(lambda pipe: pipe.set(key, value, ex=ROBOTS_TTL))

    async def load_settings(self) -> dict[str, Any] | None:
        (raw,) = await self._script("read", "settings", "s", MAX_SETTINGS)
        return None if raw is None else json_object(self.location, self.prefix + "settings", raw)

    async def save_settings(self, settings: Mapping[str, Any]) -> None:
        text = json.dumps(dict(settings))
        await self._cmd(lambda pipe: pipe.set(self.prefix + "settings", text))

    # -- status and settings, from outside a crawl --

    @staticmethod
    def read_settings(url: str, name: str | None = None) -> dict[str, Any] | None:
        """The stored settings of crawl ``name`` (None: a new crawl), read before opening.

        Raises:
            StateError: Redis unreachable, or another key layout version.
        """
        return read_settings(url, name)

    @staticmethod
    def read_status(url: str, name: str | None = None) -> RedisStatus:
        """Where crawl ``name`` stands, for ``crawler status --state redis://...``.

        Reads only (no lease taken, nothing written), while workers run or not.

        Raises:
            StateError: Redis unreachable, no such crawl, another key layout version.
        """
        return read_status(url, name)

    def borrow_slot(self, origin: str, now: float) -> float | None | bool:
        """A slot of ``origin`` from the parts of its host this worker owns, else refused
        (False): see ``_redis_split.borrow_here``."""
        return self.book.borrow(origin, now)

    def want_slot(self, origin: str, delta: int, now: float) -> None:
        self.book.want(origin, delta, now)

    def return_slot(self, origin: str, now: float) -> None:
        self.book.give_back(origin, now)
        self._event.set()  # the dispatcher may lease from the origin again
