"""The Redis state's completion path: completions ended here at once, written in batches.

``CompletionPath`` is the part of ``RedisState`` (a mixin over ``ShardLink``) that ends leases.
The engine completes about 1.5 pages a call, so writing each call at once cost a script call
a page (its ``EVALSHA``, an ``HINCRBY done`` a shard, the pages/s ``HINCRBY``) and a round trip
that held the page's slot. Here a completion is ended in the worker's own bookkeeping at once
(``ShardBook.ended``: the origin's slot, its delay and the next lease need no Redis), and its
write (the ``complete`` script: ``HDEL`` of the open request, the shard's counts) waits in a
pending list that goes to Redis in one call a window: ``DONE_GAP`` seconds after the first
completion pending, at once when the pending completions reach the most leases this worker
had out at one time (about its concurrency), and always before whatever reads or hands over
what they change: ``counts`` (the crawl's end, the page budget), a heartbeat that releases
shards, and ``close``.

What a SIGKILL costs: a completion ended here and not yet written leaves its request open in
its shard's ``S p``, so the shard's next owner fetches it again: duplicates at most the pages in
flight plus those pending (bounded by the concurrency), nothing lost (at-least-once, as
before). Writing one twice (a write cut off after Redis applied it, then sent again) counts
it once: the script's ``HDEL`` finds nothing and the seen bucket already holds it.

What Redis coming back costs (a restart, which may have lost its last second; a failover; an
outage): the completions pending from before are not written (``RedisLink.writing_in``: each
attempt checks the epoch, on each new connection too), nor are those of leases handed out
before it (their pages' links may have been offered to the Redis of before: the epoch of a
completion is its lease's); their requests are offered again and fetched again (duplicates
at most the pending ones and those in flight). Written to a Redis that came back
without its last second, they would count pages done whose links, offered in that second,
are gone: pages never fetched (seen 1 run in 4 in tests/test_redis_cluster.py's rollback).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from crawler.state._redis_link import StaleWrite
from crawler.state._redis_owner import Item
from crawler.state._redis_shards import ShardLink
from crawler.state._redis_status import counter_blob
from crawler.state.base import Candidate, Lease, Outcome
from crawler.urls.policy import host_of

__all__ = ["DONE_GAP", "CompletionPath"]

log = logging.getLogger("crawler.state.redis")

#: Seconds the first pending completion waits for others before they are written together.
DONE_GAP = 0.025

#: A completion pending: its request and the error kind ("" for a page fetched).
Done = tuple[Item, str]


class CompletionPath(ShardLink):
    """``complete_many`` and ``retry`` of ``RedisState``; the pending completions' writes."""

    _bits: int
    offer_many: Callable[[Sequence[Candidate]], Awaitable[list[Candidate]]]

    def _init_completion_path(self) -> None:
        self._done_pending: list[Done] = []
        self._done_epoch = 0  # the epoch of the oldest pending completion
        self._done_now = 0.0  # the latest completion's time (its pages/s bucket)
        self._done_writer: asyncio.Task[None] | None = None
        self._done_lock = asyncio.Lock()
        self._lease_peak = 1  # the most leases out at once here: the pending list's bound
        self._done_error: BaseException | None = None
        self._rate_bucket = 0  # the 10-second bucket of this worker's last completions

    async def complete(self, lease: Lease, outcome: Outcome, now: float) -> None:
        await self.complete_many([(lease, outcome)], now)

    async def complete_many(self, done: Sequence[tuple[Lease, Outcome]], now: float) -> None:
        """Ended here at once (slots, delays, the next lease); written to Redis with the
        other completions of a window (see the module docstring)."""
        if not done:
            return
        if self._delays:
            await self._flush_delays()
        out = len(self._mine)
        if out > self._lease_peak:
            self._lease_peak = out
        pending = self._done_pending
        if not pending:
            self._done_epoch = self.epoch
        ended: list[Item] = []
        skipped = 0
        floor = self._lease_floor
        stale: list[Done] = []
        for lease, outcome in done:
            item = self._mine.pop(lease.id, None)
            if item is None or item[3] != lease.url:
                continue  # not open here (an earlier open's lease: written back at close)
            ended.append(item)
            # leased before Redis came back: its page's links may have gone to the Redis of
            # before, so its completion is of that epoch (not written: fetched again)
            (stale if lease.id <= floor else pending).append((item, outcome.error or ""))
            skipped += outcome.error == "robots_disallowed"
        if skipped and self._budgeted:  # given back to the page budget now, as a lease
            await self._script("admit", 0, -skipped)
        for item in ended:
            self.book.ended(item, now, completed=True)
        if stale:
            await self._not_written(stale, self.epoch - 1)
            pending = self._done_pending  # (a write may have taken the list meanwhile)
        if pending:
            self._done_now = max(self._done_now, now)
            if len(pending) >= self._lease_peak:
                await self._flush_done()
            elif self._done_writer is None or self._done_writer.done():
                self._done_writer = asyncio.get_running_loop().create_task(self._write_later())
                self._tasks = [t for t in self._tasks if not t.done()] + [self._done_writer]
        self._event.set()
        self._busy_changed()

    async def _write_later(self) -> None:
        await asyncio.sleep(DONE_GAP)
        if self._closed:
            return
        try:
            await self._flush_done()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # noqa: BLE001  (kept pending: the next write raises it)
            self._done_error = e
            log.warning("%s: could not write completions: %s", self.location, e)

    async def _flush_done(self) -> None:
        """Write the pending completions (one call on one server, one a shard in one
        pipeline on a cluster, with the pages/s bucket and this run's counter totals);
        before them, the messages to other owners of links these pages found."""
        async with self._done_lock:
            error, self._done_error = self._done_error, None
            batch, self._done_pending = self._done_pending, []
            # links these pages offered to other owners are safe in Redis already: the
            # messages telling those owners go first all the same, so that they hear soon
            if self._outbox:
                await self._flush_outbox()
            if not batch:
                if error is not None:
                    raise error
                return
            epoch = self._done_epoch
            try:
                with self.writing_in(epoch):
                    await self._write_done(batch)
            except StaleWrite:
                await self._not_written(batch, epoch)
            except BaseException:
                self._done_pending[:0] = batch  # (a cancel, a refusal): written later
                self._done_epoch = epoch  # (the oldest again: epochs only grow)
                raise

    async def _not_written(self, batch: list[Done], epoch: int) -> None:
        """Completions of ``epoch`` that Redis, back in another, did not get: forgotten here
        and their requests offered again. One whose offer Redis lost is queued anew (else,
        with its own completion gone too, no page would ever offer it again: a seed, say);
        one still open there is seen, and queued here again when this worker reads its
        shards (the heartbeat after a new epoch)."""
        log.warning(
            "%s: Redis came back: %d completions of leases from before are not written (their"
            " pages are fetched again)",
            self.location,
            len(batch),
        )
        if self.epoch == epoch:  # (an outage: this worker forgets as on a restart)
            self._forget()
        else:  # (some may have ended since that forget: read the shards again)
            self.book.forget_completed()
            self._reload = True
        if self._done_pending:
            self._done_epoch = self.epoch
        await self.offer_many(
            [
                Candidate(url, fp, origin, host_of(url), depth, referrer, kind)
                for (fp, _k, _g, url, depth, referrer, origin, kind, _a), _e in batch
            ]
        )

    async def _write_done(self, batch: list[Done]) -> None:
        # the ``complete`` script's records: shard, "fingerprint, seen bucket, the
        # fingerprint's low bits, error kind or nothing" (framed into one argument a call)
        shift = 64 - self._bits
        low = (1 << shift) - 1
        width = f"0{(self._bits + 3) // 4}x"
        records = [
            (
                item[1],
                (f"{item[0]}\t{item[0] >> shift:{width}}\t{item[0] & low}\t{error}".encode(),),
            )
            for item, error in batch
        ]
        dirty, self._counted_dirty = self._counted_dirty, False
        p, field, blob = self.prefix, self._kfield, counter_blob(dict(self._counted))
        now = self._done_now
        bucket = int(now // 10)
        # old pages/s buckets dropped once a 10-second bucket, by each worker
        trim = [("rate", [p], [repr(now)])] if bucket != self._rate_bucket else []

        def beside(pipe: Any) -> None:
            # the pages/s bucket and this run's counter totals: crawl-wide keys, in the
            # same round trip, not the same atomic step (a rate; totals written again)
            pipe.hincrby(p + "rate", str(bucket), len(batch))
            if dirty:
                pipe.hset(p + "kw", field, blob)

        try:
            await self._sharded("complete", (self._qflag,), records, trim, beside)
        except BaseException:
            self._counted_dirty = self._counted_dirty or dirty
            raise
        self._rate_bucket = bucket

    async def _membership_now(self) -> None:
        """A heartbeat, the completions ended here written first: a shard it loads again
        (after an outage or a restart, when what this worker completed is forgotten) must
        not find open a request completed here, or it would be fetched twice."""
        await self._flush_done()
        await super()._membership_now()

    async def retry(self, lease: Lease, not_before: float, now: float) -> None:
        if self._delays:
            await self._flush_delays()
        item = self._mine.pop(lease.id, None)
        if item is None or item[3] != lease.url:
            return  # not open here (an earlier open's lease: written back at close)
        await self._requeue([(item, item[8] + 1, not_before if not_before > now else 0.0)])
        if self._budgeted:
            await self._script("admit", 0, -1)
        self.book.ended(item, now, completed=False)
        self.book.again(item, item[8] + 1, not_before, now)
        self._event.set()
        self._busy_changed()
