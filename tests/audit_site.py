"""A site built to hold every finding of ``crawler audit`` exactly once, and its near misses.

``EXPECTED`` is the planted findings, (kind, path); ``site_app()`` serves the site. A mesh of
ordinary pages link each other (every page of it has many inlinks, depth 1, outlinks); each
planted page breaks one rule. Near misses, which must give nothing: ``/about`` is its own
canonical, ``/en`` and ``/de`` are a reciprocal hreflang pair with x-default (also in the
sitemap's ``xhtml:link``s), ``/old-near`` redirects to ``/new`` and the site links ``/new``
itself, ``/da`` lists ``/sv`` and is listed back.
"""

from __future__ import annotations

from aiohttp import web

# Pages every mesh page links (the mesh links itself fully).
MESH = (
    "/",
    "/about",
    "/new",
    "/hub",
    "/en",
    "/de",
    "/fr",
    "/it",
    "/es",
    "/nl",
    "/pl",
    "/sv",
    "/da",
    "/c-404",
    "/c-redir",
    "/c-out",
    "/c-chain",
    "/c-mid",
    "/c-conflict",
    "/dup",
    "/dead-end",
    "/noindexed",
    "/private/secret",
)

#: (kind, path) of every finding the site holds.
EXPECTED = {
    ("orphan", "/orphan"),
    ("redirect", "/moved"),
    # a sitemap URL linked only through a redirect: the redirect is a finding, not an orphan
    ("redirect", "/old-link"),
    ("redirect_chain", "/chain-start"),
    ("redirect_loop", "/loop-a"),
    ("canonical_not_ok", "/c-404"),
    ("canonical_redirect", "/c-redir"),
    ("canonical_out_of_scope", "/c-out"),
    ("canonical_chain", "/c-chain"),
    ("canonical_conflict", "/c-conflict"),
    # a page whose canonical is another URL, linked by the site: each of these pages
    ("link_to_non_canonical", "/dup"),
    ("link_to_non_canonical", "/c-404"),
    ("link_to_non_canonical", "/c-redir"),
    ("link_to_non_canonical", "/c-out"),
    ("link_to_non_canonical", "/c-chain"),
    ("link_to_non_canonical", "/c-mid"),
    ("hreflang_no_return", "/fr"),
    ("hreflang_target_not_ok", "/es"),
    ("hreflang_target_non_canonical", "/nl"),
    ("hreflang_invalid_code", "/pl"),
    ("hreflang_no_x_default", "/sv"),
    ("deep_page", "/d5"),
    ("single_inlink", "/single"),
    ("nofollow_inlinks_only", "/nf"),
    ("no_outlinks", "/dead-end"),
    ("linked_noindex", "/noindexed"),
    ("linked_disallowed", "/private/secret"),
}

# path -> (canonical in the HTML, hreflang alternates (code, path), extra head lines)
_HEADS: dict[str, tuple[str | None, tuple[tuple[str, str], ...], str]] = {
    "/about": ("/about", (), ""),
    "/en": (None, (("en", "/en"), ("de", "/de"), ("x-default", "/en")), ""),
    "/de": (None, (("en", "/en"), ("de", "/de"), ("x-default", "/en")), ""),
    "/fr": (None, (("fr", "/fr"), ("it", "/it"), ("x-default", "/fr")), ""),
    "/it": (None, (("it", "/it"), ("x-default", "/it")), ""),
    "/es": (None, (("es", "/es"), ("pt", "/gone"), ("x-default", "/es")), ""),
    "/nl": (None, (("nl", "/nl"), ("sv", "/dup"), ("x-default", "/nl")), ""),
    "/pl": (None, (("pl", "/pl"), ("english", "/pl"), ("x-default", "/pl")), ""),
    "/sv": (None, (("sv", "/sv"), ("da", "/da")), ""),
    "/da": (None, (("sv", "/sv"), ("da", "/da"), ("x-default", "/da")), ""),
    "/c-404": ("/gone", (), ""),
    "/c-redir": ("/moved", (), ""),
    "/c-out": ("http://127.0.0.2:9/elsewhere", (), ""),
    "/c-chain": ("/c-mid", (), ""),
    "/c-mid": ("/about", (), ""),
    "/c-conflict": ("/c-conflict", (), ""),
    "/dup": ("/about", (), ""),
    "/noindexed": (None, (), '<meta name="robots" content="noindex, follow">'),
}
_HEADERS = {"/c-conflict": {"Link": '</about>; rel="canonical"'}}
_REDIRECTS = {
    "/moved": "/about",
    "/chain-start": "/chain-mid",
    "/chain-mid": "/hub",
    "/loop-a": "/loop-b",
    "/loop-b": "/loop-a",
    "/old-near": "/new",
    "/c-redir-target": "/about",
    "/old-link": "/via-redirect-only",
}
# page -> its links besides the mesh's: (path, rel)
_EXTRA: dict[str, list[tuple[str, str]]] = {
    "/": [
        ("/moved", ""),
        ("/chain-start", ""),
        ("/loop-a", ""),
        ("/single", ""),
        ("/nf", "nofollow"),
        ("/d1a", ""),
        ("/d1b", ""),
        ("/old-link", ""),
    ],
    "/about": [("/moved", ""), ("/nf", "nofollow"), ("/d1a", ""), ("/d1b", ""), ("/old-link", "")],
}
for _level in range(1, 4):
    for _side in "ab":
        _EXTRA[f"/d{_level}{_side}"] = [
            (f"/d{_level + 1}a", ""),
            (f"/d{_level + 1}b", ""),
            ("/", ""),
        ]
_EXTRA["/d4a"] = [("/d5", ""), ("/", "")]
_EXTRA["/d4b"] = [("/d5", ""), ("/", "")]
for _path in ("/d5", "/single", "/nf", "/orphan", "/via-redirect-only"):
    _EXTRA[_path] = [("/", "")]


def _page(path: str) -> str:
    canonical, alternates, extra = _HEADS.get(path, (None, (), ""))
    head = [f"<title>{path}</title>"]
    if canonical is not None:
        head.append(f'<link rel="canonical" href="{canonical}">')
    for code, href in alternates:
        head.append(f'<link rel="alternate" hreflang="{code}" href="{href}">')
    if extra:
        head.append(extra)
    links: list[tuple[str, str]] = []
    if path in MESH and path != "/dead-end":
        links = [(p, "") for p in MESH if p != path]
    links += _EXTRA.get(path, [])
    body = "\n".join(
        f'<a href="{href}"{f" rel={rel}" if rel else ""}>{href}</a>' for href, rel in links
    )
    return (
        "<!doctype html>\n<html><head>\n"
        + "\n".join(head)
        + f"\n</head><body>\n{body}\n</body></html>\n"
    )


def _sitemap(base: str) -> str:
    alternates = "".join(
        f'<xhtml:link rel="alternate" hreflang="{code}" href="{base}{href}"/>'
        for code, href in _HEADS["/en"][1]
    )
    urls = [
        f"<url><loc>{base}/</loc></url>",
        f"<url><loc>{base}/about</loc></url>",
        f"<url><loc>{base}/orphan</loc></url>",
        f"<url><loc>{base}/via-redirect-only</loc></url>",
        f"<url><loc>{base}/en</loc>{alternates}</url>",
    ]
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:xhtml="http://www.w3.org/1999/xhtml">\n' + "\n".join(urls) + "\n</urlset>\n"
    )


def site_app() -> web.Application:
    """The site; its robots.txt names a sitemap index, which names the sitemap."""

    async def handle(request: web.Request) -> web.StreamResponse:
        path = request.path
        base = f"http://{request.host}"
        if path == "/robots.txt":
            text = f"User-agent: *\nDisallow: /private\nSitemap: {base}/sitemap-index.xml\n"
            return web.Response(text=text)
        if path == "/sitemap-index.xml":
            return web.Response(
                text='<?xml version="1.0"?>\n<sitemapindex '
                'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
                f"<sitemap><loc>{base}/sitemap.xml</loc></sitemap>\n</sitemapindex>\n",
                content_type="application/xml",
            )
        if path == "/sitemap.xml":
            return web.Response(text=_sitemap(base), content_type="application/xml")
        if path in _REDIRECTS:
            raise web.HTTPMovedPermanently(_REDIRECTS[path])
        known = set(MESH) | set(_EXTRA) | set(_HEADS)
        if path not in known or path == "/private/secret":
            raise web.HTTPNotFound()
        return web.Response(
            text=_page(path), content_type="text/html", headers=_HEADERS.get(path, {})
        )

    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", handle)
    app.router.add_route("HEAD", "/{tail:.*}", handle)
    return app
