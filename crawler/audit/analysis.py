"""From an audit run's graph to its findings: one pass over the links (the checker's
occurrence columns, a page's links together) for inlinks, outlinks and the click graph, a
breadth-first walk from the seeds for click depth, then each finding with its places.

The graph's nodes are the HTML pages crawled with status 200, by final URL; a link's target
is the page its URL ends at (a link to a redirect is an inlink of the redirect's target).

Under ``--state`` the links are in SQLite (diskgraph.py): the same counts come from its
``GROUP BY`` aggregates and the click depth from a breadth-first walk a level at a time in
SQL; what is held is the same arrays by node id (4 bytes a target for its node, 4 a page
for its node, 16 a node for outlinks, inlinks, followed inlinks and depth), no run of links.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator
from itertools import compress, repeat
from typing import TYPE_CHECKING

from crawler.audit.diskgraph import DiskOccurrences
from crawler.audit.head import Annotation
from crawler.audit.model import AuditReport, Finding
from crawler.check.model import Occurrence

if TYPE_CHECKING:
    from crawler.audit.auditor import Auditor, PageFacts
    from crawler.check.probe import Verdict
    from crawler.urls.occurrences import Interner

__all__ = ["build_report", "hreflang_valid"]

# Verdicts of URLs the crawl did not fetch on purpose: not a sign of a cut crawl.
_NOT_FETCHED_ON_PURPOSE = frozenset({"robots_disallowed", "excluded", "blocked_address"})


def hreflang_valid(code: str) -> bool:
    """An hreflang value: ``x-default`` or a valid BCP 47 tag (langcodes: well-formed and
    registered subtags), hyphens only (``en_US`` is not BCP 47)."""
    if code.lower() == "x-default":
        return True
    # (imported by the first hreflang: its tables are ~27 ms of an audit's start-up)
    import langcodes  # noqa: PLC0415

    return "_" not in code and bool(code) and langcodes.tag_is_valid(code)


def _place(page: str, note: Annotation, tag: str) -> Occurrence:
    attr = "loc" if tag == "url" else "href"
    if note.source == "header":
        return Occurrence(page, 0, 0, "header", "Link", note.href)
    return Occurrence(page, note.line, note.column, tag, attr, note.href)


class _Nodes:
    """The graph's nodes, the crawled pages, as ids: a page that is a target's key (most
    are: a page is crawled because it is linked) has that target's id, any other (a redirect's
    end linked by no page as itself, say) an id past the targets'. Held: a byte a target and
    a dict of the other pages, not a dict of every page's URL."""

    __slots__ = ("_extra", "_is_page", "_targets", "size")

    def __init__(self, pages: Iterator[str] | dict[str, PageFacts], targets: Interner) -> None:
        self._targets = targets
        self._extra: dict[str, int] = {}
        known = len(targets)
        self._is_page = bytearray(known)
        for url in pages:
            tid = targets.get(url)
            if tid is None:
                self._extra[url] = known + len(self._extra)
            else:
                self._is_page[tid] = 1
        self._is_page.extend(b"\1" * len(self._extra))
        self.size = len(self._is_page)

    def id_of(self, url: str) -> int:
        """The node id of a crawled page's URL (-1: not one)."""
        tid = self._targets.get(url)
        if tid is None:
            return self._extra.get(url, -1)
        return tid if tid < self.size and self._is_page[tid] else -1

    @property
    def is_page(self) -> bytearray:
        """A byte a node id: 1 when it is a crawled page's (a target's id, or past them)."""
        return self._is_page

    def pages(self) -> Iterator[int]:
        """The node ids."""
        return compress(range(self.size), self._is_page)


class _Analysis:
    def __init__(self, auditor: Auditor) -> None:
        self.a = auditor
        self.report = AuditReport(seeds=list(auditor.config.seeds))
        self.report.stats.max_click_depth = auditor.max_click_depth
        self._resolved: dict[str, Verdict | None] = {}
        # findings that list the links to a target: layers of target id -> finding
        self._layers: list[dict[int, Finding]] = [{}, {}, {}, {}]

    def resolve(self, url: str, keep: bool = True) -> Verdict | None:
        """The verdict of ``url`` with its redirects followed (kept for the next ask unless
        ``keep`` is false: a URL asked once, as each linked URL is by `redirects`)."""
        found = self._resolved.get(url, self)
        if found is self:
            found = self.a._resolve(url)
            if keep:
                self._resolved[url] = found
        return found  # type: ignore[return-value]

    def node_of(self, url: str) -> str | None:
        """The crawled HTML page (final URL) a URL ends at, if any."""
        if url in self.a.facts:
            return url
        verdict = self.resolve(url)
        if verdict is None or verdict.error is not None or verdict.final_url is None:
            return None
        return verdict.final_url if verdict.final_url in self.a.facts else None

    # -- completeness --

    def completeness(self) -> None:
        a, report = self.a, self.report
        cfg = a.config
        stats = a.crawl_stats
        why: str | None = None
        if stats is not None and stats.time_limit:
            why = f"--max-time {cfg.max_time:g}"
        elif stats is not None and stats.cancelled:
            why = "the crawl was stopped"
        elif cfg.max_pages and stats is not None and stats.pages >= cfg.max_pages:
            why = f"--max-pages {cfg.max_pages}"
        else:
            for tid in range(len(a.targets)):
                url = a.targets[tid]
                verdict = a.verdicts.get(url)
                if verdict is not None and (
                    verdict.crawled or verdict.error in _NOT_FETCHED_ON_PURPOSE
                ):
                    continue  # (asked first: the scope's test is the dearer one)
                if url.startswith("\0") or not a.policy.in_scope(url):
                    continue
                why = f"--max-depth {cfg.max_depth}" if cfg.max_depth else "links not fetched"
                break
        if why is not None:
            report.complete = False
            report.limit = why

    # -- the graph --

    def walk(self) -> None:
        """Inlinks, outlinks and click depth, from the links as the crawl recorded them.

        What a page links is the set of the crawled pages its targets end at; a node is
        followed from it when one of its links there is not nofollow. Counted in one pass
        over the occurrence columns (`Occurrences.walk`, compiled: no Python step a link nor
        a set a page), and the click depth breadth first over the same runs
        (`Occurrences.depths`: a page's links read again when it is reached, no adjacency
        lists). What is kept is a few machine integers a page or a target in arrays indexed
        by node id (see `_Nodes`), no dict keyed by URL: at a million pages those dicts were
        the audit's largest part after the crawl's own."""
        a, store = self.a, self.a.store
        nodes = self.nodes = _Nodes(a.facts, a.targets)
        size = nodes.size + 1  # the last slot: no node (-1), where what is counted of it goes
        # each target's node: itself if it is a crawled page, else the page it ends at
        node_of_tid = self.node_of_tid = array("i", [-1]) * len(a.targets)
        is_page = nodes.is_page
        for tid in range(len(a.targets)):
            if tid < len(is_page) and is_page[tid]:
                node_of_tid[tid] = tid  # (a crawled page's key: its node is its own id)
                continue
            key = a.targets[tid]
            if not key.startswith("\0"):
                node_of_tid[tid] = self._node_id(key)
        node_of_page = array("i", [-1]) * len(store.pages)
        for pid in range(len(store.pages)):
            node_of_page[pid] = nodes.id_of(store.pages[pid])
        self.linked = bytearray(len(a.targets))  # 1: a target some page links
        self.outlinks = outlinks = array("I", [0]) * size
        self.inlinks = inlinks = array("I", [0]) * size
        self.followed = followed = array("I", [0]) * size
        if isinstance(store, DiskOccurrences):  # --state: the same counts, in SQL
            self.depth = self._walk_on_disk(store, node_of_page)
            self._depth_stats()
            return
        # one pass over the columns (compiled: a stamp a target and a node per run, no set)
        self.report.stats.edges += store.walk(
            node_of_tid, node_of_page, self.linked, outlinks, inlinks, followed
        )
        self.depth = store.depths(node_of_tid, node_of_page, self._seed_nodes(), nodes.size)
        self._depth_stats()

    def _walk_on_disk(self, store: DiskOccurrences, node_of_page: array[int]) -> array[int]:
        """`walk`'s counts and click depth from the links in SQLite (diskgraph.py): what is
        held is the arrays `walk` fills (by node id), no run of links."""
        store.set_nodes(self.node_of_tid, node_of_page)
        deque(map(self.linked.__setitem__, store.linked_targets(), repeat(1)), 0)
        edges = 0
        for page_id, distinct in store.outlinks_by_page():
            edges += distinct
            source = node_of_page[page_id]
            if source >= 0:
                self.outlinks[source] += distinct
        self.report.stats.edges += edges
        for node, count, followed in store.inlinks_by_node():
            self.inlinks[node] = count
            self.followed[node] = followed
        return store.click_depth(self._seed_nodes(), self.nodes.size)

    def _seed_nodes(self) -> list[int]:
        """The node ids of the seeds (the crawled pages they end at), in order."""
        found: list[int] = []
        for seed in self.a.config.seeds:
            canon = self.a.policy.canonical(seed)
            node = self.node_of(canon) if canon else None
            node_id = -1 if node is None else self.nodes.id_of(node)
            if node_id >= 0:
                found.append(node_id)
        return found

    def _depth_stats(self) -> None:
        nodes = self.nodes
        dist: dict[str, int] = {}
        for node in nodes.pages():
            key = str(self.depth[node]) if self.depth[node] >= 0 else "unreached"
            dist[key] = dist.get(key, 0) + 1
        self.report.stats.depth = dict(
            sorted(
                dist.items(),
                key=lambda kv: (kv[0] == "unreached", int(kv[0] or 0) if kv[0].isdigit() else 0),
            )
        )

    def _node_id(self, url: str) -> int:
        """`node_of` as a node id (-1: none)."""
        node = self.nodes.id_of(url)
        if node >= 0:
            return node
        found = self.node_of(url)
        return -1 if found is None else self.nodes.id_of(found)

    def depth_of(self, url: str) -> int:
        """A URL's click depth (-1: not a crawled page, or unreached)."""
        node = self.nodes.id_of(url)
        return -1 if node < 0 else self.depth[node]

    # -- findings --

    def add(
        self, finding: Finding, layer: int | None = None, tids: list[int] | None = None
    ) -> None:
        self.report.findings.append(finding)
        if layer is not None and tids:
            for tid in tids:
                self._layers[layer].setdefault(tid, finding)

    def orphans(self) -> None:
        a = self.a
        sitemaps = a.sitemaps
        if sitemaps is None:
            return
        seeds = {a.policy.canonical(s) for s in a.config.seeds}
        kind = "orphan" if self.report.complete else "not_linked"
        for url, entry in sitemaps.entries.items():
            tid = a.targets.get(url)
            if (tid is not None and self.linked[tid]) or url in seeds:
                continue
            node = self.nodes.id_of(url)
            if node >= 0 and self.inlinks[node] > 0:
                continue  # linked through a redirect to it (that link is a finding of its own)
            verdict = self.resolve(url)
            status = f"HTTP {verdict.status}" if verdict and verdict.status else "not fetched"
            detail = (
                f"in a sitemap, linked from no page ({status})"
                if self.report.complete
                else f"in a sitemap, not linked from the pages crawled ({status}; the crawl "
                f"was cut by {self.report.limit}: it may be linked from a page not crawled)"
            )
            place = Occurrence(entry.sitemap, entry.line, entry.column, "url", "loc", entry.loc)
            self.add(Finding(kind, url, detail, places=[place]))

    def redirects(self) -> None:
        a = self.a
        for tid in compress(range(len(self.linked)), self.linked):
            url = a.targets[tid]
            if url.startswith("\0"):
                continue
            verdict = self.resolve(url, keep=False)
            if verdict is None:
                continue
            hops = len(verdict.redirects)
            if verdict.error == "redirect_loop":
                self.add(Finding("redirect_loop", url, verdict.detail, verdict.final_url), 0, [tid])
            elif hops:
                kind = "redirect_chain" if hops > 1 else "redirect"
                statuses = ", ".join(str(s) for s in verdict.hop_statuses)
                ends = verdict.final_url if verdict.error is None else verdict.detail
                detail = f"redirects ({hops} hop{'s' * (hops > 1)}: {statuses}) to {ends}"
                if verdict.error is None:
                    detail += ": link it instead"
                self.add(Finding(kind, url, detail, verdict.final_url), 0, [tid])
            elif verdict.error == "robots_disallowed":
                self.add(
                    Finding("linked_disallowed", url, "linked, but robots.txt disallows it"),
                    0,
                    [tid],
                )

    def canonicals(self) -> None:
        a = self.a
        for tid in compress(range(len(self.linked)), self.linked):
            url = a.targets[tid]
            facts = a.facts.get(url)
            if facts is None or facts.canonical is None or facts.canonical == url:
                continue
            detail = f"linked, but its canonical is {facts.canonical}: link that instead"
            self.add(Finding("link_to_non_canonical", url, detail, facts.canonical), 0, [tid])
        for url, facts in a.facts.items():
            self._page_canonical(url, facts)

    def _page_canonical(self, url: str, facts: PageFacts) -> None:
        a = self.a
        html, header = facts.html_canonical, facts.header_canonical
        if html is not None and header is not None and html[0] != header[0]:
            self.add(
                Finding(
                    "canonical_conflict",
                    url,
                    f"the HTML says {html[0]}, the Link header says {header[0]}",
                    html[0],
                    [_place(url, html[1], "link"), _place(url, header[1], "link")],
                )
            )
        chosen = html or header
        if chosen is None or chosen[0] == url:
            return
        target, note = chosen
        places = [_place(url, note, "link")]
        if target is None:
            self.add(Finding("canonical_not_ok", url, "the canonical is not a URL", None, places))
            return
        if not a.policy.in_scope(target):
            detail = f"the canonical {target} is out of the crawl's scope"
            self.add(Finding("canonical_out_of_scope", url, detail, target, places))
            return
        verdict = self.resolve(target)
        if verdict is None:
            return  # never fetched (a cut crawl): nothing to say
        if verdict.redirects and verdict.error is None:
            detail = f"the canonical {target} redirects to {verdict.final_url}"
            self.add(Finding("canonical_redirect", url, detail, target, places))
        elif verdict.error is not None or verdict.status != 200:
            what = verdict.error or f"HTTP {verdict.status}"
            self.add(
                Finding(
                    "canonical_not_ok", url, f"the canonical {target} is {what}", target, places
                )
            )
        else:
            other = a.facts.get(target)
            if other is not None and other.canonical not in (None, target):
                detail = f"the canonical {target} names another canonical, {other.canonical}"
                self.add(Finding("canonical_chain", url, detail, target, places))

    def hreflang(self) -> None:
        a = self.a
        sitemaps = a.sitemaps
        if sitemaps is not None:
            for url, entry in sitemaps.entries.items():
                facts = a.facts.get(url)
                if facts is None:
                    continue
                for alt in entry.alternates:
                    resolved = a._resolve_href(entry.loc, alt.href)
                    note = Annotation(alt.href, alt.line, alt.column, alt.hreflang, "sitemap")
                    facts.alternates.append((alt.hreflang, resolved, note))
        for url, facts in a.facts.items():
            if facts.alternates:
                self._page_hreflang(url, facts)

    def _page_hreflang(self, url: str, facts: PageFacts) -> None:
        a = self.a
        codes: set[str] = set()
        seen: set[tuple[str, str | None]] = set()
        for code, target, note in facts.alternates:
            where = (
                a.sitemaps.entries[url].sitemap if note.source == "sitemap" and a.sitemaps else url
            )
            place = [_place(where, note, "xhtml:link" if note.source == "sitemap" else "link")]
            codes.add(code.lower())
            if (code.lower(), target) in seen:
                continue
            seen.add((code.lower(), target))
            if not hreflang_valid(code):
                detail = f"hreflang {code!r} is not a valid BCP 47 language tag"
                self.add(Finding("hreflang_invalid_code", url, detail, target, place))
            if target is None or target == url:
                continue
            verdict = self.resolve(target)
            if verdict is None:
                continue
            if verdict.redirects or verdict.error is not None or verdict.status != 200:
                what = (
                    f"redirects to {verdict.final_url}"
                    if verdict.redirects and verdict.error is None
                    else verdict.error or f"HTTP {verdict.status}"
                )
                detail = f"the {code} alternate {target} {what}"
                self.add(Finding("hreflang_target_not_ok", url, detail, target, place))
                continue
            other = a.facts.get(target)
            if other is None:
                continue
            if other.canonical not in (None, target):
                detail = f"the {code} alternate {target} is not canonical ({other.canonical})"
                self.add(Finding("hreflang_target_non_canonical", url, detail, target, place))
            elif not any(back == url for _, back, _ in other.alternates):
                detail = f"the {code} alternate {target} does not link back with hreflang"
                self.add(Finding("hreflang_no_return", url, detail, target, place))
        if len(codes) > 1 and "x-default" not in codes:
            first = facts.alternates[0][2]
            where = (
                a.sitemaps.entries[url].sitemap if first.source == "sitemap" and a.sitemaps else url
            )
            detail = f"{len(codes)} alternates ({', '.join(sorted(codes))}) and no x-default"
            tag = "xhtml:link" if first.source == "sitemap" else "link"
            self.add(
                Finding("hreflang_no_x_default", url, detail, None, [_place(where, first, tag)])
            )

    def pages(self) -> None:
        """Depth, inlinks, outlinks and indexability of each crawled page."""
        a, nodes = self.a, self.nodes
        seeds = {self.node_of(c) for c in (a.policy.canonical(s) for s in a.config.seeds) if c}
        # the findings that list the links to a page, by node: their targets found after
        listed: dict[int, list[tuple[int, Finding]]] = {}
        limit = a.max_click_depth
        for url, facts in a.facts.items():
            node = nodes.id_of(url)
            depth = self.depth[node]
            if depth > limit:
                detail = f"{depth} clicks from the seeds (--max-click-depth {limit})"
                self._list(listed, node, 1, Finding("deep_page", url, detail))
            inlinks, followed = self.inlinks[node], self.followed[node]
            if url not in seeds and inlinks and not followed:
                detail = f"linked from {inlinks} page(s), every link rel=nofollow"
                self._list(listed, node, 2, Finding("nofollow_inlinks_only", url, detail))
            elif url not in seeds and inlinks == 1:
                finding = Finding("single_inlink", url, "linked from one page only")
                self._list(listed, node, 2, finding)
            if self.outlinks[node] == 0:
                place = Occurrence(url, 0, 0, "", "", "")
                self.add(Finding("no_outlinks", url, "the page links nowhere", None, [place]))
            if facts.noindex is not None and inlinks:
                where = (
                    "an X-Robots-Tag header"
                    if facts.noindex.source == "header"
                    else f"<meta name=robots> on line {facts.noindex.line}"
                )
                detail = f"linked from {inlinks} page(s), but noindex ({where})"
                self._list(listed, node, 3, Finding("linked_noindex", url, detail))
        if not listed:
            return
        node_of_tid = self.node_of_tid
        for tid in compress(range(len(self.linked)), self.linked):
            for layer, finding in listed.get(node_of_tid[tid], ()):
                self._layers[layer].setdefault(tid, finding)

    def _list(
        self, listed: dict[int, list[tuple[int, Finding]]], node: int, layer: int, f: Finding
    ) -> None:
        """Add a finding whose places are the links to page ``node`` (found by `places`)."""
        self.report.findings.append(f)
        listed.setdefault(node, []).append((layer, f))

    def places(self) -> None:
        """Every finding that lists links gets them: one pass over the links per layer."""
        for layer in self._layers:
            if not layer:
                continue
            order: list[Finding] = []
            index: dict[int, int] = {}
            groups: dict[int, int] = {}
            for tid, finding in layer.items():
                key = id(finding)
                if key not in index:
                    index[key] = len(order)
                    order.append(finding)
                groups[tid] = index[key]
            found = self.a.store.select(groups)
            for i, finding in enumerate(order):
                finding.places = found.get(i, []) + finding.places


def build_report(auditor: Auditor, graph: str | None = None) -> AuditReport:
    """The audit's report of a finished run (and its link graph written to ``graph``)."""
    run = _Analysis(auditor)
    report = run.report
    stats = report.stats
    stats.pages = len(auditor.facts)
    stats.urls = sum(1 for v in auditor.verdicts.values() if v.crawled)
    stats.links = len(auditor.store)
    if auditor.sitemaps is not None:
        stats.sitemap_urls = len(auditor.sitemaps.entries)
        stats.sitemaps = len(auditor.sitemaps.files)
        report.notes.extend(auditor.sitemaps.notes)
    run.completeness()
    run.walk()
    if graph is not None:
        from crawler.audit.graph import write_graph  # noqa: PLC0415

        try:
            write_graph(run, graph)
        except OSError as exc:  # the report stands; the graph is said to be missing
            report.notes.append(f"--graph {graph}: cannot write it: {exc.strerror or exc}")
    run.orphans()
    run.redirects()
    run.canonicals()
    run.hreflang()
    run.pages()
    run.places()
    # the places of one kind sorted as the crawl found them; findings in the groups' order
    from crawler.audit.model import KINDS  # noqa: PLC0415

    rank = {kind: i for i, kind in enumerate(KINDS)}
    report.findings.sort(key=lambda f: (rank[f.kind], f.url))
    return report
