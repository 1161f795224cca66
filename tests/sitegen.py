"""A generated test site, served by a real aiohttp server on 127.0.0.1, that records requests.

The site knows its own link graph, so a test can compute what a correct crawl must fetch and
find, and compare with what the crawler did (and with the server's request log).

Pages (``n`` of them, ``/p/<i>.html``) link to each other in every form a crawler meets:
relative (``3.html``, ``../p/3.html``), root-relative, absolute, with fragments and odd case,
plus links to redirects (``/r/<i>`` -> page; a 3-hop chain; a loop), to 404s, to files that
are not HTML (pdf, png), to a robots-disallowed area (``/private/``), to other hosts and to
``mailto:``/``javascript:``. Special pages: a gzip-encoded page, a slow page, an ISO-8859-1
page, each the only way to reach a page of its own.
"""

from __future__ import annotations

import asyncio
import gzip
import random
from collections import Counter
from dataclasses import dataclass, field
from urllib.parse import quote, urldefrag, urljoin

from aiohttp import web

from crawler.core.results import PageResult

ROBOTS = "User-agent: *\nDisallow: /private/\n"


@dataclass
class Site:
    """The generated site. ``origin`` is set once the server is started."""

    n: int = 300
    seed: int = 1
    slow_seconds: float = 0.3
    delay_all: float = 0.0  # added to every response
    origin: str = ""
    requests: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    pages: dict[str, list[str]] = field(default_factory=dict)  # path -> hrefs as written

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        n = self.n
        for i in range(n):
            hrefs: list[str] = []
            # a chain through every page so that all are reachable, then random extra links
            nxt = (i + 1) % n
            hrefs.append(f"{nxt}.html")
            for _ in range(rng.randrange(3, 9)):
                j = rng.randrange(n)
                form = rng.randrange(6)
                if form == 0:
                    hrefs.append(f"{j}.html")
                elif form == 1:
                    hrefs.append(f"../p/{j}.html")
                elif form == 2:
                    hrefs.append(f"/p/{j}.html#sec{j}")
                elif form == 3:
                    hrefs.append(f"ABS/p/{j}.html")  # made absolute when served
                elif form == 4:
                    hrefs.append(f"./{j}.html?")
                else:
                    hrefs.append(f"/p/./x/../{j}.html")
            if i % 10 == 0:
                hrefs.append(f"/r/{rng.randrange(n)}")
            if i % 25 == 0:
                hrefs += [f"/missing/{i}", f"/private/secret{i}.html", f"/files/doc{i}.pdf"]
            if i % 40 == 0:
                hrefs += [
                    f"/img/{i}.png",
                    "http://other.invalid/x",
                    "mailto:a@b.c",
                    "javascript:void(0)",
                ]
            if i == 7:
                hrefs += ["/chain/1", "/loop/a", "/gz.html", "/slow.html", "/latin1.html", "#top"]
                hrefs += ["/badredir", "/outredir"]
            self.pages[f"/p/{i}.html"] = hrefs
        self.pages["/gz.html"] = ["/gzonly.html", "/p/0.html"]
        self.pages["/gzonly.html"] = ["/p/1.html"]
        self.pages["/slow.html"] = ["/slowonly.html"]
        self.pages["/slowonly.html"] = []
        self.pages["/latin1.html"] = ["caf\u00e9.html"]
        self.pages["/caf\u00e9.html"] = []
        self.pages["/private/secret0.html"] = ["/p/0.html"]

    # -- what a correct crawl does --

    def url(self, path: str) -> str:
        return self.origin + path

    REDIRECTS = {"/chain/1": "/chain/2", "/chain/2": "/chain/3", "/chain/3": "/p/5.html"}
    LOOP = {"/loop/a": "/loop/b", "/loop/b": "/loop/a"}
    BAD = {"/badredir": "javascript:alert(1)", "/outredir": "http://other.invalid/x"}

    def redirect_target(self, path: str) -> str | None:
        if path.startswith("/r/"):
            return f"/p/{path[3:]}.html"
        return self.REDIRECTS.get(path) or self.LOOP.get(path)

    def rendered(self, path: str) -> str:
        body = []
        for href in self.pages[path]:
            if href.startswith("ABS/"):
                href = self.origin + href[3:]
            body.append(f'<li><a href="{href}">link</a></li>')
        return (
            "<!doctype html><html><head><meta charset=utf-8><title>t</title></head><body><ul>"
            + "\n".join(body)
            + "</ul>"
            + "<p>"
            + "filler text " * 50
            + "</p></body></html>"
        )

    # -- the server --

    def app(self) -> web.Application:
        @web.middleware
        async def record(request: web.Request, handler):  # type: ignore[no-untyped-def]
            key = request.path_qs
            self.requests[key] += 1
            self.log.append(key)
            return await handler(request)

        app = web.Application(middlewares=[record])
        app.router.add_route("GET", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if self.delay_all:
            await asyncio.sleep(self.delay_all)
        if path == "/robots.txt":
            return web.Response(text=ROBOTS)
        target = self.redirect_target(path) or self.BAD.get(path)
        if target is not None:
            raise web.HTTPMovedPermanently(location=target)
        if path.startswith("/files/"):
            return web.Response(body=b"%PDF-1.4 " + b"x" * 5000, content_type="application/pdf")
        if path.startswith("/img/"):
            return web.Response(body=b"\x89PNG\r\n\x1a\n" + b"\0" * 500, content_type="image/png")
        if path == "/gz.html":
            return web.Response(
                body=gzip.compress(self.rendered(path).encode()),
                headers={"Content-Encoding": "gzip", "Content-Type": "text/html; charset=utf-8"},
            )
        if path == "/slow.html":
            await asyncio.sleep(self.slow_seconds)
        if path == "/latin1.html":
            return web.Response(
                body=self.rendered(path)
                .replace("charset=utf-8", "charset=iso-8859-1")
                .encode("latin-1"),
                headers={"Content-Type": "text/html; charset=iso-8859-1"},
            )
        if path in self.pages:
            return web.Response(text=self.rendered(path), content_type="text/html")
        raise web.HTTPNotFound()

    def expected(self, max_depth: int = 10**9) -> tuple[set[str], set[str]]:
        """(paths a correct crawl from /p/0.html fetches, paths it discovers), by plain BFS.

        A page at ``max_depth`` is fetched and its links are discovered (listed) but not
        fetched: "discovered" is every in-scope URL the fetched pages link to.
        Resolution here uses urllib (not the crawler's resolver): a differential check.
        """
        seed = "/p/0.html"
        queued = {seed}  # discovered at a depth <= max_depth: fetched (or followed to)
        beyond: set[str] = set()  # discovered one hop past max_depth only: listed, not fetched
        fetched: set[str] = set()
        frontier = [(seed, 0)]
        while frontier:
            nxt: list[tuple[str, int]] = []
            for path, depth in frontier:
                if path.startswith("/private/"):
                    continue
                fetched.add(path)
                hops = [path]
                while (target := self.redirect_target(hops[-1])) is not None:
                    if target in hops:
                        break
                    if target in queued:
                        break
                    queued.add(target)
                    fetched.add(target)
                    hops.append(target)
                final = hops[-1]
                if final not in self.pages:
                    continue
                for href in self.pages[final]:
                    if href.startswith("ABS/"):
                        href = href[3:]
                    url = urldefrag(urljoin("http://h" + final, href))[0]
                    if not url.startswith("http://h/"):
                        continue
                    link = quote(url[len("http://h") :], safe="/%?=&").rstrip("?")
                    if link in queued:
                        continue
                    if depth < max_depth:
                        queued.add(link)
                        nxt.append((link, depth + 1))
                    else:
                        beyond.add(link)
            frontier = nxt
        discovered = queued | beyond
        return fetched, discovered


async def start_site(serve, **kw):  # type: ignore[no-untyped-def]
    site = Site(**kw)
    server = await serve(site.app())
    site.origin = str(server.make_url("")).rstrip("/")
    return site, server


def app_of(routes: dict[str, str | tuple[int, str, str]]) -> tuple[web.Application, Counter[str]]:
    """A small app: path -> html text, or (status, content_type, body)."""
    hits: Counter[str] = Counter()

    async def handle(request: web.Request) -> web.Response:
        hits[request.path_qs] += 1
        spec = routes.get(request.path_qs, routes.get(request.path))
        if spec is None:
            return web.Response(status=404, text="no")
        if isinstance(spec, str):
            return web.Response(text=spec, content_type="text/html")
        status, ctype, body = spec
        return web.Response(status=status, text=body, content_type=ctype)

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    return app, hits


class RecordingSink:
    """A Sink that keeps everything it is told (for the engine and hostile-web tests)."""

    def __init__(self) -> None:
        self.links: list[tuple[str, str, str]] = []
        self.pages: list[PageResult] = []
        self.closed = 0

    def link(self, url: str, referrer: str, kind: str) -> None:
        self.links.append((url, referrer, kind))

    def page(self, page: PageResult) -> None:
        self.pages.append(page)

    def close(self) -> None:
        self.closed += 1
