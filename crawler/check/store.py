"""Where every link stands, kept compactly until the end of a check run.

A link is known broken only once its target has been checked, often long after the page
that links it was parsed, so every occurrence of every link is kept until the report is
built. Kept as `Occurrence` objects that would be ~200 bytes each (a 100k-page site with
100 links a page: 10 million, 2 GB and more). Here an occurrence is a few machine integers
in parallel ``array`` columns, each as narrow as its values allow (a line or column below
65,536 in 2 bytes, the few tag/attribute pairs in 1; a column is widened once when a value
needs it), and its nofollow flag (a byte: the audit's link graph reads it): about 14 bytes.
A page's occurrences are kept together, so the page is a run (page id, first occurrence)
rather than a column. The strings an occurrence names (the target, the page, the
tag/attribute pair, the raw value) are interned once each: memory grows with the distinct
strings, plus ~14 bytes an occurrence. At the end one pass over the columns picks the
occurrences of the targets that are reported.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from itertools import chain, repeat

from crawler.check.model import Occurrence

__all__ = ["Interner", "OccurrenceStore"]

# A column's widths, narrowest first: it is widened to the next one a value needs.
_WIDER = {"B": "H", "H": "I"}
_MAX = 0xFFFFFFFF  # a line or column past this is kept as this


def _column(values: list[int], typecode: str) -> array[int]:
    """``values`` as an array of ``typecode`` (OverflowError: one does not fit)."""
    return array(typecode, values)


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
        "_run_page",
        "_run_start",
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
        # a page's occurrences are together: runs of (page id, index of its first occurrence)
        self._run_page = array("I")
        self._run_start = array("Q")
        self._line = array("H")  # widened to "I" by the first line past 65,535
        self._col = array("H")
        self._tagattr = array("B")  # tag/attr ids (a few dozen): widened past 255
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
        self.add_page(page, [target], [line], [column], [(tag, attr)], [raw], [nofollow])

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
        if not targets:
            return
        line_col = self._fit("_line", lines)
        col_col = self._fit("_col", columns)
        tag_ids = self._tag_ids
        tag_list: list[int] = []
        for pair in tag_attrs:
            tid = tag_ids.get(pair)
            if tid is None:
                tid = tag_ids[pair] = self.tags.id(f"{pair[0]}\0{pair[1]}")
            tag_list.append(tid)
        tag_col = self._fit("_tagattr", tag_list)
        raw_ids = self.raws.table
        new_raw = self.raws.id
        raw_col = array("I", [raw_ids.get(r) or new_raw(r) for r in raws])
        if not self._run_page or self._run_page[-1] != page:
            self._run_page.append(page)
            self._run_start.append(len(self._target))
        self._target.extend(array("I", targets))
        self._line.extend(line_col)
        self._col.extend(col_col)
        self._tagattr.extend(tag_col)
        self._raw.extend(raw_col)
        self._nofollow.extend(array("B", nofollows))

    def _fit(self, name: str, values: list[int]) -> array[int]:
        """``values`` as an array the column ``name`` can take, the column widened first if
        one needs it (and values past 2**32 or below 0 clamped)."""
        column: array[int] = getattr(self, name)
        code: str = column.typecode
        while True:
            try:
                return _column(values, code)
            except OverflowError:
                wider = _WIDER.get(code)
                if wider is None:
                    return _column([min(max(v, 0), _MAX) for v in values], code)
                code = wider
                setattr(self, name, array(code, column))
                column = getattr(self, name)

    def _pages(self) -> Iterator[int]:
        """The page id of each occurrence, in order (the runs expanded)."""
        starts = self._run_start
        if not starts:
            return iter(())
        ends = [*starts[1:], len(self._target)]
        return chain.from_iterable(
            repeat(page, end - start)
            for page, start, end in zip(self._run_page, starts, ends, strict=True)
        )

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
        for i, (target, page) in enumerate(zip(column_t, self._pages(), strict=True)):
            group = groups.get(target)
            if group is None:
                continue
            tag, _, attr = tags[self._tagattr[i]].partition("\0")
            found[group].append(
                Occurrence(
                    page=pages[page],
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
        return zip(
            self._pages(), self._target, self._tagattr, map(bool, self._nofollow), strict=True
        )

    def tag_attr(self, tag_id: int) -> tuple[str, str]:
        """The (tag, attribute) of a tag/attr id of `edges`."""
        tag, _, attr = self.tags[tag_id].partition("\0")
        return tag, attr

    def nbytes(self) -> int:
        """Bytes held by the occurrence columns (not the interned strings)."""
        cols = (
            self._target,
            self._run_page,
            self._run_start,
            self._line,
            self._col,
            self._tagattr,
            self._raw,
            self._nofollow,
        )
        return sum(c.itemsize * c.buffer_info()[1] for c in cols)
