"""The Redis state's membership and messages: heartbeat, claims, loads, inbox, outbox.

``ShardLink`` is the part of ``RedisState`` (a mixin over ``RedisLink``) that runs in the
background while the state is open:

* **The heartbeat** (every ``heartbeat`` seconds, and once at open): one ``beat`` script keeps
  this worker among the live ones, renews its shards' claims, stores its report (queued,
  leased, busy: what ``counts`` sums) and answers the live workers and the claims; then
  ``ShardBook.plan`` says which shards to claim (won by rendezvous, free or lapsed) and which
  to release (won by another live worker, nothing of them out any more). A claimed shard is
  loaded (its open requests read from ``S p``, ``HSCAN`` pages of ``LOAD_PAGE``).
* **The inbox**: a Redis stream per worker (``P in:<worker>``), read with ``XREAD BLOCK``
  (the only thing a worker blocks on in Redis): other workers append the new requests of this
  worker's shards, a batch per destination every ``FORWARD_GAP`` seconds (the outbox). The
  requests are in Redis already (``put`` wrote them): a message only tells the owner, so a
  message lost (an owner that died, a view of the owners one heartbeat old) loses nothing:
  the shard's next load or an idle owner's ``heal`` finds the request.
* **Reports**: a worker turning busy or idle says so at once (``report``), so that the others'
  ``counts`` see the whole crawl.

Lease-expiry bookkeeping per request is gone: a request stays open in ``S p`` until it is
completed, and the claim's lapse is the one expiry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from crawler.state._redis_check import MAX_FIELDS, damaged
from crawler.state._redis_cluster import Call
from crawler.state._redis_link import BACKOFF_MAX, BACKOFF_MIN, RedisLink, redis_errors
from crawler.state._redis_owner import (
    Item,
    ShardBook,
    pack_value,
    parse_value,
    payload_of,
)
from crawler.state._redis_status import counter_blob, counters_of, tally_of
from crawler.state.base import Counts

__all__ = ["FORWARD_GAP", "LOAD_PAGE", "ShardLink"]

log = logging.getLogger("crawler.state.redis")

#: Seconds new requests for another owner wait to be sent together (one XADD a destination).
FORWARD_GAP = 0.02
#: Requests read a call when a shard is loaded.
LOAD_PAGE = 2000
#: Shards read in one call when they are claimed.
LOAD_SHARDS = 256
#: Entries an inbox keeps at most (XADD MAXLEN ~): a message is a hint, the request is in S p.
INBOX_MAX = 100_000
#: Seconds between two reports of a busy worker's numbers (queued, leased) for ``counts``.
REPORT_GAP = 0.5


class ShardLink(RedisLink):
    """Heartbeat, claims and loads, inbox and outbox of ``RedisState``."""

    book: ShardBook
    worker_id: str
    _sprefix: list[str]
    _mine: dict[int, Item]
    _delays: dict[str, float]
    _counted: Counter[str]
    _counted_dirty: bool
    _kfield: str
    _split_pending: bool = False

    def _init_shard_link(self) -> None:
        self._outbox: dict[str, dict[int, list[str]]] = {}
        self._sender: asyncio.Task[None] | None = None
        self._reporter: asyncio.Task[None] | None = None
        self._busy = False
        self._dirty = False
        self._budgeted = False
        self._reload = False
        self._rebalance = asyncio.Event()
        self._member_lock = asyncio.Lock()

    # -- heartbeat and claims --

    def _report(self) -> str:
        book = self.book
        return (
            f"{book.backlog()} {len(self._mine)} {1 if self._busy else 0}"
            f" {book.queues.working() if self._busy else 0}"
            f" {','.join(map(str, book.active_shards())) or '-'}"
        )

    async def _membership(self) -> None:
        """One heartbeat: renew, see the live workers and claims, claim, release, load (one
        at a time: a heartbeat asked for while one runs waits for it)."""
        async with self._member_lock:
            await self._seen_failover()
            await self._membership_now()

    async def _membership_now(self) -> None:
        book = self.book
        me = self.worker_id
        alive = repr(self.heartbeat * 3.0)
        now_s, live, own_flat, host_budget, per_host, delay, reports, split = await self._script(
            "beat", self._wid, alive, repr(self.lease_timeout), self._report()
        )
        self._host_budget = int(host_budget or 0)
        if per_host or delay:
            queues = book.queues
            queues.set_politeness(
                int(per_host) if per_host else queues.per_host,
                float(delay) if delay else queues.delay,
            )
        if split and self._split_pending:
            self._split_pending = False
            book.resplit(int(split))
            self._reload = True
        own = {
            int(own_flat[i]): own_flat[i + 1].decode("utf-8", "replace")
            for i in range(0, len(own_flat), 2)
        }
        names = [w.decode("utf-8", "replace") for w in live]
        active: set[int] = set()
        living = set(names)
        for i in range(0, len(reports), 2):
            parts = reports[i + 1].split()
            if reports[i].decode("utf-8", "replace") in living and len(parts) >= 5:
                with contextlib.suppress(ValueError):
                    active.update(int(k) for k in parts[4].split(b",") if k != b"-")
        active = {k for k in active if 0 <= k < book.shards}
        active.update(book.active_shards())
        claim, release, reread = book.plan(me, names, own, active)
        if set(names) != set(book.live_before):
            book.live_before = names
            if not book.held or claim:  # (just open, or joined: tell the others at once)
                await self._tell_members(names)
        if release:
            await self._flush_done()  # their completions ended here: written before they go
            await self._script("release", self._wid, "0", *release)
            for k in release:
                book.hand_over(k)
            # the winners claim them now, not at their next heartbeat
            await self._tell_members(sorted({book.winners[k] for k in release} - {me}))
        reload, self._reload = self._reload, False
        if reload:
            await self._load(*book.held)
        elif reread:
            await self._load(*reread)
        if claim:
            quiet = self._outage or time.monotonic() < self._quiet_until
            got = await self._script(
                "claim", self._wid, repr(self.lease_timeout), "1" if quiet else "0", *claim
            )
            taken = [int(raw) for raw in got]
            for k in taken:
                book.owners[k] = me
                book.take(k)
            await self._load(*taken)
        self._busy_changed()

    async def _load(self, *shards: int) -> int:
        """Read shards' open requests into the queues (those not known here): one call for
        the first page of up to ``LOAD_SHARDS`` shards, then one a page of a big one."""
        added = 0
        for start in range(0, len(shards), LOAD_SHARDS):
            some = shards[start : start + LOAD_SHARDS]
            keys = [self._sprefix[k] for k in some]
            if self.cluster:  # one call a shard (a slot each), one round trip a node
                replies = await self._batch([("load", [key], ["0", LOAD_PAGE]) for key in keys])
                pages = [page for reply in replies for page in reply]
            else:
                pages = await self._script_keys("load", keys, "0", LOAD_PAGE)
            for k, (cursor, flat, delays) in zip(some, pages, strict=True):
                for i in range(0, len(delays), 2):
                    origin = delays[i].decode("utf-8", "surrogatepass")
                    with contextlib.suppress(ValueError):
                        self.book.queues.set_delay(origin, float(delays[i + 1]))
                added += self._loaded(k, flat)
                while cursor not in (b"0", "0", 0):
                    ((cursor, flat, _),) = await self._script_keys(
                        "load", [self._sprefix[k]], cursor, LOAD_PAGE
                    )
                    added += self._loaded(k, flat)
        if added:
            self._event.set()
        return added

    def _loaded(self, k: int, flat: list[Any]) -> int:
        """Queue a page of shard ``k``'s open requests; their fingerprints go in the local
        seen cache too (they are in the shard's seen set: a link to one found here later
        needs no ``SADD`` to learn so, the commands a page a takeover would otherwise add)."""
        added = 0
        now = time.time()
        fps: list[int] = []
        for i in range(0, len(flat), 2):
            try:
                fp = int(flat[i])
                fps.append(fp)
                parsed = parse_value(flat[i + 1].decode("utf-8", "surrogatepass"))
            except (ValueError, IndexError, UnicodeDecodeError):
                raise damaged(
                    self.location,
                    self._sprefix[k] + "p",
                    "holds a request this crawler cannot read",
                ) from None
            added += self.book.add(k, fp, parsed, now)
        self._remember(fps)  # type: ignore[attr-defined]
        return added

    async def _heartbeat_loop(self) -> None:
        # the flag as well as the cancel: redis-py may turn a cancel in a read into an error
        while not self._closed:
            # a heartbeat; sooner when told that a worker joined or left or let shards go,
            # or when the last request out of a shard this worker lets go has ended
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._rebalance.wait(), self.heartbeat)
            self._rebalance.clear()
            try:
                await self._membership()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.warning("%s: heartbeat failed", self.location, exc_info=True)

    # -- reports --

    def _busy_changed(self) -> None:
        """Report this worker's numbers: at once when it turns busy or idle, else at most
        every ``REPORT_GAP`` seconds (in the background). And a heartbeat now when a shard
        this worker lets go has nothing out any more."""
        if self._closed:
            return
        if self.book.let_go:
            self.book.let_go = False
            self._rebalance.set()
        busy = bool(self.book.backlog() or self._mine or self._outbox)
        flipped = busy != self._busy
        self._busy = busy
        self._dirty = True
        if self._reporter is None or self._reporter.done():
            gap = 0.0 if flipped else REPORT_GAP
            self._reporter = asyncio.get_running_loop().create_task(self._send_report(gap))
            self._tasks = [t for t in self._tasks if not t.done()] + [self._reporter]

    async def _send_report(self, gap: float) -> None:
        if gap:
            await asyncio.sleep(gap)
        while not self._closed and self._dirty:
            self._dirty = False
            try:
                await self._script("report", self._wid, self._report())
            except Exception:  # noqa: BLE001  (the heartbeat reports again)
                return

    # -- writes --

    async def add_counters(self, deltas: Mapping[str, int]) -> None:
        """Added here; written (this run's totals, one field) with the next completions, in
        the same atomic step (the engine adds a batch's counters just before completing
        it), or by ``counters`` or ``close``."""
        self._counted.update(deltas)
        self._counted_dirty = bool(deltas) or self._counted_dirty

    async def _flush_counters(self) -> None:
        if self._counted_dirty:
            self._counted_dirty = False
            blob = counter_blob(dict(self._counted))
            await self._cmd(lambda pipe: pipe.hset(self.prefix + "kw", self._kfield, blob))

    async def counters(self) -> dict[str, int]:
        await self._flush_counters()
        (raw,) = await self._script("read", "k", "h", MAX_FIELDS)
        (kw,) = await self._cmd(lambda pipe: pipe.hgetall(self.prefix + "kw"))
        return counters_of(self.location, self.prefix, raw, kw)

    async def _requeue(self, items: list[tuple[Item, int, float]], recovered: int = 0) -> None:
        """Write requests back in line (attempts, not_before) in their shards' ``S p``; the
        first ``recovered`` of them count as recovered (given back by a closing worker)."""
        records: list[tuple[int, tuple[int, bytes, str]]] = []
        for i, (item, attempts, not_before) in enumerate(items):
            fp, k, _g, url, depth, referrer, origin, kind, _a = item
            value = pack_value(attempts, not_before, depth, origin, payload_of(kind, referrer, url))
            mark = "1" if i < recovered else "0"
            records.append((k, (fp, value.encode("utf-8", "surrogatepass"), mark)))
        await self._sharded("requeue", (), records)

    async def _flush_delays(self) -> None:
        pending, self._delays = self._delays, {}
        records: list[tuple[int, tuple[str, str]]] = []
        for origin, delay in pending.items():
            wanted = repr(float(delay)) if delay > self.book.queues.delay else ""
            # each part of the host keeps it (its owner applies K times it: _redis_split)
            records += [(k, (origin, wanted)) for _, k in self.book.parts(origin)]
        await self._sharded("delay", (), records)

    async def _settle_split(self) -> None:
        """This worker opened a crawl with no split yet and had no opinion (no seeds): before
        its first offer or lease, the crawl's split is read, or fixed at 1 if still none (a
        worker with seeds stores its own at open, before its settings, which a joining worker
        waits for): no request is routed before the split is fixed in Redis."""
        key = self.prefix + "cfg"
        _, split = await self._cmd(
            lambda pipe: (pipe.hsetnx(key, "split", "1"), pipe.hget(key, "split"))
        )
        self._split_pending = False
        if int(split or 1) != self.book.split:
            self.book.resplit(int(split or 1))
            await self._load(*self.book.held)  # queued again with their parts' politeness
        if self._delays:
            await self._flush_delays()

    async def _flush_done(self) -> None:
        """Write the completions ended here and not yet written (``_redis_done``)."""

    # -- outbox and inbox --

    def _forward(self, k: int, fp: int, value: str) -> None:
        """Tell shard ``k``'s owner of a new request of it (batched; see FORWARD_GAP)."""
        owner = self.book.owner(k)
        if not owner or owner == self.worker_id:
            return  # no live owner: the shard's next load finds it
        self._outbox.setdefault(owner, {}).setdefault(k, []).append(f"{fp}\t{value}")
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_later())
            self._tasks = [t for t in self._tasks if not t.done()] + [self._sender]

    async def _send_later(self) -> None:
        await asyncio.sleep(FORWARD_GAP)
        if not self._closed:
            try:
                await self._flush_outbox()
            except Exception:  # noqa: BLE001  (the requests are in Redis: owners heal)
                log.warning("%s: could not send to the owners", self.location, exc_info=True)

    async def _tell_members(self, live: list[str]) -> None:
        """Ask the other live workers for a heartbeat now (a join or a leave)."""
        p = self.prefix
        others = [w for w in live if w != self.worker_id]
        if others:
            await self._cmd(
                lambda pipe: [
                    pipe.xadd(p + "in:" + w, {"m": self.worker_id}, maxlen=INBOX_MAX)
                    for w in others
                ]
            )

    async def _flush_outbox(self) -> None:
        box, self._outbox = self._outbox, {}
        if not box:
            return
        p = self.prefix

        def build(pipe: Any) -> None:
            for owner, shards in box.items():
                fields = {str(k): "\n".join(lines) for k, lines in shards.items()}
                pipe.xadd(p + "in:" + owner, fields, maxlen=INBOX_MAX, approximate=True)

        await self._cmd(build)

    async def _inbox_loop(self) -> None:
        """Read this worker's inbox: new requests of its shards, queued here."""
        key = self.prefix + "in:" + self.worker_id
        errors = redis_errors()
        pause = BACKOFF_MIN
        last = "0-0"
        while not self._closed:
            try:
                got = await self._r.xread({key: last}, count=64, block=1000)
                pause = BACKOFF_MIN
            except errors:
                await asyncio.sleep(pause)
                pause = min(pause * 2, BACKOFF_MAX)
                continue
            if not got:
                continue
            ids = []
            for _stream, entries in got:
                for entry_id, fields in entries:
                    ids.append(entry_id)
                    last = entry_id
                    self._take_message(fields)
            with contextlib.suppress(*errors):
                await self._r.xdel(key, *ids)

    def _take_message(self, fields: dict[bytes, bytes]) -> None:
        book = self.book
        now = time.time()
        added = False
        fps: list[int] = []
        for raw_k, data in fields.items():
            if raw_k == b"m":  # a worker joined or left: a heartbeat now
                self._rebalance.set()
                continue
            try:
                k = int(raw_k)
                if not 0 <= k < book.shards:
                    continue
                lines = data.decode("utf-8", "surrogatepass").split("\n")
            except (ValueError, UnicodeDecodeError):
                continue  # not ours: the requests themselves are in S p
            for line in lines:
                try:
                    head, value = line.split("\t", 1)
                    fp = int(head)
                    parsed = parse_value(value)
                except (ValueError, IndexError):
                    continue
                fps.append(fp)
                if book.add(k, fp, parsed, now):
                    added = True
                elif book.active(k) is None:
                    self._forward(k, fp, value)  # moved on meanwhile
        self._remember(fps)  # type: ignore[attr-defined]
        if added:
            self._event.set()
            self._busy_changed()

    # -- the whole crawl --

    async def _counts(self) -> Counts:
        """Where the crawl stands: the shards' open requests (``HLEN S p``) and ``S c``
        summed (both written in the requests' atomic steps), the workers' reports (leased),
        the inboxes; when every worker is idle and requests are open all the same (a message
        missed), this worker's shards are checked (``heal``)."""
        raw, sums = await self._tally()
        tally = tally_of(self.location, raw, sums, self.worker_id, len(self._mine))
        idle_here = not (self.book.backlog() or self._mine or self._outbox)
        if (
            tally.open_requests
            and idle_here
            and not (tally.others_busy or tally.inbox or tally.orphans)
        ):
            await self._heal()
        counts = tally.counts
        origins = counts.origins + self.book.queues.working()
        return Counts(
            queued=counts.queued,
            leased=counts.leased,
            done=counts.done,
            failed=counts.failed,
            seen=counts.seen,
            origins=origins,
            recovered=counts.recovered,
        )

    async def _tally(self) -> tuple[Any, list[Any]]:
        """The ``tally`` script's answer and the sums of the shards in ``P used``: one round
        trip (a node) with the shards this worker knows to be used (one server: one script;
        a cluster: ``tally`` and one ``sums`` a shard, pipelined); one more for shards used
        since (then known here)."""
        p = self.prefix
        if self._home is not None:  # the crawl's counts in P c: one HGETALL, not two a shard
            raw = await self._script_keys("tally", [p, p], self.book.shards, 0)
            self._used.update(int(k) for k in raw[3])
            return raw, [raw[4]]
        used = sorted(self._used)
        if self.cluster:
            calls: list[Call] = [("tally", [p], [self.book.shards, 0])]
            calls += [("sums", [self._sprefix[k]], [0]) for k in used]
            raw, *sums = await self._batch(calls)
        else:
            keys = [p, *(self._sprefix[k] for k in used)]
            raw = await self._script_keys("tally", keys, self.book.shards, 0)
            sums = [raw[4]]
        found = {int(k) for k in raw[3]}
        more = sorted(found - set(used))  # (not self._used: an outage may have emptied it)
        self._used.update(found)
        if more:
            if self.cluster:
                sums += await self._batch([("sums", [self._sprefix[k]], [0]) for k in more])
            else:
                sums.append(await self._script_keys("sums", [self._sprefix[k] for k in more], 0))
        return raw, sums

    async def _heal(self) -> None:
        """Load again each shard held here whose open requests in Redis outnumber those
        known here (a message that never came)."""
        held = [k for k in self.book.held if self.book.active(k) is not None]
        if not held:
            return
        keys = [self._sprefix[k] + "p" for k in held]
        lengths = await self._cmd(lambda pipe: [pipe.hlen(key) for key in keys])
        short = []
        for k, length in zip(held, lengths, strict=True):
            shard = self.book.active(k)
            if shard is not None and int(length) > len(shard.open):
                short.append(k)
        await self._load(*short)
