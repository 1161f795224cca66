"""``--render never|auto|always`` end to end: real headless Chromium on the local client-rendered
site (tests/render_site.py), through the library and the command line.

The site's server logs every request of both its hosts, so these tests check what the
browser itself fetched: robots.txt, the scope of hosts, politeness and credentials.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from crawler import crawl
from crawler.core.results import CrawlResult
from tests.render_site import (
    ENHANCED_LEAVES,
    FORBIDDEN_LINKS,
    NEVER_REQUESTED,
    OTHER_FORBIDDEN,
    PAGES,
    RenderSite,
    start,
)

ROOT = Path(__file__).resolve().parent.parent
# (the render extra's, not the test extra's: looked for, not imported)
_PLAYWRIGHT = importlib.util.find_spec("playwright") is not None

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (os.environ.get("CRAWLER_CHROMIUM") or shutil.which("chromium")),
        reason="needs chromium (apt-get install chromium)",
    ),
    pytest.mark.skipif(not _PLAYWRIGHT, reason="needs playwright (pip install '.[render]')"),
]

# Pages whose rendered links depend on timing beyond the budget (documented behaviour).
_TIMING = {"/app/slow", "/hostile/forever"}
_RENDERED_ONLY = {
    link for path, spec in PAGES.items() if path not in _TIMING for link in spec.rendered_only
}
_STATIC = {path for path, spec in PAGES.items() if not spec.needs_render}


@pytest.fixture
async def site() -> AsyncIterator[tuple[str, str, RenderSite]]:
    render_site = RenderSite(pages=6, memory_mb=512)
    url, other, runners = await start(render_site)
    yield url, other, render_site
    for runner in runners:
        await runner.cleanup()


async def run(url: str, **options: Any) -> CrawlResult:
    options.setdefault("render_timeout", 3.0)
    return await crawl(url + "/", max_pages=300, **options)


def fetched(result: CrawlResult, url: str) -> set[str]:
    """The paths fetched, but the never-settling page's links (how many: a matter of time)."""
    paths = {page.url[len(url) :] for page in result.pages}
    return {p for p in paths if not p.startswith("/hostile/forever/")}


async def test_never_auto_always(site: tuple[str, str, RenderSite]) -> None:
    url, _other, render_site = site
    never = await run(url, render="never")
    assert not _RENDERED_ONLY & fetched(never, url)
    assert all(page.rendered is None for page in never.pages)
    assert not render_site.log.browser_hits()

    render_site.log.clear()
    auto = await run(url, render="auto")
    got = fetched(auto, url)
    assert _RENDERED_ONLY <= got, _RENDERED_ONLY - got
    assert not set(FORBIDDEN_LINKS) & got
    by_path = {page.url[len(url) :]: page for page in auto.pages}
    for path, spec in PAGES.items():
        page = by_path[path]
        assert page.rendered is spec.needs_render, path
        assert (page.render_reason is not None) is spec.needs_render, path
    # the static page with an analytics tag: not rendered, its script never loaded
    assert by_path["/docs/analytics"].render_reason is None
    assert "/js/analytics.js" not in render_site.log.paths()
    assert auto.stats.pages_rendered == sum(spec.needs_render for spec in PAGES.values())
    # every URL once, as today; links only rendered pages had are marked so
    assert len(auto.links) == len(set(auto.links))
    fetch_page = by_path["/app/fetch"]
    assert {link.url for link in fetch_page.rendered_links} == {
        url + "/app/fetched/1",
        url + "/app/fetched/2",
    }
    record = fetch_page.to_dict()
    assert record["rendered"] is True and record["render_reason"] == "mount_point"
    assert set(record["rendered_links"]) <= set(record["links"])  # type: ignore[arg-type]
    # the router's pushState: its relative link resolved against the URL the scripts left
    assert url + "/app/router/inner/deep" in auto.links

    render_site.log.clear()
    always = await run(url, render="always")
    assert fetched(always, url) == got  # the same pages: auto missed nothing always finds
    assert all(page.rendered for page in always.pages if page.content_type == "text/html")
    assert {p.render_reason for p in always.pages if p.content_type == "text/html"} == {"always"}
    assert always.stats.pages_rendered > auto.stats.pages_rendered


async def test_what_the_browser_fetched(site: tuple[str, str, RenderSite]) -> None:
    url, _other, render_site = site
    seeds = (
        "/app/robots",
        "/app/scope",
        "/app/polite",
        "/app/auth",
        "/app/fetch",
        "/docs/analytics",
    )
    result = await crawl(
        [url + path for path in seeds],
        render="always",
        render_timeout=3.0,
        max_depth=1,  # the seeds and what they link to (0 would be no limit)
        per_host=1,
        headers=("X-Api-Key: s3cret-value",),
    )
    assert result.stats.render_requests > 0
    log = render_site.log
    browser = log.browser_hits()
    assert browser, "the browser made no request to the site"
    paths = log.paths()
    # robots.txt of the crawl, and the blocked kinds, hold for the browser's requests
    assert not [p for p in paths if p in NEVER_REQUESTED]
    # politeness: one request in flight at a time to the site, the browser's included
    assert log.max_in_flight["site"] == 1
    # the crawl's credentials went with the browser's requests to the site ...
    assert [h.path for h in browser if h.headers.get("x-api-key") != "s3cret-value"] == []
    # ... and its User-Agent
    assert [
        h.path for h in browser if not h.headers.get("user-agent", "").startswith("crawler/")
    ] == []
    # another host: a CDN script at most, nothing of ours, never its API nor a navigation
    for hit in log.hits:
        if hit.host == "other":
            assert hit.path not in OTHER_FORBIDDEN
            assert "x-api-key" not in hit.headers and "authorization" not in hit.headers


async def test_hostile_pages_keep_their_links_and_the_crawl_goes_on(
    site: tuple[str, str, RenderSite],
) -> None:
    url, _other, render_site = site
    result = await crawl(
        [url + path for path in PAGES if path.startswith("/hostile/")],
        render="auto",  # (the targets they link to are static: not rendered)
        render_timeout=2.0,
        max_depth=1,
        headers=("X-Api-Key: s3cret-value",),
    )
    by_path = {page.url[len(url) :]: page for page in result.pages}
    forever = by_path["/hostile/forever"]
    assert forever.error == "render_timeout"
    assert {link.url for link in forever.rendered_links} >= {url + "/hostile/forever/0"}
    for path in ("/hostile/dialogs", "/hostile/popup", "/hostile/away", "/hostile/memory"):
        page = by_path[path]
        want = {url + link for link in PAGES[path].rendered_only}
        assert want <= {link.url for link in page.rendered_links}, (path, page.error)
    assert "/landing" not in render_site.log.paths("other")
    assert "/hostile/popped" not in render_site.log.paths()
    browser = render_site.log.browser_hits()
    foreign = [
        h.path
        for h in browser
        if h.path.startswith("/api/tick.json?") and render_site.token not in h.path
    ]
    assert foreign == []  # no tab of another crawl's browser is still running


async def test_every_browser_request_carries_the_crawls_headers(
    site: tuple[str, str, RenderSite],
) -> None:
    url, _other, render_site = site
    await crawl(
        [url + path for path in PAGES if path.startswith("/hostile/")],
        render="auto",
        render_timeout=2.0,
        max_depth=1,
        headers=("X-Api-Key: s3cret-value",),
    )
    # every request of the browser went through the crawl's gate, a never-settling page's
    # late ticks too (the gate adds the crawl's headers: one without them went around it)
    browser = render_site.log.browser_hits()
    assert browser
    assert [h.path for h in browser if h.headers.get("x-api-key") != "s3cret-value"] == []


async def cli(*argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_cli_jsonl_and_summary(site: tuple[str, str, RenderSite]) -> None:
    url, _other, _site = site
    code, out, err = await cli(
        "crawl", url + "/", "--render", "auto", "--render-timeout", "3", "-f", "jsonl"
    )
    lines = {rec["url"][len(url) :]: rec for rec in map(json.loads, out.splitlines())}
    fetch_page = lines["/app/fetch"]
    assert fetch_page["rendered"] is True and fetch_page["render_reason"] == "mount_point"
    assert url + "/app/fetched/1" in fetch_page["rendered_links"]
    assert url + "/app/fetched/1" in fetch_page["links"]
    home = lines["/"]
    assert home["rendered"] is False and home["render_reason"] is None
    assert home["rendered_links"] == []
    assert "crawler: render (auto): " in err and "mount_point" in err
    assert code in (0, 1), err  # (1: a page's render error counts as a failed page)


async def test_check_counts_ids_made_by_javascript(site: tuple[str, str, RenderSite]) -> None:
    url, _other, _site = site
    seed = url + "/"
    _, plain, _ = await cli("check", seed, "--format", "json", "--max-depth", "1")
    _, rendered, err = await cli(
        "check", seed, "--render", "auto", "--render-timeout", "3", "--format", "json",
        "--max-depth", "1",
    )  # fmt: skip
    assert "made-by-js" in plain  # without a browser the id is missing ...
    assert "made-by-js" not in rendered, err  # ... with one it is there
    assert "not-there" in rendered  # a fragment nothing makes is still reported


async def test_metrics_count_the_pages_rendered_by_reason(
    site: tuple[str, str, RenderSite],
) -> None:
    from tests.test_metrics import by_label, crawl_in_background, scrape  # noqa: PLC0415

    url, _other, _site = site

    class Seeds:  # what crawl_in_background asks of a site
        def url(self, _path: str) -> str:
            return url + "/app/fetch"

    crawler, _sink, port = await crawl_in_background(
        Seeds(),  # type: ignore[arg-type]
        render="auto",
        render_timeout=3.0,
        max_depth=1,
        metrics_linger=2.0,
    )
    samples = await scrape(f"http://127.0.0.1:{port}/metrics")
    await crawler.task  # type: ignore[attr-defined]
    assert by_label(samples, "crawler_pages_rendered_total", "reason") == {"mount_point": 1}
    assert [v for k, v in samples.items() if k[0] == "crawler_render_misses_total"] == [0]


async def test_render_sample_counts_the_rules_misses(
    site: tuple[str, str, RenderSite], tmp_path: Path
) -> None:
    """--render-sample 1: every page the auto rule does not render is rendered all the same
    (render_reason "sample"); /enhanced/ (24 static links: the rule says no) has a link only
    its script makes: one miss, in the stats, the summary, the jsonl and the metrics. Without
    the sample the rule's no stands and the script's link is not found."""
    url, _other, _site = site
    seed = url + "/enhanced/"
    plain = await crawl(seed, render="auto", render_timeout=3.0, max_depth=1)
    assert url + "/enhanced/extra" not in {page.url for page in plain.pages}
    assert plain.stats.pages_rendered == 0 and plain.stats.render_misses == 0

    out = tmp_path / "pages.jsonl"
    code, _stdout, err = await cli(
        "crawl", seed, "--render", "auto", "--render-sample", "1", "--render-timeout", "3",
        "--max-depth", "1", "-f", "jsonl", "-o", str(out),
    )  # fmt: skip
    assert code == 0, err
    lines = {d["url"]: d for d in map(json.loads, out.read_text().splitlines())}
    assert lines[seed]["render_reason"] == "sample" and lines[seed]["rendered"] is True
    assert lines[seed]["rendered_links"] == [url + "/enhanced/extra"]
    assert url + "/enhanced/extra" in lines  # followed
    leaves = [lines[f"{url}/enhanced/{i}"] for i in range(ENHANCED_LEAVES)]
    assert all(d["render_reason"] == "sample" and not d["rendered_links"] for d in leaves)
    pages = len(lines)
    assert f"{pages} pages rendered (sample {pages})" in err, err
    assert f"1 of {pages} sampled pages missed by the rule" in err, err
