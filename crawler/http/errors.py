"""The fetcher's faults and their error kinds: every exception of the package that is ours,
and :func:`classify_error`, which names the kind of any exception a fetch raised.

A leaf module (no imports of ours) so that cookies, auth and proxy can raise its errors, both
transports (:mod:`crawler.http.plain`, :mod:`crawler.http.aio`) can fault with them, and the
CLI, the fetcher and the link checker can catch and classify them, without importing aiohttp's
side of the fetcher first (aiohttp's own faults are looked up only once it was imported).

The kinds (see the common contract): ``dns``, ``connect``, ``timeout``, ``disconnected``,
``protocol``, ``decode``, ``http_<status>``, ``too_large``, ``proxy`` (the proxy could not be
reached or refused the tunnel: never a silent direct connection), ``archive`` (the WARC
archive raised), ``tls`` (the TLS handshake failed: the detail starts with the reason a user
can act on, :func:`tls_detail`).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
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
    "tls_detail",
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


# OpenSSL's X509_V_ERR_* codes -> the reason a report gives (the rest: OpenSSL's own words).
_VERIFY_REASONS = {
    2: "unknown CA",  # unable to get issuer certificate
    9: "certificate is not yet valid",
    10: "certificate has expired",
    18: "self-signed certificate",
    19: "self-signed certificate in the chain",
    20: "unknown CA",  # unable to get local issuer certificate
    21: "unknown CA",  # unable to verify the first certificate
    23: "certificate revoked",
    62: "hostname mismatch",
    64: "hostname mismatch",  # IP address mismatch
}
# Handshake faults (OpenSSL's reason codes) whose cause is plain.
_HANDSHAKE_REASONS = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "client certificate required",
    "SSLV3_ALERT_BAD_CERTIFICATE": "client certificate refused",
    "TLSV1_ALERT_UNKNOWN_CA": "client certificate refused (unknown CA)",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "client certificate refused (expired)",
    "WRONG_VERSION_NUMBER": "handshake failure (the server does not speak TLS on this port)",
    "TLSV1_ALERT_PROTOCOL_VERSION": "handshake failure (no TLS version in common)",
    "UNSUPPORTED_PROTOCOL": "handshake failure (no TLS version in common)",
}


def tls_detail(exc: BaseException) -> str:
    """``"REASON (ExceptionName: OpenSSL's message)"`` of a TLS fault: REASON is one of
    certificate has expired, certificate is not yet valid, self-signed certificate, unknown CA,
    hostname mismatch, client certificate required ..., else handshake failure."""
    try:
        text = f"{type(exc).__name__}: {exc}"
    except Exception:
        text = type(exc).__name__
    code = getattr(exc, "verify_code", None)
    if isinstance(code, int) and code:
        reason = _VERIFY_REASONS.get(code) or str(getattr(exc, "verify_message", "")) or text
    elif isinstance(exc, ssl.CertificateError) and "match" in str(exc).lower():
        reason = "hostname mismatch"
    else:
        name = getattr(exc, "reason", None)
        reason = _HANDSHAKE_REASONS.get(str(name), "handshake failure")
        if isinstance(exc, ssl.SSLEOFError) or isinstance(exc, ssl.SSLZeroReturnError):
            reason = "handshake failure (the server closed the connection)"
    return f"{reason} ({text})"


def _tls_cause(exc: BaseException) -> BaseException | None:
    """The ssl error inside ``exc`` (itself, or aiohttp's wrapping of it), else None."""
    found = None
    for _ in range(4):
        if isinstance(exc, (ssl.SSLError, ssl.CertificateError)):
            found = exc  # (aiohttp's own TLS faults are CertificateErrors: look inside them)
        inner = getattr(exc, "certificate_error", None) or getattr(exc, "os_error", None)
        if not isinstance(inner, BaseException):
            inner = exc.__cause__
        if inner is None:
            break
        exc = inner
    return found


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
    tls = _tls_cause(exc)
    if tls is not None:
        return "tls", tls_detail(tls)
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
