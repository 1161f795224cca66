"""``crawler audit --format html``: one self-contained page, built with the check report's
machinery (``crawler.check.report_html``: its style, its Content-Security-Policy, its bar
chart, its URL cells): the summary, the click-depth distribution as a chart, and the
findings grouped as the check report groups problems (a card a group, a block a finding with
every place that causes it, past `OPEN_KINDS` kinds collapsed)."""

from __future__ import annotations

import html
from typing import TextIO

from crawler.audit.model import GROUPS, TITLES, AuditReport, Finding, summary_line
from crawler.check.model import Occurrence
from crawler.check.report_common import visible
from crawler.check.report_html import MAX_GROUP_REFS, bar_chart, page, url_html

__all__ = ["write"]

#: Kinds shown open; the others' findings are in collapsed blocks.
OPEN_KINDS = 8


def _h(s: str) -> str:
    return html.escape(visible(s), quote=True)


def _origin(report: AuditReport) -> str:
    seed = report.seeds[0] if report.seeds else ""
    scheme, sep, rest = seed.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}" if sep else ""


def _place(place: Occurrence, origin: str) -> str:
    if place.tag == "header":
        where = "the Link header"
    elif not place.line:
        where = "the page"
    else:
        where = f"line {place.line}, column {place.column}"
    what = ""
    if place.tag and place.tag != "header":
        what = f" · &lt;{_h(place.tag)} {_h(place.attr)}=&quot;{_h(place.raw)}&quot;&gt;"
    return f'<li>{url_html(place.page, origin)}<span class="pos">{where}{what}</span></li>'


def _finding(finding: Finding, origin: str) -> str:
    parts = [
        f'<div class="problem"><h3><span class="badge warn">{_h(finding.kind)}</span>'
        f'{url_html(finding.url, origin)}</h3><p class="why">{_h(finding.detail)}</p>'
    ]
    if finding.places:
        items = "".join(_place(p, origin) for p in finding.places[:MAX_GROUP_REFS])
        more = len(finding.places) - MAX_GROUP_REFS
        if more > 0:
            items += f'<li class="empty">and {more:,} more (in the JSON report)</li>'
        parts.append(f'<ul class="refs">{items}</ul>')
    parts.append("</div>")
    return "".join(parts)


def _depth_chart(report: AuditReport) -> str:
    bars = [
        (f"depth {depth}" if depth != "unreached" else "unreached", n, cls, "")
        for depth, n in report.stats.depth.items()
        for cls in [
            "bad"
            if depth == "unreached"
            else "warn"
            if int(depth) > report.stats.max_click_depth
            else "ok"
        ]
    ]
    if not bars:
        return '<p class="empty">No page was crawled.</p>'
    return bar_chart(bars, "Pages by click depth", "page")


def write(report: AuditReport, out: TextIO) -> None:
    """Write ``report`` as one self-contained HTML page to ``out``."""
    origin = _origin(report)
    n = len(report.findings)
    verdict = (
        f'<span class="verdict bad">{n:,} finding{"s" if n != 1 else ""}</span>'
        if n
        else '<span class="verdict good">No findings</span>'
    )
    s = report.stats
    stats = "".join(
        f'<div class=""><dt>{label}</dt><dd>{value}</dd></div>'
        for label, value in (
            ("Pages", f"{s.pages:,}"),
            ("Links", f"{s.links:,}"),
            ("Sitemap URLs", f"{s.sitemap_urls:,}"),
            ("Time", f"{s.duration:.1f} s"),
        )
    )
    seeds = " ".join(url_html(u) for u in report.seeds)
    cut = (
        ""
        if report.complete
        else f'<p class="hint">The crawl was cut by {_h(report.limit or "a limit")}: sitemap'
        " URLs not linked from the pages crawled are not called orphans.</p>"
    )
    notes = "".join(f'<p class="hint">{_h(note)}</p>' for note in report.notes)
    sections = [
        f'<section class="card"><h1>Site audit {verdict}</h1><p class="seeds">{seeds}</p>'
        f'<dl class="stats">{stats}</dl>{cut}{notes}</section>',
        f'<section class="card" id="click-depth"><h2>Pages by click depth</h2>'
        f"{_depth_chart(report)}</section>",
    ]
    by_kind: dict[str, list[Finding]] = {}
    for finding in report.findings:
        by_kind.setdefault(finding.kind, []).append(finding)
    shown = 0
    for group, kinds in GROUPS.items():
        blocks = []
        for kind in kinds:
            items = by_kind.get(kind)
            if not items:
                continue
            body = "".join(_finding(f, origin) for f in items)
            title = f"{_h(TITLES[kind])} ({len(items):,})"
            opened = " open" if shown < OPEN_KINDS else ""
            shown += 1
            blocks.append(f"<details{opened}><summary>{title}</summary>{body}</details>")
        if blocks:
            sections.append(
                f'<section class="card" id="{group}"><h2>{_h(group.capitalize())}</h2>'
                + "".join(blocks)
                + "</section>"
            )
    line = summary_line(report)
    out.write(page(f"crawler audit: {line}", sections, line))
