"""The page job: one leased request -> robots, fetch hop by hop, feed the extractor, offer links.

A page task (started by the engine's dispatcher for each lease) checks robots.txt, fetches the
URL hop by hop (each redirect target is canonicalised, scope-checked, robots-checked and
deduplicated here, not inside aiohttp) and feeds every body chunk to the page's LinkExtractor
as it arrives. The body is pull-based (``Fetcher.fetch`` awaits the consumer): the links of a
chunk go through admission and ONE ``offer_many`` before the next chunk is read, so a page
task awaits the state once per chunk, never once per link.

A leased URL is checked again before anything is fetched: the state is not trusted to hold
only what admission queued (anyone who can write to a shared Redis can push a URL into a
queue). It must be in the crawl's scope by the same rule as admission (canonical form, host
rule, include/exclude, URL length), else it is finished as ``out_of_scope`` with nothing
fetched; robots.txt is then that of the URL's own origin, whatever queue it came from.

What can raise in here is kept apart from the wire: an exception of the extractor or of our
own link handling ends that body's read with kind ``extract``/``internal`` (never a wire
error, never retried); the links offered before it stay offered. A retried attempt (the
fetcher's retries) starts the body over: its links are offered again (the state drops the
repeats) and the page's link count and ``links`` start from zero again.

A page's links past ``max_links_per_page`` are counted (``links_found`` and ``links_capped``)
and nothing else: not offered, not listed, not in ``PageResult.links``. The cap is the
intake's ``limit``, set before each extractor step of a page and lifted after it (the intake
is shared by the pages in flight; a step is synchronous), so that it costs nothing a link.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ada_url import normalize_url

from crawler.core.results import PageResult
from crawler.core.robots import RobotsCache, RobotsRules, SitemapParser
from crawler.extract import Link, LinkExtractor, LinkExtractorC
from crawler.http.client import Fetcher
from crawler.http.response import Consumer, Response
from crawler.state import KIND_SITEMAP, Lease
from crawler.urls.intake import NO_LIMIT, IntakeC
from crawler.urls.policy import join, origin_of

if TYPE_CHECKING:
    from crawler.config import CrawlConfig
    from crawler.core.admission import Admission, Tally
    from crawler.state import CrawlState
    from crawler.urls.policy import UrlPolicy

__all__ = [
    "MAX_CRAWL_DELAY",
    "OUT_OF_SCOPE",
    "REDIRECT_STATUSES",
    "ROBOTS_DISALLOWED",
    "PageJob",
    "lease_origin",
]

log = logging.getLogger("crawler")

#: Longest robots.txt Crawl-delay honoured, in seconds (a hostile value must not stall a crawl).
MAX_CRAWL_DELAY = 30.0
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
#: The error kind of a URL skipped because robots.txt disallows it (``report_skipped``).
ROBOTS_DISALLOWED = "robots_disallowed"
#: The error kind of a leased URL outside the crawl's scope (refused, not fetched).
OUT_OF_SCOPE = "out_of_scope"


def lease_origin(policy: UrlPolicy, url: str) -> str | None:
    """The origin of a leased URL if admission could have queued it, else None.

    Admission queues canonical URLs in scope and not too long: the URL must be in scope, and
    its canonical form must have the same origin, with the URL's text starting with that
    origin (no userinfo, no host spelled so that another parser reads another host).
    """
    origin = policy.scope_origin(url)
    if origin is None or not url.startswith(origin + "/") or policy.too_long(url):
        return None
    try:
        href = normalize_url(url)  # the WHATWG parse canonical forms come from (5 us)
    except ValueError:
        return None
    return origin if origin_of(href) == origin else None


class PageJob:
    """What every page task of one crawl shares: settings, fetcher, robots, admission, state.

    Args:
        collect_ids: fill ``PageResult.ids`` with the page's fragment targets.
        head_facts: the extractor reads each HTML page's head into
            ``PageResult.head_facts`` (an audit's canonicals, alternates, robots).
        report_skipped: a seed or link disallowed by robots.txt gives a PageResult of error
            ``robots_disallowed`` (no fetch) instead of nothing.
        page_links: fill ``PageResult.links``.
        link_record: with ``page_links``, ``PageResult.links`` is the compiled extractor's
            `LinkRecord` (when it is in use), and the links take the direct path.
    """

    def __init__(
        self,
        config: CrawlConfig,
        policy: UrlPolicy,
        fetcher: Fetcher,
        robots: RobotsCache,
        admission: Admission,
        state: CrawlState,
        *,
        page_links: bool = True,
        link_record: bool = False,
        collect_ids: bool = False,
        report_skipped: bool = False,
        head_facts: bool = False,
    ) -> None:
        self.config = config
        self.head_facts = head_facts
        self.policy = policy
        self.fetcher = fetcher
        self.robots = robots
        self.admission = admission
        self.state = state
        self.page_links = page_links
        self.collect_ids = collect_ids
        self.report_skipped = report_skipped
        #: The compiled extractor hands the compiled intake its links from its own buffers
        #: (no Link objects) when nothing wants the page's Links, or when they are wanted as
        #: its compact record (``record``).
        self.direct = (
            (link_record or not (page_links or collect_ids))
            and LinkExtractorC is not None
            and LinkExtractor is LinkExtractorC
            and IntakeC is not None
            and type(admission.intake) is IntakeC
        )
        self.record = self.direct and page_links
        #: Leases of this run that passed robots.txt (the first hop's check): pages of the
        #: ``max_pages`` budget for sure (a lease robots.txt disallows gives its budget back).
        self.fetched = 0
        #: ``crawler.core.rendering.RenderStep`` with ``render`` not "never" (imported only
        #: then; ConfigError naming ``render`` without Playwright or Chromium)
        self.render: Any = None
        if config.render != "never":
            from crawler.core.rendering import open_render  # noqa: PLC0415  (only with render)

            self.render = open_render(config, fetcher, robots, policy, admission.stats, state)
        found = getattr(state, "discovered_by", None)
        self._discovered_by: Callable[[str], Awaitable[list[str]]] | None = (
            found if callable(found) else None
        )

    async def close(self) -> None:
        """Close what the job opened itself: the browser (``render``)."""
        if self.render is not None:
            try:
                await self.render.close()
            except Exception:
                log.exception("closing the browser failed")

    async def relist(self, url: str, tally: Tally) -> set[str]:
        """List again the URLs ``url`` discovered in a run that stopped while it was in flight.

        Returns them (a redirect target among them was fetched in-line by this page).
        The output of that run may have been cut there. Only a backend that keeps who
        discovered what (``discovered_by``: SQLite, which includes what the redirect
        targets fetched in-line by this page discovered) can say; memory has nothing to
        re-list.
        """
        if self._discovered_by is None:
            return set()
        found = await self._discovered_by(url)
        self.admission.relist(found, url, tally)
        return set(found)

    async def rules(self, origin: str, tally: Tally) -> RobotsRules:
        """The origin's robots.txt verdict; its sitemaps offered when it is (re)loaded."""
        robots = self.robots
        rules = robots.cached(origin)
        if rules is None:
            # Fetched (or taken from the state) now: its sitemaps are offered each time the
            # rules are (re)loaded (the state drops the repeats), so no per-origin "done" set
            # grows with the crawl.
            rules = await robots.get(origin)
            if self.config.sitemaps and rules.sitemaps:
                await self.admission.robots_sitemaps(rules.sitemaps, origin, tally)
        # Told on every request: a backend may forget an idle origin's delay.
        delay = min(rules.crawl_delay or 0.0, MAX_CRAWL_DELAY)
        if delay > self.config.delay:
            self.state.set_delay(origin, delay)
        return rules

    async def run(self, lease: Lease, tally: Tally) -> PageResult | None:
        """Fetch one leased request; None when robots.txt disallows it (not a page).

        The page's link counters go to ``tally`` (committed with its completion).
        """
        cfg = self.config
        policy = self.policy
        admission = self.admission
        url = lease.url
        depth = lease.depth
        page = PageResult(url, depth, lease.referrer)
        current = url
        if self.state.shared and not lease.checked:
            # A shared state's queues are a network service's: whoever can write to it could
            # put any URL there. Admission's rule again (5 us a lease); robots.txt and
            # politeness of the URL's own origin, not of the queue it came from. A process's
            # own state (memory; SQLite in a directory only this user may write) holds only
            # what admission queued, and so does a lease a shared state marks ``checked``
            # (a request this process's admission offered, never read back from the service).
            found = lease_origin(policy, url)
            if found is None:
                log.warning("refused a leased URL outside the crawl's scope: %r", url[:500])
                return _fail(
                    page, OUT_OF_SCOPE, "leased URL outside the crawl's scope: not fetched"
                )
            origin = found
        else:
            origin = lease.origin or origin_of(url)
        chain = {url}
        hops = 0
        sitemap = lease.kind == KIND_SITEMAP
        # In flight at the last stop: what it discovered then (its in-line redirect targets
        # among them) is listed again.
        own = await self.relist(url, tally) if lease.attempts > 0 else set()
        while True:
            if not cfg.ignore_robots:
                rules = await self.rules(origin, tally)
                if rules.error is not None:
                    page.error, page.error_detail = rules.error, rules.why
                    return page
                if not await rules.allowed_async(current):  # a long file: off the loop
                    tally.robots_disallowed += 1
                    if hops == 0:
                        if not self.report_skipped:
                            return None
                        page.error = ROBOTS_DISALLOWED
                        page.error_detail = "disallowed by robots.txt"
                        return page
                    page.error_detail = f"redirect target disallowed by robots.txt: {current}"
                    if self.report_skipped:
                        page.error = ROBOTS_DISALLOWED
                    return page
            if hops == 0:
                self.fetched += 1
            body = _Body(self, page, current, depth, sitemap, tally)
            res = await self.fetcher.fetch(current, body.on_headers)
            await body.close()
            _record(page, res, current)
            if body.failure is not None:  # our own code failed on the body, not the wire
                page.error, page.error_detail = body.failure
                return page
            if body.ids is not None:
                page.ids, page.ids_complete = body.ids
            if body.kept is not None and res.status == 200 and res.error is None:
                reason = self.render.decide(page, body.kept, body.found, current)  # (no await)
                if reason is not None:
                    await self.render.page(
                        page, reason, body.kept, res, current, depth, body.found, admission,
                        tally, self.collect_ids,
                    )  # fmt: skip
            status = res.status
            if status not in REDIRECT_STATUSES or res.error is not None or not res.location:
                return page
            # -- a redirect hop --
            hops += 1
            tally.redirects += 1
            target_raw = join(current, res.location)
            if target_raw is None:
                return _fail(page, "redirect_invalid", f"Location {res.location!r} is not a URL")
            if not target_raw.startswith(("http://", "https://")):
                return _fail(page, "redirect_bad_scheme", f"redirect to {target_raw[:200]!r}")
            target = policy.canonical(target_raw)
            if target is None:
                return _fail(page, "redirect_invalid", f"Location {res.location!r} is not a URL")
            if target in chain:
                return _fail(page, "redirect_loop", f"redirect loop back to {target}")
            if hops > cfg.max_redirects:
                return _fail(page, "too_many_redirects", f"more than {cfg.max_redirects} hops")
            if policy.too_long(target):
                return _fail(page, "url_too_long", f"redirect target of {len(target)} characters")
            if not policy.in_scope(target):
                tally.out_of_scope += 1
                return _fail(page, "redirect_out_of_scope", f"redirect to {target}")
            page.redirects.append(target)
            page.redirect_statuses.append(status)
            chain.add(target)
            if (
                not await admission.redirect_target(target, current, depth, page, tally)
                and target not in own
            ):
                page.final_url = target  # known already: fetched (or queued) on its own
                return page
            # New, or (in flight at the last stop) a target this page's own chain marked
            # seen then, never queued: followed again, or it would never be fetched.
            current = target  # a sitemap's redirect target is read as the sitemap
            origin = origin_of(target)


def _record(page: PageResult, res: Response, url: str) -> None:
    page.final_url = url
    page.status = res.status
    page.content_type = res.content_type
    page.bytes += res.bytes
    page.elapsed_ms += res.elapsed_ms
    page.retries += res.retries
    page.truncated = res.truncated
    page.link_header = res.link
    page.robots_header = res.x_robots_tag
    page.charset = res.charset
    if res.error is not None or page.error != "sink":  # a sink error while reading stays
        page.error = res.error
        page.error_detail = res.error_detail


def _fail(page: PageResult, kind: str, detail: str) -> PageResult:
    page.error, page.error_detail = kind, detail
    return page


class _BodyAbort(Exception):
    """Raised from a body consumer to stop reading: our own code failed on this body.

    The fetcher reports it as a wire error (it cannot tell); the page job replaces that with
    the failure kept on the _Body. Not an OSError, so it is never retried.
    """


class _Body:
    """One hop's body handling: the extractor (or sitemap parser) and its links.

    Whatever raises in here (the extractor, our own link handling) is caught, kept as
    ``failure`` (kind ``extract`` or ``internal``, with the exception named) and ends the
    read; the links handed over before it stay handed over. A user's sink cannot raise in
    here: admission catches its errors where it calls it.
    """

    __slots__ = (
        "depth",
        "direct",
        "extractor",
        "failure",
        "capped",
        "found",
        "ids",
        "job",
        "keep_below",
        "kept",
        "page",
        "sitemap",
        "sitemap_kind",
        "tally",
        "url",
    )

    def __init__(
        self, job: PageJob, page: PageResult, url: str, depth: int, sitemap: bool, tally: Tally
    ) -> None:
        self.job = job
        self.tally = tally
        self.page = page
        self.url = url
        self.depth = depth
        self.sitemap_kind = sitemap
        self.extractor: Any = None
        self.sitemap: SitemapParser | None = None
        self.failure: tuple[str, str] | None = None
        self.found = 0  # links of this attempt, counted in tally.links_found
        self.capped = 0  # of them past max_links_per_page, counted in tally.links_capped
        self.direct = False  # the extractor returns the intake's items (no Links)
        self.ids: tuple[set[str], bool] | None = None
        self.kept: list[bytes] | None = None  # the body's chunks, kept for the renderer
        self.keep_below = 0  # (--render) links under which the chunks are kept

    def _fail(self, kind: str, what: str, exc: Exception) -> _BodyAbort:
        log.error("%s failed on %s", what, self.url, exc_info=exc)
        self.failure = (kind, f"{what} raised {type(exc).__name__}: {exc}"[:500])
        self.extractor = None
        self.sitemap = None
        return _BodyAbort(self.failure[1])

    def on_headers(self, res: Response) -> Consumer | None:
        status = res.status
        if status is None or not 200 <= status < 300:
            return None
        job = self.job
        self.failure = None  # a retried attempt starts the page over
        self.kept = None
        if self.sitemap_kind:
            # A .xml.gz sitemap is inflated by the parser: the body cap applies to what it
            # inflates too, as it does to Content-Encoding bodies.
            self.sitemap = SitemapParser(job.config.max_body_bytes)
            return self.feed_sitemap
        if not res.is_html:
            return None
        if self.found:  # a retried attempt starts the page over: uncount the last one
            self.tally.links_found -= self.found
            self.tally.links_capped -= self.capped
            self.page.links_capped -= self.capped
            self.found = self.capped = 0
        if job.page_links:
            self.page.links = []
        link_set = job.config.link_set
        facts = job.head_facts
        try:
            if job.direct:  # the compiled extractor feeds the compiled intake itself
                self.extractor = ex = LinkExtractorC(
                    self.url,
                    res.charset,
                    link_set=link_set,
                    collect_ids=job.collect_ids,
                    intake=job.admission.intake,
                    record=job.record,
                    head_facts=facts,
                )
                if job.record:
                    self.page.links = ex.record  # filled as the body is read
            elif job.collect_ids:
                self.extractor = LinkExtractor(
                    self.url, res.charset, link_set=link_set, collect_ids=True, head_facts=facts
                )
            else:
                self.extractor = LinkExtractor(
                    self.url, res.charset, link_set=link_set, head_facts=facts
                )
        except Exception as exc:
            self._fail("extract", "the extractor", exc)
            return None
        self.direct = job.direct
        if job.render is not None:  # (--render: the body is kept, its chunks as they came)
            self.kept = []
            self.keep_below = job.render.keep_below_for(self.url)
        if job.render is not None:
            return self.feed_kept
        return self.feed  # (a plain crawl: nothing kept, nothing asked a chunk)

    def feed_kept(self, chunk: bytes) -> Awaitable[None] | None:
        """``feed``, keeping the chunks ``--render`` needs."""
        kept = self.kept
        if kept is not None:
            if self.found < self.keep_below:
                kept.append(chunk)
            elif kept:
                kept.clear()  # auto: a page of this many links is not rendered
        return self.feed(chunk)

    def feed(self, chunk: bytes) -> Awaitable[None] | None:
        ex = self.extractor
        if ex is None:
            raise _BodyAbort("extraction failed")
        items, ext = self._step(lambda: ex.feed(chunk))
        if items or ext:
            return self._take(items, ext, ex)
        return None

    def _step(self, step: Callable[[], list[Any]]) -> tuple[list[str | Link], Sequence[int] | None]:
        """One extractor step (its feed or close) and the intake's part of it: the items, the
        links counted, and the fingerprints the intake kept of new out-of-scope URLs. Those
        are taken from the intake whatever happens: it is shared by every page in flight, and
        a failed step must leave none for another page to count."""
        intake = self._intake()
        before = intake.found
        cap = self.job.config.max_links_per_page
        if cap:
            intake.limit = before + max(0, cap - self.found)
        try:
            try:
                out = step()
            except Exception as exc:
                raise self._fail("extract", "the extractor", exc) from exc
            items = self._items(out, intake, before, cap)
        finally:
            if cap:
                intake.limit = NO_LIMIT
            ext = intake.take_external() if intake.external_pending else None
        return items, ext

    def _intake(self) -> Any:
        admission = self.job.admission
        admission.check_epoch()  # before the intake's table decides anything
        return admission.intake

    def _items(self, out: list[Any], intake: Any, before: int, cap: int) -> list[str | Link]:
        """The intake's items of what the extractor returned, its links counted.

        Direct, ``out`` are the items already; else they are Links (pure-Python extractor,
        or the page's Links wanted): kept for the page's record (up to the page's cap), then
        through the intake (which applies the cap: its ``limit``).
        """
        if not self.direct and out:
            if self.job.page_links:
                room = cap - self.found
                keep = out if not cap or len(out) <= room else out[: max(0, room)]
                self.page.links.extend(keep)  # type: ignore[attr-defined]  # (a list here)
            try:
                out = intake.take(out)
            except Exception as exc:
                raise self._fail("internal", "link handling", exc) from exc
        found = intake.found - before
        if found:
            self.found += found
            self.tally.links_found += found
            if cap and self.found > cap:
                capped = self.found - max(cap, self.found - found)
                self.capped += capped
                self.tally.links_capped += capped
                self.page.links_capped += capped
        return out

    async def _take(self, items: list[str | Link], ext: Sequence[int] | None, ex: Any) -> None:
        """Admission of a chunk's items, and of the fingerprints the intake kept of its new
        out-of-scope URLs (``ext``, taken from the intake with the items: it is shared by
        every page in flight)."""
        job = self.job
        try:
            if job.config.respect_nofollow and ex.nofollow:
                return
            if ext:
                await job.admission.take_external(ext, self.tally)
            if items:
                await job.admission.take_items(items, self.url, self.depth, self.page, self.tally)
        except Exception as exc:
            raise self._fail("internal", "link handling", exc) from exc

    def feed_sitemap(self, chunk: bytes) -> Awaitable[None] | None:
        parser = self.sitemap
        if parser is None:
            raise _BodyAbort("sitemap parsing failed")
        try:
            urls = parser.feed(chunk)
        except Exception as exc:
            raise self._fail("internal", "sitemap handling", exc) from exc
        if urls:
            return self._take_sitemap(urls)
        return None

    async def _take_sitemap(self, urls: list[str]) -> None:
        try:
            await self.job.admission.take_sitemap(urls, self.url, self.depth, self.page, self.tally)
        except Exception as exc:
            raise self._fail("internal", "sitemap handling", exc) from exc

    async def close(self) -> None:
        ex = self.extractor
        if ex is None:
            return
        self.extractor = None

        def closing() -> list[Any]:  # (the extractor never raises by contract; belt and braces)
            out: list[Any] = ex.close()
            if self.job.collect_ids:
                self.ids = (set(ex.ids), bool(ex.ids_complete))
            if self.job.head_facts:
                self.page.head_facts = ex.head
            return out

        try:
            items, ext = self._step(closing)
        except _BodyAbort:
            return  # kept in self.failure
        if items or ext:
            try:
                await self._take(items, ext, ex)
            except _BodyAbort:
                pass  # kept in self.failure
