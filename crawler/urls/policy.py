"""URL canonicalisation for the seen set, and the scope rules of a crawl.

Two entry points per URL, because almost every URL the engine sees comes from the extractor,
which already returns WHATWG-serialised absolute URLs (scheme and host lower-case, default port
dropped, dot segments resolved, non-ASCII percent-encoded, fragment dropped):

* :meth:`UrlPolicy.canonical` parses anything (seeds, ``Location`` headers, sitemap entries) with
  the WHATWG parser (ada) and then applies the cheap steps below;
* :meth:`UrlPolicy.canonical_resolved` assumes WHATWG-serialised input and only applies the cheap
  steps: drop the fragment, normalise percent-escapes (upper-case hex, unreserved characters
  decoded; only upper-cased where a stray ``%`` stands), drop a bare trailing ``?``, and
  optionally sort the query / drop parameters.

Both return the same string for the same URL, and ``canonical(canonical(u)) == canonical(u)``
(a hypothesis test checks it). Scope is checked only for URLs that are new to the seen set, so it
may be a little slower than canonicalisation.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING

from ada_url import URL, join_url

if TYPE_CHECKING:
    from publicsuffixlist import PublicSuffixList

    from crawler.config import CrawlConfig

__all__ = [
    "UrlPolicy",
    "host_of",
    "join",
    "origin_of",
    "registrable_domain",
    "split_origin",
]

_HTTP_PREFIXES = ("http://", "https://")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")
# RFC 3986 unreserved characters: decoding their escapes never changes a URL's meaning.
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE_MAP = {f"{b:02x}": (chr(b) if b in _UNRESERVED else f"%{b:02X}") for b in range(256)}


# A '%' not followed by two hex digits (sent as it is, as a browser sends it). Where one stands
# the escapes are only upper-cased, not decoded: "%%41a" decoded would be "%Aa", a new escape,
# and the canonical form of the canonical form would differ (it must be idempotent).
_STRAY = re.compile(r"%(?![0-9A-Fa-f]{2})")


def _fix_escape(m: re.Match[str]) -> str:
    return _ESCAPE_MAP[m.group(1).lower()]


def _upper_escape(m: re.Match[str]) -> str:
    return "%" + m.group(1).upper()


_PSL: PublicSuffixList | None = None

# The per-origin scope cache: at most this many origins, and this many characters of keys
# (65,536 host names of 2,000 characters would be ~260 MB otherwise); then it starts over.
_ORIGIN_CACHE = 65536
_ORIGIN_CACHE_CHARS = 4 << 20


@lru_cache(maxsize=4096)
def registrable_domain(host: str) -> str:
    """The registrable domain ("eTLD+1") of ``host`` from the bundled Public Suffix List.

    IP addresses, single labels (``localhost``) and bare public suffixes are their own domain.
    No network access: publicsuffixlist ships its snapshot.
    """
    global _PSL
    host = host.rstrip(".").lower()
    if not host or host.startswith("[") or _is_ip(host):
        return host
    if _PSL is None:
        from publicsuffixlist import PublicSuffixList  # noqa: PLC0415  (only --scope domain)

        _PSL = PublicSuffixList()
    return _PSL.privatesuffix(host) or host


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def host_of(url: str) -> str:
    """Host name (no userinfo, no port) of a WHATWG-serialised absolute URL; '' if none."""
    start = url.find("//")
    if start < 0:
        return ""
    start += 2
    end = url.find("/", start)
    netloc = url[start:] if end < 0 else url[start:end]
    if "@" in netloc:
        netloc = netloc.rpartition("@")[2]
    if netloc.endswith("]"):
        return netloc
    return netloc.partition(":")[0] if not netloc.startswith("[") else netloc.rpartition(":")[0]


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a WHATWG-serialised absolute URL (userinfo dropped).

    The unit of politeness and robots.txt: robots.txt is per scheme, host and port (RFC 9309).
    """
    start = url.find("//")
    if start < 0:
        return url
    end = url.find("/", start + 2)
    origin = url if end < 0 else url[:end]
    if "@" in origin:
        scheme_end = start + 2
        origin = origin[:scheme_end] + origin[scheme_end:].rpartition("@")[2]
    return origin


def split_origin(origin: str) -> tuple[str, str, str]:
    """``(scheme, host, port)`` of an origin from :func:`origin_of`; port "" when default.

    WHATWG serialisation drops a default port (``http://h:80`` is ``http://h``), so "" means
    80 for http and 443 for https.
    """
    scheme, _, netloc = origin.partition("://")
    if netloc.startswith("["):  # IPv6 literal: the port follows the bracket
        end = netloc.find("]")
        if end >= 0:
            return scheme, netloc[: end + 1], netloc[end + 2 :]
        return scheme, netloc, ""
    host, _, port = netloc.partition(":")
    return scheme, host, port


def join(base: str, ref: str) -> str | None:
    """Resolve ``ref`` against ``base`` as a browser would; None if it does not resolve."""
    try:
        return join_url(base, ref.strip())
    except ValueError:
        return None


class UrlPolicy:
    """Canonicalisation and scope for one crawl, compiled once from the config.

    Every scope is port-aware: a URL is in scope only on the port of a seed it matches,
    where http's 80 and https's 443 count as one port (both are "the default"), so that the
    usual http -> https upgrade stays in scope while the other ports of a host (each its own
    server, its own robots.txt and politeness) do not.

    Args:
        seeds: the crawl's seed URLs; scope is relative to their hosts and ports.
        scope: ``"host"`` (a seed's host name and port; http/https alike), ``"origin"``
            (a seed's exact scheme, host and port), ``"domain"`` (a seed's registrable
            domain, on that seed's port) or ``"subdomains"`` (a seed's host or any name below
            it, on that seed's port).
        include: regexes; when any are given, a URL must match one (``re.search``).
        exclude: regexes; a URL matching any is out of scope.
        sort_query: sort query parameters (stable, by the whole ``name=value``).
        drop_params: glob patterns (``utm_*``) of query parameter names to drop.
        max_url_length: canonical URLs longer than this are refused (0 = no limit).
    """

    __slots__ = (
        "_by_origin",
        "_by_origin_chars",
        "_domains",
        "_drop",
        "_exclude",
        "_hosts",
        "_origins",
        "_include",
        "_query_work",
        "_scope",
        "_sort",
        "max_url_length",
    )

    def __init__(
        self,
        seeds: Iterable[str] = (),
        *,
        scope: str = "host",
        include: Iterable[str] = (),
        exclude: Iterable[str] = (),
        sort_query: bool = False,
        drop_params: Iterable[str] = (),
        max_url_length: int = 0,
    ) -> None:
        self._scope = scope
        self._sort = sort_query
        patterns = [p for p in drop_params if p]
        self._drop = (
            re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns))
            if patterns
            else None
        )
        self._query_work = self._sort or self._drop is not None
        self._include = [re.compile(p) for p in include]
        self._exclude = [re.compile(p) for p in exclude]
        self.max_url_length = max_url_length
        self._hosts: set[tuple[str, str]] = set()  # (host, port): "" = the default port
        self._domains: set[tuple[str, str]] = set()  # (registrable domain, port)
        self._origins: set[str] = set()
        # origin text as it appears in a URL (userinfo and all) -> its origin if in scope
        self._by_origin: dict[str, str | None] = {}
        self._by_origin_chars = 0  # the keys' length: a hostile page's long host names count
        for seed in seeds:
            self.add_seed_host(seed)

    @classmethod
    def from_config(cls, cfg: CrawlConfig) -> UrlPolicy:
        """The policy of a crawl's settings (its seeds, scope, patterns and URL rules)."""
        return cls(
            cfg.seeds,
            scope=cfg.scope,
            include=cfg.include,
            exclude=cfg.exclude,
            sort_query=cfg.sort_query,
            drop_params=cfg.drop_params,
            max_url_length=cfg.max_url_length,
        )

    def add_seed_host(self, url: str) -> None:
        """Widen the scope by the host of ``url`` (used for the seeds)."""
        canon = self.canonical(url)
        if canon is None:
            return
        origin = origin_of(canon)
        _, host, port = split_origin(origin)
        self._origins.add(origin)
        self._hosts.add((host, port))
        self._domains.add((registrable_domain(host), port))
        self._by_origin.clear()

    # -- canonicalisation --

    def canonical(self, url: str) -> str | None:
        """Canonical form of any absolute URL, or None if it is not http(s) or does not parse."""
        try:
            parsed = URL(url.strip())
        except ValueError:
            return None
        if parsed.protocol not in ("http:", "https:"):
            return None
        parsed.hash = ""
        return self.canonical_resolved(parsed.href)

    def canonical_resolved(self, url: str) -> str | None:
        """Canonical form of a WHATWG-serialised absolute URL (the extractor's output).

        None for other schemes. The hot path: a few string operations per URL.
        """
        if not url.startswith(_HTTP_PREFIXES):
            return None
        if "#" in url:
            url = url[: url.index("#")]
        end = url.find("/", 8)  # WHATWG-serialised http(s) URLs always have a path
        at = url.rfind("@", 0, end if end >= 0 else len(url))
        if at >= 0:
            # Credentials in a link are not part of the page's identity, and sending them
            # (aiohttp turns them into Authorization: Basic) is never what a crawler wants.
            url = url[: url.index("//") + 2] + url[at + 1 :]
        if "%" in url:
            url = _ESCAPE.sub(_upper_escape if _STRAY.search(url) else _fix_escape, url)
        q = url.find("?")
        if q >= 0:
            if q == len(url) - 1:  # an empty query: "/p?" is "/p" (but "/p??" has query "?")
                url = url[:-1]
            elif self._query_work:
                url = self._fix_query(url)
        return url

    def _fix_query(self, url: str) -> str:
        path, _, query = url.partition("?")
        params = query.split("&")
        drop = self._drop
        if drop is not None:
            params = [p for p in params if p and not drop.match(p.partition("=")[0])]
        else:
            params = [p for p in params if p]
        if self._sort:
            params.sort()
        return f"{path}?{'&'.join(params)}" if params else path

    def too_long(self, url: str) -> bool:
        return 0 < self.max_url_length < len(url)

    # -- scope --

    def scope_origin(self, url: str) -> str | None:
        """The origin of a canonical URL if it is in scope, else None (the engine's hot path).

        The host rule is decided once per distinct origin text and cached (`host_scope`).
        """
        origin = self.host_scope(url)
        if origin is None:
            return None
        if self._include and not any(r.search(url) for r in self._include):
            return None
        if self._exclude and any(r.search(url) for r in self._exclude):
            return None
        return origin

    @property
    def host_cache(self) -> dict[str, str | None]:
        """`host_scope`'s cache: a URL's text up to the first "/" from index 8 (its origin
        text, userinfo and all) -> the origin if the host rule admits it, else None. Emptied
        with ``clear()``, never replaced (so that the compiled intake may read it); only
        `host_scope` writes it."""
        return self._by_origin

    def host_scope(self, url: str) -> str | None:
        """The origin of a canonical URL if the host rule (``scope``) admits it, else None.

        The first half of `scope_origin`: a URL it refuses is out of scope whatever the
        ``include``/``exclude`` patterns say. Cached per distinct origin text.
        """
        end = url.find("/", 8)
        key = url if end < 0 else url[:end]
        try:
            return self._by_origin[key]
        except KeyError:
            pass
        origin = origin_of(url)
        found = origin if self._origin_ok(origin) else None
        if len(self._by_origin) >= _ORIGIN_CACHE or self._by_origin_chars > _ORIGIN_CACHE_CHARS:
            self._by_origin.clear()
            self._by_origin_chars = 0
        self._by_origin[key] = found
        self._by_origin_chars += len(key)
        return found

    def in_scope(self, url: str) -> bool:
        """Whether a canonical URL is inside the crawl's scope (host rule, then regexes)."""
        return self.scope_origin(url) is not None

    def _origin_ok(self, origin: str) -> bool:
        scope = self._scope
        if scope == "origin":
            return origin in self._origins
        _, host, port = split_origin(origin)
        if (host, port) in self._hosts:
            return True
        if scope == "domain":
            return (registrable_domain(host), port) in self._domains
        if scope == "subdomains":
            return any(p == port and host.endswith("." + h) for h, p in self._hosts)
        return False
