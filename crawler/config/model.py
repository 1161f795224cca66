"""The CrawlConfig dataclass: every setting of a crawl, its default, and the groups of keys.

Defaults live here and only here; the CLI, the TOML loader and the library all build a
CrawlConfig, so a setting means the same thing whichever way in a user takes. What a valid value
is lives in ``crawler.config.checks`` (``CrawlConfig.validated`` asks it, key by key).
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from crawler._version import __version__
from crawler.config.checks import ConfigError, check_together, check_value

__all__ = ["DEFAULT_USER_AGENT", "GROUPS", "GROUP_OF", "KEYS", "REMOVED", "CrawlConfig", "defaults"]

Scope = Literal["host", "origin", "domain", "subdomains"]
OutputFormat = Literal["urls", "jsonl", "csv", "sitemap"]
LinkSet = Literal["links", "resources"]
StateSync = Literal["normal", "full"]
Render = Literal["never", "auto", "always"]

DEFAULT_USER_AGENT = f"crawler/{__version__} (link crawler; obeys robots.txt)"


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
    #: Seconds the whole run may take (crawl and check); then it stops as on Ctrl-C, cleanly.
    max_time: float = 0.0
    #: Links of one page that are handled (offered, listed, kept in ``PageResult.links``); the
    #: rest are only counted (``links_capped``). Real pages stay far below it (the largest HTML
    #: index pages have tens of thousands); a hostile 10 MiB page can hold ~500,000.
    max_links_per_page: int = 100_000

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
    #: Product token robots.txt groups are matched by; None: the User-Agent's first token.
    robots_agent: str | None = None

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
    #: Headers for one origin each: {"https://host:port": ("Name: value", ...)}
    #: (``--header-for``); sent to that origin only, whatever their names (may hold tokens).
    origin_headers: dict[str, tuple[str, ...]] = field(default_factory=dict, repr=False)
    #: The name of an environment variable holding a token, sent as ``Authorization: Bearer``
    #: to the seeds' origins only (read at start; the name is stored, never the token).
    bearer_env: str | None = None
    #: Proxy URL for every request; overrides HTTP_PROXY/HTTPS_PROXY/NO_PROXY (which are
    #: honoured when this is not given).
    proxy: str | None = field(default=None, repr=False)  # may hold a password
    # -- TLS (crawler.http.tls_context) --
    #: Verify no TLS certificate or host name (said once on stderr): a staging site, a test box.
    insecure: bool = False
    #: A PEM bundle of CA certificates trusted instead of the system's store (as curl --cacert).
    ca_cert: str | None = None
    #: A PEM client certificate for mutual TLS (its private key too, unless ``client_key``).
    client_cert: str | None = None
    #: The PEM private key of ``client_cert`` when it is in a file of its own.
    client_key: str | None = None
    #: The name of an environment variable holding the passphrase of an encrypted client key.
    client_key_password_env: str | None = None

    # -- addresses (crawler.http.guard: on the resolved address, at connect time; the seeds'
    #    host:port always allowed) --
    #: Refuse connections to private addresses (10/8, 172.16/12, 192.168/16, 100.64/10, fc00::/7).
    exclude_private: bool = False
    #: Refuse connections to link-local addresses (169.254/16: cloud metadata; fe80::/10).
    #: ``crawler check`` refuses them whatever this says, unless ``--allow-link-local``.
    exclude_link_local: bool = False
    #: Refuse connections to loopback addresses (127/8, ::1, 0.0.0.0, ::).
    exclude_loopback: bool = False

    # -- extraction --
    link_set: LinkSet = "links"

    # -- rendering (issue 24: links only JavaScript makes; crawler.render, Chromium) --
    #: Which HTML pages are also loaded in headless Chromium for the links their scripts make:
    #: "never" (no browser, nothing of it imported), "auto" (the pages the streaming pass
    #: judges client-rendered: crawler.core.render_rule), "always" (every HTML page).
    render: Render = "never"
    #: Pages rendered at once (a pool of browser pages; each is a Chromium renderer).
    render_concurrency: int = 2
    #: Seconds one page may take in the browser before its DOM is taken as it is
    #: (``render_timeout``); the links seen by then count.
    render_timeout: float = 5.0
    #: With ``render`` "auto": the fraction (0 to 1) of the pages the rule would not render
    #: that are rendered all the same, to check its decision (``render_reason`` "sample";
    #: ``render_misses``: those whose rendered DOM had links the static pass had not).
    render_sample: float = 0.0

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
    #: With a Redis state: the parts a host's requests are split into, each with its share
    #: of ``per_host``, ``delay`` and ``max_pages_per_host``, so that several workers crawl
    #: one host (fixed when the crawl is created); 0 = automatic: when the seeds are one
    #: host, ``min(per_host, 16)``, else 1 (a host is one part).
    host_split: int = 0

    # -- metrics --
    #: Serve Prometheus metrics on http://metrics_host:metrics_port/metrics (0 = off).
    metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    #: Seconds to keep serving /metrics after the crawl ends, so that a last scrape sees the
    #: final values (0 = stop with the crawl; a stop by signal cuts it short).
    metrics_linger: float = 0.0

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
        hints = _hints()
        for name in KEYS:
            value = getattr(self, name)
            new = check_value(name, value, hints[name], source)
            if new is not value:
                changes[name] = new
        if not isinstance(self.extra, dict):
            raise ConfigError("must be a table", key="extra", source=source)
        if together:
            check_together(self, source)
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
        "max_time",
        "max_links_per_page",
    ),
    "concurrency": ("concurrency", "per_host", "delay"),
    "scope": ("scope", "include", "exclude", "sort_query", "drop_params"),
    "robots": ("ignore_robots", "sitemaps", "respect_nofollow", "robots_agent"),
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
        "origin_headers",
        "bearer_env",
        "proxy",
        "insecure",
        "ca_cert",
        "client_cert",
        "client_key",
        "client_key_password_env",
    ),
    "addresses": ("exclude_private", "exclude_link_local", "exclude_loopback"),
    "extraction": ("link_set",),
    "render": ("render", "render_concurrency", "render_timeout", "render_sample"),
    "output": ("format", "output", "all_links", "quiet", "warc"),
    "backend": ("state", "state_sync", "name", "lease_timeout", "host_split"),
    "metrics": ("metrics_port", "metrics_host", "metrics_linger"),
}

# Keys that existed once: a file that still has one gets this message, not "unknown key".
# `frontier` had one value, "memory", which is what no `state` means now.
REMOVED: dict[str, str] = {
    "frontier": "removed: the backend is chosen by `state` now (no state: in memory, as"
    ' `frontier = "memory"` was; a directory: SQLite); delete this key',
}

#: Every user-facing key (every field but ``extra``), in GROUPS order.
KEYS: tuple[str, ...] = tuple(k for keys in GROUPS.values() for k in keys)
#: The group of every key.
GROUP_OF = {k: g for g, keys in GROUPS.items() for k in keys}


@cache
def _hints() -> dict[str, Any]:
    """CrawlConfig's field types, evaluated on first use (not at import: start-up time)."""
    return typing.get_type_hints(CrawlConfig)


def defaults() -> dict[str, Any]:
    """Every key with its default value, in GROUPS order (for --help and the example file)."""
    base = CrawlConfig()
    return {k: getattr(base, k) for k in KEYS}
