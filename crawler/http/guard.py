"""Which addresses the crawl may connect to: ``exclude_private``, ``exclude_link_local`` and
``exclude_loopback``, decided on the RESOLVED address, when a connection is opened.

A page decides which URLs the crawl and the checker request: a link, a redirect, a robots.txt
redirect or a sitemap can name an internal host (a router's admin page, a database's HTTP port,
the cloud metadata service at 169.254.169.254). Looking at the URL's host is not enough: a DNS
name can resolve to any address, and resolve to another one the next time (DNS rebinding),
and an address has many spellings (``0x7f000001``, ``127.1``, ``[::ffff:127.0.0.1]``). So the
rule is applied where the socket is opened, to the very addresses it is opened to: in the
plain path's pool (:mod:`crawler.http.pool`) and in aiohttp's connector
(:mod:`crawler.http.session`), once per new connection (a reused keep-alive connection was
checked when it was opened: no cost per request).

The seeds are always allowed: a connection to a seed's host and port (its origin but the
scheme, which a connection does not know: the host as the URL names it, lower-case,
IDNA-encoded) is never refused, whatever it resolves to; so are the proxies (the user named
them). Everything else the crawl connects to is checked.

Through a proxy the proxy connects to the target: only the URL's host as written can be
checked then (an address literal, ``localhost``); a name is the proxy's to resolve and refuse.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from crawler.http.errors import HttpError

if TYPE_CHECKING:
    from crawler.config import CrawlConfig

__all__ = [
    "LINK_LOCAL",
    "LOOPBACK",
    "OPTION_OF",
    "PRIVATE",
    "AddressGuard",
    "BlockedAddress",
    "address_class",
    "host_port",
]

LOOPBACK = "loopback"
PRIVATE = "private"
LINK_LOCAL = "link-local"

_N4 = ipaddress.IPv4Network
_N6 = ipaddress.IPv6Network
# (network, class), most specific first where they overlap.
_V4: tuple[tuple[ipaddress.IPv4Network, str], ...] = (
    (_N4("127.0.0.0/8"), LOOPBACK),
    (_N4("0.0.0.0/8"), LOOPBACK),  # "this host": a connect to 0.0.0.0 reaches loopback
    (_N4("169.254.0.0/16"), LINK_LOCAL),  # the cloud metadata services' 169.254.169.254
    (_N4("10.0.0.0/8"), PRIVATE),
    (_N4("172.16.0.0/12"), PRIVATE),
    (_N4("192.168.0.0/16"), PRIVATE),
    (_N4("100.64.0.0/10"), PRIVATE),  # CGNAT shared space: carriers' and clouds' insides
)
_V6: tuple[tuple[ipaddress.IPv6Network, str], ...] = (
    (_N6("::1/128"), LOOPBACK),
    (_N6("::/128"), LOOPBACK),  # unspecified: a connect to :: reaches loopback
    (_N6("fe80::/10"), LINK_LOCAL),
    (_N6("fc00::/7"), PRIVATE),  # unique local addresses
    (_N6("fec0::/10"), PRIVATE),  # site-local (deprecated, still routed by some)
)
# IPv6 forms that carry an IPv4 address the packet may end up at: IPv4-mapped (the socket
# layer connects to the IPv4 address), IPv4-compatible (deprecated) and NAT64's well-known
# prefix (a NAT64 gateway translates it to the IPv4 address).
_EMBEDDED = (_N6("::ffff:0:0/96"), _N6("::/96"), _N6("64:ff9b::/96"))

#: The option that refuses each class (for the error's detail).
OPTION_OF = {
    LOOPBACK: "--exclude-loopback",
    PRIVATE: "--exclude-private",
    LINK_LOCAL: "--exclude-link-local",
}


def address_class(address: str) -> str | None:
    """``loopback``, ``private`` or ``link-local`` for an IP address (text), else None.

    An IPv6 address that embeds an IPv4 one (``::ffff:127.0.0.1``, ``64:ff9b::a00:1``) has
    the class of the IPv4 address; a zone (``fe80::1%eth0``) is ignored. Not an address: None.
    """
    try:
        ip = ipaddress.ip_address(address.partition("%")[0])
    except ValueError:
        return None
    if ip.version == 6:
        assert isinstance(ip, ipaddress.IPv6Address)
        for network, name in _V6:
            if ip in network:
                return name
        if any(ip in net for net in _EMBEDDED):
            ip = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        else:
            return None
    for network4, name in _V4:
        if ip in network4:
            return name
    return None


class BlockedAddress(HttpError):
    """A connection the address rules refuse: error kind ``blocked_address``, never retried,
    no packet sent."""

    def __init__(self, host: str, port: int, address: str, cls: str) -> None:
        shown = f"[{host}]" if ":" in host else host
        where = "" if host == address else f" ({address})"
        super().__init__(
            "blocked_address",
            f"BlockedAddress: not connecting to {shown}:{port}{where}: a {cls} address,"
            f" excluded by {OPTION_OF[cls]}",
        )
        self.address = address
        self.address_class = cls


def _host_key(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


class AddressGuard:
    """The classes of addresses refused, and the (host, port) pairs always allowed.

    Args:
        classes: the refused classes (``LOOPBACK``, ``PRIVATE``, ``LINK_LOCAL``).
        allowed: (host, port) pairs never refused (the seeds'). A proxy's connection is never
            checked (:mod:`crawler.http.session` knows it is one).
    """

    __slots__ = ("_allowed", "classes")

    def __init__(self, classes: Iterable[str], allowed: Iterable[tuple[str, int]] = ()) -> None:
        self.classes = frozenset(classes)
        self._allowed = {(_host_key(h), p) for h, p in allowed}

    def __repr__(self) -> str:
        return f"AddressGuard({sorted(self.classes)}, {len(self._allowed)} allowed)"

    @classmethod
    def from_config(cls, config: CrawlConfig) -> AddressGuard | None:
        """The guard of a crawl (None: nothing refused, nothing to check)."""
        classes = [
            name
            for name, on in (
                (LOOPBACK, config.exclude_loopback),
                (PRIVATE, config.exclude_private),
                (LINK_LOCAL, config.exclude_link_local),
            )
            if on
        ]
        if not classes:
            return None
        return cls(classes, [hp for hp in map(host_port, config.seeds) if hp is not None])

    def allows_host(self, host: str, port: int) -> bool:
        """Whether (host, port) is a seed's: never refused."""
        return (_host_key(host), port) in self._allowed

    def refused(self, host: str, port: int, address: str) -> str | None:
        """The class of ``address`` if a connection to it for ``host:port`` is refused."""
        cls = address_class(address)
        if cls is None or cls not in self.classes or self.allows_host(host, port):
            return None
        return cls

    def filter(self, host: str, port: int, addresses: list[Any], at: int | str) -> list[Any]:
        """``addresses`` less the refused ones (``item[at]`` is each one's IP text); raises
        :class:`BlockedAddress` when none is left."""
        if self.allows_host(host, port):
            return addresses
        kept = []
        first: tuple[str, str] | None = None
        for item in addresses:
            address = _ip_text(item, at)
            cls = address_class(address)
            if cls is not None and cls in self.classes:
                if first is None:
                    first = (address, cls)
                continue
            kept.append(item)
        if not kept and first is not None:
            raise BlockedAddress(_host_key(host), port, *first)
        return kept

    def check_literal(self, host: str, port: int) -> None:
        """Through a proxy: the URL's host as written (an address, or ``localhost``)."""
        key = _host_key(host)
        if self.allows_host(key, port):
            return
        if key == "localhost" or key.endswith(".localhost"):
            address, cls = "127.0.0.1", LOOPBACK  # RFC 6761: always loopback
        else:
            address, cls_or_none = key, address_class(key)
            if cls_or_none is None:
                return
            cls = cls_or_none
        if cls in self.classes:
            raise BlockedAddress(key, port, address, cls)


def _ip_text(item: Any, at: int | str) -> str:
    value = item[at]
    return value[0] if isinstance(value, tuple) else str(value)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def host_port(url: str) -> tuple[str, int] | None:
    """(host, port) of an http(s) URL, host lower-case and IDNA-encoded; None if it has none."""
    from urllib.parse import urlsplit  # noqa: PLC0415  (start-up)

    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if not host or scheme not in _DEFAULT_PORTS:
        return None
    try:
        host = host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        return None
    return host.lower(), port if port is not None else _DEFAULT_PORTS[scheme]
