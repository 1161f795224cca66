"""The crawl's options, shared by ``crawler crawl``, ``check`` and ``audit``: the table of flags
(one a CrawlConfig key, in ``option_table.py``), ``add_crawl_options`` that adds them to a command,
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

from crawler.cli.option_table import option_table as _options

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
