"""The audit's report formats: text (the terminal's), json (``AuditReport.to_dict``: the
schema in the README), markdown (a CI job's summary), SARIF (code-scanning: each finding
at each place it has a line) and html (``report_html.py``). Strings that came from the site
are escaped as the checker's reports escape them (``crawler.check.report_common``,
``report_markdown``)."""

from __future__ import annotations

import json
from typing import Any, TextIO

from crawler.audit.model import GROUPS, TITLES, AuditReport, Finding, summary_line
from crawler.check.model import Occurrence
from crawler.check.report_common import clean
from crawler.check.report_markdown import code, text
from crawler.check.report_sarif import information_uri
from crawler.output.controls import escape_controls

__all__ = ["FORMATS", "TITLES", "summary_line", "write"]

FORMATS = ("text", "json", "markdown", "sarif", "html")

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


def _depths(report: AuditReport) -> str:
    return ", ".join(f"{depth}: {n}" for depth, n in report.stats.depth.items())


def write_text(report: AuditReport, out: TextIO) -> None:
    esc = escape_controls
    out.write(f"audit of {esc(', '.join(report.seeds))}\n{summary_line(report)}\n")
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
    out.write(
        f"# Site audit of {text(', '.join(report.seeds))}\n\n{text(summary_line(report))}\n\n"
    )
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
    elif fmt == "html":
        from crawler.audit import report_html  # noqa: PLC0415  (a cycle otherwise)

        report_html.write(report, out)
    elif fmt == "sarif":
        json.dump(to_sarif(report), out, indent=1, ensure_ascii=False)
        out.write("\n")
    else:
        raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")
