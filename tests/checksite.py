"""A local site with known broken links of every kind, for ``crawler check``'s tests.

Two servers: the site on 127.0.0.1 (crawled) and an "external" one on 127.0.0.2 (out of
scope: checked, never crawled; every request it gets is recorded). Each link stands on a
line of its own, so the test knows the line and column of every tag's ``<``
(``CheckSite.where``).

Run it by hand (``python -m tests.checksite``) to try ``crawler check`` against it.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from dataclasses import dataclass, field

from aiohttp import web
from aiohttp.test_utils import TestServer

SLOW_OK = 0.3  # seconds: a slow page within the tests' --timeout
SLOW_TIMEOUT = 5.0  # seconds: past it
TIMEOUT = 2.0  # the --timeout the tests use (a loaded CI machine: margin for SLOW_OK)
LONG_LINES = 6000  # /long.html: a link this far down, an id at the end


def free_port() -> int:
    """A port with nothing listening (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Expected:
    """What the checker must say about one target."""

    url: str  # Problem.url
    error: str | None  # a kind; None: a good link, must not be reported
    where: list[tuple[str, int, int, str, str]] = field(default_factory=list)
    # (page path, line, column, tag, attr)


class CheckSite:
    """Both servers, the pages, and what a correct checker reports."""

    def __init__(self, page_delay: float = 0.0) -> None:
        self.page_delay = page_delay  # seconds added to every page (a crawl to kill midway)
        self.hits: Counter[str] = Counter()  # "METHOD /path" on the site
        self.ext_requests: list[tuple[str, str]] = []  # (method, path) on 127.0.0.2
        self.site: TestServer | None = None
        self.ext: TestServer | None = None
        self.dead_port = free_port()
        self.pages: dict[str, str] = {}
        self.expected: dict[str, Expected] = {}
        self.base = ""
        self.ext_base = ""

    async def start(self) -> CheckSite:
        self.site = TestServer(self._site_app(), host="127.0.0.1", port=0)
        await self.site.start_server()
        self.ext = TestServer(self._ext_app(), host="127.0.0.2", port=0)
        await self.ext.start_server()
        # kept: the servers forget their ports once closed, the tests read these after
        self.base = f"http://127.0.0.1:{self.site.port}"
        self.ext_base = f"http://127.0.0.2:{self.ext.port}"
        self._build()
        return self

    async def close(self) -> None:
        for server in (self.site, self.ext):
            if server is not None:
                await server.close()

    # -- pages --

    def _page(self, path: str, title: str, links: list[tuple[str, str, str, str | None]]) -> None:
        """A page whose links are (tag, attr, value, expected kind or None) a line each."""
        lines = ["<!DOCTYPE html>", f"<html><head><title>{title}</title></head>", "<body>"]
        for tag, attr, value, kind in links:
            indent = "  " * (len(lines) % 3)  # columns vary: 1, 3, 5
            line = len(lines) + 1
            column = len(indent) + 1
            if tag == "img":
                lines.append(f'{indent}<img {attr}="{value}" alt="">')
            else:
                lines.append(f'{indent}<{tag} {attr}="{value}">{tag}</{tag}>')
            self._expect(path, value, kind, (path, line, column, tag, attr))
        lines += ['<p id="exists">x</p>', '<a name="anchor"></a>', "</body></html>", ""]
        self.pages[path] = "\n".join(lines)

    def _expect(
        self, page: str, value: str, kind: str | None, where: tuple[str, int, int, str, str]
    ) -> None:
        url = self._url_of(page, value, kind)
        exp = self.expected.setdefault(url, Expected(url, kind))
        exp.where.append(where)

    def _url_of(self, page: str, value: str, kind: str | None) -> str:
        """The Problem.url a correct checker gives for ``value`` linked from ``page``."""
        if kind == "invalid_url" or value.startswith("mailto:"):
            return value
        if value.startswith("http"):
            url = value
        elif value.startswith("#"):
            url = self.base + page + value
        else:
            url = self.base + value
        if kind != "fragment_missing":
            url = url.partition("#")[0]
        return url

    def _build(self) -> None:
        b, e = self.base, self.ext_base
        self._page(
            "/",
            "index",
            [
                ("a", "href", "/good.html", None),
                ("a", "href", "/missing", "http_404"),
                ("a", "href", "/error500", "http_500"),
                ("a", "href", "/gone", "http_410"),
                ("a", "href", f"http://127.0.0.1:{self.dead_port}/", "connect"),
                ("a", "href", "/slow-timeout", "timeout"),
                ("a", "href", "http://a b/", "invalid_url"),
                ("a", "href", "/good.html#nope", "fragment_missing"),
                ("a", "href", "/good.html#exists", None),
                ("a", "href", "/good.html#anchor", None),
                ("a", "href", "/long.html#late", None),
                ("a", "href", "/long.html#never", "fragment_missing"),
                ("a", "href", "/redir-404", "http_404"),
                ("a", "href", "/loop-a", "redirect_loop"),
                ("a", "href", "/many/0", "too_many_redirects"),
                ("a", "href", "/flaky-429", None),
                ("a", "href", "/flaky-503", None),
                ("a", "href", "/slow-ok", None),
                ("a", "href", "/moved", "redirect_permanent"),
                ("a", "href", "/temp", None),
                ("a", "href", "/offsite", None),
                ("a", "href", "mailto:someone@example.org", "scheme_unchecked"),
                ("a", "href", "/private/page", "robots_disallowed"),
                ("img", "src", "/img/missing.png", "http_404"),
                ("img", "src", "/img/ok.png", None),
                ("a", "href", "#exists", None),
                ("a", "href", "/page2.html", None),
                ("a", "href", f"{e}/ok", None),
                ("a", "href", f"{e}/head405", None),
                ("a", "href", f"{e}/missing", "http_404"),
                ("a", "href", f"{e}/page.html#there", None),
                ("a", "href", f"{e}/page.html#absent", "fragment_missing"),
                ("a", "href", f"{e}/flaky-429", None),
                ("a", "href", f"{e}/moved", "redirect_permanent"),
            ],
        )
        self._page(
            "/page2.html",
            "second",
            [
                ("a", "href", "/missing", "http_404"),
                ("a", "href", "/", None),
                ("a", "href", f"{e}/missing", "http_404"),
            ],
        )
        self._page("/good.html", "good", [("a", "href", "/", None)])
        self._page("/private/page", "private", [("a", "href", "/", None)])
        self._page("/slow-ok", "slow", [])
        # the long page: a link LONG_LINES lines down, the id at the very end
        filler = "<p>filler text, line after line</p>\n" * (LONG_LINES - 4)
        long_html = (
            f"<!DOCTYPE html>\n<html>\n<body>\n{filler}"
            f'<a href="/missing">deep</a>\n<div id="late">end</div>\n</body></html>\n'
        )
        self.pages["/long.html"] = long_html
        where = ("/long.html", LONG_LINES, 1, "a", "href")
        self._expect("/long.html", "/missing", "http_404", where)
        del b

    # -- the site --

    def _site_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._site)
        return app

    async def _site(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.hits[f"{request.method} {path}"] += 1
        n = self.hits[f"GET {path}"] + self.hits[f"HEAD {path}"]
        if path == "/robots.txt":
            return web.Response(text="User-agent: *\nDisallow: /private/\n")
        if path in ("/missing", "/missing-target", "/img/missing.png"):
            return web.Response(status=404, text="not here")
        if path == "/error500":
            return web.Response(status=500, text="boom")
        if path == "/gone":
            return web.Response(status=410, text="gone")
        if path == "/slow-timeout":
            await asyncio.sleep(SLOW_TIMEOUT)
            return web.Response(text="too late", content_type="text/html")
        if path == "/slow-ok":
            await asyncio.sleep(SLOW_OK)
        if path == "/redir-404":
            raise web.HTTPFound("/missing-target")
        if path == "/loop-a":
            raise web.HTTPFound("/loop-b")
        if path == "/loop-b":
            raise web.HTTPFound("/loop-a")
        if path.startswith("/many/"):
            i = int(path.rsplit("/", 1)[1])
            raise web.HTTPFound(f"/many/{i + 1}")
        if path == "/flaky-429":
            if n == 1:
                return web.Response(status=429, headers={"Retry-After": "1"}, text="slow down")
            return web.Response(text="<p>ok</p>", content_type="text/html")
        if path == "/flaky-503":
            if n == 1:
                return web.Response(status=503, text="busy")
            return web.Response(text="<p>ok</p>", content_type="text/html")
        if path == "/moved":
            raise web.HTTPMovedPermanently("/good.html")
        if path == "/temp":
            raise web.HTTPFound("/good.html")
        if path == "/offsite":  # a redirect off the site: followed only with external checks
            raise web.HTTPFound(self.ext_base + "/ok")
        if path == "/img/ok.png":
            return web.Response(body=b"\x89PNG\r\n\x1a\n", content_type="image/png")
        if path == "/long.html":
            return await self._stream(request, self.pages[path])
        page = self.pages.get(path)
        if page is None:
            return web.Response(status=404, text="no such page")
        if self.page_delay:
            await asyncio.sleep(self.page_delay)
        return web.Response(text=page, content_type="text/html")

    async def _stream(self, request: web.Request, text: str) -> web.StreamResponse:
        # in small chunks, so the id and the deep link arrive in late chunks
        resp = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        await resp.prepare(request)
        data = text.encode()
        for i in range(0, len(data), 4096):
            await resp.write(data[i : i + 4096])
            await asyncio.sleep(0)
        await resp.write_eof()
        return resp

    # -- the external server --

    def _ext_app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._external)
        return app

    async def _external(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.ext_requests.append((request.method, path))
        n = sum(1 for _, p in self.ext_requests if p == path)
        if path == "/ok":
            return web.Response(text="<p>ok</p>", content_type="text/html")
        if path == "/head405":
            if request.method == "HEAD":
                return web.Response(status=405)
            return web.Response(text="<p>ok</p>", content_type="text/html")
        if path == "/page.html":
            body = '<a href="/never-crawled">x</a><p id="there">t</p>'
            return web.Response(text=body, content_type="text/html")
        if path == "/flaky-429":
            if n == 1:
                return web.Response(status=429, headers={"Retry-After": "1"})
            return web.Response(text="ok", content_type="text/html")
        if path == "/moved":
            raise web.HTTPPermanentRedirect("/ok")
        return web.Response(status=404, text="not here")

    # -- what the tests read --

    def broken(self) -> dict[str, Expected]:
        return {u: x for u, x in self.expected.items() if x.error in BROKEN}

    def warnings(self) -> dict[str, Expected]:
        return {u: x for u, x in self.expected.items() if x.error in WARNING}

    def good(self) -> dict[str, Expected]:
        return {u: x for u, x in self.expected.items() if x.error is None}

    def ext_linked_paths(self) -> set[str]:
        prefix = self.ext_base
        return {u[len(prefix) :] for u in self.expected if u.startswith(prefix)} | {
            u[len(prefix) :].partition("#")[0] for u in self.expected if u.startswith(prefix)
        }


WARNING = frozenset({"redirect_permanent", "robots_disallowed", "excluded", "scheme_unchecked"})
BROKEN = frozenset(
    {
        "http_404",
        "http_410",
        "http_500",
        "timeout",
        "connect",
        "invalid_url",
        "fragment_missing",
        "redirect_loop",
        "too_many_redirects",
    }
)


async def _main() -> None:  # pragma: no cover - by hand
    site = await CheckSite().start()
    print(f"site: {site.base}/   external: {site.ext_base}/   (Ctrl-C to stop)", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await site.close()


if __name__ == "__main__":  # pragma: no cover
    try:
        asyncio.run(_main())
    except KeyboardInterrupt:
        pass
