"""``python -m crawler.check URL ...``: the same as ``crawler check URL ...``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from crawler.cli.check import EXIT_USAGE, add_parser, cmd_check


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="crawler")
    sub = parser.add_subparsers(dest="command")
    add_parser(sub)
    try:
        args = parser.parse_args(["check", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    return cmd_check(args)


if __name__ == "__main__":
    sys.exit(main())
