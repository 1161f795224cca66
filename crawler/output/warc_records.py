"""The records of one exchange: the request's and the response's HTTP blocks, the body
spooled and digested as it arrives, the ``response`` and ``request`` records built from them,
and the ``warcinfo`` record's fields.

The HTTP block of a response is its status line and its header lines exactly as received
(``ClientResponse.raw_headers``, not re-serialised), then the body. aiohttp always removes
chunked framing, so the body we have is dechunked. Tools that record the socket's bytes (wget,
warcio's ``capture_http``) keep ``Transfer-Encoding: chunked`` together with the chunk framing;
a block that keeps the header without the framing is a known reader trap (pywb issue #584:
warcio and other readers then try to dechunk the payload, and indexers parse garbage). Tools
that, like us, only have the decoded body drop that header (httrack2warc issue #5). We rename
it to ``X-Crawler-Transfer-Encoding`` instead of deleting it: readers no longer see chunked
framing that is not there, the payload digest is the digest of the block's payload by every
reader's reckoning (warcio computes it over the bytes after the headers), and what the server
said is still on record. Nothing else in the header block changes.
"""

from __future__ import annotations

import base64
import hashlib
import json
import tempfile
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]

from crawler._version import __version__
from crawler.config import secret_header

if TYPE_CHECKING:
    from crawler.config import CrawlConfig

__all__ = [
    "INFO_KEYS",
    "REDACTED",
    "SECRET_HEADERS",
    "SPOOL_MEMORY",
    "TRUNCATED_REASONS",
    "Record",
    "begin_record",
    "pair_records",
    "warcinfo_fields",
]

#: Bytes of a body kept in memory before its spool moves to a temporary file.
SPOOL_MEMORY = 512 * 1024
#: WARC-Truncated values (WARC 1.1, section 5.13).
TRUNCATED_REASONS = frozenset({"length", "time", "disconnect", "unspecified"})
#: Request headers whose values never reach the file, besides those that
#: ``crawler.config.secret_header`` calls credentials (the rule the stored settings follow:
#: Cookie, and names that say token, secret, password, key, auth, session, signature).
SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie"})
REDACTED = "[redacted]"
#: Settings written to the warcinfo record: none of them can hold a secret (headers' values,
#: auth, cookies' contents and the proxy URL, which may hold a password, are left out).
INFO_KEYS = (
    "seeds",
    "scope",
    "include",
    "exclude",
    "max_depth",
    "max_pages",
    "max_pages_per_host",
    "max_body_bytes",
    "max_redirects",
    "ignore_robots",
    "respect_nofollow",
    "link_set",
    "concurrency",
    "per_host",
    "delay",
    "user_agent",
)
_RENAMED = b"X-Crawler-Transfer-Encoding"


def _sha1(digest: Any) -> str:
    return "sha1:" + base64.b32encode(digest.digest()).decode("ascii")


def _warc_date(when: datetime | None = None) -> str:
    """ISO 8601 UTC with microseconds (WARC 1.1 allows up to nanoseconds)."""
    when = when or datetime.now(UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _text(value: str) -> bytes:
    """Header text back to the bytes it came from (aiohttp decodes as UTF-8, surrogateescape)."""
    try:
        return value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return value.encode("utf-8", "replace")


def _request_target(url: str) -> str:
    parts = urlsplit(url)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return target


def begin_record(
    end_pair: Callable[[Record, str | None], None],
    *,
    url: str,
    method: str,
    request_headers: Iterable[tuple[str, str]],
    http_version: str,
    status: int,
    reason: str | None,
    response_version: str,
    response_headers: Sequence[tuple[bytes, bytes]],
    peer_ip: str | None,
) -> Record:
    """The Record of an exchange whose response headers are in (``WarcWriter.begin``): the
    request's block with credential headers' values redacted, the response's header block as
    received; the WARC-Date is taken now (the response's time). ``end_pair`` writes it."""
    lines = [f"{method} {_request_target(url)} {http_version}\r\n".encode("ascii", "replace")]
    for name, value in request_headers:
        if name.lower() in SECRET_HEADERS or secret_header(name):
            value = REDACTED
        lines.append(_text(name) + b": " + _text(value) + b"\r\n")
    lines.append(b"\r\n")
    head = [f"{response_version} {status} ".encode("ascii") + _text(reason or "") + b"\r\n"]
    for raw_name, raw_value in response_headers:
        if raw_name.lower() == b"transfer-encoding":
            raw_name = _RENAMED  # the body we hold is dechunked: see the module docstring
        head.append(raw_name + b": " + raw_value + b"\r\n")
    head.append(b"\r\n")
    return Record(
        end_pair,
        url=url,
        date=_warc_date(),
        peer_ip=peer_ip,
        request_block=b"".join(lines),
        response_head=b"".join(head),
    )


class Record:
    """A response being received; see ``WarcRecord`` (crawler.output.warc)."""

    def __init__(
        self,
        end_pair: Callable[[Record, str | None], None],
        *,
        url: str,
        date: str,
        peer_ip: str | None,
        request_block: bytes,
        response_head: bytes,
    ) -> None:
        self._end_pair = end_pair
        self.url = url
        self.date = date
        self.peer_ip = peer_ip
        self.request_block = request_block
        self.response_head = response_head
        self.spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_MEMORY)
        self.block_digest = hashlib.sha1(response_head)
        self.payload_digest = hashlib.sha1()
        self.length = 0
        self.done = False

    def write(self, chunk: bytes) -> None:
        if self.done or not chunk:
            return
        self.spool.write(chunk)
        self.block_digest.update(chunk)
        self.payload_digest.update(chunk)
        self.length += len(chunk)

    def end(self, truncated: str | None = None) -> None:
        if self.done:
            return
        self.done = True
        try:
            self._end_pair(self, truncated)
        finally:
            self.spool.close()


def pair_records(builder: Any, rec: Record, truncated: str | None) -> list[Any]:
    """The ``response`` record of ``rec`` (its body read from the spool) and its ``request``
    record (WARC-Concurrent-To the response), built with warcio's RecordBuilder ``builder``."""
    rec.spool.seek(0)
    warc_headers = {
        "WARC-Date": rec.date,
        "WARC-Block-Digest": _sha1(rec.block_digest),
        "WARC-Payload-Digest": _sha1(rec.payload_digest),
    }
    if rec.peer_ip:
        warc_headers["WARC-IP-Address"] = rec.peer_ip
    if truncated is not None:
        warc_headers["WARC-Truncated"] = (
            truncated if truncated in TRUNCATED_REASONS else "unspecified"
        )
    response = builder.create_warc_record(
        rec.url,
        "response",
        payload=rec.spool,
        length=rec.length,
        warc_content_type="application/http;msgtype=response",
        warc_headers_dict=warc_headers,
        http_headers=_RawHead(rec.response_head),
    )
    request = builder.create_warc_record(
        rec.url,
        "request",
        warc_content_type="application/http;msgtype=request",
        warc_headers_dict={"WARC-Date": rec.date},
        http_headers=_RawHead(rec.request_block),
    )
    request.rec_headers.add_header(
        "WARC-Concurrent-To", response.rec_headers.get_header("WARC-Record-ID")
    )
    return [response, request]


class _RawHead(StatusAndHeaders):  # type: ignore[misc]
    """An HTTP header block kept as the bytes given: warcio re-serialises the headers it
    parsed (``compute_headers_buffer``); we want the lines as they came."""

    def __init__(self, block: bytes) -> None:
        first, _, rest = block.partition(b"\r\n")
        protocol, _, statusline = first.decode("latin-1").partition(" ")
        headers = []
        for line in rest.split(b"\r\n"):
            name, sep, value = line.partition(b":")
            if sep:
                headers.append((name.decode("latin-1"), value.strip().decode("latin-1")))
        super().__init__(statusline, headers, protocol=protocol)
        self._block = block
        self.headers_buff = block

    def compute_headers_buffer(self, header_filter: Any = None) -> None:
        self.headers_buff = self._block


def warcinfo_fields(config: CrawlConfig | None, *, resumed: bool) -> dict[str, str]:
    """The warcinfo record's fields: software, format, and :data:`INFO_KEYS` of ``config``."""
    info = {
        "software": f"crawler/{__version__}",
        "format": "WARC File Format 1.1",
        "conformsTo": "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        "robots": "classic",
    }
    if config is not None:
        settings: dict[str, object] = {}
        for key in INFO_KEYS:
            value = getattr(config, key, None)
            settings[key] = list(value) if isinstance(value, tuple) else value
        info["robots"] = "ignore" if config.ignore_robots else "classic"
        info["http-header-user-agent"] = config.user_agent
        if config.headers:
            # the names only: a header's value may be a token
            names = [h.partition(":")[0].strip() for h in config.headers]
            settings["header_names"] = names
        info["crawler-settings"] = json.dumps(settings, separators=(",", ":"), sort_keys=True)
    if resumed:
        info["description"] = "a resumed run of the crawl: appended to the earlier runs' records"
    return info
