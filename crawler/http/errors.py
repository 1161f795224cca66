"""The errors of the fetcher that do not come from the wire: a bad fetch option, the archive.

A leaf module (no imports of ours) so that cookies, auth and proxy can raise them, and the CLI
and the fetcher can catch them, without importing aiohttp's side of the fetcher first.
"""

from __future__ import annotations

__all__ = ["ArchiveFailed", "OptionError"]


class OptionError(ValueError):
    """A fetch option cannot be used; the message names the option and the reason.

    ``option`` is the command-line spelling (``--cookies``, ``--proxy``, ``--auth-env``...);
    the CLI maps this error to exit status 2. The message never holds a secret: credentials
    are named ("the password of --auth"), never quoted.
    """

    def __init__(self, option: str, reason: str) -> None:
        super().__init__(f"{option}: {reason}")
        self.option = option
        self.reason = reason


class ArchiveFailed(Exception):
    """The archive raised: error kind ``archive`` (a bug of the writer; not retried)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"the archive raised {type(exc).__name__}: {exc}")
