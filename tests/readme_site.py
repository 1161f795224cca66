"""The small blog the README's examples crawl: ``python -m tests.readme_site [--port 8080]``.

It serves on 127.0.0.1 (this sandbox reaches nothing else): a home page, an about page, a
paginated blog of 30 posts, tag pages that robots.txt disallows, a contact page behind a
redirect, one post that always answers 500, and links out (GitHub, mailto:). Run it, then the
README's commands against ``http://127.0.0.1:8080/``.
"""

from __future__ import annotations

import argparse

from aiohttp import web

POSTS = 30
PER_PAGE = 10
BROKEN = "/blog/post-13.html"  # always 500: the README's one failed page
ROBOTS = "User-agent: *\nDisallow: /tags/\n"


def _page(title: str, hrefs: list[str]) -> str:
    links = "".join(f'<li><a href="{h}">{h}</a></li>' for h in hrefs)
    head = f"<!doctype html><html><head><title>{title}</title></head>"
    return f"{head}<body><ul>{links}</ul></body></html>"


def _blog(page: int) -> str:
    first = (page - 1) * PER_PAGE + 1
    hrefs = ["/", "/blog/", "/about"]
    hrefs += [f"/blog/post-{n}.html" for n in range(first, min(first + PER_PAGE, POSTS + 1))]
    if first + PER_PAGE <= POSTS:
        hrefs.append(f"/blog/?page={page + 1}")
    return _page(f"Blog, page {page}", hrefs)


def _post(n: int) -> str:
    return _page(f"Post {n}", ["/blog/", f"/tags/t{n % 3 + 1}", "/old-contact"])


PAGES: dict[str, str] = {
    "/": _page("Home", ["/", "/blog/", "/about", "https://github.com/", "mailto:hi@example.org"]),
    "/about": _page("About", ["/", "/blog/", "/contact", "https://github.com/"]),
    "/contact": _page("Contact", ["/", "mailto:hi@example.org"]),
}


async def handle(request: web.Request) -> web.StreamResponse:
    path = request.path
    if path == "/robots.txt":
        return web.Response(text=ROBOTS)
    if path == "/old-contact":
        raise web.HTTPMovedPermanently(location="/contact")
    if path == BROKEN:
        return web.Response(status=500, text="oops")
    if path == "/blog/":
        return web.Response(
            text=_blog(int(request.query.get("page", "1"))), content_type="text/html"
        )
    if path.startswith("/blog/post-") and path.endswith(".html"):
        n = path[len("/blog/post-") : -len(".html")]
        if n.isdigit() and 1 <= int(n) <= POSTS:
            return web.Response(text=_post(int(n)), content_type="text/html")
    if path.startswith("/tags/"):
        return web.Response(text=_page("Tag", ["/blog/"]), content_type="text/html")
    if path in PAGES:
        return web.Response(text=PAGES[path], content_type="text/html")
    raise web.HTTPNotFound()


def app() -> web.Application:
    application = web.Application()
    application.router.add_route("GET", "/{tail:.*}", handle)
    return application


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8080)
    args = parser.parse_args()
    web.run_app(app(), host="127.0.0.1", port=args.port, print=None)


if __name__ == "__main__":
    main()
