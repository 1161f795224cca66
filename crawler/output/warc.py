"""``--warc FILE``: every HTTP exchange of the crawl archived as WARC 1.1 records (.warc.gz).

The fetcher's archive tap (crawler/http/archive.py) calls :meth:`WarcArchive.begin` once per
exchange that got response headers (every redirect hop, every retried attempt, 404s and images
too), then :meth:`WarcRecord.write` with the body bytes as received (Content-Encoding not
decoded), then :meth:`WarcRecord.end` once. The file holds:

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

Written under ``FILE.open``, renamed to ``FILE`` when closed (Heritrix's convention): a
SIGKILL can land inside a write (a 3 MB body's member is written in many pieces), and what it
leaves is named as unfinished: ``FILE.open`` holds every record flushed before the kill and
at most one cut member at its end, which ``crawler warc repair FILE`` cuts (``warc_scan``),
and a resumed crawl (``--state``) repairs and appends to (``repair_tail``). A file under its
final name is always whole. A new crawl leaves an existing ``FILE`` (an earlier crawl's) as
it is until its own close replaces it. Not a regular file (``/dev/null``, a FIFO): written
to as it is, never renamed.

The modules beside this one: ``warc_records`` builds the records of an exchange (the HTTP
blocks as received, the digests, the warcinfo fields), ``warc_gzip`` writes them as tagged gzip
members and repairs a file's torn tail (``repair_tail``).
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterable, Sequence
from typing import IO, TYPE_CHECKING, Any

from warcio.warcwriter import WARCWriter  # type: ignore[import-untyped]

from crawler.config.credentials import sends_credentials
from crawler.http.response import WarcArchive, WarcRecord
from crawler.output.files import open_output
from crawler.output.warc_gzip import TAG_LEN, GzipMembers, WarcError, file_tag, repair_tail
from crawler.output.warc_records import (
    INFO_KEYS,
    REDACTED,
    SPOOL_MEMORY,
    TRUNCATED_REASONS,
    Record,
    begin_record,
    pair_records,
    warcinfo_fields,
)
from crawler.output.warc_scan import OPEN_SUFFIX

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
    "OPEN_SUFFIX",
    "open_archive",
    "repair_tail",
]

log = logging.getLogger(__name__)


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
        final: str | None = None,
    ) -> None:
        self._stream = stream
        #: for messages (WARC-Filename is ``filename``, the base name)
        self.path = path or filename
        #: where the file is renamed to at close (None: it is written under its final name)
        self.final = final
        #: marks every gzip member of this file (16 random bytes; kept across resumed runs)
        self.tag = tag or os.urandom(TAG_LEN)
        self._members = GzipMembers(stream, self.tag)
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
    ) -> Record:
        """See :meth:`WarcArchive.begin`; the WARC-Date is taken now (the response's time)."""
        return begin_record(
            self._write_pair,
            url=url,
            method=method,
            request_headers=request_headers,
            http_version=http_version,
            status=status,
            reason=reason,
            response_version=response_version,
            response_headers=response_headers,
            peer_ip=peer_ip,
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
        """Close the file (safe twice). Records begun but not ended are dropped, whole.

        Written as ``FILE.open``: synced and renamed to ``FILE`` first, while the lock is
        still held (a process waiting to open ``FILE.open`` then finds it gone, never this
        file under that name). If the last flush fails the file keeps its ``.open`` name:
        its tail is for ``crawler warc repair`` to judge."""
        if self._closed:
            return
        self._closed = True
        try:
            self._stream.flush()
            if self.final is not None:
                os.fsync(self._stream.fileno())  # the final name never names unwritten data
                os.replace(self.path, self.final)
        except OSError as exc:
            self._failed(exc)
        finally:
            try:
                self._stream.close()
            except OSError as exc:
                self._failed(exc)

    # -- internals --

    def _write_pair(self, rec: Record, truncated: str | None) -> None:
        if self._closed or self.failed:
            return
        if self._append(pair_records(self._builder, rec, truncated)):
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


def open_archive(
    config: CrawlConfig,
    *,
    resumed: bool = False,
    on_failure: Callable[[], object] | None = None,
    path: str | None = None,
) -> WarcWriter:
    """Open the crawl's WARC file (``path``, default ``config.warc``) as ``path.open`` and
    write this run's warcinfo record; :meth:`WarcWriter.close` renames it to ``path``.

    Args:
        config: the crawl's settings, for the warcinfo record (only :data:`INFO_KEYS`).
        resumed: the crawl state held a crawl: its file is kept, its tail repaired
            (:func:`repair_tail`), and appended to: ``path.open`` if it is there (the last
            run was killed), else ``path`` (the last run ended), renamed to ``path.open``.
            False: ``path.open`` created or truncated; an existing ``path`` is left until
            the close replaces it.
        on_failure: called once when a write fails (the engine may stop the crawl).

    The file is locked (``flock``, exclusive) until it is closed: two processes appending to
    one file would interleave records, and one's tail repair could cut the other's record in
    progress. Workers sharing a crawl (a redis:// state) each need their own file.

    Raises:
        OSError: the file cannot be opened (its ``filename`` is ``path``, the name given).
        WarcError: resumed, and the file is not a gzip file written by us; or another
            process holds the file.
    """
    path = path or config.warc
    if not path:
        raise ValueError("open_archive: no WARC path (config.warc is not set)")
    fh: IO[bytes]
    tag: bytes | None = None
    final: str | None = None
    work = path
    if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
        fh = open(path, "ab")  # /dev/null, a FIFO: written as it is
    else:
        final, work = path, path + OPEN_SUFFIX
        # resumed after a run that ended: its file, under its final name, is the one to go on
        adopt = resumed and not os.path.exists(work) and os.path.isfile(path)
        target = path if adopt else work
        try:
            # created if missing (0600 when the crawl sends credentials: the archive holds
            # what they open and the site's Set-Cookie values); nothing cut before the lock
            fh = open_output(target, append=True, private=sends_credentials(config))
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, path) from exc
        try:
            _lock(fh, path)
            if resumed:
                repair_tail(target)
                with open(target, "rb") as existing:
                    tag = file_tag(existing)  # the resumed run marks its members the same way
                if adopt:
                    os.rename(path, work)  # the same file (and lock): unfinished again
            else:
                fh.truncate(0)
            fh.seek(0, os.SEEK_END)  # the offsets a failed write is cut back to
        except BaseException:
            fh.close()
            raise
    writer = WarcWriter(
        fh,
        filename=os.path.basename(path),
        on_failure=on_failure,
        tag=tag,
        path=work,
        final=final,
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
