"""``--warc FILE``: every HTTP exchange of the crawl archived as WARC 1.1 records (.warc.gz).

The fetcher (crawler/http/client.py) calls :meth:`WarcArchive.begin` once per exchange that got
response headers (every redirect hop, every retried attempt, 404s and images too), then
:meth:`WarcRecord.write` with the body bytes as received (Content-Encoding not decoded), then
:meth:`WarcRecord.end` once. The file holds:

* a ``warcinfo`` record first (and again at the start of each resumed run): the software, the
  format, and the crawl's settings from an explicit list of keys that carry no secret (no
  headers' values, no auth, no proxy URL: see :data:`INFO_KEYS`);
* per exchange a ``response`` record (WARC-Target-URI, WARC-Date with microseconds, as
  WARC 1.1 allows, WARC-IP-Address when known, WARC-Block-Digest and WARC-Payload-Digest as
  ``sha1:`` base32, the form readers expect, WARC-Truncated when the body was cut) followed by
  its ``request`` record (WARC-Concurrent-To the response's WARC-Record-ID). In the request
  record the values of credential headers are ``[redacted]``: Authorization,
  Proxy-Authorization, Cookie (a user's ``-H 'Cookie: ...'`` and a loaded cookies.txt are
  credentials, and a request's cookies cannot be told apart) and whatever
  ``crawler.config.secret_header`` calls a credential (the names the stored settings keep
  out). Responses are kept as received (their Set-Cookie lines too: what the server sent).

Streaming, bounded memory: ``write()`` feeds both digests and spools the body to a
SpooledTemporaryFile (in memory up to :data:`SPOOL_MEMORY`, then on disk). ``end()`` builds the
records with warcio's record builder and writes them with its WARCWriter, each record its own
gzip member, then flushes. ``end()`` is synchronous and the crawl runs on one event loop, so
records of concurrent page tasks never interleave; a pair that fails to write (disk full) is cut
off again (the file is truncated back to where the pair began). So the file only ever grows by
whole members, and a Ctrl-C (the engine closes the archive) leaves a valid file.

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

A resumed crawl (``--state``) appends to the same file after repairing its tail: a SIGKILL may
have left a gzip member half-written, or a ``response`` member without its ``request``.
:func:`repair_tail` finds the last complete member by scanning back from the end (the cost is
that of the last records, not of the file) and cuts what follows; a trailing ``response``
whose request record never made it is cut with it, so the file holds whole pairs. To find
member starts without mistaking a gzip body stored inside a record for one, every member
this writer makes carries the file's random 16-byte tag in its gzip header's FEXTRA field
(RFC 1952; readers skip it: gzip, zcat and warcio read the file as any .warc.gz). One file per
crawl rather than a new numbered file per run: a numbered file would still leave the killed
run's file with a cut member at its end, which is what readers reject.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import stat
import struct
import tempfile
import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders  # type: ignore[import-untyped]
from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

from crawler._version import __version__
from crawler.config import secret_header

if TYPE_CHECKING:
    from crawler.config import CrawlConfig

__all__ = [
    "INFO_KEYS",
    "REDACTED",
    "SPOOL_MEMORY",
    "TRUNCATED_REASONS",
    "WarcArchive",
    "WarcError",
    "WarcRecord",
    "WarcWriter",
    "open_archive",
    "repair_tail",
]

log = logging.getLogger(__name__)

#: Bytes of a body kept in memory before its spool moves to a temporary file.
SPOOL_MEMORY = 512 * 1024
#: zlib level of the gzip members (zlib's and gzip's default). Compressing is most of the
#: writer's cost. On the corpus pages (benchmarks/warc.py warc --level N): level 9 (warcio's
#: own wrapper) took 1.7x the CPU for a file 0.8% smaller; level 3 half the CPU for a file 12%
#: bigger. An archive is kept for long: 6.
GZIP_LEVEL = 6
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
_GZIP_MAGIC = b"\x1f\x8b\x08"
#: The FEXTRA subfield id of our members' tag (see :func:`repair_tail`).
_TAG_ID = b"CW"
_TAG_LEN = 16


class WarcError(Exception):
    """The WARC file cannot be used (a resumed run's file that is not a gzip WARC)."""


class WarcRecord(Protocol):
    """One exchange being archived: body bytes in, then ``end()`` once."""

    def write(self, chunk: bytes) -> None:
        """A piece of the body as received (Content-Encoding not decoded)."""

    def end(self, truncated: str | None) -> None:
        """The body is over: write the response and request records. ``truncated`` is None
        (whole body) or a WARC-Truncated reason: "length", "time", "disconnect",
        "unspecified"."""


class WarcArchive(Protocol):
    """What the fetcher archives every exchange to (``Fetcher(config, archive=...)``)."""

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


def _member_header(tag: bytes) -> bytes:
    """A gzip member header (RFC 1952) with an FEXTRA field ``CW`` holding the file's tag."""
    extra = _TAG_ID + struct.pack("<H", len(tag)) + tag
    # ID1 ID2 CM=deflate FLG=FEXTRA, MTIME 0, XFL 0, OS 255 (unknown), XLEN, the field
    return b"\x1f\x8b\x08\x04\x00\x00\x00\x00\x00\xff" + struct.pack("<H", len(extra)) + extra


class _GzipMembers:
    """A file-like warcio writes one record to; each ``flush()`` (warcio calls it at the end
    of every record) ends a gzip member. Each member starts with :func:`_member_header`."""

    def __init__(self, out: IO[bytes], tag: bytes) -> None:
        self._out = out
        self._header = _member_header(tag)
        self._zip: Any = None
        self._crc = 0
        self._size = 0

    def write(self, data: bytes) -> None:
        if self._zip is None:
            self._zip = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
            self._crc = self._size = 0
            self._out.write(self._header)
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        self._out.write(self._zip.compress(data))

    def flush(self) -> None:
        if self._zip is not None:
            self._out.write(self._zip.flush())
            self._out.write(struct.pack("<II", self._crc, self._size & 0xFFFFFFFF))
            self._zip = None

    def reset(self) -> None:
        """Drop a member half-written (a write failed): the next write starts a new one."""
        self._zip = None


class _Record:
    """A response being received; see :class:`WarcRecord`."""

    def __init__(
        self,
        writer: WarcWriter,
        *,
        url: str,
        date: str,
        peer_ip: str | None,
        request_block: bytes,
        response_head: bytes,
    ) -> None:
        self._writer = writer
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
            self._writer._write_pair(self, truncated)
        finally:
            self.spool.close()


class WarcWriter:
    """The crawl's WARC file (see the module docstring); made by :func:`open_archive`.

    Attributes:
        error: the OSError that stopped archiving (disk full ...), or None. Archiving stops
            at the first one (logged once, ``on_failure`` called); the crawl is not failed by
            it: the caller decides.
        records: response records written by this run.
    """

    def __init__(
        self,
        stream: IO[bytes],
        *,
        filename: str,
        on_failure: Callable[[], object] | None = None,
        tag: bytes | None = None,
        path: str | None = None,
    ) -> None:
        self._stream = stream
        #: for messages (WARC-Filename is ``filename``, the base name)
        self.path = path or filename
        #: marks every gzip member of this file (16 random bytes; kept across resumed runs)
        self.tag = tag or os.urandom(_TAG_LEN)
        self._members = _GzipMembers(stream, self.tag)
        self._writer = WARCWriter(self._members, gzip=False, warc_version="1.1")
        self._builder = self._writer  # a WARCWriter is warcio's RecordBuilder too
        self.filename = filename
        self.on_failure = on_failure
        self.error: OSError | None = None
        self.records = 0
        self._closed = False

    # -- the fetcher's side (WarcArchive) --

    def begin(
        self,
        *,
        url: str,
        method: str = "GET",
        request_headers: Iterable[tuple[str, str]] = (),
        http_version: str = "HTTP/1.1",
        status: int,
        reason: str | None = "",
        response_version: str = "HTTP/1.1",
        response_headers: Sequence[tuple[bytes, bytes]] = (),
        peer_ip: str | None = None,
    ) -> _Record:
        """See :meth:`WarcArchive.begin`; the WARC-Date is taken now (the response's time)."""
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
        return _Record(
            self,
            url=url,
            date=_warc_date(),
            peer_ip=peer_ip,
            request_block=b"".join(lines),
            response_head=b"".join(head),
        )

    # -- the engine's side --

    @property
    def failed(self) -> bool:
        return self.error is not None

    def write_warcinfo(self, info: dict[str, str]) -> None:
        """A ``warcinfo`` record (the engine's open step writes one per run)."""
        record = self._builder.create_warcinfo_record(self.filename, info)
        self._append([record])

    def flush(self) -> None:
        """Records are flushed as they are written; nothing is buffered here."""

    def close(self) -> None:
        """Close the file (safe twice). Records begun but not ended are dropped, whole."""
        if self._closed:
            return
        self._closed = True
        try:
            self._stream.close()
        except OSError as exc:
            self._failed(exc)

    # -- internals --

    def _write_pair(self, rec: _Record, truncated: str | None) -> None:
        if self._closed or self.failed:
            return
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
        response = self._builder.create_warc_record(
            rec.url,
            "response",
            payload=rec.spool,
            length=rec.length,
            warc_content_type="application/http;msgtype=response",
            warc_headers_dict=warc_headers,
            http_headers=_RawHead(rec.response_head),
        )
        request = self._builder.create_warc_record(
            rec.url,
            "request",
            warc_content_type="application/http;msgtype=request",
            warc_headers_dict={"WARC-Date": rec.date},
            http_headers=_RawHead(rec.request_block),
        )
        request.rec_headers.add_header(
            "WARC-Concurrent-To", response.rec_headers.get_header("WARC-Record-ID")
        )
        if self._append([response, request]):
            self.records += 1

    def _append(self, records: list[Any]) -> bool:
        """Write ``records`` whole, then flush; on an OSError cut the file back to where they
        began, so that it never ends in part of a member."""
        if self._closed or self.failed:
            return False
        stream = self._stream
        try:
            start = stream.tell()
        except OSError:
            start = None  # a pipe or a device: nothing to cut back
        try:
            for record in records:
                self._writer.write_record(record)
            stream.flush()
        except OSError as exc:
            self._members.reset()
            if start is not None:
                try:
                    stream.seek(start)
                    stream.truncate(start)
                    stream.flush()
                except (OSError, ValueError):
                    pass
            self._failed(exc)
            return False
        return True

    def _failed(self, exc: OSError) -> None:
        if self.error is None:
            self.error = exc
            log.error("cannot write the WARC file %s: %s; archiving stopped", self.path, exc)
            if self.on_failure is not None:
                self.on_failure()


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


def open_archive(
    config: CrawlConfig,
    *,
    resumed: bool = False,
    on_failure: Callable[[], object] | None = None,
    path: str | None = None,
) -> WarcWriter:
    """Open the crawl's WARC file (``path``, default ``config.warc``) and write this run's
    warcinfo record.

    Args:
        config: the crawl's settings, for the warcinfo record (only :data:`INFO_KEYS`).
        resumed: the crawl state held a crawl: the file is kept, its tail repaired
            (:func:`repair_tail`), and appended to. False: created or truncated.
        on_failure: called once when a write fails (the engine may stop the crawl).

    The file is locked (``flock``, exclusive) until it is closed: two processes appending to
    one file would interleave records, and one's tail repair could cut the other's record in
    progress. Workers sharing a crawl (a redis:// state) each need their own file.

    Raises:
        OSError: the file cannot be opened.
        WarcError: resumed, and the file is not a gzip file written by us; or another
            process holds the file.
    """
    path = path or config.warc
    if not path:
        raise ValueError("open_archive: no WARC path (config.warc is not set)")
    fh: IO[bytes]
    tag: bytes | None = None
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        fh = open(path, "ab")  # /dev/null, a FIFO: written as it is
    else:
        fh = open(path, "ab")  # created if missing; nothing cut before the lock is ours
        try:
            _lock(fh, path)
            if resumed:
                repair_tail(path)
                with open(path, "rb") as existing:
                    tag = _file_tag(existing)  # the resumed run marks its members the same way
            else:
                fh.truncate(0)
            fh.seek(0, os.SEEK_END)  # the offsets a failed write is cut back to
        except BaseException:
            fh.close()
            raise
    writer = WarcWriter(
        fh, filename=os.path.basename(path), on_failure=on_failure, tag=tag, path=path
    )
    writer.write_warcinfo(warcinfo_fields(config, resumed=resumed))
    return writer


def _lock(fh: IO[bytes], path: str) -> None:
    try:
        import fcntl  # noqa: PLC0415  (POSIX only)
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise WarcError(
            f"{path}: another process is writing this WARC file; give each crawler process"
            " its own --warc file"
        ) from None


# -- tail repair --


def _member_at(fh: IO[bytes], offset: int, *, block: int = 65536) -> tuple[int, bytes] | None:
    """(end offset, first bytes of its content) of a complete, CRC-checked gzip member that
    starts at ``offset``, or None."""
    fh.seek(offset)
    unzip = zlib.decompressobj(zlib.MAX_WBITS + 16)
    head = b""
    pos = offset
    try:
        while not unzip.eof:
            data = fh.read(block)
            if not data:
                return None
            pos += len(data)
            while data and not unzip.eof:
                out = unzip.decompress(data, 65536)
                if len(head) < 512:
                    head += out[: 512 - len(head)]
                data = unzip.unconsumed_tail
    except zlib.error:
        return None
    return pos - len(unzip.unused_data), head


def _file_tag(fh: IO[bytes]) -> bytes | None:
    """The tag in the FEXTRA field of the file's first member (None: not one of ours)."""
    fh.seek(0)
    head = fh.read(len(_member_header(b"\0" * _TAG_LEN)))
    if len(head) < 16 or head[:4] != b"\x1f\x8b\x08\x04" or head[12:14] != _TAG_ID:
        return None
    (length,) = struct.unpack("<H", head[14:16])
    tag = head[16 : 16 + length]
    return tag if length == _TAG_LEN and len(tag) == length else None


def _candidates(fh: IO[bytes], end: int, marker: bytes, *, block: int = 65536) -> Iterable[int]:
    """Offsets of ``marker`` (a member's first bytes) before ``end``, last first."""
    while end > 0:
        start = max(0, end - block)
        fh.seek(start)
        # read past the block so that a marker across its end is seen
        data = fh.read(end - start + len(marker) - 1)
        i = data.rfind(marker)
        while i >= 0:
            if start + i < end:
                yield start + i
            i = data.rfind(marker, 0, i + len(marker) - 1)
        end = start


def _warc_type(head: bytes) -> str | None:
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"warc-type:"):
            return line.partition(b":")[2].strip().decode("ascii", "replace")
        if not line:
            break
    return None


def repair_tail(path: str) -> int:
    """Cut what follows the last complete record pair of the gzip WARC file ``path``; return
    the number of bytes cut (0: the file was whole).

    The last complete gzip member is found from the end backwards: each candidate start is
    decompressed and its CRC checked. The candidates are where our member header occurs:
    every member the writer makes starts with the same header, whose FEXTRA field holds a
    tag of 16 random bytes drawn when the file was created (read back from its first
    member). A bare gzip magic is not enough: a gzip body is archived as sent, deflate keeps
    incompressible bytes as they are, so a whole, valid gzip member of a body (a .warc.gz
    fetched from an archive) can sit byte for byte inside one of ours. A file whose first
    member has no tag (not written by this writer) falls back to the bare magic, a member
    that decompresses to a WARC record. If the last complete member is a ``response`` (its
    ``request``, written right after it, is missing) it is cut too.

    Raises:
        WarcError: the file holds no complete member and does not start like a gzip file
            (not ours: nothing is cut).
    """
    with open(path, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        tag = _file_tag(fh)
        marker = _GZIP_MAGIC if tag is None else _member_header(tag)
        keep: int | None = None
        for offset in _candidates(fh, size, marker):
            found = _member_at(fh, offset)
            if found is None or not found[1].startswith(b"WARC/"):
                continue
            end, head = found
            keep = offset if _warc_type(head) == "response" else end
            break
        if keep is None:
            fh.seek(0)
            if fh.read(len(_GZIP_MAGIC)) != _GZIP_MAGIC:
                raise WarcError(
                    f"{path}: not a gzip WARC file; a resumed crawl will not append to it"
                )
            keep = 0
        if keep < size:
            fh.truncate(keep)
            log.warning(
                "%s: cut %d bytes of a record left unfinished by the last run", path, size - keep
            )
        return size - keep
