"""Each report format of a REAL check of tests/checksite.py, parsed back, against the site.

One ``crawler.check.check`` of the site with known broken links; its report written as junit,
sarif, markdown and html, and each read back as its consumer reads it. What each must say
comes from the site (``CheckSite.broken()``: the URL, the kind, and every page, line, column,
tag and attribute that links it), not from the report: the writers are checked against what
the site really holds, through the real checker.
"""

from __future__ import annotations

import asyncio
import json
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import unquote

import pytest

from crawler.check import (
    CheckReport,
    check,
    report_html,
    report_junit,
    report_markdown,
    report_sarif,
)
from tests.checksite import TIMEOUT, CheckSite
from tests.test_check_reports import (
    inline_text,
    md_tables,
    parse_html,
    render,
    validate_sarif,
)

FAST: dict[str, Any] = {
    "timeout": TIMEOUT,
    "retries": 0,
    "backoff": 0.05,
    "max_redirects": 5,
    "recheck_delay": 0.2,
}


@pytest.fixture(scope="module")
def checked() -> Iterator[tuple[CheckSite, CheckReport]]:
    async def go() -> tuple[CheckSite, CheckReport]:
        site = await CheckSite().start()
        try:
            return site, await check(site.base + "/", **FAST)
        finally:
            await site.close()

    yield asyncio.run(go())


def expected_places(site: CheckSite) -> set[tuple[str, str, int, int, str, str]]:
    """(url, page, line, column, tag, attr) of every broken occurrence the site holds."""
    return {
        (url, site.base + page, line, column, tag, attr)
        for url, x in site.broken().items()
        for page, line, column, tag, attr in x.where
    }


def test_the_check_found_the_sites_broken_links(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    assert {p.url: p.error for p in report.broken} == {u: x.error for u, x in site.broken().items()}
    assert len(expected_places(site)) >= len(site.broken()) > 10


def test_sarif_of_a_real_check(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    log = json.loads(render(report_sarif, report))
    validate_sarif(log)
    places = set()
    for res in log["runs"][0]["results"]:
        if res["level"] != "error":
            continue
        phys = res["locations"][0]["physicalLocation"]
        region = phys.get("region", {})
        props = res["properties"]
        places.add(
            (
                props["url"],
                unquote(phys["artifactLocation"]["uri"]),
                region.get("startLine"),
                region.get("startColumn"),
                props.get("tag"),
                props.get("attr"),
            )
        )
        assert res["ruleId"] == site.broken()[props["url"]].error
    assert places == expected_places(site)


def test_junit_of_a_real_check(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    root = ET.fromstring(render(report_junit, report))
    failing = {c.get("name"): c for c in root.iter("testcase") if c.find("failure") is not None}
    assert set(failing) == set(site.broken())
    for url, x in site.broken().items():
        failure = failing[url].find("failure")
        assert failure is not None and failure.get("type") == x.error
        for page, line, column, tag, attr in x.where:
            assert f"{site.base}{page}:{line}:{column}: <{tag} {attr}=" in (failure.text or "")


def test_markdown_of_a_real_check(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    text = render(report_markdown, report)
    rows = [r for t in md_tables(text) for r in t]
    urls = [inline_text(r[0])[0][0] for r in rows]
    assert set(site.broken()) <= set(urls)
    for row in rows:
        url = inline_text(row[0])[0][0]
        if url not in site.broken():
            continue
        codes, rest = inline_text(row[2])
        places = re.findall(r"line (\d+), column (\d+)", rest)
        got = sorted(
            (p, int(line), int(col)) for p, (line, col) in zip(codes[0::2], places, strict=True)
        )
        want = sorted((site.base + p, line, col) for p, line, col, *_ in site.broken()[url].where)
        assert got == want, url


def test_html_of_a_real_check(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    page = parse_html(render(report_html, report))
    text = "".join(page.text)
    for url in site.broken():
        assert url in text
    # The occurrence table's rows of the broken links: (kind, the page's link, line, column);
    # cells: target, kind, status, page, line, column, tag and attribute, raw value.
    got = {
        (k, page_href, line, col)
        for k, page_href, line, col in _broken_rows(render(report_html, report))
    }
    want = {
        (x.error, site.base + p, line, col)
        for x in site.broken().values()
        for p, line, col, *_ in x.where
    }
    assert got == want


class _Rows(HTMLParser):
    """The occurrence table's rows of class "broken": each row's data-kind, and per cell its
    text and the href of a link in it."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, list[tuple[str, str]]]] = []
        self._in_row = False
        self._cell: list[str] | None = None
        self._href = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr":
            self._in_row = (a.get("class") or "").split() == ["broken"] and "data-kind" in a
            if self._in_row:
                self.rows.append((a["data-kind"] or "", []))
        elif self._in_row and tag == "td":
            self._cell, self._href = [], ""
        elif self._in_row and tag == "a" and self._cell is not None:
            self._href = a.get("href") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._in_row and self._cell is not None:
            self.rows[-1][1].append(("".join(self._cell), self._href))
            self._cell = None
        elif tag == "tr":
            self._in_row = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _broken_rows(text: str) -> list[tuple[str, str, int, int]]:
    parser = _Rows()
    parser.feed(text)
    parser.close()
    out = []
    for kind, cells in parser.rows:
        assert len(cells) == 8, cells  # target, kind, status, page, line, column, tag, raw
        out.append((kind, cells[3][1], int(cells[4][0]), int(cells[5][0])))
    return out
