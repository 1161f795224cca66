"""What one fetch gives back: the :class:`Response`, the body's consumer, and the readings of
response headers that both transports share.

Below every other module of the package that speaks of responses (the transports, the decoder,
the archive tap, the fetcher), so that none of them imports another for its types. Imports
nothing of ours. The archive tap's two protocols are here too: the WARC writer the engine
hands the fetcher implements them (``crawler.output.warc``), and the package never imports it.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "HTML_TYPES",
    "MEDIA_TYPES",
    "MEDIA_TYPES_MAX",
    "Consumer",
    "Observer",
    "Response",
    "WarcArchive",
    "WarcRecord",
    "location_header",
    "parse_retry_after",
]

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
# Content-Type value -> (media type, charset) as aiohttp parses it, at most this many values
# (one cache for both transports: a site sends few distinct values, each parsed once).
MEDIA_TYPES: dict[str, tuple[str, str | None]] = {}
MEDIA_TYPES_MAX = 256

#: A body chunk consumer: returns None, or an awaitable that is awaited before the next read.
Consumer = Callable[[bytes], "Awaitable[object] | None"]
#: Told the final Response of every fetch (after its retries): the metrics' hook.
Observer = Callable[["Response"], None]


@dataclass(slots=True)
class Response:
    """What one fetch produced (after retries). ``error`` is None on success."""

    url: str
    status: int | None = None
    content_type: str | None = None  # media type, lower-case, no parameters
    charset: str | None = None
    location: str | None = None
    retry_after: str | None = None
    bytes: int = 0
    truncated: bool = False
    error: str | None = None
    error_detail: str | None = None
    retries: int = 0
    elapsed_ms: float = 0.0
    #: the ``Link`` header's values joined by ", " (canonical and hreflang for an audit)
    link: str | None = None
    #: the ``X-Robots-Tag`` header's values joined by ", "
    x_robots_tag: str | None = None

    @property
    def is_html(self) -> bool:
        return self.content_type in HTML_TYPES

    def mark_too_large(self, cap: int) -> None:
        """The body cap stopped the read."""
        self.truncated = True
        self.error = "too_large"
        self.error_detail = f"body over {cap} bytes (decompressed); read stopped"


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` value; None when it is unusable (the caller backs off).

    RFC 9110: delay-seconds (ASCII digits only: ``str.isdigit`` also accepts ``²`` and other
    scripts' digits) or an HTTP-date with its zone. Anything else, however malformed, is
    None, never an exception: a bad header must not turn a retryable 503 into a final error.
    """
    if not value:
        return None
    value = value.strip(" \t")
    if value.isascii() and value.isdigit():
        return float(value)  # any length: float() gives inf, which max_retry_after caps
    from email.utils import parsedate_to_datetime  # noqa: PLC0415  (an HTTP-date: rare)

    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            return None
        return max(0.0, when.timestamp() - (time.time() if now is None else now))
    except (TypeError, ValueError, IndexError, OverflowError, OSError):
        return None


def location_header(value: str | None) -> str | None:
    """A Location header as a URL string, whatever its bytes.

    aiohttp decodes header bytes as UTF-8 with ``surrogateescape``: a byte that is not UTF-8
    (``/caf\xe9`` from a latin-1 server) arrives as a lone surrogate, which no URL parser
    takes, so the redirect would be lost. Such bytes become percent-escapes of themselves, so
    the server gets back the bytes it sent; valid UTF-8 around them stays text (the URL parser
    percent-encodes it as UTF-8, which is again the bytes sent).
    """
    if value is None or value.isascii():
        return value
    return "".join(f"%{ord(c) - 0xDC00:02X}" if "\udc80" <= c <= "\udcff" else c for c in value)


class WarcRecord(Protocol):
    """One exchange being archived: body bytes in, then ``end()`` once."""

    def write(self, chunk: bytes) -> None:
        """A piece of the body as received (Content-Encoding not decoded)."""

    def end(self, truncated: str | None) -> None:
        """The body is over: write the response and request records. ``truncated`` is None
        (whole body) or a WARC-Truncated reason: "length", "time", "disconnect",
        "unspecified"."""


class WarcArchive(Protocol):
    """What the fetcher archives every exchange to (``Fetcher(config, archive=...)``): the WARC
    writer (``crawler.output.warc.WarcWriter``) implements it, so the tap never imports it."""

    def begin(
        self,
        *,
        url: str,
        method: str,
        request_headers: list[tuple[str, str]],
        http_version: str,
        status: int,
        reason: str,
        response_version: str,
        response_headers: list[tuple[bytes, bytes]],
        peer_ip: str | None,
    ) -> WarcRecord:
        """An exchange whose response headers are in.

        Args:
            url: the request's URL (WARC-Target-URI).
            method: "GET".
            request_headers: the headers as sent, in order.
            http_version: of the request, "HTTP/1.1".
            status, reason: the response's status line.
            response_version: "HTTP/1.1" / "HTTP/1.0", as the server answered.
            response_headers: ``ClientResponse.raw_headers``: the lines as received.
            peer_ip: the server's address, None if unknown (through a proxy).
        """
