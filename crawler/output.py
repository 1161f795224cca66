"""Sinks for the CLI's output formats: urls, jsonl, csv.

Each sink writes bytes (UTF-8) to a binary stream and flushes after each record, so that a
consumer (``| head``, ``| grep``, ``tail -f``) sees a record as soon as it exists, and always
a whole record: one ``write`` call per line (jsonl) or per page (csv), never a partial one.

A consumer that goes away (``| head -1`` closing the pipe) is not an error: the sink stops
writing, points stdout at devnull (so that the interpreter's final flush cannot fail, as the
Python docs on SIGPIPE recommend) and calls ``on_failure`` so that the crawl can stop. Any
other write error (disk full ...) is kept in ``error`` and calls ``on_failure`` too.
"""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Callable, Iterable
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from crawler.extract import Link
    from crawler.results import PageResult

FORMATS = ("urls", "jsonl", "csv")
CSV_HEADER = ("source", "target", "tag", "nofollow")


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

    @property
    def failed(self) -> bool:
        return self.broken_pipe or self.error is not None

    def _write(self, data: bytes) -> None:
        if self.failed or self._closed or not data:
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


# C0 controls and DEL, as \xNN: a raw value (an invalid link) may hold tabs and newlines.
_CONTROLS = {c: f"\\x{c:02x}" for c in (*range(32), 127)}


class UrlSink(OutputSink):
    """Each discovered URL once, a line. In-scope URLs bare; with ``all_links`` the others
    (``kind`` "external", "other" or "invalid") follow a tab and their kind. An invalid link
    (a value that does not resolve) is listed by its raw value, control characters written
    as ``\\xNN`` so that it stays on one line."""

    def link(self, url: str, referrer: str, kind: str) -> None:
        if kind == "internal":
            self._write(_utf8(url) + b"\n")
        else:
            text = url.translate(_CONTROLS) if kind == "invalid" else url
            self._write(_utf8(f"{text}\t{kind}\n"))


class JsonlSink(OutputSink):
    """One JSON object a fetched page (``PageResult.to_dict()``), one line each."""

    def page(self, page: PageResult) -> None:
        # ensure_ascii keeps every line valid UTF-8 even for lone surrogates in odd URLs.
        line = json.dumps(page.to_dict(), separators=(",", ":")) + "\n"
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

    def _rows(self, rows: list[tuple[str, str, str, str]]) -> None:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\r\n")
        if not self._header_done:
            writer.writerow(CSV_HEADER)
        writer.writerows(rows)
        self._write(_utf8(buf.getvalue()))
        if not self.failed:
            self._header_done = True

    def page(self, page: PageResult) -> None:
        source = page.final_url or page.url
        rows = [
            (source, link.url, link.tag, "true" if link.nofollow else "false")
            for link in page.links
            if link.url is not None
        ]
        if rows:
            self._rows(rows)

    def close(self) -> None:
        if not self._header_done and not self._closed:
            self._rows([])  # an empty crawl still gives a parseable file with its header
        super().close()


_SINKS: dict[str, type[OutputSink]] = {
    "urls": UrlSink,
    "jsonl": JsonlSink,
    "csv": CsvSink,
    "jsonl-links": LinkJsonlSink,
}


def open_sink(
    fmt: str,
    path: str | None = None,
    *,
    stream: IO[bytes] | None = None,
    on_failure: Callable[[], object] | None = None,
) -> OutputSink:
    """The sink for ``fmt`` writing to ``path`` (created/truncated), ``stream``, or stdout.

    Raises:
        ValueError: unknown format.
        OSError: ``path`` cannot be opened for writing.
    """
    cls = _SINKS.get(fmt)
    if cls is None:
        raise ValueError(f"unknown output format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if path is not None and path != "-":
        fh = open(path, "wb")  # closed by the sink's close()
        return cls(fh, close_stream=True, on_failure=on_failure)
    return cls(stream or sys.stdout.buffer, on_failure=on_failure)


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
