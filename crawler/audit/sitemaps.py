"""The site's sitemaps, as the audit reads them: the URLs they list (each with the sitemap and
line), the ``xhtml:link`` hreflang alternates of each, and sitemap indexes followed.

Parsed with expat (a real XML parser, streaming: a chunk at a time, with line numbers),
entity declarations refused (no entity expansion, so no "billion laughs"), gzip inflated as
it comes, every file bounded by ``max_body_bytes`` and the whole by ``MAX_SITEMAPS`` files
and ``MAX_URLS`` URLs (what was left out is said in ``notes``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from xml.parsers import expat

from crawler.audit.head import Annotation
from crawler.urls.policy import join

if TYPE_CHECKING:
    from crawler.http.client import Fetcher
    from crawler.http.response import Consumer, Response

__all__ = ["MAX_SITEMAPS", "MAX_URLS", "SitemapEntry", "SitemapParser", "Sitemaps"]

#: Sitemap files read at most (robots.txt's, --sitemap's and the indexes' together).
MAX_SITEMAPS = 1000
#: URLs kept at most, all sitemaps together.
MAX_URLS = 5_000_000
_NS_SITEMAP = "http://www.sitemaps.org/schemas/sitemap/0.9"
_NS_XHTML = "http://www.w3.org/1999/xhtml"
_REDIRECTS = frozenset({301, 302, 303, 307, 308})


class SitemapError(Exception):
    """A sitemap that is not well-formed XML, or that declares entities."""


@dataclass(slots=True)
class SitemapEntry:
    """One ``<url>`` of a sitemap: its ``<loc>``, where it stands, its alternates."""

    loc: str
    sitemap: str
    line: int
    column: int
    alternates: list[Annotation] = field(default_factory=list)


class SitemapParser:
    """One sitemap file, fed a chunk at a time: ``entries`` (a urlset's ``<url>``s) and
    ``children`` (an index's ``<sitemap><loc>``s, with their lines)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.entries: list[SitemapEntry] = []
        self.children: list[tuple[str, int]] = []
        self._parser = p = expat.ParserCreate(namespace_separator=" ")
        p.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        p.EntityDeclHandler = self._entity
        p.StartElementHandler = self._start
        p.EndElementHandler = self._end
        p.CharacterDataHandler = self._text
        self._path: list[str] = []
        self._buf: list[str] = []
        self._entry: SitemapEntry | None = None
        self._where = (0, 0)
        self._gunzip: zlib._Decompress | None = None
        self._first = True

    def _entity(self, *_: object) -> None:
        raise SitemapError("the sitemap declares entities (refused)")

    def _start(self, name: str, attrs: dict[str, str]) -> None:
        self._path.append(name)
        self._buf.clear()
        p = self._parser
        where = (p.CurrentLineNumber, p.CurrentColumnNumber + 1)
        if name == f"{_NS_SITEMAP} url":
            self._entry = SitemapEntry("", self.url, *where)
        elif name == f"{_NS_SITEMAP} loc":
            self._where = where
        elif name == f"{_NS_XHTML} link" and self._entry is not None:
            rel = attrs.get("rel", "").lower().split()
            if "alternate" in rel and "hreflang" in attrs and "href" in attrs:
                self._entry.alternates.append(
                    Annotation(attrs["href"].strip(), *where, attrs["hreflang"].strip(), "sitemap")
                )

    def _end(self, name: str) -> None:
        self._path.pop()
        if name == f"{_NS_SITEMAP} loc":
            loc = "".join(self._buf).strip()
            parent = self._path[-1] if self._path else ""
            if parent == f"{_NS_SITEMAP} url" and self._entry is not None:
                self._entry.loc = loc
                self._entry.line, self._entry.column = self._where
            elif parent == f"{_NS_SITEMAP} sitemap" and loc:
                self.children.append((loc, self._where[0]))
        elif name == f"{_NS_SITEMAP} url" and self._entry is not None:
            if self._entry.loc:
                self.entries.append(self._entry)
            self._entry = None
        self._buf.clear()

    def _text(self, data: str) -> None:
        self._buf.append(data)

    def feed(self, chunk: bytes) -> None:
        """Parse a chunk (gzip is inflated when the file starts with its magic)."""
        if self._first:
            self._first = False
            if chunk[:2] == b"\x1f\x8b":
                self._gunzip = zlib.decompressobj(wbits=47)
        if self._gunzip is not None:
            chunk = self._gunzip.decompress(chunk)
        try:
            self._parser.Parse(chunk, False)
        except expat.ExpatError as exc:
            raise SitemapError(f"not well-formed XML: {exc}") from exc

    def close(self) -> None:
        try:
            self._parser.Parse(b"", True)
        except expat.ExpatError as exc:
            raise SitemapError(f"not well-formed XML: {exc}") from exc


class Sitemaps:
    """Every sitemap read for an audit: its entries by canonical URL, and notes (files that
    failed, limits reached).

    Args:
        fetcher: the fetcher to GET them with (the audit's prober's: its politeness, its
            address guard).
        canonical: the crawl's canonical form (None: not an http(s) URL).
        in_scope: whether a sitemap URL is the crawl's to read.
        max_bytes: the cap of one file, inflated (``max_body_bytes``).
        max_redirects: redirects followed for one file.
    """

    def __init__(
        self,
        fetcher: Fetcher,
        canonical: Callable[[str], str | None],
        in_scope: Callable[[str], bool],
        *,
        max_bytes: int,
        max_redirects: int,
    ) -> None:
        self.fetcher = fetcher
        self._canonical = canonical
        self._in_scope = in_scope
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.entries: dict[str, SitemapEntry] = {}
        self.files: list[str] = []
        self.notes: list[str] = []

    async def read_all(self, urls: list[str]) -> None:
        """Read ``urls`` and the sitemaps their indexes name, breadth first, each once."""
        todo = list(dict.fromkeys(urls))
        seen = set(todo)
        while todo:
            url = todo.pop(0)
            if len(self.files) >= MAX_SITEMAPS:
                self.notes.append(f"more than {MAX_SITEMAPS} sitemaps: the rest not read")
                return
            if not self._in_scope(url):
                self.notes.append(f"sitemap {url} is out of the crawl's scope: not read")
                continue
            parser = await self._read(url)
            if parser is None:
                continue
            self.files.append(url)
            for entry in parser.entries:
                canon = self._canonical(entry.loc)
                if canon is None:
                    self.notes.append(f"{url}:{entry.line}: <loc> {entry.loc!r} is not a URL")
                    continue
                if len(self.entries) >= MAX_URLS:
                    self.notes.append(f"more than {MAX_URLS} sitemap URLs: the rest not kept")
                    return
                self.entries.setdefault(canon, entry)
            for child, _line in parser.children:
                canon = self._canonical(child)
                if canon is not None and canon not in seen:
                    seen.add(canon)
                    todo.append(canon)

    async def _read(self, url: str) -> SitemapParser | None:
        current = url
        for _hop in range(self.max_redirects + 1):
            download = _Download(SitemapParser(url))
            parser, failure = download.parser, download.failure
            res = await self.fetcher.fetch(current, download.on_headers, max_bytes=self.max_bytes)
            if res.status in _REDIRECTS and res.location and res.error is None:
                target = join(current, res.location)
                nxt = self._canonical(target) if target else None
                if nxt is None or not self._in_scope(nxt):
                    self.notes.append(f"sitemap {url} redirects off the site: not read")
                    return None
                current = nxt
                continue
            if res.error is not None or res.status != 200:
                why = res.error_detail or res.error or f"HTTP {res.status}"
                self.notes.append(f"sitemap {url} could not be read: {why}")
                return None
            if not failure:
                try:
                    parser.close()
                except SitemapError as exc:
                    failure.append(str(exc))
            if failure:
                self.notes.append(f"sitemap {url}: {failure[0]}")
                return None
            return parser
        self.notes.append(f"sitemap {url}: more than {self.max_redirects} redirects")
        return None


class _Download:
    """One sitemap file's body into its parser; a parse failure kept (the rest is ignored)."""

    def __init__(self, parser: SitemapParser) -> None:
        self.parser = parser
        self.failure: list[str] = []

    def on_headers(self, res: Response) -> Consumer | None:
        status = res.status
        return self.consume if status is not None and 200 <= status < 300 else None

    def consume(self, chunk: bytes) -> None:
        if self.failure:
            return
        try:
            self.parser.feed(chunk)
        except SitemapError as exc:
            self.failure.append(str(exc))
