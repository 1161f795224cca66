"""``crawler warc repair FILE`` and ``crawler warc check FILE``: a WARC file a killed crawl
left, made whole without its state.

``crawler crawl --warc FILE`` writes ``FILE.open`` and renames it to ``FILE`` when it closes
(crawler/output/warc.py). A SIGKILL leaves ``FILE.open``: every record flushed before the
kill, then perhaps one gzip member cut in the middle. ``repair`` reads the members from the
start (crawler/output/warc_scan.py), keeps every whole record, cuts a torn tail, says what it
cut, and renames ``FILE.open`` to ``FILE`` (not with ``--keep-name``; never over an existing
``FILE``). Damage that is not a torn tail (a bad member with bytes after it) is reported and
left: a whole record may follow it. ``check`` reports the same and changes nothing.

Exit codes: 0 whole (check), or whole or repaired (repair); 1 a torn tail (check) or damage
that cannot be cut safely (both); 2 usage error: no such file, not a gzip WARC file, a crawl
still writing it, or the final name taken.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import IO, Any

from crawler.cli.options import COMMAND_HELP, EXIT_ERRORS, EXIT_OK, EXIT_USAGE, Formatter, err
from crawler.output.warc_scan import OPEN_SUFFIX, NotWarcError, Scan, repair, scan

__all__ = ["add_parser", "cmd_warc"]

_EXITS = (
    "exit codes: 0 whole (or repaired), 1 damaged (check: also a torn tail), 2 usage error"
    " (no such file, not a gzip WARC file, a crawl still writing it)"
)


def add_parser(sub: Any) -> None:
    """Add the ``warc`` command (``repair``, ``check``) to the ``crawler`` parser."""
    parser = sub.add_parser(
        "warc",
        help=COMMAND_HELP["warc"],
        description="Check or repair a WARC file written by `crawler crawl --warc FILE`. A crawl"
        " writes FILE.open and renames it to FILE at its end; a killed crawl leaves FILE.open,"
        " whose last record may be cut.",
        formatter_class=Formatter,
        epilog=_EXITS,
    )
    actions = parser.add_subparsers(dest="warc_action", metavar="ACTION")
    rep = actions.add_parser(
        "repair",
        help="cut a torn last record; rename FILE.open to FILE",
        description="Keep every whole record of FILE, cut what a kill left half-written after"
        " the last one, and rename FILE.open to FILE. Given FILE where only FILE.open exists,"
        " FILE.open is repaired. Damage that is not at the end is reported, never cut.",
        formatter_class=Formatter,
        epilog=_EXITS,
    )
    rep.add_argument("file", metavar="FILE", help="the .warc.gz (or .warc.gz.open) file")
    rep.add_argument(
        "--keep-name",
        action="store_true",
        help="repair FILE.open in place, do not rename it to FILE",
    )
    chk = actions.add_parser(
        "check",
        help="say whether FILE is whole, changing nothing",
        description="Read every gzip member of FILE: count its whole records (gzip CRC, the"
        " record's length, its sha1 WARC-Block-Digest) and say what follows the last one.",
        formatter_class=Formatter,
        epilog=_EXITS,
    )
    chk.add_argument("file", metavar="FILE", help="the .warc.gz (or .warc.gz.open) file")


def _pick(path: str) -> str | None:
    """The file to read: ``path``, or ``path.open`` when only that exists."""
    if os.path.exists(path):
        return path
    if os.path.exists(path + OPEN_SUFFIX):
        return path + OPEN_SUFFIX
    return None


def _summary(path: str, result: Scan) -> str:
    kinds = ", ".join(f"{n:,} {kind}" for kind, n in sorted(result.types.items()))
    return f"{path}: {result.records:,} whole records" + (f" ({kinds})" if kinds else "")


def _lock(fh: IO[bytes]) -> bool:
    """The writer's lock (crawler/output/warc.py): False if a crawl holds it."""
    try:
        import fcntl  # noqa: PLC0415  (POSIX only)
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return True
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def cmd_warc(args: argparse.Namespace) -> int:
    """Run ``crawler warc ACTION FILE``; the exit code."""
    action = getattr(args, "warc_action", None)
    if action not in ("repair", "check"):
        err("an action is required: crawler warc repair FILE, or crawler warc check FILE")
        return EXIT_USAGE
    path = _pick(args.file)
    if path is None:
        err(f"{args.file}: no such file (nor {args.file}{OPEN_SUFFIX})")
        return EXIT_USAGE
    if os.path.isdir(path):
        err(f"{path} is a directory; give a .warc.gz file")
        return EXIT_USAGE
    if path != args.file:
        print(f"{args.file} does not exist: reading {path}, a crawl's unfinished file")
    try:
        if action == "check":
            with open(path, "rb") as fh:
                result = scan(fh, path)
            return _report_check(path, result)
        return _repair(path, keep_name=args.keep_name)
    except NotWarcError as exc:
        err(f"{exc}; nothing was changed")
        return EXIT_USAGE
    except OSError as exc:
        err(f"{path}: {exc.strerror or exc}")
        return EXIT_USAGE


def _report_check(path: str, result: Scan) -> int:
    print(_summary(path, result))
    if result.whole:
        print(f"{path}: whole ({result.size:,} bytes)")
        return EXIT_OK
    print(
        f"{path}: {result.problem} at offset {result.end:,}"
        f" ({result.size - result.end:,} bytes to the end): "
        + (
            f"a torn tail, which `crawler warc repair {path}` cuts"
            if result.tail == "torn"
            else "damage, not a torn tail"
        )
    )
    return EXIT_ERRORS


def _repair(path: str, *, keep_name: bool) -> int:
    final = None
    if path.endswith(OPEN_SUFFIX) and not keep_name:
        final = path[: -len(OPEN_SUFFIX)]
        if os.path.exists(final):
            err(
                f"{final} exists (an earlier crawl's?); not replaced. Move it away, or repair"
                f" in place with --keep-name; nothing was changed"
            )
            return EXIT_USAGE
    with open(path, "r+b") as fh:
        if not _lock(fh):
            err(f"{path}: a crawl is writing this file; repair it after the crawl ends")
            return EXIT_USAGE
        result = repair(path, fh=fh)
        print(_summary(path, result))
        if result.tail == "damaged":
            print(
                f"{path}: {result.problem} at offset {result.end:,}"
                f" ({result.size - result.end:,} bytes to the end) is damage, not a torn tail:"
                " not cut (a whole record may follow it); nothing was changed",
                file=sys.stdout,
            )
            return EXIT_ERRORS
        if result.tail == "torn":
            print(
                f"{path}: cut {result.size - result.end:,} bytes after the last whole record"
                f" (offset {result.end:,}): {result.problem}"
            )
        else:
            print(f"{path}: whole, nothing to cut")
        if final is not None:
            os.replace(path, final)  # under the lock, as the crawl's own close does
            print(f"{path}: renamed to {final}")
    return EXIT_OK
