"""The audit's report formats: text (the terminal's), json (``AuditReport.to_dict``: the
schema in the README), markdown (a CI job's summary) and SARIF (code-scanning: each finding
at each place it has a line). Strings that came from the site are escaped as the checker's
reports escape them (``crawler.check.report_common``, ``report_markdown``)."""

from __future__ import annotations

import json
from typing import Any, TextIO

from crawler.audit.model import GROUPS, AuditReport, Finding
from crawler.check.model import Occurrence
from crawler.check.report_common import clean
from crawler.check.report_markdown import code, text
from crawler.check.report_sarif import information_uri
from crawler.output.controls import escape_controls

__all__ = ["FORMATS", "TITLES", "write"]

FORMATS = ("text", "json", "markdown", "sarif")

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
_SHOWN = 5  # places shown a finding in the text and markdown reports


def _where(place: Occurrence) -> str:
    if place.tag == "header":
        return f"{place.page} (Link header)"
    if not place.line:
        return place.page
    return f"{place.page}:{place.line}:{place.column}"


def _by_kind(report: AuditReport) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for finding in report.findings:
        out.setdefault(finding.kind, []).append(finding)
    return out


def _summary(report: AuditReport) -> str:
    s = report.stats
    head = (
        f"{s.pages} pages, {s.links} links ({s.edges} distinct), {s.sitemap_urls} URLs in "
        f"{s.sitemaps} sitemaps; {len(report.findings)} findings"
    )
    if not report.complete:
        head += f"; the crawl was cut by {report.limit}: orphans cannot be told"
    return head


def _depths(report: AuditReport) -> str:
    return ", ".join(f"{depth}: {n}" for depth, n in report.stats.depth.items())


def write_text(report: AuditReport, out: TextIO) -> None:
    esc = escape_controls
    out.write(f"audit of {esc(', '.join(report.seeds))}\n{_summary(report)}\n")
    out.write(f"click depth (pages): {_depths(report)}\n")
    for note in report.notes:
        out.write(f"note: {esc(note)}\n")
    found = _by_kind(report)
    for group, kinds in GROUPS.items():
        for kind in kinds:
            items = found.get(kind)
            if not items:
                continue
            out.write(f"\n[{group}] {TITLES[kind]} ({len(items)})\n")
            for finding in items:
                out.write(f"  {esc(finding.url)}\n    {esc(finding.detail)}\n")
                for place in finding.places[:_SHOWN]:
                    out.write(f"    at {esc(_where(place))}\n")
                if len(finding.places) > _SHOWN:
                    out.write(f"    ... and {len(finding.places) - _SHOWN} more places\n")


def write_markdown(report: AuditReport, out: TextIO) -> None:
    out.write(f"# Site audit of {text(', '.join(report.seeds))}\n\n{text(_summary(report))}\n\n")
    out.write("| click depth | pages |\n| ---: | ---: |\n")
    for depth, n in report.stats.depth.items():
        out.write(f"| {depth} | {n} |\n")
    for note in report.notes:
        out.write(f"\n> {text(note)}\n")
    found = _by_kind(report)
    for group, kinds in GROUPS.items():
        present = [k for k in kinds if k in found]
        if not present:
            continue
        out.write(f"\n## {group.capitalize()}\n")
        for kind in present:
            out.write(f"\n### {TITLES[kind]} ({len(found[kind])})\n\n| URL | what | where |\n")
            out.write("| --- | --- | --- |\n")
            for finding in found[kind]:
                places = "<br>".join(code(_where(p)) for p in finding.places[:_SHOWN])
                if len(finding.places) > _SHOWN:
                    places += f"<br>and {len(finding.places) - _SHOWN} more"
                detail = text(finding.detail).replace("|", "\\|")
                out.write(f"| {code(finding.url)} | {detail} | {places} |\n")


def to_sarif(report: AuditReport) -> dict[str, Any]:
    """SARIF 2.1.0: a rule a kind, a result a finding at each place with a line (the page
    itself, line-less, for a finding without one)."""
    kinds = [k for kinds in GROUPS.values() for k in kinds]
    rules = [
        {
            "id": kind,
            "shortDescription": {"text": TITLES[kind]},
            "defaultConfiguration": {"level": "warning"},
            "properties": {"tags": ["site-audit", group]},
        }
        for group, group_kinds in GROUPS.items()
        for kind in group_kinds
    ]
    results: list[dict[str, Any]] = []
    for finding in report.findings:
        places: list[Occurrence | None] = [p for p in finding.places if p.line] or [None]
        for place in places:
            region: dict[str, Any] = {}
            uri = finding.url if place is None else place.page
            if place is not None:
                region = {
                    "region": {
                        "startLine": place.line,
                        "startColumn": max(place.column, 1),
                        "sourceLanguage": "xml" if place.tag == "url" else "html",
                    }
                }
            results.append(
                {
                    "ruleId": finding.kind,
                    "ruleIndex": kinds.index(finding.kind),
                    "level": "warning",
                    "message": {"text": clean(f"{finding.url}: {finding.detail}")},
                    "locations": [
                        {"physicalLocation": {"artifactLocation": {"uri": clean(uri)}, **region}}
                    ],
                    "properties": {"url": clean(finding.url), "target": finding.target},
                }
            )
    driver: dict[str, Any] = {"name": "crawler audit", "rules": rules}
    info = information_uri()
    if info:
        driver["informationUri"] = info
    return {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }


def write(report: AuditReport, fmt: str, out: TextIO) -> None:
    """Write ``report`` in ``fmt`` (one of FORMATS)."""
    if fmt == "text":
        write_text(report, out)
    elif fmt == "markdown":
        write_markdown(report, out)
    elif fmt == "json":
        json.dump(report.to_dict(), out, indent=1, ensure_ascii=False)
        out.write("\n")
    elif fmt == "sarif":
        json.dump(to_sarif(report), out, indent=1, ensure_ascii=False)
        out.write("\n")
    else:
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
