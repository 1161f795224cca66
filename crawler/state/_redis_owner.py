"""Which shards this worker owns, and their requests in memory (the Redis state's frontier).

A crawl in Redis is split into a fixed number of virtual shards by a hash of the origin's
host (``shard_of``). Each shard is owned by one live worker: the one that wins rendezvous hashing
(highest ``blake2b(worker, shard)``) over the workers whose heartbeat has not lapsed, the
shards with work spread evenly (``balance``), and that holds the shard's claim in Redis
(``P own``, renewed by its heartbeat). So:

* **Politeness by construction**: every origin belongs to one shard and every shard to one
  worker, so the per-host cap, the delay, a Crawl-delay and a Retry-After are this worker's
  local timers (``crawler.state.frontier.OriginQueues``, the memory state's own machinery):
  the cap holds cluster-wide with no Redis call to lease.
* **A takeover is a reload**: the shard's open requests (queued, held or in flight) stay in
  Redis (``S p``) until they are completed; a new owner reads them (``load``) and leases them
  again: the requests a dead owner had in flight are fetched once more (at-least-once,
  duplicates at most what was in flight).
* **Membership changes** are seen at each heartbeat (``ShardBook.plan``): a worker that joins
  wins some shards by rendezvous; their owner stops leasing from them (``leaving``), lets the
  requests it has out end (completed, or retried: written back), then releases the claim,
  which the winner takes at its next heartbeat; nothing of a shard is leased by two workers at
  once beyond what was in flight. A dead worker's claims lapse after the lease timeout and
  are taken by the winners among the living.

Items in memory are tuples ``(fp, shard, generation, url, depth, referrer, origin, kind,
attempts)``; a shard's generation changes each time it is loaded or dropped, so that an item
of a shard no longer held (or held anew) is dropped when it comes out of the queues. An item
read from Redis (a shard's load, an inbox message) is a ``FromRedis`` tuple: anyone who can
write to Redis could have put it there, so its lease is not ``checked`` (the engine checks its
URL again); one this process's admission offered is a plain tuple, and its lease is.
"""

from __future__ import annotations

import heapq
from hashlib import blake2b
from typing import Any, cast

from crawler.state._redis_split import SplitQueues, sub_of
from crawler.urls.policy import host_of

__all__ = [
    "FromRedis",
    "Item",
    "ShardBook",
    "balance",
    "pack_value",
    "parse_value",
    "payload_of",
    "rendezvous",
    "shard_of",
]

#: fp, shard, generation, url, depth, referrer, origin, kind, attempts
Item = tuple[int, int, int, str, int, "str | None", str, int, int]


class FromRedis(tuple):  # type: ignore[type-arg]
    """An ``Item`` read from Redis, not offered by this process (see the module's docstring)."""

    __slots__ = ()


#: Completions remembered to refuse late copies of a request (a few seconds' worth).
_COMPLETED_MAX = 1 << 16
_SHARD_CACHE_MAX = 1 << 16


def shard_of(origin: str, shards: int) -> int:
    """The shard of ``origin``: its host's (every origin of a host in one shard, so that the
    host's ``max_pages_per_host`` budget is one shard's count), the same in every worker (an
    unkeyed hash). A split host's part ``j`` is the shard ``j`` after it (``ShardBook.shard``)."""
    host = host_of(origin) or origin
    digest = blake2b(host.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def _score(worker: str, shard: int) -> int:
    return int.from_bytes(blake2b(f"{worker}\0{shard}".encode(), digest_size=8).digest(), "big")


def rendezvous(live: list[str], shards: int) -> list[str]:
    """The winner of each shard among the ``live`` workers (highest score; "" if none)."""
    if not live:
        return [""] * shards
    scores = {w: [_score(w, k) for k in range(shards)] for w in live}
    return [max(live, key=lambda w: scores[w][k]) for k in range(shards)]


def payload_of(kind: int, referrer: str | None, url: str) -> str:
    """What a request carries that the scripts never read: kind, referrer, URL."""
    return f"{kind}\t{'' if referrer is None else len(referrer)}\t{referrer or ''}{url}"


def balance(workers: list[str], active: set[int], shards: int) -> list[str]:
    """Each shard's owner-to-be. A shard without work goes to its rendezvous winner; the
    shards with work (``active``) are spread evenly: at most ``ceil(active / workers)`` a
    worker, each in shard order to the highest-scoring worker with room. It depends on the
    live workers and the shards with work only (not on who holds what now, which changes
    during a hand-over), so every worker computes the same from the same reports.

    Why: origins are owned whole, and hashing 16 busy origins over 16 workers leaves some
    with three or four and others with none (a balls-into-bins maximum): the crawl lasts as
    long as the busiest worker (benchmarks/CLUSTER.md)."""
    winners = rendezvous(workers, shards)
    if not active or len(workers) < 2:
        return winners
    cap = -(-len(active) // len(workers))
    load = dict.fromkeys(workers, 0)
    for k in sorted(active):
        for w in sorted(workers, key=lambda w: _score(w, k), reverse=True):
            if load[w] < cap:
                winners[k] = w
                load[w] += 1
                break
    return winners


def pack_value(attempts: int, not_before: float, depth: int, origin: str, payload: str) -> str:
    """A request as ``S p`` keeps it."""
    nb = f"{not_before:.6f}" if not_before else ""
    return f"{attempts}\t{nb}\t{depth}\t{origin}\t{payload}"


def parse_value(value: str) -> tuple[int, float, int, str, int, str | None, str]:
    """attempts, not_before, depth, origin, kind, referrer, url of a stored request.

    Raises ValueError (or IndexError) on a value this crawler did not write."""
    attempts, nb, depth, origin, kind, n, rest = value.split("\t", 6)
    if n == "":
        referrer, url = None, rest
    else:
        k = int(n)
        referrer, url = rest[:k], rest[k:]
    if not url:
        raise ValueError("no URL")
    return int(attempts), float(nb or 0), int(depth), origin, int(kind), referrer, url


class _Shard:
    __slots__ = ("gen", "leaving", "open", "out")

    def __init__(self, gen: int) -> None:
        self.gen = gen
        self.open: set[int] = set()  # fingerprints of its requests known here, not completed
        self.out: set[int] = set()  # fingerprints leased from it and not ended (any gen)
        self.leaving = False


class ShardBook:
    """The shards this worker holds, their requests in memory, and the owners' map.

    Args:
        shards: the crawl's shard count.
        per_host, delay: the crawl's politeness (``SplitQueues``).
        split: the parts of each host (``crawler.state._redis_split``; 1: a host is one shard).
    """

    def __init__(self, shards: int, per_host: int, delay: float, split: int = 1) -> None:
        self.shards = shards
        self.split = max(1, min(split, shards))
        self.queues = SplitQueues(per_host, delay, self.split)
        self.held: dict[int, _Shard] = {}
        self.held_back: list[tuple[float, int, Item]] = []  # retries until their not_before
        self.owners: list[str] = [""] * shards  # claim holders as of the last heartbeat
        self.live: list[str] = []
        self.live_before: list[str] = []  # the live workers of the heartbeat before
        self.winners: list[str] = []  # each shard's owner-to-be, as of the last plan
        self.handed: set[int] = set()  # released with open requests, not claimed since
        #: a shard this worker lets go has nothing out any more: release it now
        self.let_go = False
        self._gen = 0
        self._seq = 0
        self._origin_shard: dict[str, int] = {}
        # Requests this worker completed lately (fingerprints, oldest first): a copy of one
        # that reaches it after its completion (an inbox message sent before the shard's load
        # had queued it, a load or heal that read the request before the completion's HDEL
        # was written) is not queued again.
        self._completed: dict[int, None] = {}
        # Requests leased here and not ended, whatever shard object they came from: a copy
        # of one (a shard read again while its request is out: won back while leaving, or
        # lapsed and claimed anew) is known but not queued; it goes back in line only if the
        # lease ends unfinished (``again``).
        self._leased: dict[int, int] = {}  # fp -> its shard

    def shard(self, origin: str, fp: int = 0) -> int:
        """The shard of a request of ``origin`` with fingerprint ``fp`` (its host's part)."""
        k = self._origin_shard.get(origin)
        if k is None:
            if len(self._origin_shard) >= _SHARD_CACHE_MAX:
                self._origin_shard.clear()
            k = self._origin_shard[origin] = shard_of(origin, self.shards)
        return k if self.split == 1 else (k + sub_of(fp, self.split)) % self.shards

    def parts(self, origin: str) -> list[tuple[int, int]]:
        """(part, shard) of each of ``origin``'s host's parts."""
        k = self.shard(origin)
        return [(j, (k + j) % self.shards) for j in range(self.split)]

    # -- holding --

    def take(self, k: int) -> _Shard:
        """Start holding shard ``k`` (claimed): its requests come from ``add`` and a load.
        Those of it still out from here (leased before it was dropped) are out of it again:
        it is not released before they end (a hand-over would let its winner lease them)."""
        self._gen += 1
        held = self.held[k] = _Shard(self._gen)
        held.out.update(fp for fp, shard in self._leased.items() if shard == k)
        held.open.update(held.out)
        return held

    def drop(self, k: int) -> None:
        """Stop holding ``k``: its items in the queues are dropped when they come out."""
        self.held.pop(k, None)

    def active(self, k: int) -> _Shard | None:
        """Shard ``k`` if held and not leaving (new requests of it are queued here)."""
        held = self.held.get(k)
        return None if held is None or held.leaving else held

    def add(
        self, k: int, fp: int, value: tuple[Any, ...], now: float, *, offered: bool = False
    ) -> bool:
        """Queue a request of held shard ``k`` unless known: ``value`` as ``parse_value``;
        ``offered``: this process's admission offered it (else it is a ``FromRedis``)."""
        held = self.active(k)
        if held is None or fp in held.open or fp in self._completed:
            return False
        held.open.add(fp)
        if fp in self._leased:
            return False  # out from here now: see ``again``
        attempts, not_before, depth, origin, kind, referrer, url = value
        item: Item = (fp, k, held.gen, url, depth, referrer, origin, kind, attempts)
        if not offered:
            item = cast(Item, FromRedis(item))
        if not_before > now:
            self._seq += 1
            heapq.heappush(self.held_back, (not_before, self._seq, item))
        else:
            self.queues.push(item, now)
        return True

    def hold_back(self, item: Item, not_before: float) -> None:
        self._seq += 1
        heapq.heappush(self.held_back, (not_before, self._seq, item))

    # -- leasing --

    def pop(self, n: int, now: float) -> list[Item]:
        """Up to ``n`` requests politely leasable now from the shards held (not leaving)."""
        back = self.held_back
        while back and back[0][0] <= now:
            item = heapq.heappop(back)[2]
            if self._current(item):
                self.queues.push(item, now)
        out: list[Item] = []
        queues = self.queues
        while len(out) < n:
            got = queues.pop_many(n - len(out), now)
            if not got:
                break
            for item in got:
                held = self.held.get(item[1])
                if held is None or held.gen != item[2] or held.leaving or item[0] in self._leased:
                    queues.release(item, now)  # a shard no longer leased from here
                    continue
                held.out.add(item[0])
                self._leased[item[0]] = item[1]
                out.append(item)
        return out

    def _current(self, item: Item) -> bool:
        held = self.held.get(item[1])
        return held is not None and held.gen == item[2] and not held.leaving

    def ended(self, item: Item, now: float, *, completed: bool) -> bool:
        """A leased item ended (its origin's slot freed); True if its shard is held still.
        Unfinished (a retry, a lease put back), it comes back in line only by ``again``."""
        self.queues.release(item, now)
        fp = item[0]
        self._leased.pop(fp, None)
        if completed:
            done = self._completed
            done[fp] = None
            if len(done) > _COMPLETED_MAX:
                del done[next(iter(done))]
        held = self.held.get(item[1])
        if held is None:
            return False
        if fp in held.out:
            held.out.discard(fp)
            if held.leaving and not held.out:
                self.let_go = True
        if completed:
            held.open.discard(fp)
        return True

    def forget_completed(self) -> None:
        """Redis may have lost its last writes (a restart, an outage): a completion lost
        there brings its request back, and it must be fetched again, not refused."""
        self._completed.clear()

    def again(self, item: Item, attempts: int, not_before: float, now: float) -> None:
        """An ended, unfinished request back in line here (with the shard's current
        generation) if its shard is leased from here; a shard being let go forgets it (its
        winner reads it from Redis, where the request was written back)."""
        held = self.held.get(item[1])
        if held is None:
            return
        if held.leaving:
            held.open.discard(item[0])
            return
        held.open.add(item[0])
        fp, k, _gen, url, depth, referrer, origin, kind, _attempts = item
        back: Item = (fp, k, held.gen, url, depth, referrer, origin, kind, attempts)
        if type(item) is FromRedis:
            back = cast(Item, FromRedis(back))
        if not_before > now:
            self.hold_back(back, not_before)
        else:
            self.queues.push(back, now)

    def next_due(self, now: float) -> float | None:
        due = self.queues.next_due(now)
        if self.held_back:
            t = self.held_back[0][0]
            due = t if due is None or t < due else due
        return due

    def backlog(self) -> int:
        """Requests waiting here (queued or held back; those of dropped shards included)."""
        return len(self.queues) + len(self.held_back)

    def out(self) -> int:
        return sum(len(h.out) for h in self.held.values())

    # -- membership --

    def plan(
        self, me: str, live: list[str], own: dict[int, str], active: set[int] | None = None
    ) -> tuple[list[int], list[int], list[int]]:
        """From a heartbeat's view: (shards to claim, shards to release now, shards to read
        again). Shards lost (their claim now someone else's) are dropped; a claim of this
        worker's on a shard it does not hold (Redis rolled back) is released; shards another
        live worker wins are marked leaving and released once nothing of theirs is out; a
        leaving shard won back before its release is leased from again, its requests read
        afresh (those offered here meanwhile were left to its winner) except those still
        out. ``active``: the shards with open requests, as the workers last reported them
        (see ``balance``)."""
        self.live = live
        self.owners = [own.get(k, "") for k in range(self.shards)]
        workers = sorted(set(live) | {me})
        self.handed = {k for k in self.handed if own.get(k, "") in ("", me)}
        winners = self.winners = balance(workers, active or set(), self.shards)
        claim: list[int] = []
        release: list[int] = []
        reread: list[int] = []
        for k in range(self.shards):
            held = self.held.get(k)
            if held is not None and own.get(k) != me:
                self.drop(k)  # its claim lapsed and was taken: someone else reloads it
                held = None
            if held is None:
                if winners[k] == me:
                    claim.append(k)
                elif own.get(k) == me:
                    # claimed by this worker in Redis, yet not held here (Redis rolled back
                    # to before its release, or a claim whose answer was lost): nobody else
                    # may claim it while this worker lives, so let it go
                    release.append(k)
            elif winners[k] != me:
                held.leaving = True
                if not held.out:
                    release.append(k)
            elif held.leaving:  # won back before it was released (still claimed here)
                self._gen += 1  # what it had queued is dropped when it comes out
                held.gen = self._gen
                held.open = set(held.out)
                held.leaving = False
                reread.append(k)
        return claim, release, reread

    def active_shards(self) -> list[int]:
        """The shards held here with open requests, and those released with open requests
        that nobody else has claimed yet (for the report: so that every worker's ``balance``
        sees the same shards with work while they change hands)."""
        return sorted({k for k, held in self.held.items() if held.open} | self.handed)

    def hand_over(self, k: int) -> None:
        """Shard ``k`` is released: dropped here, reported with work until claimed."""
        held = self.held.get(k)
        if held is not None and held.open:
            self.handed.add(k)
        self.drop(k)

    def resplit(self, split: int) -> None:
        """The crawl's split, read after open (a worker that opened before the crawl was
        created): the queues start over (the shards held are read again from Redis)."""
        self.split = max(1, min(split, self.shards))
        self.queues = SplitQueues(self.queues.per_host, self.queues.delay, self.split)
        self._origin_shard.clear()
        for held in self.held.values():
            held.open = set(held.out)

    # -- the browser's slots: from the parts of the origin's host held here --

    def _parts_here(self, origin: str) -> list[int]:
        return [j for j, k in self.parts(origin) if self.active(k) is not None]

    def borrow(self, origin: str, now: float) -> float | None | bool:
        """A slot of ``origin`` for a request of the browser (``--render``) from the parts of
        its host this worker owns (their share of the host's cap and delay): 0.0 if taken,
        else the wait (None: all their slots out). False, refused, when it owns none of them:
        the slots of the host are another worker's (it may be another process; no slots are
        lent between workers), so the browser's request to it is not sent."""
        parts = self._parts_here(origin)
        if not parts:
            return False
        return self.queues.borrow(origin, parts, now)

    def want(self, origin: str, delta: int, now: float) -> None:
        self.queues.want(origin, self._parts_here(origin), delta, now)

    def give_back(self, origin: str, now: float) -> None:
        self.queues.give_back(origin, now)

    def owner(self, k: int) -> str:
        """The live worker holding shard ``k`` as last seen ("" if none)."""
        w = self.owners[k]
        return w if w in self.live else ""
