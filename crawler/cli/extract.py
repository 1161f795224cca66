"""``crawler extract FILE --base URL``: the links of one HTML document (a file, or stdin),
resolved against its URL, streamed through the extractor a chunk at a time and written by the
crawl's sinks (urls: each URL once; jsonl: one record a link; csv: one row a link).

Exit codes: 0 done; 1 the file could not be read to its end or the output written; 2 usage
error (a bad ``--base``, an input or output file that cannot be opened). Importing this module
imports none of the extractor's or the output's modules; ``cmd_extract`` imports them when it
runs.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import IO, Any

from crawler.cli.options import COMMAND_HELP, EXIT_ERRORS, EXIT_OK, EXIT_USAGE, Formatter, err


def add_parser(sub: Any) -> None:
    """Add the ``extract`` command to the ``crawler`` parser's subparsers."""
    from crawler.output.sinks import FORMATS  # noqa: PLC0415  (start-up time)

    ex = sub.add_parser(
        "extract",
        help=COMMAND_HELP["extract"],
        description="Extract the links of one HTML document (a file, or - for stdin), "
        "resolved against --base.",
        formatter_class=Formatter,
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


def cmd_extract(args: argparse.Namespace) -> int:
    """Run ``crawler extract``; the exit code."""
    from crawler.config import seed_problem  # noqa: PLC0415  (start-up time)
    from crawler.output.sinks import open_sink  # noqa: PLC0415

    problem = seed_problem(args.base)
    if problem:
        err(f"--base: {problem}")
        return EXIT_USAGE
    extract = importlib.import_module("crawler.extract")
    results = importlib.import_module("crawler.core.results")
    try:
        infile: IO[bytes] = sys.stdin.buffer if args.file == "-" else open(args.file, "rb")
    except OSError as exc:
        err(f"cannot read {args.file!r}: {exc.strerror or exc}")
        return EXIT_USAGE
    try:
        # jsonl here is one record a link (url, raw, tag, attr, nofollow), not a page
        sink = open_sink("jsonl-links" if args.format == "jsonl" else args.format, args.output)
    except OSError as exc:
        infile.close()
        err(f"cannot open output file {args.output!r}: {exc.strerror or exc}")
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
        err(f"cannot read {args.file!r}: {exc.strerror or exc}")
        return EXIT_ERRORS
    finally:
        sink.close()
    if sink.error is not None:
        err(f"cannot write output: {sink.error.strerror or sink.error}")
        return EXIT_ERRORS
    return EXIT_OK
