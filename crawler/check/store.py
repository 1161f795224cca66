"""Where every link stands, kept compactly until the end of a check run.

A link is known broken only once its target has been checked, often long after the page
that links it was parsed, so every occurrence of every link is kept until the report is
built. Kept as `Occurrence` objects that would be ~200 bytes each (a 100k-page site with
100 links a page: 10 million, 2 GB and more). Here an occurrence is six machine integers in
parallel ``array`` columns (24 bytes) and its nofollow flag (a byte: the audit's link graph
reads it), and the strings it names (the target, the page, the tag/attribute pair, the raw
value) are interned once each: memory grows with the distinct strings, plus 25 bytes an
occurrence. At the end one pass over the columns picks the
occurrences of the targets that are reported.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

from crawler.check.model import Occurrence

__all__ = ["Interner", "OccurrenceStore"]


class Interner:
    """Strings to small ints and back: each distinct string is held once."""

    __slots__ = ("_ids", "_strings")

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._strings: list[str] = []

    def __len__(self) -> int:
        return len(self._strings)

    def id(self, text: str) -> int:
        """The id of ``text`` (new ones get the next id)."""
        ids = self._ids
        found = ids.get(text)
        if found is None:
            found = ids[text] = len(self._strings)
            self._strings.append(text)
        return found

    @property
    def table(self) -> dict[str, int]:
        """The string -> id table itself, to be read (a hot loop's ``get``); not changed."""
        return self._ids

    def get(self, text: str) -> int | None:
        """The id of ``text`` if it is known, else None (nothing added)."""
        return self._ids.get(text)

    def __getitem__(self, index: int) -> str:
        return self._strings[index]


class OccurrenceStore:
    """Every link occurrence of a run: (target id, page, line, column, tag/attr, raw).

    Target ids are the caller's (an `Interner` of target keys); the rest is interned here.
    """

    __slots__ = (
        "_col",
        "_line",
        "_nofollow",
        "_page",
        "_raw",
        "_tag_ids",
        "_tagattr",
        "_target",
        "pages",
        "raws",
        "tags",
    )

    def __init__(self) -> None:
        self._target = array("I")
        self._page = array("I")
        self._line = array("I")
        self._col = array("I")
        self._tagattr = array("I")
        self._raw = array("I")
        self._nofollow = array("B")  # the link's rel has nofollow (an audit's graph reads it)
        self.pages = Interner()
        self.raws = Interner()
        self.tags = Interner()  # "tag\0attr"
        self._tag_ids: dict[tuple[str, str], int] = {}  # (tag, attr) -> its id in tags

    def __len__(self) -> int:
        return len(self._target)

    def page_id(self, page: str) -> int:
        return self.pages.id(page)

    def add(
        self,
        target: int,
        page: int,
        line: int,
        column: int,
        tag: str,
        attr: str,
        raw: str,
        nofollow: bool = False,
    ) -> None:
        """Keep one occurrence (``page`` from `page_id`)."""
        self._target.append(target)
        self._page.append(page)
        self._line.append(min(max(line, 0), 0xFFFFFFFF))
        self._col.append(min(max(column, 0), 0xFFFFFFFF))
        self._tagattr.append(self.tags.id(f"{tag}\0{attr}"))
        self._raw.append(self.raws.id(raw))
        self._nofollow.append(nofollow)

    def add_page(
        self,
        page: int,
        targets: list[int],
        lines: list[int],
        columns: list[int],
        tag_attrs: list[tuple[str, str]],
        raws: list[str],
        nofollows: list[bool],
    ) -> None:
        """Keep the occurrences of one page at once (``page`` from `page_id`; the lists in
        parallel, one item an occurrence): the same as `add` for each, a column extended
        once a page rather than seven appends a link."""
        try:
            line_col = array("I", lines)
        except OverflowError:  # (a line past 2**32: kept clamped, as `add` keeps it)
            line_col = array("I", [min(max(v, 0), 0xFFFFFFFF) for v in lines])
        try:
            col_col = array("I", columns)
        except OverflowError:
            col_col = array("I", [min(max(v, 0), 0xFFFFFFFF) for v in columns])
        tag_ids = self._tag_ids
        tag_col = array("I")
        for pair in tag_attrs:
            tid = tag_ids.get(pair)
            if tid is None:
                tid = tag_ids[pair] = self.tags.id(f"{pair[0]}\0{pair[1]}")
            tag_col.append(tid)
        raw_ids = self.raws.table
        new_raw = self.raws.id
        raw_col = array("I", [raw_ids.get(r) or new_raw(r) for r in raws])
        self._target.extend(array("I", targets))
        self._page.extend(array("I", [page]) * len(targets))
        self._line.extend(line_col)
        self._col.extend(col_col)
        self._tagattr.extend(tag_col)
        self._raw.extend(raw_col)
        self._nofollow.extend(array("B", nofollows))

    def select(self, groups: dict[int, int]) -> dict[int, list[Occurrence]]:
        """The occurrences of the targets in ``groups`` (target id -> group id), by group.

        One pass over the columns, so each group's list is in the order of crawling.
        """
        found: dict[int, list[Occurrence]] = {g: [] for g in groups.values()}
        if not groups:
            return found
        tags = self.tags
        pages = self.pages
        raws = self.raws
        column_t = self._target
        for i, target in enumerate(column_t):
            group = groups.get(target)
            if group is None:
                continue
            tag, _, attr = tags[self._tagattr[i]].partition("\0")
            found[group].append(
                Occurrence(
                    page=pages[self._page[i]],
                    line=self._line[i],
                    column=self._col[i],
                    tag=tag,
                    attr=attr,
                    raw=raws[self._raw[i]],
                )
            )
        return found

    def edges(self) -> Iterator[tuple[int, int, int, bool]]:
        """Every occurrence as (page id, target id, tag/attr id, nofollow), in crawl order:
        the link graph's edges, a page's links together."""
        return zip(self._page, self._target, self._tagattr, map(bool, self._nofollow), strict=True)

    def tag_attr(self, tag_id: int) -> tuple[str, str]:
        """The (tag, attribute) of a tag/attr id of `edges`."""
        tag, _, attr = self.tags[tag_id].partition("\0")
        return tag, attr

    def nbytes(self) -> int:
        """Bytes held by the occurrence columns (not the interned strings)."""
        cols = (self._target, self._page, self._line, self._col, self._tagattr, self._raw)
        return self._nofollow.buffer_info()[1] + sum(c.itemsize * c.buffer_info()[1] for c in cols)
