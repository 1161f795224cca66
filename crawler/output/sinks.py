"""Sinks for the CLI's output formats: urls, jsonl, csv, sitemap.

Each sink writes bytes (UTF-8) to a binary stream and flushes after each record, so that a
consumer (``| head``, ``| grep``, ``tail -f``) sees a record as soon as it exists, and always
a whole record: one ``write`` call per line (jsonl) or per page (csv), never a partial one.

A consumer that goes away (``| head -1`` closing the pipe) is not an error: the sink stops
writing, points stdout at devnull (so that the interpreter's final flush cannot fail, as the
Python docs on SIGPIPE recommend) and calls ``on_failure`` so that the crawl can stop. Any
other write error (disk full ...) is kept in ``error`` and calls ``on_failure`` too.

``sitemap`` is the exception to "a record as soon as it exists": a sitemap cannot be appended
to, so :class:`SitemapSink` writes each page's URL to a side file as it goes (a line each,
flushed like the other formats) and builds the XML (crawler/output/sitemap.py) when it is closed.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING, cast

from crawler.extract import LinkRecord
from crawler.output.controls import escape_controls
from crawler.output.files import open_output

if TYPE_CHECKING:
    from crawler.core.results import PageResult
    from crawler.extract import Link
    from crawler.extract._extract_c import LinkRecord as Record

FORMATS = ("urls", "jsonl", "csv", "sitemap")
CSV_HEADER = ("source", "target", "tag", "nofollow")
_CSV_HEADER_LINE = ",".join(CSV_HEADER) + "\r\n"
# json.dumps(obj, separators=...) builds a JSONEncoder a call; this one is built once (the
# same settings otherwise: ensure_ascii, check_circular, allow_nan, keys in order).
_JSON = json.JSONEncoder(separators=(",", ":"))


class OutputSink:
    """Base: one binary stream, whole-record writes, broken-pipe and I/O-error handling."""

    def __init__(
        self,
        stream: IO[bytes],
        *,
        close_stream: bool = False,
        on_failure: Callable[[], object] | None = None,
    ) -> None:
        self._stream = stream
        self._close_stream = close_stream
        self.on_failure = on_failure
        #: Called before each record; the CLI clears the live progress line with it when
        #: stdout and stderr share a terminal, so that records never land after that line.
        self.before_write: Callable[[], object] | None = None
        self.broken_pipe = False
        #: An OSError other than a closed pipe (disk full ...); the CLI reports it.
        self.error: OSError | None = None
        self.records = 0
        self._closed = False
        # A file we opened ourselves: truncated or repaired at start(), see the module doc.
        self._path: str | None = None
        self._resume = False
        self._started = False
        #: Bytes of a broken last line cut from the file when a resumed crawl started.
        self.repaired = 0

    @property
    def failed(self) -> bool:
        return self.broken_pipe or self.error is not None

    def start(self, resumed: bool | None = None) -> None:
        """Make the file ready for this run: truncated (a new crawl) or, ``resumed``, its
        cut last line removed. Once; the first record calls it if nobody did.

        Args:
            resumed: the state held a crawl (the engine knows, holding its lock); None:
                what ``open_sink(..., append=)`` said.
        """
        if self._started:
            return
        self._started = True
        if self._path is None or self.failed:
            return
        try:
            if self._resume if resumed is None else resumed:
                self.repaired = repair_tail(self._path)
                self._on_resume(os.path.getsize(self._path))
            else:
                os.truncate(self._path, 0)
        except OSError as exc:
            self.error = exc
            if self.on_failure is not None:
                self.on_failure()

    def _on_resume(self, size: int) -> None:
        """Hook: the file holds ``size`` bytes of whole records from earlier runs."""

    def flush(self) -> None:
        """Hand what was written to the OS (the engine calls it before it commits a page's
        completion, so that a kill after the commit cannot lose the page's records).

        Each record is flushed as it is written, so this has nothing left to do unless a
        subclass buffers; it does not fsync (a power loss may lose the last records).
        """
        if self.failed or self._closed:
            return
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._pipe_closed()
        except OSError as exc:
            self.error = exc
            if self.on_failure is not None:
                self.on_failure()

    def _write(self, data: bytes) -> None:
        if self.failed or self._closed or not data:
            return
        if not self._started:
            self.start()
            if self.failed:
                return
        if self.before_write is not None:
            self.before_write()
        try:
            self._stream.write(data)
            self._stream.flush()
        except BrokenPipeError:
            self._pipe_closed()
        except OSError as exc:
            self.error = exc
            if self.on_failure is not None:
                self.on_failure()
        else:
            self.records += 1

    def _pipe_closed(self) -> None:
        self.broken_pipe = True
        silence_stream(self._stream)
        if self.on_failure is not None:
            self.on_failure()

    # -- Sink protocol --
    def link(self, url: str, referrer: str, kind: str) -> None:
        """A new URL was discovered (default: not written)."""

    def page(self, page: PageResult) -> None:
        """A page is done (default: not written)."""

    def close(self) -> None:
        """Flush and, for a file we opened, close it. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self.failed:
                self._stream.flush()
        except BrokenPipeError:
            self._pipe_closed()
        except OSError as exc:
            self.error = exc
        finally:
            if self._close_stream:
                try:
                    self._stream.close()
                except OSError as exc:
                    self.error = self.error or exc


def _utf8(text: str) -> bytes:
    """UTF-8; undecodable input bytes (surrogateescape) back as they came, any other lone
    surrogate as "?": a sink never raises on what a page holds."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


class UrlSink(OutputSink):
    """Each discovered URL once, a line. In-scope URLs bare; with ``all_links`` the others
    (``kind`` "external", "other" or "invalid") follow a tab and their kind. An invalid link
    (a value that does not resolve) is listed by its raw value, C0/C1 control characters and
    DEL written as ``\\xNN`` (``crawler.output.controls``), always, so that it stays on one
    line and cannot drive the terminal it is printed on. The other values are serialised URLs
    (controls percent-encoded): written as they are."""

    def link(self, url: str, referrer: str, kind: str) -> None:
        if kind == "internal":
            self._write(_utf8(url) + b"\n")
        else:
            text = escape_controls(url) if kind == "invalid" else url
            self._write(_utf8(f"{text}\t{kind}\n"))


class JsonlSink(OutputSink):
    """One JSON object a fetched page (``PageResult.to_dict()``), one line each."""

    def page(self, page: PageResult) -> None:
        # ensure_ascii keeps every line valid UTF-8 even for lone surrogates in odd URLs.
        links = page.links
        if LinkRecord is not None and type(links) is LinkRecord and not page.rendered_links:
            # The compiled extractor's record writes the URL list as JSON itself, put in the
            # line where to_dict has it: before "redirects" (a bare quote in JSON text is
            # always a string's delimiter, so ',"redirects":' is found only as that key).
            rec = cast("Record", links)
            text = _JSON.encode(page.to_dict(links=False))
            at = text.index(',"redirects":')
            urls = rec.json_urls()
            invalid = _JSON.encode(rec.invalid())
            line = f'{text[:at]},"links":{urls},"invalid_links":{invalid}{text[at:]}\n'
        else:
            line = _JSON.encode(page.to_dict()) + "\n"
        self._write(line.encode("ascii"))


class LinkJsonlSink(OutputSink):
    """``crawler extract --format jsonl``: one JSON object a link occurrence."""

    def links(self, links: Iterable[Link]) -> None:
        lines = "".join(
            json.dumps(
                {
                    "url": link.url,
                    "raw": link.raw,
                    "tag": link.tag,
                    "attr": link.attr,
                    "nofollow": link.nofollow,
                },
                separators=(",", ":"),
            )
            + "\n"
            for link in links
        )
        self._write(lines.encode("ascii"))


class CsvSink(OutputSink):
    """One row a link: source (the page's final URL), target, tag, nofollow (true/false).

    A link whose value does not resolve (``Link.url`` None) has no target: no row.
    """

    _header_done = False

    def _on_resume(self, size: int) -> None:
        self._header_done = size > 0  # the header only at the top of a new file

    def _rows(self, rows: list[tuple[str, str, str, str]]) -> None:
        buf = io.StringIO()
        csv.writer(buf, lineterminator="\r\n").writerows(rows)
        self._text(buf.getvalue())

    def _text(self, text: str) -> None:
        """Write rows already in CSV form (each ended by CR LF), the header first if due."""
        self.start()  # before the header is decided: a resumed file has one already
        if not self._header_done:
            text = _CSV_HEADER_LINE + text
        self._write(_utf8(text))
        if not self.failed:
            self._header_done = True

    def page(self, page: PageResult) -> None:
        source = page.final_url or page.url
        links = page.links
        if LinkRecord is not None and type(links) is LinkRecord and not page.rendered_links:
            # the compiled extractor's record writes its own rows (None: a value is not ASCII)
            done = cast("Record", links).csv_rows(source)
            if done is not None:
                if done:
                    self._text(done)
                return
        rows = [
            (source, link.url, link.tag, "true" if link.nofollow else "false")
            for link in ((*links, *page.rendered_links) if page.rendered_links else links)
            if link.url is not None
        ]
        if not rows:
            return
        # The common page: no value holds a character csv would quote (",", '"', CR, LF),
        # so a row is its values joined by commas, as csv.writer writes it (QUOTE_MINIMAL),
        # at a third of its cost. Otherwise csv.writer does the quoting, as before.
        text = "".join([f"{a},{b},{c},{d}\r\n" for a, b, c, d in rows])
        n = len(rows)
        if (
            '"' in text
            or text.count(",") != 3 * n
            or text.count("\n") != n
            or text.count("\r") != n
        ):
            self._rows(rows)
        else:
            self._text(text)

    def close(self) -> None:
        never_started = self._path is not None and not self._started  # leave the file be
        if not self._header_done and not self._closed and not never_started:
            self._rows([])  # an empty crawl still gives a parseable file with its header
        super().close()


class SitemapSink(OutputSink):
    """``--format sitemap``: the in-scope HTML pages that answered 200, as a sitemaps.org
    sitemap (or a sitemap index and its sitemaps past 50,000 URLs: crawler/output/sitemap.py).

    A page is listed by its final URL (after redirects), once, when it answered 200 with an
    HTML type (``text/html``, ``application/xhtml+xml``); one cut at ``max_body_bytes``
    (``too_large``) still counts: it answered 200. The crawl only fetches in-scope URLs (every
    redirect hop is checked), so every page it reports is in scope.

    The URLs go to a side file as pages finish (one line each, flushed before the engine
    commits the page, like the other formats), and the sitemap is built from it at
    ``close()``. With a crawl state (``open_sink(..., resume=bool)``) the side file is
    ``OUTPUT.urls`` beside the output and is kept: a resumed run appends to it (its cut last
    line repaired) and rebuilds the sitemap whole from every run's URLs, even those of a run
    that was killed before it could write its sitemap. Without a state it is a temporary
    file, removed at close. On stdout only a single sitemap can be written: more URLs than
    one file holds is an error (``error``, nothing written).
    """

    def __init__(
        self,
        stream: IO[bytes],
        *,
        close_stream: bool = False,
        on_failure: Callable[[], object] | None = None,
        target: str | None = None,
        out: IO[bytes] | None = None,
        close_out: bool = False,
        spool_path: str | None = None,
        keep_spool: bool = False,
        base: str | None = None,
        private: bool = False,
    ) -> None:
        super().__init__(stream, close_stream=close_stream, on_failure=on_failure)
        from crawler.http.response import HTML_TYPES  # noqa: PLC0415  (aiohttp: a crawl has it loaded)

        self._html = HTML_TYPES
        self.target = target
        self._out = out
        self._close_out = close_out
        self.spool_path = spool_path
        self._keep_spool = keep_spool
        self.base = base
        self._private = private
        #: what the last build wrote (crawler.output.sitemap.SitemapResult), None before close
        self.result: object | None = None

    def page(self, page: PageResult) -> None:
        if page.status != 200 or page.error not in (None, "too_large"):
            return
        if page.content_type not in self._html:
            return
        url = page.final_url or page.url
        if "\n" in url or "\r" in url:
            return  # not a URL the engine makes; never split a line of the side file
        self._write(_utf8(url) + b"\n")

    def close(self) -> None:
        if self._closed:
            return
        never_started = self._path is not None and not self._started  # leave the files be
        super().close()
        try:
            if not never_started and not self.failed:
                self._build()
        finally:
            if self._close_out and self._out is not None:
                try:
                    self._out.close()
                except OSError as exc:
                    self.error = self.error or exc
            if not self._keep_spool and self.spool_path is not None:
                try:
                    os.unlink(self.spool_path)
                except OSError:
                    pass

    def _build(self) -> None:
        from crawler.output import sitemap  # noqa: PLC0415  (only for this format)

        assert self.spool_path is not None
        try:
            with open(self.spool_path, "rb") as fh:
                lines = (line.rstrip(b"\n").decode("utf-8", "surrogateescape") for line in fh)
                self.result = sitemap.write_sitemaps(
                    sitemap.unique(line for line in lines if line),
                    self.target,
                    stream=self._out,
                    base=self.base,
                    private=self._private,
                )
        except sitemap.SitemapError as exc:
            self.error = OSError(errno.EFBIG, str(exc))
        except BrokenPipeError:
            if self._out is not None:
                self.broken_pipe = True
                silence_stream(self._out)
        except OSError as exc:
            self.error = exc


def _open_sitemap(
    path: str | None,
    stream: IO[bytes] | None,
    on_failure: Callable[[], object] | None,
    resume: bool | None,
    base: str | None,
    private: bool = False,
) -> SitemapSink:
    """The sitemap sink: its side file and where the sitemap goes (see SitemapSink)."""
    target: str | None = None
    out: IO[bytes] | None = None
    close_out = False
    if path is not None and path != "-":
        if os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode):
            out = open(path, "ab")  # /dev/null, a FIFO: one sitemap written to it
            close_out = True
        else:
            _check_writable(path, private)
            target = path
    else:
        out = stream or sys.stdout.buffer
    keep = target is not None and resume is not None
    if keep:
        assert target is not None
        spool_path = target + ".urls"
        fh: IO[bytes] = open_output(spool_path, append=True, private=private)
    else:
        directory = (os.path.dirname(target) or ".") if target is not None else None
        fd, spool_path = tempfile.mkstemp(prefix=".sitemap-", suffix=".urls", dir=directory)
        fh = os.fdopen(fd, "wb")
    sink = SitemapSink(
        fh,
        close_stream=True,
        on_failure=on_failure,
        target=target,
        out=out,
        close_out=close_out,
        spool_path=spool_path,
        keep_spool=keep,
        base=base,
        private=private,
    )
    if keep:
        sink._path = spool_path
        sink._resume = bool(resume)
    return sink


def _check_writable(path: str, private: bool) -> None:
    """Fail now, not at the end, if the sitemap cannot be written, without creating it: it
    is written whole at close (a temporary file renamed into place), and a kill before then
    must not leave an empty file that is not XML. An existing file is opened for append and
    left as it is (made 0600 when ``private``); else a temporary file is made in its
    directory and removed (the rename at the end needs that directory)."""
    if os.path.exists(path):
        open_output(path, append=True, private=private).close()
        return
    fd, tmp = tempfile.mkstemp(prefix=".sitemap-", suffix=".tmp", dir=os.path.dirname(path) or ".")
    os.close(fd)
    os.unlink(tmp)


_SINKS: dict[str, type[OutputSink]] = {
    "urls": UrlSink,
    "jsonl": JsonlSink,
    "csv": CsvSink,
    "sitemap": SitemapSink,
    "jsonl-links": LinkJsonlSink,
}


def open_sink(
    fmt: str,
    path: str | None = None,
    *,
    stream: IO[bytes] | None = None,
    on_failure: Callable[[], object] | None = None,
    resume: bool | None = None,
    sitemap_base: str | None = None,
    private: bool = False,
) -> OutputSink:
    """The sink for ``fmt`` writing to ``path``, ``stream``, or stdout.

    Args:
        resume: None (no state: ``crawler extract``, an in-memory crawl): ``path`` is
            created or truncated now. A bool (a crawl with a state): ``path`` is opened
            (created if missing) for append now, so that an unwritable path fails here,
            and left as it is until ``start()``: then truncated, or, resumed, kept with its
            cut last line removed. A crawl that never starts (the state was refused)
            leaves the file unchanged. Not a regular file (``/dev/null``, a FIFO): written
            to as it is. ``sitemap``: see :class:`SitemapSink` (its side file is what is
            appended to; the sitemap is written whole at close).
        sitemap_base: ``sitemap`` only: the origin of a sitemap index's <loc>s (default:
            the origin of the first URL listed).
        private: the crawl sends credentials: the file (and a sitemap's parts and side
            file) created mode 0600, an existing one made 0600 (``crawler.output.files``).

    Raises:
        ValueError: unknown format.
        OSError: ``path`` cannot be opened for writing.
    """
    cls = _SINKS.get(fmt)
    if cls is None:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if cls is SitemapSink:
        return _open_sitemap(path, stream, on_failure, resume, sitemap_base, private)
    if path is not None and path != "-":
        # closed by the sink's close()
        fh = open_output(path, append=resume is not None, private=private)
        sink = cls(fh, close_stream=True, on_failure=on_failure)
        # A device or a pipe (/dev/null, a FIFO) has no end to truncate or repair.
        if resume is not None and stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            sink._path = path
            sink._resume = resume
        return sink
    return cls(stream or sys.stdout.buffer, on_failure=on_failure)


def repair_tail(path: str, *, block: int = 65536) -> int:
    """Cut what follows the last newline of ``path`` (a record a kill cut in half); return
    the number of bytes cut (0: the file ends with a newline, or is empty)."""
    with open(path, "r+b") as fh:
        size = fh.seek(0, os.SEEK_END)
        end = size
        while end > 0:
            start = max(0, end - block)
            fh.seek(start)
            chunk = fh.read(end - start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            end = start
        else:
            keep = 0
        if keep < size:
            fh.truncate(keep)
        return size - keep


def silence_stream(stream: IO[bytes] | IO[str]) -> None:
    """After EPIPE: point stdout's file descriptor at devnull so no later flush can fail."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError, AttributeError):
        return
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, fd)
        os.close(devnull)
    except OSError:
        pass
