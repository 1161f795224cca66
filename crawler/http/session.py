"""aiohttp's session as the crawl configures it: its bounded pool and its cookie jar.

Imported only when a request needs aiohttp (a proxy, a WARC archive, cookies, a caller's
session): a crawl without them goes through :mod:`crawler.http.plain` and never pays for importing
aiohttp (about 0.2 s on the benchmark machine). :mod:`crawler.http.aio` makes the session and
sends requests through it.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from crawler.http import tls as fetch_tls  # noqa: F401  (first: aiohttp without its TLS contexts)

# isort: split
import aiohttp

from crawler.config import CrawlConfig
from crawler.http import options
from crawler.http.guard import AddressGuard
from crawler.http.options import DNS_CACHE_TTL, cookies_module, idle_cap, session_headers

if TYPE_CHECKING:
    import ssl

    from crawler.http.cookies import Cookie

__all__ = ["BoundedPoolConnector", "make_session", "new_cookie_jar"]

# True while the connector opens the connection to a proxy (the user's: never refused).
_TO_PROXY: ContextVar[bool] = ContextVar("crawler_to_proxy", default=False)


class BoundedPoolConnector(aiohttp.TCPConnector):
    """A TCPConnector that keeps at most ``max_idle`` idle keep-alive connections overall.

    aiohttp keeps every idle connection for ``keepalive_timeout`` per (host, port, ssl) key with
    no cap (``limit`` counts only connections in use), so a wide crawl held one open socket per
    origin met in the last 30 s: 3,500 fds after 4,000 origins, EMFILE at ``ulimit -n 1024``.
    Here, each time a connection goes back to the pool and the pool holds more than
    ``max_idle``, idle connections are closed, those of the least recently used origin (pool
    key) first, its oldest first. The origins being crawled right now are the recently used
    ones, so their keep-alive reuse is unchanged.

    aiohttp has no public knob for this: the trim reads the private pool (``_conns``: key ->
    deque of ``(protocol, last_used)``) and hooks ``_release`` (its first argument is the key).
    Should an aiohttp release change that layout, :attr:`idle_cap_active` turns False and the
    pool behaves as aiohttp's own (uncapped), never an error; tests/test_fetch_pool.py fails
    if that happens on the pinned version.

    ``guard`` (the crawl's address rules, :mod:`crawler.http.guard`) filters the addresses
    every new direct connection is opened to, after resolution (aiohttp's own DNS cache
    included) and for address literals too: ``_resolve_host`` is where both pass. A
    connection to a proxy is not checked (the proxy resolves and connects to the target).
    tests/test_ssrf.py fails if the hook is not called on the pinned aiohttp.
    """

    def __init__(self, *, max_idle: int, guard: AddressGuard | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.guard = guard
        self.max_idle = max(0, max_idle)
        self.idle_cap_active = isinstance(getattr(self, "_conns", None), dict)
        # Pool keys, least recently released first. May hold keys the pool has since dropped
        # (taken by a request, expired): skipped when met, pruned when it grows past bounds.
        self._lru: OrderedDict[Any, None] = OrderedDict()

    async def _resolve_host(
        self, host: str, port: int, traces: Sequence[Any] | None = None
    ) -> list[Any]:
        hosts: list[Any] = await super()._resolve_host(host, port, traces=traces)
        guard = self.guard
        if guard is None or _TO_PROXY.get():
            return hosts
        return guard.filter(host, port, hosts, "host")

    async def _create_proxy_connection(self, *args: Any, **kwargs: Any) -> Any:
        token = _TO_PROXY.set(True)
        try:
            return await super()._create_proxy_connection(*args, **kwargs)
        finally:
            _TO_PROXY.reset(token)

    def _release(self, *args: Any, **kwargs: Any) -> None:
        super()._release(*args, **kwargs)
        if self.idle_cap_active:
            try:
                self._trim_idle(args[0] if args else kwargs.get("key"))
            except Exception:  # a changed private layout: keep aiohttp's behaviour, uncapped
                self.idle_cap_active = False

    @property
    def idle_connections(self) -> int:
        """Idle keep-alive connections in the pool now (0 if the layout is not understood)."""
        conns = getattr(self, "_conns", None)
        return sum(map(len, conns.values())) if isinstance(conns, dict) else 0

    def _trim_idle(self, key: Any) -> None:
        """Mark ``key`` most recently used; close idle connections beyond ``max_idle``.

        O(1) per connection closed, plus a sum over the idle keys (at most ``max_idle`` + 1).
        """
        conns = self._conns
        lru = self._lru
        if key in conns:
            lru[key] = None
            lru.move_to_end(key)
        if len(lru) > 2 * self.max_idle + 64:
            self._lru = lru = OrderedDict((k, None) for k in lru if k in conns)
        excess = sum(map(len, conns.values())) - self.max_idle
        while excess > 0:
            if not lru:  # keys we did not see released (the pool was rebuilt): oldest first
                lru.update(dict.fromkeys(conns))
                if not lru:
                    break
            oldest = next(iter(lru))
            idle = conns.get(oldest)
            if not idle:
                del lru[oldest]
                if idle is not None:
                    del conns[oldest]
                continue
            proto, used = idle[0]  # unpack before changing anything
            if not isinstance(used, (int, float)):
                raise TypeError(f"unknown pool entry {idle[0]!r}")
            transport = proto.transport
            idle.popleft()
            proto.close()
            if oldest.is_ssl and not getattr(self, "_cleanup_closed_disabled", True):
                self._cleanup_closed_transports.append(transport)
            excess -= 1
            if not idle:
                del conns[oldest]
                del lru[oldest]


def new_cookie_jar() -> aiohttp.CookieJar:
    """The crawl's cookie jar: RFC 6265 matching, as a browser does it.

    ``unsafe=True``: aiohttp's jar otherwise drops every cookie set by a host that is an IP
    address (``http://127.0.0.1:8080/``, an intranet box), which no browser does: a site on
    an address is a site. That is all ``unsafe`` changes (aiohttp: an IP host gets its own
    cookies back, exact host only, never "subdomains" of an address).
    ``quote_cookie=False``: send a value as the server set it. aiohttp's default re-quotes any
    value outside RFC 2109's token characters, so ``s=abc==`` (base64, the usual session id)
    went back as ``s="abc=="``, which a server that compares the bytes does not recognise.
    """
    return aiohttp.CookieJar(unsafe=True, quote_cookie=False)


def make_session(
    config: CrawlConfig,
    *,
    cookies: list[Cookie] | None = None,
    ssl_context: ssl.SSLContext | None = None,
) -> aiohttp.ClientSession:
    """The crawl's session: pooled keep-alive connections, global and per-host limits.

    The idle connections kept are capped (:func:`idle_cap`, least recently used closed first)
    so that the open sockets stay flat however many origins a crawl meets. The cookie jar
    starts with ``cookies`` (default: those of ``config.cookies``, loaded now). ``ssl_context``
    (the crawl's, :mod:`crawler.http.tls_context`) replaces aiohttp's default verified one.
    """
    if cookies is None and config.cookies:
        cookies = cookies_module().load_cookies(config.cookies)
    headers = session_headers(config)
    connector = BoundedPoolConnector(
        max_idle=idle_cap(config),
        guard=AddressGuard.from_config(config),
        limit=max(1, config.concurrency),
        limit_per_host=max(1, config.per_host),
        ttl_dns_cache=DNS_CACHE_TTL,
        keepalive_timeout=options.KEEPALIVE_TIMEOUT,  # read now: benchmarks/wide_crawl.py sets it
        **({"ssl": ssl_context} if ssl_context is not None else {}),
    )
    timeout = aiohttp.ClientTimeout(
        total=config.timeout or None,
        sock_connect=config.connect_timeout or None,
        sock_read=config.read_timeout or None,
    )
    jar = new_cookie_jar()
    if cookies:
        cookies_module().fill_jar(jar, cookies)
    session = aiohttp.ClientSession(
        connector=connector,
        timeout=timeout,
        headers=headers,
        cookie_jar=jar,
        auto_decompress=True,
        trust_env=False,  # proxies are ours (crawler.http.proxy); no netrc either
        raise_for_status=False,
    )
    # aiohttp silently resends a GET once when the connection drops before the response
    # (ServerDisconnectedError / ClientOSError), on top of our own retries: a server that
    # resets got 2 x (1 + retries) requests. Our retry loop already covers that case (with
    # backoff), so turn the hidden one off and let ``retries`` mean what it says.
    if hasattr(session, "_retry_connection"):
        session._retry_connection = False
    return session
