"""Which proxy a request goes through: ``--proxy`` or the environment, and NO_PROXY.

Decided here, per URL, rather than by aiohttp's ``trust_env`` because aiohttp's way has two
silent fallbacks to a direct connection that a crawl behind a proxy must not take: an
``https://`` proxy in the environment is ignored with a log line, and any lookup failure means
"no proxy". Here a proxy we cannot use is an :class:`~crawler.http.errors.OptionError` at
start, and an unreachable one is the error kind ``proxy`` on every request that needed it.

Rules (those of curl and Python's urllib, which agree on them):

- ``--proxy URL`` (config ``proxy``) is used for http and https URLs alike; it replaces
  ``HTTP_PROXY`` / ``HTTPS_PROXY``.
- Otherwise ``http_proxy`` for http URLs, ``https_proxy`` for https URLs; the lower-case name
  wins over the upper-case one. Upper-case ``HTTP_PROXY`` is ignored when ``REQUEST_METHOD``
  is set (a CGI environment, where it may come from a request header: "httpoxy").
- ``no_proxy`` / ``NO_PROXY`` (applies to ``--proxy`` too, as in curl): comma- or
  space-separated entries; ``*`` = every host; ``example.com`` or ``.example.com`` = that host
  and its subdomains; ``host:port`` = that host on that port only; an IP address = itself;
  ``10.0.0.0/8`` = the addresses in that network.
- A proxy URL is ``http://[user:password@]host[:port]`` (port default 80, curl uses 1080; give
  it). ``https://`` proxies (TLS to the proxy) and ``socks`` are not supported: an error, not a
  silent direct connection. https URLs go through the proxy by CONNECT (aiohttp does it).
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from crawler.http.errors import OptionError

if TYPE_CHECKING:
    from yarl import URL

__all__ = ["Proxy", "ProxyChooser", "proxy_problem"]

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Proxy:
    """A usable proxy: its URL without credentials, and the Proxy-Authorization to send."""

    url: URL
    authorization: str | None = field(default=None, repr=False)  # a secret

    @property
    def shown(self) -> str:
        """The proxy as messages show it: scheme://host:port, never the credentials."""
        return f"{self.url.scheme}://{self.url.host_port_subcomponent}"


def proxy_problem(value: str) -> str | None:
    """Why ``value`` is not a usable proxy URL, or None. Never quotes the credentials."""
    from yarl import URL  # noqa: PLC0415  (start-up: yarl only once a proxy is configured)

    try:
        url = URL(value.strip())
    except (ValueError, TypeError, UnicodeError) as exc:
        return f"not a URL ({type(exc).__name__})"
    shown = str(url.with_user(None)) if url.user is not None else str(url)
    scheme = url.scheme.lower()
    if not scheme or "://" not in value:
        return f"{shown!r} is not a URL with a scheme (write http://host:port)"
    if scheme in ("https", "socks4", "socks4a", "socks5", "socks5h"):
        return f"{scheme}:// proxies are not supported (only http:// proxies)"
    if scheme != "http":
        return f"{shown!r}: the scheme {scheme!r} is not a proxy scheme (use http://)"
    if not url.raw_host:
        return f"{shown!r} has no host"
    try:
        url.port  # noqa: B018 - yarl validates the port lazily
    except ValueError:
        return f"{shown!r} has an invalid port"
    if url.path not in ("", "/") or url.query_string or url.fragment:
        return f"{shown!r} has a path, query or fragment (a proxy is scheme://host:port)"
    return None


def _make_proxy(option: str, value: str) -> Proxy:
    from yarl import URL  # noqa: PLC0415  (start-up: yarl only once a proxy is configured)

    reason = proxy_problem(value)
    if reason:
        raise OptionError(option, reason)
    url = URL(value.strip())
    authorization = None
    if url.user is not None:
        raw = f"{url.user}:{url.password or ''}"
        authorization = "Basic " + base64.b64encode(raw.encode()).decode("ascii")
    return Proxy(url.with_user(None).with_path(""), authorization)


class _NoProxy:
    """The parsed NO_PROXY list."""

    __slots__ = ("all", "hosts", "networks")

    def __init__(self, value: str) -> None:
        self.all = False
        self.hosts: list[tuple[str, int | None]] = []  # (host suffix, port or None)
        self.networks: list[IPNetwork] = []
        for entry in value.replace(",", " ").split():
            entry = entry.strip().lower()
            if entry == "*":
                self.all = True
                continue
            if "/" in entry:
                try:
                    self.networks.append(ipaddress.ip_network(entry, strict=False))
                except ValueError:
                    pass  # not a network: ignored as curl and urllib ignore junk entries
                continue
            host, port = entry, None
            if host.startswith("["):  # [v6]:port
                close = host.find("]")
                rest = host[close + 1 :]
                host = host[1:close]
                if rest.startswith(":") and rest[1:].isdigit():
                    port = int(rest[1:])
            elif host.count(":") == 1:
                name, _, tail = host.partition(":")
                if tail.isdigit():
                    host, port = name, int(tail)
            self.hosts.append((host.lstrip(".").rstrip("."), port))

    def bypass(self, host: str, port: int | None) -> bool:
        if self.all:
            return True
        host = host.lower().rstrip(".")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        for name, want_port in self.hosts:
            if want_port is not None and want_port != port:
                continue
            if name and (host == name or host.endswith("." + name)):
                return True
        if self.networks:
            try:
                addr = ipaddress.ip_address(host)
            except ValueError:
                return False
            return any(addr in net for net in self.networks)
        return False


class ProxyChooser:
    """Decides the proxy of each request (None = direct).

    Args:
        proxy: ``--proxy`` (config ``proxy``); replaces the environment's proxies.
        environ: where the standard variables are read (default ``os.environ``), once, now.

    Raises OptionError for a proxy URL that cannot be used (naming ``--proxy`` or the variable).
    """

    __slots__ = ("_by_scheme", "_no_proxy")

    def __init__(self, proxy: str | None = None, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        self._by_scheme: dict[str, Proxy] = {}
        if proxy:
            chosen = _make_proxy("--proxy", proxy)
            self._by_scheme = {"http": chosen, "https": chosen}
        else:
            for scheme in ("http", "https"):
                for name in (f"{scheme}_proxy", f"{scheme.upper()}_PROXY"):
                    if name == "HTTP_PROXY" and "REQUEST_METHOD" in env:
                        continue  # httpoxy: in CGI it may come from a request's Proxy header
                    value = env.get(name, "").strip()
                    if value:
                        self._by_scheme[scheme] = _make_proxy(name, value)
                        break
        no_proxy = env.get("no_proxy") or env.get("NO_PROXY") or ""
        self._no_proxy = _NoProxy(no_proxy)

    def __bool__(self) -> bool:
        return bool(self._by_scheme)

    def __repr__(self) -> str:
        shown = {k: v.shown for k, v in self._by_scheme.items()}
        return f"ProxyChooser({shown})"

    def for_url(self, url: URL) -> Proxy | None:
        """The proxy for a request to ``url``, or None to connect directly (NO_PROXY)."""
        if not self._by_scheme:
            return None
        chosen = self._by_scheme.get(url.scheme)
        if chosen is None:
            return None
        if self._no_proxy.bypass(url.raw_host or "", url.port):
            return None
        return chosen
