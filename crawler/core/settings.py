"""The settings stored with a crawl's state, and how a resumed run merges them with its own.

A crawl kept in a state directory (``--state DIR``) is resumed by running it again, with the
same command or with no URL at all. Two kinds of settings:

* Crawl-defining (``CRAWL_DEFINING``): they decide WHICH URLs belong to the crawl (scope,
  include/exclude, depth, the canonical form the seen set is keyed by, ...). The state's seen
  set and queue were built under them, so a resumed run keeps the stored values; one given
  explicitly (flag or config file) that disagrees is an error naming the key, never a crawl
  that silently means two things.
* Per run (``PER_RUN``): how this run fetches and writes (concurrency, timeouts, output,
  the ``max_pages`` budget of the whole crawl, ...). A resumed run takes the stored value of
  the last run unless it gives one, and then its own wins (and is stored for the next run).
  So ``crawler crawl --state DIR`` with no URL is the first command again. One exception:
  another ``format`` into the same output file (appended to on resume) is refused.

Seeds are added: the stored ones, then the new ones. ``state`` and ``name`` (they address the
state) are never stored.

Credentials are never stored (``NOT_STORED``): not ``auth``, not the passwords of
``origin_auth``, not the value of a credential header (``Authorization: ...``, ``Cookie: ...``,
``X-Api-Key: ...``: see ``secret_header``), not ``origin_headers`` (``--header-for``), not a
password in the ``proxy`` URL. Instead the settings keep a marker (``credentials``): which
origins had Basic auth, a bearer token or ``--header-for`` headers and from which option,
which credential headers were sent, whether the proxy had a password. A resumed run that does
not give them again is refused with a message that says which, instead of a crawl that goes on
unauthenticated. ``auth_env`` and ``bearer_env`` are variables' NAMES (not secrets): they are
stored and read again.

With a shared state (``redis://``: many workers on one crawl) two more rules: ``per_host`` and
``delay`` are crawl-defining (the politeness every worker enforces together: ``SHARED_FIXED``),
and the keys that name things on the worker's own machine (``LOCAL``: output file, WARC file,
cookie files, metrics port, proxy ...) are never taken from the stored settings: each worker
gives its own.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import urlsplit

from crawler._version import __version__
from crawler.config import (
    KEYS,
    ConfigError,
    CrawlConfig,
    as_toml_value,
    from_mapping,
    is_redis_url,
    redact_url,
    secret_header,
)
from crawler.state.base import StateError

__all__ = [
    "CRAWL_DEFINING",
    "FORMAT",
    "CredentialsError",
    "LOCAL",
    "NOT_STORED",
    "PER_RUN",
    "SHARED_FIXED",
    "is_shared",
    "origin_of",
    "redact_url",
    "resume",
    "secret_header",
    "stored_config",
    "to_stored",
]

#: Version of the stored dict; a state holding another is refused (StateError).
FORMAT = 1

#: key -> why it decides what is crawled (so it cannot change on resume).
CRAWL_DEFINING: dict[str, str] = {
    "max_depth": "a URL one hop past it is marked seen but never queued: a deeper limit later"
    " could not reach it",
    "max_pages_per_host": "a URL over its host's budget is marked seen but never queued: a"
    " higher budget later could not reach it",
    "max_url_length": "which URLs are admitted at all",
    "scope": "which hosts are in the crawl",
    "include": "which URLs are followed",
    "exclude": "which URLs are followed",
    "sort_query": "the canonical form of a URL: the seen set is keyed by it",
    "drop_params": "the canonical form of a URL: the seen set is keyed by it",
    "ignore_robots": "which URLs may be fetched",
    "sitemaps": "whether robots.txt sitemaps seed the crawl",
    "respect_nofollow": "which links are followed",
    "user_agent": "robots.txt rules are chosen by the User-Agent: it decides which URLs are"
    " allowed",
    "robots_agent": "robots.txt rules are chosen by this token: it decides which URLs are allowed",
    "link_set": "which links of a page are followed",
    "render": "which links of a page are followed (those its scripts make): pages crawled"
    " already would not be rendered again",
    "render_sample": "which pages are rendered (a sampled page's script-made links are"
    " followed): pages crawled already would not be sampled again",
}

#: key -> why it may differ from run to run (the stored value is the default of the next).
PER_RUN: dict[str, str] = {
    "max_pages": "the budget of the whole crawl, counted across runs: raise it to go on",
    "max_body_bytes": "a limit of one fetch (pages fetched already are not fetched again)",
    "max_redirects": "a limit of one fetch",
    "max_time": "the time limit of one run (each run's clock starts at zero)",
    "max_links_per_page": "a limit of one page's links (pages fetched already are not fetched"
    " again)",
    "concurrency": "speed and politeness of this run",
    "per_host": "speed and politeness of this run",
    "delay": "speed and politeness of this run",
    "timeout": "how long one fetch may take",
    "connect_timeout": "how long one fetch may take",
    "read_timeout": "how long one fetch may take",
    "retries": "how hard one fetch tries",
    "backoff": "how hard one fetch tries",
    "max_retry_after": "how hard one fetch tries",
    "format": "how results are written (a resumed run appends to --output)",
    "output": "where results are written (stored as an absolute path)",
    "all_links": "what the urls format lists",
    "quiet": "what this run prints on stderr",
    "state_sync": "how durable this run's commits are",
    "headers": "sent by this run; they may change what a site serves, so a resumed run repeats"
    " the stored ones unless it gives its own (credential headers: names only, see NOT_STORED)",
    "cookies": "loaded into this run's cookie jar (the jar itself is not kept in the state);"
    " stored as an absolute path, so a resumed run loads the file again",
    "save_cookies": "where this run writes its cookie jar (stored as an absolute path)",
    "auth_env": "the NAME of the variable holding the credentials (not a secret): a resumed run"
    " reads the variable again, and is refused when it is not set",
    "bearer_env": "the NAME of the variable holding the token (not a secret): a resumed run"
    " reads the variable again, and is refused when it is not set",
    "proxy": "the network path of this run's machine (stored without a password: a proxy URL"
    " with one must be given again)",
    "warc": "where this run archives its responses (stored as an absolute path)",
    "insecure": "how this run checks TLS certificates",
    "ca_cert": "the CA bundle of this run's machine (stored as an absolute path)",
    "client_cert": "the client certificate of this run's machine (stored as an absolute path)",
    "client_key": "the client key file of this run's machine (stored as an absolute path)",
    "client_key_password_env": "the NAME of the variable holding the key's passphrase (not a"
    " secret): a resumed run reads the variable again",
    "exclude_private": "which addresses this run may connect to (a URL refused is done, as a"
    " failed fetch)",
    "exclude_link_local": "which addresses this run may connect to",
    "exclude_loopback": "which addresses this run may connect to",
    "lease_timeout": "how long this worker's leases last",
    "metrics_port": "what this run serves",
    "metrics_host": "what this run serves",
    "metrics_linger": "how long this run serves its metrics after it ends",
    "render_concurrency": "speed of this run's browser",
    "render_timeout": "how long one page may take in this run's browser",
}

#: key -> why it is never stored with the crawl.
NOT_STORED: dict[str, str] = {
    "state": "it addresses the state itself",
    "name": "it addresses the state itself (the crawl's name in a Redis database)",
    "host_split": "read only by the worker that creates a Redis crawl, which keeps it itself",
    "auth": "a secret: give it again on resume (a marker of the origins it was for is stored)",
    "origin_auth": "secrets: give them again on resume (the origins are stored as a marker)",
    "origin_headers": "may hold secrets: give them again on resume (the origins are stored as a"
    " marker)",
}

#: With a shared (redis://) state: per-run keys that are crawl-defining there, and why.
SHARED_FIXED: dict[str, str] = {
    "per_host": "with a shared state the limit holds across all workers: one value for the crawl",
    "delay": "with a shared state the delay holds across all workers: one value for the crawl",
}

#: Per-run keys that name things on one machine: with a shared state a worker never takes
#: them from the stored settings (another worker's output file or metrics port is not its own).
LOCAL = frozenset(
    {"output", "warc", "cookies", "save_cookies", "metrics_port", "metrics_host", "proxy"}
    | {"quiet", "state_sync", "auth_env", "bearer_env"}
    | {"ca_cert", "client_cert", "client_key", "client_key_password_env"}
)

# Keys kept out of both: seeds are merged, the rest is never stored.
_NOT_STORED = frozenset({"seeds", *NOT_STORED})
# Per-run keys stored as absolute paths (a resumed run may start in another directory).
_PATHS = ("output", "cookies", "save_cookies", "warc", "ca_cert", "client_cert", "client_key")


def is_shared(state: str | None) -> bool:
    """Whether ``state`` addresses a state many workers share (a Redis URL)."""
    return is_redis_url(state)


def origin_of(url: str) -> str | None:
    """``scheme://host:port`` of ``url`` (the port always written), or None if not http(s)."""
    try:
        parts = urlsplit(url.strip())
        scheme, host, port = parts.scheme.lower(), parts.hostname, parts.port
    except ValueError:
        return None
    if scheme not in ("http", "https") or not host:
        return None
    if port is None:
        port = 443 if scheme == "https" else 80
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def _credentials(cfg: CrawlConfig) -> dict[str, list[str]]:
    """The marker of the credentials ``cfg`` crawls with (never a secret)."""
    marker: dict[str, list[str]] = {}
    seeds = sorted({o for o in map(origin_of, cfg.seeds) if o})
    if cfg.auth:
        marker["--auth"] = seeds
    elif cfg.auth_env:
        marker["--auth-env"] = seeds
    if cfg.origin_auth:
        marker["origin_auth"] = sorted({origin_of(o) or o for o in cfg.origin_auth})
    if cfg.bearer_env:
        marker["--bearer-env"] = seeds
    if cfg.origin_headers:
        marker["--header-for"] = sorted({origin_of(o) or o for o in cfg.origin_headers})
    names = [h.partition(":")[0].strip() for h in cfg.headers if secret_header(h)]
    if names:
        marker["--header"] = sorted(set(names), key=str.lower)
    if cfg.proxy and _has_password(cfg.proxy):
        marker["--proxy"] = [redact_url(cfg.proxy)]
    return marker


def _has_password(url: str) -> bool:
    try:
        return "@" in urlsplit(url).netloc
    except ValueError:
        return False


# Lists whose order does not change their meaning (any regex matches; a set of parameters).
_UNORDERED = frozenset({"include", "exclude", "drop_params"})


def _json(value: object) -> object:
    return list(value) if isinstance(value, tuple) else value


def to_stored(cfg: CrawlConfig) -> dict[str, Any]:
    """The settings to store with a crawl (JSON-able): seeds, both kinds, a format version.

    ``output`` is stored as an absolute path, so that a resumed run started from another
    directory appends to the same file.
    """
    run: dict[str, Any] = {key: _json(getattr(cfg, key)) for key in PER_RUN}
    for key in _PATHS:
        value = getattr(cfg, key)
        if value not in (None, "-"):
            run[key] = os.path.abspath(value)
    run["headers"] = [h for h in cfg.headers if not secret_header(h)]
    if cfg.proxy and _has_password(cfg.proxy):
        run["proxy"] = None
    stored = {
        "format": FORMAT,
        "crawler": __version__,
        "seeds": list(cfg.seeds),
        "crawl": {key: _json(getattr(cfg, key)) for key in CRAWL_DEFINING},
        "run": run,
    }
    marker = _credentials(cfg)
    if marker:
        stored["credentials"] = marker
    return stored


def stored_config(stored: Mapping[str, Any]) -> CrawlConfig:
    """The stored settings as a CrawlConfig (defaults for any key they lack).

    Raises:
        StateError: another format version, or values this version cannot read.
    """
    found = stored.get("format") if isinstance(stored, Mapping) else None
    if found != FORMAT:
        raise StateError(
            f"the crawl's stored settings are in format {found!r}, this version of crawler"
            f" ({__version__}) reads format {FORMAT}: use the version that started the crawl,"
            " or a new state directory"
        )
    crawl, run, seeds = stored.get("crawl"), stored.get("run"), stored.get("seeds")
    if not isinstance(crawl, dict) or not isinstance(run, dict) or not isinstance(seeds, list):
        raise StateError("the crawl's stored settings are damaged (crawl, run or seeds missing)")
    values = {k: v for k, v in {**crawl, **run}.items() if k not in _NOT_STORED}
    try:
        return from_mapping({**values, "seeds": seeds}, source="stored settings")
    except ConfigError as exc:
        raise StateError(f"the crawl's settings cannot be read by this version: {exc}") from None


def _same(key: str, a: object, b: object) -> bool:
    if key in _UNORDERED and isinstance(a, tuple) and isinstance(b, tuple):
        return sorted(set(a)) == sorted(set(b))
    return a == b


def resume(
    stored: Mapping[str, Any], cfg: CrawlConfig, given: Collection[str] | None = None
) -> CrawlConfig:
    """The config of a resumed run: the stored crawl, this run's explicit changes on top.

    Args:
        stored: what ``to_stored`` returned when the crawl was last started or resumed.
        cfg: this run's config (validated).
        given: the keys this run set explicitly (by flag or config file). None (the
            library): the keys whose value differs from the default.

    Returns:
        Crawl-defining keys as stored; per-run keys given in this run from ``cfg``, the
        others as stored; seeds: the stored ones, then the new ones of ``cfg``; ``state``
        from ``cfg``.

    Raises:
        ConfigError: a crawl-defining key was given and disagrees with the stored value
            (``key`` names it).
        StateError: the stored settings are of another format, or damaged.
    """
    old = stored_config(stored)
    base = CrawlConfig()
    if given is None:
        explicit = {k for k in KEYS if getattr(cfg, k) != getattr(base, k)}
    else:
        explicit = set(given)
    present = {**stored["crawl"], **stored["run"]}
    shared = is_shared(cfg.state)
    fixed = {**CRAWL_DEFINING, **SHARED_FIXED} if shared else CRAWL_DEFINING
    changes: dict[str, Any] = {}
    for key, why in fixed.items():
        if key not in present:
            continue  # a key this format's writer did not know: this run's value stands
        was, now = getattr(old, key), getattr(cfg, key)
        if key in explicit and not _same(key, was, now):
            where = "a new --name" if shared else "a new state directory"
            raise ConfigError(
                f"this crawl was started with {as_toml_value(was)}, this run gives"
                f" {as_toml_value(now)}; it cannot change on resume ({why})."
                f" Leave it out to go on with {as_toml_value(was)}, or start {where}",
                key=key,
            )
        changes[key] = was
    for key in PER_RUN:
        if key in fixed or (shared and key in LOCAL):
            continue
        if key == "auth_env" and cfg.auth is not None:
            continue  # this run's --auth replaces the stored --auth-env (one or the other)
        if key in present and key not in explicit:
            changes[key] = getattr(old, key)
    changes["seeds"] = tuple(dict.fromkeys((*old.seeds, *cfg.seeds)))
    merged = cfg.replace(**changes).validated()
    _check_same_file_same_format(old, merged)
    _check_credentials(stored.get("credentials"), merged)
    return merged


class CredentialsError(ConfigError):
    """A resumed run lacks credentials the crawl was started with; the message names the
    option (``--auth``, ``--auth-env``, ``origin_auth``, ``--header``, ``--header-for``,
    ``--bearer-env``, ``--proxy``) itself."""

    bare = True

    def __str__(self) -> str:
        return self.reason


def _check_credentials(marker: object, cfg: CrawlConfig) -> None:
    """Refuse a resumed run that lacks credentials the crawl was started with.

    Raises:
        ConfigError: naming the option, the origin (or header) and that credentials are not
            stored.
    """
    if not isinstance(marker, dict):
        return
    have = _credentials(cfg)
    # Basic auth: an origin that had it from any option must have it from some option now
    now_origins = {o for k in ("--auth", "--auth-env", "origin_auth") for o in have.get(k, ())}
    for option in ("--auth", "--auth-env", "origin_auth"):
        for origin in marker.get(option, ()):
            if origin not in now_origins:
                raise CredentialsError(
                    f"this crawl was started with {option} for {origin}; give it again:"
                    " credentials are not stored",
                    key=option.lstrip("-").replace("-", "_"),
                )
    now_headers = {n.lower() for n in have.get("--header", ())}
    # the seeds' Authorization: --bearer-env, or now --auth or an Authorization header
    bearer = {*have.get("--bearer-env", ()), *now_origins}
    if "authorization" in now_headers:
        bearer |= {o for o in map(origin_of, cfg.seeds) if o}
    for option, key, now in (
        ("--bearer-env", "bearer_env", bearer),
        ("--header-for", "origin_headers", set(have.get("--header-for", ()))),
    ):
        for origin in marker.get(option, ()):
            if origin not in now:
                raise CredentialsError(
                    f"this crawl was started with {option} for {origin}; give it again:"
                    " credentials are not stored",
                    key=key,
                )
    for name in marker.get("--header", ()):
        if str(name).lower() not in now_headers:
            raise CredentialsError(
                f"this crawl was started with --header '{name}: ...'; give it again (with the"
                " other --header options of this crawl): credentials are not stored",
                key="headers",
            )
    if marker.get("--proxy") and not have.get("--proxy"):
        raise CredentialsError(
            f"this crawl was started with --proxy {marker['--proxy'][0]} (with a password);"
            " give it again: credentials are not stored",
            key="proxy",
        )


def _check_same_file_same_format(old: CrawlConfig, new: CrawlConfig) -> None:
    """A resumed run appends to its output file: refuse to append another format to it."""
    if old.output in (None, "-") or new.output in (None, "-") or old.format == new.format:
        return
    assert old.output is not None and new.output is not None
    if os.path.abspath(old.output) != os.path.abspath(new.output):
        return
    raise ConfigError(
        f"{new.output} holds this crawl's {old.format} records and a resumed crawl appends to"
        f" it; this run gives {new.format}. Give another --output for {new.format}, or leave"
        f" --format out",
        key="format",
    )
