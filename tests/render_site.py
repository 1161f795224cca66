"""A local client-rendered site (issue 24): links that only JavaScript makes, and hostile pages.

Two hosts, both on loopback: the site itself (``render_app``, e.g. on 127.0.0.1) and "another
host" (``other_app``, on 127.0.0.2: a CDN script, an API the browser must not reach, a landing
page a script navigates to). Both log every request they answer in one :class:`RenderLog`
(host, path, headers, start/end, how many requests to that host were in flight), so a test can
check what a browser fetched: scope, robots.txt, politeness and credentials.

``PAGES`` says, for every page of the site, whether a browser is needed to see all its links
(``needs_render``), which links only the rendered DOM has (``rendered_only``, absolute paths on
the site) and what the page is (``kind``); the auto rule's tests and measurements read it rather
than a copy. The home page ``/`` links to every page (statically), so a crawl from ``/`` sees
them all without a browser; what the browser adds is the ``rendered_only`` links.

Three generated sites of ``n`` pages share one link graph (page ``i`` links to ``2i+1`` and
``2i+2``): ``/spa/i`` (every page client-rendered from a JSON fetch), ``/ssr/i`` (the same links
in the HTML) and ``/mix/i`` (client-rendered when ``i % js_every == 0``, the rest static): the
benchmarks' sites (render24a's benchmarks/render.py, the auto-rule cost).

Run on its own (for a benchmark or by hand)::

    python -m tests.render_site [--host 127.0.0.1] [--port 0] [--other-host 127.0.0.2] [--pages 100]

prints one JSON line ``{"site": URL, "other": URL}`` and serves until SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import signal
import time
from dataclasses import dataclass, field

from aiohttp import web

ROBOTS = "User-agent: *\nDisallow: /private/\n"

_HEAD = "<!doctype html><html lang=en><head><meta charset=utf-8><title>{title}</title></head>"


@dataclass(frozen=True)
class PageSpec:
    kind: str  # "static", "spa", "hostile"
    needs_render: bool  # a browser is needed to see all the page's links
    rendered_only: tuple[str, ...] = ()  # paths (on the site) only the rendered DOM links to


# The links each client-rendered page makes (paths on the site; "#..." fragments kept off).
PAGES: dict[str, PageSpec] = {
    "/": PageSpec("static", False),
    "/docs/analytics": PageSpec("static", False),
    "/docs/guide": PageSpec("static", False),
    "/app/fetch": PageSpec("spa", True, ("/app/fetched/1", "/app/fetched/2")),
    "/app/timer": PageSpec("spa", True, ("/app/timed",)),
    "/app/router": PageSpec("spa", True, ("/app/router/inner/deep",)),
    "/app/hash": PageSpec("spa", True, ("/app/hash-target",)),
    "/app/shadow": PageSpec("spa", True, ("/app/shadow-target",)),
    "/app/slow": PageSpec("spa", True, ("/app/slow-target",)),
    "/app/fragments": PageSpec("spa", True, ("/app/fragments-ok",)),
    "/app/robots": PageSpec("spa", True, ("/app/robots-ok",)),
    "/app/scope": PageSpec("spa", True, ("/app/from-cdn",)),
    "/app/polite": PageSpec("spa", True, tuple(f"/app/polite/{i}" for i in range(6))),
    "/app/auth": PageSpec("spa", True, ("/app/auth-ok",)),
    "/hostile/forever": PageSpec("hostile", True, ("/hostile/forever/0",)),
    "/hostile/dialogs": PageSpec("hostile", True, ("/hostile/after-dialogs",)),
    "/hostile/popup": PageSpec("hostile", True, ("/hostile/after-popup",)),
    "/hostile/away": PageSpec("hostile", True, ("/hostile/before-away",)),
    "/hostile/memory": PageSpec("hostile", True, ("/hostile/memory-target",)),
}

# Links a correct browser must NOT produce (the request that would make them is forbidden).
FORBIDDEN_LINKS = ("/app/private-leak", "/app/other-leak")
# Paths the browser must never request (robots.txt; blocked resource types).
NEVER_REQUESTED = ("/private/data.json", "/img/pic.png", "/css/site.css", "/fonts/f.woff2")
# Paths on the other host the browser may request (a CDN script) and must not.
OTHER_ALLOWED = ("/cdn/lib.js",)
OTHER_FORBIDDEN = ("/api/other.json", "/landing")

# Every page that is a target of a rendered-only link answers 200 with a small static page.
_TARGETS = {link for spec in PAGES.values() for link in spec.rendered_only}

_PROSE = (
    "<p>This guide explains how the pieces of the system fit together: the configuration file, "
    "the command line, and the library. Each section starts with an example, then lists the "
    "options and what they change. Read the overview first if you are new here.</p>"
)


@dataclass
class Hit:
    host: str  # "site" or "other"
    path: str  # path and query
    headers: dict[str, str]
    start: float
    end: float | None = None
    in_flight: int = 1  # requests to this host in progress when this one started, itself included


@dataclass
class RenderLog:
    """Every request both hosts answered, in arrival order."""

    hits: list[Hit] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=lambda: {"site": 0, "other": 0})
    max_in_flight: dict[str, int] = field(default_factory=lambda: {"site": 0, "other": 0})

    def paths(self, host: str = "site") -> list[str]:
        return [hit.path for hit in self.hits if hit.host == host]

    def browser_hits(self, host: str = "site") -> list[Hit]:
        """The requests a browser made (Chromium sends Sec-Fetch-Mode; the crawler does not)."""
        return [h for h in self.hits if h.host == host and "sec-fetch-mode" in h.headers]

    def clear(self) -> None:
        self.hits.clear()
        self.in_flight = {"site": 0, "other": 0}
        self.max_in_flight = {"site": 0, "other": 0}


@dataclass
class RenderSite:
    """The site's settings: where the other host is, the generated sites' size."""

    other: str = ""  # "http://127.0.0.2:PORT" once the other host listens
    pages: int = 30  # pages of each generated site (/spa/, /ssr/, /mix/)
    js_every: int = 10  # /mix/i is client-rendered when i % js_every == 0
    api_delay: float = 0.1  # seconds each /api/slow/ answer takes (politeness shows)
    memory_mb: int = 2048  # what /hostile/memory tries to allocate
    log: RenderLog = field(default_factory=RenderLog)
    #: in the never-settling page's tick URLs (/api/tick.json?TOKEN-N): a tick from a tab of
    #: another site's crawl (a browser that outlived its crawl, a port used again) shows
    token: str = field(default_factory=lambda: secrets.token_hex(4))


def _page(title: str, body: str, head: str = "") -> str:
    return (
        _HEAD.format(title=title).replace("</head>", head + "</head>")
        + f"<body>{body}</body></html>"
    )


def _links_script(expr: str, where: str = "root") -> str:
    """JS adding an <a> for each path of the array ``expr`` into the element ``#where``."""
    return (
        f"(function(paths){{var el=document.getElementById('{where}');"
        "paths.forEach(function(p){var a=document.createElement('a');a.href=p;"
        "a.textContent=p;el.appendChild(a);});})"
        f"({expr});"
    )


def _home() -> str:
    items = "".join(f'<li><a href="{path}">{path}</a></li>' for path in PAGES if path != "/")
    extra = (
        '<li><a href="/app/fragments#made-by-js">made by js</a></li>'
        '<li><a href="/app/fragments#not-there">not there</a></li>'
    )
    return _page("Render test site", f"<h1>Render test site</h1>{_PROSE}<ul>{items}{extra}</ul>")


def _doc(title: str, analytics: bool) -> str:
    links = "".join(f'<li><a href="/docs/guide#s{i}">Section {i}</a></li>' for i in range(8))
    head = ""
    if analytics:
        # What a static documentation site carries: an async analytics tag, a consent stub.
        head = (
            '<script async src="/js/analytics.js"></script>'
            "<script>window.dataLayer=window.dataLayer||[];function gtag(){dataLayer.push("
            "arguments);}gtag('js',new Date());gtag('config','G-TEST123');</script>"
        )
    body = f"<h1>{title}</h1><nav><ul>{links}</ul></nav>" + _PROSE * 4 + '<a href="/">Home</a>'
    return _page(title, body, head)


def _spa(title: str, script: str, mount: str = '<div id="root"></div>', head: str = "") -> str:
    return _page(title, f"{mount}<script>{script}</script>", head)


def _pages(site: RenderSite) -> dict[str, str]:
    other = site.other
    bundle = "/*" + " webpack runtime chunk " * 300 + "*/"  # a bundle's weight, inline
    return {
        "/": _home(),
        "/docs/analytics": _doc("Analytics on a static page", analytics=True),
        "/docs/guide": _doc("Guide", analytics=False),
        "/app/fetch": _page("Fetch", '<div id="root"></div><script src="/js/fetch.js"></script>'),
        "/app/timer": _spa(
            "Timer",
            "setTimeout(function(){" + _links_script("['/app/timed']", "main") + "},300);",
            mount="<noscript>You need to enable JavaScript to run this app.</noscript>"
            '<div id="main"></div>',
        ),
        "/app/router": _spa(
            "Router",
            "history.pushState({}, '', '/app/router/inner/');"
            + _links_script("['deep']", "__next"),
            mount='<div id="__next"></div><script id="__NEXT_DATA__" type="application/json">'
            '{"props":{"pageProps":{}},"page":"/app/router"}</script>',
        ),
        "/app/hash": _spa(
            "Hash",
            "location.hash='#/home';" + _links_script("['#/about','/app/hash-target']", "app"),
            mount='<div id="app"></div>',
        ),
        "/app/shadow": _spa(
            "Shadow",
            bundle
            + "customElements.define('my-nav',class extends HTMLElement{constructor(){super();"
            "var r=this.attachShadow({mode:'open'});"
            "r.innerHTML='<a href=\"/app/shadow-target\">in the shadow</a>';}});",
            mount="<my-nav></my-nav>",
        ),
        "/app/slow": _spa(
            "Slow", "setTimeout(function(){" + _links_script("['/app/slow-target']") + "},2000);"
        ),
        "/app/fragments": _spa(
            "Fragments",
            "var s=document.createElement('section');s.id='made-by-js';"
            "document.getElementById('root').appendChild(s);"
            + _links_script("['/app/fragments-ok']"),
        ),
        "/app/robots": _spa(
            "Robots",
            "fetch('/private/data.json').then(function(r){return r.json();})"
            ".then(function(d){" + _links_script("d.links") + "}).catch(function(){});"
            "fetch('/api/robots-ok.json').then(function(r){return r.json();})"
            ".then(function(d){" + _links_script("d.links") + "});",
        ),
        "/app/scope": _page(
            "Scope",
            '<div id="root"></div><img src="/img/pic.png">'
            f'<script src="{other}/cdn/lib.js"></script>'
            "<script>" + _links_script("[window.cdnLink]") + f"fetch('{other}/api/other.json')"
            ".then(function(r){return r.json();}).then(function(d){"
            + _links_script("d.links")
            + "}).catch(function(){});</script>",
            head='<link rel="stylesheet" href="/css/site.css">'
            "<style>@font-face{font-family:f;src:url(/fonts/f.woff2)}body{font-family:f}</style>",
        ),
        "/app/polite": _spa(
            "Polite",
            "for(var i=0;i<6;i++){(function(i){fetch('/api/slow/'+i+'.json')"
            ".then(function(r){return r.json();}).then(function(d){"
            + _links_script("d.links")
            + "});})(i);}",
        ),
        "/app/auth": _spa(
            "Auth",
            "fetch('/api/me.json').then(function(r){return r.json();}).then(function(d){"
            + _links_script("d.links")
            + "});",
        ),
        "/hostile/forever": _spa(
            "Forever",
            "var n=0;setInterval(function(){"
            + _links_script("['/hostile/forever/'+n]")
            + f"n++;fetch('/api/tick.json?{site.token}-'+n).catch(function(){{}});}},50);",
        ),
        "/hostile/dialogs": _spa(
            "Dialogs",
            "window.onbeforeunload=function(e){e.preventDefault();e.returnValue='stay';"
            "return 'stay';};alert('hello');confirm('sure?');prompt('name?');"
            + _links_script("['/hostile/after-dialogs']"),
        ),
        "/hostile/popup": _spa(
            "Popup",
            "window.open('/hostile/popped');window.open('"
            + other
            + "/landing');"
            + _links_script("['/hostile/after-popup']"),
        ),
        "/hostile/away": _spa(
            "Away",
            _links_script("['/hostile/before-away']")
            + "setTimeout(function(){location.href='"
            + other
            + "/landing';},100);",
        ),
        "/hostile/memory": _spa(
            "Memory",
            _links_script("['/hostile/memory-target']")
            + "var keep=[];setTimeout(function grow(){for(var i=0;i<8;i++){"
            "keep.push(new Float64Array(16*1024*1024/8).fill(Math.random()));}"
            f"if(keep.length*16<{site.memory_mb})setTimeout(grow,0);}},0);",
        ),
    }


def _api(path: str, site: RenderSite) -> object | None:
    """The JSON the site's scripts fetch (None: not an API path)."""
    if path == "/api/links.json":
        return {"links": ["/app/fetched/1", "/app/fetched/2"]}
    if path == "/api/robots-ok.json":
        return {"links": ["/app/robots-ok"]}
    if path == "/private/data.json":
        return {"links": ["/app/private-leak"]}
    if path.startswith("/api/slow/") and path.endswith(".json"):
        return {"links": [f"/app/polite/{path[len('/api/slow/') : -len('.json')]}"]}
    if path == "/api/me.json":
        return {"links": ["/app/auth-ok"]}
    if path.startswith("/api/tick.json"):
        return {}
    if path.startswith("/api/spa/") and path.endswith(".json"):
        i = int(path[len("/api/spa/") : -len(".json")])
        return {"links": [f"/spa/{j}" for j in _children(i, site.pages)]}
    return None


#: /enhanced/: a page the auto rule does not render (its 24 static links), whose script adds
#: one more (/enhanced/extra): what --render-sample is for. Not linked from the home page.
ENHANCED_LEAVES = 24


def _enhanced(path: str) -> str | None:
    if path == "/enhanced/":
        links = "".join(f'<a href="/enhanced/{i}">{i}</a> ' for i in range(ENHANCED_LEAVES))
        script = (
            "<script>var a=document.createElement('a');a.href='/enhanced/extra';"
            "a.textContent='extra';document.body.append(a);</script>"
        )
        return _page("enhanced", f"<nav>{links}</nav>{script}")
    rest = path[len("/enhanced/") :] if path.startswith("/enhanced/") else ""
    if rest == "extra" or rest.isdigit():
        return _page(path, f"<p>{path}</p>")
    return None


def _children(i: int, n: int) -> list[int]:
    return [j for j in (2 * i + 1, 2 * i + 2) if j < n]


def _generated(path: str, site: RenderSite) -> str | None:
    """/spa/i, /ssr/i and /mix/i (None: not one of them)."""
    for prefix in ("/spa/", "/ssr/", "/mix/"):
        if path.startswith(prefix) and path[len(prefix) :].isdigit():
            i = int(path[len(prefix) :])
            if i >= site.pages:
                return None
            client = prefix == "/spa/" or (prefix == "/mix/" and i % site.js_every == 0)
            if client:
                script = (
                    f"fetch('/api/spa/{i}.json').then(function(r){{return r.json();}})"
                    ".then(function(d){"
                    + _links_script(
                        f"d.links.map(function(p){{return p.replace('/spa/','{prefix}');}})"
                    )
                    + "});"
                )
                return _page(f"Page {i}", f'<div id="root"></div><script>{script}</script>')
            links = "".join(
                f'<li><a href="{prefix}{j}">Page {j}</a></li>' for j in _children(i, site.pages)
            )
            return _page(f"Page {i}", f"<h1>Page {i}</h1>{_PROSE * 3}<ul>{links}</ul>")
    return None


_SCRIPTS = {
    "/js/fetch.js": "fetch('/api/links.json').then(function(r){return r.json();})"
    ".then(function(d){" + _links_script("d.links") + "});",
    "/js/analytics.js": "(function(){var i=new Image();i.src='/collect?v=1';})();",
}


def _logged(site: RenderSite, host: str, handler: web.Handler) -> web.Handler:
    log = site.log

    async def handle(request: web.Request) -> web.StreamResponse:
        log.in_flight[host] += 1
        log.max_in_flight[host] = max(log.max_in_flight[host], log.in_flight[host])
        hit = Hit(
            host,
            request.path_qs,
            {k.lower(): v for k, v in request.headers.items()},
            time.monotonic(),
            in_flight=log.in_flight[host],
        )
        log.hits.append(hit)
        try:
            return await handler(request)
        finally:
            hit.end = time.monotonic()
            log.in_flight[host] -= 1

    return handle


def render_app(site: RenderSite) -> web.Application:
    """The site. ``site.other`` must be set before the first request (pages embed it)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        if path == "/robots.txt":
            return web.Response(text=ROBOTS)
        if path.startswith("/api/slow/"):
            await asyncio.sleep(site.api_delay)
        data = _api(path, site)
        if data is not None:
            return web.json_response(data)
        if path in _SCRIPTS:
            return web.Response(text=_SCRIPTS[path], content_type="application/javascript")
        page = _pages(site).get(path)
        if page is None:
            page = _generated(path, site) or _enhanced(path)
        if page is None and (path in _TARGETS or path.startswith(("/app/", "/hostile/"))):
            page = _page(path, f"<p>{path}</p>")
        if page is None:
            raise web.HTTPNotFound()
        return web.Response(text=page, content_type="text/html")

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", _logged(site, "site", handle))
    return app


def other_app(site: RenderSite) -> web.Application:
    """The other host: a CDN script (allowed), an API and a landing page (not for the browser)."""

    async def handle(request: web.Request) -> web.StreamResponse:
        if request.path == "/cdn/lib.js":
            return web.Response(
                text="window.cdnLink='/app/from-cdn';", content_type="application/javascript"
            )
        if request.path == "/api/other.json":
            return web.json_response({"links": ["/app/other-leak"]})
        if request.path == "/landing":
            return web.Response(
                text=_page("Landing", '<a href="/elsewhere">x</a>'), content_type="text/html"
            )
        raise web.HTTPNotFound()

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", _logged(site, "other", handle))
    return app


async def start(
    site: RenderSite, host: str = "127.0.0.1", port: int = 0, other_host: str = "127.0.0.2"
) -> tuple[str, str, list[web.AppRunner]]:
    """Serve both hosts; returns (site URL, other URL, the runners to clean up)."""
    runners = []
    urls = []
    for app_of, address, bind_port in ((other_app, other_host, 0), (render_app, host, port)):
        runner = web.AppRunner(app_of(site), access_log=None)
        await runner.setup()
        tcp = web.TCPSite(runner, address, bind_port)
        await tcp.start()
        server = tcp._server  # noqa: SLF001 - the bound port of port 0
        assert server is not None
        bound = int(server.sockets[0].getsockname()[1])  # type: ignore[attr-defined]
        urls.append(f"http://{address}:{bound}")
        runners.append(runner)
        if app_of is other_app:
            site.other = urls[0]
    return urls[1], urls[0], runners


async def _main(args: argparse.Namespace) -> None:
    site = RenderSite(pages=args.pages, js_every=args.js_every)
    url, other, runners = await start(site, args.host, args.port, args.other_host)
    print(json.dumps({"site": url, "other": other}), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for runner in runners:
        await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--other-host", default="127.0.0.2")
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--js-every", type=int, default=10)
    asyncio.run(_main(parser.parse_args()))
