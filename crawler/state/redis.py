"""RedisState: the crawl state in Redis, shared by any number of worker processes.

``open_state("redis://HOST:PORT/DB", name=NAME)`` (also ``rediss://`` and ``unix://``). All of
one crawl's keys live under ``crawler:{NAME}:`` (NAME "default" unless given; the braces are
a Redis Cluster hash tag); the layout is in ``crawler.state._redis_scripts``. redis-py's
asyncio client, one connection pool per worker (the pub/sub wake-up channel included),
imported only when a Redis URL is used.

What each worker gets (issue 11):

* **Atomic scripts** (Lua, SCRIPT LOAD once, EVALSHA, loaded again on NOSCRIPT after a
  restart): ``offer_many`` dedups and enqueues a chunk in one call; ``lease`` hands out up to
  n requests in one call with politeness across every worker (fewer than ``per_host`` open
  leases of one origin cluster-wide, the delay or the origin's own Crawl-delay or a
  ``retry`` ``not_before`` between two starts to one origin, origins round-robin, lowest
  depth first inside one); ``complete_many`` and ``retry`` are one call a batch.
* **Crawl-wide politeness settings**: per_host, delay and max_pages_per_host given to
  ``open`` are stored in the crawl (the last opener's win) and read by every script.
* **Leases** expire ``lease_timeout`` seconds after they start (default
  ``max(60, 3 x request timeout)``) and go back to their queue when a later ``lease`` call
  of any worker finds them expired: a worker that dies loses nothing (at-least-once;
  duplicates at most what it had leased). A live worker renews its own leases in the
  background every ``lease_timeout / 3`` (at most every 5 s), so a slow fetch stays its own;
  the same heartbeat keeps it in the crawl's list of workers alive. A clean ``close`` hands
  its open leases back at once. After an outage (nobody could renew anything meanwhile) a
  worker takes no lease back as expired for two of the longest heartbeats (11 s; or one
  ``lease_timeout`` if shorter), time for every live worker's heartbeat to renew its own.
  Expiry compares the workers' wall clocks (``now``): keep
  them within a small part of ``lease_timeout`` of each other (NTP).
* **Seen set**: exact 64-bit fingerprints (``crawler.urls.fingerprint``, keyed with a key stored
  in the crawl at creation so every worker and run agrees), never a key per URL nor URL
  strings: the top ``seen_bits`` bits (16 by default) pick one of 2**16 small Redis SETs of
  integers, the other 48 bits are the member. Redis stores such a set as an *intset*, 8
  bytes a member, while it has at most ``set-max-intset-entries`` (512 by default) members:
  at 1M URLs the fullest of 2**16 buckets held 35-40 and the set took 15.7-16.0 bytes a URL
  (``benchmarks/redis_memory.py``; tests/test_state_redis.py holds < 20); by the same
  spread they stay under 512 up to about 25M URLs (an estimate). No Bloom filter: a false
  positive would be a page never fetched.
  ``seen(fp)`` is a bounded local cache of fingerprints this worker has offered.
* **Wake-ups without polling**: offers, completions and retries publish on the crawl's
  channel; ``wait`` blocks on a local event set by this worker's own calls or by a
  background reader of that channel (messages of other workers).
* **Outages**: a connection error or timeout in any call is retried with exponential
  backoff (0.1 s doubling to 5 s), a warning logged once per outage and "reconnected" when
  Redis answers again; the crawl carries on (scripts loaded again if Redis lost them). A
  call whose reply was lost may have run: a lease then expires and is handed out again, an
  offer's links count as seen rather than new, a named counter may count twice.
* **Persistence** is Redis's: with AOF ``appendfsync everysec`` a crash of Redis loses up
  to the last second of writes (leases of that second come back when they expire; links
  offered in it are lost unless found again); ``always`` loses nothing but costs an fsync a
  write; RDB snapshots alone lose everything since the last snapshot. Whatever is lost, the
  state stays consistent: Redis writes a script's effects to the AOF as one MULTI/EXEC, and
  on loading drops a block a crash cut short (``aof-load-truncated yes``, the default); a
  lease id handed out again after such a loss cannot end another worker's lease (leases are
  ended by id and URL).

The parts: this module is ``RedisState`` itself (open and close, the frontier calls, the
seen cache, counters, robots.txt and settings); its base ``RedisLink``
(``crawler.state._redis_link``) makes the calls with retries and runs the heartbeat and the
wake-up reader; ``crawler.state._redis_scripts`` holds the scripts and the key layout, and
``crawler.state._redis_status`` reads a crawl from outside (``read_status``).

Memory per origin: a hash and a queue per origin with work, forgotten when it has none left
(unless it has its own Crawl-delay); ``P h`` keeps a count per host (the budget and status).
robots.txt bodies are kept ``ROBOTS_TTL`` seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from crawler.state._redis_check import (
    MAX_FIELDS,
    MAX_ROBOTS_VALUE,
    MAX_SETTINGS,
    as_int,
    bad_state,
    damaged,
    int_hash,
    json_object,
    read_args,
)
from crawler.state._redis_link import (
    HEARTBEAT_MAX,
    RedisLink,
    reason,
    redacted,
    redis_errors,
)
from crawler.state._redis_scripts import DEFAULT_NAME, SCRIPTS, VERSION, prefix_of
from crawler.state._redis_status import RedisStatus, counts_of, read_settings, read_status
from crawler.state.base import (
    Candidate,
    Counts,
    Lease,
    Outcome,
    StateError,
    StoredRobots,
    wait_event,
)
from crawler.urls.fingerprint import KEY_BYTES, Fingerprinter, new_key
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
#: Seconds ``close`` tries to hand leases back while Redis is unreachable.
CLOSE_TIMEOUT = 10.0
# Lease.id = epoch << _EPOCH_SHIFT | Redis's lease id (an INCR counter: far below 2**40).
_EPOCH_SHIFT = 40
_ID_MASK = (1 << _EPOCH_SHIFT) - 1


def default_lease_timeout(request_timeout: float) -> float:
    """The automatic lease timeout: a few request timeouts, at least a minute."""
    return max(60.0, 3.0 * request_timeout)


def _url_bytes(url: str) -> bytes:
    # a lease is ended by its id AND its URL: an id Redis handed out again after losing its
    # last writes (a crash with appendfsync everysec) must not end another worker's lease
    return url.encode("utf-8", "surrogatepass")


def _decode(payload: str) -> tuple[int, str | None, str]:
    # "kind \t len(referrer) or "" \t referrer + url", as offer_many packs it
    kind, n, rest = payload.split("\t", 2)
    if n == "":
        return int(kind), None, rest
    k = int(n)
    return int(kind), rest[:k], rest[k:]


def _due(raw: Any) -> float | None:
    if not raw:
        return None
    return float(raw)


class RedisState(RedisLink):
    """The CrawlState in Redis (see the module docstring).

    Args:
        url: ``redis://[user:password@]host:port/db``, ``rediss://...``, ``unix:///path``.
        name: the crawl name (key prefix ``crawler:{NAME}:``), "default" if None.
        lease_timeout: seconds a lease lasts unless renewed; 0: ``default_lease_timeout``.
        request_timeout: the crawl's request timeout (for the automatic lease timeout).
        seen_bits: seen-set bucket bits (2**bits buckets); fixed when the crawl is created.
        heartbeat: seconds between renewals; None: ``min(lease_timeout / 3, 5)``.
        local_seen: fingerprints the local ``seen`` cache holds before it starts over.
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
    ) -> None:
        if not 1 <= seen_bits <= 32:
            raise ValueError(f"seen_bits must be in 1..32, not {seen_bits}")
        self.url = url
        self.name = name or DEFAULT_NAME
        self.location = f"{redacted(url)} name={self.name}"
        self.prefix = prefix_of(self.name)
        self.lease_timeout = lease_timeout or default_lease_timeout(request_timeout)
        self.heartbeat = heartbeat or min(self.lease_timeout / 3.0, HEARTBEAT_MAX)
        self._seen_bits_wanted = seen_bits
        self._bits = seen_bits
        self._local_max = max(1024, local_seen)
        self._local = MemorySeenSet()
        self.worker_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._wid = self.worker_id.encode()
        self._r: Any = None
        self._sha: dict[str, str] = {}
        self._fp: Fingerprinter | None = None
        self._due: float | None = None
        # open leases of this worker: Lease.id -> (Redis's lease id, URL). Lease.id carries
        # the epoch in its high bits: Redis back from an AOF without its last second may hand
        # out an id again, and this worker may still hold the first lease of that id.
        self._mine: dict[int, tuple[int, bytes]] = {}
        #: Incremented each time Redis answers again after a failure: it may have restarted
        #: without its last writes (appendfsync everysec), so what this worker knows to be
        #: seen may be lost there. The engine's admission empties its caches when it changes.
        self.epoch = 0
        self._run_id: str | None = None  # the server's run_id: a new one means a restart
        self._delays: dict[str, float] = {}  # set_delay calls not yet written
        self._event = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._pubsub: Any = None
        self._outage = False
        self._quiet_until = 0.0  # monotonic: no expired leases taken back before then
        self._closed = True
        #: Script and command calls sent (round trips), for benchmarks.
        self.calls = 0

    def __repr__(self) -> str:
        return f"<RedisState {self.location}>"

    # -- lifecycle --

    async def open(self, *, per_host: int, delay: float, max_pages_per_host: int) -> None:
        """Connect, create or check the crawl, store the politeness settings crawl-wide.

        Raises:
            StateError: Redis unreachable (the URL, password hidden, and the reason), a
                key layout of another version, or open already.
        """
        if not self._closed:
            raise StateError(f"{self.location}: already open")
        import redis.asyncio as aioredis  # noqa: PLC0415
        import redis.exceptions as rexc  # noqa: PLC0415

        try:
            client = aioredis.Redis.from_url(
                self.url,
                socket_connect_timeout=5.0,
                socket_timeout=10.0,
                redis_connect_func=self._on_connect,
            )
        except ValueError as e:
            raise StateError(f"{self.location}: not a usable Redis URL: {e}") from e
        self._r = client
        try:
            await client.ping()
            for name, src in SCRIPTS.items():
                self._sha[name] = await client.script_load(src)
            await self.check_keys()
            found, key, bits = await client.evalsha(
                self._sha["init"],
                1,
                self.prefix,
                VERSION,
                new_key(),
                max(1, per_host),
                repr(float(delay)),
                max(0, max_pages_per_host),
                self._seen_bits_wanted,
            )
        except (rexc.RedisError, OSError, StateError) as e:
            self._r = None
            await client.aclose()
            if isinstance(e, StateError):
                raise
            raise bad_state(self.location, str(e)) or StateError(
                f"{self.location}: cannot use Redis: {reason(e)}"
            ) from e
        if found != VERSION.encode():
            self._r = None
            await client.aclose()
            raise StateError(
                f"{self.location}: the crawl {self.name!r} has key layout version"
                f" {found.decode('utf-8', 'replace')!r}, this crawler reads version"
                f" {VERSION!r}: use another --name or another database"
            )
        p = self.prefix
        bits = as_int(self.location, p + "cfg", bits)
        if len(key) != KEY_BYTES or not 1 <= bits <= 32:
            self._r = None
            await client.aclose()
            what = f"holds {len(key)} bytes, not {KEY_BYTES}" if len(key) != KEY_BYTES else ""
            raise damaged(
                self.location,
                p + ("fpkey" if what else "cfg"),
                what or f"holds bits = {bits}, not 1 to 32",
            )
        self._fp = Fingerprinter(key)
        self._bits = bits
        self._event = asyncio.Event()
        self._closed = False
        self._outage = False
        self._mine.clear()
        await self._beat()
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._heartbeat_loop()),
            loop.create_task(self._listen()),
        ]

    async def close(self) -> None:
        """Hand open leases back, leave the workers list, close the pool. Safe twice.

        With Redis unreachable it gives up after ``CLOSE_TIMEOUT`` seconds (a warning):
        the leases then come back when they expire."""
        if self._closed:
            return
        self._closed = True
        await self._stop_tasks()
        r = self._r
        errors: tuple[type[BaseException], ...] = (TimeoutError, *redis_errors())

        async def leave() -> None:
            if self._delays:
                await self._flush_delays()
            if self._mine:
                held = [x for pair in self._mine.values() for x in pair]
                self._mine.clear()
                await self._script("give_back", self._wid, *held)
            await self._script("leave", self._wid)

        try:
            # bounded: with Redis down, the leases expire by themselves
            await asyncio.wait_for(leave(), CLOSE_TIMEOUT)
        except errors as e:
            log.warning("%s: could not hand leases back at close: %s", self.location, reason(e))
        finally:
            await r.aclose()

    # -- fingerprints --

    def fingerprint(self, url: str) -> int:
        """Keyed BLAKE2b under the crawl's stored key: the same in every worker and run."""
        if self._fp is None:
            raise StateError(f"{self.location}: open the state before fingerprinting")
        return self._fp(url)

    def seen(self, fp: int) -> bool:
        """True if this worker offered ``fp`` before (a local, bounded cache)."""
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
        if self._delays:
            await self._flush_delays()
        accepted: list[Candidate] = []
        shift = 64 - self._bits
        low = (1 << shift) - 1
        width = f"0{(self._bits + 3) // 4}x"
        for start in range(0, len(candidates), OFFER_CHUNK):
            chunk = candidates[start : start + OFFER_CHUNK]
            args: list[Any] = [self._wid]
            for c in chunk:
                ref = c.referrer
                fp = c.fp
                args.append(
                    (
                        f"{fp >> shift:{width}}\t{fp & low}\t{1 if c.queue else 0}\t{c.depth}"
                        f"\t{c.origin}\t{c.host}\t{c.kind}\t{'' if ref is None else len(ref)}"
                        f"\t{ref or ''}{c.url}"
                    ).encode("utf-8", "surrogatepass")
                )
            due, flags = await self._script("offer", *args)
            self._set_due(due)
            accepted += [c for c, f in zip(chunk, flags, strict=True) if f == 0x31]
            self._remember([c.fp for c in chunk])
        if accepted:
            self._event.set()
        return accepted

    def _set_due(self, raw: Any) -> None:
        self._due = _due(raw)

    async def lease(self, n: int, now: float, *, budget: int = 0) -> list[Lease]:
        """The protocol's ``lease``; ``budget`` > 0 is a crawl-wide page budget (max_pages)
        checked in the same atomic step: no lease once done (robots skips aside) plus leased
        reaches it, whichever worker asks."""
        if n <= 0:
            return []
        if self._delays:
            await self._flush_delays()
        expires = now + self.lease_timeout
        quiet = self._outage or time.monotonic() < self._quiet_until  # (an outage seen here)
        reclaim = 0 if quiet else 1
        raw = await self._script("lease", repr(now), n, repr(expires), max(0, budget), reclaim)
        self._set_due(raw[0])
        out: list[Lease] = []
        for i in range(2, len(raw), 4):
            try:
                lease_id = int(raw[i])
                origin = raw[i + 1].decode("utf-8", "surrogatepass")
                depth = int(raw[i + 2])
                attempts, payload = raw[i + 3].decode("utf-8", "surrogatepass").split("\t", 1)
                kind, referrer, url = _decode(payload)
                tries = int(attempts)
            except (ValueError, IndexError, TypeError, AttributeError, UnicodeDecodeError):
                o, d = (
                    x.decode("utf-8", "replace") if isinstance(x, bytes) else x
                    for x in raw[i + 1 : i + 3]
                )
                queue = f"{self.prefix}q:{o}\t{d}"
                raise damaged(
                    self.location, ascii(queue)[1:-1], "holds a request this crawler cannot read"
                ) from None
            local_id = (self.epoch << _EPOCH_SHIFT) | lease_id
            out.append(Lease(local_id, url, depth, referrer, origin, kind, tries, expires))
            self._mine[local_id] = (lease_id, url.encode("utf-8", "surrogatepass"))
        return out

    def _redis_id(self, lease: Lease) -> int:
        """Redis's id of ``lease`` (no longer held by this worker from now on)."""
        held = self._mine.pop(lease.id, None)
        return held[0] if held is not None else lease.id & _ID_MASK

    async def complete(self, lease: Lease, outcome: Outcome, now: float) -> None:
        await self.complete_many([(lease, outcome)], now)

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        if not done:
            return
        if self._delays:
            await self._flush_delays()
        args: list[Any] = [self._wid, repr(now)]
        for lease, outcome in done:
            args += (self._redis_id(lease), _url_bytes(lease.url), outcome.error or "")
        due, n = await self._script("complete", *args)
        self._set_due(due)
        if n:
            self._event.set()

    async def retry(self, lease: Lease, not_before: float, now: float) -> None:
        if self._delays:
            await self._flush_delays()
        rid = self._redis_id(lease)
        due, n = await self._script(
            "retry", self._wid, repr(now), repr(not_before), rid, _url_bytes(lease.url)
        )
        self._set_due(due)
        if n:
            self._event.set()

    def set_delay(self, origin: str, delay: float) -> None:
        """Recorded here, written crawl-wide before this worker's next offer, lease,
        completion or retry (one more round trip then, once per batch of delays)."""
        self._delays[origin] = delay

    async def _flush_delays(self) -> None:
        pending, self._delays = self._delays, {}
        args: list[Any] = []
        for origin, delay in pending.items():
            args += (origin, repr(float(delay)))
        self._set_due(await self._script("set_delay", *args))

    def next_due(self, now: float) -> float | None:
        """From the last call's answer: when a waiting origin or retry becomes leasable."""
        due = self._due
        if due is None or due <= now:
            return None
        return due

    async def wait(self, timeout: float) -> None:
        """Return when this worker or another offered, completed or retried since the last
        ``wait`` returned (at once if so), or after ``timeout`` seconds."""
        await wait_event(self._event, timeout)

    async def counts(self) -> Counts:
        c, f, n = await self._script(
            "read", *read_args(("c", "h", MAX_FIELDS), ("f", "h", MAX_FIELDS), ("n", "s", 64))
        )
        return counts_of(self.location, self.prefix, c, f, n)

    # -- the crawl's counters, robots rules and settings --

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        if not deltas:
            return
        key = self.prefix + "k"

        def build(pipe: Any) -> None:
            for name, delta in deltas.items():
                pipe.hincrby(key, name, delta)

        await self._cmd(build)

    async def counters(self) -> dict[str, int]:
        (raw,) = await self._script("read", "k", "h", MAX_FIELDS)
        return int_hash(self.location, self.prefix + "k", raw)

    async def get_robots(self, origin: str) -> StoredRobots | None:
        key = "r:" + origin
        (raw,) = await self._script("read", key, "s", MAX_ROBOTS_VALUE)
        if raw is None:
            return None
        head, _, body = raw.partition(b"\n")
        meta = json_object(self.location, self.prefix + key, head)
        t, s, e = meta.get("t"), meta.get("s"), meta.get("e")
        if (
            not isinstance(t, (int, float))
            or not (s is None or type(s) is int)
            or not (e is None or isinstance(e, str))
        ):
            raise damaged(
                self.location, ascii(self.prefix + key)[1:-1], "is not a robots.txt record"
            )
        return StoredRobots(origin, float(t), s, body, e)

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
