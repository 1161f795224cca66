"""``crawler check URL ...``: the link checker's command line (wired in by crawler/cli/main.py).

The crawl's options (scope, limits, robots, politeness, HTTP, ``--state`` ...) are the
``crawl`` command's own, added by ``crawler.cli.options.add_crawl_options``; the output options are
the checker's: ``--format text|json|junit|sarif|markdown|html`` and ``--output FILE``.

Exit codes: 0 no broken link (and, with ``--fail-on blocked``, no link blocked by a bot wall;
with ``--fail-on warnings``, no warning either), 1 broken links found (or blocked links with
``--fail-on blocked``, or blocked links or warnings with ``--fail-on warnings``), 2 usage or
config error (a bad flag or
config key, no URL, an output file that cannot be written), 130 SIGINT, 143 SIGTERM (both:
the check stopped, no report).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import signal
import sys
import tomllib
from collections.abc import Callable
from typing import Any, TextIO

from crawler.check.model import HOST_TIMEOUTS
from crawler.cli import options
from crawler.config import ConfigError, CrawlConfig

__all__ = [
    "EXIT_BROKEN",
    "EXIT_OK",
    "EXIT_USAGE",
    "FAIL_ON",
    "FORMATS",
    "add_parser",
    "cmd_check",
    "exit_code",
    "write",
]

EXIT_OK, EXIT_BROKEN, EXIT_USAGE = 0, 1, 2
#: ``--fail-on`` levels, each failing on what the ones before it fail on, and more.
FAIL_ON = ("broken", "blocked", "warnings")
#: Report formats; text and json are written here, the others by ``report_<name>.py``.
FORMATS = ("text", "json", "junit", "sarif", "markdown", "html")
# The crawl's output options that the checker replaces with its own.
_NOT_FOR_CHECK = frozenset({"format", "output", "all_links", "name", "lease_timeout", "host_split"})


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``check`` command to the ``crawler`` parser's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help=options.COMMAND_HELP["check"],
        description="Crawl the site from the URLs and check every link found once: pages, "
        "images, scripts, stylesheets (--links-only: navigational links), external links "
        "(HEAD/GET, never crawled), #fragments. Broken links are reported with every page, "
        "line and column that links them.",
        formatter_class=options.Formatter,
        epilog="exit codes: 0 no broken link, 1 broken links found (--fail-on blocked: or "
        "links blocked by a bot wall; --fail-on warnings: or those or warnings), 2 usage or "
        "config error, 130 SIGINT, 143 SIGTERM",
    )
    add_seed_arguments(p)
    group = p.add_argument_group("check")
    group.add_argument(
        "--links-only",
        dest="link_set",
        action="store_const",
        const="links",
        default=argparse.SUPPRESS,
        help="check navigational links only (a, area, iframe ...), not images, scripts, "
        "stylesheets (default: every resource)",
    )
    group.add_argument(
        "--external",
        dest="check_external",
        action="store_true",
        default=True,
        help="check out-of-scope links, HEAD/GET each once, never crawled (default: on)",
    )
    group.add_argument(
        "--no-external",
        dest="check_external",
        action="store_false",
        help="do not check out-of-scope links",
    )
    group.add_argument(
        "--allow-link-local",
        action="store_true",
        help="connect to link-local addresses (169.254/16: cloud metadata; fe80::/10), which"
        " crawler check refuses by default, also with --exclude-link-local or -E",
    )
    group.add_argument(
        "--ignore-fragments",
        action="store_true",
        help="do not check #fragment targets (default: check them)",
    )
    group.add_argument(
        "--cache",
        metavar="FILE",
        help="keep results of external links in FILE between runs (JSON; errors never kept)",
    )
    group.add_argument(
        "--cache-max-age",
        metavar="S",
        type=float,
        default=86400.0,
        help="seconds a cached result is used (default: 86400, one day)",
    )
    group.add_argument(
        "--recheck-delay",
        metavar="S",
        type=float,
        default=1.0,
        help="least seconds before a link that failed with a timeout, 403, 429 or 5xx is "
        "checked once more (default: 1)",
    )
    group.add_argument(
        "--host-timeouts",
        metavar="N",
        type=int,
        default=HOST_TIMEOUTS,
        help="after N URLs of one host (and port) timed out in a row, its other links are not"
        " requested and are reported as not checked (host_unresponsive); 0 = never"
        f" (default: {HOST_TIMEOUTS})",
    )
    group.add_argument(
        "--no-browser-retry",
        dest="browser_retry",
        action="store_false",
        help="do not ask a link that answered 403 twice once more with a browser's headers"
        " (by default, if that GET passes, the link is reported blocked, not broken)",
    )
    group.add_argument(
        "--format",
        "-f",
        dest="check_format",
        choices=FORMATS,
        default="text",
        help="report format (default: text)",
    )
    group.add_argument(
        "--output",
        "-o",
        dest="check_output",
        metavar="FILE",
        help="write the report to FILE (default: stdout)",
    )
    group.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="broken",
        help="exit 1 on broken links; blocked: also on links blocked by a bot wall (a"
        " challenge, a rate limit, a 403 only for the checker); warnings: also on warnings"
        " (default: broken)",
    )
    options.add_crawl_options(p, exclude=_NOT_FOR_CHECK)
    for action in p._actions:  # where the check's meaning differs from the crawl's
        if "--link-set" in action.option_strings:
            action.help = "which tags and attributes count as links (default here: resources)"
        elif "--resources" in action.option_strings:
            # kept (a crawl's command line works here too, and it overrides a --config file's
            # link_set = "links"), but said to be the default rather than looking like news
            action.help = "same as --link-set resources, the default here (over a --config"
            action.help += " file's link_set)"
        elif "--state" in action.option_strings:  # no redis:// state for the checker
            action.metavar = "DIR"
            action.help = (
                "keep the check's state in DIR (SQLite): the same command again continues the"
                " check where it stopped, even after kill -9; a redis:// state is for crawler"
                " crawl only (default: in memory)"
            )
    return p


def add_seed_arguments(p: argparse.ArgumentParser) -> None:
    """The URLs, ``--config`` and ``--version``: what ``check`` and ``audit`` start with."""
    p.add_argument("seeds", nargs="*", metavar="URL", help="where to start (http or https)")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML config file (the crawl's keys; `crawler config` prints an example)",
    )
    p.add_argument(
        "--version", action="store_true", default=argparse.SUPPRESS, help="print the version"
    )


def error_writer(command: str) -> Callable[[str], None]:
    """A function that writes ``crawler COMMAND: error: ...`` on stderr (never raising)."""

    def err(message: str) -> None:
        try:
            sys.stderr.write(f"crawler {command}: error: {message}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            pass

    return err


_err = error_writer("check")


def crawl_config_problem(config: CrawlConfig, command: str) -> str | None:
    """Why a checker's config cannot run (no seed, bad fetch options, a redis:// state)."""
    if not config.seeds:
        return "no URL: give one or more URLs, or `seeds` in the --config file"
    problem = options.check_fetch_options(config)
    if problem:
        return problem
    if config.state and config.state.lower().startswith(("redis://", "rediss://", "unix://")):
        return (
            f"--state: crawler {command} keeps its state in a directory (with its journal of"
            " pages); a redis:// state is for crawler crawl"
        )
    return None


def run_to_report(
    runner: Any,
    config: CrawlConfig,
    output: str | None,
    write_report: Callable[[Any, TextIO], None],
    err: Callable[[str], None],
) -> tuple[Any, int | None]:
    """Run ``runner`` (``run()``, ``snapshot()``) with the live line and write its report to
    ``output`` (None or "-": stdout): (the report, None), or (None, the exit code) when it
    could not (a signal, a bad state, an output that cannot be written)."""
    from crawler.cli.crawl import _run as run_loop  # noqa: PLC0415
    from crawler.state.base import StateError  # noqa: PLC0415

    out: TextIO = sys.stdout
    if output not in (None, "-"):
        try:
            out = open(output, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            err(f"cannot open output file {output!r}: {exc.strerror or exc}")
            return None, EXIT_USAGE
    options.extractor_hint(config.quiet)
    try:
        try:
            # the crawl command's loop (uvloop when installed): the audit spent ~1 s more
            # CPU on asyncio's own loop on the rustdoc site (benchmarks/AUDIT.md)
            report = run_loop(_run(runner, config.quiet))
        except (KeyboardInterrupt, _Terminated) as exc:
            err("interrupted")
            code = options.EXIT_SIGTERM if isinstance(exc, _Terminated) else options.EXIT_SIGINT
            return None, code
        except (ConfigError, StateError) as exc:  # a stored crawl that disagrees, a bad DIR
            err(str(exc))
            return None, EXIT_USAGE
        try:
            write_report(report, out)
            out.flush()
        except OSError as exc:
            err(f"cannot write the report: {exc.strerror or exc}")
            return None, EXIT_USAGE
    finally:
        if out is not sys.stdout:
            out.close()
    return report, None


def _file_sets_link_set(path: str | None) -> bool:
    if path is None:
        return False
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return False  # load_config reports it
    extraction = data.get("extraction")
    return "link_set" in data or (isinstance(extraction, dict) and "link_set" in extraction)


def config_from_args(args: argparse.Namespace) -> CrawlConfig:
    """The crawl's config for a check: the file, then the flags; every resource by default.

    Raises:
        ConfigError: naming the file and key, or the flag.
    """
    if "link_set" not in vars(args) and not _file_sets_link_set(args.config):
        args = argparse.Namespace(**vars(args), link_set="resources")
    return options.config_from_args(args)


def write(report: Any, fmt: str, out: TextIO) -> None:
    """Write ``report`` in format ``fmt`` (text and json here, the rest by their module)."""
    if fmt in ("text", "json"):
        from crawler.check import text  # noqa: PLC0415  (the report writers load lazily)

        (text.write_text if fmt == "text" else text.write_json)(report, out)
        return
    module = importlib.import_module(f"crawler.check.report_{fmt}")
    module.write(report, out)


class _Terminated(Exception):
    """SIGTERM stopped the check (exit 143)."""


async def _run(checker: Any, quiet: bool) -> Any:
    """The check, with the crawl's live line on stderr when it is a terminal.

    SIGINT and SIGTERM cancel it, then raise ``KeyboardInterrupt`` or ``_Terminated``, so
    that exit 130 or 143 says which signal it was. Both are this loop's own handlers, as in
    ``crawler crawl``: asyncio.run's Ctrl-C handling is installed only when SIGINT has
    Python's default handler, and a process started with SIGINT ignored (a shell's
    background job, some service managers) would otherwise run to its end on Ctrl-C.
    """
    from crawler.output.progress import Progress  # noqa: PLC0415

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    stopped_by: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        stopped_by.append(sig)
        if task is not None:
            task.cancel()

    handled: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            handled.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
            pass
    progress = Progress(sys.stderr, quiet=quiet)
    ticker = asyncio.ensure_future(progress.run(checker.snapshot))
    try:
        return await checker.run()
    except asyncio.CancelledError:
        if stopped_by and stopped_by[0] == signal.SIGTERM:
            raise _Terminated from None
        if stopped_by:
            raise KeyboardInterrupt from None
        raise
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        ticker.cancel()
        await asyncio.gather(ticker, return_exceptions=True)


def cmd_check(args: argparse.Namespace) -> int:
    """Run ``crawler check``; the exit code."""
    from crawler.check.api import split_options  # noqa: PLC0415  (start-up time)
    from crawler.check.checker import Checker  # noqa: PLC0415

    try:
        config = config_from_args(args)
        problem = crawl_config_problem(config, "check")
        if problem:
            _err(problem)
            return EXIT_USAGE
        if args.cache_max_age < 0 or args.recheck_delay < 0:
            raise ConfigError("must be >= 0", key="--cache-max-age/--recheck-delay")
        if args.host_timeouts < 0:
            raise ConfigError(f"must be >= 0; got {args.host_timeouts}", key="--host-timeouts")
        if args.cache is not None and not os.path.isdir(os.path.dirname(args.cache) or "."):
            raise ConfigError("its directory does not exist", key=f"--cache {args.cache}")
        config, check_options = split_options(
            (),
            config,
            {
                "external": args.check_external,
                "allow_link_local": args.allow_link_local,
                "ignore_fragments": args.ignore_fragments,
                "cache": args.cache,
                "cache_max_age": args.cache_max_age,
                "recheck_delay": args.recheck_delay,
                "host_timeouts": args.host_timeouts,
                "browser_retry": args.browser_retry,
            },
        )
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    fmt = args.check_format
    if fmt not in ("text", "json"):
        try:
            importlib.import_module(f"crawler.check.report_{fmt}")
        except ImportError as exc:
            _err(f"--format {fmt} is not available: {exc}")
            return EXIT_USAGE
    checker = Checker(config, check_options, given=options.given_keys(args))
    report, failed = run_to_report(
        checker, config, args.check_output, lambda r, out: write(r, fmt, out), _err
    )
    if failed is not None:
        return failed
    if not config.quiet:
        s = report.stats
        stopped = " (stopped at --max-time)" if s.time_limit else ""
        unchecked = f", {s.unchecked:,} not checked" if s.unchecked else ""
        blocked = f"{s.blocked:,} blocked by bot walls, " if s.blocked else ""
        sys.stderr.write(
            f"crawler check: {s.broken:,} broken, {blocked}{s.warnings:,} warnings, "
            f"{s.urls:,} URLs checked{unchecked} in {s.duration:.1f} s{stopped}\n"
        )
    if checker.cache_error is not None:
        _err(checker.cache_error)
    return exit_code(report, args.fail_on)


def exit_code(report: Any, fail_on: str) -> int:
    """1 if the report has what ``--fail-on`` fails on (each level includes the ones before
    it: broken, blocked, warnings), else 0.

    Blocked links do not fail by default: a bot wall says nothing of whether the link works
    (a browser likely gets it), and a CI gate that turns red on a site's bot protection is
    one its users learn to ignore. ``--fail-on blocked`` is there for who wants to know."""
    level = FAIL_ON.index(fail_on)
    if report.broken or (level >= 1 and report.blocked) or (level >= 2 and report.warnings):
        return EXIT_BROKEN
    return EXIT_OK
