"""The crawl's fetch options, read from its config once: the headers every request sends, the
limits of the connection pools (both paths), the cookies the jar starts with, and
:func:`check_options`, which refuses a setting that cannot work before anything is fetched.

Per crawl, not per request: :mod:`crawler.http.prepare` turns these into each request's plan;
:mod:`crawler.http.session` and :mod:`crawler.http.plain` size their pools by them. Imports
neither transport (nor aiohttp, yarl or multidict, but in :func:`session_headers`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from crawler.config import CrawlConfig, secret_header
from crawler.http.credentials import Header, OriginHeaders, merge_headers, parse_headers
from crawler.http.decode import accept_encoding
from crawler.http.proxy import ProxyChooser
from crawler.http.tls_context import check_tls_options, tls_custom

if TYPE_CHECKING:
    from multidict import CIMultiDict

    from crawler.http.cookies import Cookie

__all__ = [
    "ACCEPT",
    "DNS_CACHE_TTL",
    "IDLE_MIN",
    "IDLE_PER_REQUEST",
    "KEEPALIVE_TIMEOUT",
    "check_options",
    "cookies_module",
    "head_lines",
    "header_list",
    "idle_cap",
    "initial_cookies",
    "parse_headers",
    "request_head_base",
    "session_headers",
]

ACCEPT = "text/html,application/xhtml+xml;q=0.9,*/*;q=0.5"
# Seconds the connection pool keeps an idle keep-alive connection.
KEEPALIVE_TIMEOUT = 30.0
# Seconds a resolved host name stays cached.
DNS_CACHE_TTL = 300
# Idle keep-alive connections kept overall: IDLE_PER_REQUEST x concurrency, at least IDLE_MIN.
IDLE_PER_REQUEST = 2
IDLE_MIN = 16


def idle_cap(config: CrawlConfig) -> int:
    """How many idle keep-alive connections the crawl's pool keeps, all origins together."""
    return max(IDLE_MIN, IDLE_PER_REQUEST * max(1, config.concurrency))


def header_list(config: CrawlConfig) -> list[Header]:
    """The headers every request sends, in order: ours, then the user's (a user's name
    replaces ours, case-insensitively; a name the user gives twice is sent twice).

    Not the credential headers (``secret_header``): those go to the seeds' origins only,
    added per request (:mod:`crawler.http.credentials`)."""
    users = [(n, v) for n, v in parse_headers(config.headers) if not secret_header(n)]
    return merge_headers([("User-Agent", config.user_agent), ("Accept", ACCEPT)], users)


def session_headers(config: CrawlConfig) -> CIMultiDict[str]:
    """`header_list` as the aiohttp session takes it."""
    from multidict import CIMultiDict  # noqa: PLC0415  (start-up: aiohttp's path only)

    return CIMultiDict(header_list(config))


def request_head_base(user_accept_encoding: bool, config: CrawlConfig) -> bytes:
    """The header lines every plain request sends (after ``Host``): the session's headers and,
    unless the user gave one, the Accept-Encoding of what :mod:`crawler.http.decode` decodes
    (aiohttp's own choice, less the codings it could not decode either)."""
    return head_lines(header_list(config), user_accept_encoding)


def head_lines(headers: list[Header], user_accept_encoding: bool) -> bytes:
    """``headers`` as request head lines, and our Accept-Encoding unless a header gives one."""
    lines = [f"{name}: {value}\r\n" for name, value in headers]
    if not user_accept_encoding and not any(n.lower() == "accept-encoding" for n, _ in headers):
        lines.append(f"Accept-Encoding: {accept_encoding()}\r\n")
    return "".join(lines).encode("utf-8")


def cookies_module() -> Any:
    """crawler.http.cookies, imported by the crawls that load or save a cookies file only."""
    import crawler.http.cookies  # noqa: PLC0415  (start-up time)

    return crawler.http.cookies


def initial_cookies(config: CrawlConfig) -> list[Cookie] | None:
    """The cookies the jar starts with: ``config.cookies``, read now.

    The same file for ``cookies`` and ``save_cookies`` (the jar carried from run to run)
    may not exist yet: the first run starts with an empty jar.
    """
    path = config.cookies
    if not path:
        return None
    if path == config.save_cookies and not os.path.lexists(path):
        return []
    result: list[Cookie] = cookies_module().load_cookies(path)
    return result


def check_options(config: CrawlConfig) -> None:
    """OptionError now for a fetch option that cannot work (the CLI's exit 2, before crawling).

    The headers, the cookies file (read and parsed), the directory of ``save_cookies``, the
    credentials (``auth_env`` and ``bearer_env`` must be set), the origins of ``origin_auth``
    and ``origin_headers``, the proxy (``--proxy`` or the environment's), the TLS files
    (``--ca-cert``, ``--client-cert``, ``--client-key`` and its passphrase). Messages name the
    option and the reason, never a secret.
    """
    parse_headers(config.headers)
    initial_cookies(config)
    if config.save_cookies:
        cookies_module().check_save_path(config.save_cookies)
    OriginHeaders(config)
    ProxyChooser(config.proxy)
    if tls_custom(config) or config.client_key:
        check_tls_options(config)
