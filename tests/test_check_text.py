"""The text report: grouped by target, every place, and safe to print to a terminal."""

from __future__ import annotations

import io

from crawler.check.model import CheckReport, CheckStats, Occurrence, Problem
from crawler.check.text import MAX_WARNING_REFERRERS, write_text


def test_text_report_lists_every_place_and_escapes_controls() -> None:
    hostile = "http://a b/\x1b[2J\x1b]0;owned\x07"
    places = [Occurrence(f"https://e.org/p{i}", i + 1, 3, "a", "href", "/x") for i in range(9)]
    report = CheckReport(
        seeds=["https://e.org/"],
        broken=[
            Problem("https://e.org/x", "http_404", status=404, referrers=places),
            Problem(
                hostile,
                "invalid_url",
                referrers=[Occurrence("https://e.org/", 7, 1, "a", "href", hostile)],
            ),
        ],
        warnings=[Problem("mailto:a@b", "scheme_unchecked", referrers=places)],
        stats=CheckStats(broken=2, broken_occurrences=10, warnings=1),
    )
    out = io.StringIO()
    write_text(report, out)
    text = out.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "http://a b/\\x1b[2J\\x1b]0;owned\\x07" in text
    broken = text.split("WARNINGS")[0]
    for i in range(9):  # a broken link: every place
        assert f"https://e.org/p{i}:{i + 1}:3  <a href='/x'>" in broken
    warnings = text.split("WARNINGS")[1]  # a warning: the first few, then a count
    assert warnings.count("<a href='/x'>") == MAX_WARNING_REFERRERS
    assert f"... and {9 - MAX_WARNING_REFERRERS} more" in warnings
