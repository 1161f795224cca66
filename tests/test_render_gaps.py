"""``--render`` paths the first tests of issue 24 left open, in real headless Chromium:
politeness for the browser's requests to another crawled host, csv rows of rendered links,
the crawl's cookies in the browser, a render that fails (``render_error``), a clean close.

Each test serves its own small site on loopback (127.0.0.1 and 127.0.0.2 for a second host)
that counts the requests in flight per host and logs what it was sent.
"""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import io
import json
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from crawler import crawl

ROOT = Path(__file__).resolve().parent.parent

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (os.environ.get("CRAWLER_CHROMIUM") or shutil.which("chromium")),
        reason="needs chromium (apt-get install chromium)",
    ),
    pytest.mark.skipif(
        importlib.util.find_spec("playwright") is None,
        reason="needs playwright (pip install '.[render]')",
    ),
]

_SPA = (
    "<!doctype html><html><head><title>{title}</title>{head}</head><body>"
    '<a href="/static-link">static</a><div id="root"></div>{body}</body></html>'
)


def spa(title: str, body: str = "", head: str = "") -> str:
    return _SPA.format(title=title, body=body, head=head)


def links_script(paths: list[str]) -> str:
    anchors = "".join(f'<a href="{p}">{p}</a>' for p in paths)
    return f"<script>document.getElementById('root').innerHTML = {json.dumps(anchors)};</script>"


@dataclass
class HostLog:
    in_flight: int = 0
    max_in_flight: int = 0
    paths: list[str] = field(default_factory=list)
    headers: dict[str, dict[str, str]] = field(default_factory=dict)
    starts: list[float] = field(default_factory=list)  # monotonic, each request's arrival


Handler = Callable[[web.Request], "asyncio.Future[web.StreamResponse] | object"]


async def serve_host(
    address: str,
    handle: Callable[[web.Request], object],
    log: HostLog,
    robots: str = "User-agent: *\nAllow: /\n",
) -> tuple[str, web.AppRunner]:
    async def counted(request: web.Request) -> web.StreamResponse:
        log.in_flight += 1
        log.max_in_flight = max(log.max_in_flight, log.in_flight)
        log.paths.append(request.path_qs)
        log.headers[request.path_qs] = dict(request.headers)
        log.starts.append(time.monotonic())
        try:
            if request.path == "/robots.txt":
                return web.Response(text=robots)
            if request.path == "/favicon.ico":
                raise web.HTTPNotFound()
            return await handle(request)  # type: ignore[misc, no-any-return]
        finally:
            log.in_flight -= 1

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", counted)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, address, 0)
    await site.start()
    server = site._server  # noqa: SLF001 - the bound port of port 0
    assert server is not None
    port = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
    return f"http://{address}:{port}", runner


@pytest.fixture
async def runners() -> AsyncIterator[list[web.AppRunner]]:
    made: list[web.AppRunner] = []
    yield made
    for runner in made:
        await runner.cleanup()


def html(text: str) -> web.Response:
    return web.Response(text=text, content_type="text/html")


async def test_browser_requests_to_another_crawled_host_keep_its_per_host_cap(
    runners: list[web.AppRunner],
) -> None:
    """Two crawled hosts (two seeds): A's rendered pages load scripts from B while the crawl
    fetches B's own pages; B never has more requests in flight than ``per_host``."""
    a_log, b_log = HostLog(), HostLog()
    b_url = ""

    async def host_a(request: web.Request) -> web.Response:
        if not request.path.startswith("/a/"):
            return html("<!doctype html><title>leaf</title><body>leaf</body>")
        i = int(request.path.rsplit("/", 1)[-1] or 0)
        scripts = "".join(f'<script src="{b_url}/s/{i}-{k}.js"></script>' for k in range(3))
        return html(spa(f"a{i}", links_script([f"/a/{i + 1}"] if i < 5 else []), scripts))

    async def host_b(request: web.Request) -> web.Response:
        await asyncio.sleep(0.15)  # slow enough for the browser's and the crawl's to overlap
        if request.path.startswith("/s/"):
            return web.Response(text="window.x = 1;", content_type="application/javascript")
        if not request.path.startswith("/b/"):
            return html("<!doctype html><title>leaf</title><body>leaf</body>")
        i = int(request.path.rsplit("/", 1)[-1] or 0)
        nxt = "".join(f'<a href="/b/{j}">b{j}</a>' for j in (2 * i + 1, 2 * i + 2) if j < 12)
        return html(f"<!doctype html><title>b{i}</title><body>{nxt}</body>")

    a_url, runner = await serve_host("127.0.0.1", host_a, a_log)
    runners.append(runner)
    b_url, runner = await serve_host("127.0.0.2", host_b, b_log)
    runners.append(runner)

    result = await crawl(
        [a_url + "/a/0", b_url + "/b/0"],
        render="always",
        render_timeout=3.0,
        render_concurrency=2,
        per_host=1,
        concurrency=8,
    )
    paths = {page.url for page in result.pages}
    assert {f"{a_url}/a/{i}" for i in range(6)} <= paths  # the rendered links were followed
    assert {f"{b_url}/b/{j}" for j in range(12)} <= paths
    assert b_log.max_in_flight == 1, b_log.paths
    assert a_log.max_in_flight == 1


@pytest.mark.parametrize("state", ["memory", "sqlite"])
async def test_browser_requests_to_another_crawled_host_go_in_its_slots_and_obey_its_robots(
    runners: list[web.AppRunner], state: str, tmp_path: Path
) -> None:
    """Two crawled hosts (two seeds). A's pages are rendered and load scripts from B, read
    their links from B's API (fetch()) and try a script B's robots.txt disallows, while the
    crawl fetches B's own pages. The browser's requests to B are sent, in B's ``per_host``
    slot: B never has more than one request in flight; the disallowed one is never sent."""
    a_log, b_log = HostLog(), HostLog()
    b_url = ""

    async def host_a(request: web.Request) -> web.Response:
        if not request.path.startswith("/a/"):
            return html("<!doctype html><title>leaf</title><body>leaf</body>")
        i = int(request.path.rsplit("/", 1)[-1] or 0)
        scripts = "".join(f'<script src="{b_url}/s/{i}-{k}.js"></script>' for k in range(2))
        scripts += f'<script src="{b_url}/private/{i}.js"></script>'
        api = (
            f"<script>fetch({json.dumps(f'{b_url}/api/{i}.json')}).then(r => r.json())"
            ".then(d => { document.getElementById('root').innerHTML ="
            " d.map(h => `<a href='${h}'>x</a>`).join(''); });</script>"
        )
        return html(spa(f"a{i}", api, scripts))

    async def host_b(request: web.Request) -> web.Response:
        await asyncio.sleep(0.1)  # slow enough for the browser's and the crawl's to overlap
        if request.path.startswith(("/s/", "/private/")):
            return web.Response(text="window.x = 1;", content_type="application/javascript")
        if request.path.startswith("/api/"):
            i = int(request.path.rsplit("/", 1)[-1].split(".")[0])
            nxt = [f"/a/{i + 1}"] if i < 4 else []
            return web.json_response(nxt, headers={"Access-Control-Allow-Origin": "*"})
        if not request.path.startswith("/b/"):
            return html("<!doctype html><title>leaf</title><body>leaf</body>")
        i = int(request.path.rsplit("/", 1)[-1] or 0)
        nxt = "".join(f'<a href="/b/{j}">b{j}</a>' for j in (2 * i + 1, 2 * i + 2) if j < 10)
        return html(f"<!doctype html><title>b{i}</title><body>{nxt}</body>")

    a_url, runner = await serve_host("127.0.0.1", host_a, a_log)
    runners.append(runner)
    b_robots = "User-agent: *\nDisallow: /private/\n"
    b_url, runner = await serve_host("127.0.0.2", host_b, b_log, robots=b_robots)
    runners.append(runner)

    result = await crawl(
        [a_url + "/a/0", b_url + "/b/0"],
        render="always",
        render_timeout=4.0,
        render_concurrency=2,
        per_host=1,
        concurrency=8,
        state=str(tmp_path / "state") if state == "sqlite" else None,
    )
    paths = {page.url for page in result.pages}
    # the links A's pages read from B's API were found (the API was fetched) and followed
    assert {f"{a_url}/a/{i}" for i in range(5)} <= paths, sorted(paths)
    assert {f"{b_url}/b/{j}" for j in range(10)} <= paths
    browser_on_b = [p for p in b_log.paths if p.startswith(("/s/", "/api/", "/private/"))]
    assert {f"/api/{i}.json" for i in range(5)} <= set(browser_on_b)
    assert {f"/s/{i}-{k}.js" for i in range(5) for k in range(2)} <= set(browser_on_b)
    assert not [p for p in browser_on_b if p.startswith("/private/")]  # B's robots.txt
    assert b_log.max_in_flight == 1, b_log.paths  # the crawl's and the browser's together
    assert a_log.max_in_flight == 1


async def test_browser_requests_to_another_crawled_host_keep_its_delay(
    runners: list[web.AppRunner],
) -> None:
    """With ``--delay``, the browser's requests to another crawled host and the crawl's own
    fetches of it start at least the delay apart: one schedule for the host."""
    b_log = HostLog()
    b_url = ""

    async def host_a(request: web.Request) -> web.Response:
        if request.path != "/":
            return html("<!doctype html><title>leaf</title><body>leaf</body>")
        scripts = "".join(f'<script src="{b_url}/s/{k}.js"></script>' for k in range(3))
        return html(spa("a", links_script(["/made"]), scripts))

    async def host_b(request: web.Request) -> web.Response:
        if request.path.startswith("/s/"):
            return web.Response(text="window.x = 1;", content_type="application/javascript")
        links = "".join(f'<a href="/b/{j}">b{j}</a>' for j in range(3))
        return html(f"<!doctype html><title>b</title><body>{links}</body>")

    a_url, runner = await serve_host("127.0.0.1", host_a, HostLog())
    runners.append(runner)
    b_url, runner = await serve_host("127.0.0.2", host_b, b_log)
    runners.append(runner)
    delay = 0.3
    result = await crawl(
        [a_url + "/", b_url + "/"], render="always", render_timeout=4.0, delay=delay
    )
    assert a_url + "/made" in {page.url for page in result.pages}
    assert {f"/s/{k}.js" for k in range(3)} <= set(b_log.paths), b_log.paths
    # robots.txt is fetched before any page, outside the delay; the rest are spaced. The
    # server sees each start a little after the crawl let it go (the browser's own latency
    # varies under load), so the whole run is measured, and no two may come together.
    starts = b_log.starts[1:]
    gaps = [b - a for a, b in zip(starts, starts[1:], strict=False)]
    assert len(starts) >= 6, b_log.paths
    assert starts[-1] - starts[0] >= (len(starts) - 1) * delay - 0.15, (b_log.paths, gaps)
    assert min(gaps) > delay / 3, (b_log.paths, gaps)


async def test_csv_rows_of_rendered_links(runners: list[web.AppRunner]) -> None:
    async def handle(request: web.Request) -> web.Response:
        if request.path == "/":
            return html(spa("home", links_script(["/made/by/js", "/made/too"])))
        return html("<!doctype html><title>leaf</title><body>leaf</body>")

    url, runner = await serve_host("127.0.0.1", handle, HostLog())
    runners.append(runner)
    code, out, err = await cli(
        "crawl", url + "/", "--render", "always", "--render-timeout", "3", "-f", "csv",
        "--max-depth", "1",
    )  # fmt: skip
    assert code == 0, err
    rows = list(csv.reader(io.StringIO(out)))
    assert rows[0] == ["source", "target", "tag", "nofollow"]
    from_home = {(r[1], r[2]) for r in rows[1:] if r[0] == url + "/"}
    assert from_home == {
        (url + "/static-link", "a"),
        (url + "/made/by/js", "a"),
        (url + "/made/too", "a"),
    }
    assert len(rows) - 1 == len({tuple(r) for r in rows[1:]})  # each row once


async def test_cookies_of_the_crawls_jar_go_only_where_the_crawl_sends_them(
    runners: list[web.AppRunner], tmp_path: Path
) -> None:
    """The jar's cookie for the site (path /api) goes with the browser's fetch to /api and
    not with its fetch to /other, nor with a script of another host."""
    site_log, other_log = HostLog(), HostLog()
    other_url = ""

    async def site(request: web.Request) -> web.Response:
        if request.path == "/":
            script = (
                "<script>Promise.all([fetch('/api/links.json').then(r => r.json()),"
                " fetch('/other/links.json').then(r => r.json())]).then(([a, b]) => {"
                " document.getElementById('root').innerHTML = a.concat(b).map(p =>"
                " `<a href=\"${p}\">${p}</a>`).join(''); });</script>"
            )
            return html(spa("home", script, f'<script src="{other_url}/cdn.js"></script>'))
        if request.path == "/api/links.json":
            return web.json_response(["/from-api"])
        if request.path == "/other/links.json":
            return web.json_response(["/from-other"])
        return html("<!doctype html><title>leaf</title><body>leaf</body>")

    async def other(request: web.Request) -> web.Response:
        return web.Response(text="window.y = 1;", content_type="application/javascript")

    url, runner = await serve_host("127.0.0.1", site, site_log)
    runners.append(runner)
    other_url, runner = await serve_host("127.0.0.2", other, other_log)
    runners.append(runner)
    jar = tmp_path / "cookies.txt"
    jar.write_text(
        "# Netscape HTTP Cookie File\n"
        "127.0.0.1\tFALSE\t/api\tFALSE\t0\tsession\tapi-secret\n"
        "127.0.0.2\tFALSE\t/\tFALSE\t0\tcdn\tcdn-secret\n"
    )
    code, out, err = await cli(
        "crawl", url + "/", "--render", "always", "--render-timeout", "3", "-f", "urls",
        "--max-depth", "1", "--cookies", str(jar),
    )  # fmt: skip
    assert url + "/from-api" in out and url + "/from-other" in out, err
    api = site_log.headers["/api/links.json"]
    assert "session=api-secret" in api.get("Cookie", ""), api
    assert "Cookie" not in site_log.headers["/other/links.json"]
    assert "Cookie" not in site_log.headers["/"]  # (no /api cookie for the page either)
    assert "cdn-secret" not in other_log.headers["/cdn.js"].get("Cookie", "")


async def test_a_render_that_fails_keeps_the_pages_static_links(
    runners: list[web.AppRunner],
) -> None:
    """A browser that cannot start: every render is a ``render_error``; the crawl goes on
    with the pages' static links."""

    async def handle(request: web.Request) -> web.Response:
        if request.path == "/":
            return html(spa("home", links_script(["/only-js"])))
        return html("<!doctype html><title>leaf</title><body>leaf</body>")

    url, runner = await serve_host("127.0.0.1", handle, HostLog())
    runners.append(runner)
    broken = shutil.which("false") or "/bin/false"
    code, out, err = await cli(
        "crawl", url + "/", "--render", "always", "--render-timeout", "3", "-f", "jsonl",
        env={"CRAWLER_CHROMIUM": broken},
    )  # fmt: skip
    lines = {rec["url"][len(url) :]: rec for rec in map(json.loads, out.splitlines())}
    home = lines["/"]
    assert home["error"] == "render_error", home
    assert home["rendered"] is True
    assert url + "/static-link" in home["links"]
    assert home["rendered_links"] == []
    assert "/static-link" in lines  # the static link was followed
    assert lines["/static-link"]["error"] == "render_error"
    assert code == 1, err  # the pages' render errors count as failed pages


async def cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "crawler", *argv,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 240)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_killed_check_resumed_replays_the_rendered_links(
    runners: list[web.AppRunner], tmp_path: Path
) -> None:
    """``crawler check --render auto --state DIR``, SIGKILLed after the rendered home page is
    in its journal, then resumed: the report is the uninterrupted run's, the broken links
    only the home page's scripts made (and their referrer) included."""
    fetched: list[str] = []

    async def handle(request: web.Request) -> web.Response:
        fetched.append(request.path)
        if request.path == "/":
            made = ["/js/ok", "/js/broken", "/js/ok#made-nowhere"]
            return html(spa("home", links_script(made)))
        await asyncio.sleep(0.3)  # slow pages: the kill lands midway
        if "broken" in request.path:
            raise web.HTTPNotFound()
        i = request.path.count("/")
        nxt = "".join(f'<a href="{request.path}/{k}">{k}</a>' for k in range(2) if i < 4)
        return html(f"<!doctype html><title>x</title><body>{nxt}<a href=/gone-broken>g</a>")

    url, runner = await serve_host("127.0.0.1", handle, HostLog())
    runners.append(runner)
    common = (
        "check", url + "/", "--render", "auto", "--render-timeout", "3", "--format", "json",
        "--concurrency", "1", "--retries", "0",
    )  # fmt: skip
    code, whole_out, err = await cli(*common)
    assert code == 1, err
    whole = json.loads(whole_out)
    broken_targets = {p["url"] for p in whole["broken"]}
    assert url + "/js/broken" in broken_targets  # (the run sees what only scripts made)

    state = tmp_path / "state"
    args = [sys.executable, "-m", "crawler", *common, "--state", str(state)]
    proc = await asyncio.create_subprocess_exec(
        *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=ROOT
    )
    journal = state / "check-pages.jsonl"
    try:
        for _ in range(600):  # until the rendered home page is in the journal
            await asyncio.sleep(0.05)
            if journal.exists() and b"/js/broken" in journal.read_bytes():
                break
    finally:
        proc.send_signal(9)
        await proc.wait()
    assert b"/js/broken" in journal.read_bytes()
    fetched.clear()
    code, out, err = await cli(*common, "--state", str(state))
    assert code == 1, err
    assert "/" not in fetched  # the home page came from the journal, not a new render
    resumed = json.loads(out)

    def problems(report: dict[str, Any]) -> set[tuple[Any, ...]]:
        return {
            (p["url"], p["error"], tuple(sorted((r["page"], r["line"]) for r in p["referrers"])))
            for p in report["broken"] + report["warnings"]
        }

    assert problems(resumed) == problems(whole)
