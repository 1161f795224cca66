"""The link checker: crawl the site, check every distinct URL found once, report where.

Theory of operation
-------------------
1. **Crawl.** The site is crawled by the crawl engine itself (``crawler.Crawler``: the same
   scope, robots, politeness, retries, limits and state). Every page's links (``PageResult
   .links``) are recorded as occurrences (`OccurrenceStore`: page, line, column, tag, attr,
   raw) of a *target*: the canonical URL, with the fragment when one is to be checked. An
   in-scope URL is checked by being crawled: its PageResult (status, redirects, error, and
   the fragment ids the extractor collected in the same pass) is its verdict.
2. **Probe.** Every linked URL without a verdict is probed (`Prober`: HEAD, GET on any HEAD
   failure or when a fragment must be looked up; redirects hop by hop; never crawled):
   out-of-scope ("external") URLs as soon as they are found, while the crawl goes on (their
   hosts are not the crawl's), unless ``external`` is off; in-scope URLs the crawl did not
   fetch (past ``max_depth``/``max_pages``) once it is over, after their robots.txt allows
   them. ``include``/``exclude`` apply to every URL: a URL they rule out is a warning
   ``excluded``, not checked. External results come from ``--cache`` when fresh there. The
   seeds are targets too (linked from nowhere), so a site that is down is reported.
3. **Second look.** A URL that failed in a way that may pass (timeout, 403, 429, 5xx) is
   probed once more at the end with one GET, at least ``recheck_delay`` seconds after its
   failure; only a second failure is reported.
4. **Report.** Broken URLs (model.BROKEN_KINDS) and warnings, each with every occurrence.
   A redirect that ends broken is reported under the URL as linked, with its chain; a
   missing fragment under ``url#fragment``; a broken page's fragment links under the page.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
import time
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from crawler.check.cache import ResultCache
from crawler.check.journal import PageJournal
from crawler.check.model import CheckReport, CheckStats, Problem
from crawler.check.probe import REDIRECTS, Prober, Verdict, error_kind
from crawler.check.store import Interner, OccurrenceStore
from crawler.config import CrawlConfig
from crawler.core.engine import Crawler
from crawler.core.results import PageResult
from crawler.core.robots import RobotsCache
from crawler.http.response import HTML_TYPES
from crawler.output.progress import Snapshot
from crawler.urls.policy import UrlPolicy, origin_of

__all__ = ["RECHECK_KINDS", "CheckOptions", "Checker"]

log = logging.getLogger("crawler.check")

#: Failures that may pass a second time (bot blocking, rate limits, a busy server).
RECHECK_KINDS = frozenset({"timeout", "http_403", "http_429"})
_WARNING_VERDICTS = frozenset({"robots_disallowed", "excluded"})
# Target kinds
_HTTP, _INVALID, _SCHEME = 0, 1, 2
# A robots.txt Crawl-delay honoured up to this (as the crawl engine does).
_MAX_CRAWL_DELAY = 30.0


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """What the checker adds to a crawl's config.

    Attributes:
        external: check out-of-scope links (HEAD/GET, never crawled).
        ignore_fragments: do not check ``#fragment`` targets.
        cache: a JSON file of external results kept between runs (None: no cache).
        cache_max_age: seconds a cached result is used.
        recheck_delay: least seconds between a failure worth a second look and that look.
    """

    external: bool = True
    ignore_fragments: bool = False
    cache: str | None = None
    cache_max_age: float = 86400.0
    recheck_delay: float = 1.0


def _recheckable(kind: str | None) -> bool:
    return kind is not None and (
        kind in RECHECK_KINDS or (kind.startswith("http_5") and len(kind) == 8)
    )


def _describe(verdict: Verdict, cfg: CrawlConfig) -> str:
    if verdict.error == "timeout":
        return f"no answer within --timeout {cfg.timeout:g} s"
    return verdict.detail


def _id_hashes(ids: Iterable[str]) -> array[int]:
    return array("q", sorted({hash(i) for i in ids}))


def _has_id(hashes: array[int], name: str) -> bool:
    h = hash(name)
    i = bisect_left(hashes, h)
    return i < len(hashes) and hashes[i] == h


class Checker:
    """One check run over a site.

    Args:
        config: the crawl's config (seeds, scope, limits ...); validated here.
        options: the checker's own options.
        given: the keys the user set explicitly (the command line's flags and file): on a
            resumed ``--state`` they are checked against the stored crawl (None: the
            library rule, keys that differ from the defaults).
    """

    def __init__(
        self,
        config: CrawlConfig,
        options: CheckOptions | None = None,
        *,
        given: set[str] | None = None,
    ) -> None:
        cfg = config.validated()
        self._given = given
        self.config = cfg
        self.options = options or CheckOptions()
        self.policy = UrlPolicy.from_config(cfg)
        # The same host rule without the regexes: tells "excluded" from "external"; the
        # regexes apply to external URLs too (the crawl's UrlPolicy sees only its own scope).
        self.hosts = UrlPolicy(cfg.seeds, scope=cfg.scope)
        self._include = [re.compile(p) for p in cfg.include]
        self._exclude = [re.compile(p) for p in cfg.exclude]
        self.store = OccurrenceStore()
        self.targets = Interner()
        # per target id: its kind; the URL and fragment are read back from the key
        self._kind = array("B")
        self.verdicts: dict[str, Verdict] = {}
        self._derived: set[str] = set()  # verdicts made from another page's redirect chain
        self._ids: dict[str, array[int]] = {}  # final page URL -> hashes of its ids
        self._bases: dict[str, None] = {}  # linked http(s) URLs, in order
        self._frag_bases: set[str] = set()
        self.stats = CheckStats()
        self.crawl_stats: Any = None
        self.requests: dict[str, int] = {}
        self.cache_error: str | None = None
        self._replayed: set[str] = set()
        # External URLs are probed while the crawl runs (they are on other hosts than the
        # crawl's): the pool is set up by run().
        self._prober: Prober | None = None
        self._cache: ResultCache | None = None
        self._sem: asyncio.Semaphore | None = None
        self._early: set[asyncio.Task[None]] = set()
        self.resumed_pages = 0  # pages of earlier runs of the state, replayed from its journal
        self._crawl: Crawler | None = None

    def snapshot(self) -> Snapshot:
        """Where the run stands, for the command line's live line: pages crawled, requests
        in flight (the crawl's and the probes'), URLs found and not checked yet, failures
        so far (before their second look)."""
        crawl = self._crawl
        return Snapshot(
            pages=crawl.stats.pages if crawl is not None else 0,
            in_flight=(crawl.in_flight if crawl is not None else 0) + len(self._early),
            queued=max(0, len(self._bases) - len(self.verdicts)),  # URLs without a verdict yet
            errors=sum(1 for v in self.verdicts.values() if v.error is not None),
        )

    # -- phase 1: the crawl --

    def _crawler(self, journal: PageJournal | None) -> Crawler:
        kwargs: dict[str, Any] = {"on_page": self._on_page, "keep_results": False}
        if journal is not None:
            kwargs["sink"] = journal
        params = inspect.signature(Crawler).parameters
        if "collect_ids" in params:
            kwargs["collect_ids"] = not self.options.ignore_fragments
        if "report_skipped" in params:
            kwargs["report_skipped"] = True
        if "link_record" in params:  # the page's links as the compiled extractor's record
            kwargs["link_record"] = True
        if "given" in params:
            kwargs["given"] = self._given
        return Crawler(self.config, **kwargs)

    def _add_seeds(self) -> None:
        """The seeds are targets too (linked from nowhere): a seed that is down is broken."""
        for seed in self.config.seeds:
            canon = self.policy.canonical(seed)
            if canon is not None and self.targets.get(canon) is None:
                self.targets.id(canon)
                self._kind.append(_HTTP)
                self._bases[canon] = None

    def _needs_probe(self, url: str) -> bool:
        """No verdict yet, or an early probe (HEAD) that did not read the ids a fragment
        linked later needs."""
        verdict = self._resolve(url)
        if verdict is None:
            return True
        return (
            url in self._frag_bases
            and not verdict.crawled
            and verdict.error is None
            and verdict.ids is None
            and verdict.final_url not in self._ids
        )

    def _replay(self, journal: PageJournal) -> None:
        """The pages of earlier runs of this state (``--state``): as if crawled now."""
        for page in journal.replay():
            self._on_page(page)
            self._replayed.add(page.url)
        self.resumed_pages = len(self._replayed)

    def _on_page(self, page: PageResult) -> None:
        now = time.monotonic()
        if page.url in self._replayed:
            # in flight at the kill: its links are in already; its new result counts
            page.links = []
            self._replayed.discard(page.url)
            if page.content_type in HTML_TYPES and page.error is None:
                self.stats.pages -= 1
        kind = page.error
        if kind == "redirect_out_of_scope":
            return  # no verdict: the URL as linked is probed, its redirect and all
        if kind == "url_too_long":
            verdict = Verdict(page.url, error="excluded", detail=page.error_detail or "")
        else:
            verdict = Verdict(
                page.url,
                status=page.status,
                error=error_kind(kind, page.error_detail),
                detail=page.error_detail or "",
                redirects=list(page.redirects),
                hop_statuses=list(page.redirect_statuses),
                final_url=page.final_url,
                html=page.content_type in HTML_TYPES,
                crawled=True,
            )
            if page.content_type in HTML_TYPES and page.error is None:
                self.stats.pages += 1
            ids = page.ids
            if ids is not None and page.final_url:
                # a body cut at --max-body-bytes (or whose reading failed) has ids past the
                # cut that were never seen: none of its fragments can be called missing
                verdict.ids_complete = (
                    page.ids_complete and not page.truncated and page.error is None
                )
                self._ids[page.final_url] = _id_hashes(ids)
            if _recheckable(verdict.error):
                verdict.failed_at = now
        self.verdicts[page.url] = verdict
        self._derived.discard(page.url)
        self._derive_hops(verdict)
        if page.links:
            self._take_links(page.final_url or page.url, page.links)

    def _derive_hops(self, verdict: Verdict) -> None:
        # A redirect followed in the page's own job fetched its targets too: each hop gets
        # the rest of the chain as its verdict (unless it has its own PageResult).
        hops = verdict.redirects
        for i, url in enumerate(hops):
            if url in self.verdicts and url not in self._derived:
                continue
            self.verdicts[url] = Verdict(
                url,
                status=verdict.status,
                error=verdict.error,
                detail=verdict.detail,
                redirects=hops[i + 1 :],
                hop_statuses=verdict.hop_statuses[i + 1 :],
                final_url=verdict.final_url,
                html=verdict.html,
                ids_complete=verdict.ids_complete,
                crawled=True,
                failed_at=verdict.failed_at,
            )
            self._derived.add(url)

    def _take_links(self, page_url: str, links: Iterable[Any]) -> None:
        store = self.store
        page_id = store.page_id(page_url)
        targets = self.targets
        canonical = self.policy.canonical_resolved
        check_frags = not self.options.ignore_fragments
        n = 0
        for link in links:
            n += 1
            raw = link.raw
            url = link.url
            frag = ""
            if url is None:
                key = "\0i" + raw
                kind, base = _INVALID, raw
            else:
                canon = canonical(url)
                if canon is None:
                    if url.startswith("data:"):
                        continue  # inline content, not a link to anything: nothing to check
                    key = "\0s" + url
                    kind, base = _SCHEME, url
                else:
                    kind, base = _HTTP, canon
                    if check_frags and "#" in raw:
                        frag = raw.partition("#")[2]
                    key = f"{canon}#{frag}" if frag else canon
            tid = targets.get(key)
            if tid is None:
                tid = targets.id(key)
                self._kind.append(kind)
                if kind == _HTTP:
                    if base not in self._bases:
                        self._bases[base] = None
                        self._probe_early(base)
                    if frag:
                        self._frag_bases.add(base)
            store.add(
                tid,
                page_id,
                link.line,
                link.column,
                link.tag,
                link.attr,
                raw,
            )
        self.stats.links += n

    # -- phase 2 and 3: probes --

    def _resolve(self, url: str) -> Verdict | None:
        """The verdict of ``url`` with a crawled redirect to another page's result followed."""
        verdict = self.verdicts.get(url)
        if verdict is None:
            return None
        seen = {url}
        redirects = list(verdict.redirects)
        hops = list(verdict.hop_statuses)
        current = verdict
        while current.crawled and current.error is None and current.status in REDIRECTS:
            target = current.redirects[-1] if current.redirects else current.final_url
            if target is None:
                return None
            if target in seen:
                return Verdict(
                    url,
                    status=current.status,
                    error="redirect_loop",
                    detail=f"redirect loop back to {target}",
                    redirects=redirects,
                    hop_statuses=hops,
                    final_url=target,
                    crawled=True,
                )
            seen.add(target)
            nxt = self.verdicts.get(target)
            if nxt is None or nxt is current:
                return None  # the target was never fetched: probe the URL as linked
            redirects.extend(nxt.redirects)
            hops.extend(nxt.hop_statuses)
            current = nxt
        if current is verdict:
            return verdict
        if len(hops) > self.config.max_redirects and current.error is None:
            return Verdict(
                url,
                status=current.status,
                error="too_many_redirects",
                detail=f"more than {self.config.max_redirects} redirects",
                redirects=redirects,
                hop_statuses=hops,
                final_url=current.final_url,
                crawled=True,
            )
        return Verdict(
            url,
            status=current.status,
            error=current.error,
            detail=current.detail,
            redirects=redirects,
            hop_statuses=hops,
            final_url=current.final_url,
            html=current.html,
            ids_complete=current.ids_complete,
            external=current.external,
            crawled=True,
            failed_at=current.failed_at,
        )

    def _scope_verdict(self, url: str) -> tuple[Verdict | None, bool]:
        """(a warning verdict if rules exclude ``url``, whether it is external)."""
        external = self.hosts.scope_origin(url) is None
        if external:
            inc, exc = self._include, self._exclude
            if (inc and not any(r.search(url) for r in inc)) or any(r.search(url) for r in exc):
                return Verdict(url, error="excluded", detail="--include/--exclude"), True
            return None, True
        if not self.policy.in_scope(url):
            return Verdict(url, error="excluded", detail="--include/--exclude"), False
        if self.policy.too_long(url):
            return Verdict(url, error="excluded", detail=f"URL of {len(url)} characters"), False
        return None, False

    @property
    def _follow(self) -> Callable[[str], bool] | None:
        """With ``external`` off, redirects off the site are not followed."""
        if self.options.external:
            return None
        return lambda url: self.hosts.scope_origin(url) is not None

    def _probe_early(self, url: str) -> None:
        """Start probing an external URL now, while the crawl goes on (not in-scope ones:
        the crawl may still fetch them, and their hosts are the crawl's)."""
        if self._prober is None or not self.options.external:
            return
        if self.hosts.scope_origin(url) is not None:
            return
        task = asyncio.get_running_loop().create_task(self._probe_into(url, None))
        self._early.add(task)
        task.add_done_callback(self._early.discard)

    async def _probe_into(self, url: str, robots: RobotsCache | None) -> None:
        assert self._prober is not None and self._sem is not None
        async with self._sem:
            try:
                verdict = await self._probe_one(self._prober, url, robots, self._cache)
            except Exception:  # a bug of ours: never a broken link; logged, left unchecked
                log.exception("checking %s failed", url)
                return
        if verdict is not None:
            self.verdicts[url] = verdict

    async def _probe_all(self, urls: list[str], robots: RobotsCache | None) -> None:
        await asyncio.gather(*(self._probe_into(u, robots) for u in urls))

    async def _probe_one(
        self, prober: Prober, url: str, robots: RobotsCache | None, cache: ResultCache | None
    ) -> Verdict | None:
        warning, external = self._scope_verdict(url)
        if warning is not None:
            warning.external = external
            return warning
        if external and not self.options.external:
            return None
        need_ids = url in self._frag_bases
        if external and cache is not None and not need_ids:
            cached = cache.get(url)
            if cached is not None:
                return cached
        if not external and robots is not None:
            origin = origin_of(url)
            rules = await robots.get(origin)
            if rules.error is not None:
                return Verdict(url, error=error_kind(rules.error, rules.why), detail=rules.why)
            if rules.crawl_delay:
                prober.set_delay(origin, min(rules.crawl_delay, _MAX_CRAWL_DELAY))
            if not await rules.allowed_async(url):
                return Verdict(url, error="robots_disallowed", detail="robots.txt disallows it")
        verdict = await prober.probe(url, need_ids=need_ids, follow=self._follow)
        verdict.external = external
        if verdict.ids is not None and verdict.final_url:
            self._ids[verdict.final_url] = _id_hashes(verdict.ids)
        if _recheckable(verdict.error):
            verdict.failed_at = time.monotonic()
        if external and cache is not None and not need_ids:
            cache.put(verdict)
        return verdict

    async def _recheck(self, prober: Prober, cache: ResultCache | None) -> None:
        todo: list[tuple[str, Verdict]] = []
        for url in self._bases:
            verdict = self._resolve(url)
            if verdict is not None and _recheckable(verdict.error):
                todo.append((url, verdict))
        if not todo:
            return
        due = max(v.failed_at for _, v in todo) + self.options.recheck_delay
        wait = due - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        sem = asyncio.Semaphore(max(1, self.config.concurrency))

        async def again(url: str, old: Verdict) -> None:
            async with sem:
                verdict = await prober.probe(
                    url, need_ids=url in self._frag_bases, follow=self._follow, once=True
                )
            self.stats.rechecked += 1
            verdict.external = self.hosts.scope_origin(url) is None
            if verdict.ids is not None and verdict.final_url:
                self._ids[verdict.final_url] = _id_hashes(verdict.ids)
            if verdict.error is not None:
                first, again = _describe(old, self.config), _describe(verdict, self.config)
                same = first == again or (
                    verdict.status is not None and verdict.status == old.status
                )
                verdict.detail = f"{again} (checked twice{'' if same else f'; first: {first}'})"
            elif verdict.external and cache is not None and url not in self._frag_bases:
                cache.put(verdict)
            self.verdicts[url] = verdict
            self._derived.discard(url)

        await asyncio.gather(*(again(u, v) for u, v in todo))

    # -- the run --

    async def run(self) -> CheckReport:
        """Crawl, probe, look again, and build the report."""
        t0 = time.monotonic()
        state_dir = self.config.state
        journal = PageJournal(state_dir) if state_dir else None
        cache = (
            ResultCache(self.options.cache, self.options.cache_max_age)
            if self.options.cache
            else None
        )
        self._cache = cache
        prober = self._prober = Prober(self.config, self.policy)
        self._sem = asyncio.Semaphore(max(1, self.config.concurrency))
        try:
            self._add_seeds()
            if journal is not None:
                self._replay(journal)
            crawler = self._crawl = self._crawler(journal)
            async with crawler:
                await crawler.run()
            self.crawl_stats = crawler.stats
            while self._early:
                await asyncio.gather(*list(self._early))
            robots = (
                None
                if self.config.ignore_robots
                else RobotsCache(prober.fetcher, self.config.user_agent, self.policy.in_scope)
            )
            pending = [u for u in self._bases if self._needs_probe(u)]
            await self._probe_all(pending, robots)
            await self._recheck(prober, cache)
        finally:
            for task in list(self._early):
                task.cancel()
            await prober.close()
        self.requests = dict(prober.requests)
        if cache is not None:
            try:
                cache.save()
            except OSError as exc:  # the report still stands; the next run checks again
                self.cache_error = f"cannot write the cache {self.options.cache!r}: {exc}"
                log.error("%s", self.cache_error)
        report = self._report()
        report.stats.duration = time.monotonic() - t0
        return report

    # -- the report --

    def _fragment_ok(self, verdict: Verdict, frag: str) -> bool:
        """Whether ``frag`` is found on the verdict's final page (True when it cannot be told)."""
        if not verdict.html or not verdict.ids_complete or verdict.final_url is None:
            return True
        hashes = self._ids.get(verdict.final_url)
        if hashes is None:
            return True
        if _has_id(hashes, frag):
            return True
        decoded = unquote(frag, errors="replace") if "%" in frag else frag
        if decoded != frag and _has_id(hashes, decoded):
            return True
        # HTML: an empty fragment or "top" (any case) scrolls to the top; text fragments
        # (":~:text=") are not ids.
        return frag.lower() == "top" or frag.startswith(":~:")

    def _report(self) -> CheckReport:
        stats = self.stats
        stats.links = len(self.store)
        problems: dict[tuple[str, str], Problem] = {}
        groups: dict[int, int] = {}
        order: list[tuple[str, str]] = []
        resolved: dict[str, Verdict | None] = {}
        for url in self._bases:
            verdict = resolved[url] = self._resolve(url)
            if verdict is None or verdict.error in _WARNING_VERDICTS:
                continue
            stats.urls += 1
            stats.external += verdict.external
            if verdict.error is None:
                stats.ok += 1
            if verdict.status is not None:
                stats.status[verdict.status] = stats.status.get(verdict.status, 0) + 1

        index_of: dict[tuple[str, str], int] = {}
        for tid in range(len(self.targets)):
            kind = self._kind[tid]
            tkey = self.targets[tid]
            base, _, frag = (tkey[2:], "", "") if kind != _HTTP else tkey.partition("#")
            if kind == _INVALID:
                key = ("broken", "\0i" + base)
                made = Problem(base, "invalid_url", detail="the value does not resolve to a URL")
            elif kind == _SCHEME:
                key = ("warning", "\0s" + base)
                scheme = base.partition(":")[0]
                made = Problem(base, "scheme_unchecked", detail=f"{scheme}: links are not checked")
            else:
                verdict = resolved.get(base)
                if verdict is None:
                    continue
                made_opt = self._http_problem(verdict, base, frag)
                if made_opt is None:
                    continue
                made = made_opt
                section = "broken" if made.error not in _WARNING_KINDS else "warning"
                key = (section, made.url)
            if key not in index_of:
                index_of[key] = len(order)
                problems[key] = made
                order.append(key)
            groups[tid] = index_of[key]
        found = self.store.select(groups)
        report = CheckReport(seeds=list(self.config.seeds), stats=stats)
        for i, key in enumerate(order):
            prob = problems[key]
            prob.referrers = found.get(i, [])
            if key[0] == "broken":
                report.broken.append(prob)
                stats.broken_occurrences += len(prob.referrers)
            else:
                report.warnings.append(prob)
        stats.broken = len(report.broken)
        stats.warnings = len(report.warnings)
        return report

    def _http_problem(self, verdict: Verdict, base: str, frag: str) -> Problem | None:
        common: dict[str, Any] = {
            "status": verdict.status,
            "detail": verdict.detail,
            "redirects": list(verdict.redirects),
            "final_url": verdict.final_url if verdict.redirects else None,
            "external": verdict.external,
        }
        if verdict.error is not None:
            return Problem(base, verdict.error, **common)
        if frag and not self._fragment_ok(verdict, frag):
            common["detail"] = f"no element with id or name {frag!r} on {verdict.final_url}"
            return Problem(f"{base}#{frag}", "fragment_missing", **common)
        if verdict.permanent:
            common["detail"] = f"permanent redirect ({verdict.hop_statuses[0]}): link the final URL"
            return Problem(base, "redirect_permanent", **common)
        return None


_WARNING_KINDS = frozenset(
    {"redirect_permanent", "robots_disallowed", "excluded", "scheme_unchecked"}
)
