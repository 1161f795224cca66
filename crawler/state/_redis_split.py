"""One hot origin (issue 23): a host's requests split over K sub-shards, its politeness too.

In a Redis crawl a shard has one owner, so a crawl of one site was as fast as one worker.
With ``split`` K > 1 (fixed in the crawl at its creation, ``P cfg split``), the requests of
a host spread over K sub-shards by URL fingerprint (``sub_of``: ``fp % K``; a URL is always
in the same one, so dedup stays exact in one shard's seen set). Sub-shard ``j`` of a host is
shard ``(shard_of(host) + j) % shards``: K distinct shards, each with its own slot, owner,
queue, seen buckets and counts, owned and taken over like any other.

The host's politeness is divided so that it holds cluster-wide whoever owns the parts:

* ``per_host`` P: sub-shard ``j`` may have ``share(P, K, j)`` requests out (P // K, the
  remainder to the first ones: the sum is P); K is never above P at creation.
* ``delay`` D (and a robots.txt Crawl-delay): D x K between two requests of one sub-shard,
  so the K of them make the host's rate 1/D; sub-shard ``j``'s first request waits
  ``j x D`` (staggered: no burst of K at once when a part starts).
* ``max_pages_per_host`` B: ``share(B, K, j)`` requests queued in sub-shard ``j`` (B // K,
  the remainder to the first ones). Exact when the host's URLs outnumber B (the usual
  case): a host with fewer URLs than B but unevenly hashed may stop short in a full part.

Locally each part is its own queue in ``OriginQueues`` (``queue_key``: the origin and ``j``),
one ``OriginQueues`` a cap value (the shares differ by one at most: two of them).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from crawler.state.frontier import OriginQueues
from crawler.urls.policy import host_of

__all__ = ["AUTO_SPLIT_MAX", "SplitQueues", "auto_split", "budget_parts", "share", "sub_of"]

#: Parts of a host an automatic split makes at most.
AUTO_SPLIT_MAX = 16

#: fp, shard, generation, url, depth, referrer, origin, kind, attempts (``_redis_owner.Item``)
_Item = tuple[int, int, int, str, int, "str | None", str, int, int]


def share(total: int, parts: int, j: int) -> int:
    """Part ``j`` of ``total`` divided into ``parts``: ``total // parts``, one more for the
    first ``total % parts`` (the shares add up to ``total``)."""
    return total // parts + (1 if j < total % parts else 0)


def sub_of(fp: int, split: int) -> int:
    """The part of a host a URL of fingerprint ``fp`` belongs to."""
    return fp % split if split > 1 else 0


def budget_parts(split: int, budget: int) -> list[str]:
    """The ``queue`` field of the ``put`` script for each part of a host: its share of the
    ``max_pages_per_host`` budget ("0": none, never queued); [] when not split or no budget
    (the script's one budget then)."""
    if split == 1 or budget <= 0:
        return []
    return [f"1:{n}" if (n := share(budget, split, j)) else "0" for j in range(split)]


def auto_split(seeds: Sequence[str], per_host: int, wanted: int, budget: int = 0) -> int:
    """The split a new crawl asks for: ``wanted`` if given (> 0), else automatic: when every
    seed is on one host and there is no ``max_pages_per_host`` ``budget``,
    ``min(per_host, AUTO_SPLIT_MAX)`` (a one-site crawl goes as fast as the workers started
    on it, each driving its share of the host's cap); else 1 (a crawl of many hosts spreads
    over the workers by host already; and a budget divided among parts by hash can stop a
    part short while another part of the host still has pages: B pages of the host are then
    not always reached, so only an explicit ``--host-split`` makes that trade). 0: no seeds,
    no opinion (a joining worker: the crawl's stored split is used). Never above
    ``per_host``."""
    if wanted > 0:
        return max(1, min(wanted, per_host))
    hosts = {host_of(s) or s for s in seeds}
    if not hosts:
        return 0
    if len(hosts) > 1 or budget > 0:
        return 1
    return max(1, min(per_host, AUTO_SPLIT_MAX))


class SplitQueues:
    """The politeness queues of a worker's shards, each host's parts queued apart.

    Items are ``_redis_owner.Item`` tuples (the fingerprint first, the origin seventh).
    With ``split`` 1 it is one ``OriginQueues`` keyed by origin, as before the split.
    """

    def __init__(self, per_host: int, delay: float, split: int = 1) -> None:
        self.split = max(1, split)
        self.per_host = max(1, per_host)
        self.delay = delay
        self._queues: list[OriginQueues[_Item]] = []
        self._borrowed: dict[str, list[str]] = {}  # origin -> part keys lent to the browser
        #: parts below this one have the larger cap (fixed: a key stays in its queue)
        self._rich = self.per_host % self.split
        self.set_politeness(self.per_host, delay)

    def set_politeness(self, per_host: int, delay: float) -> None:
        """The crawl's per_host and delay (the last opener's): each part's share of them."""
        k = self.split
        self.per_host, self.delay = max(1, per_host), delay
        # one queue a cap value: the first ``per_host % k`` parts have one more slot
        caps = [max(1, share(self.per_host, k, 0)), max(1, share(self.per_host, k, k - 1))]
        if not self._queues:
            self._queues = [OriginQueues(cap, delay * k) for cap in caps]
        for q, cap in zip(self._queues, caps, strict=True):
            q._per_host = cap
            q._delay = delay * k

    def _where(self, origin: str, j: int) -> tuple[OriginQueues[_Item], str]:
        if self.split == 1:
            return self._queues[0], origin
        return self._queues[0 if j < self._rich else 1], f"{origin}\n{j}"

    def push(self, item: _Item, now: float) -> None:
        origin, j = item[6], sub_of(item[0], self.split)
        q, key = self._where(origin, j)
        if j and not q.knows(key) and self.delay > 0:
            q._host(key).next_time = now + j * self.delay  # staggered start (module doc)
        q.push_item(key, item[4], item)

    def pop_many(self, n: int, now: float) -> list[_Item]:
        out = self._queues[0].pop_many(n, now)
        if len(out) < n:
            out += self._queues[1].pop_many(n - len(out), now)
        return out

    def release(self, item: _Item, now: float) -> None:
        q, key = self._where(item[6], sub_of(item[0], self.split))
        q.release(key, now)

    def set_delay(self, origin: str, delay: float) -> None:
        """A robots.txt Crawl-delay of ``origin``: K times it for each of its parts."""
        for j in range(self.split):
            q, key = self._where(origin, j)
            q.set_delay(key, delay * self.split)

    def next_due(self, now: float) -> float | None:
        times = [t for q in self._queues if (t := q.due_time(now)) is not None]
        return min(times) if times else None

    def __len__(self) -> int:
        return sum(len(q) for q in self._queues)

    def working(self) -> int:
        """Origins (parts of hosts) with items queued or out."""
        return sum(len(q.working_origins()) for q in self._queues)

    # -- the browser's slots (``--render``): from the parts of ``origin`` held here --

    def borrow(self, origin: str, parts: Iterable[int], now: float) -> float | None:
        """A slot of one of ``origin``'s ``parts`` (those of shards held here): 0.0 if taken,
        else the shortest wait, or None while all their slots are out."""
        best: float | None = None
        for j in parts:
            q, key = self._where(origin, j)
            got = q.borrow(key, now)
            if got == 0.0:
                self._borrowed.setdefault(origin, []).append(key)
                return 0.0
            if got is not None and (best is None or got < best):
                best = got
        return best

    def want(self, origin: str, parts: Iterable[int], delta: int, now: float) -> None:
        for j in parts:
            q, key = self._where(origin, j)
            q.want(key, delta, now)

    def give_back(self, origin: str, now: float) -> bool:
        """A borrowed slot of ``origin`` back (False: none lent here)."""
        keys = self._borrowed.get(origin)
        if not keys:
            return False
        key = keys.pop()
        if not keys:
            del self._borrowed[origin]
        j = int(key.rpartition("\n")[2]) if self.split > 1 else 0
        self._where(origin, j)[0].release(key, now)
        return True
