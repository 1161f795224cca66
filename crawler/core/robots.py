"""robots.txt per origin (RFC 9309), fetched once and shared, and sitemap <loc> extraction.

The groups that apply are chosen by the crawler's product token (``robots_groups``: RFC 9309
section 2.2.1, as Google's parser reads it); their rules are matched by Protego (longest match,
``*`` and ``$``). What the RFC says about fetching, and what this module does:

* 2xx: parse the first 500 KiB (the RFC's minimum; the rest is ignored), a long file in a
  worker thread: parsing 500 KiB of rules takes seconds, which must not stall the event loop;
* redirects: followed up to 5 hops, then "unavailable". Across hosts too (the RFC recommends
  it: http -> https, example.org -> www.example.org), but out of the crawl's scope only to
  another ``/robots.txt``: a hostile robots.txt must not make the crawler GET arbitrary URLs
  on other hosts (internal ones included) that its pages' redirects could not reach. Any
  other redirect out of scope counts as "unavailable";
* 4xx (except 429): "unavailable", everything is allowed;
* 5xx, 429, timeouts, resets: "unreachable", everything is disallowed (after the fetcher's
  bounded retries);
* the host cannot be reached at all (``dns``, ``connect``): nothing is fetched from it either,
  but its pages get a PageResult with that error kind, so a dead host shows up in the summary
  as what it is, not as "robots disallowed".

The body is decoded as the RFC says: UTF-8, a leading byte order mark dropped (it would hide the
first line's ``User-agent``), invalid bytes replaced.

Each origin's robots.txt is fetched by the first request that needs it; concurrent requests for
the same origin await the same future. A verdict is kept for `ROBOTS_TTL` (24 hours, the RFC's
limit on caching) and the cache is bounded: at most `MAX_ROBOTS_ORIGINS` origins and about
`MAX_ROBOTS_CACHE_BYTES` of parsed rules, least recently used first out. An origin that has
expired or been evicted is simply fetched again when one of its URLs next needs it.

With a ``store`` (the crawl state: ``get_robots``/``put_robots``), a verdict that came from a
response (2xx: the body; 3xx/4xx: allow all) is stored with its wall-clock fetch time, and an
origin not in memory is looked up there first: a resumed crawl, or one whose cache evicted the
origin, parses the stored body again instead of refetching a robots.txt younger than
`ROBOTS_TTL`. Verdicts without a usable response (5xx, 429, timeouts, an unreachable host) are
kept in memory only: they are transient, and a crawl resumed after an outage asks again.
"""

from __future__ import annotations

import asyncio
import re
import time
import zlib
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from crawler.core.robots_groups import product_token, select
from crawler.http.client import Fetcher
from crawler.http.response import Consumer, Response
from crawler.state.base import MAX_ROBOTS_CACHE_BYTES, MAX_ROBOTS_ORIGINS, StoredRobots
from crawler.urls.policy import join

if TYPE_CHECKING:
    from protego import Protego

    from crawler.config import CrawlConfig

__all__ = [
    "MAX_ROBOTS_BYTES",
    "ROBOTS_TTL",
    "RobotsCache",
    "RobotsRules",
    "RobotsStore",
    "SitemapParser",
    "decode_robots",
    "product_token",
    "robots_agent",
]

MAX_ROBOTS_BYTES = 500 * 1024
MAX_ROBOTS_REDIRECTS = 5
#: Fetch errors that mean the origin (or the proxy every request goes through) cannot be
#: reached: the page gets that error and its detail, instead of a silent "disallow all"
#: (``blocked_address``: the address rules refuse the origin's address, crawler.http.guard).
UNREACHABLE_KINDS = frozenset({"dns", "connect", "proxy", "blocked_address", "tls"})
#: Seconds a robots.txt verdict is used (RFC 9309 section 2.4: no more than 24 hours).
ROBOTS_TTL = 24 * 3600.0
# Estimated memory of parsed rules: an upper bound of what tracemalloc shows Protego 0.7 hold
# (about 6.5 KiB for a small file; up to ~1.7 KiB a rule line, ~12 bytes a character of long
# paths, and ~100 bytes a "*", rules ending in "$" being stored twice). By character alone a
# file of short rules (``Allow:*1$``) would be underestimated tenfold.
_WEIGHT_BASE = 8 * 1024
_WEIGHT_PER_DIRECTIVE = 2 * 1024
_WEIGHT_PER_CHAR = 16
_WEIGHT_PER_STAR = 128
_DIRECTIVE = re.compile(r"^[^#:\r\n]*:", re.MULTILINE)  # a ":" before any "#"

_BOM = b"\xef\xbb\xbf"
# A robots.txt this long (characters) is parsed in a worker thread, not on the event loop.
_PARSE_IN_THREAD = 16 * 1024


def robots_agent(config: CrawlConfig) -> str:
    """What robots.txt groups are matched by: ``--robots-agent``, else the User-Agent (whose
    product token `select` takes: ``crawler/0.1.0 (+url)`` -> ``crawler``)."""
    return config.robots_agent or config.user_agent


def decode_robots(body: bytes) -> str:
    """robots.txt bytes as text: UTF-8 (RFC 9309 section 2.3), BOM dropped, bad bytes replaced."""
    return body.removeprefix(_BOM).decode("utf-8", "replace")


class RobotsRules:
    """The robots.txt verdict for one origin."""

    __slots__ = (
        "_parser",
        "_user_agent",
        "allow_all",
        "crawl_delay",
        "error",
        "sitemaps",
        "slow",
        "weight",
        "why",
    )

    def __init__(
        self,
        *,
        parser: Protego | None = None,
        allow_all: bool = False,
        user_agent: str = "",
        why: str = "",
        error: str | None = None,
    ) -> None:
        self._parser = parser
        self._user_agent = user_agent
        self.allow_all = allow_all
        self.why = why
        self.error = error  # a fetch error kind when the host itself is unreachable
        self.crawl_delay: float | None = None
        self.sitemaps: list[str] = []
        # Estimated bytes of memory this verdict holds (the cache's budget counts it).
        self.weight = _WEIGHT_BASE
        # A long file: a check may take milliseconds (see `allowed_async`).
        self.slow = False
        if parser is not None:
            try:
                delay = parser.crawl_delay(user_agent)
                self.crawl_delay = float(delay) if delay is not None else None
                self.sitemaps = [s for s in parser.sitemaps if isinstance(s, str)]
            except Exception:  # a garbage file must not break the crawl
                self.crawl_delay = None

    @classmethod
    def parse(cls, text: str, user_agent: str) -> RobotsRules:
        """The rules of a robots.txt file already decoded (see `decode_robots`) for the
        product token of ``user_agent`` (Protego parses only the groups that apply)."""
        from protego import Protego  # noqa: PLC0415  (start-up time: not for --ignore-robots)

        text = text.removeprefix("\ufeff")
        try:
            applying = select(text, user_agent)
            parser = Protego.parse(applying)
        except Exception:
            return cls(allow_all=True, why="unparseable robots.txt")
        rules = cls(parser=parser, user_agent="*", why="robots.txt")
        rules.weight = _estimate_weight(text)
        rules.slow = len(applying) >= _PARSE_IN_THREAD
        return rules

    def allowed(self, url: str) -> bool:
        """Whether the rules let ``url`` be fetched (on the caller's thread)."""
        if self._parser is None:
            return self.allow_all
        try:
            return bool(self._parser.can_fetch(url, self._user_agent))
        except Exception:
            return True

    async def allowed_async(self, url: str) -> bool:
        """`allowed`, without holding up the event loop when the file is long.

        Protego tries the rules one by one: with thousands of wildcard rules (a 500 KiB file
        holds ~30,000) one check takes tens of milliseconds, paid on every URL of the origin.
        Such a check runs in a worker thread; a short file's runs inline (a few microseconds).
        """
        if not self.slow:
            return self.allowed(url)
        return await asyncio.to_thread(self.allowed, url)


def _estimate_weight(text: str) -> int:
    """Bytes the parsed rules of ``text`` may hold (see `_WEIGHT_BASE`): linear, C-speed."""
    return (
        _WEIGHT_BASE
        + _WEIGHT_PER_DIRECTIVE * len(_DIRECTIVE.findall(text))
        + _WEIGHT_PER_CHAR * len(text)
        + _WEIGHT_PER_STAR * text.count("*")
    )


class RobotsStore(Protocol):
    """Where fetched robots.txt files are kept across runs (the crawl state has these two)."""

    async def get_robots(self, origin: str) -> StoredRobots | None: ...

    async def put_robots(self, robots: StoredRobots) -> None: ...


async def _parse(text: str, user_agent: str) -> RobotsRules:
    if len(text) < _PARSE_IN_THREAD:
        return RobotsRules.parse(text, user_agent)
    # Protego takes ~100 us a rule: a 500 KiB file of rules is seconds of CPU, which on the
    # event loop would stall every other fetch of the crawl.
    return await asyncio.to_thread(RobotsRules.parse, text, user_agent)


async def rules_from_stored(stored: StoredRobots, user_agent: str) -> RobotsRules:
    """The verdict a stored robots.txt gives (only response verdicts are stored: see above)."""
    status = stored.status
    if status is not None and 200 <= status < 300:
        return await _parse(decode_robots(stored.body), user_agent)
    return RobotsRules(allow_all=True, why=f"robots.txt unavailable ({status}, stored)")


class _LoaderGone(Exception):
    """The task fetching an origin's robots.txt was cancelled before it finished."""


class RobotsCache:
    """robots.txt rules per origin, fetched when first needed and kept for a bounded time.

    Args:
        fetcher: the crawl's Fetcher (same session, timeouts and retries as pages).
        user_agent: what the file's User-agent groups are matched by: its product token
            (`robots_agent`: ``--robots-agent``, else the User-Agent header).
        in_scope: the crawl's scope test; a redirect out of it is followed only to another
            host's ``/robots.txt``. None: every http(s) redirect is followed.
        ttl: seconds a verdict is used before the file is fetched again.
        max_origins: most origins kept; the least recently used goes first.
        max_bytes: budget for the kept verdicts' estimated memory (`RobotsRules.weight`);
            the verdict just fetched is always kept, however large.
        clock: monotonic seconds (injectable for tests).
        store: keeps response verdicts across runs (see the module docstring); None: memory.
        wall_clock: the wall-clock time stored verdicts are aged by (injectable for tests).
    """

    def __init__(
        self,
        fetcher: Fetcher,
        user_agent: str,
        in_scope: Callable[[str], bool] | None = None,
        *,
        ttl: float = ROBOTS_TTL,
        max_origins: int = MAX_ROBOTS_ORIGINS,
        max_bytes: int = MAX_ROBOTS_CACHE_BYTES,
        clock: Callable[[], float] = time.monotonic,
        store: RobotsStore | None = None,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._fetcher = fetcher
        self._user_agent = user_agent
        self._in_scope = in_scope
        self._ttl = ttl
        self._max_origins = max(1, max_origins)
        self._max_bytes = max_bytes
        self._clock = clock
        self._store_to = store
        self._wall = wall_clock
        # origin -> (expiry time, rules), least recently used first
        self._rules: OrderedDict[str, tuple[float, RobotsRules]] = OrderedDict()
        self._weight = 0
        self._pending: dict[str, asyncio.Future[RobotsRules]] = {}
        self.fetched = 0
        self.evicted = 0
        self.from_store = 0  # verdicts taken from the store instead of fetched

    def __len__(self) -> int:
        """Origins whose verdict is kept now."""
        return len(self._rules)

    @property
    def weight(self) -> int:
        """Estimated bytes the kept verdicts hold."""
        return self._weight

    def cached(self, origin: str) -> RobotsRules | None:
        """The origin's verdict if it is kept and fresh, else None (no fetch)."""
        entry = self._rules.get(origin)
        if entry is None:
            return None
        expires, rules = entry
        if self._clock() >= expires:
            self._drop(origin)
            return None
        self._rules.move_to_end(origin)
        return rules

    def allows_all(self, origin: str) -> bool:
        """Whether the origin's kept, fresh verdict allows every URL (no robots.txt, or one
        that could not be parsed). A look only: the LRU order is left as it is."""
        entry = self._rules.get(origin)
        return entry is not None and entry[1].allow_all and self._clock() < entry[0]

    def _drop(self, origin: str) -> None:
        _, rules = self._rules.pop(origin)
        self._weight -= rules.weight

    def _store(self, origin: str, rules: RobotsRules, ttl: float | None = None) -> None:
        if origin in self._rules:
            self._drop(origin)
        self._rules[origin] = (self._clock() + (self._ttl if ttl is None else ttl), rules)
        self._weight += rules.weight
        while len(self._rules) > 1 and (
            len(self._rules) > self._max_origins or self._weight > self._max_bytes
        ):
            self._drop(next(iter(self._rules)))
            self.evicted += 1

    async def get(self, origin: str) -> RobotsRules:
        """The origin's verdict, fetching its robots.txt if it is not kept (or has expired)."""
        while True:
            rules = self.cached(origin)
            if rules is not None:
                return rules
            pending = self._pending.get(origin)
            if pending is None:
                break
            try:
                return await asyncio.shield(pending)
            except _LoaderGone:
                continue  # the task fetching it was cancelled: try ourselves
        future: asyncio.Future[RobotsRules] = asyncio.get_running_loop().create_future()
        self._pending[origin] = future
        try:
            rules, ttl = await self._obtain(origin)
        except BaseException:
            del self._pending[origin]
            future.set_exception(_LoaderGone())
            future.exception()  # mark it retrieved: there may be no waiter
            raise
        self._store(origin, rules, ttl)
        del self._pending[origin]
        future.set_result(rules)
        return rules

    async def _obtain(self, origin: str) -> tuple[RobotsRules, float | None]:
        """The verdict from the store if it is young enough, else fetched (and stored)."""
        store = self._store_to
        if store is None:
            rules, _ = await self._load(origin)
            return rules, None
        stored = await store.get_robots(origin)
        if stored is not None:
            age = self._wall() - stored.fetched_at
            if 0 <= age < self._ttl:
                self.from_store += 1
                return await rules_from_stored(stored, self._user_agent), self._ttl - age
        fetched_at = self._wall()
        rules, record = await self._load(origin)
        if record is not None:
            await store.put_robots(
                StoredRobots(origin, fetched_at, record[0], record[1], error=None)
            )
        return rules, None

    async def _load(self, origin: str) -> tuple[RobotsRules, tuple[int, bytes] | None]:
        """Fetch and judge; also (status, body) when the verdict came from a response."""
        url = origin + "/robots.txt"
        self.fetched += 1
        chunks: list[bytes] = []
        last_redirect = 300

        def on_headers(r: Response) -> Consumer | None:
            chunks.clear()  # a retried attempt starts over
            return chunks.append if r.status is not None and 200 <= r.status < 300 else None

        for hop in range(MAX_ROBOTS_REDIRECTS + 1):
            res = await self._fetcher.fetch(url, on_headers, max_bytes=MAX_ROBOTS_BYTES)
            status = res.status
            if status is not None and 300 <= status < 400 and res.error is None:
                target = join(url, res.location) if res.location else None
                if target is None or not target.startswith(("http://", "https://")):
                    why = f"robots.txt bad redirect ({status})"
                    return RobotsRules(allow_all=True, why=why), (status, b"")
                if not self._may_follow(target):
                    why = f"robots.txt redirects out of scope: {target[:200]}"
                    return RobotsRules(allow_all=True, why=why), (status, b"")
                url = target
                last_redirect = status
                continue
            if status is not None and 200 <= status < 300 and res.error in (None, "too_large"):
                body = b"".join(chunks)
                return await _parse(decode_robots(body), self._user_agent), (status, body)
            if status is not None and 400 <= status < 500 and status != 429:
                why = f"robots.txt unavailable ({status})"
                return RobotsRules(allow_all=True, why=why), (status, b"")
            # Only the origin's own host being unreachable is the origin's error; a redirect
            # target that cannot be reached is an unreachable robots.txt (disallow, below).
            if status is None and res.error in UNREACHABLE_KINDS and hop == 0:
                rules = RobotsRules(
                    allow_all=False,
                    why=f"host unreachable: {res.error_detail}",
                    error=res.error,
                )
                return rules, None
            why = f"robots.txt unreachable ({res.error or status}): disallow all"
            return RobotsRules(allow_all=False, why=why), None
        return RobotsRules(allow_all=True, why="robots.txt: too many redirects"), (
            last_redirect,
            b"",
        )

    def _may_follow(self, target: str) -> bool:
        if self._in_scope is None or self._in_scope(target):
            return True
        parts = urlsplit(target)
        return parts.path == "/robots.txt" and not parts.query


_LOC = re.compile(rb"<(?:[A-Za-z0-9_]+:)?loc\s*>\s*([^<\s]+)\s*</", re.IGNORECASE)
_LOC_OPEN = re.compile(rb"<(?:[A-Za-z0-9_]+:)?loc\s*>", re.IGNORECASE)
_MAX_SITEMAP_TAIL = 64 * 1024
#: The sitemaps protocol's limit on an uncompressed sitemap (a gzip bomb stops here).
MAX_SITEMAP_BYTES = 50 * 1024 * 1024
_INFLATE_STEP = 256 * 1024


class SitemapParser:
    """Streaming ``<loc>`` extraction from a sitemap or sitemap index (XML), bytes in, URLs out.

    Only the tail after the last complete ``<loc>`` is kept between chunks (capped), so memory
    stays bounded whatever the size of the sitemap.
    """

    def __init__(self, max_bytes: int = MAX_SITEMAP_BYTES) -> None:
        self._tail = b""
        self._started = False
        self._inflate: Any = None  # a zlib decompressor when the body is a .gz file
        self._inflated = 0
        self._max = min(max_bytes, MAX_SITEMAP_BYTES) if max_bytes > 0 else MAX_SITEMAP_BYTES

    def feed(self, data: bytes) -> list[str]:
        if not self._started:
            if not data:
                return []
            self._started = True
            if data[:2] == b"\x1f\x8b":  # sitemap.xml.gz served as a file, not Content-Encoding
                self._inflate = zlib.decompressobj(wbits=47)
        if self._inflate is None:
            return self._scan(data)
        # Inflate a step at a time: one 64 KiB chunk of a gzip bomb would otherwise become
        # tens of MiB in one call (memory, and the event loop stalls long enough to trip the
        # read timeouts of every other fetch).
        out: list[str] = []
        while data and self._inflated < self._max:
            room = min(_INFLATE_STEP, self._max - self._inflated)
            try:
                piece = self._inflate.decompress(data, room)
            except zlib.error:
                self._inflated = self._max  # corrupt: stop here
                break
            self._inflated += len(piece)
            out += self._scan(piece)
            data = self._inflate.unconsumed_tail
        return out

    def _scan(self, data: bytes) -> list[str]:
        buf = self._tail + data
        out: list[str] = []
        end = 0
        for m in _LOC.finditer(buf):
            out.append(_unescape(m.group(1)))
            end = m.end()
        rest = buf[end:]
        # Keep an opened <loc> whose value is still arriving, or else a tag still arriving.
        starts = [m.start() for m in _LOC_OPEN.finditer(rest)]
        cut = starts[-1] if starts else rest.rfind(b"<")
        self._tail = rest[cut:][-_MAX_SITEMAP_TAIL:] if cut >= 0 else b""
        return out

    def close(self) -> list[str]:
        self._tail = b""
        return []


def _unescape(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    if "&" in text:
        text = (
            text.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", '"')
            .replace("&apos;", "'")
            .replace("&amp;", "&")
        )
    return text
