"""Credential headers per origin: what only some origins get, decided for every request.

A header whose name says it is a credential (``crawler.config.secret_header``: Authorization,
Cookie, X-Api-Key, anything with token, secret, passw, key, auth, session or signature) given
with ``--header`` goes to the seeds' origins only, as Basic auth does (:mod:`crawler.http.auth`).
An origin is (scheme, host, port), so a link, a redirect hop or a robots.txt redirect to another
host, another port or another scheme (https -> http included: never in clear text) gets none of
them: what curl does since CVE-2018-1000007 and CVE-2022-27776, and requests for Authorization.
``origin_headers`` (``--header-for ORIGIN 'Name: value'``) names an origin and what it gets, any
header; ``bearer_env`` (``--bearer-env VAR``) reads a token from the environment at start and
sends ``Authorization: Bearer TOKEN`` to the seeds' origins. The other headers go with every
request, as before (:func:`crawler.http.options.header_list`).

Built once per crawl; per request the fetcher looks the request's origin up in a dict (the
plain path without parsing the URL, :mod:`crawler.http.prepare`). The secrets are kept here and
in :class:`~crawler.http.auth.AuthMap`: :meth:`OriginHeaders.redact` takes them out of a text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from crawler.config import CrawlConfig, header_problem, secret_header
from crawler.http.auth import REDACTED, AuthMap, Origin, has_path, origin_key
from crawler.http.errors import OptionError

if TYPE_CHECKING:
    from yarl import URL

__all__ = ["Header", "OriginHeaders", "merge_headers", "parse_headers"]

#: ("Name", "value") of one request header.
Header = tuple[str, str]

# A header value shorter than this is not redacted from texts (it would cut common words).
_MIN_SECRET = 6


def parse_headers(headers: Iterable[str], option: str = "--header") -> list[Header]:
    """("Name", "value") pairs of ``--header`` values; OptionError naming the bad one."""
    out: list[Header] = []
    for header in headers:
        reason = header_problem(header)
        if reason:
            raise OptionError(option, reason)
        name, _, value = header.partition(":")
        out.append((name, value.strip(" \t")))
    return out


def merge_headers(base: Iterable[Header], more: list[Header]) -> list[Header]:
    """``base`` with ``more`` after it; a name in ``more`` replaces that name in ``base`` (any
    case), a name ``more`` gives twice is kept twice (as aiohttp merges request headers)."""
    names = {name.lower() for name, _ in more}
    return [(n, v) for n, v in base if n.lower() not in names] + more


class OriginHeaders:
    """Origin -> the headers only that origin gets (credential headers, Basic auth included).

    Args:
        config: ``seeds``, ``headers`` (their credential ones), ``origin_headers``,
            ``bearer_env``, and Basic auth (``auth``, ``auth_env``, ``origin_auth``).
        environ: where ``bearer_env`` and ``auth_env`` are read (default ``os.environ``).

    For one origin, in this order, a later name replacing an earlier one: the seeds' credential
    headers and the bearer token (seeds' origins), ``origin_headers`` for it, Basic auth for it.
    Raises OptionError (naming the option, never a secret) for a header that is not
    "Name: value", an unset variable, or an ``origin_headers`` key that is not an origin.
    """

    __slots__ = ("_by_origin", "_secrets", "auth")

    def __init__(self, config: CrawlConfig, environ: Mapping[str, str] | None = None) -> None:
        self.auth = AuthMap(config.seeds, config.auth, config.auth_env, config.origin_auth, environ)
        self._secrets: set[str] = set()
        seeds: list[Header] = [(n, v) for n, v in parse_headers(config.headers) if secret_header(n)]
        if config.bearer_env:
            env = os.environ if environ is None else environ
            token = env.get(config.bearer_env, "").strip(" \t")
            if not token:
                raise OptionError(
                    "--bearer-env",
                    f"the environment variable {config.bearer_env} is not set (or empty)",
                )
            if any(c in token for c in "\r\n\0"):
                raise OptionError("--bearer-env", "the token holds a line break or NUL")
            seeds = merge_headers(seeds, [("Authorization", f"Bearer {token}")])
            self._secrets.add(token)
        by: dict[Origin, list[Header]] = {}
        none: list[Header] = []
        if seeds:
            for seed in config.seeds:
                key = origin_key(seed)
                if key is not None:
                    by[key] = seeds
        for origin, headers in config.origin_headers.items():
            key = origin_key(origin)
            if key is None or has_path(origin):
                raise OptionError(
                    "--header-for", f"{origin!r} is not an origin (scheme://host[:port])"
                )
            pairs = parse_headers((headers,) if isinstance(headers, str) else headers)
            by[key] = merge_headers(by.get(key, none), pairs)
        for key, basic in self.auth.items():
            by[key] = merge_headers(by.get(key, none), [("Authorization", basic)])
        self._by_origin: dict[Origin, tuple[Header, ...]] = {
            key: tuple(pairs) for key, pairs in by.items() if pairs
        }
        for kept in self._by_origin.values():
            for name, value in kept:
                if secret_header(name):
                    # the value, and its token alone ("Bearer TOKEN": TOKEN)
                    for secret in (value, value.rpartition(" ")[2]):
                        if len(secret) >= _MIN_SECRET:
                            self._secrets.add(secret)

    def __bool__(self) -> bool:
        return bool(self._by_origin)

    def __repr__(self) -> str:  # never the secrets
        return f"OriginHeaders({len(self._by_origin)} origin(s))"

    @property
    def origins(self) -> list[Origin]:
        """The origins that get headers of their own (for tests and messages; no secrets)."""
        return sorted(self._by_origin)

    def items(self) -> list[tuple[Origin, tuple[Header, ...]]]:
        """(origin, its headers) for every origin that has some: what the fetcher builds its
        per-origin request heads from."""
        return list(self._by_origin.items())

    def for_url(self, url: URL | str) -> tuple[Header, ...] | None:
        """The headers only the origin of ``url`` gets, or None (it gets none)."""
        if not self._by_origin:
            return None
        key = origin_key(url)
        return None if key is None else self._by_origin.get(key)

    def redact(self, text: str) -> str:
        """``text`` without the credentials (Basic auth's, tokens, credential header values)."""
        text = self.auth.redact(text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text
