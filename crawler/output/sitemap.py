"""sitemaps.org XML sitemaps from a list of page URLs (``--format sitemap``, see output.py).

A sitemap file holds at most :data:`MAX_URLS` URLs and :data:`MAX_BYTES` bytes uncompressed
(the protocol's 50,000 and 50 MB). Past either, the URLs go to numbered files beside the output
and the output itself becomes a sitemap index listing them (the protocol's way): ``OUTPUT`` is
the index and ``OUTPUT-1.xml``, ``OUTPUT-2.xml`` ... (a trailing ``.xml`` of ``OUTPUT`` taken
off first: ``sitemap.xml`` -> ``sitemap-1.xml``) the sitemaps. The index's ``<loc>``s must be
absolute URLs; the crawler cannot know where the files will be served, so by default they are
the origin of the first URL listed (the first page crawled: the seed's site, where a sitemap
must live to list its URLs) plus the file's name: ``https://example.com/sitemap-1.xml``.
``base`` overrides that origin.

Each file is written to a temporary file beside it and renamed into place, parts before the
index, so a reader (or a kill) never sees a half-written sitemap or an index naming a part
that is not there yet. Numbered files that the earlier index at ``OUTPUT`` listed and the new
one does not are removed (only those: a ``sitemap-1.xml`` no index of ours named is left be).

URLs are deduplicated (first occurrence kept, order kept) in a temporary SQLite database on
disk, so memory stays flat however many pages: the list of URLs is never held in memory.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO
from urllib.parse import quote, urlsplit

from crawler.output.files import temp_mode

__all__ = [
    "MAX_BYTES",
    "MAX_URLS",
    "NAMESPACE",
    "SitemapError",
    "SitemapResult",
    "loc",
    "part_path",
    "unique",
    "write_sitemaps",
]

#: URLs a sitemap file may hold (the protocol's limit; tests patch it to split small crawls).
MAX_URLS = 50_000
#: Bytes a sitemap file may hold, uncompressed (the protocol's 50 MB: 52,428,800).
MAX_BYTES = 50 * 1024 * 1024
NAMESPACE = "http://www.sitemaps.org/schemas/sitemap/0.9"
#: The schema's bounds of a <loc> (sitemap.xsd: anyURI, minLength 12, maxLength 2048).
LOC_MIN, LOC_MAX = 12, 2048

_DECL = b'<?xml version="1.0" encoding="UTF-8"?>\n'
_URLSET = (_DECL + f'<urlset xmlns="{NAMESPACE}">\n'.encode(), b"</urlset>\n")
_INDEX = (_DECL + f'<sitemapindex xmlns="{NAMESPACE}">\n'.encode(), b"</sitemapindex>\n")
# Characters a URL may hold as they are (RFC 3986 reserved and unreserved, and "%" of the
# escapes already there); anything else (non-ASCII, spaces, controls) is percent-encoded.
_SAFE = "!#$%&'()*+,-./:;=?@[]_~"
_UNSAFE = re.compile(r"[^A-Za-z0-9!#$%&'()*+,\-./:;=?@\[\]_~]")


class SitemapError(Exception):
    """The sitemap cannot be written as asked (more than one file to a stream)."""


@dataclass(slots=True)
class SitemapResult:
    """What :func:`write_sitemaps` wrote."""

    urls: int = 0
    #: URLs left out: longer than the schema allows (2,048 characters once encoded)
    skipped: int = 0
    #: the files written, the index (or the single sitemap) first
    files: list[str] = field(default_factory=list)
    index: bool = False


def loc(url: str) -> str | None:
    """``url`` as the text of a <loc>: percent-encoded to ASCII (RFC 3986) and XML-escaped
    (``& < > " '`` as entities, as the protocol asks); None if the schema would refuse it
    (under 12 or over 2,048 characters)."""
    if _UNSAFE.search(url):  # most URLs (WHATWG-serialised already) need no quoting
        url = quote(url, safe=_SAFE, encoding="utf-8", errors="surrogateescape")
    if not LOC_MIN <= len(url) <= LOC_MAX:
        return None
    # "<", ">" and '"' are percent-encoded by now: "&" and "'" are what is left to escape
    if "&" in url:
        url = url.replace("&", "&amp;")
    if "'" in url:
        url = url.replace("'", "&apos;")
    return url


def _stem(path: str) -> str:
    return path[:-4] if path.lower().endswith(".xml") else path


def part_path(path: str, number: int) -> str:
    """The ``number``-th sitemap of the index ``path``: ``sitemap.xml`` -> ``sitemap-1.xml``."""
    return f"{_stem(path)}-{number}.xml"


def unique(lines: Iterable[str]) -> Iterator[str]:
    """Each distinct line once, in the order first seen; the set lives in a temporary SQLite
    database on disk (deleted when the iteration ends), not in memory."""
    import sqlite3  # noqa: PLC0415  (only for a sitemap)

    db = sqlite3.connect("")  # "": a private temporary database on disk
    try:
        # a scratch set: no journal, no syncs; a 16 MB page cache (the memory it may use)
        for pragma in ("journal_mode=OFF", "synchronous=OFF", "cache_size=-16000"):
            db.execute(f"PRAGMA {pragma}")
        db.execute("CREATE TABLE seen (url TEXT PRIMARY KEY) WITHOUT ROWID")
        insert = "INSERT OR IGNORE INTO seen VALUES (?)"
        for line in lines:
            if db.execute(insert, (line,)).rowcount:
                yield line
    finally:
        db.close()


def _mkstemp(directory: str | None, private: bool = False) -> tuple[int, str]:
    """A temporary file beside the output, with the mode a new file would get (mkstemp's is
    0600, and the file is renamed into place); 0600 for a crawl that sends credentials."""
    fd, tmp = tempfile.mkstemp(prefix=".sitemap-", suffix=".tmp", dir=directory)
    os.fchmod(fd, temp_mode(private))
    return fd, tmp


class _Part:
    """A sitemap being written to a temporary file."""

    def __init__(self, directory: str | None, private: bool = False) -> None:
        fd, self.tmp = _mkstemp(directory, private)
        self.fh: IO[bytes] = os.fdopen(fd, "wb")
        self.fh.write(_URLSET[0])
        self.size = len(_URLSET[0]) + len(_URLSET[1])
        self.count = 0

    def fits(self, entry: bytes, max_urls: int, max_bytes: int) -> bool:
        return self.count < max_urls and self.size + len(entry) <= max_bytes

    def add(self, entry: bytes) -> None:
        self.fh.write(entry)
        self.size += len(entry)
        self.count += 1

    def finish(self) -> None:
        self.fh.write(_URLSET[1])
        self.fh.close()


def write_sitemaps(
    urls: Iterable[str],
    path: str | None,
    *,
    stream: IO[bytes] | None = None,
    base: str | None = None,
    max_urls: int | None = None,
    max_bytes: int | None = None,
    private: bool = False,
) -> SitemapResult:
    """Write ``urls`` (distinct, in order) as a sitemap at ``path``, or a sitemap index at
    ``path`` and its numbered sitemaps beside it when they do not fit in one file.

    Args:
        path: the output file; None: ``stream`` (one sitemap only).
        base: the origin the index's <loc>s start with (default: the first URL's origin).
        max_urls, max_bytes: per file (default: :data:`MAX_URLS`, :data:`MAX_BYTES`).
        private: the files are created 0600 (a crawl that sends credentials), not by umask.

    Raises:
        SitemapError: the URLs need more than one file and there is no ``path``.
        OSError: a file cannot be written (the temporary files are removed).
    """
    max_urls = MAX_URLS if max_urls is None else max_urls
    max_bytes = MAX_BYTES if max_bytes is None else max_bytes
    directory = (os.path.dirname(path) or ".") if path is not None else None
    listed = _listed_parts(path) if path is not None else []
    result = SitemapResult()
    parts: list[_Part] = []
    first: str | None = None
    try:
        part = _Part(directory, private)
        parts.append(part)
        for url in urls:
            text = loc(url)
            if text is None:
                result.skipped += 1
                continue
            first = first or url
            entry = b"<url><loc>" + text.encode("ascii") + b"</loc></url>\n"
            if part.count and not part.fits(entry, max_urls, max_bytes):
                if path is None:
                    raise SitemapError(
                        f"more than {max_urls:,} URLs or {max_bytes:,} bytes: a sitemap index"
                        " and its sitemaps need an output file (--output FILE), not a stream"
                    )
                part.finish()
                part = _Part(directory, private)
                parts.append(part)
            part.add(entry)
            result.urls += 1
        part.finish()
        if path is None:
            with open(part.tmp, "rb") as fh:
                _copy(fh, stream)
            return result
        if len(parts) == 1:
            os.replace(part.tmp, path)
            result.files.append(path)
        else:
            names = []
            for number, part in enumerate(parts, 1):
                name = part_path(path, number)
                os.replace(part.tmp, name)
                names.append(name)
            _write_index(path, names, base or _origin(first or ""), directory, private)
            result.index = True
            result.files = [path, *names]
        _remove_stale(path, len(parts) if result.index else 0, listed)
        return result
    finally:
        for part in parts:
            if not part.fh.closed:
                part.fh.close()
            if os.path.exists(part.tmp):
                os.unlink(part.tmp)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/"


def _write_index(
    path: str, names: list[str], base: str, directory: str | None, private: bool = False
) -> None:
    if not base.endswith("/"):
        base += "/"
    fd, tmp = _mkstemp(directory, private)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(_INDEX[0])
            for name in names:
                text = loc(base + os.path.basename(name))
                if text is None:
                    raise SitemapError(
                        f"the sitemap URL {base + os.path.basename(name)!r} is too long"
                    )
                fh.write(b"<sitemap><loc>" + text.encode("ascii") + b"</loc></sitemap>\n")
            fh.write(_INDEX[1])
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _listed_parts(path: str) -> list[int]:
    """The numbers of our numbered sitemaps that the index now at ``path`` lists (none if it
    is not a sitemap index): the files an earlier build made, which only we may remove."""
    try:
        with open(path, "rb") as fh:
            if b"<sitemapindex" not in fh.read(512):
                return []
    except OSError:
        return []
    import xml.etree.ElementTree as ET  # noqa: PLC0415  (only for a sitemap)

    own = re.compile(re.escape(os.path.basename(_stem(path))) + r"-(\d+)\.xml")
    numbers = []
    try:
        for _, element in ET.iterparse(path):
            if element.tag == f"{{{NAMESPACE}}}loc" and element.text:
                match = own.fullmatch(urlsplit(element.text.strip()).path.rpartition("/")[2])
                if match:
                    numbers.append(int(match.group(1)))
            element.clear()
    except ET.ParseError:
        pass
    return numbers


def _remove_stale(path: str, kept: int, listed: list[int]) -> None:
    """Numbered sitemaps the earlier index listed past the ``kept`` ones: not listed now."""
    for number in listed:
        if number > kept:
            name = part_path(path, number)
            if os.path.isfile(name):
                os.unlink(name)


def _copy(src: IO[bytes], dst: IO[bytes] | None) -> None:
    if dst is None:
        raise SitemapError("no output: neither a path nor a stream")
    while chunk := src.read(1 << 16):
        dst.write(chunk)
    dst.flush()
