"""The fetcher's archive tap: every exchange to the WARC writer, body bytes as received.

With an archive the session reads bodies raw (``auto_decompress=False``). :func:`begin_record`
hands the writer the request as sent and the response's raw header lines; then either
:func:`archive_only` (a body nobody consumes: a 404's, an image's, a redirect's, a retried
503's) or :func:`read_decoded` (a consumed body: raw bytes to the record, decoded ones, by
:mod:`crawler.http.decode`, to the consumer, under the same decoded-size cap as aiohttp's
path). The record is always ended once, with the WARC-Truncated reason: None, ``length``
(the cap), ``time`` (a read timeout), ``disconnect`` (a dropped connection), ``unspecified``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from crawler.http import tls as fetch_tls  # noqa: F401  (first: aiohttp without its TLS contexts)

# isort: split
import aiohttp
from yarl import URL

from crawler.http.auth import REDACTED
from crawler.http.decode import decoder_for, deliver
from crawler.http.errors import ArchiveFailed

if TYPE_CHECKING:
    from crawler.http.response import Consumer, Response, WarcArchive, WarcRecord

__all__ = [
    "SECRET_HEADERS",
    "ArchiveFailed",
    "archive_only",
    "begin_record",
    "end_record",
    "read_decoded",
]

#: Request headers whose value never leaves the fetcher (the archive gets "[redacted]").
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization"})


def _version(v: Any) -> str:
    try:
        return f"HTTP/{v.major}.{v.minor}"
    except AttributeError:
        return "HTTP/1.1"


def _peer_ip(r: aiohttp.ClientResponse) -> str | None:
    """The server's address of a response's connection, None if it is gone or unknown."""
    transport = None
    conn = r.connection
    if conn is not None:
        transport = conn.transport
    if transport is None:  # a short body: the connection went back to the pool already
        proto = getattr(r, "_protocol", None)
        transport = getattr(proto, "transport", None)
    if transport is None:
        return None
    peer = transport.get_extra_info("peername")
    if isinstance(peer, (tuple, list)) and peer and isinstance(peer[0], str):
        return peer[0]
    return None


def _truncated_reason(exc: BaseException) -> str:
    """WARC-Truncated for a body read that ``exc`` ended."""
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError, aiohttp.ServerTimeoutError)):
        return "time"
    if isinstance(
        exc, (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError, ConnectionError)
    ) or isinstance(exc, aiohttp.ClientOSError):
        return "disconnect"
    return "unspecified"


def end_record(record: WarcRecord, truncated: str | None) -> Awaitable[object] | None:
    """End the record; its awaitable if it returned one (the protocol allows either)."""
    end: Callable[[str | None], Any] = record.end
    done = end(truncated)
    return done if inspect.isawaitable(done) else None


def begin_record(
    archive: WarcArchive, r: aiohttp.ClientResponse, target: URL, *, direct: bool
) -> WarcRecord:
    """``archive.begin(...)`` for a response whose headers are in: the request as sent
    (credentials' values redacted), the response's status line and raw header lines.

    ``direct``: no proxy (the peer address is the server's; through a proxy it is unknown).
    """
    try:
        return archive.begin(
            url=str(target),
            method="GET",
            request_headers=[
                (k, REDACTED if k.lower() in SECRET_HEADERS else v)
                for k, v in r.request_info.headers.items()
            ],
            http_version="HTTP/1.1",
            status=r.status,
            reason=r.reason or "",
            response_version=_version(r.version),
            response_headers=list(r.raw_headers),
            peer_ip=_peer_ip(r) if direct else None,
        )
    except Exception as exc:
        raise ArchiveFailed(exc) from exc


async def archive_only(r: aiohttp.ClientResponse, record: WarcRecord, cap: int) -> None:
    """Read a body nobody consumes into the archive (raw, up to ``cap``); end the record.

    The Response is left as it is: a wire fault here ends the record (WARC-Truncated) but is
    not the page's error, as the body was never the page's (a 404's, an image's, a redirect's).
    """
    truncated: str | None = None
    raw = 0
    try:
        async for chunk in r.content.iter_any():
            if cap and raw + len(chunk) > cap:
                record.write(chunk[: cap - raw])
                truncated = "length"
                break
            raw += len(chunk)
            record.write(chunk)
    except asyncio.CancelledError:
        end_record(record, "unspecified")
        raise
    except Exception as exc:
        truncated = _truncated_reason(exc)
    pending = end_record(record, truncated)
    if pending is not None:
        await pending


async def read_decoded(
    r: aiohttp.ClientResponse,
    res: Response,
    record: WarcRecord | None,
    consumer: Consumer,
    cap: int,
) -> None:
    """A consumed body read raw: raw bytes to ``record``, decoded ones to ``consumer``.

    The archive path; also, without an archive, an ``x-gzip`` body (aiohttp leaves it
    encoded). The cap is on the decoded bytes, as on aiohttp's path (and on the raw bytes
    too: bytes after the end of a deflate stream decode to nothing, and must not be read for
    ever).
    """
    decoder = decoder_for(r.headers.get("Content-Encoding"))
    tap = record.write if record is not None else None
    try:
        stopped = await deliver(r.content.iter_any(), decoder, res, consumer, cap, tap)
    except asyncio.CancelledError:
        if record is not None:
            end_record(record, "unspecified")
        raise
    except BaseException as exc:
        if record is not None:
            pending = end_record(record, _truncated_reason(exc))
            if pending is not None:
                await pending
        raise
    if record is not None:
        pending = end_record(record, "length" if stopped else None)
        if pending is not None:
            await pending
