"""Headless Chromium for the pages whose links only JavaScript makes (``--render``).

may import: http, urls, extract, config

A `Renderer` loads a page the crawl already fetched into a real Chromium (Debian's, driven by
Playwright over the DevTools protocol), lets its scripts run until what they scheduled is done
(or the page has been quiet a while, or the budget ends: `crawler.render.settle`), and
returns the DOM serialized (`Rendered`). The crawl feeds that HTML to its own extractor, so
the rendered link set follows the extractor's rules. What the browser may fetch is the crawl's
to decide (`RequestGate`: robots, scope, politeness, credentials); images, media, fonts and
stylesheets are never fetched.

Nothing of Playwright is imported until a `Renderer` starts: ``--render never`` costs nothing.
"""

from crawler.render.model import (
    RENDER_CRASH,
    RENDER_ERROR,
    RENDER_TIMEOUT,
    Rendered,
    RenderOptions,
    RenderUnavailable,
    RequestGate,
)
from crawler.render.renderer import Renderer

__all__ = [
    "RENDER_CRASH",
    "RENDER_ERROR",
    "RENDER_TIMEOUT",
    "RenderOptions",
    "RenderUnavailable",
    "Rendered",
    "Renderer",
    "RequestGate",
]
