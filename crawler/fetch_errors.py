"""The error of a bad fetch option (header, cookies file, credentials, proxy).

A leaf module (no imports of ours) so that cookies, auth and proxy can raise it and the CLI can
catch it without importing aiohttp's side of the fetcher first.
"""

from __future__ import annotations

__all__ = ["OptionError"]


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
