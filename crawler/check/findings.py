"""What a check found, and what it comes to: every link of the crawled pages recorded as an
occurrence of its target, every verdict (a crawled page's, or a probe's), redirect chains
followed through the verdicts, and the report built from them.

``Findings`` is the checker's bookkeeping without the network: the Checker (checker.py) is a
Findings that also runs the crawl, probes what the crawl did not fetch and looks again at what
may pass (steps 1-3 of its theory of operation); the report (step 4) is built here.
"""

from __future__ import annotations

import time
from array import array
from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from crawler.check.model import CheckReport, CheckStats, Problem
from crawler.check.probe import REDIRECTS, Verdict, error_kind
from crawler.check.store import Interner, OccurrenceStore
from crawler.check.walls import BLOCKED
from crawler.http.response import HTML_TYPES
from crawler.urls.intake import canonicalizer
from crawler.urls.policy import UrlPolicy

if TYPE_CHECKING:
    from crawler.check.journal import PageJournal
    from crawler.config import CrawlConfig
    from crawler.core.results import PageResult

__all__ = ["RECHECK_KINDS", "Findings", "id_hashes", "recheckable"]

#: Failures that may pass a second time (bot blocking, rate limits, a busy server).
RECHECK_KINDS = frozenset({"timeout", "http_403", "http_429", BLOCKED})
_UNCHECKED = frozenset({"not_checked", "host_unresponsive"})
_WARNING_VERDICTS = frozenset({"robots_disallowed", "excluded", "blocked_address", *_UNCHECKED})
_WARNING_KINDS = frozenset(
    {
        "redirect_permanent",
        "robots_disallowed",
        "excluded",
        "blocked_address",
        "scheme_unchecked",
        *_UNCHECKED,
    }
)
# Target kinds
_HTTP, _INVALID, _SCHEME = 0, 1, 2


def recheckable(kind: str | None) -> bool:
    """Whether a failure of this kind gets a second look (step 3)."""
    return kind is not None and (
        kind in RECHECK_KINDS or (kind.startswith("http_5") and len(kind) == 8)
    )


def id_hashes(ids: Iterable[str]) -> array[int]:
    """A page's ids as sorted hashes: what a fragment is looked up in (``_has_id``)."""
    return array("q", sorted({hash(i) for i in ids}))


def _has_id(hashes: array[int], name: str) -> bool:
    h = hash(name)
    i = bisect_left(hashes, h)
    return i < len(hashes) and hashes[i] == h


class Findings:
    """The targets, occurrences and verdicts of one check run, and its report.

    Args:
        config: the crawl's config, validated (seeds, scope, max_redirects ...).
        check_fragments: record ``#fragment`` targets (the checker's ``ignore_fragments``
            off).
    """

    def __init__(self, config: CrawlConfig, *, check_fragments: bool) -> None:
        self.config = config
        self._check_frags = check_fragments
        self.policy = UrlPolicy.from_config(config)
        self._canonical = canonicalizer(config, self.policy)  # a new target's (compiled)
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
        self._replayed: set[str] = set()
        self.resumed_pages = 0  # pages of earlier runs of the state, replayed from its journal

    # -- the crawl's pages --

    def _add_seeds(self) -> None:
        """The seeds are targets too (linked from nowhere): a seed that is down is broken."""
        for seed in self.config.seeds:
            canon = self.policy.canonical(seed)
            if canon is not None and self.targets.get(canon) is None:
                self.targets.id(canon)
                self._kind.append(_HTTP)
                self._bases[canon] = None

    def _replay(self, journal: PageJournal) -> None:
        """The pages of earlier runs of this state (``--state``): as if crawled now."""
        for page in journal.replay():
            self._on_page(page)
            self._replayed.add(page.url)
        self.resumed_pages = len(self._replayed)

    def _on_page(self, page: PageResult) -> None:
        now = time.monotonic()
        kind = page.error
        if kind is not None and kind.startswith("render_"):
            kind = None  # (--render: the page answered; its rendering failed, not the link)
        if page.url in self._replayed:
            # in flight at the kill: its links are in already; its new result counts
            page.links = []
            page.rendered_links = []
            self._replayed.discard(page.url)
            if page.content_type in HTML_TYPES and kind is None:
                self.stats.pages -= 1
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
            if page.content_type in HTML_TYPES and kind is None:
                self.stats.pages += 1
            ids = page.ids
            if ids is not None and page.final_url:
                # a body cut at --max-body-bytes (or whose reading failed) has ids past the
                # cut that were never seen: none of its fragments can be called missing
                verdict.ids_complete = (
                    page.ids_complete and not page.truncated and page.error is None
                )
                self._ids[page.final_url] = id_hashes(ids)
            if recheckable(verdict.error):
                verdict.failed_at = now
        self.verdicts[page.url] = verdict
        self._derived.discard(page.url)
        self._derive_hops(verdict)
        if page.links:
            self._take_links(page.final_url or page.url, page.links)
        if page.rendered_links:  # (--render: the links only its scripts made)
            self._take_links(page.final_url or page.url, page.rendered_links)

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
        # The hot path of a check (every link of every page): the store records the page's
        # links itself (compiled: from the extractor's record, no Link and no Python step a
        # link); a link whose URL is not already a target's key comes to `_target_of`.
        store = self.store
        self.stats.links += store.take(
            store.page_id(page_url), links, self.targets, self._target_of, self._check_frags
        )

    def _target_of(self, url: str | None, raw: str) -> int:
        """The target id of a link not found by its URL (made if new), or -1: a ``data:``
        link (inline content, not a link to anything: nothing to check)."""
        if url is None:
            key = "\0i" + raw
            kind, base = _INVALID, raw
        else:
            canon = self._canonical(url)
            if canon is None:
                if url.startswith("data:"):
                    return -1
                key = "\0s" + url
                kind, base = _SCHEME, url
            else:
                kind, base = _HTTP, canon
                key = canon
                if self._check_frags and "#" in raw:
                    frag = raw.partition("#")[2]
                    if frag:
                        key = f"{canon}#{frag}"
        targets = self.targets
        tid = targets.get(key)
        if tid is None:
            tid = targets.id(key)
            self._kind.append(kind)
            if kind == _HTTP:
                if base not in self._bases:
                    self._bases[base] = None
                    self._probe_early(base)
                if key is not base:
                    self._frag_bases.add(base)
        return tid

    def _probe_early(self, url: str) -> None:
        """A linked http(s) URL seen for the first time: the Checker starts probing it if it
        is external (here: nothing)."""

    # -- verdicts --

    def _resolve(self, url: str) -> Verdict | None:
        """The verdict of ``url`` with a crawled redirect to another page's result followed."""
        verdict = self.verdicts.get(url)
        if verdict is None:
            return None
        if not (verdict.crawled and verdict.error is None and verdict.status in REDIRECTS):
            return verdict  # (most: no crawled redirect to follow; asked once a target)
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
                section = (
                    "warning"
                    if made.error in _WARNING_KINDS
                    else "blocked"
                    if made.error == BLOCKED
                    else "broken"
                )
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
            elif key[0] == "blocked":
                report.blocked.append(prob)
            else:
                report.warnings.append(prob)
                stats.unchecked += prob.error in _UNCHECKED
        stats.broken = len(report.broken)
        stats.warnings = len(report.warnings)
        stats.blocked = len(report.blocked)
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
