"""What the browser may fetch while it renders a page: the crawl decides, request by request.

``crawler.render``'s route handler asks :meth:`CrawlGate.allow` for every request its own
policy lets through (images, media, fonts and stylesheets never get here; hosts the crawl
does not crawl only for scripts), and calls :meth:`CrawlGate.release` when an allowed one
ended. The rules:

* **Scope of hosts.** A request to a host the crawl's host rule (``scope``) admits is the
  crawl's own: it is subject to robots.txt and politeness below. A request to another host is
  allowed only for a script (a CDN), never anything else, and carries none of the crawl's
  credentials. ``include``/``exclude`` decide which pages are crawled, not what a page loads.
* **robots.txt** of the crawl (``crawler.core.robots``, the cache the crawl uses, fetched if
  not known yet) for every request to a crawled host, unless ``ignore_robots``.
* **Politeness.** The page being rendered holds its lease (its host's ``per_host`` slot)
  until it is done; the browser's requests for it to the page's own origin go ONE AT A TIME
  in that slot. A request to ANOTHER crawled origin (a script or an API of a second seed's
  host, of a subdomain the scope admits) counts against THAT host's politeness: it waits for
  one of its ``per_host`` slots in the crawl state (the slots the frontier's leases take:
  ``CrawlState.borrow_slot``/``want_slot``/``return_slot``; while it waits, the frontier
  leases none of that host's requests) and holds it until it ends, its delay (and
  Crawl-delay) shared with the crawl's own fetches of it. So the requests in flight to any
  host never exceed ``per_host`` whatever the browser does. A state that does not lend a
  host's slots (``borrow_slot`` says False: Redis, for a host whose shard, or whose parts,
  another worker owns) gets such requests refused. With a delay, the browser's requests to
  the page's own host start at least that long apart and after the page's own fetch.
* **Credentials** (:meth:`headers_for`): what ``crawler.http`` sends to that origin and only
  there: the crawl's credential headers (``--header`` secrets, ``--auth``, ``--bearer-env``,
  ``--header-for``) for the origins they were given for, and the other ``--header`` values
  to the crawled hosts. Never a proxy's credentials.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import TYPE_CHECKING

from crawler.http.guard import AddressGuard, host_port
from crawler.urls.policy import origin_of

if TYPE_CHECKING:
    from crawler.config import CrawlConfig
    from crawler.core.robots import RobotsCache
    from crawler.http.client import Fetcher
    from crawler.state import CrawlState
    from crawler.urls.policy import UrlPolicy

__all__ = ["CrawlGate"]

# Headers the browser sets itself or that are the crawl's transport's only.
_NOT_FOR_THE_BROWSER = frozenset(
    {"user-agent", "accept", "accept-encoding", "proxy-authorization", "host", "connection"}
)
_MAX_CRAWL_DELAY = 30.0  # as crawler.core.page's MAX_CRAWL_DELAY
_SLOT_POLL = 0.05  # seconds between two asks for another crawled host's slot


class CrawlGate:
    """The crawl's ``crawler.render.RequestGate``: one per crawl, shared by the pages rendered.

    Counters: ``allowed``, ``refused`` (by reason: ``robots``, ``scope``, ``politeness``,
    ``address``: a host that resolves to an address ``--exclude-*`` refuses).
    """

    def __init__(
        self,
        config: CrawlConfig,
        fetcher: Fetcher,
        robots: RobotsCache,
        policy: UrlPolicy,
        state: CrawlState | None = None,
    ) -> None:
        self.config = config
        self.state = state
        self.fetcher = fetcher
        self.robots = robots
        self.policy = policy
        self.allowed = 0
        self.borrowed = 0  # of those, requests to another crawled host (in its slots)
        self.refused: dict[str, int] = {"robots": 0, "scope": 0, "politeness": 0, "address": 0}
        # --exclude-private/-link-local/-loopback hold for the browser too: it resolves and
        # connects by itself, so every request's host is resolved and judged here first
        self._guard = AddressGuard.from_config(config)
        # page URL -> the lock its browser requests to crawled hosts take one at a time
        self._page_locks: dict[str, asyncio.Lock] = {}
        # url -> what each allowed request to a crawled host holds, in order: (the page it
        # is for, its page's lock, or the origin of the state's slot it borrowed)
        self._held: dict[str, list[tuple[str, asyncio.Lock | str]]] = {}
        # Another crawled host's slots are the crawl state's to lend (CrawlState.borrow_slot,
        # asked each time: Redis lends those of the hosts this worker owns); False: no state
        self._lends = state is not None
        # page URL -> its requests waiting for another host's slot; the pages whose render
        # ended while some still waited (they leave, refused)
        self._rendering: dict[str, int] = {}
        self._ended: set[str] = set()
        # origin -> monotonic time the last request to it started (the crawl's or the browser's)
        self._last: dict[str, float] = {}
        self._static_headers = [
            (n, v) for n, v in _header_list(config) if n.lower() not in _NOT_FOR_THE_BROWSER
        ]

    def page_fetched(self, url: str) -> None:
        """The page ``url`` was just fetched by the crawl (the delay counts from it)."""
        self._last[origin_of(url)] = time.monotonic()

    async def _address_allowed(self, url: str) -> bool:
        """Whether no address ``url``'s host resolves to is of a class the crawl excludes
        (the seeds' hosts are always allowed, as on the crawl's own connections)."""
        assert self._guard is not None
        hp = host_port(url)
        if hp is None:
            return False
        host, port = hp
        if self._guard.allows_host(host, port):
            return True
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError:
            return False
        return bool(infos) and not any(
            self._guard.refused(host, port, str(info[4][0])) for info in infos
        )

    def _crawled(self, url: str) -> str | None:
        """The origin of ``url`` if the crawl's host rule admits it, else None."""
        canonical = self.policy.canonical(url)
        if canonical is None:
            return None
        return self.policy.host_scope(canonical)

    def crawls(self, url: str) -> bool:
        """``url``'s host is one the crawl crawls (its XHR/fetch are asked here too)."""
        return self._crawled(url) is not None

    async def allow(self, url: str, resource_type: str, page_url: str) -> bool:
        if not url.startswith(("http://", "https://")):
            return False
        if self._guard is not None and not await self._address_allowed(url):
            self.refused["address"] += 1
            return False
        origin = self._crawled(url)
        if origin is None:
            if resource_type == "script":  # a CDN's script: the page cannot run without it
                self.allowed += 1
                return True
            self.refused["scope"] += 1
            return False
        own = origin == origin_of(page_url)
        if not own and not self._lends:
            # Another crawled host and no state to lend its slots: sending it could exceed them.
            self.refused["politeness"] += 1
            return False
        delay = self.config.delay
        if not self.config.ignore_robots:
            rules = await self.robots.get(origin)
            if rules.error is not None or not await rules.allowed_async(url):
                self.refused["robots"] += 1
                return False
            crawl_delay = min(rules.crawl_delay or 0.0, _MAX_CRAWL_DELAY)
            if crawl_delay > delay and not own and self.state is not None:
                self.state.set_delay(origin, crawl_delay)  # as the page job tells the state
            delay = max(delay, crawl_delay)
        if not own:
            got = await self._borrowed(url, origin, page_url)
            if got is None:  # the state refused to lend
                self.refused["politeness"] += 1
            return bool(got)
        lock = self._page_locks.get(page_url)
        if lock is None:
            lock = self._page_locks[page_url] = asyncio.Lock()
        await lock.acquire()
        if self._page_locks.get(page_url) is not lock:  # the page's render ended meanwhile
            lock.release()  # (wakes the next waiter, which leaves the same way)
            return False
        try:
            if delay:
                wait = self._last.get(origin, 0.0) + delay - time.monotonic()
                while wait > 0:
                    await asyncio.sleep(wait)
                    wait = self._last.get(origin, 0.0) + delay - time.monotonic()
                self._last[origin] = time.monotonic()
        except BaseException:
            lock.release()
            raise
        self._held.setdefault(url, []).append((page_url, lock))
        self.allowed += 1
        return True

    async def _borrowed(self, url: str, origin: str, page_url: str) -> bool | None:
        """A request to another crawled host: it waits for one of THAT host's ``per_host``
        slots in the crawl state, the one the frontier's leases take (its delay and
        Crawl-delay included), and holds it until it ends. Refused if the page's render ends
        first; None if the state lends none of that host (``borrow_slot`` False). (A look every
        ``_SLOT_POLL`` seconds: the state has no per-origin wake-up.)"""
        state = self.state
        assert state is not None
        rendering = self._rendering
        rendering[page_url] = rendering.get(page_url, 0) + 1
        wanting = False
        try:
            while True:
                if page_url in self._ended:
                    return False
                wait = state.borrow_slot(origin, time.time())
                if wait is False:  # (checked first: False == 0.0)
                    return None  # (asked again next time: a Redis worker may own it by then)
                if wait == 0.0:
                    break
                if not wanting:  # the next slot is ours: the frontier leases none meanwhile
                    state.want_slot(origin, 1, time.time())
                    wanting = True
                await asyncio.sleep(_SLOT_POLL if wait is None else min(wait, _SLOT_POLL))
        finally:
            if wanting:
                state.want_slot(origin, -1, time.time())
            rendering[page_url] -= 1
            if not rendering[page_url]:
                del rendering[page_url]
                self._ended.discard(page_url)
        self._held.setdefault(url, []).append((page_url, origin))
        self.allowed += 1
        self.borrowed += 1
        return True

    def release(self, url: str) -> None:
        held = self._held.get(url)
        if not held:
            return  # a script of another host: nothing held
        _, token = held.pop(0)
        if not held:
            del self._held[url]
        self._free(token)

    def _free(self, token: asyncio.Lock | str) -> None:
        if isinstance(token, str):  # another host's slot, borrowed from the state
            assert self.state is not None
            self.state.return_slot(token, time.time())
        elif token.locked():
            token.release()

    def page_done(self, page_url: str) -> None:
        """The page's render ended: its requests are over, and a request of it still waiting
        for its slot is refused (its tab is gone) instead of waiting for ever."""
        if page_url in self._rendering:
            self._ended.add(page_url)  # its requests waiting for another host's slot leave
        for url, held in list(self._held.items()):  # (those the renderer did not release)
            mine = [entry for entry in held if entry[0] == page_url]
            if not mine:
                continue
            held[:] = [entry for entry in held if entry[0] != page_url]
            if not held:
                del self._held[url]
            for _, token in mine:
                if isinstance(token, str):
                    self._free(token)
        lock = self._page_locks.pop(page_url, None)
        if lock is not None and lock.locked():
            lock.release()

    def headers_for(self, url: str) -> dict[str, str]:
        if self._crawled(url) is None:
            return {}  # another host: nothing of the crawl's
        headers = dict(self._static_headers)
        try:
            _, kwargs = self.fetcher.session_request(url)
        except (ValueError, OSError):
            return headers
        for name, value in kwargs.get("headers") or ():
            if name.lower() not in _NOT_FOR_THE_BROWSER:
                headers[name] = value
        cookie = _cookie_header(self.fetcher, url)
        if cookie:
            headers["Cookie"] = cookie
        return headers


def _header_list(config: CrawlConfig) -> list[tuple[str, str]]:
    from crawler.http.options import header_list  # noqa: PLC0415  (only with --render)

    return header_list(config)


def _cookie_header(fetcher: Fetcher, url: str) -> str:
    """The Cookie header the crawl's jar would send to ``url`` ("" without a jar or cookie)."""
    if not fetcher.config.cookies and not fetcher.config.save_cookies:
        return ""
    try:
        from yarl import URL  # noqa: PLC0415  (aiohttp's path: the jar lives there)

        jar = fetcher.session.cookie_jar
        cookies = jar.filter_cookies(URL(url))
    except Exception:
        return ""
    return "; ".join(f"{name}={morsel.value}" for name, morsel in cookies.items())
