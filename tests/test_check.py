"""``crawler check`` against tests/checksite.py: every broken kind found, where it stands,
no false positives, the external server probed and never crawled."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from crawler.check import CheckReport, check
from crawler.check.cache import ResultCache
from crawler.check.checker import Checker, CheckOptions
from crawler.check.model import BROKEN_KINDS, WARNING_KINDS, Problem
from crawler.check.probe import Prober, Verdict, error_kind
from crawler.check.store import OccurrenceStore
from crawler.config import CrawlConfig
from crawler.extract._linkset import MAX_IDS
from crawler.urls.policy import UrlPolicy
from tests.checksite import LONG_LINES, TIMEOUT, CheckSite

# Fast but faithful: the crawl's own retries off (the second look is the checker's).
FAST: dict[str, Any] = {
    "timeout": TIMEOUT,
    "retries": 0,
    "backoff": 0.05,
    "max_redirects": 5,
    "recheck_delay": 0.2,
}


def run_check(**options: Any) -> tuple[CheckSite, CheckReport]:
    """Start the site, check it, stop it (its request logs stay readable)."""

    async def go() -> tuple[CheckSite, CheckReport]:
        site = await CheckSite().start()
        try:
            report = await check(site.base + "/", **{**FAST, **options})
        finally:
            await site.close()
        return site, report

    return asyncio.run(go())


@pytest.fixture(scope="module")
def checked() -> Iterator[tuple[CheckSite, CheckReport]]:
    yield run_check()


def by_url(problems: list[Problem]) -> dict[str, Problem]:
    return {p.url: p for p in problems}


def kind_of(p: Problem) -> str:
    return "http_NNN" if p.error.startswith("http_") else p.error


def test_every_broken_link_found_and_nothing_else(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    got = {p.url: p.error for p in report.broken}
    want = {u: x.error for u, x in site.broken().items()}
    assert got == want  # no broken link missed, no false positive
    assert {kind_of(p) for p in report.broken} <= set(BROKEN_KINDS)
    assert len(report.broken) == len(got)  # each target once


def test_warnings_exactly(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    got = {p.url: p.error for p in report.warnings}
    assert got == {u: x.error for u, x in site.warnings().items()}
    assert {p.error for p in report.warnings} <= set(WARNING_KINDS)


def test_good_links_naive_checkers_get_wrong_are_not_reported(
    checked: tuple[CheckSite, CheckReport],
) -> None:
    site, report = checked
    reported = {p.url for p in report.broken + report.warnings}
    for url in site.good():
        assert url not in reported
    # 429 then 200 and 503 then 200: checked once more, then good
    assert report.stats.rechecked >= 2
    assert site.hits["GET /flaky-503"] + site.hits["HEAD /flaky-503"] == 2
    # the slow page within --timeout is good; the one past it is a timeout
    assert by_url(report.broken)[site.base + "/slow-timeout"].error == "timeout"


def test_each_occurrence_names_page_line_column_tag_attr(
    checked: tuple[CheckSite, CheckReport],
) -> None:
    site, report = checked
    for url, exp in site.broken().items():
        problem = by_url(report.broken)[url]
        got = [
            (o.page.removeprefix(site.base), o.line, o.column, o.tag, o.attr)
            for o in problem.referrers
        ]
        assert sorted(got) == sorted(exp.where), url
    deep = by_url(report.broken)[site.base + "/missing"]
    assert ("/long.html", LONG_LINES) in {
        (o.page.removeprefix(site.base), o.line) for o in deep.referrers
    }


def test_raw_values_kept(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    invalid = by_url(report.broken)["http://a b/"]
    assert [o.raw for o in invalid.referrers] == ["http://a b/"]
    frag = by_url(report.broken)[site.base + "/good.html#nope"]
    assert [o.raw for o in frag.referrers] == ["/good.html#nope"]


def test_external_server_probed_never_crawled(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    paths = {p for _, p in site.ext_requests}
    assert "/never-crawled" not in paths  # linked by the external page.html: not followed
    assert paths <= site.ext_linked_paths() | {"/ok"}  # /moved redirects to /ok
    assert {m for m, _ in site.ext_requests} <= {"HEAD", "GET"}
    # a plain link: one HEAD and nothing else; HEAD answered 405: then GET
    assert [m for m, p in site.ext_requests if p == "/ok"].count("HEAD") >= 1
    assert [m for m, p in site.ext_requests if p == "/head405"] == ["HEAD", "GET"]
    # a fragment to check: GET straight away, once for both fragments
    assert [m for m, p in site.ext_requests if p == "/page.html"] == ["GET"]
    assert all(p.external for p in report.broken if p.url.startswith(site.ext_base))
    # the external server's URLs, and the dead port (another origin of 127.0.0.1)
    assert report.stats.external == len({p.partition("#")[0] for p in site.ext_linked_paths()}) + 1


def test_redirect_ending_broken_reported_as_linked_with_chain(
    checked: tuple[CheckSite, CheckReport],
) -> None:
    site, report = checked
    p = by_url(report.broken)[site.base + "/redir-404"]
    assert (p.error, p.status) == ("http_404", 404)
    assert p.redirects == [site.base + "/missing-target"]
    loop = by_url(report.broken)[site.base + "/loop-a"]
    assert loop.redirects[0] == site.base + "/loop-b"


def test_permanent_redirect_warning_names_final_url(
    checked: tuple[CheckSite, CheckReport],
) -> None:
    site, report = checked
    warnings = by_url(report.warnings)
    assert warnings[site.base + "/moved"].final_url == site.base + "/good.html"
    assert warnings[site.ext_base + "/moved"].final_url == site.ext_base + "/ok"
    assert site.base + "/temp" not in warnings  # 302: nothing to change


def test_robots_disallowed_is_a_warning_not_fetched(
    checked: tuple[CheckSite, CheckReport],
) -> None:
    site, report = checked
    assert by_url(report.warnings)[site.base + "/private/page"].error == "robots_disallowed"
    assert not [k for k in site.hits if k.endswith(" /private/page")]


def test_stats_count_the_run(checked: tuple[CheckSite, CheckReport]) -> None:
    site, report = checked
    s = report.stats
    assert s.broken == len(report.broken)
    assert s.broken_occurrences == sum(len(p.referrers) for p in report.broken)
    assert s.warnings == len(report.warnings)
    fetched = [w for x in site.expected.values() for w in x.where if w[0] != "/private/page"]
    assert s.links == len(fetched)  # robots.txt keeps /private/page (and its link) out
    assert s.pages == 5  # /, /page2.html, /good.html, /long.html, /slow-ok (HTML, fetched)
    assert s.status[404] >= 4


def test_json_schema_round_trip(checked: tuple[CheckSite, CheckReport]) -> None:
    _, report = checked
    data = json.loads(json.dumps(report.to_dict()))
    assert set(data) == {"seeds", "broken", "warnings", "stats", "blocked"}
    assert data["blocked"] == [] and data["stats"]["blocked"] == 0  # no bot wall there
    for p in data["broken"]:
        assert {"url", "error", "status", "referrers", "redirects"} <= set(p)
        for r in p["referrers"]:
            assert set(r) == {"page", "line", "column", "tag", "attr", "raw"}


def test_no_external() -> None:
    site, report = run_check(external=False)
    assert site.ext_requests == []
    assert not [p for p in report.broken + report.warnings if p.url.startswith(site.ext_base)]
    assert report.stats.external == 0
    # the dead port is another origin: external too
    assert not [p for p in report.broken if p.error == "connect"]


def test_ignore_fragments_and_links_only() -> None:
    site, report = run_check(ignore_fragments=True, link_set="links")
    kinds = {p.error for p in report.broken}
    assert "fragment_missing" not in kinds
    assert site.base + "/img/missing.png" not in by_url(report.broken)
    assert "GET /img/missing.png" not in site.hits
    # without fragments to look up, the external page is a HEAD like any other
    assert [m for m, p in site.ext_requests if p == "/page.html"] == ["HEAD"]


def test_exclude_is_a_warning_and_not_fetched() -> None:
    site, report = run_check(exclude=["/gone$", "127\\.0\\.0\\.2:\\d+/missing"])
    warnings = by_url(report.warnings)
    assert warnings[site.base + "/gone"].error == "excluded"
    assert warnings[site.ext_base + "/missing"].error == "excluded"
    assert "GET /gone" not in site.hits
    assert "/missing" not in {p for _, p in site.ext_requests}


async def test_cache_hit_skips_the_request(serve: Any, tmp_path: Path) -> None:
    hits: list[str] = []

    async def ext(request: web.Request) -> web.Response:
        hits.append(f"{request.method} {request.path}")
        return web.Response(text="ok", status=200 if request.path == "/x" else 404)

    async def page(request: web.Request) -> web.Response:
        links = f'<a href="{ext_base}/x">x</a> <a href="{ext_base}/bad">bad</a>'
        return web.Response(text=links, content_type="text/html")

    ext_app = web.Application()
    ext_app.router.add_route("*", "/{p:.*}", ext)
    ext_server = await serve(ext_app)
    ext_base = f"http://127.0.0.1:{ext_server.port}"
    app = web.Application()
    app.router.add_get("/", page)
    server = await serve(app)
    cache = tmp_path / "c.json"
    seed = f"http://127.0.0.1:{server.port}/"
    for _ in range(2):
        report = await check(seed, cache=str(cache), ignore_robots=True, retries=0)
        assert [p.url for p in report.broken] == [ext_base + "/bad"]
    # the second run's answer for /x came from the cache; the error was asked again
    assert sorted(hits) == sorted(
        ["HEAD /x", "HEAD /bad", "GET /bad"] * 1 + ["HEAD /bad", "GET /bad"]
    )
    data = json.loads(cache.read_text())
    assert list(data["results"]) == [ext_base + "/x"]  # errors never cached
    old = await check(seed, cache=str(cache), cache_max_age=0, ignore_robots=True, retries=0)
    assert len(old.broken) == 1 and hits.count("HEAD /x") == 2  # too old: asked again


async def test_head_405_falls_back_to_get(serve: Any) -> None:
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.method)
        if request.method == "HEAD":
            return web.Response(status=405)
        return web.Response(text="fine")

    app = web.Application()
    app.router.add_route("*", "/r", handler)
    server = await serve(app)
    cfg = CrawlConfig(seeds=("http://127.0.0.1:1/",), retries=0).validated()
    prober = Prober(cfg, UrlPolicy(cfg.seeds))
    try:
        verdict = await prober.probe(f"http://127.0.0.1:{server.port}/r")
    finally:
        await prober.close()
    assert (verdict.error, verdict.status) == (None, 200)
    assert seen == ["HEAD", "GET"]


async def test_retry_after_waited_out_within_max(serve: Any) -> None:
    times: list[float] = []

    async def handler(request: web.Request) -> web.Response:
        times.append(asyncio.get_running_loop().time())
        if len(times) == 1:
            return web.Response(status=429, headers={"Retry-After": "1"})
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/r", handler)
    server = await serve(app)
    cfg = CrawlConfig(seeds=("http://127.0.0.1:1/",), retries=1).validated()
    prober = Prober(cfg, UrlPolicy(cfg.seeds))
    try:
        verdict = await prober.probe(f"http://127.0.0.1:{server.port}/r")
    finally:
        await prober.close()
    assert verdict.error is None
    assert times[1] - times[0] >= 0.95


def test_occurrences_kept_compactly() -> None:
    # 200k occurrences of 2,000 targets from 2,000 pages: 25 bytes each in the columns
    # (24, and the nofollow byte the audit's graph reads)
    store = OccurrenceStore()
    for i in range(200_000):
        store.add(i % 2000, store.page_id(f"https://e.org/p{i // 100}"), i, 7, "a", "href", "x")
    assert len(store) == 200_000
    assert store.nbytes() <= 200_000 * 25 + 7 * 4096
    found = store.select({3: 0, 5: 1})
    assert len(found[0]) == 100 and len(found[1]) == 100
    assert found[0][0].line == 3 and found[0][1].line == 2003  # in the order added


def test_checker_options_default() -> None:
    # the library's default reads every resource a page uses
    opts = CheckOptions()
    assert opts.external and not opts.ignore_fragments
    checker = Checker(CrawlConfig(seeds=("http://127.0.0.1:1/",)))
    assert checker.options == opts


def test_each_distinct_url_checked_once(checked: tuple[CheckSite, CheckReport]) -> None:
    site, _ = checked
    # linked from three pages, fetched by the crawl once; a 404 is not looked at again
    assert site.hits["GET /missing"] == 1 and site.hits["HEAD /missing"] == 0
    assert site.hits["GET /good.html"] == 1  # linked 4 times, with and without fragments
    ext_missing = [m for m, p in site.ext_requests if p == "/missing"]
    assert ext_missing == ["HEAD", "GET"]  # HEAD failed: GET decides; not a third time


async def test_external_checks_keep_per_host_limit_and_never_crawl(serve: Any) -> None:
    active = 0
    most = 0

    async def ext(request: web.Request) -> web.Response:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0.05)
        active -= 1
        return web.Response(text='<a href="/deeper">x</a>', content_type="text/html")

    ext_app = web.Application()
    ext_app.router.add_route("*", "/{p:.*}", ext)
    ext_server = await serve(ext_app)
    ext_base = f"http://127.0.0.1:{ext_server.port}"
    links = "".join(f'<a href="{ext_base}/p{i}">{i}</a>\n' for i in range(12))

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=links, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = await serve(app)
    report = await check(f"http://127.0.0.1:{server.port}/", ignore_robots=True, per_host=2)
    assert report.broken == [] and report.stats.external == 12
    assert most <= 2


async def test_fragments_as_a_browser_finds_them(serve: Any) -> None:
    body = (
        '<p id="café">x</p><div id="Mixed">y</div>\n'
        '<a href="#café">1</a> <a href="#caf%C3%A9">2</a> <a href="#top">3</a>\n'
        '<a href="#Mixed">4</a> <a href="#mixed">5</a> <a href="#">6</a>\n'
        '<a href="#%FF">not UTF-8</a>\n'
        '<img src="data:image/png;base64,iVBORw0KGgo=">\n'
    )

    async def page(request: web.Request) -> web.Response:
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = await serve(app)
    base = f"http://127.0.0.1:{server.port}/"
    report = await check(base, ignore_robots=True)
    # ids match exactly (case-sensitive), percent-decoded as a browser decodes the fragment;
    # "#top" and "#" scroll to the top
    assert [(p.url, p.error) for p in report.broken] == [
        (base + "#mixed", "fragment_missing"),
        (base + "#%FF", "fragment_missing"),
    ]
    (where,) = report.broken[0].referrers
    assert (where.line, where.column, where.raw) == (3, 24, "#mixed")
    assert report.warnings == []  # a data: URI is inline content, not a link to check


def test_error_kinds_map_onto_the_issue_list() -> None:
    assert error_kind("http_503", "HTTP 503") == "http_503"
    assert error_kind("disconnected", "ServerDisconnectedError") == "connect"
    detail = "ClientConnectorCertificateError: certificate verify failed"
    assert error_kind("connect", detail) == "tls"
    assert error_kind("redirect_invalid", "Location 'x' is not a URL") == "invalid_url"
    for ours in ("too_large", "extract", "internal", "sink", None):
        assert error_kind(ours, "") is None  # not the link's fault


def test_in_scope_urls_not_crawled_are_probed(checked: tuple[CheckSite, CheckReport]) -> None:
    full_site, full = checked
    site, report = run_check(max_pages=1)  # only the seed page is crawled
    assert report.stats.pages == 1
    on_seed = {
        p.url.replace(full_site.base, site.base)
        .replace(full_site.ext_base, site.ext_base)
        .replace(f":{full_site.dead_port}/", f":{site.dead_port}/"): p.error
        for p in full.broken + full.warnings
        if any(o.page == full_site.base + "/" for o in p.referrers)
    }
    got = {p.url: p.error for p in report.broken + report.warnings}
    assert got == on_seed  # the same verdicts, fragments included
    assert site.hits["HEAD /gone"] == 1 and site.hits["GET /gone"] == 1  # HEAD failed: GET
    # fragments to look up: one GET (its two HEADs are /moved's and /temp's redirects)
    assert site.hits["GET /good.html"] == 1
    assert not [k for k in site.hits if k.endswith(" /private/page")]  # robots.txt still holds


async def test_a_broken_seed_is_reported(serve: Any) -> None:
    app = web.Application()
    server = await serve(app)  # every path 404
    seed = f"http://127.0.0.1:{server.port}/nothere.html"
    report = await check(seed, ignore_robots=True)
    assert [(p.url, p.error, p.referrers) for p in report.broken] == [(seed, "http_404", [])]


async def test_external_probes_run_while_the_crawl_goes_on(serve: Any) -> None:
    loop = asyncio.get_running_loop()
    when: dict[str, float] = {}

    async def ext(request: web.Request) -> web.Response:
        when.setdefault("external", loop.time())
        return web.Response(text="ok")

    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(1.0)
        when["slow done"] = loop.time()
        return web.Response(text="<p>slow</p>", content_type="text/html")

    ext_app = web.Application()
    ext_app.router.add_route("*", "/x", ext)
    ext_server = await serve(ext_app)

    async def page(request: web.Request) -> web.Response:
        body = f'<a href="http://127.0.0.1:{ext_server.port}/x">x</a><a href="/slow">s</a>'
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/slow", slow)
    server = await serve(app)
    report = await check(f"http://127.0.0.1:{server.port}/", ignore_robots=True)
    assert report.broken == []
    assert when["external"] < when["slow done"]  # not after the crawl


async def test_a_url_that_hangs_costs_its_retries_once(serve: Any) -> None:
    seen: list[str] = []

    async def hang(request: web.Request) -> web.Response:
        seen.append(request.method)
        await asyncio.sleep(3)
        return web.Response(text="late")

    ext_app = web.Application()
    ext_app.router.add_route("*", "/hang", hang)
    ext_server = await serve(ext_app)

    async def page(request: web.Request) -> web.Response:
        body = f'<a href="http://127.0.0.1:{ext_server.port}/hang">x</a>'
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    server = await serve(app)
    report = await check(
        f"http://127.0.0.1:{server.port}/",
        ignore_robots=True,
        timeout=0.3,
        retries=1,
        backoff=0.01,
        recheck_delay=0,
    )
    assert [p.error for p in report.broken] == ["timeout"]
    # HEAD with its retry, GET once (HEAD timed out already), the second look: one GET
    assert seen == ["HEAD", "HEAD", "GET", "GET"]
    assert report.stats.rechecked == 1


async def test_live_snapshot_while_checking(serve: Any) -> None:
    async def slow(request: web.Request) -> web.Response:
        await asyncio.sleep(0.6)
        return web.Response(text="<p>slow</p>", content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        return web.Response(text='<a href="/slow">s</a>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/slow", slow)
    server = await serve(app)
    cfg = CrawlConfig(seeds=(f"http://127.0.0.1:{server.port}/",), ignore_robots=True)
    checker = Checker(cfg)
    task = asyncio.ensure_future(checker.run())
    await asyncio.sleep(0.3)
    snap = checker.snapshot()  # the seed is done, /slow in flight
    report = await task
    assert (snap.pages, snap.in_flight, snap.queued) == (1, 1, 1)
    assert checker.snapshot().pages == 2 and report.broken == []


async def test_a_page_with_more_ids_than_kept_never_has_a_missing_fragment(serve: Any) -> None:
    many = "".join(f'<i id="i{n}"></i>' for n in range(MAX_IDS + 10)).encode()

    async def big(request: web.Request) -> web.Response:
        return web.Response(body=many, content_type="text/html")

    async def page(request: web.Request) -> web.Response:
        body = '<a href="/big#nowhere">x</a> <a href="/small#nowhere">y</a>'
        return web.Response(text=body, content_type="text/html")

    async def small(request: web.Request) -> web.Response:
        return web.Response(text='<p id="a">x</p>', content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/big", big)
    app.router.add_get("/small", small)
    server = await serve(app)
    base = f"http://127.0.0.1:{server.port}"
    report = await check(base + "/", ignore_robots=True)
    # /big's ids are incomplete: its fragment cannot be told missing; /small's can
    assert [p.url for p in report.broken] == [base + "/small#nowhere"]


def test_a_cache_file_that_cannot_be_read_counts_as_empty(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    for junk in (b"not json", b'{"version": 99, "results": {}}', b"\xff\xfe", b"[1, 2]"):
        path.write_bytes(junk)
        cache = ResultCache(path)
        assert len(cache) == 0
    cache.put(Verdict("https://e.org/", status=200))
    cache.save()
    assert ResultCache(path).get("https://e.org/") is not None


async def test_a_fragment_past_the_body_cap_is_not_called_missing(serve: Any) -> None:
    long_page = ("<p>" + "x" * 5000 + "</p>") * 20 + '<p id="late">end</p>'

    async def page(request: web.Request) -> web.Response:
        body = (
            '<a href="/long#late">x</a> <a href="/long#never">y</a>'
            if request.path == "/"
            else long_page
        )
        return web.Response(text=body, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/long", page)
    server = await serve(app)
    report = await check(
        f"http://127.0.0.1:{server.port}/", ignore_robots=True, max_body_bytes=20_000
    )
    assert report.broken == []  # /long was cut at 20 kB: its fragments cannot be told


async def test_probes_go_through_the_crawls_proxy(serve: Any) -> None:
    """External links are probed through ``--proxy`` as the crawl's own requests are (the
    prober once sent them straight to the host, around the proxy), and still get their
    answers: the broken one is reported, the good one is not."""
    from tests.proxyserver import ForwardProxy  # noqa: PLC0415

    async def ok(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    external = web.Application()
    external.router.add_get("/ok", ok)
    ext = TestServer(external, host="127.0.0.2", port=0)  # another host
    await ext.start_server()
    other = f"http://127.0.0.2:{ext.port}"
    site = web.Application()
    page = f'<a href="{other}/ok">ok</a> <a href="{other}/gone">gone</a>'

    async def home(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    site.router.add_get("/", home)
    server = await serve(site)
    proxy = ForwardProxy()
    via = await serve(proxy.app())
    seed = f"http://127.0.0.1:{server.port}/"
    try:
        report = await check(
            seed, ignore_robots=True, retries=0, proxy=f"http://127.0.0.1:{via.port}"
        )
    finally:
        await ext.close()
    assert {p.url for p in report.broken} == {f"{other}/gone"}, [
        (p.url, p.error, p.detail) for p in report.broken + report.warnings
    ]
    probed = {u for u in proxy.log if u.startswith(other)}
    assert probed == {f"{other}/ok", f"{other}/gone"}, proxy.log
