"""The audit's report: what every writer reads. ``AuditReport.to_dict`` is the JSON report and
its documented schema (README, "crawler audit"): changing a field here changes the schema."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from crawler.check.model import Occurrence

__all__ = ["GROUPS", "KINDS", "TITLES", "AuditReport", "AuditStats", "Finding", "summary_line"]

#: Every finding kind, by group, in report order.
GROUPS: dict[str, tuple[str, ...]] = {
    "orphans": ("orphan", "not_linked"),
    "redirects": ("redirect", "redirect_chain", "redirect_loop"),
    "canonical": (
        "canonical_not_ok",
        "canonical_redirect",
        "canonical_out_of_scope",
        "canonical_chain",
        "canonical_conflict",
        "link_to_non_canonical",
    ),
    "hreflang": (
        "hreflang_no_return",
        "hreflang_target_not_ok",
        "hreflang_target_non_canonical",
        "hreflang_invalid_code",
        "hreflang_no_x_default",
    ),
    "depth": ("deep_page", "single_inlink", "nofollow_inlinks_only", "no_outlinks"),
    "indexability": ("linked_noindex", "linked_disallowed"),
}
KINDS: tuple[str, ...] = tuple(k for kinds in GROUPS.values() for k in kinds)
#: Kinds that are facts only of a complete crawl (``not_linked`` stands for ``orphan`` when
#: the crawl was cut).
GROUP_OF = {kind: group for group, kinds in GROUPS.items() for kind in kinds}

#: A title for every kind, by which the reports group findings.
TITLES = {
    "orphan": "Orphans: in a sitemap, linked from no page",
    "not_linked": "In a sitemap, not linked from the pages crawled (the crawl was cut)",
    "redirect": "Links to a redirect",
    "redirect_chain": "Links to a redirect chain (more than one hop)",
    "redirect_loop": "Links to a redirect loop",
    "canonical_not_ok": "Canonical to a page that is not 200",
    "canonical_redirect": "Canonical to a redirect",
    "canonical_out_of_scope": "Canonical out of the site",
    "canonical_chain": "Canonical to a page with another canonical",
    "canonical_conflict": "Canonical: the HTML and the Link header disagree",
    "link_to_non_canonical": "Links to a non-canonical URL",
    "hreflang_no_return": "hreflang without a return link",
    "hreflang_target_not_ok": "hreflang to a page that is not 200",
    "hreflang_target_non_canonical": "hreflang to a non-canonical page",
    "hreflang_invalid_code": "hreflang with an invalid language code",
    "hreflang_no_x_default": "hreflang set without x-default",
    "deep_page": "Pages deeper than --max-click-depth",
    "single_inlink": "Pages linked from one page only",
    "nofollow_inlinks_only": "Pages linked only with rel=nofollow",
    "no_outlinks": "Pages without outlinks",
    "linked_noindex": "Linked pages that are noindex",
    "linked_disallowed": "Linked pages that robots.txt disallows",
}


@dataclass(slots=True)
class Finding:
    """One thing to fix: its kind, the URL it is about, what to do, and every place that
    causes it (the links to it; the ``<link>`` or sitemap line that says it).

    Attributes:
        kind: one of KINDS.
        url: the page or the URL linked.
        detail: a human sentence.
        target: the URL it points at (a redirect's final URL, a canonical, an alternate).
        places: where it stands: page (or sitemap), line, column, tag, attribute, value.
    """

    kind: str
    url: str
    detail: str = ""
    target: str | None = None
    places: list[Occurrence] = field(default_factory=list)

    @property
    def group(self) -> str:
        return GROUP_OF[self.kind]


@dataclass(slots=True)
class AuditStats:
    """Counters of an audit run."""

    pages: int = 0  # HTML pages crawled with status 200
    urls: int = 0  # URLs crawled (every status)
    links: int = 0  # link occurrences
    edges: int = 0  # distinct (page, URL) links
    sitemap_urls: int = 0
    sitemaps: int = 0
    max_click_depth: int = 4
    #: click depth -> pages (BFS from the seeds over the links); "unreached": pages no link
    #: from a seed leads to (reached through a sitemap, or a redirect only)
    depth: dict[str, int] = field(default_factory=dict)
    duration: float = 0.0


@dataclass(slots=True, repr=False)
class AuditReport:
    """The result of ``crawler audit``.

    ``complete`` is False when a limit (``--max-pages``, ``--max-depth``, ``--max-time``, a
    stop) left linked pages of the site unfetched: then ``limit`` says which, and sitemap
    URLs no crawled page links to are ``not_linked``, not ``orphan``.

    Its repr is its summary line, not every finding and place: asyncio's Runner reprs the
    finished task's result when it puts the SIGINT handler back (``signal.getsignal`` on a
    ``functools.partial`` naming the task: ``reprlib`` truncates the text only after
    ``repr`` made all of it), which was the audit's peak memory (tens of MB for a site's
    report, twice).
    """

    seeds: list[str]
    complete: bool = True
    limit: str | None = None
    findings: list[Finding] = field(default_factory=list)
    stats: AuditStats = field(default_factory=AuditStats)
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:
        seeds = self.seeds[0] if len(self.seeds) == 1 else f"{len(self.seeds)} seeds"
        return f"<AuditReport of {seeds}: {summary_line(self)}>"

    def by_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        """The JSON report (``--format json``)."""
        data = asdict(self)
        counts: dict[str, int] = {}
        for finding in self.findings:
            counts[finding.kind] = counts.get(finding.kind, 0) + 1
        data["counts"] = counts
        for f, d in zip(self.findings, data["findings"], strict=True):
            d["group"] = f.group
        return data


def summary_line(report: AuditReport) -> str:
    """The report in one line (counters, findings, a cut crawl)."""
    s = report.stats
    head = (
        f"{s.pages} pages, {s.links} links ({s.edges} distinct), {s.sitemap_urls} URLs in "
        f"{s.sitemaps} sitemaps; {len(report.findings)} findings"
    )
    if not report.complete:
        head += f"; the crawl was cut by {report.limit}: orphans cannot be told"
    return head
