"""A page's links recorded as occurrences: compact columns, one item a link, no object kept.

The link checker (``crawler.check``) keeps every occurrence of every link until its report is
built (a link is known broken only once its target is checked). ``Occurrences`` holds them as
parallel ``array`` columns, each as narrow as its values allow (line and column 2 bytes, the
few tag/attribute pairs 1; a column is widened once when a value needs it: the narrowest
width that holds the page's values, 4 bytes at most, where a value past 2**32 or below 0 is
clamped), the target and raw value as ids (the strings interned once each), nofollow a byte,
and a page's occurrences together (runs of page id and first occurrence).

`Occurrences.take` records a page's links: for each, its target id (a URL already a target's
key is its own target, looked up; any other link goes to the caller's ``target_of``, which
canonicalises it and makes its target, or says it is none: -1), the raw value's and the
tag/attribute pair's ids, line, column and nofollow. Two twins with the same results
(columns, widths, ids, the calls of ``target_of`` and their order): the loop here, and
``crawler.urls._occur_c.take`` (compiled), which reads the compiled extractor's
``LinkRecord`` as it is kept (``LinkRecord.compact``: no Link made) and finds known targets
and raw values in its own hash tables (exact: a hit is compared with the interned string),
so that a page's links cost no Python object each. The compiled one is used unless
``CRAWLER_NO_EXTENSIONS`` is set or it is not built (``IMPLEMENTATION`` says which).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from crawler._twins import compiled

__all__ = ["IMPLEMENTATION", "Interner", "Occurrences", "TargetOf"]

#: ``target_of(url, raw)``: the target id of a link not found by its URL (None: not a URL),
#: or -1: no target (the link is not recorded).
TargetOf = Callable[[str | None, str], int]

# A column's widths, narrowest first: it is widened to the next one a value needs.
_WIDER = {"B": "H", "H": "I"}
_MAX = 0xFFFFFFFF  # a line or column past this is kept as this


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

    @property
    def strings(self) -> list[str]:
        """The strings by id, to be read (the compiled twin compares its hits with them)."""
        return self._strings

    def get(self, text: str) -> int | None:
        """The id of ``text`` if it is known, else None (nothing added)."""
        return self._ids.get(text)

    def __getitem__(self, index: int) -> str:
        return self._strings[index]


class Occurrences:
    """Every link occurrence of a run: (target id, page, line, column, tag/attr, raw,
    nofollow), in columns. Target ids are the caller's (an `Interner` of target keys); the
    pages, raw values and tag/attribute pairs are interned here."""

    __slots__ = ("_c", "_col", "_line", "_nofollow", "_raw", "_run_page", "_run_start",
                 "_tag_ids", "_tagattr", "_target", "pages", "raws", "tags")  # fmt: skip

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
        self._c: Any = None  # the compiled twin's hash tables (its own)

    def __len__(self) -> int:
        return len(self._target)

    def page_id(self, page: str) -> int:
        return self.pages.id(page)

    def take(
        self,
        page: int,
        links: Iterable[Any],
        targets: Interner,
        target_of: TargetOf,
        check_frags: bool,
    ) -> int:
        """Record the links of page ``page`` (from `page_id`); how many links were read
        (those ``target_of`` refused included). A link whose URL has no ``%`` or ``#`` (nor
        ``#`` in its raw value, with ``check_frags``) and is a key of ``targets`` has that
        target; ``target_of`` decides every other one. Compiled unless the pure twin is
        asked for (``CRAWLER_NO_EXTENSIONS``)."""
        if _take_c is not None:
            n: int = _take_c(self, page, links, targets, target_of, check_frags)
            return n
        return self.take_py(page, links, targets, target_of, check_frags)

    def take_py(
        self,
        page: int,
        links: Iterable[Any],
        targets: Interner,
        target_of: TargetOf,
        check_frags: bool,
    ) -> int:
        """`take` in Python (the reference twin)."""
        target_ids = targets.table
        tids: list[int] = []
        raws: list[str] = []
        tags: list[tuple[str, str]] = []
        lines: list[int] = []
        cols: list[int] = []
        nofollows: list[bool] = []
        n = 0
        for url, raw, tag, attr, nofollow, line, column in links:
            n += 1
            # A URL already known as a target's key is its own canonical form (canonical
            # forms are canonical again, unless a "%" decodes into a new escape: such URLs,
            # and those with a fragment to check, take the long way).
            tid = (
                None
                if url is None or "%" in url or "#" in url or (check_frags and "#" in raw)
                else target_ids.get(url)
            )
            if tid is None:
                tid = target_of(url, raw)
                if tid < 0:
                    continue
            tids.append(tid)
            raws.append(raw)
            tags.append((tag, attr))
            lines.append(line)
            cols.append(column)
            nofollows.append(nofollow)
        self.add_page(page, tids, lines, cols, tags, raws, nofollows)
        return n

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
        new_raw = self.raws.id
        raw_col = array("I", [new_raw(r) for r in raws])
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
                return array(code, values)
            except OverflowError:
                wider = _WIDER.get(code)
                if wider is None:
                    return array(code, [min(max(v, 0), _MAX) for v in values])
                code = wider
                setattr(self, name, array(code, column))
                column = getattr(self, name)


_c = (
    None
    if TYPE_CHECKING
    else compiled("crawler.urls._occur_c", "take", what="the compiled occurrences")
)
_take_c: Any = None if _c is None else _c[0]
IMPLEMENTATION = "py" if _take_c is None else "c"
