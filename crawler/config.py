"""CrawlConfig: every setting of a crawl, its default, and its validation.

Defaults live here and only here; the CLI, the TOML loader and the library all build a
CrawlConfig, so a setting means the same thing whichever way in a user takes.

A TOML file holds the same keys as the dataclass fields, either at the top level or inside a
table named after their group (``[limits]``, ``[http]`` ...: the groups of ``crawler crawl
--help``, see ``GROUPS``). Every error names the source (file or flag), the key and the reason.
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from crawler._version import __version__

if TYPE_CHECKING:
    from pathlib import Path

Scope = Literal["host", "origin", "domain", "subdomains"]
OutputFormat = Literal["urls", "jsonl", "csv", "sitemap"]
LinkSet = Literal["links", "resources"]
StateSync = Literal["normal", "full"]

DEFAULT_USER_AGENT = f"crawler/{__version__} (link discovery bot; python-aiohttp)"


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


@dataclass(frozen=True, slots=True)
class CrawlConfig:
    """Settings of one crawl. Zero means "no limit" for the limits and timeouts below
    (``max_redirects = 0``: redirects are not followed)."""

    seeds: tuple[str, ...] = ()

    # -- limits --
    max_pages: int = 0
    max_depth: int = 16
    max_pages_per_host: int = 0
    max_url_length: int = 2048
    max_body_bytes: int = 10 * 1024 * 1024
    max_redirects: int = 10

    # -- concurrency and politeness --
    concurrency: int = 32
    per_host: int = 8
    delay: float = 0.0

    # -- scope --
    scope: Scope = "host"
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    sort_query: bool = False
    drop_params: tuple[str, ...] = ()

    # -- robots and nofollow --
    ignore_robots: bool = False
    sitemaps: bool = False
    respect_nofollow: bool = False

    # -- HTTP --
    user_agent: str = DEFAULT_USER_AGENT
    timeout: float = 30.0
    connect_timeout: float = 10.0
    read_timeout: float = 20.0
    retries: int = 2
    backoff: float = 0.5
    max_retry_after: float = 60.0
    #: Extra request headers, each "Name: value" (``--header``, repeatable).
    headers: tuple[str, ...] = field(default=(), repr=False)  # may hold a token
    #: A Netscape/Mozilla cookies.txt loaded into the crawl's cookie jar at start.
    cookies: str | None = None
    #: Where the cookie jar is written (cookies.txt format) when the crawl ends.
    save_cookies: str | None = None
    #: HTTP Basic credentials "user:password", sent only to the seeds' origins (a secret:
    #: never stored with the crawl's settings, never printed).
    auth: str | None = field(default=None, repr=False)
    #: The name of an environment variable holding "user:password" (instead of ``auth``).
    auth_env: str | None = None
    #: Basic credentials per origin: {"https://host:port": "user:password"} (config file only).
    origin_auth: dict[str, str] = field(default_factory=dict, repr=False)
    #: Proxy URL for every request; overrides HTTP_PROXY/HTTPS_PROXY/NO_PROXY (which are
    #: honoured when this is not given).
    proxy: str | None = field(default=None, repr=False)  # may hold a password

    # -- extraction --
    link_set: LinkSet = "links"

    # -- output --
    format: OutputFormat = "urls"
    output: str | None = None
    all_links: bool = False
    quiet: bool = False
    #: A WARC 1.1 file (.warc.gz) every response is archived to, as it arrives.
    warc: str | None = None

    # -- backend --
    #: Where the crawl's state lives: None = in memory (lost at exit); a directory = SQLite
    #: there, and running again with it continues the crawl (``crawler.state.open_state``).
    state: str | None = None
    #: How a SQLite state commits: "normal" survives kill -9 (a power loss may lose the last
    #: transactions, redone on resume); "full" also survives a power loss (an fsync a commit).
    state_sync: StateSync = "normal"
    #: With a Redis state: the crawl's name in the database (a key prefix), so that several
    #: crawls share one database.
    name: str | None = None
    #: Seconds a leased request stays with its worker before another may take it (a worker
    #: that died); 0 = automatic: 3 x ``timeout``, at least 60 s.
    lease_timeout: float = 0.0

    # -- metrics --
    #: Serve Prometheus metrics on http://metrics_host:metrics_port/metrics (0 = off).
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"

    extra: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    def validated(self, *, source: str | None = None, together: bool = True) -> CrawlConfig:
        """Return a normalised copy (lists to tuples, ints to floats) or raise ConfigError.

        Args:
            source: named in error messages (a file name, "command line" ...).
            together: also check the keys that go together (``auth`` and ``auth_env`` not
                both; ``name`` only with a Redis state). False for a config file that flags
                may still complete.

        Raises:
            ConfigError: naming the first bad key and why it is bad.
        """
        changes: dict[str, Any] = {}
        for name in KEYS:
            value = getattr(self, name)
            new = _check(name, value, source)
            if new is not value:
                changes[name] = new
        if not isinstance(self.extra, dict):
            raise ConfigError("must be a table", key="extra", source=source)
        if together:
            _check_together(self, source)
        return dataclasses.replace(self, **changes) if changes else self

    def replace(self, **changes: object) -> CrawlConfig:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


# Groups of keys, in the order of `crawler crawl --help` and config.example.toml. A TOML file
# may put a key at the top level or in the table of its group.
GROUPS: dict[str, tuple[str, ...]] = {
    "crawl": ("seeds",),
    "limits": (
        "max_pages",
        "max_depth",
        "max_pages_per_host",
        "max_url_length",
        "max_body_bytes",
        "max_redirects",
    ),
    "concurrency": ("concurrency", "per_host", "delay"),
    "scope": ("scope", "include", "exclude", "sort_query", "drop_params"),
    "robots": ("ignore_robots", "sitemaps", "respect_nofollow"),
    "http": (
        "user_agent",
        "timeout",
        "connect_timeout",
        "read_timeout",
        "retries",
        "backoff",
        "max_retry_after",
        "headers",
        "cookies",
        "save_cookies",
        "auth",
        "auth_env",
        "origin_auth",
        "proxy",
    ),
    "extraction": ("link_set",),
    "output": ("format", "output", "all_links", "quiet", "warc"),
    "backend": ("state", "state_sync", "name", "lease_timeout"),
    "metrics": ("metrics_port", "metrics_host"),
}

# Keys that existed once: a file that still has one gets this message, not "unknown key".
# `frontier` had one value, "memory", which is what no `state` means now.
REMOVED: dict[str, str] = {
    "frontier": "removed: the backend is chosen by `state` now (no state: in memory, as"
    ' `frontier = "memory"` was; a directory: SQLite); delete this key',
}

#: Every user-facing key (every field but ``extra``), in GROUPS order.
KEYS: tuple[str, ...] = tuple(k for keys in GROUPS.values() for k in keys)
_GROUP_OF = {k: g for g, keys in GROUPS.items() for k in keys}

# What a str | None key names, for its error message.
_WHAT = {
    "state": "a directory or a redis:// URL",
    "auth": "'user:password'",
    "auth_env": "an environment variable name",
    "proxy": "a proxy URL",
    "name": "a crawl name",
}
_NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
_ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
_POSITIVE = frozenset({"concurrency", "per_host"})


@cache
def _hints() -> dict[str, Any]:
    """CrawlConfig's field types, evaluated on first use (not at import: start-up time)."""
    return typing.get_type_hints(CrawlConfig)


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


def _check_together(cfg: CrawlConfig, source: str | None) -> None:
    """The rules between keys (each key alone is already checked)."""
    if cfg.auth is not None and cfg.auth_env is not None:
        raise ConfigError(
            "cannot be given with auth (--auth): give one of them", key="auth_env", source=source
        )
    if cfg.name is not None and not is_redis_url(cfg.state):
        raise ConfigError(
            "needs a redis:// state (--state redis://HOST:PORT/DB): it names a crawl in a"
            " Redis database",
            key="name",
            source=source,
        )


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
_SECRET_KEYS = frozenset({"auth", "origin_auth", "headers", "proxy"})


def _check(name: str, value: Any, source: str | None) -> Any:
    """Check one key's value against its annotation and range; return it normalised."""

    def fail(reason: str) -> ConfigError:
        return ConfigError(reason, key=name, source=source)

    hint = _hints()[name]
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
        if name == "auth_env" and not _ENV_RE.fullmatch(value):
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


def _flatten(data: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Flatten top-level keys and group tables; reject unknown or misplaced keys."""
    flat: dict[str, Any] = {}

    def unknown(key: str, where: str) -> ConfigError:
        if key in REMOVED:
            return ConfigError(REMOVED[key], key=where, source=source)
        import difflib  # noqa: PLC0415  (start-up time: only for an unknown key)

        close = difflib.get_close_matches(key, [*KEYS, *GROUPS], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return ConfigError(f"unknown key{hint}", key=where, source=source)

    def put(key: str, value: Any, where: str) -> None:
        if key in flat:
            raise ConfigError(
                "given twice (top level and in its group table)", key=where, source=source
            )
        flat[key] = value

    for key, value in data.items():
        if key in GROUPS and isinstance(value, dict):
            for sub, subvalue in value.items():
                where = f"{key}.{sub}"
                if sub not in _GROUP_OF:
                    raise unknown(sub, where)
                if _GROUP_OF[sub] != key:
                    raise ConfigError(
                        f"belongs in [{_GROUP_OF[sub]}], not [{key}]", key=where, source=source
                    )
                put(sub, subvalue, where)
        elif key in _GROUP_OF:
            put(key, value, key)
        else:
            raise unknown(key, key)
    return flat


def load_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML config file into a flat ``{key: value}`` mapping; values not yet checked.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds an unknown key.
    """
    import tomllib  # noqa: PLC0415  (start-up time: only with a config file)

    source = str(path)
    try:
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file: {exc.strerror or exc}", source=source
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", source=source) from None
    return _flatten(data, source)


def from_mapping(
    values: Mapping[str, Any], *, source: str | None = None, together: bool = True
) -> CrawlConfig:
    """Build a validated CrawlConfig from ``{key: value}`` (unknown keys are an error)."""
    for key in values:
        if key in REMOVED:
            raise ConfigError(REMOVED[key], key=key, source=source)
        if key not in _GROUP_OF:
            import difflib  # noqa: PLC0415

            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown key{hint}", key=key, source=source)
    return CrawlConfig(**values).validated(source=source, together=together)


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    overrides_source: str = "command line",
) -> CrawlConfig:
    """The file's settings (if any), then ``overrides`` on top; both validated.

    The file is validated on its own first so that an error names the file; then the
    overrides, so that an error from them names ``overrides_source``.
    """
    config = CrawlConfig()
    if path is not None:
        config = from_mapping(load_toml(path), source=str(path), together=not overrides)
    if overrides:
        for key in overrides:
            if key not in _GROUP_OF:
                reason = REMOVED.get(key, "unknown key")
                raise ConfigError(reason, key=key, source=overrides_source)
        config = config.replace(**overrides).validated(source=overrides_source)
    return config


def defaults() -> dict[str, Any]:
    """Every key with its default value, in GROUPS order (for --help and the example file)."""
    base = CrawlConfig()
    return {k: getattr(base, k) for k in KEYS}


def as_toml_value(value: object) -> str:
    """A default rendered as TOML (strings quoted, tuples as arrays, None as a comment)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, tuple | list):
        return "[" + ", ".join(as_toml_value(v) for v in value) + "]"
    return repr(value)


__all__ = [
    "DEFAULT_USER_AGENT",
    "GROUPS",
    "KEYS",
    "REMOVED",
    "ConfigError",
    "CrawlConfig",
    "defaults",
    "from_mapping",
    "header_problem",
    "is_redis_url",
    "load_config",
    "load_toml",
    "proxy_problem",
    "redact_url",
    "redis_url_problem",
    "secret_header",
    "seed_problem",
]
