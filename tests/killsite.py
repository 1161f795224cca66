"""A site for the kill-and-resume tests (issue 10), served by its own PROCESS on 127.0.0.1.

The crawler under test is killed with SIGKILL over and over; the server must outlive every
kill and remember every GET, so it runs apart from both the crawler and the test:
``python -m tests.killsite --pages N --seed S`` prints its port on stdout and serves until it
is terminated. ``GET /__log`` (never linked) returns every request so far as JSON, each
``[path_qs, start, end]`` in wall-clock seconds (``end`` null while still being answered),
so a test can tell which requests were in flight when it killed the crawler; ``GET
/__count`` returns how many requests were logged.

The link graph is built from ``(pages, seed)`` alone, so the test builds the same
``KillSite`` and knows what a correct crawl fetches (:meth:`KillSite.expected`) without
asking the crawler. Every kind of link the crawler follows is on it: ``<a href>`` written
relative, ``../``-relative, root-relative, absolute, with a fragment, an empty query, dot
segments, credentials, an upper-case scheme and host; ``<area href>``, ``<iframe src>``,
``<frame src>`` in a frameset, ``<meta http-equiv=refresh>``, ``<base href>``; redirects
(301/302/303/307/308, each to a page that is also linked directly); query-string pages;
404s. Never fetched: ``/private/`` (robots.txt disallows it), other hosts, ``mailto:``.
Some pages answer slowly (``slow_seconds``), so that requests are in flight at a kill.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from dataclasses import dataclass, field

from aiohttp import web

ROBOTS = "User-agent: *\nDisallow: /private/\n"
REDIRECT_CODES = (301, 302, 303, 307, 308)


@dataclass
class KillSite:
    """The link graph: for each path, the links as written and the path each resolves to."""

    pages: int = 200
    seed: int = 1
    slow_every: int = 12  # every k-th page is slow
    slow_seconds: float = 0.25
    fast_seconds: float = 0.05  # other pages take up to this long (0 .. fast_seconds)
    # path -> [(href as written, with ABS/UPPER/CRED placeholders; target path or None)]
    links: dict[str, list[tuple[str, str | None]]] = field(default_factory=dict)
    redirects: dict[str, tuple[int, str]] = field(default_factory=dict)
    kinds: dict[str, str] = field(default_factory=dict)  # path -> "frameset", "refresh", ...

    def __post_init__(self) -> None:
        rng = random.Random(self.seed)
        n = self.pages
        links = self.links
        links["/"] = [("/p/0.html", "/p/0.html"), ("/q?page=0", "/q?page=0")]
        for i in range(n):
            own: list[tuple[str, str | None]] = [(f"{(i + 1) % n}.html", f"/p/{(i + 1) % n}.html")]
            for _ in range(rng.randrange(2, 6)):
                j = rng.randrange(n)
                target = f"/p/{j}.html"
                form = rng.choice(
                    [
                        f"{j}.html",
                        f"../p/{j}.html",
                        f"/p/{j}.html#s{j}",
                        f"ABS/p/{j}.html",
                        f"./{j}.html?",
                        f"/p/./x/../{j}.html",
                        f"CRED/p/{j}.html",
                        f"UPPER/p/{j}.html",
                    ]
                )
                own.append((form, target))
            if i % 9 == 0:
                own.append((f"/r/{i}", f"/r/{i}"))
                self.redirects[f"/r/{i}"] = (
                    REDIRECT_CODES[i % len(REDIRECT_CODES)],
                    f"/p/{(i * 7 + 3) % n}.html",
                )
            if i % 13 == 0:
                own.append((f"/missing/{i}", f"/missing/{i}"))
                own.append((f"/private/{i}.html", f"/private/{i}.html"))
            if i % 17 == 0:
                own.append(("http://other.invalid/x", None))
                own.append(("mailto:a@b.example", None))
            if i % 20 == 0:
                k = i // 20
                for kind in ("frameset", "iframe", "area", "refresh", "base"):
                    own.append((f"/k/{kind}/{k}.html", f"/k/{kind}/{k}.html"))
                    self.kinds[f"/k/{kind}/{k}.html"] = kind
                    links[f"/k/{kind}/{k}.html"] = [
                        (f"/k/{kind}/{k}-only.html", f"/k/{kind}/{k}-only.html")
                    ]
                    links[f"/k/{kind}/{k}-only.html"] = [(f"/p/{j}.html", f"/p/{j}.html")]
            if i % 30 == 0:
                own.append((f"/q?page={i // 30 + 1}", f"/q?page={i // 30 + 1}"))
            links[f"/p/{i}.html"] = own
        for q in range(n // 30 + 2):
            links[f"/q?page={q}"] = [(f"/p/{(q * 31) % n}.html", f"/p/{(q * 31) % n}.html")]
            if q + 1 < n // 30 + 2:
                links[f"/q?page={q}"].append((f"?page={q + 1}", f"/q?page={q + 1}"))

    # -- what a correct crawl does --

    def expected(self) -> tuple[set[str], set[str]]:
        """(path_qs a correct crawl from ``/`` GETs, in-scope URLs it discovers).

        Discovered includes ``/private/`` (listed, never fetched) and the 404s (fetched).
        """
        seen = {"/"}
        todo = ["/"]
        fetched: set[str] = set()
        while todo:
            path = todo.pop()
            if path.startswith("/private/"):
                continue
            fetched.add(path)
            if path in self.redirects:
                target = self.redirects[path][1]
                fetched.add(target)  # followed in-line, or fetched as its own request
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
                continue
            for _, target in self.links.get(path, []):
                if target is not None and target not in seen:
                    seen.add(target)
                    todo.append(target)
        return fetched, seen

    def delay(self, path: str) -> float:
        """Seconds before ``path`` is answered: the same in every process."""
        h = _stable(path)
        if h % self.slow_every == 0:
            return self.slow_seconds
        return self.fast_seconds * (h % 1000) / 1000

    # -- rendering --

    def render(self, path: str, origin: str) -> str:
        host = origin.split("//", 1)[1]
        hrefs = []
        for href, _ in self.links[path]:
            if href.startswith("ABS/"):
                href = origin + href[3:]
            elif href.startswith("CRED/"):
                href = f"http://user:pw@{host}{href[4:]}"
            elif href.startswith("UPPER/"):
                href = f"HTTP://{host.upper()}{href[5:]}"
            hrefs.append(href)
        kind = self.kinds.get(path)
        head = "<meta charset=utf-8><title>t</title>"
        if kind == "frameset":
            frames = "".join(f'<frame src="{h}">' for h in hrefs)
            return f"<!doctype html><html><head>{head}</head><frameset>{frames}</frameset></html>"
        if kind == "iframe":
            body = "".join(f'<iframe src="{h}"></iframe>' for h in hrefs)
        elif kind == "area":
            areas = "".join(f'<area shape=rect coords="0,0,1,1" href="{h}">' for h in hrefs)
            body = f'<map name=m>{areas}</map><img usemap="#m" alt="">'
        elif kind == "refresh":
            head += f'<meta http-equiv="refresh" content="0; url={hrefs[0]}">'
            body = "<p>moved</p>"
        elif kind == "base":
            # every href is root-relative here: written relative to a <base> that says so
            head += '<base href="/">'
            body = "".join(f'<a href="{h.lstrip("/")}">x</a>' for h in hrefs)
        else:
            body = "<ul>" + "".join(f'<li><a href="{h}">link</a></li>' for h in hrefs) + "</ul>"
        filler = "<p>" + "filler text " * 40 + "</p>"
        return f"<!doctype html><html><head>{head}</head><body>{body}{filler}</body></html>"

    # -- the server --

    def app(self) -> web.Application:
        log: list[list[object]] = []

        async def handle(request: web.Request) -> web.StreamResponse:
            key = request.path_qs
            if key == "/__log":
                return web.Response(text=json.dumps(log), content_type="application/json")
            if key == "/__count":
                return web.Response(text=str(len(log)))
            entry: list[object] = [key, time.time(), None]
            log.append(entry)
            try:
                return await self._answer(request, key)
            finally:
                entry[2] = time.time()

        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", handle)
        return app

    async def _answer(self, request: web.Request, key: str) -> web.StreamResponse:
        await asyncio.sleep(self.delay(key))
        if key == "/robots.txt":
            return web.Response(text=ROBOTS)
        if key in self.redirects:
            code, target = self.redirects[key]
            return web.Response(status=code, headers={"Location": target})
        if key in self.links:
            origin = f"http://{request.host}"
            return web.Response(text=self.render(key, origin), content_type="text/html")
        raise web.HTTPNotFound()


def _stable(text: str) -> int:
    """A hash that is the same in every process (``hash`` of a str is not)."""
    h = 0
    for ch in text.encode():
        h = (h * 31 + ch) & 0xFFFFFFFF
    return h


async def _serve(site: KillSite, port: int) -> None:
    runner = web.AppRunner(site.app(), access_log=None)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", port)
    await tcp.start()
    server = tcp._server  # noqa: SLF001 - the bound port of port 0
    assert server is not None
    bound = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    print(bound, flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="the kill-and-resume test site")
    ap.add_argument("--pages", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--slow-seconds", type=float, default=0.25)
    args = ap.parse_args(argv)
    site = KillSite(pages=args.pages, seed=args.seed, slow_seconds=args.slow_seconds)
    try:
        asyncio.run(_serve(site, args.port))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
