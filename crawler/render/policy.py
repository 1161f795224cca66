"""What the browser may fetch while it renders a page: a sans-I/O decision per request.

The browser's requests pass here before the crawl's `RequestGate`. Images, media, fonts and
stylesheets never build links, so they are blocked without asking; scripts may come from any
host (CDNs), through the gate; XHR/fetch/EventSource only from the page's own site (its
registrable domain: ``api.example.com`` serves ``www.example.com``) or a host the crawl
crawls (the gate's optional ``crawls``), through the gate; any
other document than the page itself (a navigation away, a frame, a popup) is aborted so the
page stays what it is; everything else (websockets, beacons, manifests, ...) is blocked.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from urllib.parse import urlsplit

from crawler.urls.policy import registrable_domain

# Never fetched: they cannot add a link to the DOM.
BLOCKED_TYPES = frozenset({"image", "media", "font", "stylesheet", "imageset", "texttrack"})
# Fetched from the page's own site only (through the gate).
SAME_SITE_TYPES = frozenset({"xhr", "fetch", "eventsource"})
# Response headers of the fetched page that no longer describe the body it is fulfilled with
# (the crawl decoded it), or that would act on the browser's state.
_DROPPED_HEADERS = frozenset(
    {
        "content-encoding",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "set-cookie",
        "set-cookie2",
        "strict-transport-security",
        "alt-svc",
        "refresh",
        "location",
    }
)


class Verdict(Enum):
    BLOCK = "block"  # refuse it (a network error for the page)
    GATE = "gate"  # ask the crawl's gate
    ABORT_NAVIGATION = "abort_navigation"  # a document other than the page: the page stays


def _site(url: str) -> tuple[str, str] | None:
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not host:
        return None
    return parts.scheme, registrable_domain(host)


def decide(url: str, resource_type: str, page_url: str, *, crawled: bool = False) -> Verdict:
    """The verdict on one request of the page at ``page_url`` (the page's own document aside).

    ``crawled``: ``url``'s host is one the crawl crawls (the gate's ``crawls``): its
    XHR/fetch go to the gate too, whatever the site (another seed's host, its API)."""
    if resource_type == "document":
        return Verdict.ABORT_NAVIGATION
    if resource_type in BLOCKED_TYPES:
        return Verdict.BLOCK
    target = _site(url)
    if target is None:  # data:, blob: never reach the route; anything else non-http
        return Verdict.BLOCK
    if resource_type == "script":
        return Verdict.GATE
    if resource_type in SAME_SITE_TYPES:
        page = _site(page_url)
        same = page is not None and page[1] == target[1]
        return Verdict.GATE if same or crawled else Verdict.BLOCK
    return Verdict.BLOCK


def document_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The fetched page's response headers to fulfil the browser's navigation with.

    The body given to the browser is the decoded one the crawl holds, so its framing and
    encoding headers go; so do headers that would change the browser's state beyond the
    page (cookies, HSTS, redirects). Repeated headers are joined as HTTP allows (``, ``).
    """
    out: dict[str, str] = {}
    for name, value in headers.items():  # a multidict gives each repeat
        key = name.lower()
        if key in _DROPPED_HEADERS:
            continue
        out[key] = f"{out[key]}, {value}" if key in out else value
    out.setdefault("content-type", "text/html")
    return out
