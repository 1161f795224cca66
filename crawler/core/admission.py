"""Admission: the one rule that turns a URL found on a page into queued, listed or counted.

Every way a URL enters the crawl comes through here: a seed, a link of a chunk, a redirect
target, a sitemap's ``<loc>`` and the sitemaps robots.txt names. One rule, in this order:

1. canonical form (``UrlPolicy``), or, for a value that is not a URL or not http(s), only
   counted (and with ``all_links`` listed once by its raw value);
2. the intake's recent table of URLs this run knows to be seen (``crawler.urls.intake``: for a
   page's links, steps 1 and 2 are one compiled call per chunk, and a repeated link creates
   no Python object), then the state's local probe (``CrawlState.seen``): a URL offered
   before costs a canonical form and a hash probe, at worst a fingerprint and a probe,
   nothing else (a state whose ``epoch`` attribute changes, one that may have lost
   acknowledged writes, has the table emptied at the next chunk: the state decides again);
3. scope and URL length: in scope and short enough is offered to be queued; anything else is
   offered ``queue=False`` (marked seen, so that it is counted and listed once: out of scope
   ``external``, too long as a ``url_too_long`` PageResult);
4. depth: a URL one hop past ``max_depth`` found on a page is listed but not offered (not
   marked seen: a shallower page still in flight may queue it); a deeper one found elsewhere
   (a sitemap) is marked seen and listed, not queued;
5. ``offer_many`` once per chunk: the state deduplicates and enqueues atomically (and applies
   ``max_pages_per_host``); only what it returns as new is listed to the sink, in order.

With the memory state (``offer_seen``) and without ``all_links``, a new URL of a page's chunk
that the host rule refuses (rule 3's first half, ``UrlPolicy.host_scope``) never reaches
``take_items``: the intake keeps its fingerprint and ``take_external`` marks the chunk's seen in
one call, counting the new ones out of scope, which is all rule 3 does with it there.

Listing (``Sink.link``) follows the offer, so a URL the sink hears of is already in the
state: a kill after the offer and before the sink wrote loses a line, never a URL, and the
engine re-lists the URLs a page discovered when that page was in flight at the last stop.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from crawler.config import CrawlConfig
from crawler.core.results import CrawlStats, PageResult, Sink
from crawler.extract import Link
from crawler.state import KIND_PAGE, KIND_SITEMAP, Candidate, CrawlState
from crawler.state.frontier import MemorySeenSet
from crawler.urls.intake import intake_for
from crawler.urls.policy import UrlPolicy, host_of

__all__ = ["Admission", "Tally"]

log = logging.getLogger("crawler")

# Prefix of the key of an invalid link's raw value (--all-links lists each once); a canonical
# URL never starts with NUL, so the two kinds of key cannot meet. "Other" (non-HTTP) values are
# keyed by themselves: they never parse as http(s) URLs.
_INVALID = "\0invalid:"

# What to do with a queue=False candidate the state accepted as new.
_LIST_INTERNAL = 0  # in scope (redirect target, over max_depth): listed
_EXTERNAL = 1  # out of scope: counted, listed with all_links
_TOO_LONG = 2  # in scope, too long: a url_too_long PageResult
_OTHER = 3  # not http(s): listed with all_links
_INVALIDV = 4  # not a URL: listed with all_links


class Admission:
    """The admission rule of one crawl (see the module docstring), and what it lists.

    Args:
        config: the crawl's (validated) settings.
        policy: canonicalisation and scope.
        state: the crawl state offers go to.
        stats: the crawl's counters (links found/new/invalid, out of scope).
        sink: told of each listed URL (``link``); None: nobody.
        keep: keep the listed in-scope URLs in ``links`` (``CrawlResult.links``).
        on_offer: called with the number queued after an offer that queued something (it
            wakes the dispatcher).
        intake: the link intake (default: ``crawler.urls.intake.intake_for`` the config).
    """

    def __init__(
        self,
        config: CrawlConfig,
        policy: UrlPolicy,
        state: CrawlState,
        stats: CrawlStats,
        sink: Sink | None,
        *,
        keep: bool,
        on_offer: Callable[[int], None] | None = None,
        intake: Any = None,
    ) -> None:
        self.config = config
        self.policy = policy
        self.state = state
        self.stats = stats
        self.sink = sink
        self.keep = keep
        self.links: list[str] = []
        #: PageResults of URLs found but never fetched (url_too_long), for the engine to finish.
        self.records: deque[PageResult] = deque()
        self._on_offer = on_offer
        self._fp = state.fingerprint
        probe = getattr(state, "seen", None)
        # A backend without a local probe (the protocol's ``seen`` is optional): keep one
        # here of what this run offered (8 bytes a URL), exact for a one-process crawl.
        self._local: MemorySeenSet | None = None
        if not callable(probe):
            self._local = MemorySeenSet()
            probe = self._local.contains_fp
        self._probe: Callable[[int], bool] | None = probe
        # listed, one hop past max_depth, not offered: fingerprints (this run only)
        self._beyond = MemorySeenSet(16)
        #: The per-link part (``crawler.urls.intake``): canonical form and the recent table of
        #: URLs this run knows to be seen (offered, or the probe said so). A repeated link
        #: (most links of a page: the site's navigation) ends there: no fingerprint (keyed
        #: blake2b for a persistent state, ~1 us), no probe, and from the compiled extractor
        #: no Python object.
        self.intake = intake if intake is not None else intake_for(config, policy)
        # A backend's local probe in parts (its seen set, its fingerprint function), optional:
        # the intake probes it for every URL its table misses (in C with the compiled twins).
        self._parts = callable(getattr(state, "probe_parts", None)) and self._local is None
        self._bound: tuple[Any, Any] | None = None  # the parts the intake is bound to
        # A state whose local seen set is the state (``offer_seen``): the intake keeps only the
        # fingerprint of a new URL the host rule refuses (see ``take_external``).
        if self._parts and callable(getattr(state, "offer_seen", None)):
            self.intake.set_host_scope(policy.host_scope, policy.host_cache)
        self._max_depth = config.max_depth
        # A state that may lose acknowledged writes (Redis brought back from its AOF without
        # the last second) says so by a new ``epoch``: what this run's caches hold as offered
        # may be gone from the state, so they are forgotten (the state decides again).
        self._epoch = getattr(state, "epoch", 0)

    # -- entry points --

    async def seeds(self, urls: Iterable[str], tally: Tally) -> None:
        """Offer the seeds (depth 0); those new to the state are listed."""
        batch = _Batch(tally)
        for raw in urls:
            url = self.policy.canonical(raw)
            if url is not None:
                self._classify(batch, url, url, None, 0, KIND_PAGE)
        await self._commit(batch, None)

    async def take_items(
        self,
        items: Sequence[str | Link],
        referrer: str,
        depth: int,
        page: PageResult | None,
        tally: Tally,
    ) -> None:
        """The intake's items of one chunk of a page at ``depth`` (the hot path): one offer.

        ``items`` come from ``self.intake`` (``crawler.urls.intake``): canonical URLs its recent
        table does not hold, and the Links it keeps (invalid, or not http(s) with all_links).
        """
        self.check_epoch()
        policy = self.policy
        scope_origin = policy.scope_origin
        max_len = policy.max_url_length
        fingerprint = self._fp
        probe = self._probe
        mark = self.intake.mark
        batch = _Batch(tally)
        fps = batch.fps
        cands = batch.cands
        marks = batch.marks
        child = depth + 1
        beyond = bool(self._max_depth) and depth >= self._max_depth
        for url in items:
            if type(url) is not str:  # a Link: not a URL, or (all_links) not http(s)
                link: Link = url  # type: ignore[assignment]
                if link.url is None:
                    self._invalid(batch, link.raw, referrer, child)
                else:
                    self._extra(batch, link.url, referrer, child, _OTHER)
                continue
            fp = fingerprint(url)
            if fp in fps:
                continue
            if probe is not None and probe(fp):
                mark(url)
                continue
            fps.add(fp)
            origin = scope_origin(url)
            if origin is None:
                batch.extra[url] = _EXTERNAL
                cands.append(Candidate(url, fp, "", "", child, referrer, KIND_PAGE, False))
            elif max_len and len(url) > max_len:
                if beyond:
                    continue
                batch.extra[url] = _TOO_LONG
                cands.append(Candidate(url, fp, origin, "", child, referrer, KIND_PAGE, False))
            elif beyond:  # listed, not offered, so not marked seen: not in the recent table
                if self._beyond.add(url):
                    batch.listed.append((len(cands), url))
                continue
            else:
                cands.append(Candidate(url, fp, origin, host_of(url), child, referrer))
            marks.append(url)
        await self._commit(batch, page, referrer)

    async def take_links(
        self,
        links: Sequence[Link],
        referrer: str,
        depth: int,
        page: PageResult | None,
        tally: Tally,
    ) -> None:
        """The links of one chunk (counted in ``tally.links_found``): the intake, then
        `take_items` (the page job drives the two itself, to skip Links altogether)."""
        self.check_epoch()
        intake = self.intake
        before = intake.found
        items = intake.take(links)
        tally.links_found += intake.found - before
        if intake.external_pending:
            await self.take_external(intake.take_external(), tally)
        if items:
            await self.take_items(items, referrer, depth, page, tally)

    async def take_external(self, fps: Sequence[int], tally: Tally) -> None:
        """The fingerprints the intake kept of new URLs the host rule refuses (rule 3 without a
        ``str`` or a Candidate each: ``Intake.take_external``): one ``offer_seen``, and the
        new ones counted out of scope, as their ``queue=False`` offer would."""
        tally.out_of_scope += await self.state.offer_seen(fps)  # type: ignore[attr-defined]

    async def take_sitemap(
        self,
        urls: Sequence[str],
        referrer: str,
        depth: int,
        page: PageResult | None,
        tally: Tally,
    ) -> None:
        """The ``<loc>`` URLs of a sitemap at ``depth``: ``.xml``/``.xml.gz`` ones are sitemaps."""
        batch = _Batch(tally)
        for raw in urls:
            url = self.policy.canonical(raw)
            if url is None:
                continue
            if raw.endswith((".xml", ".xml.gz")):
                self._classify(batch, url, url, referrer, depth, KIND_SITEMAP)
            else:
                self._classify(batch, url, url, referrer, depth + 1, KIND_PAGE)
        await self._commit(batch, page, referrer)

    async def robots_sitemaps(self, sitemaps: Sequence[str], origin: str, tally: Tally) -> None:
        """The sitemaps an origin's robots.txt names (depth 0)."""
        batch = _Batch(tally)
        referrer = origin + "/robots.txt"
        for raw in sitemaps:
            url = self.policy.canonical(raw)
            if url is not None:
                self._classify(batch, url, url, referrer, 0, KIND_SITEMAP)
        await self._commit(batch, None, referrer)

    async def redirect_target(
        self, url: str, referrer: str, depth: int, page: PageResult, tally: Tally
    ) -> bool:
        """A canonical in-scope redirect target fetched in-line: marked seen, listed if new.

        Returns whether it was new (False: known already, fetched or queued on its own).
        """
        fp = self._fp(url)
        cand = Candidate(url, fp, "", host_of(url), depth, referrer, KIND_PAGE, False)
        accepted = await self.state.offer_many([cand])
        if self._local is not None:
            self._local.add_fp(fp)
        if not accepted:
            return False
        self.list_url(url, referrer, "internal", page, tally)
        return True

    def relist(self, urls: Iterable[str], referrer: str, tally: Tally) -> int:
        """List again what a page discovered in a run that stopped while it was in flight.

        Its output may have been cut there, and its counts were never committed (they go
        with the page's completion): each is listed and counted again as when it was
        found, before the page is fetched anew. Returns how many were listed.
        """
        all_links = self.config.all_links
        policy = self.policy
        n = 0
        for url in urls:
            if url.startswith(_INVALID):
                tally.links_invalid += 1
                if all_links:
                    self._tell(url[len(_INVALID) :], referrer, "invalid", None)
                    n += 1
            elif not url.startswith(("http://", "https://")):
                if all_links:
                    self._tell(url, referrer, "other", None)
                    n += 1
            elif policy.scope_origin(url) is None:
                tally.out_of_scope += 1
                if all_links:
                    self._tell(url, referrer, "external", None)
                    n += 1
            elif not policy.too_long(url):
                self._listed(url, referrer, None, tally)
                n += 1
        return n

    # -- the rule --

    def _classify(
        self, batch: _Batch, url: str, key: str, referrer: str | None, depth: int, kind: int
    ) -> None:
        # A canonical URL from anywhere but a page's chunk (seeds, sitemaps): the same rule.
        fp = self._fp(key)
        if fp in batch.fps or (self._probe is not None and self._probe(fp)):
            return
        batch.fps.add(fp)
        policy = self.policy
        origin = policy.scope_origin(url)
        if origin is None:
            batch.extra[url] = _EXTERNAL
            batch.cands.append(Candidate(url, fp, "", "", depth, referrer, kind, False))
        elif policy.too_long(url):
            batch.extra[url] = _TOO_LONG
            batch.cands.append(Candidate(url, fp, origin, "", depth, referrer, kind, False))
        elif self._max_depth and depth > self._max_depth:
            batch.extra[url] = _LIST_INTERNAL
            batch.cands.append(
                Candidate(url, fp, origin, host_of(url), depth, referrer, kind, False)
            )
        else:
            batch.cands.append(Candidate(url, fp, origin, host_of(url), depth, referrer, kind))

    def _invalid(self, batch: _Batch, raw: str, referrer: str, depth: int) -> None:
        # A value that does not resolve to a URL: never crawled; counted, and listed (once,
        # by its raw value) with --all-links, so that a link checker can report it.
        batch.tally.links_invalid += 1
        if self.config.all_links and self.sink is not None:
            self._extra(batch, _INVALID + raw, referrer, depth, _INVALIDV)

    def _extra(self, batch: _Batch, key: str, referrer: str, depth: int, what: int) -> None:
        fp = self._fp(key)
        if fp in batch.fps or (self._probe is not None and self._probe(fp)):
            return
        batch.fps.add(fp)
        batch.extra[key] = what
        batch.cands.append(Candidate(key, fp, "", "", depth, referrer, KIND_PAGE, False))

    def check_epoch(self) -> None:
        """Before the intake sees a chunk: a state whose ``epoch`` changed may have lost what
        the recent table holds as offered, so the table is emptied (the state decides again);
        and the intake probes the state's seen set as it is now (``probe_parts``: a backend
        may replace it, as Redis's bounded cache starts over)."""
        if getattr(self.state, "epoch", 0) != self._epoch:
            self._forget()
        if self._parts:
            # (looked up each time: a wrapper state may forward it to another backend)
            parts = getattr(self.state, "probe_parts")()  # noqa: B009 (optional in the protocol)
            bound = self._bound
            if parts is None:
                if bound is not None:
                    self.intake.bind(None)
                    self._bound = None
            elif bound is None or parts[0] is not bound[0] or parts[1] is not bound[1]:
                # (new parts only: the memory state's never change, Redis's on a start-over)
                self.intake.bind(*parts)
                self._bound = (parts[0], parts[1])

    def _forget(self) -> None:
        """Drop what the caches hold as offered (the state's epoch changed)."""
        self._epoch = getattr(self.state, "epoch", 0)
        self.intake.forget()
        if self._local is not None:
            self._local = MemorySeenSet()
            self._probe = self._local.contains_fp
        log.warning("the crawl state may have lost recent writes: re-offering what it lacks")

    async def _commit(self, batch: _Batch, page: PageResult | None, referrer: str = "") -> None:
        """One offer for the batch, then list (in order) what the state took as new."""
        accepted: Sequence[Candidate] = ()
        if batch.cands:
            # (an epoch that changes during the offer is seen at the next chunk's start,
            # which forgets these marks too)
            accepted = await self.state.offer_many(batch.cands)
            if batch.marks:  # offered: seen from now on, whatever the state answered
                self.intake.mark_many(batch.marks)
            local = self._local
            if local is not None:
                for fp in batch.fps:
                    local.add_fp(fp)
        extra = batch.extra
        tally = batch.tally
        listed = batch.listed
        if listed:  # one hop past max_depth: listed in document order among the others
            at = {cand.url: i for i, cand in enumerate(batch.cands)}
        queued = 0
        for cand in accepted:
            url = cand.url
            while listed and listed[0][0] <= at[url]:
                self._listed(listed.popleft()[1], referrer, page, tally)
            what = extra.get(url) if extra else None
            ref = cand.referrer or ""
            if what is None or what == _LIST_INTERNAL:
                queued += cand.queue
                self.list_url(url, ref, "internal", page, tally)
            elif what == _EXTERNAL:
                tally.out_of_scope += 1
                if self.config.all_links:
                    self._tell(url, ref, "external", page)
            elif what == _TOO_LONG:
                record = PageResult(url, cand.depth, cand.referrer)
                record.error, record.error_detail = "url_too_long", f"URL of {len(url)} characters"
                self.records.append(record)
            elif what == _OTHER:
                self._tell(url, ref, "other", page)
            else:
                self._tell(url[len(_INVALID) :], ref, "invalid", page)
        while listed:
            self._listed(listed.popleft()[1], referrer, page, tally)
        if queued and self._on_offer is not None:
            self._on_offer(queued)

    # -- listing --

    def list_url(
        self, url: str, referrer: str, kind: str, page: PageResult | None, tally: Tally
    ) -> None:
        """Count and keep an in-scope URL, and tell the sink of any ``kind``.

        An in-scope URL listed when it was one hop past max_depth is not listed again when
        a shallower page queues it.
        """
        if kind == "internal":
            if self._beyond and url in self._beyond:
                return
            self._listed(url, referrer, page, tally)
            return
        self._tell(url, referrer, kind, page)

    def _listed(self, url: str, referrer: str, page: PageResult | None, tally: Tally) -> None:
        tally.links_new += 1
        if self.keep:
            self.links.append(url)
        self._tell(url, referrer, "internal", page)

    def _tell(self, url: str, referrer: str, kind: str, page: PageResult | None) -> None:
        sink = self.sink
        if sink is not None:
            try:
                sink.link(url, referrer, kind)
            except Exception as exc:
                self.sink_failed("sink.link", exc, page)

    def sink_failed(self, where: str, exc: Exception, page: PageResult | None) -> None:
        """A user's sink or hook raised: log it, count it, and mark the page it was about."""
        log.error("%s raised %s: %s", where, type(exc).__name__, exc, exc_info=exc)
        self.stats.sink_errors += 1
        if page is not None and page.error is None:
            page.error = "sink"
            page.error_detail = f"{where} raised {type(exc).__name__}: {exc}"[:500]


class Tally:
    """The link counters of one page task (or of the seeds), added to the crawl's stats and
    pushed to the state's counters with the page's completion, in the same batch.

    So a page in flight when a run is killed has counted nothing that survives: its
    re-fetch counts its links once (and what it had discovered is listed and counted again,
    see ``Admission.relist``), and the counters of the whole crawl stay exact across kills.
    """

    __slots__ = ("links_capped", "links_found", "links_invalid", "links_new", "out_of_scope",
                 "redirects", "robots_disallowed")  # fmt: skip

    def __init__(self) -> None:
        self.links_capped = 0
        self.links_found = 0
        self.links_new = 0
        self.links_invalid = 0
        self.out_of_scope = 0
        self.redirects = 0
        self.robots_disallowed = 0

    def items(self) -> list[tuple[str, int]]:
        """The non-zero counters, by CrawlStats field name."""
        return [(name, n) for name in self.__slots__ if (n := getattr(self, name))]


class _Batch:
    """The candidates of one chunk (or seed list, or sitemap chunk), before the offer."""

    __slots__ = ("cands", "extra", "fps", "listed", "marks", "tally")

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.cands: list[Candidate] = []
        self.marks: list[str] = []  # the cands' URLs for the intake's recent table
        self.fps: set[int] = set()
        self.extra: dict[str, int] = {}  # url -> what to do when a queue=False one is new
        # one hop past max_depth, listed, not offered: (candidates before it, url)
        self.listed: deque[tuple[int, str]] = deque()
