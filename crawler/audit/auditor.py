"""The audit run: the link checker's crawl (crawler/check: every link with its page, line and
column, every URL's verdict with its redirect chain) plus what each page says about itself
(its head and headers: canonical, hreflang, robots) and the site's sitemaps.

The Auditor is a Checker: the crawl, its occurrences and verdicts are the checker's own
(``Findings``), so that a redirect, a status or a place is decided once, the same way for
``check`` and ``audit``. It adds, per HTML page, the facts of its head (read by the crawl's
extractor: ``Crawler(head_facts=True)``), and before the crawl the sitemaps
(robots.txt's ``Sitemap:`` lines and ``--sitemap``), whose URLs join the URLs to check: one
the crawl does not reach is probed as a link the crawl did not fetch is. ``analysis.py``
turns all of it into the report.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crawler.audit.diskgraph import GRAPH_DB, DiskOccurrences
from crawler.audit.head import Annotation, HeadFacts, parse_link_header, robots_noindex
from crawler.audit.journal import AuditJournal, head_facts
from crawler.audit.sitemaps import Sitemaps
from crawler.check.checker import Checker, CheckOptions
from crawler.check.model import CheckReport
from crawler.core.robots import RobotsCache, robots_agent
from crawler.http.response import HTML_TYPES
from crawler.state._sqlite_files import inspect_directory, lock_holder
from crawler.state.base import StateError
from crawler.urls.policy import join, origin_of

if TYPE_CHECKING:
    from crawler.audit.model import AuditReport
    from crawler.check.cache import ResultCache
    from crawler.check.journal import PageJournal
    from crawler.check.probe import Prober
    from crawler.config import CrawlConfig
    from crawler.core.results import PageResult

__all__ = ["MAX_CLICK_DEPTH", "Auditor", "PageFacts", "steady_malloc"]

#: ``--max-click-depth``'s default: pages deeper are reported.
MAX_CLICK_DEPTH = 4
#: Blocks from this size up are mapped apart by glibc's malloc (see `steady_malloc`).
MMAP_THRESHOLD = 1 << 20
_M_MMAP_THRESHOLD = -3  # (glibc's malloc.h)


def steady_malloc() -> bool:
    """Fix glibc's threshold for mapping a block apart at `MMAP_THRESHOLD` (True: done).

    By default glibc raises it, up to 32 MB, each time a mapped block is freed (a large
    page body, a column's old copy): from then on the audit's growing columns and tables
    live in the heap, each growth a copy whose old block is a hole that the run's small
    long-lived objects (interned strings) pin, so the heap only grows. Fixed, a block past
    it stays mapped (its growth a remap, no copy; freed, given back): on the rustdoc site
    the audit's peak RSS was 40 MB lower (benchmarks/AUDIT.md), the CPU the same. Other
    C libraries: nothing is done. A process-wide setting: ``crawler audit`` makes it (the
    command line owns its process), the library does not."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


@dataclass(slots=True)
class PageFacts:
    """What an HTML page of status 200 says about itself (URLs resolved and canonical).

    Attributes:
        canonical: the page's canonical (the HTML's, else the header's), resolved; None: none.
        html_canonical, header_canonical: each as given (with where), None when absent.
        alternates: (hreflang, resolved URL or None, annotation), from the HTML, the header
            and the sitemaps, in that order.
        noindex: where the page says noindex (a ``<meta name=robots>`` or the header).
    """

    canonical: str | None = None
    html_canonical: tuple[str | None, Annotation] | None = None
    header_canonical: tuple[str | None, Annotation] | None = None
    alternates: list[tuple[str, str | None, Annotation]] = field(default_factory=list)
    noindex: Annotation | None = None


class Auditor(Checker):
    """One audit run over a site.

    Args:
        config: the crawl's config.
        options: the checker's options (an audit's default: no external links, no
            fragments: what the audit reports is the site's own graph).
        sitemaps: sitemap URLs to read besides those the seeds' robots.txt names.
        max_click_depth: pages deeper than this (clicks from a seed) are reported.
        given: as for the Checker (the keys set explicitly, for a resumed ``--state``).
        graph: write the link graph to this file (``.graphml``, ``.gexf``, ``.csv``).
    """

    def __init__(
        self,
        config: CrawlConfig,
        options: CheckOptions | None = None,
        *,
        sitemaps: tuple[str, ...] = (),
        max_click_depth: int = MAX_CLICK_DEPTH,
        given: set[str] | None = None,
        graph: str | None = None,
    ) -> None:
        options = options or CheckOptions(external=False, ignore_fragments=True)
        super().__init__(config, options, given=given)
        self.sitemap_urls = sitemaps
        self.max_click_depth = max_click_depth
        self.facts: dict[str, PageFacts] = {}
        self.sitemaps: Sitemaps | None = None
        self.graph = graph
        self._audit_journal: AuditJournal | None = None

    def _crawl_extras(self) -> dict[str, Any]:
        return {"head_facts": True}

    # -- each page --

    def _journal(self, state_dir: str) -> PageJournal:
        # the directory is the crawl state's: checked as it checks it before the graph's
        # file is made there (nothing written into a directory it refuses, nor into one a
        # running crawl holds)
        inspect_directory(state_dir)
        holder = lock_holder(state_dir)
        if holder is not None:
            who = f"process {holder}" if holder > 0 else "another process"
            raise StateError(f"{state_dir}: in use by {who} (one crawl per state directory)")
        journal = self._audit_journal = AuditJournal(state_dir)
        # the links go to SQLite in the state directory (the journal's replay refills it)
        self.store = DiskOccurrences(os.path.join(state_dir, GRAPH_DB))
        return journal

    def _on_page(self, page: PageResult) -> None:
        journal = self._audit_journal
        if journal is not None and page.url in journal.parsed:
            found = journal.parsed.pop(page.url)  # read by the journal (or replayed from it)
        else:
            found = head_facts(page)
        page.head_facts = None  # (read once: not held while the report is built)
        super()._on_page(page)
        if page.error is not None or page.status != 200 or page.content_type not in HTML_TYPES:
            return
        url = page.final_url or page.url
        self.facts[url] = self._read_facts(url, page, found)

    def _resolve_href(self, base: str, href: str) -> str | None:
        joined = join(base, href)
        return self.policy.canonical(joined) if joined is not None else None

    def _read_facts(self, url: str, page: PageResult, found: HeadFacts | None) -> PageFacts:
        facts = PageFacts()
        base = url
        if found is not None:
            if found.base:
                base = join(url, found.base) or url
            if found.canonicals:
                first = found.canonicals[0]
                facts.html_canonical = (self._resolve_href(base, first.href), first)
            for alt in found.alternates:
                facts.alternates.append((alt.hreflang, self._resolve_href(base, alt.href), alt))
            facts.noindex = found.noindex
        if page.link_header:
            canonicals, alternates = parse_link_header(page.link_header)
            if canonicals:
                first = canonicals[0]
                facts.header_canonical = (self._resolve_href(url, first.href), first)
            for alt in alternates:
                facts.alternates.append((alt.hreflang, self._resolve_href(url, alt.href), alt))
        if facts.noindex is None and page.robots_header and robots_noindex(page.robots_header):
            facts.noindex = Annotation(page.robots_header, 0, 0, source="header")
        chosen = facts.html_canonical or facts.header_canonical
        facts.canonical = chosen[0] if chosen is not None else None
        # what the page points at is checked as a link the crawl did not fetch is
        pointed = [c[0] for c in (facts.html_canonical, facts.header_canonical) if c]
        for target in (*pointed, *(alt[1] for alt in facts.alternates)):
            if target is not None and self.policy.in_scope(target):
                self._bases.setdefault(target, None)
        return facts

    # -- the sitemaps, then the checker's phases --

    async def _read_sitemaps(self, prober: Prober) -> None:
        cfg = self.config
        urls: list[str] = []
        robots = RobotsCache(prober.fetcher, robots_agent(cfg), self.policy.in_scope)
        for origin in dict.fromkeys(origin_of(s) for s in cfg.seeds):
            rules = await robots.get(origin)
            urls.extend(rules.sitemaps)
        urls.extend(self.sitemap_urls)
        sitemaps = self.sitemaps = Sitemaps(
            prober.fetcher,
            self.policy.canonical,
            self.policy.in_scope,
            max_bytes=cfg.max_body_bytes,
            max_redirects=cfg.max_redirects,
        )
        canonical = [c for c in (self.policy.canonical(u) for u in urls) if c is not None]
        await sitemaps.read_all(canonical)
        for url in sitemaps.entries:
            self._bases.setdefault(url, None)  # checked as a link the crawl did not fetch

    async def _phases(
        self, journal: PageJournal | None, prober: Prober, cache: ResultCache | None
    ) -> None:
        await self._read_sitemaps(prober)
        await super()._phases(journal, prober, cache)

    def _report(self) -> CheckReport:
        """The checker's report is not the audit's: only its counters (and the run's
        duration) are read, so its problems and their places are not built (a pass over
        every link, and every linked URL's verdict resolved, that the audit's own report
        does again its way)."""
        return CheckReport(seeds=list(self.config.seeds), stats=self.stats)

    async def audit(self) -> AuditReport:
        """Crawl, check what the crawl did not fetch, and build the audit's report."""
        from crawler.audit.analysis import build_report  # noqa: PLC0415 (a cycle otherwise)

        try:
            check_report = await self.run()
            report = build_report(self, self.graph)
        finally:
            if isinstance(self.store, DiskOccurrences):
                self.store.close()
        report.stats.duration = check_report.stats.duration
        return report
