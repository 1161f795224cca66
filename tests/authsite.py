"""Two local sites for the auth tests: one behind HTTP Basic, one that logs what it was sent.

``AuthSite`` demands ``Authorization: Basic`` for USER:PASSWORD on every path (401 with
``WWW-Authenticate`` otherwise). Its pages link to each other and redirect (``/away``) to the
``LogSite`` on ANOTHER origin (127.0.0.1, another port), which answers every request with a
small page and records the ``Authorization`` header (or None) of each request it got: the
proof that the credential never went there.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from aiohttp import web

USER = "crawl-user"
PASSWORD = "s3cret-Pa55word"
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


@dataclass
class LogSite:
    """Every request's path and Authorization header (None when absent), in order."""

    seen: list[tuple[str, str | None]] = field(default_factory=list)

    def app(self) -> web.Application:
        async def any_path(request: web.Request) -> web.Response:
            self.seen.append((request.path, request.headers.get("Authorization")))
            if request.path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n")
            return web.Response(
                text="<html><body><a href='/other/2'>two</a></body></html>",
                content_type="text/html",
            )

        app = web.Application()
        app.router.add_get("/{tail:.*}", any_path)
        return app


@dataclass
class AuthSite:
    """Basic-auth site; ``away`` is the LogSite's origin its /away redirects to."""

    away: str = ""
    user: str = USER
    password: str = PASSWORD
    ok: list[str] = field(default_factory=list)  # paths served with the right credentials
    refused: list[str] = field(default_factory=list)  # paths answered 401

    def app(self) -> web.Application:
        expected = "Basic " + base64.b64encode(f"{self.user}:{self.password}".encode()).decode()

        async def any_path(request: web.Request) -> web.StreamResponse:
            if request.headers.get("Authorization") != expected:
                self.refused.append(request.path)
                return web.Response(
                    status=401,
                    text="authentication required",
                    headers={"WWW-Authenticate": 'Basic realm="test", charset="UTF-8"'},
                )
            self.ok.append(request.path)
            if request.path == "/robots.txt":
                return web.Response(text="User-agent: *\nAllow: /\n")
            if request.path == "/away":
                raise web.HTTPFound(self.away + "/landing")
            links = "<a href='/a'>a</a> <a href='/b'>b</a> <a href='/away'>away</a>"
            return web.Response(text=f"<html><body>{links}</body></html>", content_type="text/html")

        app = web.Application()
        app.router.add_get("/{tail:.*}", any_path)
        return app
