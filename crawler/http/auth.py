"""HTTP Basic credentials per origin, decided for every request (every redirect hop).

The crawl follows redirects itself, hop by hop, so aiohttp's own rule (drop ``auth`` on a
cross-origin redirect) never applies: the fetcher asks :meth:`AuthMap.header_for` before each
request and sends ``Authorization`` only when that request's origin (scheme, host, port) is one
the credentials were given for. ``auth`` / ``auth_env`` are for the seeds' origins,
``origin_auth`` names origins itself. A redirect to another origin (another host, another port,
http -> https) gets nothing.

The secrets are kept only here: :func:`redact` replaces them (and the encoded header, and any
``user:password@`` userinfo in a URL) in a text before it leaves the fetcher.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from crawler.http.errors import OptionError

if TYPE_CHECKING:
    from yarl import URL

__all__ = ["REDACTED", "AuthMap", "Origin", "origin_key", "redact_userinfo"]

REDACTED = "[redacted]"
DEFAULT_PORTS = {"http": 80, "https": 443}

#: (scheme, host, port): the unit the credentials are given for (RFC 6454 origin).
Origin = tuple[str, str, int]

# scheme://userinfo@ in any text: the userinfo goes (a link or a Location may carry one).
_USERINFO_RE = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@")


def redact_userinfo(text: str) -> str:
    """``text`` with every ``scheme://user:password@`` reduced to ``scheme://``."""
    return _USERINFO_RE.sub(r"\1", text) if "@" in text else text


def origin_key(url: URL | str) -> Origin | None:
    """(scheme, host, port) of an http(s) URL, host lower-case and IDNA-encoded; else None."""
    from yarl import URL  # noqa: PLC0415  (start-up: yarl only once credentials are in use)

    try:
        u = url if isinstance(url, URL) else URL(url.strip())
        scheme = u.scheme.lower()
        host = (u.raw_host or "").lower()
        port = u.port if u.explicit_port is not None else DEFAULT_PORTS.get(scheme)
    except (ValueError, TypeError, UnicodeError):
        return None
    if scheme not in DEFAULT_PORTS or not host or port is None:
        return None
    return scheme, host, port


def _basic(option: str, value: str) -> tuple[str, str]:
    """(the Authorization header value, the password) of "user:password"; OptionError if not."""
    user, colon, password = value.partition(":")
    if not colon:
        raise OptionError(option, "expected 'user:password' (no colon in the value)")
    if any(c in value for c in "\r\n\0"):
        raise OptionError(option, "the credentials hold a line break or NUL")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return f"Basic {token}", password


class AuthMap:
    """Origin -> Basic ``Authorization`` header value, built once per crawl.

    Args:
        seeds: the crawl's seeds; their origins get ``auth`` (or the value of ``auth_env``).
        auth: "user:password" for the seeds' origins.
        auth_env: the name of an environment variable holding "user:password" (read now).
        origin_auth: {"scheme://host[:port]": "user:password"}; wins over ``auth`` for its
            origin.
        environ: the environment to read ``auth_env`` from (default ``os.environ``).

    Raises OptionError (naming the option, never the secret) for a malformed value, an unset
    variable, or an ``origin_auth`` key that is not an http(s) origin.
    """

    __slots__ = ("_by_origin", "_secrets")

    def __init__(
        self,
        seeds: Iterable[str] = (),
        auth: str | None = None,
        auth_env: str | None = None,
        origin_auth: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._by_origin: dict[Origin, str] = {}
        self._secrets: set[str] = set()
        value, option = auth, "--auth"
        if auth_env:
            env = os.environ if environ is None else environ
            option = "--auth-env"
            if auth is not None:
                raise OptionError(option, "give --auth or --auth-env, not both")
            value = env.get(auth_env)
            if value is None:
                raise OptionError(option, f"the environment variable {auth_env} is not set")
        if value is not None:
            header = self._add_secret(option, value)
            for seed in seeds:
                key = origin_key(seed)
                if key is not None:
                    self._by_origin[key] = header
        for origin, cred in (origin_auth or {}).items():
            key = origin_key(origin)
            if key is None or has_path(origin):
                raise OptionError(
                    "origin_auth", f"{origin!r} is not an origin (scheme://host[:port])"
                )
            self._by_origin[key] = self._add_secret(f"origin_auth[{origin!r}]", cred)

    def _add_secret(self, option: str, value: str) -> str:
        header, password = _basic(option, value)
        self._secrets.add(header.split(" ", 1)[1])
        if len(password) >= 3:  # a shorter one would redact half of every text
            self._secrets.add(password)
        return header

    def __bool__(self) -> bool:
        return bool(self._by_origin)

    def __repr__(self) -> str:  # never the secrets
        return f"AuthMap({len(self._by_origin)} origin(s))"

    @property
    def origins(self) -> list[Origin]:
        """The origins that get credentials (for tests and messages; no secrets)."""
        return sorted(self._by_origin)

    def items(self) -> list[tuple[Origin, str]]:
        """(origin, its ``Authorization`` value) for every origin that gets one."""
        return list(self._by_origin.items())

    def header_for(self, url: URL) -> str | None:
        """The ``Authorization`` value for a request to ``url``, or None (another origin)."""
        if not self._by_origin:
            return None
        key = origin_key(url)
        return None if key is None else self._by_origin.get(key)

    def redact(self, text: str) -> str:
        """``text`` without the credentials (passwords, encoded tokens, URL userinfo)."""
        text = redact_userinfo(text)
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


def has_path(origin: str) -> bool:
    """Whether an ``origin_auth``/``origin_headers`` key says more than scheme://host[:port]."""
    rest = origin.split("://", 1)[-1]
    return any(c in rest.rstrip("/") for c in "/?#")
