"""The crawl's side of ``--render``: which pages go to the browser, and what their links become.

Made by the engine only when ``render`` is not ``"never"`` (this module, and through it
``crawler.render`` and Playwright, are imported only then). The page job keeps an HTML body's
chunks as it streams them (a list of the chunks it got: no copy) and, when a 200 page ends,
hands it to :meth:`RenderStep.page`:

* ``always`` renders every such page; ``auto`` asks :func:`crawler.core.render_rule.judge`
  with the link count the extractor made, and renders only the pages it gives a reason for;
* the rendered DOM (``Rendered.html``) goes through the crawl's own extractor with base
  ``Rendered.final_url``, so the rendered link set follows the extractor's rules; the links
  the static pass did not have (by URL) are the page's ``rendered_links``, and they take the
  same way as the static ones: the intake (canonical form, nofollow, the page's cap, dedup),
  then admission (scope, depth, robots when leased, the state, the sinks);
* ``render_timeout`` / ``render_crash`` / ``render_error`` become the page's error (its static
  links stay, and a timed-out page's links seen by then count);
* with ``collect_ids`` (``crawler check``) the rendered document's ids join the page's, so a
  fragment an element made by JavaScript carries is found.

What the browser itself may fetch is :class:`crawler.core.render_gate.CrawlGate`'s to say.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from crawler.config import ConfigError
from crawler.core.render_gate import CrawlGate
from crawler.core.render_rule import MANY_LINKS, judge
from crawler.extract import Link, LinkExtractor

if TYPE_CHECKING:
    from crawler.config import CrawlConfig
    from crawler.core.admission import Admission, Tally
    from crawler.core.results import CrawlStats, PageResult
    from crawler.core.robots import RobotsCache
    from crawler.http.client import Fetcher
    from crawler.http.response import Response
    from crawler.state import CrawlState
    from crawler.urls.policy import UrlPolicy

__all__ = ["RenderStep", "open_render"]

log = logging.getLogger("crawler")


#: The fingerprint's bits the sample is drawn from (``RenderStep.sampled``).
_SAMPLE_BITS = 32


class RenderStep:
    """The renderer of one crawl and what it did (``rendered``, ``reasons``, ``errors``)."""

    def __init__(
        self,
        config: CrawlConfig,
        gate: CrawlGate,
        stats: CrawlStats,
        fingerprint: Callable[[str], int] | None = None,
    ) -> None:
        self.config = config
        #: ``crawler.render.Renderer``, made (and ``crawler.render`` imported) for the first
        #: page to render: a crawl in which none needs a browser imports nothing of it
        self.renderer: Any = None
        self.gate = gate
        self.stats = stats  # render_reasons, rendered_links, render_requests
        stats.render = config.render
        self.always = config.render == "always"
        #: the page job keeps a body's chunks while its links are fewer (auto: a page with
        #: MANY_LINKS is not rendered, so its body need not be held)
        self.keep_below = sys.maxsize if self.always else MANY_LINKS
        #: ``render_sample`` (auto only) as a bound on the fingerprint's low bits; the
        #: fingerprint is the crawl state's (keyed and stored with a persistent state), so a
        #: resumed crawl samples the same pages
        rate = config.render_sample if config.render == "auto" and fingerprint else 0.0
        self._sample_below = int(rate * (1 << _SAMPLE_BITS))
        self._fingerprint = fingerprint

    def sampled(self, url: str) -> bool:
        """Whether ``url`` (canonical) is one of the ``render_sample`` fraction of pages
        rendered even when the auto rule says no: its fingerprint's low bits, so the same
        URL is always sampled or never in a crawl."""
        if not self._sample_below or self._fingerprint is None:
            return False
        return (self._fingerprint(url) & ((1 << _SAMPLE_BITS) - 1)) < self._sample_below

    def keep_below_for(self, url: str) -> int:
        """The link count under which the page job keeps ``url``'s body for the renderer
        (every body of a sampled page: it is rendered whatever its links)."""
        return sys.maxsize if self._sample_below and self.sampled(url) else self.keep_below

    def decide(
        self, page: PageResult, chunks: list[bytes], found: int, url: str | None = None
    ) -> str | None:
        """Why the page is rendered (the auto rule's reason, "always", or "sample" for a page
        of ``render_sample`` the rule would not render), or None; marks the page's
        ``rendered``/``render_reason`` for the outputs. ``url``: the URL the body came from.
        Synchronous: a page that is not rendered costs no await."""
        reason = "always" if self.always else judge(chunks, found) if chunks else None
        if reason is None and chunks and self._sample_below and self.sampled(url or page.url):
            reason = "sample"
        page.rendered = False
        page.render_reason = reason
        return reason

    async def page(
        self,
        page: PageResult,
        reason: str,
        chunks: list[bytes],
        res: Response,
        url: str,
        depth: int,
        found: int,
        admission: Admission,
        tally: Tally,
        collect_ids: bool,
    ) -> None:
        """Render the page (``decide`` gave ``reason``) and admit its rendered-only links.

        ``url`` is the URL the body came from (the last hop), ``found`` the links the static
        pass counted."""
        if not chunks:
            return
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        ctype = res.content_type or "text/html"
        headers = {"content-type": f"{ctype}; charset={res.charset}" if res.charset else ctype}
        self.gate.page_fetched(url)
        try:
            result = await (self.renderer or self._start()).render(url, body, headers)
        except Exception as exc:  # (RenderUnavailable: the browser cannot start any more)
            log.error("rendering %s failed: %s", url, exc)
            result = _failed(url, f"{type(exc).__name__}: {exc}")
        finally:
            self.gate.page_done(url)
        stats = self.stats
        stats.render_reasons[reason] += 1
        stats.render_requests += result.requests
        page.rendered = True
        if result.error is not None:
            page.error, page.error_detail = result.error, result.detail or result.error
        if collect_ids and result.ids:
            page.ids = set(page.ids or ()) | set(result.ids)
        if result.html is None:
            return
        static = _links(url, res.charset, body, self.config.link_set)
        if self.config.respect_nofollow and static[1]:
            return  # the page's meta robots nofollow: none of its links are followed
        final = result.final_url or url
        rendered, nofollow = _links(final, "utf-8", result.html, self.config.link_set)
        if self.config.respect_nofollow and nofollow:
            return
        known = {link.url for link in static[0]}
        only: list[Link] = []
        for link in rendered:
            if link.url is not None and link.url not in known:
                known.add(link.url)
                only.append(link)
        page.rendered_links = only
        stats.rendered_links += len(only)
        if only and reason == "sample":
            stats.render_misses += 1  # the rule said no, and the scripts made links
        if only:
            await _admit(
                only, url, depth, found, page, admission, tally, self.config.max_links_per_page
            )

    def _start(self) -> Any:
        from crawler.render import Renderer, RenderOptions  # noqa: PLC0415  (the first render)

        options = RenderOptions(
            concurrency=self.config.render_concurrency,
            timeout=self.config.render_timeout,
            user_agent=self.config.user_agent,
        )
        self.renderer = Renderer(options, self.gate)
        return self.renderer

    async def close(self) -> None:
        """Close the browser, if one was started (no Chromium process is left)."""
        if self.renderer is not None:
            await self.renderer.close()


def _failed(url: str, detail: str) -> Any:
    from crawler.render import RENDER_ERROR, Rendered  # noqa: PLC0415  (only with --render)

    return Rendered(None, url, RENDER_ERROR, detail[:500])


def _links(base: str, charset: str | None, html: bytes, link_set: str) -> tuple[list[Link], bool]:
    """The Links of a whole document, and whether its meta robots says nofollow."""
    ex = LinkExtractor(base, charset, link_set=link_set)
    out = ex.feed(html)
    out.extend(ex.close())
    return out, bool(ex.nofollow)


async def _admit(
    links: list[Link],
    url: str,
    depth: int,
    found: int,
    page: PageResult,
    admission: Admission,
    tally: Tally,
    cap: int,
) -> None:
    """The rendered-only links through the intake and admission, as a chunk's links go
    (``crawler.core.page``'s ``_Body._step``): the page's cap counts its static links
    (``found``) first; the intake is shared by the pages in flight, so its step is
    synchronous and what it keeps of out-of-scope URLs is taken with it."""
    capped = 0
    if cap and found + len(links) > cap:
        room = max(0, cap - found)
        capped = len(links) - room
        links = links[:room]
        page.links_capped += capped
        tally.links_capped += capped
    admission.check_epoch()
    intake = admission.intake
    before = intake.found
    try:
        items = intake.take(links)
    finally:
        ext = intake.take_external() if intake.external_pending else None
    tally.links_found += intake.found - before + capped
    if ext:
        await admission.take_external(ext, tally)
    if items:
        await admission.take_items(items, url, depth, page, tally)


def open_render(
    config: CrawlConfig,
    fetcher: Fetcher,
    robots: RobotsCache,
    policy: UrlPolicy,
    stats: CrawlStats,
    state: CrawlState | None = None,
) -> RenderStep:
    """The renderer of a crawl with ``render`` not "never" (the browser starts on the first
    page that needs it). ConfigError, naming ``render``, when Playwright or Chromium is
    missing: said before anything is fetched, not on the first page to render. (Chromium is
    looked for where ``crawler.render`` looks, without importing it: $CRAWLER_CHROMIUM,
    /usr/bin/chromium, chromium on PATH; the renderer's own look decides.)"""
    if importlib.util.find_spec("playwright") is None:
        raise ConfigError(
            "needs Playwright: pip install 'crawler[render]' (and Chromium: apt-get install"
            " chromium), or --render never",
            key="render",
        )
    env = os.environ.get("CRAWLER_CHROMIUM")
    chromium = env or ("/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None)
    if not chromium and not shutil.which("chromium"):
        raise ConfigError(
            "needs Chromium: /usr/bin/chromium not found (Debian: apt-get install chromium; or"
            " set $CRAWLER_CHROMIUM to the browser's path), or --render never",
            key="render",
        )
    gate = CrawlGate(config, fetcher, robots, policy, state)
    return RenderStep(config, gate, stats, state.fingerprint if state is not None else None)
