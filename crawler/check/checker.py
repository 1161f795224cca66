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
3. **Second look.** A URL that failed in a way that may pass (timeout, 403, 429, 5xx, a bot
   wall) is probed once more at the end with one GET, at least ``recheck_delay`` seconds
   after its failure; only a second failure is reported. A failure that is a bot wall
   (walls.py: a challenge header or page, a 429 that does not lift, a 403 that a browser's
   request does not get) is ``blocked``: reported apart, not broken.

``max_time`` bounds the whole run (steps 1-3): when it passes, the crawl stops as on Ctrl-C,
the probes in flight are cancelled, and every linked URL without a verdict is reported as
``not_checked`` (a warning, never broken); a failure whose second look did not come keeps its
first verdict, its detail saying so. The prober's breaker (``host_timeouts``) stops sending
to an origin where that many URLs timed out in a row: its other URLs are
``host_unresponsive`` (a warning).

4. **Report.** Broken URLs (model.BROKEN_KINDS), blocked URLs and warnings, each with every
   occurrence.
   A redirect that ends broken is reported under the URL as linked, with its chain; a
   missing fragment under ``url#fragment``; a broken page's fragment links under the page.

The Checker is a ``Findings`` (findings.py): the targets, occurrences and verdicts of steps 1-3
and the report of step 4 are kept and built there; this module runs the crawl and the probes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from crawler.check.cache import ResultCache
from crawler.check.findings import Findings, id_hashes, recheckable
from crawler.check.journal import PageJournal
from crawler.check.model import CheckReport
from crawler.check.probe import HOST_TIMEOUTS, UNRESPONSIVE, Prober, Verdict, error_kind
from crawler.config import CrawlConfig, is_redis_url
from crawler.core.engine import Crawler
from crawler.core.robots import RobotsCache, robots_agent
from crawler.output.progress import Snapshot
from crawler.state._sqlite_files import inspect_directory
from crawler.urls.policy import UrlPolicy, origin_of

__all__ = ["CheckOptions", "Checker"]

log = logging.getLogger("crawler.check")

# A robots.txt Crawl-delay honoured up to this (as the crawl engine does).
_MAX_CRAWL_DELAY = 30.0


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """What the checker adds to a crawl's config.

    Attributes:
        external: check out-of-scope links (HEAD/GET, never crawled).
        allow_link_local: connect to link-local addresses (169.254/16, the cloud metadata
            services' home; fe80::/10). Off: the check refuses them whatever the config's
            ``exclude_link_local`` says (a page must not turn the checker on its network).
        ignore_fragments: do not check ``#fragment`` targets.
        cache: a JSON file of external results kept between runs (None: no cache).
        cache_max_age: seconds a cached result is used.
        recheck_delay: least seconds between a failure worth a second look and that look.
        host_timeouts: URLs of one origin timing out in a row after which its remaining
            probes are not sent (``host_unresponsive``); 0 = always send.
        browser_retry: on the second look, a 403 that shows no bot wall's marker gets one
            GET with a browser's headers; if that passes, the link is ``blocked`` (the site
            refuses the checker), not broken.
    """

    external: bool = True
    allow_link_local: bool = False
    ignore_fragments: bool = False
    cache: str | None = None
    cache_max_age: float = 86400.0
    recheck_delay: float = 1.0
    host_timeouts: int = HOST_TIMEOUTS
    browser_retry: bool = True


def _describe(verdict: Verdict, cfg: CrawlConfig) -> str:
    if verdict.error == "timeout":
        return f"no answer within --timeout {cfg.timeout:g} s"
    return verdict.detail


class Checker(Findings):
    """One check run over a site: the crawl, the probes and the second looks, recorded in
    the Findings it is (findings.py), which build the report.

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
        options = options or CheckOptions()
        # link-local: the check's own default (refused), decided by allow_link_local alone;
        # named as given, so that a resumed --state takes this run's value
        cfg = config.validated().replace(exclude_link_local=not options.allow_link_local)
        if given is not None:
            given = given | {"exclude_link_local"}
        super().__init__(cfg, check_fragments=not options.ignore_fragments)
        self._given = given
        self.options = options
        # The same host rule without the regexes: tells "excluded" from "external"; the
        # regexes apply to external URLs too (the crawl's UrlPolicy sees only its own scope).
        self.hosts = UrlPolicy(cfg.seeds, scope=cfg.scope)
        self._include = [re.compile(p) for p in cfg.include]
        self._exclude = [re.compile(p) for p in cfg.exclude]
        self.crawl_stats: Any = None
        self.requests: dict[str, int] = {}
        self.cache_error: str | None = None
        # External URLs are probed while the crawl runs (they are on other hosts than the
        # crawl's): the pool is set up by run().
        self._prober: Prober | None = None
        self._cache: ResultCache | None = None
        self._sem: asyncio.Semaphore | None = None
        self._early: set[asyncio.Task[None]] = set()
        self._crawl: Crawler | None = None
        self._looked_again: set[str] = set()  # failures that had their second look

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
        kwargs.update(self._crawl_extras())
        return Crawler(self.config, **kwargs)

    def _journal(self, state_dir: str) -> PageJournal:
        """The page journal of a ``--state`` run (a subclass's keeps more of each page)."""
        return PageJournal(state_dir)

    def _crawl_extras(self) -> dict[str, Any]:
        """More keyword arguments for the Crawler (a subclass's: the audit keeps heads)."""
        return {}

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

    # -- phase 2 and 3: probes --

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

    def _hop_excluded(self, url: str) -> bool:
        """A redirect hop the rules exclude (``--include``/``--exclude``, the URL length): as
        for a URL as linked, it is not requested."""
        return self._scope_verdict(url)[0] is not None

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
        if not self.options.external:  # (an external URL the rules let be: no task, no verdict)
            urls = [u for u in urls if self._scope_verdict(u) != (None, True)]
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
        verdict = await prober.probe(
            url, need_ids=need_ids, follow=self._follow, excluded=self._hop_excluded
        )
        verdict.external = external
        if verdict.ids is not None and verdict.final_url:
            self._ids[verdict.final_url] = id_hashes(verdict.ids)
        if recheckable(verdict.error):
            verdict.failed_at = time.monotonic()
        if external and cache is not None and not need_ids:
            cache.put(verdict)
        return verdict

    async def _recheck(self, prober: Prober, cache: ResultCache | None) -> None:
        todo: list[tuple[str, Verdict]] = []
        for url in self._bases:
            verdict = self._resolve(url)
            if verdict is not None and recheckable(verdict.error):
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
                    url,
                    need_ids=url in self._frag_bases,
                    follow=self._follow,
                    once=True,
                    excluded=self._hop_excluded,
                )
            self._looked_again.add(url)
            if verdict.error == UNRESPONSIVE:  # not looked at again: the first failure stands
                self._first_stands(url, old, verdict.detail)
                return
            self.stats.rechecked += 1
            verdict.external = self.hosts.scope_origin(url) is None
            if verdict.ids is not None and verdict.final_url:
                self._ids[verdict.final_url] = id_hashes(verdict.ids)
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

    def _first_stands(self, url: str, old: Verdict, why: str) -> None:
        """A failure that got no second look keeps its first verdict, saying why."""
        detail = f"{_describe(old, self.config)} (checked once; {why})"
        self.verdicts[url] = dataclasses.replace(old, detail=detail)
        self._derived.discard(url)

    def _time_up(self) -> None:
        """``max_time`` passed: every linked URL without a verdict is ``not_checked`` (the
        rules' own warnings first), a failure without its second look keeps its first."""
        self.stats.time_limit = True
        why = f"--max-time {self.config.max_time:g} s passed before it was checked"
        for url in self._bases:
            old = self._resolve(url)
            if old is not None:
                if recheckable(old.error) and url not in self._looked_again:
                    self._first_stands(url, old, "--max-time passed before the second look")
                continue
            warning, external = self._scope_verdict(url)
            if warning is None and external and not self.options.external:
                continue  # --no-external: not checked by choice, not by time
            verdict = warning or Verdict(url, error="not_checked", detail=f"not checked: {why}")
            verdict.external = external
            self.verdicts[url] = verdict

    async def _phases(
        self, journal: PageJournal | None, prober: Prober, cache: ResultCache | None
    ) -> None:
        """Steps 1-3: the crawl (with early probes of external URLs), the probes of what is
        left, the second looks."""
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
            else RobotsCache(prober.fetcher, robots_agent(self.config), self.policy.in_scope)
        )
        pending = [u for u in self._bases if self._needs_probe(u)]
        await self._probe_all(pending, robots)
        await self._recheck(prober, cache)

    # -- the run --

    async def run(self) -> CheckReport:
        """Crawl, probe, look again, and build the report (by ``max_time`` when it is set)."""
        t0 = time.monotonic()
        state_dir = self.config.state
        if state_dir and not is_redis_url(state_dir):
            # refused before the journal is read or written: a file, a foreign directory
            inspect_directory(state_dir)
        journal = self._journal(state_dir) if state_dir else None
        cache = (
            ResultCache(self.options.cache, self.options.cache_max_age)
            if self.options.cache
            else None
        )
        self._cache = cache
        prober = self._prober = Prober(
            self.config,
            self.policy,
            host_timeouts=self.options.host_timeouts,
            browser_retry=self.options.browser_retry,
        )
        self._sem = asyncio.Semaphore(max(1, self.config.concurrency))
        deadline = asyncio.timeout(self.config.max_time or None)
        try:
            async with deadline:
                await self._phases(journal, prober, cache)
        except TimeoutError:
            if not deadline.expired():
                raise  # not ours
            if self._crawl is not None and self.crawl_stats is None:
                self.crawl_stats = self._crawl.stats
            self._time_up()
        finally:
            early = list(self._early)
            for task in early:
                task.cancel()
            await asyncio.gather(*early, return_exceptions=True)
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
