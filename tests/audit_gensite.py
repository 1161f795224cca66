"""A generated site for the audit's differential tests (tests/test_audit_disk.py): ``pages``
pages in a ten-ary tree (page i links 10i+1..10i+10 and i+1), with, every so many pages, a
link to a redirect, a broken link, a canonical to the next page, a noindex, a nofollow-only
target, and sitemap URLs no page links. Served from the URL alone (aiohttp), ``delay``
seconds a page."""

from __future__ import annotations

import asyncio

from aiohttp import web


def _path(i: int) -> str:
    return "/" if i == 0 else f"/p/{i}"


def page_html(i: int, pages: int) -> str:
    head = [f'<link rel="canonical" href="{_path(i + 1 if i % 53 == 7 else i)}">']
    if i % 89 == 5:
        head.append('<meta name="robots" content="noindex">')
    body = [f'<a href="{_path(j)}">{j}</a>' for j in range(10 * i + 1, min(10 * i + 11, pages))]
    body.append(f'<a href="{_path((i + 1) % pages)}">next</a>')
    body.append(f'<a rel="nofollow" href="/nf/{i // 50}">nf</a>')
    if i % 97 == 3:
        body.append(f'<a href="/r/{i}">moved</a>')
    if i % 211 == 0:
        body.append(f'<a href="/gone/{i}">gone</a>')
    return (
        "<!doctype html>\n<html><head>\n"
        + "\n".join(head)
        + "\n</head><body>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def gen_app(pages: int, delay: float = 0.0) -> web.Application:
    async def page(request: web.Request) -> web.Response:
        if delay:
            await asyncio.sleep(delay)
        path = request.path
        i = 0 if path == "/" else int(path.rpartition("/")[2])
        if path.startswith("/p/") and not 0 < i < pages:
            raise web.HTTPNotFound()
        return web.Response(text=page_html(i, pages), content_type="text/html")

    async def redirect(request: web.Request) -> web.Response:
        i = int(request.match_info["i"])
        raise web.HTTPMovedPermanently(_path((i + 2) % pages))

    async def gone(request: web.Request) -> web.Response:
        raise web.HTTPNotFound()

    async def leaf(request: web.Request) -> web.Response:
        return web.Response(text="<html><body>leaf</body></html>", content_type="text/html")

    async def sitemap(request: web.Request) -> web.Response:
        base = f"{request.scheme}://{request.host}"
        urls = [_path(i) for i in range(0, pages, 7)] + [f"/orphan/{k}" for k in range(5)]
        body = "".join(f"<url><loc>{base}{u}</loc></url>\n" for u in urls)
        text = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{body}</urlset>\n"
        )
        return web.Response(text=text, content_type="application/xml")

    app = web.Application()
    app.router.add_get("/", page)
    app.router.add_get("/p/{i}", page)
    app.router.add_get("/r/{i}", redirect)
    app.router.add_get("/gone/{i}", gone)
    app.router.add_get("/nf/{i}", leaf)
    app.router.add_get("/orphan/{i}", leaf)
    app.router.add_get("/sitemap.xml", sitemap)
    return app
