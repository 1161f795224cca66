"""What a valid setting is: each key's check against its type and range, the rules between
keys, and the checks of one value (a seed, a header, a proxy or Redis URL) that the CLI and the
HTTP client also use.

Every error is a ConfigError naming the source (file or flag), the key and the reason; a reason
never shows a credential (a password, a secret header's value).
"""

from __future__ import annotations

import math
import re
import types
import typing
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from crawler.config.model import CrawlConfig

__all__ = [
    "ConfigError",
    "check_together",
    "check_value",
    "header_problem",
    "is_redis_url",
    "proxy_problem",
    "redact_url",
    "redis_url_problem",
    "secret_header",
    "seed_problem",
]


class ConfigError(ValueError):
    """A setting is unknown, of the wrong type, or out of range.

    The message names the source (file or flag), the key and the reason; the parts are also
    kept as attributes so that the CLI can name a flag instead of a key.
    """

    def __init__(self, reason: str, *, key: str | None = None, source: str | None = None) -> None:
        self.reason = reason
        self.key = key
        self.source = source
        parts = [p for p in (source, key) if p]
        super().__init__(": ".join([*parts, reason]))


# What a str | None key names, for its error message.
_WHAT = {
    "state": "a directory or a redis:// URL",
    "auth": "'user:password'",
    "auth_env": "an environment variable name",
    "bearer_env": "an environment variable name",
    "client_key_password_env": "an environment variable name",
    "proxy": "a proxy URL",
    "name": "a crawl name",
    "robots_agent": "a product token",
}
_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PRODUCT_RE = re.compile(r"[A-Za-z_-]+")  # RFC 9309 section 2.2.1: a product token


def _origin_problem(origin: str) -> str | None:
    """Why ``origin`` is not "scheme://host[:port]" (an origin_auth key), or None."""
    try:
        parts = urlsplit(origin)
        host, _ = parts.hostname, parts.port
    except ValueError as exc:
        return f"is not an origin ({exc})"
    if parts.scheme.lower() not in ("http", "https") or not host:
        return "is not an origin (http(s)://HOST[:PORT])"
    if parts.path not in ("", "/") or parts.query or parts.fragment or "@" in parts.netloc:
        return "is not an origin: only scheme, host and port (http(s)://HOST[:PORT])"
    return None


# Keys whose value must be >= 1 (the rest of the numbers must be >= 0: 0 means "no limit"/none).
# A page's budget in the browser: a page that never settles holds a browser page this long.
_MAX_RENDER_TIMEOUT = 300.0
_POSITIVE = frozenset({"concurrency", "per_host", "render_concurrency"})


def _type_name(value: object) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def check_together(cfg: CrawlConfig, source: str | None) -> None:
    """The rules between keys (each key alone is already checked)."""
    if cfg.auth is not None and cfg.auth_env is not None:
        raise ConfigError(
            "cannot be given with auth (--auth): give one of them", key="auth_env", source=source
        )
    if cfg.bearer_env is not None and (cfg.auth is not None or cfg.auth_env is not None):
        raise ConfigError(
            "cannot be given with auth or auth_env (--auth, --auth-env): both are the seeds'"
            " Authorization; give one of them",
            key="bearer_env",
            source=source,
        )
    if cfg.client_key is not None and cfg.client_cert is None:
        raise ConfigError(
            "needs client_cert (--client-cert): the certificate the key goes with",
            key="client_key",
            source=source,
        )
    if cfg.client_key_password_env is not None and cfg.client_cert is None:
        raise ConfigError(
            "needs client_cert (--client-cert): the passphrase is of its private key",
            key="client_key_password_env",
            source=source,
        )
    if cfg.name is not None and not is_redis_url(cfg.state):
        raise ConfigError(
            "needs a redis:// state (--state redis://HOST:PORT/DB): it names a crawl in a"
            " Redis database",
            key="name",
            source=source,
        )
    if cfg.host_split and not is_redis_url(cfg.state):
        raise ConfigError(
            "needs a redis:// state (--state redis://HOST:PORT/DB): it splits a host among"
            " the workers of a shared crawl",
            key="host_split",
            source=source,
        )
    if cfg.host_split > 65536:
        raise ConfigError("must be at most 65536 (a part a shard)", key="host_split", source=source)


_REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def is_redis_url(state: str | None) -> bool:
    """Whether ``state`` is a Redis URL (redis://, rediss:// or unix://), not a directory."""
    return bool(state) and str(state).lower().startswith(_REDIS_SCHEMES)


def redact_url(url: str) -> str:
    """``url`` with the password of its userinfo replaced by ``***``, for messages."""
    try:
        parts = urlsplit(url)
        if "@" not in parts.netloc:
            return url
        userinfo, _, host = parts.netloc.rpartition("@")
        user = userinfo.partition(":")[0]
        return parts._replace(netloc=f"{user}:***@{host}").geturl()
    except ValueError:
        return "(a URL that cannot be parsed)"


def redis_url_problem(url: str) -> str | None:
    """Why ``url`` is not a Redis URL the state can use, or None (no password in the reason).

    redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], rediss:// (TLS) the same, unix:///PATH[?db=N].
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        return f"{shown!r} is not a valid Redis URL ({exc})"
    scheme = parts.scheme.lower()
    if scheme == "unix":
        return None if parts.path else f"{shown!r} has no socket path (unix:///PATH)"
    if not host:
        return f"{shown!r} has no host (redis://HOST:PORT/DB)"
    if port is not None and not 0 < port < 65536:
        return f"{shown!r}: the port must be 1-65535"
    db = parts.path.strip("/")
    if db and not db.isdigit():
        return f"{shown!r}: the database must be a number (redis://HOST:PORT/DB), got {db!r}"
    return None


def proxy_problem(url: str) -> str | None:
    """Why ``url`` is not a proxy the fetcher can use (http(s)://HOST[:PORT]), or None."""
    shown = redact_url(url)
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        return f"{shown!r} is not a valid URL ({exc})"
    scheme = parts.scheme.lower()
    if scheme.startswith("socks"):
        return (
            f"{shown!r}: SOCKS proxies are not supported (aiohttp speaks only HTTP to a proxy);"
            " give an http://HOST:PORT proxy"
        )
    if scheme not in ("http", "https"):
        return f"{shown!r} is not an http(s)://HOST[:PORT] proxy URL"
    if not host:
        return f"{shown!r} has no host (http://HOST:PORT)"
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        return f"{shown!r} has a path or query: a proxy URL is http(s)://HOST[:PORT]"
    del port  # parsed for its ValueError only
    return None


# Keys whose values are (or may hold) credentials: an error never shows the value.
_SECRET_KEYS = frozenset({"auth", "origin_auth", "origin_headers", "headers", "proxy"})


def check_value(name: str, value: Any, hint: Any, source: str | None) -> Any:
    """Check one key's value against its annotation ``hint`` and range; return it normalised."""

    def fail(reason: str) -> ConfigError:
        return ConfigError(reason, key=name, source=source)

    origin = typing.get_origin(hint)
    got = f"got {_type_name(value)}"
    if name not in _SECRET_KEYS:
        got += f" ({value!r})"

    if origin is Literal:
        choices = typing.get_args(hint)
        if value not in choices or not isinstance(value, str):
            raise fail(f"must be one of {', '.join(map(repr, choices))}; {got}")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise fail(f"must be true or false; {got}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail(f"must be an integer; {got}")
        low = 1 if name in _POSITIVE else 0
        if value < low:
            raise fail(f"must be >= {low}; got {value}")
        if name == "metrics_port" and value > 65535:
            raise fail(f"must be a TCP port (0-65535); got {value}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail(f"must be a number; {got}")
        if math.isnan(value) or math.isinf(value) or value < 0:
            raise fail(f"must be a finite number >= 0; got {value}")
        if name == "render_timeout" and not 0 < value <= _MAX_RENDER_TIMEOUT:
            raise fail(
                f"must be > 0 and <= {_MAX_RENDER_TIMEOUT:g} seconds (a page's budget in the"
                f" browser: it is never unbounded); got {value}"
            )
        if name == "render_sample" and value > 1:
            raise fail(
                "must be between 0 and 1 (the fraction of the pages --render auto would not"
                f" render that are rendered to check the rule); got {value}"
            )
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise fail(f"must be a string; {got}")
        if name == "metrics_host" and not value:
            raise fail("must be a host name or address to bind")
        if name == "user_agent" and (not value.strip() or "\r" in value or "\n" in value):
            raise fail("must be a non-empty single line")
        return value
    if origin in (typing.Union, types.UnionType):  # str | None: output, state, cookies ...
        if value is None:
            return None
        what = _WHAT.get(name, "a file name")
        if not isinstance(value, str) or not value:
            raise fail(f"must be {what} (a non-empty string); {got}")
        if name == "name" and not _NAME_RE.fullmatch(value):
            raise fail(
                f"must be 1-64 letters, digits, '.', '_' or '-' (a Redis key prefix); got {value!r}"
            )
        if name == "auth" and ":" not in value:
            raise fail("must be 'user:password' (no colon found)")
        if name == "robots_agent" and not _PRODUCT_RE.fullmatch(value):
            raise fail(f"must be a product token: letters, '_' and '-' (RFC 9309); got {value!r}")
        if name in ("auth_env", "bearer_env", "client_key_password_env") and not _ENV_RE.fullmatch(
            value
        ):
            raise fail(f"must be an environment variable name; got {value!r}")
        if name == "proxy":
            reason = proxy_problem(value)
            if reason:
                raise fail(reason)
        if name == "state" and is_redis_url(value):
            reason = redis_url_problem(value)
            if reason:
                raise fail(reason)
            scheme, rest = value.split(":", 1)
            if scheme != scheme.lower():  # the backend's dispatch reads a lower-case scheme
                return f"{scheme.lower()}:{rest}"
        return value
    if origin is dict:
        if name == "origin_headers":
            return _check_origin_headers(value, fail, got)
        if not isinstance(value, dict):
            raise fail(f"must be a table of strings; {got}")
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise fail(f"{k!r} must be a string; got {_type_name(v)}")
            if name == "origin_auth":
                if _origin_problem(k):
                    raise fail(f"{k!r} {_origin_problem(k)}")
                if ":" not in v:
                    raise fail(f"{k!r} must be 'user:password' (no colon found)")
        return value
    if origin is tuple:
        if isinstance(value, str) or not isinstance(value, list | tuple):
            raise fail(f"must be a list of strings; {got}")
        items = tuple(value)
        for i, item in enumerate(items):
            if not isinstance(item, str):
                shown = "" if name in _SECRET_KEYS else f" ({item!r})"
                raise fail(f"item {i} must be a string; got {_type_name(item)}{shown}")
            _check_item(name, i, item, fail)
        return items if (type(value) is not tuple) else value
    raise AssertionError(f"no check for {name}: {hint!r}")  # pragma: no cover


def _check_origin_headers(value: Any, fail: Any, got: str) -> dict[str, tuple[str, ...]]:
    """origin_headers: {origin: ["Name: value", ...]} (one string is a list of one); the
    lists normalised to tuples. A reason names the origin and header name, never a value."""
    if not isinstance(value, dict):
        raise fail(f"must be a table of origin = [headers]; {got}")
    out: dict[str, tuple[str, ...]] = {}
    changed = False
    for k, v in value.items():
        if not isinstance(k, str) or _origin_problem(k):
            raise fail(f"{k!r} {_origin_problem(k) if isinstance(k, str) else 'is not a string'}")
        items = (v,) if isinstance(v, str) else v
        if not isinstance(items, list | tuple) or not all(isinstance(h, str) for h in items):
            raise fail(f"{k!r} must be a list of 'Name: value' strings; got {_type_name(v)}")
        for i, header in enumerate(items):
            reason = header_problem(header)
            if reason:
                raise fail(f"{k!r} item {i}: {reason}")
        out[k] = tuple(items)
        changed = changed or type(v) is not tuple
    return out if changed else value


def _check_item(name: str, i: int, item: str, fail: Any) -> None:
    if name in ("include", "exclude"):
        try:
            re.compile(item)
        except re.error as exc:
            raise fail(f"item {i} is not a valid regular expression ({item!r}: {exc})") from None
    elif name == "seeds":
        reason = seed_problem(item)
        if reason:
            raise fail(reason)
    elif name == "drop_params" and not item:
        raise fail(f"item {i} must be a non-empty parameter name")
    elif name == "headers":
        reason = header_problem(item)
        if reason:
            raise fail(f"item {i}: {reason}")


# Header names whose values are credentials (see secret_header).
_SECRET_HEADER_RE = re.compile(
    r"authorization|cookie|token|secret|passw|api-?key|(^|-)key$|auth|session|signature", re.I
)


def secret_header(header: str) -> bool:
    """Whether the value of request header ``header`` ("Name: value", or a bare name) is a
    credential: Authorization, Proxy-Authorization, Cookie and names that say token, secret,
    password, key, auth, session or signature. Such a value is never stored with the crawl's
    settings nor printed (the name is)."""
    name = header.partition(":")[0].strip()
    return bool(_SECRET_HEADER_RE.search(name))


# RFC 9110 token characters: what a header field name may be made of.
_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")


def header_problem(header: str) -> str | None:
    """Why ``header`` is not a valid "Name: value" request header, or None.

    The reason never shows a header's value (it may be a token): at most its name, or the
    first word of a header that has no colon."""
    name, colon, value = header.partition(":")
    if not colon:
        first = header.split(None, 1)
        word = first[0][:40] if first else ""
        more = " ..." if len(first) > 1 or len(word) < len(header.strip()) else ""
        return f"{word + more!r} is not 'Name: value' (no colon)"
    if not _TOKEN_RE.fullmatch(name):
        return f"{name[:40]!r} is not a valid header name"
    if any(c in value for c in "\r\n\0"):
        return f"the value of {name} holds a line break or NUL"
    return None


def seed_problem(url: str) -> str | None:
    """Why ``url`` cannot be a seed (not an absolute http(s) URL with a host), or None.

    The reason starts with the quoted URL: "'example.org' is not an http(s) URL ...", its
    password (if any) hidden. A URL with a password is refused: the fetcher never sends a URL's
    credentials, and a seed is stored and printed.
    """
    shown = redact_url(url)
    try:
        parts = urlsplit(url.strip())
        host = parts.hostname
        password = parts.password
    except ValueError as exc:
        return f"{shown!r} is not a valid URL ({exc})"
    if parts.scheme.lower() not in ("http", "https"):
        hint = f" (did you mean 'https://{url}'?)" if not parts.scheme or "." in url[:8] else ""
        return f"{shown!r} is not an http(s) URL{hint if shown == url else ''}"
    if not host:
        return f"{shown!r} has no host"
    if password is not None:
        return (
            f"{shown!r} holds a password: give the credentials with --auth or --auth-env"
            " (a URL's are never sent, and a seed is stored and printed)"
        )
    return None
