"""``crawler audit URL ...``: the site audit's command line (wired in by crawler/cli/main.py).

The crawl's options are the ``crawl`` command's own (``options.add_crawl_options``), as for
``check``; the audit adds ``--sitemap URL``, ``--max-click-depth N`` and its report's
``--format text|json|markdown|sarif|html`` and ``--output FILE``.

Exit codes: 0 no finding, 1 findings reported, 2 usage or config error, 130 SIGINT, 143
SIGTERM (both: the audit stopped, no report).
"""

from __future__ import annotations

import argparse
import os
import sys
from types import SimpleNamespace
from typing import Any

from crawler.cli import options
from crawler.cli.check import (
    _NOT_FOR_CHECK,
    add_seed_arguments,
    crawl_config_problem,
    error_writer,
    run_to_report,
)
from crawler.config import ConfigError

__all__ = ["EXIT_FINDINGS", "add_parser", "cmd_audit"]

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
_FORMATS = ("text", "json", "markdown", "sarif", "html")  # (crawler.audit.report.FORMATS)


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
    add_seed_arguments(p)
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
        "--graph",
        metavar="FILE",
        help="write the link graph to FILE: .graphml, .gexf (Gephi) or .csv (then"
        " FILE.nodes.csv and FILE.edges.csv, without the .csv)",
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


_err = error_writer("audit")


def cmd_audit(args: argparse.Namespace) -> int:
    """Run ``crawler audit``; the exit code."""
    from crawler.audit.auditor import Auditor, steady_malloc  # noqa: PLC0415  (start-up time)
    from crawler.audit.graph import GRAPH_FORMATS, graph_format  # noqa: PLC0415
    from crawler.audit.report import write  # noqa: PLC0415
    from crawler.check.checker import CheckOptions  # noqa: PLC0415
    from crawler.cli.crawl import _tune_gc  # noqa: PLC0415

    try:
        config = options.config_from_args(args)
        problem = crawl_config_problem(config, "audit")
        if problem:
            _err(problem)
            return EXIT_USAGE
        if args.max_click_depth < 0:
            raise ConfigError(f"must be >= 0; got {args.max_click_depth}", key="--max-click-depth")
        if args.graph is not None and graph_format(args.graph) is None:
            raise ConfigError(f"the name must end in {', '.join(GRAPH_FORMATS)}", key="--graph")
        if args.graph is not None and not os.path.isdir(os.path.dirname(args.graph) or "."):
            raise ConfigError("its directory does not exist", key=f"--graph {args.graph}")
        for url in args.audit_sitemaps:
            if not url.startswith(("http://", "https://")):
                raise ConfigError(f"not an http(s) URL: {url!r}", key="--sitemap")
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    auditor = Auditor(
        config,
        CheckOptions(external=False, ignore_fragments=True),
        sitemaps=tuple(args.audit_sitemaps),
        max_click_depth=args.max_click_depth,
        given=options.given_keys(args),
        graph=args.graph,
    )
    # the command line owns its process: the crawl's collector thresholds, and glibc's mmap
    # threshold fixed (the audit's growing columns and tables: benchmarks/AUDIT.md)
    _tune_gc()
    steady_malloc()
    runner = SimpleNamespace(snapshot=auditor.snapshot, run=auditor.audit)
    fmt = args.audit_format
    report, failed = run_to_report(
        runner, config, args.audit_output, lambda r, out: write(r, fmt, out), _err
    )
    if failed is not None:
        return failed
    if not config.quiet:
        cut = "" if report.complete else f" (the crawl was cut by {report.limit})"
        sys.stderr.write(
            f"crawler audit: {len(report.findings):,} findings, {report.stats.pages:,} pages"
            f" in {report.stats.duration:.1f} s{cut}\n"
        )
    return EXIT_FINDINGS if report.findings else EXIT_OK
