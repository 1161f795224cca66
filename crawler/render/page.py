"""One page in the browser: fulfil its document, route its requests, wait, snapshot.

A `PageRun` owns one browser tab for one render. Its route handler is the only way out of the
tab: the page's own document is fulfilled from the body the crawl fetched (no second GET),
any other document is aborted (the page stays: navigations away, frames, reloads), and every
other request is blocked or handed to the crawl's gate (`policy.decide`). Dialogs are
dismissed, popups closed by the renderer. The budget is an asyncio deadline in this process:
nothing the page's scripts do can stretch it (a page spinning its main thread gets its script
terminated over the DevTools protocol so that the snapshot can still be taken).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from crawler.render.model import (
    RENDER_CRASH,
    RENDER_ERROR,
    RENDER_TIMEOUT,
    Rendered,
    RenderOptions,
    RequestGate,
)
from crawler.render.policy import SAME_SITE_TYPES, Verdict, decide, document_headers
from crawler.render.settle import POLL_STATE, PageState, next_look, settled_by
from crawler.render.snapshot import SNAPSHOT

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, CDPSession, Page, Request, Route

POLL = 0.05  # seconds between looks at the page while waiting for it to settle
SNAPSHOT_GRACE = 1.0  # seconds the snapshot may take after the budget (a busy page)
CLOSE_GRACE = 5.0  # seconds a tab may take to close before the browser counts as stuck


class BrowserGone(Exception):
    """The browser died or stopped answering: the renderer restarts it."""


class Handlers:
    """The tasks the renderer's callbacks run in: Playwright's route handler tasks (its
    ``_on_route``, which awaits `Tab.forward`, maybe for long in the gate), and the tasks
    the renderer starts itself (dismissing a dialog, closing a popup).

    Playwright keeps no reference to a route handler's task: one still waiting when the
    browser closes (on the gate, which a closed connection does not wake) would be left
    pending and destroyed with the loop ("Task was destroyed but it is pending"). So each is
    tracked here, and `end` cancels and awaits what is left when the renderer closes.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closed = False

    def enter(self) -> asyncio.Task[Any] | None:
        """The running task (a route handler's) is tracked until `leave`."""
        task = asyncio.current_task()
        if task is not None:
            self._tasks.add(task)
        return task

    def leave(self, task: asyncio.Task[Any] | None) -> None:
        self._tasks.discard(task)

    def spawn(self, awaitable: Any) -> None:
        """Run ``awaitable`` (its exceptions swallowed) in a task tracked until it ends."""
        task = asyncio.get_running_loop().create_task(_quietly(awaitable))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def __len__(self) -> int:
        return len(self._tasks)

    async def end(self, grace: float) -> None:
        """Cancel the tracked tasks (not the caller) and wait up to ``grace`` s for them."""
        self.closed = True
        me = asyncio.current_task()
        tasks = [task for task in self._tasks if task is not me and not task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace)


class Tab:
    """A browser tab kept for many renders, one at a time; its handlers forward to the render.

    A tab is reused (a new document replaces the old one's scripts, timers and state; the
    renderer process of the site stays warm) until its page crashed, had its scripts stopped,
    or did not settle; then it is closed and a fresh one opened.
    """

    def __init__(self, page: Page, handlers: Handlers) -> None:
        self.page = page
        self.handlers = handlers
        self.run: PageRun | None = None
        self.crashed = False
        self.spoiled = False  # scripts disabled, or left running: not for another page
        self.cdp: CDPSession | None = None
        page.on("crash", self._on_crash)
        page.on("dialog", self._on_dialog)
        page.on("requestfinished", self._on_request_end)
        page.on("requestfailed", self._on_request_end)

    @classmethod
    async def open(cls, context: BrowserContext, handlers: Handlers) -> Tab:
        page = await context.new_page()
        tab = cls(page, handlers)
        try:
            # Opened before any page script runs: attaching to a busy page would hang.
            tab.cdp = await context.new_cdp_session(page)
            await page.route("**/*", tab.forward)
        except BaseException:
            await _quietly(page.close())
            raise
        return tab

    def _on_crash(self, _page: Any) -> None:
        self.crashed = True

    def _on_request_end(self, request: Request) -> None:
        if self.run is not None:
            self.run.request_ended(request)

    def _on_dialog(self, dialog: Any) -> None:
        # alert/confirm/prompt dismissed at once (a page must not wait on them); beforeunload
        # accepted, so that the next render's navigation leaves the page.
        self.handlers.spawn(dialog.accept() if dialog.type == "beforeunload" else dialog.dismiss())

    async def forward(self, route: Route) -> None:
        task = self.handlers.enter()
        try:
            run = self.run
            if run is None or self.handlers.closed:  # between renders, or the renderer closes
                await _quietly(route.abort("blockedbyclient"))
                return
            await run.route(route)
        finally:
            self.handlers.leave(task)

    async def seal(self) -> None:
        """Stop the tab's scripts and cut its network before it closes.

        Closing a tab takes its request interception down before the tab is gone: a page
        still sending (a timer's fetch) would reach the network unasked in that window.
        """
        if self.cdp is None or self.crashed or self.page.is_closed():
            return
        offline = {"offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1}
        for method, params in (
            ("Emulation.setScriptExecutionDisabled", {"value": True}),
            ("Network.enable", {}),
            ("Network.emulateNetworkConditions", offline),
        ):
            try:
                await asyncio.wait_for(self.cdp.send(method, params), SNAPSHOT_GRACE)
            except Exception:
                return

    @property
    def reusable(self) -> bool:
        return not (self.crashed or self.spoiled or self.page.is_closed())


class PageRun:
    """The render of one page in a tab (see the module docstring)."""

    def __init__(
        self,
        tab: Tab,
        options: RenderOptions,
        gate: RequestGate,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        browser_alive: asyncio.Event,
    ) -> None:
        self._tab = tab
        self._page = tab.page
        self._options = options
        self._gate = gate
        crawls = getattr(gate, "crawls", None)  # (optional: see RequestGate)
        self._crawls: Callable[[str], bool] | None = crawls if callable(crawls) else None
        self._url = url
        self._document = url.split("#", 1)[0]  # as the browser's request has it
        self._body = body
        self._headers = document_headers(headers)
        self._alive = browser_alive  # cleared when the browser disconnects
        self._served = False  # the page's own document was fulfilled
        self._inflight: dict[Request, str] = {}  # allowed requests not yet ended -> url
        self._asking = 0  # requests waiting for the gate
        self._last_activity = time.monotonic()
        self.requests = 0
        self.blocked = 0
        self._finished = False  # release_all ran: nothing more is sent for this render
        self._waiting: set[Route] = set()  # requests held while the gate decides
        self.settled: float | None = None  # on the page's clock (see `Rendered.settled`)
        self.settled_by = ""

    @property
    def _crashed(self) -> bool:
        return self._tab.crashed

    def request_ended(self, request: Request) -> None:
        url = self._inflight.pop(request, None)
        if url is not None:
            self._last_activity = time.monotonic()
            self._gate.release(url)

    async def route(self, route: Route) -> None:
        """Every request of the tab (and of its frames) comes here first."""
        request = route.request
        try:
            if (
                not self._served
                and request.is_navigation_request()
                and request.frame == self._page.main_frame
                and request.url.split("#", 1)[0] == self._document
            ):
                self._served = True
                await route.fulfill(status=200, headers=self._headers, body=self._body)
                return
            kind = request.resource_type
            crawls = self._crawls if kind in SAME_SITE_TYPES else None
            crawled = crawls is not None and crawls(request.url)
            verdict = decide(request.url, kind, self._page.url, crawled=crawled)
            if verdict is Verdict.ABORT_NAVIGATION:
                self.blocked += 1
                await route.abort("aborted")  # ERR_ABORTED: no error page, the page stays
                return
            if verdict is Verdict.BLOCK:
                self.blocked += 1
                await route.abort("blockedbyclient")
                return
            await self._through_gate(route, request)
        except Exception:  # the tab closed under the handler: nothing to answer any more
            return

    async def _through_gate(self, route: Route, request: Request) -> None:
        url = request.url
        self._asking += 1
        self._waiting.add(route)
        self._last_activity = time.monotonic()
        try:
            allowed = await self._gate.allow(url, request.resource_type, self._url)
        finally:
            self._asking -= 1
            self._waiting.discard(route)
        if allowed and self._finished:
            # The render ended while the gate made the request wait: it is not sent, and
            # the slot it was given goes back at once.
            self._gate.release(url)
            allowed = False
        if not allowed:
            self.blocked += 1
            await route.abort("blockedbyclient")
            return
        self._inflight[request] = url
        self.requests += 1
        headers = {**request.headers, **self._gate.headers_for(url)}
        if self._options.user_agent:
            headers["user-agent"] = self._options.user_agent
        cookie = next((v for n, v in headers.items() if n.lower() == "cookie"), None)
        try:
            if cookie is None:
                await route.continue_(headers=headers)
            else:
                await self._fetch_with_cookie(route, headers)
        except Exception:
            self.request_ended(request)  # never sent: free its slot now
            raise

    async def _fetch_with_cookie(self, route: Route, headers: dict[str, str]) -> None:
        """Send a request that carries the crawl's cookie, and answer the page with it.

        Chromium does not let an interception set ``Cookie`` (a forbidden header: Playwright
        drops it from ``continue_``), so the request is sent by Playwright's own client with
        the crawl's headers as they are, and its response fulfils the page's request. No
        redirect is followed there: a redirect answers the page, whose next request comes
        back through the route and the gate.
        """
        try:
            response = await route.fetch(
                headers=headers, max_redirects=0, timeout=self._options.timeout * 1000
            )
        except Exception:
            await _quietly(route.abort("failed"))
            return
        await route.fulfill(response=response)

    async def abort_waiting(self) -> None:
        """Refuse the requests still waiting for the gate (the render is over).

        Left paused, they would be let go by Chromium itself when the tab's interception
        ends (its close): sent without the gate's say.
        """
        self._finished = True
        for route in list(self._waiting):
            await _quietly(route.abort("blockedbyclient"))

    def release_all(self) -> None:
        """Free the gate's slots of requests still in flight (the render is over).

        A request still waiting for the gate is refused when its answer comes.
        """
        self._finished = True
        for url in self._inflight.values():
            self._gate.release(url)
        self._inflight.clear()

    # -- the render --

    async def run(self) -> Rendered:
        """Load, wait until settled or the budget ends, snapshot."""
        deadline = time.monotonic() + self._options.timeout
        error: str | None = None
        detail = ""
        try:
            async with asyncio.timeout_at(_loop_time(deadline)):
                if self._page.url.split("#", 1)[0] == self._document:
                    # A reused tab on this very document: going there again would only move
                    # to the fragment, not load the page anew.
                    await self._page.goto("about:blank")
                await self._page.goto(self._url, wait_until="commit")
                await self._page.wait_for_load_state("domcontentloaded")
                await self._settle(deadline)
        except TimeoutError:
            error, detail = RENDER_TIMEOUT, f"not settled within {self._options.timeout:g} s"
            self._tab.spoiled = True  # its scripts may go on: the tab is not reused
        except Exception as exc:  # playwright.Error: crashed, closed, navigation failed
            if self._crashed or not self._alive.is_set():
                return self._failed(RENDER_CRASH, _first_line(exc))
            error, detail = RENDER_ERROR, _first_line(exc)
        if self._crashed or not self._alive.is_set():
            return self._failed(RENDER_CRASH, "the renderer died")
        snap = await self._snapshot()
        if snap is None:
            if self._crashed or not self._alive.is_set():
                return self._failed(RENDER_CRASH, "the renderer died")
            return self._failed(error or RENDER_ERROR, detail or "no DOM to snapshot")
        html, final_url, ids = snap
        return Rendered(
            html=html,
            final_url=final_url,
            error=error,
            detail=detail,
            ids=ids,
            requests=self.requests,
            blocked=self.blocked,
            settled=self.settled,
            settled_by=self.settled_by,
        )

    async def _settle(self, deadline: float) -> None:
        """Return once the page counts as settled (`crawler.render.settle`: its tracked work
        done and quiet for `quiet`, or network and DOM quiet for `idle`)."""
        quiet, idle = self._options.quiet, self._options.idle
        first = min(quiet, idle)
        while True:
            if self._crashed or not self._alive.is_set():
                raise BrowserGone("the renderer died")
            quiet_net = time.monotonic() - self._last_activity
            if self._inflight or self._asking or quiet_net < first:
                await asyncio.sleep(POLL if self._inflight or self._asking else first - quiet_net)
                continue
            left = max(0.0, deadline - time.monotonic()) * 1000
            state = PageState.parse(await self._page.evaluate(POLL_STATE, left))
            if self._inflight or self._asking:  # a request began while the page answered
                continue
            quiet_net = time.monotonic() - self._last_activity
            rule = settled_by(state, quiet_net, quiet=quiet, idle=idle)
            if rule is not None:
                self.settled, self.settled_by = state.now, rule
                return
            await asyncio.sleep(next_look(state, quiet_net, quiet=quiet, idle=idle, poll=POLL))

    async def _snapshot(self) -> tuple[bytes, str, frozenset[str]] | None:
        """The DOM as HTML, the document's URL and ids; None if the page has none to give."""
        if not self._served:
            return None
        for attempt in range(2):
            try:
                value = await asyncio.wait_for(self._page.evaluate(SNAPSHOT), SNAPSHOT_GRACE)
            except TimeoutError:
                if attempt == 0 and await self._interrupt_scripts():
                    continue
                return None
            except Exception:
                return None
            html = str(value["html"]).encode("utf-8", "surrogatepass")
            return html, str(value["url"]), frozenset(str(i) for i in value["ids"])
        return None

    async def _interrupt_scripts(self) -> bool:
        """Stop the script holding the page's main thread (an endless loop), if any."""
        session = self._tab.cdp
        self._tab.spoiled = True
        if session is None:
            return False
        try:
            await asyncio.wait_for(session.send("Runtime.terminateExecution"), SNAPSHOT_GRACE)
            await asyncio.wait_for(
                session.send("Emulation.setScriptExecutionDisabled", {"value": True}),
                SNAPSHOT_GRACE,
            )
        except Exception:
            return False
        return True

    def _failed(self, error: str, detail: str) -> Rendered:
        return Rendered(
            html=None,
            final_url=self._url,
            error=error,
            detail=detail,
            requests=self.requests,
            blocked=self.blocked,
        )


def _loop_time(deadline: float) -> float:
    """A `time.monotonic` deadline on the running loop's clock."""
    loop = asyncio.get_running_loop()
    return loop.time() + (deadline - time.monotonic())


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


async def _quietly(awaitable: Any) -> None:
    try:
        await awaitable
    except Exception:
        return
