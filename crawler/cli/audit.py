"""``crawler audit URL ...``: the site audit's command line (wired in by crawler/cli/main.py).

The crawl's options are the ``crawl`` command's own (``options.add_crawl_options``), as for
``check``; the audit adds ``--sitemap URL``, ``--max-click-depth N`` and its report's
``--format text|json|markdown|sarif`` and ``--output FILE``.

Exit codes: 0 no finding, 1 findings reported, 2 usage or config error, 130 SIGINT, 143
SIGTERM (both: the audit stopped, no report).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from types import SimpleNamespace
from typing import Any, TextIO

from crawler.cli import options
from crawler.cli.check import _NOT_FOR_CHECK, _run, _Terminated
from crawler.config import ConfigError

__all__ = ["EXIT_FINDINGS", "add_parser", "cmd_audit"]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
_FORMATS = ("text", "json", "markdown", "sarif")  # (crawler.audit.report.FORMATS)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``audit`` command to the ``crawler`` parser's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "audit",
        help=options.COMMAND_HELP["audit"],
        description="Crawl the site from the URLs and audit its link graph: sitemap URLs no"
        " page links (orphans), links to redirects, canonical and hreflang annotations that"
        " contradict the site, click depth and inlinks, linked pages that are noindex or"
        " disallowed. Each finding with the pages and lines that cause it.",
        formatter_class=options.Formatter,
        epilog="exit codes: 0 no finding, 1 findings reported, 2 usage or config error,"
        " 130 SIGINT, 143 SIGTERM",
    )
    p.add_argument("seeds", nargs="*", metavar="URL", help="where to start (http or https)")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="TOML config file (the crawl's keys; `crawler config` prints an example)",
    )
    p.add_argument(
        "--version", action="store_true", default=argparse.SUPPRESS, help="print the version"
    )
    group = p.add_argument_group("audit")
    group.add_argument(
        "--sitemap",
        dest="audit_sitemaps",
        metavar="URL",
        action="append",
        default=[],
        help="read this sitemap (or sitemap index) too, besides the ones robots.txt names"
        " (repeatable)",
    )
    group.add_argument(
        "--max-click-depth",
        metavar="N",
        type=int,
        default=4,
        help="report pages more than N clicks from the seeds (default: 4)",
    )
    group.add_argument(
        "--format",
        "-f",
        dest="audit_format",
        choices=_FORMATS,
        default="text",
        help="report format (default: text)",
    )
    group.add_argument(
        "--output",
        "-o",
        dest="audit_output",
        metavar="FILE",
        help="write the report to FILE (default: stdout)",
    )
    options.add_crawl_options(p, exclude=_NOT_FOR_CHECK)
    for action in p._actions:
        if "--state" in action.option_strings:  # as for check: a directory only
            action.metavar = "DIR"
    return p


def _err(message: str) -> None:
    try:
        sys.stderr.write(f"crawler audit: error: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def cmd_audit(args: argparse.Namespace) -> int:
    """Run ``crawler audit``; the exit code."""
    from crawler.audit.auditor import Auditor  # noqa: PLC0415  (start-up time)
    from crawler.audit.report import write  # noqa: PLC0415
    from crawler.check.checker import CheckOptions  # noqa: PLC0415
    from crawler.state.base import StateError  # noqa: PLC0415

    try:
        config = options.config_from_args(args)
        if not config.seeds:
            _err("no URL: give one or more URLs, or `seeds` in the --config file")
            return EXIT_USAGE
        problem = options.check_fetch_options(config)
        if problem:
            _err(problem)
            return EXIT_USAGE
        if config.state and config.state.lower().startswith(("redis://", "rediss://", "unix://")):
            _err("--state: crawler audit keeps its state in a directory; redis:// is for crawl")
            return EXIT_USAGE
        if args.max_click_depth < 0:
            raise ConfigError(f"must be >= 0; got {args.max_click_depth}", key="--max-click-depth")
        for url in args.audit_sitemaps:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"not an http(s) URL: {url!r}", key="--sitemap")
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    out: TextIO = sys.stdout
    if args.audit_output not in (None, "-"):
        try:
            out = open(args.audit_output, "w", encoding="utf-8")  # noqa: SIM115
        except OSError as exc:
            _err(f"cannot open output file {args.audit_output!r}: {exc.strerror or exc}")
            return EXIT_USAGE
    options.extractor_hint(config.quiet)
    auditor = Auditor(
        config,
        CheckOptions(external=False, ignore_fragments=True),
        sitemaps=tuple(args.audit_sitemaps),
        max_click_depth=args.max_click_depth,
        given=options.given_keys(args),
    )
    runner = SimpleNamespace(snapshot=auditor.snapshot, run=auditor.audit)
    try:
        try:
            report = asyncio.run(_run(runner, config.quiet))
        except (KeyboardInterrupt, _Terminated) as exc:
            _err("interrupted")
            return options.EXIT_SIGTERM if isinstance(exc, _Terminated) else options.EXIT_SIGINT
        except (ConfigError, StateError) as exc:
            _err(str(exc))
            return EXIT_USAGE
        try:
            write(report, args.audit_format, out)
            out.flush()
        except OSError as exc:
            _err(f"cannot write the report: {exc.strerror or exc}")
            return EXIT_USAGE
    finally:
        if out is not sys.stdout:
            out.close()
    if not config.quiet:
        cut = "" if report.complete else f" (the crawl was cut by {report.limit})"
        sys.stderr.write(
            f"crawler audit: {len(report.findings):,} findings, {report.stats.pages:,} pages"
            f" in {report.stats.duration:.1f} s{cut}\n"
        )
    return EXIT_FINDINGS if report.findings else EXIT_OK
