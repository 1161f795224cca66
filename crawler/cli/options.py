"""The crawl's options, shared by ``crawler crawl`` and ``crawler check``: the table of flags
(one a CrawlConfig key), ``add_crawl_options`` that adds them to a command,
``config_from_args``/``given_keys`` that read them back (the config file, then the flags on
top), and ``check_fetch_options`` that refuses bad fetch options (a cookies file,
``--auth-env``, a proxy ...) before anything starts.

Also what the commands share: the program's name, exit codes, the help formatter, the one-line
help of each command, and the error line on stderr. Imports nothing of the crawl at module
level (``crawler --version`` and ``--help`` load this module): the tables are built on first
use. Credentials never reach a message: options that hold them are named, never quoted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Collection
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crawler.config import ConfigError, CrawlConfig

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2
EXIT_SIGINT = 130  # 128 + SIGINT
EXIT_SIGTERM = 143  # 128 + SIGTERM

PROG = "crawler"

#: Each command's line in ``crawler --help``, in that order (crawler/cli/main.py lists a
#: command by it without importing the command's module).
COMMAND_HELP = {
    "crawl": "crawl from seed URLs, print the links found",
    "extract": "print the links of one HTML document",
    "status": "where a crawl kept with --state stands, without running it",
    "check": "check every link of a site: broken links, where they are",
    "audit": "audit a site's link graph: orphans, redirects, canonical, hreflang, depth",
    "config": "print a commented example config file (TOML) to stdout",
    "warc": "check or repair a WARC file a killed crawl left (FILE.open)",
}

_BOOL = argparse.BooleanOptionalAction
_Option = tuple[tuple[str, ...], dict[str, Any], str]


@cache
def _options() -> dict[str, _Option]:
    """key -> (flags, argparse kwargs, help). Every CrawlConfig key has one; "(default: X)" is
    appended from CrawlConfig so that --help cannot drift from the real defaults.

    Built on first use (``crawler.cli.options._OPTIONS`` is the same dict): the ``--format`` choices
    come from crawler.output.sinks, which ``--version`` and ``--help`` do not import.
    """
    from crawler.output.sinks import FORMATS  # noqa: PLC0415  (start-up time)

    return {
        "max_pages": (
            ("--max-pages",),
            {"type": int, "metavar": "N"},
            "stop after N pages; 0 = no limit",
        ),
        "max_depth": (
            ("--max-depth",),
            {"type": int, "metavar": "D"},
            "follow links up to D hops from a seed; 0 = no limit",
        ),
        "max_pages_per_host": (
            ("--max-pages-per-host",),
            {"type": int, "metavar": "N"},
            "at most N pages from one host; 0 = no limit",
        ),
        "max_url_length": (
            ("--max-url-length",),
            {"type": int, "metavar": "N"},
            "skip longer URLs; 0 = no limit",
        ),
        "max_body_bytes": (
            ("--max-body-bytes",),
            {"type": int, "metavar": "N"},
            "stop reading a body after N bytes (links so far are kept); 0 = no limit",
        ),
        "max_redirects": (
            ("--max-redirects",),
            {"type": int, "metavar": "N"},
            "redirect hops a URL; 0 = do not follow redirects",
        ),
        "max_time": (
            ("--max-time",),
            {"type": float, "metavar": "S"},
            "stop the run after S seconds, cleanly (outputs complete; check: the URLs not"
            " checked by then are reported so); 0 = no limit",
        ),
        "max_links_per_page": (
            ("--max-links-per-page",),
            {"type": int, "metavar": "N"},
            "handle the first N links of a page, count the rest (links_capped); 0 = no limit",
        ),
        "concurrency": (
            ("--concurrency", "-c"),
            {"type": int, "metavar": "N"},
            "requests in flight",
        ),
        "per_host": (
            ("--per-host",),
            {"type": int, "metavar": "N"},
            "requests in flight to one host (with a redis:// state: across all workers, fixed for"
            " the crawl)",
        ),
        "delay": (
            ("--delay",),
            {"type": float, "metavar": "S"},
            "seconds between requests to one host (robots.txt crawl-delay raises it; with a"
            " redis:// state: across all workers, fixed for the crawl)",
        ),
        "scope": (
            ("--scope",),
            {"choices": ("host", "origin", "domain", "subdomains")},
            "follow links on the seed's host, its exact origin (scheme too), its registrable"
            " domain, or the host and its subdomains; always on the seed's port (http 80 and"
            " https 443 count as one)",
        ),
        "include": (
            ("--include",),
            {"action": "append", "metavar": "RE"},
            "only follow URLs matching this regex (repeatable)",
        ),
        "exclude": (
            ("--exclude",),
            {"action": "append", "metavar": "RE"},
            "never follow URLs matching this regex (repeatable)",
        ),
        "sort_query": (
            ("--sort-query",),
            {"action": _BOOL},
            "sort query parameters when deduplicating",
        ),
        "drop_params": (
            ("--drop-param",),
            {"action": "append", "metavar": "NAME"},
            "remove this query parameter when deduplicating, e.g. utm_source (repeatable)",
        ),
        "ignore_robots": (("--ignore-robots",), {"action": _BOOL}, "do not obey robots.txt"),
        "sitemaps": (("--sitemaps",), {"action": _BOOL}, "also seed from robots.txt sitemaps"),
        "respect_nofollow": (
            ("--respect-nofollow",),
            {"action": _BOOL},
            'do not follow rel="nofollow" links and pages with meta robots nofollow',
        ),
        "robots_agent": (
            ("--robots-agent",),
            {"metavar": "TOKEN"},
            "product token robots.txt groups are matched by, case-insensitively (RFC 9309)",
        ),
        "user_agent": (("--user-agent",), {"metavar": "UA"}, "User-Agent header"),
        "timeout": (
            ("--timeout",),
            {"type": float, "metavar": "S"},
            "total seconds a request; 0 = no limit",
        ),
        "connect_timeout": (
            ("--connect-timeout",),
            {"type": float, "metavar": "S"},
            "seconds to connect",
        ),
        "read_timeout": (
            ("--read-timeout",),
            {"type": float, "metavar": "S"},
            "seconds without data before giving up",
        ),
        "retries": (
            ("--retries",),
            {"type": int, "metavar": "N"},
            "retries for connection errors, 429 and 5xx",
        ),
        "backoff": (
            ("--backoff",),
            {"type": float, "metavar": "S"},
            "first retry delay, doubled each retry",
        ),
        "max_retry_after": (
            ("--max-retry-after",),
            {"type": float, "metavar": "S"},
            "longest Retry-After honoured",
        ),
        "headers": (
            ("--header", "-H"),
            {"action": "append", "metavar": "'NAME: VALUE'"},
            "send this request header (repeatable)",
        ),
        "cookies": (
            ("--cookies",),
            {"metavar": "FILE"},
            "load this Netscape/Mozilla cookies.txt into the crawl's cookie jar",
        ),
        "save_cookies": (
            ("--save-cookies",),
            {"metavar": "FILE"},
            "write the cookie jar to FILE (cookies.txt) when the crawl ends",
        ),
        "auth": (
            ("--auth",),
            {"metavar": "USER:PASSWORD"},
            "HTTP Basic credentials, sent only to the seeds' origins; never stored or printed",
        ),
        "auth_env": (
            ("--auth-env",),
            {"metavar": "VAR"},
            "like --auth, read from environment variable VAR (keeps the secret off the command"
            " line)",
        ),
        "origin_headers": (
            ("--header-for",),
            {"action": "append", "nargs": 2, "metavar": ("ORIGIN", "'NAME: VALUE'")},
            "send this header to ORIGIN (scheme://host[:port]) only, whatever its name"
            " (repeatable); never stored or printed",
        ),
        "bearer_env": (
            ("--bearer-env",),
            {"metavar": "VAR"},
            "send 'Authorization: Bearer TOKEN', TOKEN read from environment variable VAR, to"
            " the seeds' origins only",
        ),
        "proxy": (
            ("--proxy",),
            {"metavar": "URL"},
            "send every request through this http://HOST:PORT proxy (overrides HTTP_PROXY,"
            " HTTPS_PROXY and NO_PROXY, which are honoured without it)",
        ),
        "insecure": (
            ("--insecure", "-k"),
            {"action": _BOOL},
            "do not verify TLS certificates or host names (a staging site, a self-signed"
            " certificate); said once on stderr",
        ),
        "ca_cert": (
            ("--ca-cert",),
            {"metavar": "FILE"},
            "trust the CA certificates of this PEM bundle INSTEAD of the system's store (as curl's"
            " --cacert)",
        ),
        "client_cert": (
            ("--client-cert",),
            {"metavar": "FILE"},
            "present this PEM client certificate (mutual TLS); FILE may hold its key too",
        ),
        "client_key": (
            ("--client-key",),
            {"metavar": "FILE"},
            "the PEM private key of --client-cert, when it is in a file of its own",
        ),
        "client_key_password_env": (
            ("--client-key-password-env",),
            {"metavar": "VAR"},
            "read the passphrase of an encrypted client key from environment variable VAR",
        ),
        "exclude_private": (
            ("--exclude-private",),
            {"action": _BOOL},
            "never connect to a private address (10/8, 172.16/12, 192.168/16, 100.64/10,"
            " fc00::/7), checked on the resolved address; the seeds' host:port are allowed",
        ),
        "exclude_link_local": (
            ("--exclude-link-local",),
            {"action": _BOOL},
            "never connect to a link-local address (169.254/16: cloud metadata; fe80::/10);"
            " crawler check refuses them unless --allow-link-local",
        ),
        "exclude_loopback": (
            ("--exclude-loopback",),
            {"action": _BOOL},
            "never connect to a loopback address (127/8, ::1, 0.0.0.0, ::)",
        ),
        "link_set": (
            ("--link-set",),
            {"choices": ("links", "resources")},
            "which links to extract: navigational links, or also resources (img, script, ...)",
        ),
        "render": (
            ("--render",),
            {"choices": ("never", "auto", "always")},
            "load HTML pages in headless Chromium for the links their scripts make: never;"
            " auto: the pages that look client-rendered (an empty app mount point, mostly"
            " script, a <noscript> asking for JavaScript, a client router's data); always"
            " (needs the 'render' extra and Chromium)",
        ),
        "render_concurrency": (
            ("--render-concurrency",),
            {"type": int, "metavar": "N"},
            "pages rendered at once in the browser",
        ),
        "render_timeout": (
            ("--render-timeout",),
            {"type": float, "metavar": "S"},
            "seconds a page may take in the browser; the links seen by then count, the page"
            " gets error render_timeout",
        ),
        "format": (
            ("--format", "-f"),
            {"choices": FORMATS},
            "output format (sitemap: a sitemaps.org XML sitemap of the in-scope HTML pages that"
            " answered 200)",
        ),
        "output": (("--output", "-o"), {"metavar": "FILE"}, "write results to FILE"),
        "all_links": (
            ("--all-links",),
            {"action": _BOOL},
            "urls format: also list out-of-scope, non-HTTP and invalid links, tab-marked"
            " external/other/invalid",
        ),
        "quiet": (("--quiet", "-q"), {"action": _BOOL}, "no progress and no summary on stderr"),
        "warc": (
            ("--warc",),
            {"metavar": "FILE"},
            "also archive every response to FILE, a WARC 1.1 file (.warc.gz), written as"
            " FILE.open and renamed at the end (after a kill: crawler warc repair FILE)",
        ),
        "state": (
            ("--state",),
            {"metavar": "DIR|URL"},
            "keep the crawl's state in DIR (SQLite): the same command again, or with no URL,"
            " continues the crawl where it stopped, even after kill -9; or in Redis at"
            " redis://HOST:PORT/DB, shared by every worker given it (with no URL: join the crawl)",
        ),
        "state_sync": (
            ("--state-sync",),
            {"choices": ("normal", "full")},
            "how the state commits: normal survives kill -9, full also a power loss (an fsync a"
            " commit)",
        ),
        "name": (
            ("--name",),
            {"metavar": "NAME"},
            "with a redis:// state: the crawl's name, so that several crawls share one database",
        ),
        "lease_timeout": (
            ("--lease-timeout",),
            {"type": float, "metavar": "S"},
            "with a redis:// state: seconds before a dead worker's requests go back to the queue;"
            " 0 = automatic: 3 x --timeout, at least 60",
        ),
        "metrics_port": (
            ("--metrics-port",),
            {"type": int, "metavar": "PORT"},
            "serve Prometheus metrics on http://HOST:PORT/metrics; 0 = off",
        ),
        "metrics_host": (
            ("--metrics-host",),
            {"metavar": "HOST"},
            "the address --metrics-port binds",
        ),
        "metrics_linger": (
            ("--metrics-linger",),
            {"type": float, "metavar": "S"},
            "keep serving /metrics S seconds after the crawl ends, for a last scrape of the final"
            " values (Ctrl-C cuts it short)",
        ),
    }


# Config-file only keys (a table has no flag): key -> what the file must hold.
FILE_ONLY: dict[str, str] = {
    "origin_auth": '[http.origin_auth] table, {"https://host:port" = "user:password"}',
}


@cache
def _flags() -> dict[str, str]:
    """Config key -> its flag (``crawler.cli.options._FLAG_OF``)."""
    return {key: flags[0] for key, (flags, _, _) in _options().items()} | {"seeds": "URL"}


def __getattr__(name: str) -> Any:
    """The tables built on first use (``_OPTIONS``, ``_FLAG_OF``)."""
    if name == "_OPTIONS":
        return _options()
    if name == "_FLAG_OF":
        return _flags()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def flag_of(key: str) -> str:
    """The flag of config key ``key`` (``max_depth`` -> ``--max-depth``; ``seeds`` -> URL)."""
    return _flags().get(key, key)


def _show_default(key: str, value: object) -> str:
    if value is None:
        # None that stands for a value: the crawl without --name is the crawl named "default"
        text = {
            "output": "stdout",
            "state": "in memory",
            "name": "default",
            "robots_agent": "the User-Agent's first token, up to '/'",
        }.get(key, "none")
    elif isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, tuple):
        text = " ".join(value) or "none"
    elif isinstance(value, dict):
        text = "none" if not value else "from the config file"
    else:
        text = str(value)
    return text.replace("%", "%%")


class Formatter(argparse.HelpFormatter):
    """The help layout of every command (the help text starts by column 34)."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=34)


def add_crawl_options(
    parser: argparse.ArgumentParser, *, exclude: Collection[str] = frozenset()
) -> None:
    """Add the crawl's options to ``parser`` (``crawl``'s, and ``check``'s with its own
    output options in ``exclude``), grouped as config.GROUPS.

    Every flag defaults to ``argparse.SUPPRESS``, so that only the flags given land in the
    namespace (``config_from_args`` puts them over the config file; ``given_keys`` names
    them). Not added: the URL positional and ``--config``.
    """
    from crawler.config import GROUPS, defaults  # noqa: PLC0415  (start-up time)

    table = _options()
    defs = defaults()
    for group, keys in GROUPS.items():
        options = [k for k in keys if k in table and k not in exclude]
        if not options:
            continue
        arg_group = parser.add_argument_group(group)
        for key in options:
            flags, kwargs, text = table[key]
            arg_group.add_argument(
                *flags,
                dest=key,
                default=argparse.SUPPRESS,
                help=f"{text} (default: {_show_default(key, defs[key])})",
                **kwargs,
            )
            if key == "exclude_loopback":
                arg_group.add_argument(
                    "--exclude-all-private",
                    "-E",
                    action=_ExcludeAll,
                    nargs=0,
                    default=argparse.SUPPRESS,
                    help="same as --exclude-private --exclude-link-local --exclude-loopback",
                )
            if key == "link_set":
                arg_group.add_argument(
                    "--resources",
                    dest="link_set",
                    action="store_const",
                    const="resources",
                    default=argparse.SUPPRESS,
                    help="same as --link-set resources",
                )


class _ExcludeAll(argparse.Action):
    """``-E``: the three address exclusions at once (lychee's ``--exclude-all-private``)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        for key in ("exclude_private", "exclude_link_local", "exclude_loopback"):
            setattr(namespace, key, True)


def err(message: str) -> None:
    """``crawler: error: MESSAGE`` on stderr (a closed stderr is ignored)."""

    try:
        sys.stderr.write(f"{PROG}: error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


#: The line ``extractor_hint`` prints: pip hides setup.py's warning, so a user who lost the
#: compiled extractor (no compiler) would never know the crawl runs on the slower twin.
EXTRACTOR_HINT = (
    f'{PROG}: the compiled extractor is not installed (pure Python, slower): see README "Set-up"'
)


def extractor_hint(quiet: bool) -> None:
    """Say once on stderr, at a crawl's (or check's) start, that the compiled extractor is
    missing; not with ``quiet``, nor when the pure-Python twin was asked for
    (``CRAWLER_NO_EXTENSIONS``) or is the only one (not CPython)."""
    if quiet:
        return
    twins = importlib.import_module("crawler._twins")
    extract = importlib.import_module("crawler.extract")
    if twins.NO_EXTENSIONS or extract.IMPLEMENTATION != "py":
        return
    try:
        sys.stderr.write(EXTRACTOR_HINT + "\n")
    except (OSError, ValueError):
        pass


def config_from_args(args: argparse.Namespace) -> CrawlConfig:
    """The config file (if any), then the flags given, validated.

    Raises:
        ConfigError: the message names the file and key, or the flag, and the reason.
    """
    from crawler.config import ConfigError, load_config  # noqa: PLC0415  (start-up time)

    flags = _flags()
    overrides: dict[str, Any] = {k: v for k, v in vars(args).items() if k in flags}
    if isinstance(overrides.get("origin_headers"), list):  # --header-for ORIGIN HEADER ...
        per_origin: dict[str, list[str]] = {}
        for origin, header in overrides["origin_headers"]:
            per_origin.setdefault(origin, []).append(header)
        overrides["origin_headers"] = per_origin
    if not overrides.get("seeds"):
        overrides.pop("seeds", None)
    try:
        return load_config(args.config, overrides)
    except ConfigError as exc:
        if exc.source == "command line" and exc.key == "seeds":
            raise ConfigError(f"URL {exc.reason}") from None
        if exc.source == "command line" and exc.key in flags:
            raise ConfigError(exc.reason, key=flags[exc.key]) from None
        raise


def given_keys(args: argparse.Namespace) -> set[str]:
    """The config keys this run sets explicitly: by flag, or in the ``--config`` file
    (``seeds`` when URLs are given). A resumed crawl refuses a crawl-defining one that
    disagrees with the stored crawl, and takes the stored value of every other key.

    Call it after ``config_from_args`` succeeded (the file is known to be good).
    """
    from crawler.config import load_toml  # noqa: PLC0415  (start-up time)

    table = _options()
    keys = {k for k in vars(args) if k in table}
    if getattr(args, "seeds", None):
        keys.add("seeds")
    if getattr(args, "config", None):
        keys |= set(load_toml(args.config))
    return keys


def explain(exc: ConfigError, args: argparse.Namespace) -> str:
    """A key-named ConfigError (from a resumed crawl's settings) in the user's terms: the flag
    if the flag was given, else the config file and the key."""
    key = exc.key
    if getattr(exc, "bare", False):  # says the option itself (settings.CredentialsError)
        return exc.reason
    if exc.source is None and key in _options():
        if key in vars(args):
            return f"{_flags()[key]}: {exc.reason}"
        if getattr(args, "config", None):
            return f"{args.config}: {key}: {exc.reason}"
    return str(exc)


def check_fetch_options(config: CrawlConfig) -> str | None:
    """Why the fetcher could not use ``config``'s headers, cookies, credentials or proxy (the
    message names the option and the line or reason, never a secret), or None.

    Run before the crawl starts, so that a bad ``--cookies`` file is exit 2 before any output.
    With an https seed the TLS context starts building in a thread here, while the crawl's
    modules import (crawler.http.tls_context: the CA store costs 20-30 ms).
    """
    if any(seed[:6].lower() == "https:" for seed in config.seeds):
        importlib.import_module("crawler.http.tls_context").start_for_seeds(config)
    for option, name in (("--auth-env", config.auth_env), ("--bearer-env", config.bearer_env)):
        if name is not None and not os.environ.get(name):
            return f"{option}: the environment variable {name} is not set (or empty)"
    if not (
        config.headers
        or config.origin_headers
        or config.bearer_env
        or config.cookies
        or config.save_cookies
        or config.auth
        or config.auth_env
        or config.origin_auth
        or config.proxy
        or config.insecure
        or config.ca_cert
        or config.client_cert
        or config.client_key
        or _proxy_env()
    ):
        return None  # nothing to check: do not import the fetcher's side for nothing
    errors = importlib.import_module("crawler.http.errors")
    check = getattr(importlib.import_module("crawler.http.options"), "check_options", None)
    if check is None:  # pragma: no cover - the fetcher's check not there yet
        return None
    try:
        check(config)
    except errors.OptionError as exc:
        return str(exc)
    return None


def _proxy_env() -> bool:
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    return any(os.environ.get(n) for n in names)
