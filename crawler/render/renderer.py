"""The renderer: one Chromium, a pool of tabs, restarts when it dies, recycling to bound memory.

`Renderer.render` takes a tab slot (``concurrency`` at once) and runs the page in a tab of the
current browser (`crawler.render.page.PageRun`): a tab whose last page went well is reused (the
new document replaces the old; the site's renderer process stays warm), any other is closed
and a fresh one opened. The browser is launched on the
first render (or `start`), relaunched when it died (a crash, a kill: the renders that were in
it end as ``render_crash``), and recycled after ``recycle_after`` pages: new renders wait
until the old browser's tabs are done, then it is closed and a fresh one started, so that at
most one browser lives at a time and its memory cannot grow with the crawl's length.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from crawler.render.launch import find_chromium, launch, start_playwright
from crawler.render.model import RENDER_CRASH, RENDER_ERROR, Rendered, RenderOptions, RequestGate
from crawler.render.page import CLOSE_GRACE, Handlers, PageRun, Tab
from crawler.render.settle import TRACKER

STRAY_TAB_GRACE = 1.0  # seconds before a tab the renderer did not open is closed

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright, Route


class _Generation:
    """One launched browser and its context, with the count of pages it rendered."""

    def __init__(self, browser: Browser, context: BrowserContext) -> None:
        self.browser = browser
        self.context = context
        self.alive = asyncio.Event()
        self.alive.set()
        self.pages = 0  # renders started in it
        self.active = 0  # renders running in it
        self.retiring = False
        self.idle: list[Tab] = []  # tabs whose last render went well, for the next ones
        browser.on("disconnected", lambda _b: self.alive.clear())

    async def close(self) -> None:
        try:
            await asyncio.wait_for(self.browser.close(), CLOSE_GRACE * 2)
        except Exception:
            return  # already gone; the driver kills what is left when it stops


class Renderer:
    """Renders pages in headless Chromium (see the module docstring).

    Attributes:
        pages_rendered: renders finished (any outcome).
        restarts: browsers launched after the first (crashes, kills and recycling).
        recycled: of those, the ones for ``recycle_after``.
    """

    def __init__(self, options: RenderOptions, gate: RequestGate) -> None:
        self.options = options
        self._gate = gate
        self._slots = asyncio.Semaphore(options.concurrency)
        self._changed = asyncio.Condition()  # guards _generation and its counters
        self._playwright: Playwright | None = None
        self._generation: _Generation | None = None
        self._launches = 0
        self._own_pages: set[Page] = set()
        self._handlers = Handlers()  # route handlers and our own callbacks' tasks
        self._closed = False
        self.pages_rendered = 0
        self.restarts = 0
        self.recycled = 0

    async def start(self) -> None:
        """Start the browser now (otherwise the first render does)."""
        async with self._changed:
            await self._current()

    async def render(self, url: str, body: bytes, headers: Mapping[str, str]) -> Rendered:
        """``url`` as the browser makes it, from the fetched ``body`` and response ``headers``.

        Raises RenderUnavailable when no browser can be started at all; every failure of
        one page is in the result instead (`Rendered.error`).
        """
        async with self._slots:
            generation = await self._enter()
            try:
                return await self._render_in(generation, url, body, headers)
            finally:
                await self._leave(generation)

    async def close(self) -> None:
        """Close the browser and the driver: no browser process is left behind, and no task
        of a route handler or of ours left pending (cancelled, and awaited)."""
        async with self._changed:
            self._closed = True
            generation, self._generation = self._generation, None
            playwright, self._playwright = self._playwright, None
        await self._handlers.end(CLOSE_GRACE)  # (a handler waiting on the gate: cancelled)
        if generation is not None:
            await generation.close()
        await self._handlers.end(CLOSE_GRACE)  # (any that started while the browser closed)
        if playwright is not None:
            try:
                await asyncio.wait_for(playwright.stop(), CLOSE_GRACE * 2)
            except Exception:
                pass

    async def __aenter__(self) -> Renderer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the browser's lifetime --

    async def _enter(self) -> _Generation:
        async with self._changed:
            generation = await self._current()
            generation.pages += 1
            generation.active += 1
            if generation.pages >= self.options.recycle_after:
                generation.retiring = True  # this is its last page
            return generation

    async def _leave(self, generation: _Generation) -> None:
        async with self._changed:
            generation.active -= 1
            self.pages_rendered += 1
            self._changed.notify_all()

    async def _current(self) -> _Generation:
        """The live browser for a new render (under the lock): launched, relaunched, recycled."""
        if self._closed:
            raise RuntimeError("the renderer is closed")
        while True:
            generation = self._generation
            if generation is not None and generation.alive.is_set() and not generation.retiring:
                return generation
            if generation is not None and generation.alive.is_set() and generation.active:
                await self._changed.wait()  # retiring: let its last pages finish
                continue
            if generation is not None:
                self._generation = None
                if generation.retiring and generation.alive.is_set():
                    self.recycled += 1
                await generation.close()
            self._generation = await self._launch()
            return self._generation

    async def _launch(self) -> _Generation:
        path = find_chromium(self.options.executable)  # before Playwright: a clear error first
        if self._playwright is None:
            self._playwright = await start_playwright()
        browser = await launch(self._playwright, path)
        try:
            context = await browser.new_context(
                user_agent=self.options.user_agent or None,
                service_workers="block",
                accept_downloads=False,
                java_script_enabled=True,
                bypass_csp=False,
            )
            context.set_default_timeout(self.options.timeout * 1000 + 10_000)
            await context.add_init_script(TRACKER)  # the settle rule's tracker
            # Requests of tabs the renderer did not open (popups) have no page route: refused.
            await context.route("**/*", _refuse)
            context.on("page", self._on_page)
        except BaseException:
            await browser.close()
            raise
        if self._launches:
            self.restarts += 1
        self._launches += 1
        return _Generation(browser, context)

    def _on_page(self, page: Page) -> None:
        # A tab the renderer did not open (window.open, target=_blank, noopener too): its
        # requests are refused by the context's route; it is closed once it is clear that no
        # render of ours is about to claim it (the event comes before new_page returns).
        self._handlers.spawn(self._close_stray(page))

    async def _close_stray(self, page: Page) -> None:
        await asyncio.sleep(STRAY_TAB_GRACE)
        if page not in self._own_pages:
            await _close_quietly(page)

    # -- one render --

    async def _render_in(
        self, generation: _Generation, url: str, body: bytes, headers: Mapping[str, str]
    ) -> Rendered:
        tab = generation.idle.pop() if generation.idle else None
        if tab is None:
            try:
                tab = await Tab.open(generation.context, self._handlers)
            except Exception as exc:
                generation.alive.clear()  # a browser that cannot open a tab is replaced
                return _failure(url, RENDER_CRASH, f"no tab: {exc}".splitlines()[0])
            self._own_pages.add(tab.page)
            tab.page.on("popup", lambda popup: self._handlers.spawn(_close_quietly(popup)))
        run = PageRun(tab, self.options, self._gate, url, body, headers, generation.alive)
        tab.run = run
        try:
            result = await run.run()
        except Exception as exc:
            gone = not generation.alive.is_set()
            result = _failure(url, RENDER_CRASH if gone else RENDER_ERROR, str(exc)[:300])
        finally:
            tab.run = None
            run.release_all()
            await run.abort_waiting()
        keep = (
            result.error is None
            and tab.reusable
            and generation.alive.is_set()
            and not generation.retiring
        )
        if keep:
            generation.idle.append(tab)
        else:
            await tab.seal()
            if not await _close_quietly(tab.page) and not tab.crashed:
                generation.alive.clear()  # a tab that will not close: the browser is stuck
            self._own_pages.discard(tab.page)
        return result


async def _refuse(route: Route) -> None:
    try:
        await route.abort("blockedbyclient")
    except Exception:
        return


async def _close_quietly(page: Page) -> bool:
    """Close a tab without running its beforeunload; False if it would not close."""
    try:
        await asyncio.wait_for(page.close(run_before_unload=False), CLOSE_GRACE)
    except Exception:
        return page.is_closed()
    return True


def _failure(url: str, error: str, detail: str) -> Rendered:
    return Rendered(html=None, final_url=url, error=error, detail=detail)


__all__ = ["Renderer"]
