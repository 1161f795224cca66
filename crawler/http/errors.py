"""The fetcher's faults and their error kinds: every exception of the package that is ours,
and :func:`classify_error`, which names the kind of any exception a fetch raised.

A leaf module (no imports of ours) so that cookies, auth and proxy can raise its errors, both
transports (:mod:`crawler.http.plain`, :mod:`crawler.http.aio`) can fault with them, and the
CLI, the fetcher and the link checker can catch and classify them, without importing aiohttp's
side of the fetcher first (aiohttp's own faults are looked up only once it was imported).

The kinds (see the common contract): ``dns``, ``connect``, ``timeout``, ``disconnected``,
``protocol``, ``decode``, ``http_<status>``, ``too_large``, ``proxy`` (the proxy could not be
reached or refused the tunnel: never a silent direct connection), ``archive`` (the WARC
archive raised).
"""

from __future__ import annotations

import asyncio
import socket
import sys

__all__ = [
    "NOT_HTTP",
    "RETRY_KINDS",
    "ArchiveFailed",
    "DecodeError",
    "HttpError",
    "OptionError",
    "RetryStatus",
    "classify_error",
]

#: The detail of an answer that is not HTTP (an SSH or SMTP banner on the port ...), kind
#: ``protocol``: the peer's bytes are never repeated (a report must not become a port scanner
#: that prints the banners of internal services).
NOT_HTTP = "NotHttpError: the answer is not HTTP (what the server sent is not shown)"

# Kinds worth another try: the next attempt may well succeed.
RETRY_KINDS = frozenset({"connect", "timeout", "disconnected", "proxy"})


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


class DecodeError(Exception):
    """The body is not valid in its Content-Encoding (the fetcher's error kind ``decode``)."""


class HttpError(Exception):
    """A fault of one exchange on the plain path; ``kind`` is the fetcher's error kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class RetryStatus(Exception):
    """A 429 or 5xx that may be tried again: a transport's word to the fetcher's retry loop,
    with the wait the server asked for (None: the fetcher backs off)."""

    def __init__(self, wait: float | None) -> None:
        self.wait = wait


def classify_error(exc: BaseException) -> tuple[str, str]:
    """(kind, human message) for an exception raised while fetching."""
    try:
        detail = f"{type(exc).__name__}: {exc}".strip()
    except Exception:  # a half-built exception's __str__ may itself fail
        detail = type(exc).__name__
    if isinstance(exc, DecodeError):
        return "decode", detail
    if isinstance(exc, ArchiveFailed):
        return "archive", str(exc)
    if isinstance(exc, HttpError):
        return exc.kind, str(exc)
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return "timeout", detail or "timeout"
    aiohttp = sys.modules.get("aiohttp")  # its faults exist only once it was imported
    if aiohttp is None:
        if isinstance(exc, (ConnectionError, OSError)):
            return "disconnected", detail
        return "protocol", detail
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "dns", detail
    if isinstance(exc, aiohttp.ClientConnectorError):
        if isinstance(exc.os_error, socket.gaierror):
            return "dns", detail
        return "connect", detail
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        # its message may be the half-parsed response (status line, raw headers): not shown
        return "disconnected", "ServerDisconnectedError: Server disconnected"
    if isinstance(exc, aiohttp.ClientPayloadError):
        text = str(exc).lower()
        cause = exc.__cause__
        if (
            "decode" in text
            or "decompress" in text
            or (cause is not None and "decompress" in str(cause).lower())
        ):
            return "decode", detail
        # A reset (RST) mid-body is a disconnect; a clean close before Content-Length or the
        # last chunk is a framing fault ("protocol").
        if "reset" in text or isinstance(
            cause, (ConnectionResetError, aiohttp.ClientConnectionResetError)
        ):
            return "disconnected", detail
        return "protocol", detail
    if isinstance(exc, aiohttp.ClientResponseError):
        return "protocol", _parse_fault(exc, aiohttp, detail)
    if isinstance(exc, (aiohttp.ClientOSError, ConnectionError, OSError)):
        return "disconnected", detail
    if isinstance(exc, aiohttp.ClientConnectionError):
        return "connect", detail
    if isinstance(exc, (aiohttp.InvalidURL, ValueError, UnicodeError, aiohttp.ClientError)):
        return "protocol", detail
    return "protocol", detail


def _parse_fault(exc: BaseException, aiohttp: object, detail: str) -> str:
    """The detail of aiohttp's parser failing on the answer, without the bytes it quotes.

    aiohttp wraps the parser's fault (``BadStatusLine``, ``InvalidHeader`` ...: their messages
    quote the bytes) in an HttpProcessingError, itself the cause of the ClientResponseError.
    """
    faults = getattr(aiohttp, "http_exceptions", None)
    processing = getattr(faults, "HttpProcessingError", None)
    cause = exc.__cause__
    if processing is None or not isinstance(cause, processing):
        return detail  # not the parser's: no peer bytes in it
    inner = cause.__cause__
    if isinstance(inner, processing):
        cause = inner
    if isinstance(cause, getattr(faults, "BadStatusLine", ())):
        return NOT_HTTP
    return f"{type(cause).__name__}: malformed HTTP response (what the server sent is not shown)"
