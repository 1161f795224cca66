"""Links behind bot walls: ``blocked``, reported apart from broken in every format.

A local aiohttp server imitates the common walls (a Cloudflare-style managed challenge: 403
with ``cf-mitigated: challenge``; an "under attack" 503 challenge page; a 429 that never
lifts; a 403 only for clients that do not look like a browser) beside a real 404 (whose page
carries Cloudflare's JavaScript-detection script, as every page of such a site does), a real
403 for everyone and a real 200. The same paths are linked on the crawled host (127.0.0.1:
the crawl's own verdict, then the prober's second look) and on another host (127.0.0.2: the
prober's HEAD/GET), and each gets its verdict; then every report format is read back.
"""

from __future__ import annotations

import asyncio
import io
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler.check import (
    CheckReport,
    check,
    report_html,
    report_junit,
    report_markdown,
    report_sarif,
    text,
)
from crawler.check.walls import BODY_BYTES, BROWSER_HEADERS, HINT, wall
from crawler.cli.check import FAIL_ON, exit_code
from tests.test_check_reports import JUNIT_XSD, validate_sarif

CF_CHALLENGE = (
    '<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>'
    '<meta http-equiv="refresh" content="390"></head><body><div class="main-wrapper">'
    "<noscript>Enable JavaScript and cookies to continue</noscript></div><script>"
    "(function(){window._cf_chl_opt={cvId: '3',cZone: \"example.org\",cType: 'managed'};"
    "var a=document.createElement('script');"
    "a.src='/cdn-cgi/challenge-platform/h/b/orchestrate/chl_page/v1?ray=8f1a';"
    "document.getElementsByTagName('head')[0].appendChild(a);}());</script></body></html>"
)
# the older "I'm Under Attack" interstitial: a 503, no cf-mitigated header
CF_UNDER_ATTACK = (
    "<!DOCTYPE HTML><html><head><title>Just a moment...</title></head><body>"
    '<form id="challenge-form" action="/?__cf_chl_jschl_tk__=abc" method="POST">'
    '<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/jsch/v1?ray=8f1b"></script>'
    "</form><p>Checking your browser before accessing example.org.</p></body></html>"
)
# a real 404 of a site with Cloudflare's JavaScript detections: not a wall
CF_JSD_404 = (
    "<html><head><title>Not found</title></head><body><h1>Page not found</h1>"
    "<script>(function(){var s=document.createElement('script');"
    "s.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js';"
    "document.head.appendChild(s);})();</script></body></html>"
)
PATHS = ("/ok", "/cf", "/cf503", "/limited", "/ua", "/forbidden", "/missing")
BLOCKED = {"/cf", "/cf503", "/limited", "/ua"}
BROKEN = {"/forbidden": "http_403", "/missing": "http_404"}


class Walls:
    """The walls on two hosts: 127.0.0.1 (the crawled site) and 127.0.0.2 (external)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, str, str, str]] = []  # (host, method, path, User-Agent)
        self.servers: list[TestServer] = []
        self.bases: list[str] = []  # kept after the servers stop

    async def handle(self, request: web.Request) -> web.Response:
        ua = request.headers.get("User-Agent", "")
        self.log.append((request.host.split(":")[0], request.method, request.path, ua))
        path = request.path
        if path == "/":
            other = self.base(1)
            links = "".join(f'<a href="{p}">{p}</a> <a href="{other}{p}">{p}</a>\n' for p in PATHS)
            return web.Response(text=links, content_type="text/html")
        if path == "/ok":
            return web.Response(text="<p>fine</p>", content_type="text/html")
        if path == "/cf":
            return web.Response(
                status=403,
                text=CF_CHALLENGE,
                content_type="text/html",
                headers={"cf-mitigated": "challenge", "Server": "cloudflare"},
            )
        if path == "/cf503":
            return web.Response(status=503, text=CF_UNDER_ATTACK, content_type="text/html")
        if path == "/limited":
            return web.Response(status=429, headers={"Retry-After": "1"}, text="slow down")
        if path == "/ua":
            if ua == BROWSER_HEADERS["User-Agent"]:
                return web.Response(text="<p>hello, browser</p>", content_type="text/html")
            return web.Response(status=403, text="Forbidden")
        if path == "/forbidden":
            return web.Response(status=403, text="Forbidden: members only")
        return web.Response(status=404, text=CF_JSD_404, content_type="text/html")

    def base(self, i: int) -> str:
        return self.bases[i]

    async def __aenter__(self) -> Walls:
        for host in ("127.0.0.1", "127.0.0.2"):
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self.handle)
            server = TestServer(app, host=host, port=0)
            await server.start_server()
            self.servers.append(server)
            self.bases.append(f"http://{host}:{server.port}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in self.servers:
            await server.close()


FAST: dict[str, Any] = {"ignore_robots": True, "retries": 0, "timeout": 5, "recheck_delay": 0}


async def checked(**options: Any) -> tuple[Walls, CheckReport]:
    async with Walls() as walls:
        report = await check(walls.base(0) + "/", **{**FAST, **options})
    return walls, report


def verdicts(walls: Walls, report: CheckReport) -> dict[str, str]:
    """URL -> kind of everything reported."""
    return {p.url: p.error for p in [*report.broken, *report.blocked, *report.warnings]}


def expected(walls: Walls) -> dict[str, str]:
    want = {}
    for base in (walls.base(0), walls.base(1)):
        want.update({base + p: "blocked" for p in BLOCKED})
        want.update({base + p: kind for p, kind in BROKEN.items()})
    return want


# -- the markers alone ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "body", "found"),
    [
        (403, {"cf-mitigated": "challenge"}, b"", "Cloudflare challenge"),
        (403, {"cf-mitigated": "Challenge "}, b"", "Cloudflare challenge"),
        (503, {}, CF_UNDER_ATTACK.encode(), "Cloudflare challenge page"),
        (403, {}, CF_CHALLENGE.encode(), "Cloudflare challenge page"),
        (405, {"x-amzn-waf-action": "captcha"}, b"", "AWS WAF challenge"),
        (403, {}, b"<p>Reference #18.1 https://errors.edgesuite.net/18.1</p>", "Akamai"),
        (403, {}, b'<div id="px-captcha"></div>', "PerimeterX"),
        (403, {}, b"<script src='https://ct.captcha-delivery.com/c.js'>", "DataDome"),
        (429, {}, b"<script>AwsWafIntegration.getToken()</script>", "AWS WAF"),
        (403, {}, b"<title>Sucuri WebSite Firewall - Access Denied</title>", "Sucuri"),
        # not walls
        (404, {}, CF_JSD_404.encode(), None),  # JavaScript detections on a real 404
        (403, {}, CF_JSD_404.encode(), None),
        (403, {"cf-mitigated": "block"}, b"", None),
        (404, {}, CF_CHALLENGE.encode(), None),  # a page about challenges, not one
        (200, {"cf-mitigated": "challenge"}, CF_CHALLENGE.encode(), None),
        (403, {}, b"x" * BODY_BYTES + CF_CHALLENGE.encode(), None),  # past what is read
        (403, {}, b"Access denied", None),
    ],
)
def test_wall_markers(status: int, headers: dict[str, str], body: bytes, found: str | None) -> None:
    got = wall(status, headers, body)
    if found is None:
        assert got is None
    else:
        assert got is not None and got.startswith(found), got


# -- the verdicts --------------------------------------------------------------------------


async def test_each_wall_is_blocked_and_real_errors_stay_broken() -> None:
    walls, report = await checked()
    assert verdicts(walls, report) == expected(walls), [
        (p.url, p.error, p.detail) for p in [*report.broken, *report.blocked]
    ]
    assert report.stats.blocked == len(report.blocked) == 2 * len(BLOCKED)
    assert report.stats.broken == len(report.broken) == 2 * len(BROKEN)
    details = {p.url: p.detail for p in report.blocked}
    for base in (walls.base(0), walls.base(1)):
        assert "cf-mitigated: challenge" in details[base + "/cf"]
        assert "Cloudflare challenge page" in details[base + "/cf503"]
        assert "rate limited" in details[base + "/limited"]
        assert "browser's headers got HTTP 200" in details[base + "/ua"]
    # the browser's GET: once for each 403 with no wall's marker, on its second look; never
    # for anything else
    browser = [(h, p) for h, m, p, ua in walls.log if ua == BROWSER_HEADERS["User-Agent"]]
    assert sorted(browser) == sorted(
        (h, p) for h in ("127.0.0.1", "127.0.0.2") for p in ("/ua", "/forbidden")
    )


async def test_without_the_browser_retry_a_403_for_the_checker_is_broken() -> None:
    walls, report = await checked(browser_retry=False)
    want = expected(walls)
    for base in (walls.base(0), walls.base(1)):
        want[base + "/ua"] = "http_403"
    assert verdicts(walls, report) == want
    assert not any(ua == BROWSER_HEADERS["User-Agent"] for *_, ua in walls.log)


# -- the reports ---------------------------------------------------------------------------


def render(module: Any, report: CheckReport) -> str:
    out = io.StringIO()
    module.write(report, out)
    return out.getvalue()


@pytest.fixture(scope="module")
def walled() -> tuple[Walls, CheckReport]:
    return asyncio.run(checked())


def test_text_and_json_report_blocked_apart(walled: tuple[Walls, CheckReport]) -> None:
    walls, report = walled
    out = io.StringIO()
    text.write_text(report, out)
    body = out.getvalue()
    head, _, rest = body.partition("\nBROKEN\n")
    assert f"{len(report.blocked)} blocked by bot walls" in head
    broken, _, blocked = rest.partition(f"\nBLOCKED ({HINT})\n")
    blocked = blocked.partition("\nWARNINGS\n")[0]
    for url, kind in expected(walls).items():
        assert _listed(blocked, url) == (kind == "blocked"), url
        assert _listed(broken, url) == (kind != "blocked"), url
    data = json.loads(_json(report))
    assert {p["url"] for p in data["blocked"]} == {
        u for u, k in expected(walls).items() if k == "blocked"
    }
    assert {p["url"] for p in data["broken"]} == {
        u for u, k in expected(walls).items() if k != "blocked"
    }
    assert data["stats"]["blocked"] == len(data["blocked"])


def _listed(section: str, url: str) -> bool:
    return f"  {url}\n" in section or f"  {url} [external]\n" in section


def _json(report: CheckReport) -> str:
    out = io.StringIO()
    text.write_json(report, out)
    return out.getvalue()


def test_junit_blocked_are_skipped_and_valid(walled: tuple[Walls, CheckReport]) -> None:
    lxml = pytest.importorskip("lxml.etree")
    walls, report = walled
    xml = render(report_junit, report)
    schema = lxml.XMLSchema(lxml.parse(str(JUNIT_XSD)))
    doc = lxml.fromstring(xml.encode())
    assert schema.validate(doc), schema.error_log
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    for url, kind in expected(walls).items():
        case = cases[url]
        if kind == "blocked":
            assert case.get("classname", "").startswith("blocked.http_")
            skipped = case.find("skipped")
            assert skipped is not None and HINT in skipped.get("message", "").lower()
            assert case.find("failure") is None
        else:
            assert case.find("failure") is not None and case.find("skipped") is None
    assert int(suite.get("skipped", "0")) == len(report.blocked)
    assert int(suite.get("failures", "0")) == len(report.broken)


def test_sarif_blocked_is_a_note_of_its_own_rule(walled: tuple[Walls, CheckReport]) -> None:
    walls, report = walled
    log = json.loads(render(report_sarif, report))
    validate_sarif(log)
    run = log["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert rules["blocked"]["defaultConfiguration"]["level"] == "note"
    assert rules["blocked"]["name"] != "blocked"
    levels: dict[str, set[str]] = {}
    for result in run["results"]:
        levels.setdefault(result["properties"]["url"], set()).add(result["level"])
        if result["ruleId"] == "blocked":
            assert "may work in a browser" in result["message"]["text"]
    for url, kind in expected(walls).items():
        assert levels[url] == ({"note"} if kind == "blocked" else {"error"}), url
    assert run["properties"]["stats"]["blocked"] == len(report.blocked)


def test_markdown_blocked_in_their_own_table(walled: tuple[Walls, CheckReport]) -> None:
    walls, report = walled
    md = render(report_markdown, report)
    before, _, blocked = md.partition("blocked by bot walls (not broken)</summary>")
    assert blocked, md
    summary_line = md.splitlines()[2]  # the heading, a blank line, the summary
    assert f"4 broken links (4 occurrences), {len(report.blocked)} blocked by bot walls, " in (
        summary_line.replace("\\", "")
    ), summary_line
    blocked = blocked.partition("</details>")[0]
    assert "may work in a browser" in blocked
    for url, kind in expected(walls).items():
        assert (f"`{url}`" in blocked) == (kind == "blocked"), url
        assert (f"`{url}`" in before) == (kind != "blocked"), url


def test_html_blocked_in_their_own_section(walled: tuple[Walls, CheckReport]) -> None:
    walls, report = walled
    page = render(report_html, report).replace("<wbr>", "")
    section = page.partition('<section class="card" id="blocked">')[2].partition("</section>")[0]
    broken = page.partition('<section class="card" id="broken">')[2].partition("</section>")[0]
    assert "may work in a browser" in section
    for url, kind in expected(walls).items():
        assert (f">{url}</code>" in section) == (kind == "blocked"), url
        assert (f">{url}</code>" in broken) == (kind != "blocked"), url
    table = page.partition('<table id="occ"')[2]
    assert table.count('<tr class="blocked"') == sum(len(p.referrers) for p in report.blocked)


# -- --fail-on -----------------------------------------------------------------------------


def test_fail_on_levels(walled: tuple[Walls, CheckReport]) -> None:
    _, report = walled
    only_blocked = CheckReport(seeds=report.seeds, blocked=report.blocked)
    assert FAIL_ON == ("broken", "blocked", "warnings")
    assert [exit_code(only_blocked, f) for f in FAIL_ON] == [0, 1, 1]
    assert [exit_code(report, f) for f in FAIL_ON] == [1, 1, 1]
    assert [exit_code(CheckReport(seeds=[]), f) for f in FAIL_ON] == [0, 0, 0]


async def test_command_line_blocked_exit_code_and_summary(tmp_path: Path) -> None:
    """Only walls: exit 0 by default (and the stderr line counts them), 1 with --fail-on
    blocked."""
    async with Walls() as walls:
        seed = walls.base(1) + "/cf"
        codes = []
        for extra in ([], ["--fail-on", "blocked"]):
            proc = await asyncio.create_subprocess_exec(
                *[sys.executable, "-m", "crawler", "check", seed, "--ignore-robots"],
                *["--retries", "0", "--recheck-delay", "0", *extra],
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(proc.communicate(), 60)
            codes.append(proc.returncode)
        assert "blocked\n" not in out.decode()
        assert "crawler check: 0 broken, 1 blocked by bot walls," in err.decode(), err
    assert codes == [0, 1]
