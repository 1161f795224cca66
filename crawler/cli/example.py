"""``crawler config``: print the commented example config file (every key, its default).

``config.example.toml`` sits at the repository's root, which a ``pip install`` does not
install; its copy here (``crawler/cli/config.example.toml``, package data) is what a pip user
gets: ``crawler config > crawl.toml``. tests/test_config.py holds that the two are the same.
"""

from __future__ import annotations

import argparse
import sys
from importlib import resources
from typing import Any

from crawler.cli.options import COMMAND_HELP, EXIT_OK, Formatter

__all__ = ["add_parser", "cmd_config", "example"]


def example() -> str:
    """The example config's text, as shipped with the package."""
    return resources.files("crawler.cli").joinpath("config.example.toml").read_text("utf-8")


def add_parser(sub: Any) -> None:
    """Add the ``config`` command to the ``crawler`` parser's subparsers."""
    sub.add_parser(
        "config",
        help=COMMAND_HELP["config"],
        description="Print the example config file: every key of `crawler crawl --config FILE`"
        " (and `crawler check`), in its table, with its default and what it does. Save it"
        " (`crawler config > crawl.toml`), then edit it.",
        formatter_class=Formatter,
        epilog="exit codes: 0 printed",
    )


def cmd_config(args: argparse.Namespace) -> int:
    """Run ``crawler config``; the exit code."""
    sys.stdout.write(example())
    sys.stdout.flush()
    return EXIT_OK
