"""The link intake: the links of a chunk in, the canonical URLs this run may not know out.

The per-link part of admission (``crawler.core.admission``), the one step every link of every page
goes through, in front of the crawl state: drop ``nofollow`` links (``respect_nofollow``),
canonicalise (``UrlPolicy.canonical_resolved``), and drop the URLs a fixed-size *recent table*
holds (those this run offered, or learnt were seen: most links of a site are its navigation,
repeated on every page). What is left are the *items* of the chunk, in document order:

* a ``str``: a canonical http(s) URL the table does not hold (admission fingerprints it,
  probes the state, tests scope and offers it);
* a ``Link``: a link whose URL is None (not a URL: counted as invalid, listed with
  ``all_links``) or, with ``all_links``, not http(s) (listed as "other"). Nothing else.

With a state bound (``bind``: its seen set and fingerprint, from
``CrawlState.probe_parts``), a URL the table does not hold is fingerprinted and probed in the
state's seen set here too (the compiled twin: keyed BLAKE2b and the probe in C), and dropped
when the state knows it: admission then only sees what neither knows.

With a host scope set too (``set_host_scope``: ``UrlPolicy.host_scope``, by admission when the
state has ``offer_seen`` and the crawl does not list every link), a URL neither knows whose host
the scope rule refuses is no item either: its fingerprint waits for ``take_external``, and the
page job hands the chunk's fingerprints to the state in one ``offer_seen`` (marked seen and
counted out of scope once, as admission's ``queue=False`` offer would: most new URLs of a
link-dense page go to other hosts, and this keeps them from costing a ``str``'s way through
admission each).

``limit`` caps a page's links (``max_links_per_page``): a link seen when ``found`` has reached
it is counted in ``found`` and nothing else is done with it (the page job sets it before each
chunk of a page and lifts it after: ``NO_LIMIT``). Here the Links past it are cut off in one
slice a call; the compiled twin tests one integer a link, in C. Fed from the compiled
extractor, the links its fast path resolves are counted as they are read and the Links its
slow paths make after the chunk, so in the one chunk that crosses the limit those Links may
be the ones left out (the count is exact either way).

``found`` counts every link seen (the page's ``links_found``), ``repeated`` those the table
dropped, ``known`` those the bound state knew, ``external`` the fingerprints kept for
``take_external``. The table is exact up to a 64-bit hash
collision (odds ~2⁻⁶⁴ a probe) and keyed at random per process, so a page cannot aim for
one. It has a fixed size: a newer URL may evict an older one, which is then decided again by
the state, never lost. Both twins lay it out in 4-way buckets (two URLs evict each other
only when five meet in a bucket), under different hashes (compiled: SipHash-1-3 under its
own key; Python: ``hash``), so they may evict different URLs: their items are the same up
to evictions.

Two twins with the same behaviour: ``IntakePy`` (here, Python's ``hash``) and the compiled
``crawler.urls._intake_c.Intake`` (SipHash-1-3 and the canonicalisation in C), which the compiled
extractor also calls from inside its buffers (``LinkExtractor(..., intake=)``): there a
repeated link creates no Python object at all. ``Intake`` is the compiled one unless
``CRAWLER_NO_EXTENSIONS`` is set or it is not built (``CRAWLER_REQUIRE_EXTENSIONS=1``: an
ImportError instead of a fallback); ``IMPLEMENTATION`` says which.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from crawler._twins import NO_EXTENSIONS as NO_EXTENSIONS  # (re-exported: tests read them)
from crawler._twins import REQUIRE_EXTENSIONS as REQUIRE_EXTENSIONS
from crawler._twins import compiled
from crawler.extract import Link

if TYPE_CHECKING:
    from crawler.config import CrawlConfig
    from crawler.urls.policy import UrlPolicy

__all__ = [
    "IMPLEMENTATION",
    "NO_LIMIT",
    "Intake",
    "IntakeC",
    "IntakePy",
    "RECENT_SLOTS",
    "intake_for",
]

#: Entries of the recent table (2 MiB): enough for the hot links of any site.
RECENT_SLOTS = 1 << 18
_MASK64 = (1 << 64) - 1
#: ``limit`` when no cap applies (the largest Py_ssize_t, what the compiled twin holds).
NO_LIMIT = sys.maxsize


class IntakePy:
    """The pure-Python intake (the reference; the compiled ``Intake`` behaves the same).

    The recent table is an ``array('Q')`` of 4-way buckets of ``hash(url) | 1`` (0: empty).

    Args:
        policy: the crawl's canonicalisation (``UrlPolicy``).
        sort_query, drop_params: accepted for the twins' common signature; the policy
            applies them.
        respect_nofollow: drop links whose ``rel`` has ``nofollow``.
        all_links: keep non-http(s) links (as ``Link`` items) for listing.
        slots: entries of the recent table (a power of two).
    """

    __slots__ = ("_bits", "_canonical", "_contains", "_ext", "_fper", "_host_scope", "_table",
                 "all_links", "external", "found", "known", "limit", "repeated",
                 "respect_nofollow")  # fmt: skip

    def __init__(
        self,
        policy: UrlPolicy,
        *,
        sort_query: bool = False,
        drop_params: Iterable[str] = (),
        respect_nofollow: bool = False,
        all_links: bool = False,
        slots: int = RECENT_SLOTS,
    ) -> None:
        if slots < 4 or slots & (slots - 1):
            raise ValueError("slots must be a power of two (at least 4)")
        del sort_query, drop_params  # the policy's canonical_resolved applies them
        self._canonical = policy.canonical_resolved
        self.respect_nofollow = respect_nofollow
        self.all_links = all_links
        self._bits = slots.bit_length() - 1
        self._table = array("Q", bytes(8 * slots))
        self.found = 0
        self.limit = NO_LIMIT
        self.repeated = 0
        self.known = 0
        self.external = 0
        self._contains: Callable[[int], bool] | None = None
        self._fper: Callable[[str], int] | None = None
        self._host_scope: Callable[[str], str | None] | None = None
        self._ext = array("Q")

    def bind(self, seen: Any, fingerprinter: Callable[[str], int] | None = None) -> None:
        """Probe the crawl state's own seen set too (``CrawlState.probe_parts``): a URL the
        table does not hold but the state knows is dropped here (and put in the table).

        ``seen`` is the state's local seen set (``contains_fp``), ``fingerprinter`` its
        fingerprint (None: Python's ``hash``, as ``MemoryState``'s); ``seen`` None unbinds."""
        self._contains = None if seen is None else seen.contains_fp
        self._fper = fingerprinter

    def set_host_scope(
        self, host_scope: Callable[[str], str | None] | None, cache: dict[str, Any] | None = None
    ) -> None:
        """Keep only the fingerprint of a new URL the host rule puts out of scope.

        ``host_scope`` is ``UrlPolicy.host_scope`` (None: off); ``cache``, the dict it fills
        (``UrlPolicy.host_cache``), is for the compiled twin (here ``host_scope`` reads it
        itself). While a state is bound, a URL neither the table nor the state knows whose
        ``host_scope`` is None is no item: its fingerprint waits in `take_external` (the
        state records it seen, ``offer_seen``), as admission would have offered it
        ``queue=False``. Off with ``all_links`` (admission lists such URLs)."""
        if cache is not None and type(cache) is not dict:
            raise TypeError("cache must be a dict")
        self._host_scope = None if self.all_links else host_scope

    @property
    def external_pending(self) -> int:
        """How many fingerprints `take_external` would return."""
        return len(self._ext)

    def take_external(self) -> array[int]:
        """The fingerprints of the out-of-scope URLs kept since the last call, in order, as
        an ``array('Q')`` (empty when none); the buffer starts over."""
        out, self._ext = self._ext, array("Q")
        return out

    def take(self, links: Sequence[Link]) -> list[str | Link]:
        """The items of ``links`` (see the module docstring), in order."""
        n = len(links)
        self.found += n
        if self.found > self.limit:  # past the page's cap: one slice, not a test a link
            links = links[: max(0, self.limit - (self.found - n))]
        canonical = self._canonical
        table = self._table
        shift = 64 - self._bits
        out: list[str | Link] = []
        for link in links:
            if self.respect_nofollow and link.nofollow:
                continue
            url = link.url
            if url is None:
                out.append(link)
                continue
            canon = canonical(url)
            if canon is None:
                if self.all_links:
                    out.append(link)
                continue
            h = (hash(canon) & _MASK64) | 1
            b = (h >> shift) & ~3
            if (
                table[b] == h or table[b + 1] == h or table[b + 2] == h or table[b + 3] == h
            ) and canon.isascii():
                self.repeated += 1
                continue
            contains = self._contains
            if contains is not None and canon.isascii():
                fper = self._fper
                fp = fper(canon) if fper is not None else (hash(canon) & _MASK64) or 1
                if contains(fp):
                    self.mark(canon)
                    self.known += 1
                    continue
                host_scope = self._host_scope
                if host_scope is not None and host_scope(canon) is None:
                    self._ext.append(fp)
                    self.external += 1
                    continue
            out.append(canon)
        return out

    def mark(self, url: str) -> None:
        """``url`` (canonical) is known from now on: its repeats are dropped.

        Only ASCII URLs (every WHATWG-serialised one) are kept, as the compiled twin does."""
        self.mark_many((url,))

    def mark_many(self, urls: Iterable[str]) -> None:
        """`mark` of each of ``urls``."""
        table = self._table
        shift = 64 - self._bits
        for url in urls:
            if not url.isascii():
                continue
            h = (hash(url) & _MASK64) | 1
            b = (h >> shift) & ~3
            if table[b] == h or table[b + 1] == h or table[b + 2] == h or table[b + 3] == h:
                continue
            for i in range(b, b + 4):
                if not table[i]:
                    table[i] = h
                    break
            else:  # full: a victim the hash picks, as the compiled twin does
                table[b + ((h >> 1) & 3)] = h

    def knows(self, url: str) -> bool:
        """Whether the table holds ``url`` (canonical)."""
        h = (hash(url) & _MASK64) | 1
        b = (h >> (64 - self._bits)) & ~3
        t = self._table
        return url.isascii() and (t[b] == h or t[b + 1] == h or t[b + 2] == h or t[b + 3] == h)

    def forget(self) -> None:
        """Empty the table (the crawl state may have lost what it held)."""
        self._table = array("Q", bytes(8 * len(self._table)))

    def canonical(self, url: str) -> str | None:
        """The canonicalisation this intake applies (``UrlPolicy.canonical_resolved``)."""
        return self._canonical(url)

    def __repr__(self) -> str:
        return f"<IntakePy found={self.found} repeated={self.repeated}>"


_c = (
    None
    if TYPE_CHECKING
    else compiled("crawler.urls._intake_c", "Intake", what="the compiled intake")
)
IntakeC: Any = None if _c is None else _c[0]
Intake: Any = IntakePy if IntakeC is None else IntakeC
IMPLEMENTATION = "py" if IntakeC is None else "c"


def intake_for(config: CrawlConfig, policy: UrlPolicy, cls: Any = None) -> Any:
    """The intake of a crawl (``cls``: a twin, for tests; default ``Intake``)."""
    return (cls or Intake)(
        policy,
        sort_query=config.sort_query,
        drop_params=config.drop_params,
        respect_nofollow=config.respect_nofollow,
        all_links=config.all_links,
    )


def canonicalizer(config: CrawlConfig, policy: UrlPolicy) -> Callable[[str], str | None]:
    """``policy.canonical_resolved`` of the crawl, compiled when the intake is (its C
    canonicalisation, the same result: tests/test_intake.py; no regex and no Python callback
    an escape, which a site of %-escaped links, rustdoc's playground, paid for in a check or
    an audit). The intake made for it has the smallest recent table: it only canonicalises."""
    if IntakeC is None:
        return policy.canonical_resolved
    intake = IntakeC(policy, sort_query=config.sort_query, drop_params=config.drop_params, slots=4)
    canonical: Callable[[str], str | None] = intake.canonical
    return canonical
