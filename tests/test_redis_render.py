"""The browser's requests under a Redis state (issue 24), with a real headless Chromium and a
real redis-server.

A client-rendered page builds its links from JSON it fetch()es: from its own origin, and from
an API on another crawled origin (a second seed). A request to another crawled origin must
take one of THAT origin's ``--per-host`` slots in the crawl state (crawler/core/render_gate.py).
The Redis state lends the slots of the origins whose shard (the parts of whose host) this
worker owns, from its local politeness queues, so that the API's links are found; before,
it refused every slot and the browser's request was not sent. The API counts the requests in
progress to it: never more than ``--per-host`` at once, the crawl's and the browser's together.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
from typing import Any

import pytest
from aiohttp import web

from crawler import crawl
from tests.redisserver import RedisServer, redis_server  # noqa: F401  (the fixture)

_PLAYWRIGHT = importlib.util.find_spec("playwright") is not None

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not (os.environ.get("CRAWLER_CHROMIUM") or shutil.which("chromium")),
        reason="needs chromium (apt-get install chromium)",
    ),
    pytest.mark.skipif(not _PLAYWRIGHT, reason="needs playwright (pip install '.[render]')"),
    pytest.mark.timeout(120),
]

PER_HOST = 2
PAGE = """<!doctype html><html><body><div id="root"></div><script>
function add(d) {{ d.links.forEach(function (u) {{
  var a = document.createElement('a'); a.href = u; a.textContent = u;
  document.getElementById('root').appendChild(a); }}); }}
fetch('/own.json').then(function (r) {{ return r.json(); }}).then(add);
fetch('{api}/links.json').then(function (r) {{ return r.json(); }}).then(add);
</script></body></html>"""


class Api:
    """The other origin: JSON of links (CORS open), pages, and its count of requests."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.paths: list[str] = []
        self.site = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.paths.append(request.path)
        try:
            await asyncio.sleep(0.05)
            if request.path == "/links.json":
                links = [f"{self.site}/from-api/{i}" for i in range(3)]
                return web.json_response(
                    {"links": links}, headers={"Access-Control-Allow-Origin": "*"}
                )
            if request.path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n")
            body = "".join(f'<a href="/api-page/{i}">p</a>' for i in range(6))
            return web.Response(text=f"<html><body>{body}</body></html>", content_type="text/html")
        finally:
            self.in_flight -= 1


async def test_a_pages_fetch_to_another_crawled_origin_gets_its_links_under_redis(
    serve: Any,
    redis_server: RedisServer,  # noqa: F811
) -> None:
    api = Api()
    api_app = web.Application()
    api_app.router.add_route("GET", "/{tail:.*}", api.handle)
    api_server = await serve(api_app)
    api_url = str(api_server.make_url("")).rstrip("/")

    async def page(request: web.Request) -> web.Response:
        if request.path == "/":
            return web.Response(text=PAGE.format(api=api_url), content_type="text/html")
        if request.path == "/own.json":
            return web.json_response({"links": ["/from-own/1"]})
        if request.path == "/robots.txt":
            return web.Response(text="User-agent: *\nAllow: /\n")
        return web.Response(text="<html><body>leaf</body></html>", content_type="text/html")

    site_app = web.Application()
    site_app.router.add_route("GET", "/{tail:.*}", page)
    site_server = await serve(site_app)
    site = str(site_server.make_url("")).rstrip("/")
    api.site = site

    result = await crawl(
        (site + "/", api_url + "/"),
        state=redis_server.url,
        name="render",
        render="always",
        render_timeout=5.0,
        per_host=PER_HOST,
        max_pages=100,
    )
    urls = {p.url for p in result.pages}
    assert site + "/from-own/1" in urls  # from the page's own origin
    # from the API on the other crawled origin: the browser's request took a slot of it
    assert {f"{site}/from-api/{i}" for i in range(3)} <= urls, sorted(urls)
    assert "/links.json" in api.paths
    assert api.peak <= PER_HOST, api.peak  # the crawl's and the browser's requests together
