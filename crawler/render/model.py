"""The renderer's contract with the crawl: options, the result, the gate, the errors.

Plain data and a protocol, no I/O: the crawl (crawler.core) builds these without importing
Playwright.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

# Error kinds of a `Rendered` (the crawl's output names them as they are).
# The budget ended before the page settled: html is what was there.
RENDER_TIMEOUT = "render_timeout"
RENDER_CRASH = "render_crash"  # the page's renderer or the whole browser died
RENDER_ERROR = "render_error"  # anything else; `Rendered.detail` says what


class RenderUnavailable(RuntimeError):
    """No browser can be started: Playwright is not installed or Chromium is not found."""


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """How pages are rendered.

    Attributes:
        concurrency: pages rendered at once (each a browser tab).
        timeout: the per-page budget in seconds, from the navigation to the DOM snapshot.
        quiet: the page counts as settled once its load event fired, no request of it is in
            flight, nothing it scheduled (timers due within the budget, animation frames,
            fetch/XHR, intervals that change the DOM) is pending, and neither its DOM nor its
            network moved for this long (seconds; `crawler.render.settle`).
        idle: it also counts as settled once no request of it has been in flight and its
            DOM has not changed for this long (seconds), pending work or not: the rule when
            the page's tracker is absent, and the bound for pages whose work never ends.
        recycle_after: the browser is restarted after this many pages (bounds its memory).
        user_agent: the crawl's User-Agent ("" keeps Chromium's own).
        executable: the Chromium binary; None: ``$CRAWLER_CHROMIUM``, then
            ``/usr/bin/chromium``, then ``chromium`` on PATH.
    """

    concurrency: int = 2
    timeout: float = 5.0
    quiet: float = 0.1
    idle: float = 0.5
    recycle_after: int = 200
    user_agent: str = ""
    executable: str | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency: must be at least 1, got {self.concurrency}")
        if not self.timeout > 0:
            raise ValueError(f"timeout: must be more than 0 seconds, got {self.timeout}")
        if not 0 <= self.quiet:
            raise ValueError(f"quiet: must be 0 seconds or more, got {self.quiet}")
        if not 0 <= self.idle:
            raise ValueError(f"idle: must be 0 seconds or more, got {self.idle}")
        if self.recycle_after < 1:
            raise ValueError(f"recycle_after: must be at least 1, got {self.recycle_after}")


@dataclass(frozen=True, slots=True)
class Rendered:
    """One page as the browser left it.

    Attributes:
        html: the DOM serialized as UTF-8 HTML (open shadow roots inlined, each as a
            ``<crawler-shadow-root>`` element inside its host, so that an extractor which
            skips ``<template>`` content still sees their links); None if the page failed
            before there was a DOM. Feed it to the extractor with encoding ``utf-8``: a
            ``<meta charset>`` left in the DOM no longer describes these bytes.
        final_url: the document's URL after its scripts ran (pushState and hash changes).
        error: None, `RENDER_TIMEOUT`, `RENDER_CRASH` or `RENDER_ERROR`.
        detail: a human-readable reason for the error ("" without one).
        ids: every element id and ``<a name>`` of the rendered document (what
            ``getElementById`` and fragment navigation find; not inside shadow roots).
        requests: the requests the browser sent to the network for this page (the gate
            allowed them); the page's own document is not one (it is fulfilled from the
            fetched body).
        blocked: the requests the policy or the gate refused.
        settled: when the page was found settled, in seconds on the page's clock (from the
            start of its navigation); None if it did not settle (the budget ended, an error).
        settled_by: how: ``"tracked"`` (its pending work was done and it was quiet for
            `RenderOptions.quiet`), ``"idle"`` (network and DOM quiet for
            `RenderOptions.idle`), "" when it did not settle.
    """

    html: bytes | None
    final_url: str
    error: str | None
    detail: str = ""
    ids: frozenset[str] = frozenset()
    requests: int = 0
    blocked: int = 0
    settled: float | None = None
    settled_by: str = ""


class RequestGate(Protocol):
    """The crawl's say over every request the browser would send (the policy allows it)."""

    async def allow(self, url: str, resource_type: str, page_url: str) -> bool:
        """True to let the request go (robots, scope, politeness: it may wait for a slot)."""
        ...

    def release(self, url: str) -> None:
        """The allowed request ``url`` ended (frees its politeness slot); once per allow."""
        ...

    def headers_for(self, url: str) -> dict[str, str]:
        """Headers the crawl would send to ``url`` (cookies, credentials): only its own."""
        ...

    # Optional (looked up with getattr, a gate without it is valid):
    # ``crawls(url) -> bool``: ``url``'s host is one the crawl crawls, so its XHR/fetch are
    # asked of the gate like the page's own site's (without it: blocked for other sites).
