"""Command line: ``crawler crawl URL ...`` (crawler/cli/crawl.py), ``crawler status --state
DIR`` (status.py), ``crawler check URL ...`` (check.py), ``crawler extract FILE --base URL``
(extract.py), ``crawler config`` (example.py) and ``crawler warc repair|check FILE``
(warc.py); the crawl's options, shared by crawl and check, are in options.py.

Here: ``main``, the entry point, which assembles the ``crawler`` parser and hands the parsed
arguments to the command, and ``--version``. Thin by design: argparse -> CrawlConfig (file,
then flags on top) -> engine, plus the things only a command line has: exit codes, signals, a
closed stdout pipe, progress on stderr.

Exit codes: 0 done; 1 the crawl finished with errors only (no page fetched successfully) or
the output could not be written; 2 usage or config error; 130 SIGINT; 143 SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from collections.abc import Collection, Sequence
from typing import NoReturn

from crawler._version import __version__
from crawler.cli.options import (
    COMMAND_HELP,
    EXIT_OK,
    EXIT_SIGINT,
    EXIT_USAGE,
    PROG,
    Formatter,
    err,
)

# Start-up time: ``crawler --version``, ``--help`` and an argument error import none of the
# crawl's modules (config, output, asyncio, aiohttp ...) and none of the commands' modules; a
# command imports its module, and the module what it uses, when it runs (tests/test_startup.py
# holds this, benchmarks/startup.py times it).


def build_parser(
    *, check: bool = False, commands: Collection[str] | None = None
) -> argparse.ArgumentParser:
    """The ``crawler`` parser. ``check``: with the real ``check`` command (its module is
    imported only then; otherwise a stub lists it in ``crawler --help``).

    ``commands``: the commands (``crawl``, ``extract``, ``status``, ``config``) that get their
    options; the others are stubs that only list them in ``crawler --help`` (default: all).
    ``main`` builds only the command its arguments name, so that ``--version``, ``--help`` and
    a usage error import neither crawler.config nor crawler.output.sinks.
    """
    every = {"crawl", "extract", "status", "config", "warc"}  # (audit: as check, only named)
    full = every if commands is None else set(commands) - {"check"}
    if check:
        full.add("check")
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="An asynchronous, streaming link-extraction web crawler.",
        formatter_class=Formatter,
        epilog="exit codes: 0 done, 1 finished with errors only, 2 usage or config error,"
        " 130 SIGINT, 143 SIGTERM",
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, text in COMMAND_HELP.items():  # in the order of crawler --help
        if name not in full:
            sub.add_parser(name, help=text, add_help=False)
        elif name == "crawl":
            from crawler.cli import crawl  # noqa: PLC0415  (start-up time, as each below)

            crawl.add_parser(sub)
        elif name == "extract":
            from crawler.cli import extract  # noqa: PLC0415

            extract.add_parser(sub)
        elif name == "status":
            from crawler.cli import status  # noqa: PLC0415

            status.add_parser(sub)
        elif name == "check":
            from crawler.cli import check as check_cli  # noqa: PLC0415

            check_cli.add_parser(sub)
        elif name == "audit":
            from crawler.cli import audit  # noqa: PLC0415

            audit.add_parser(sub)
        elif name == "config":
            from crawler.cli import example  # noqa: PLC0415

            example.add_parser(sub)
        elif name == "warc":
            from crawler.cli import warc  # noqa: PLC0415

            warc.add_parser(sub)
    return parser


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


def _command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (the first argument that is not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _end_now(code: int) -> NoReturn:
    """End the process with ``code``, its output flushed, without tearing its heap down.

    An audit ends holding its whole link graph (the rustdoc site: ~150 MB, hundreds of
    thousands of objects, some in cycles): the interpreter's finalisation collected and
    freed them one by one, ~0.1 s of the command's wall time (benchmarks/AUDIT.md). Its
    files are closed by then (the report, the graph, the state); what is left is memory,
    which the kernel takes back at once. Only for a real command line (``main()`` with no
    ``argv``): a caller in-process gets the code back.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing more to write
            pass
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``crawler`` console script and ``python -m crawler``."""
    command_line = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    if command in ("crawl", "audit"):
        # the crawl's thresholds from the start: the imports (aiohttp ...) make ~80 young
        # collections by default, ~20 so (callgrind: 1.5% of the start-up's instructions)
        import gc  # noqa: PLC0415

        from crawler.cli.crawl import GC_THRESHOLDS  # noqa: PLC0415

        gc.set_threshold(*GC_THRESHOLDS)
    # only the command named gets its options (and imports): --version and --help stay light
    parser = build_parser(check=command == "check", commands=() if command is None else (command,))
    try:
        args = parser.parse_args(argv)
        if args.version:
            print(_version_text())
            return EXIT_OK
        if args.command == "crawl":
            from crawler.cli.crawl import cmd_crawl  # noqa: PLC0415  (imported by build_parser)

            return cmd_crawl(args)
        if args.command == "status":
            from crawler.cli.status import cmd_status  # noqa: PLC0415

            return cmd_status(args)
        if args.command == "check":
            from crawler.cli.check import cmd_check  # noqa: PLC0415

            return cmd_check(args)
        if args.command == "audit":
            from crawler.cli.audit import cmd_audit  # noqa: PLC0415

            code = cmd_audit(args)
            if command_line:
                _end_now(code)
            return code
        if args.command == "extract":
            from crawler.cli.extract import cmd_extract  # noqa: PLC0415

            return cmd_extract(args)
        if args.command == "config":
            from crawler.cli.example import cmd_config  # noqa: PLC0415

            return cmd_config(args)
        if args.command == "warc":
            from crawler.cli.warc import cmd_warc  # noqa: PLC0415

            return cmd_warc(args)
        parser.print_usage(sys.stderr)
        err("a command is required: crawl, check, status, extract, config or warc (see --help)")
        return EXIT_USAGE
    except KeyboardInterrupt:  # Ctrl-C before the event loop's handler was installed
        return EXIT_SIGINT
    except BrokenPipeError:  # e.g. `crawler --help | head -1`
        from crawler.output.sinks import silence_stream  # noqa: PLC0415

        silence_stream(sys.stdout)
        return EXIT_OK
