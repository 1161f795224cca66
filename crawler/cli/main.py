"""Command line: ``crawler crawl URL ...``, ``crawler status --state DIR``, ``crawler check
URL ...`` (crawler/cli/check.py) and ``crawler extract FILE --base URL``.

Thin by design: argparse -> CrawlConfig (file, then flags on top) -> engine, plus the things
only a command line has: exit codes, signals, a closed stdout pipe, progress on stderr.

With ``--state DIR`` the stored settings are read (read-only, before the engine takes the
state's lock) and merged with this run's (``crawler.core.settings.resume``) first, so that a
conflicting flag is refused, and the output of the stored crawl is known, before anything is
written; the output file is then appended to, not truncated (``crawler.output.sinks``). With
``--state redis://...`` the same, through ``RedisState.read_settings``; a worker given no URL
before the crawl exists waits for it (``_wait_for_crawl``). Bad fetch options (a cookies file,
``--auth-env``, a proxy ...) and an unwritable ``--warc`` are refused before anything starts.
Credentials never reach a message: options that hold them are named, never quoted.

Exit codes: 0 done; 1 the crawl finished with errors only (no page fetched successfully) or
the output could not be written; 2 usage or config error; 130 SIGINT; 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Collection, Sequence
from functools import cache
from typing import IO, TYPE_CHECKING, Any, TypeVar

from crawler._version import __version__

if TYPE_CHECKING:
    import signal
    from collections.abc import Coroutine
    from types import ModuleType

    from crawler.config import ConfigError, CrawlConfig
    from crawler.core.engine import Crawler
    from crawler.core.results import CrawlStats
    from crawler.output.progress import Progress, Snapshot
    from crawler.output.sinks import OutputSink

# Start-up time: ``crawler --version``, ``--help`` and an argument error import none of the
# crawl's modules (config, output, asyncio, aiohttp ...); a command imports what it uses when
# it runs (tests/test_startup.py holds this, benchmarks/startup.py times it).

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2
EXIT_SIGINT = 130  # 128 + SIGINT
EXIT_SIGTERM = 143  # 128 + SIGTERM

PROG = "crawler"
_T = TypeVar("_T")

_BOOL = argparse.BooleanOptionalAction
_Option = tuple[tuple[str, ...], dict[str, Any], str]


@cache
def _options() -> dict[str, _Option]:
    """key -> (flags, argparse kwargs, help). Every CrawlConfig key has one; "(default: X)" is
    appended from CrawlConfig so that --help cannot drift from the real defaults.

    Built on first use (``crawler.cli.main._OPTIONS`` is the same dict): the ``--format`` choices
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
        "proxy": (
            ("--proxy",),
            {"metavar": "URL"},
            "send every request through this http://HOST:PORT proxy (overrides HTTP_PROXY,"
            " HTTPS_PROXY and NO_PROXY, which are honoured without it)",
        ),
        "link_set": (
            ("--link-set",),
            {"choices": ("links", "resources")},
            "which links to extract: navigational links, or also resources (img, script, ...)",
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
            "also archive every response to FILE, a WARC 1.1 file (.warc.gz)",
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
    }


# Config-file only keys (a table has no flag): key -> what the file must hold.
FILE_ONLY: dict[str, str] = {
    "origin_auth": '[http.origin_auth] table, {"https://host:port" = "user:password"}',
}


@cache
def _flags() -> dict[str, str]:
    """Config key -> its flag (``crawler.cli.main._FLAG_OF``)."""
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
        text = {"output": "stdout", "state": "in memory"}.get(key, "none")
    elif isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, tuple):
        text = " ".join(value) or "none"
    else:
        text = str(value)
    return text.replace("%", "%%")


class _Formatter(argparse.HelpFormatter):
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
            if key == "link_set":
                arg_group.add_argument(
                    "--resources",
                    dest="link_set",
                    action="store_const",
                    const="resources",
                    default=argparse.SUPPRESS,
                    help="same as --link-set resources",
                )


_CRAWL_HELP = "crawl from seed URLs, print the links found"
_EXTRACT_HELP = "print the links of one HTML document"


def build_parser(
    *, check: bool = False, commands: Collection[str] | None = None
) -> argparse.ArgumentParser:
    """The ``crawler`` parser. ``check``: with the real ``check`` command (its module is
    imported only then; otherwise a stub lists it in ``crawler --help``).

    ``commands``: the commands (``crawl``, ``extract``) that get their options; the others are
    stubs that only list them in ``crawler --help`` (default: all). ``main`` builds only the
    command its arguments name, so that ``--version``, ``--help`` and a usage error import
    neither crawler.config nor crawler.output.sinks.
    """
    full = {"crawl", "extract"} if commands is None else set(commands)
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="An asynchronous, streaming link-extraction web crawler.",
        formatter_class=_Formatter,
        epilog="exit codes: 0 done, 1 finished with errors only, 2 usage or config error,"
        " 130 SIGINT, 143 SIGTERM",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    if "crawl" in full:
        _add_crawl_parser(sub)
    else:
        sub.add_parser("crawl", help=_CRAWL_HELP, add_help=False)
    if "extract" in full:
        _add_extract_parser(sub)
    else:
        sub.add_parser("extract", help=_EXTRACT_HELP, add_help=False)
    _add_status_parser(sub)
    if check:
        importlib.import_module("crawler.cli.check").add_parser(sub)
    else:
        sub.add_parser(
            "check", help="check every link of a site: broken links, where they are", add_help=False
        )
    return parser


def _add_crawl_parser(sub: Any) -> None:
    crawl = sub.add_parser(
        "crawl",
        help=_CRAWL_HELP,
        description="Crawl from the seed URLs; results on stdout (or --output), progress and "
        "the summary on stderr. Every option has a key of the same name (with _) in the "
        "--config file; flags override the file.",
        formatter_class=_Formatter,
        epilog="exit codes: 0 done, 1 finished with errors only (e.g. the seed failed),"
        " 2 usage or config error, 130 SIGINT, 143 SIGTERM",
    )
    crawl.add_argument(
        "seeds", nargs="*", metavar="URL", help="seed URLs (http or https); or `seeds` in --config"
    )
    crawl.add_argument(
        "--config", metavar="FILE", help="TOML config file (see config.example.toml)"
    )
    # `docker run IMAGE --version` reaches here through the `crawler crawl` entry point
    crawl.add_argument(
        "--version", action="store_true", default=argparse.SUPPRESS, help="print the version"
    )
    add_crawl_options(crawl)


def _add_extract_parser(sub: Any) -> None:
    from crawler.output.sinks import FORMATS  # noqa: PLC0415  (start-up time)

    ex = sub.add_parser(
        "extract",
        help=_EXTRACT_HELP,
        description="Extract the links of one HTML document (a file, or - for stdin), "
        "resolved against --base.",
        formatter_class=_Formatter,
    )
    ex.add_argument("file", metavar="FILE|-", help="HTML file, or - for stdin")
    ex.add_argument("--base", required=True, metavar="URL", help="the document's URL")
    ex.add_argument(
        "--resources",
        action="store_true",
        help="also resources: img, script, link, ... (default: off)",
    )
    ex.add_argument("--encoding", metavar="ENC", help="transport charset (default: sniffed)")
    ex.add_argument(
        "--format",
        "-f",
        choices=[f for f in FORMATS if f != "sitemap"],
        default="urls",
        help="urls: each URL once; jsonl: one record a link; csv: one row a link (default: urls)",
    )
    ex.add_argument("--output", "-o", metavar="FILE", help="write to FILE (default: stdout)")


def _add_status_parser(sub: Any) -> None:
    st = sub.add_parser(
        "status",
        help="where a crawl kept with --state stands, without running it",
        description="Print where the crawl kept in --state DIR stands: queued, in flight at "
        "the last stop, fetched, failed by kind, hosts, seeds and settings; with a "
        "redis://HOST:PORT/DB state, the cluster: also workers alive and pages/s. Read-only: "
        "it neither runs nor changes the crawl, and works while the crawl runs.",
        formatter_class=_Formatter,
        epilog="exit codes: 0 printed, 2 no such state (or crawl in Redis), a state this"
        " version cannot read, or Redis unreachable",
    )
    st.add_argument(
        "--state",
        required=True,
        metavar="DIR|URL",
        help="the crawl's state directory, or its redis://HOST:PORT/DB",
    )
    st.add_argument(
        "--name",
        metavar="NAME",
        help="with a redis:// state: the crawl's name (default: the crawl without --name)",
    )
    st.add_argument(
        "--format",
        "-f",
        choices=("text", "json"),
        default="text",
        help="text for people, json for scripts (default: text)",
    )


def _err(message: str) -> None:
    try:
        sys.stderr.write(f"{PROG}: error: {message}\n")
        sys.stderr.flush()
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


def _explain(exc: ConfigError, args: argparse.Namespace) -> str:
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


def _redis_backend() -> Any:
    """crawler.state.redis's RedisState (imports redis-py: only for a redis:// state).

    Raises:
        StateError: the Redis backend cannot be imported (redis-py missing).
    """
    from crawler.state.base import StateError  # noqa: PLC0415

    try:
        return importlib.import_module("crawler.state.redis").RedisState
    except ImportError as exc:
        raise StateError(f"the Redis state is not available: {exc}") from None


def _read_stored(state: str, name: str | None = None) -> dict[str, Any] | None:
    """The stored settings of the crawl at ``state`` (None: no crawl there yet), read without
    the lock and without changing anything: a directory (SQLite), or a redis:// URL and the
    crawl's ``name`` in that database.

    Raises:
        StateError: not a crawl state, another format version, corrupt; Redis unreachable.
    """
    from crawler.config import is_redis_url  # noqa: PLC0415  (start-up time)

    if is_redis_url(state):
        found: dict[str, Any] | None = _redis_backend().read_settings(state, name)
        return found
    sqlite = importlib.import_module("crawler.state.sqlite")
    stored: dict[str, Any] | None = sqlite.SQLiteState.read_settings(state)
    return stored


#: Seconds between two looks for a crawl a worker with no URL waits for (a redis:// state).
JOIN_POLL = 0.5


def _crawl_label(config: CrawlConfig) -> str:
    """'crawl NAME at URL' with the URL's password hidden (for messages)."""
    from crawler.config import redact_url  # noqa: PLC0415  (start-up time)

    name = config.name or "default"
    return f"crawl {name} at {redact_url(config.state or '')}"


def _wait_for_crawl(config: CrawlConfig) -> dict[str, Any]:
    """A worker given no URL on a redis:// state with no crawl yet: wait for another worker
    to start it (docker compose starts the workers in any order), then return its settings.

    Says so once on stderr; looks every JOIN_POLL seconds (one cheap read, no busy loop).
    Ctrl-C ends the wait (KeyboardInterrupt: exit 130 in ``main``).

    Raises:
        StateError: Redis unreachable, or settings this version cannot read.
    """
    assert config.state is not None
    if not config.quiet:
        _note(f"no {_crawl_label(config)} yet; waiting for one to start (Ctrl-C to stop)")
    while True:
        time.sleep(JOIN_POLL)
        stored = _read_stored(config.state, config.name)
        if stored is not None:
            return stored


def _note(message: str) -> None:
    try:
        sys.stderr.write(f"{PROG}: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def check_fetch_options(config: CrawlConfig) -> str | None:
    """Why the fetcher could not use ``config``'s headers, cookies, credentials or proxy (the
    message names the option and the line or reason, never a secret), or None.

    Run before the crawl starts, so that a bad ``--cookies`` file is exit 2 before any output.
    """
    if config.auth_env is not None and not os.environ.get(config.auth_env):
        return f"--auth-env: the environment variable {config.auth_env} is not set (or empty)"
    if not (
        config.headers
        or config.cookies
        or config.save_cookies
        or config.auth
        or config.auth_env
        or config.origin_auth
        or config.proxy
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


def _warc_problem(path: str | None) -> str | None:
    """Why the WARC file ``path`` cannot be written (its directory missing or read-only, the
    file read-only), or None. The writer opens it once the state is open: say so first."""
    if not path:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        return f"--warc: cannot write {path}: no directory {directory}"
    if os.path.isdir(path):
        return f"--warc: {path} is a directory; give a file name (.warc.gz)"
    target = path if os.path.exists(path) else directory
    if not os.access(target, os.W_OK):
        return f"--warc: cannot write {path}: permission denied"
    return None


def _proxy_env() -> bool:
    names = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")
    return any(os.environ.get(n) for n in names)


def _version_text() -> str:
    try:
        impl = str(importlib.import_module("crawler.extract").IMPLEMENTATION)
    except (ImportError, AttributeError) as exc:  # pragma: no cover - broken install
        impl = f"unavailable ({exc})"
    # installed, not imported: uvloop imports asyncio (tens of ms), which --version must not
    loop = "uvloop" if importlib.util.find_spec("uvloop") is not None else "asyncio"
    return (
        f"{PROG} {__version__} (extractor: {impl}; event loop: {loop};"
        f" Python {importlib.import_module('platform').python_version()})"
    )


def _uvloop() -> ModuleType | None:
    try:
        return importlib.import_module("uvloop")
    except ImportError:
        return None


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run on uvloop when it is installed, else the default asyncio loop."""
    import asyncio  # noqa: PLC0415  (start-up time: not for --version, --help)

    uv = _uvloop()
    factory: Any = uv.new_event_loop if uv else None
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(coro)


class _RunState:
    __slots__ = ("crawler", "signal")

    def __init__(self) -> None:
        self.signal: signal.Signals | None = None
        self.crawler: Crawler | None = None


def _tune_gc() -> None:
    """Spare the collector the start-up objects and most young-generation passes.

    A crawl makes many short-lived objects and few cycles; the command line owns its process
    (a library must not change these globals). Measured on the 20,000-page benchmark: about
    10% less CPU, the same peak memory (benchmarks/CRAWL.md).
    """
    import gc  # noqa: PLC0415

    gc.freeze()
    gc.set_threshold(*_GC_THRESHOLDS)


_GC_THRESHOLDS = (50_000, 20, 20)


async def _crawl(
    config: CrawlConfig,
    sink: OutputSink,
    progress: Progress,
    given: set[str] | None = None,
    args: argparse.Namespace | None = None,
    resumed: bool = False,
) -> int:
    """Run the crawl with signal handling and live progress; return the exit code."""
    import asyncio  # noqa: PLC0415  (start-up time)
    import signal  # noqa: PLC0415

    from crawler.config import ConfigError, is_redis_url  # noqa: PLC0415
    from crawler.output.progress import Snapshot  # noqa: PLC0415
    from crawler.state.base import StateError  # noqa: PLC0415

    engine = importlib.import_module("crawler.core.engine")
    _tune_gc()
    loop = asyncio.get_running_loop()
    state = _RunState()
    main_task = asyncio.current_task()

    def on_signal(sig: signal.Signals) -> None:
        if state.signal is None:
            state.signal = sig
            if state.crawler is not None:
                state.crawler.stop()
            elif main_task is not None:
                main_task.cancel()
        elif main_task is not None:
            main_task.cancel()  # a second Ctrl-C: stop waiting for a clean stop

    def on_output_failure() -> None:
        if state.crawler is not None:
            state.crawler.stop()

    sink.on_failure = on_output_failure
    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            handled.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass  # Windows, or not the main thread: Ctrl-C still ends the run, less gracefully
    stats: CrawlStats | None = None
    try:
        # The urls format never reads PageResult.links: do not hold every link of a page.
        # jsonl and csv read them from the compiled extractor's compact record.
        page_links = config.format != "urls"
        options: dict[str, Any] = {"page_links": page_links, "link_record": page_links}
        if given is not None:
            options["given"] = given
        async with engine.Crawler(config, sink=sink, **options) as crawler:
            state.crawler = crawler

            def snapshot() -> Snapshot:
                s = crawler.stats
                return Snapshot(s.pages, crawler.in_flight, crawler.queued, s.error_count)

            ticker = asyncio.ensure_future(progress.run(snapshot))
            try:
                if not sink.failed and state.signal is None:
                    await crawler.run()
            finally:
                ticker.cancel()
                await asyncio.gather(ticker, return_exceptions=True)
                stats = crawler.stats
        stats = crawler.stats  # complete once the context has exited
    except asyncio.CancelledError:
        if state.signal is None:
            raise
        if state.crawler is not None:
            stats = state.crawler.stats
    except StateError as exc:  # the state is locked, corrupt ...: nothing was written
        _err(str(exc))
        return EXIT_USAGE
    except ConfigError as exc:  # the stored settings changed since we read them
        _err(_explain(exc, args) if args is not None else str(exc))
        return EXIT_USAGE
    except OSError as exc:
        if not config.warc or exc.filename not in (config.warc, os.path.abspath(config.warc)):
            raise
        _err(f"--warc: cannot open {config.warc}: {exc.strerror or exc}")  # opened at start
        return EXIT_USAGE
    except Exception as exc:
        if type(exc).__name__ != "WarcError":  # crawler.output.warc's (imported only with --warc)
            raise
        _err(f"--warc: {exc}")
        return EXIT_USAGE
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        sink.close()
    code = _exit_code(state, sink, stats, progress, resumed, is_redis_url(config.state))
    archive_error = getattr(state.crawler, "archive_error", None)
    if archive_error is not None and not sink.broken_pipe:
        _err(f"cannot write the WARC file {config.warc}: {archive_error.strerror or archive_error}")
        return EXIT_ERRORS if code in (EXIT_OK, EXIT_ERRORS) else code
    return code


def _exit_code(
    state: _RunState,
    sink: OutputSink,
    stats: CrawlStats | None,
    progress: Progress,
    resumed: bool = False,
    shared: bool = False,
) -> int:
    import signal  # noqa: PLC0415

    if sink.broken_pipe:
        return EXIT_OK  # the reader took what it wanted (`| head`): quiet, like `rg | head`
    if stats is not None:
        why = state.signal.name if state.signal else ("output error" if sink.error else None)
        progress.summary(
            stats,
            stopped_by=why,
            resumed=resumed,
            repaired=sink.repaired,
            shared=shared,
        )
    if sink.error is not None:
        _err(f"cannot write output: {sink.error.strerror or sink.error}")
        return EXIT_ERRORS
    if state.signal is not None:
        return EXIT_SIGINT if state.signal == signal.SIGINT else EXIT_SIGTERM
    if stats is None or stats.pages_ok == 0:
        return EXIT_ERRORS
    return EXIT_OK


def cmd_crawl(args: argparse.Namespace) -> int:
    from crawler.config import ConfigError, is_redis_url  # noqa: PLC0415  (start-up time)
    from crawler.output.progress import Progress  # noqa: PLC0415
    from crawler.output.sinks import open_sink  # noqa: PLC0415

    try:
        config = config_from_args(args)
        given = given_keys(args)
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    stored: dict[str, Any] | None = None
    if config.state:
        from crawler.core import settings  # noqa: PLC0415  (start-up time: only with a state)
        from crawler.state.base import StateError  # noqa: PLC0415

        try:
            stored = _read_stored(config.state, config.name)
            if stored is None and not config.seeds and is_redis_url(config.state):
                stored = _wait_for_crawl(config)
            if stored is not None:
                config = settings.resume(stored, config, given)
        except StateError as exc:
            _err(str(exc))
            return EXIT_USAGE
        except ConfigError as exc:
            _err(_explain(exc, args))
            return EXIT_USAGE
    if not config.seeds:
        where = f"{config.state} holds no crawl yet, " if config.state else ""
        _err(f"no seed URL: {where}give one or more URLs, or `seeds` in the --config file")
        return EXIT_USAGE
    problem = check_fetch_options(config) or _warc_problem(config.warc)
    if problem:
        _err(problem)
        return EXIT_USAGE
    try:
        resume = None if not config.state else stored is not None
        sink = open_sink(config.format, config.output, resume=resume)
    except OSError as exc:
        _err(f"cannot open output file {config.output!r}: {exc.strerror or exc}")
        return EXIT_USAGE
    progress = Progress(sys.stderr, quiet=config.quiet)
    if progress.live and config.output in (None, "-") and _isatty(sys.stdout):
        sink.before_write = progress.clear
    state_given = given if config.state else None
    return _run(_crawl(config, sink, progress, state_given, args, resumed=stored is not None))


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


def cmd_status(args: argparse.Namespace) -> int:
    """``crawler status --state DIR``: print where the stored crawl stands; change nothing."""
    from crawler.config import ConfigError, CrawlConfig  # noqa: PLC0415  (start-up time)
    from crawler.state.base import StateError  # noqa: PLC0415

    status = importlib.import_module("crawler.cli.status")
    try:
        state = CrawlConfig(state=args.state, name=args.name).validated().state
        assert state is not None
        text = status.render(state, args.format, args.name)
    except ConfigError as exc:
        _err(f"--{exc.key}: {exc.reason}" if exc.key in ("state", "name") else str(exc))
        return EXIT_USAGE
    except StateError as exc:
        _err(str(exc))
        return EXIT_USAGE
    sys.stdout.write(text)
    sys.stdout.flush()
    return EXIT_OK


def cmd_extract(args: argparse.Namespace) -> int:
    from crawler.config import seed_problem  # noqa: PLC0415  (start-up time)
    from crawler.output.sinks import open_sink  # noqa: PLC0415

    problem = seed_problem(args.base)
    if problem:
        _err(f"--base: {problem}")
        return EXIT_USAGE
    extract = importlib.import_module("crawler.extract")
    results = importlib.import_module("crawler.core.results")
    try:
        infile: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")
    except OSError as exc:
        _err(f"cannot read {args.file!r}: {exc.strerror or exc}")
        return EXIT_USAGE
    try:
        # jsonl here is one record a link (url, raw, tag, attr, nofollow), not a page
        sink = open_sink("jsonl-links" if args.format == "jsonl" else args.format, args.output)
    except OSError as exc:
        infile.close()
        _err(f"cannot open output file {args.output!r}: {exc.strerror or exc}")
        return EXIT_USAGE
    ex = extract.LinkExtractor(
        args.base, args.encoding, link_set="resources" if args.resources else "links"
    )
    seen: set[str] = set()
    page = results.PageResult(url=args.base, depth=0)

    def emit(links: list[Any]) -> None:
        if args.format == "urls":
            for link in links:
                url = link.url
                if url is not None and url not in seen:  # None: the value is not a URL
                    seen.add(url)
                    sink.link(url, args.base, "internal")
        elif args.format == "jsonl":
            sink.links(links)  # type: ignore[attr-defined]
        else:
            page.links = links
            sink.page(page)

    try:
        with infile:
            while not sink.failed:
                chunk = infile.read(65536)
                if not chunk:
                    break
                emit(ex.feed(chunk))
        if not sink.failed:
            emit(ex.close())
    except OSError as exc:
        _err(f"cannot read {args.file!r}: {exc.strerror or exc}")
        return EXIT_ERRORS
    finally:
        sink.close()
    if sink.error is not None:
        _err(f"cannot write output: {sink.error.strerror or sink.error}")
        return EXIT_ERRORS
    return EXIT_OK


def _command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (the first argument that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``crawler`` console script and ``python -m crawler``."""
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    if command == "crawl":
        # the crawl's thresholds from the start: the imports (aiohttp ...) make ~80 young
        # collections by default, ~20 so (callgrind: 1.5% of the start-up's instructions)
        import gc  # noqa: PLC0415

        gc.set_threshold(*_GC_THRESHOLDS)
    # only the command named gets its options (and imports): --version and --help stay light
    parser = build_parser(check=command == "check", commands=() if command is None else (command,))
    try:
        args = parser.parse_args(argv)
        if args.version:
            print(_version_text())
            return EXIT_OK
        if args.command == "crawl":
            return cmd_crawl(args)
        if args.command == "status":
            return cmd_status(args)
        if args.command == "check":
            code: int = importlib.import_module("crawler.cli.check").cmd_check(args)
            return code
        if args.command == "extract":
            return cmd_extract(args)
        parser.print_usage(sys.stderr)
        _err("a command is required: crawl, check, status or extract (see --help)")
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before the event loop's handler was installed
        return EXIT_SIGINT
    except BrokenPipeError:  # e.g. `crawler --help | head -1`
        from crawler.output.sinks import silence_stream  # noqa: PLC0415

        silence_stream(sys.stdout)
        return EXIT_OK
