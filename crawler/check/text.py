"""``--format text`` (the default) and ``--format json`` of ``crawler check``.

Text is for a person reading a terminal or a CI log: a summary, then each broken link
grouped by target URL with every page and line that links it, then the links blocked by a bot
wall (with the hint that a browser may get them), then the warnings. JSON is
``CheckReport.to_dict()`` (the schema in the README), one object, indented.
"""

from __future__ import annotations

import json
from typing import TextIO

from crawler.check.model import CheckReport, Problem
from crawler.check.walls import HINT
from crawler.output.controls import escape_controls

__all__ = ["MAX_WARNING_REFERRERS", "write_json", "write_text"]

#: Occurrences listed under one warning in the text report (broken links list every one).
MAX_WARNING_REFERRERS = 5


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


# C0 controls, DEL and the C1 controls, shown escaped: a hostile page's raw value must not
# move the cursor or recolour the terminal (ESC sequences) of whoever reads the report.
_clean = escape_controls


def _short(text: str, limit: int = 120) -> str:
    text = _clean(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _problem(p: Problem, out: TextIO, limit: int | None) -> None:
    status = f" (HTTP {p.status})" if p.status is not None and p.error != f"http_{p.status}" else ""
    where = " [external]" if p.external else ""
    out.write(f"{p.error}{status}  {_clean(p.url)}{where}\n")
    if p.redirects:
        out.write(f"  redirects: {_clean(' -> '.join([p.url, *p.redirects]))}\n")
    if p.error == "redirect_permanent" and p.final_url:
        out.write(f"  link instead: {_clean(p.final_url)}\n")
    if p.detail:
        out.write(f"  {_short(p.detail, 200)}\n")
    if not p.referrers:
        out.write("    (a seed URL: linked from no page)\n")
    shown = p.referrers if limit is None else p.referrers[:limit]
    for o in shown:
        pos = f"{o.line}:{o.column}" if o.line else "?"
        out.write(f"    {_clean(o.page)}:{pos}  <{o.tag} {o.attr}={_short(o.raw, 80)!r}>\n")
    if len(shown) < len(p.referrers):
        out.write(f"    ... and {len(p.referrers) - len(shown):,} more\n")


def write_text(report: CheckReport, out: TextIO) -> None:
    """The human report: summary, broken links by target with their places, warnings."""
    s = report.stats
    out.write(
        f"checked {_plural(s.urls, 'URL')} ({s.external:,} external) linked "
        f"{_plural(s.links, 'time')} from {_plural(s.pages, 'page')} in {s.duration:.1f} s\n"
    )
    verdict = "no broken links" if not report.broken else _plural(s.broken, "broken link")
    occ = f" ({_plural(s.broken_occurrences, 'occurrence')})" if report.broken else ""
    again = f"; {s.rechecked:,} checked twice" if s.rechecked else ""
    blocked = f", {len(report.blocked):,} blocked by bot walls" if report.blocked else ""
    out.write(f"{verdict}{occ}{blocked}, {_plural(s.warnings, 'warning')}{again}\n")
    if s.time_limit or s.unchecked:
        why = "stopped at --max-time: " if s.time_limit else ""
        out.write(f"{why}{_plural(s.unchecked, 'URL')} not checked (listed under WARNINGS)\n")
    if report.broken:
        out.write("\nBROKEN\n")
        for p in report.broken:
            out.write("\n")
            _problem(p, out, None)
    if report.blocked:
        out.write(f"\nBLOCKED ({HINT})\n")
        for p in report.blocked:
            out.write("\n")
            _problem(p, out, MAX_WARNING_REFERRERS)
    if report.warnings:
        out.write("\nWARNINGS\n")
        for p in report.warnings:
            out.write("\n")
            _problem(p, out, MAX_WARNING_REFERRERS)


def write_json(report: CheckReport, out: TextIO) -> None:
    """``CheckReport.to_dict()`` as one indented JSON document."""
    json.dump(report.to_dict(), out, indent=2, ensure_ascii=False)
    out.write("\n")
