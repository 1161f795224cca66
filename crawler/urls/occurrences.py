"""A page's links recorded as occurrences: compact columns, one item a link, no object kept.

The link checker (``crawler.check``) keeps every occurrence of every link until its report is
built (a link is known broken only once its target is checked). ``Occurrences`` holds them as
parallel ``array`` columns, each as narrow as its values allow (target and raw ids 2 bytes,
the few tag/attribute pairs 1; such a column is widened once when a value needs it: the
narrowest width that holds the page's values, 4 bytes at most), line and column delta-coded
within a page's run (`_positions`: the line as the step from the run's previous link, 1
byte; the column as the step from the previous link's when on its line, else itself, 2
bytes; one that does not fit is kept whole in a side table, so a few long lines or pages
never widen a column; a value past 2**32 or below 0 is clamped), the target and raw value
as ids (the strings interned once each: the raw values, compiled, as bytes in one buffer,
`new_texts`), nofollow a byte, and a page's occurrences together (runs of page id and first
occurrence).

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
from bisect import bisect_left, bisect_right
from collections import deque
from collections.abc import Callable, Iterable
from itertools import compress, repeat
from typing import TYPE_CHECKING, Any

from crawler._twins import compiled

__all__ = ["IMPLEMENTATION", "Interner", "Occurrences", "TargetOf", "new_texts"]

#: ``target_of(url, raw)``: the target id of a link not found by its URL (None: not a URL),
#: or -1: no target (the link is not recorded).
TargetOf = Callable[[str | None, str], int]

# A column's widths, narrowest first: it is widened to the next one a value needs.
_WIDER = {"B": "H", "H": "I"}
_MAX = 0xFFFFFFFF  # a line or column past this is kept as this
_LINE_ESCAPE = 0xFF  # a line step from this on (or back): the line in the side table
_COL_ESCAPE = 0xFFFF  # a column (step) from this on: the column in the side table
_FLIP = bytes.maketrans(b"\0\1", b"\1\0")  # nofollow 0/1 -> followed 1/0


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

    __slots__ = ("_at", "_c", "_col", "_col_wide", "_col_wide_at", "_line", "_line_wide",
                 "_line_wide_at", "_nofollow", "_raw", "_run_page", "_run_start", "_tag_ids",
                 "_tagattr", "_target", "pages", "raws", "tags")  # fmt: skip

    def __init__(self) -> None:
        self._target = array("H")  # widened to "I" by the first id past 65,535
        # a page's occurrences are together: runs of (page id, index of its first occurrence)
        self._run_page = array("I")
        self._run_start = array("Q")
        # line and column delta-coded in a run (`_positions`), never widened: a step that
        # does not fit is _LINE_ESCAPE / _COL_ESCAPE here, its row (ascending) in *_wide_at
        # and its whole value in *_wide
        self._line = array("B")
        self._col = array("H")
        self._at = (0, 0)  # the (line, column) of the last run's last link
        self._line_wide_at = array("Q")
        self._line_wide = array("I")
        self._col_wide_at = array("Q")
        self._col_wide = array("I")
        self._tagattr = array("B")  # tag/attr ids (a few dozen): widened past 255
        self._raw = array("H")  # (as the targets')
        self._nofollow = array("B")  # the link's rel has nofollow (an audit's graph reads it)
        self.pages = Interner()
        self.raws = new_texts()  # the raw values: compiled, their bytes in one buffer
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
        if not self._run_page or self._run_page[-1] != page:
            self._run_page.append(page)
            self._run_start.append(len(self._target))
            self._at = (0, 0)
        line_col, col_col = self._positions(lines, columns)
        tag_ids = self._tag_ids
        tag_list: list[int] = []
        for pair in tag_attrs:
            tid = tag_ids.get(pair)
            if tid is None:
                tid = tag_ids[pair] = self.tags.id(f"{pair[0]}\0{pair[1]}")
            tag_list.append(tid)
        tag_col = self._fit("_tagattr", tag_list)
        new_raw = self.raws.id
        raw_col = self._fit("_raw", [new_raw(r) for r in raws])
        target_col = self._fit("_target", targets)
        self._target.extend(target_col)
        self._line.extend(line_col)
        self._col.extend(col_col)
        self._tagattr.extend(tag_col)
        self._raw.extend(raw_col)
        self._nofollow.extend(array("B", nofollows))

    # -- read back in a pass (the report's): compiled, or the reference twins below --

    def position(self, row: int) -> tuple[int, int]:
        """The (line, column) of occurrence ``row`` (its run decoded)."""
        run = bisect_right(self._run_start, row) - 1
        lines, columns = self.decode(run, run + 1)
        at = row - self._run_start[run]
        return lines[at], columns[at]

    def positions(self) -> tuple[array[int], array[int]]:
        """Every occurrence's line and column, in order, as 4-byte columns made for the
        caller (a batch's: the disk graph's flush)."""
        return self.decode(0, len(self._run_start))

    def decode(self, first: int, last: int) -> tuple[array[int], array[int]]:
        """The lines and columns ("I") of the occurrences of runs ``first`` to ``last``
        (excluded), from the delta-coded columns and their side tables. Compiled unless
        the pure twin is asked for."""
        if _decode_c is not None:
            found: tuple[array[int], array[int]] = _decode_c(self, first, last)
            return found
        return self.decode_py(first, last)

    def decode_py(self, first: int, last: int) -> tuple[array[int], array[int]]:
        """`decode` in Python (the reference twin)."""
        starts, n = self._run_start, len(self._target)
        lines, columns = array("I"), array("I")
        if first >= last:
            return lines, columns
        start = starts[first]
        end = starts[last] if last < len(starts) else n
        lw = bisect_left(self._line_wide_at, start)
        cw = bisect_left(self._col_wide_at, start)
        run_ends = iter([*starts[first + 1 : last], end])
        next_start = start
        line = column = 0
        for row in range(start, end):
            if row == next_start:
                line = column = 0
                next_start = next(run_ends)
            step = self._line[row]
            if step == _LINE_ESCAPE:
                new_line = self._line_wide[lw]
                lw += 1
            else:
                new_line = line + step
            step = self._col[row]
            if step == _COL_ESCAPE:
                column = self._col_wide[cw]
                cw += 1
            else:
                column = column + step if new_line == line else step
            line = new_line
            lines.append(line)
            columns.append(column)
        return lines, columns

    def rows_of(self, wanted: bytearray) -> Iterable[int]:
        """The indexes of the occurrences whose target id is wanted (``wanted[id]`` true;
        an id past its end is not), in order."""
        if _rows_of_c is not None:
            rows: Iterable[int] = _rows_of_c(self, wanted)
            return rows
        column = self._target
        if column and max(column) >= len(wanted):
            wanted = wanted + bytes(max(column) + 1 - len(wanted))
        return compress(range(len(column)), map(wanted.__getitem__, column))

    def walk(
        self,
        node_of_tid: array[int],
        node_of_page: array[int],
        linked: bytearray,
        outlinks: array[int],
        inlinks: array[int],
        followed: array[int],
    ) -> int:
        """The link graph's counts in one pass over the runs (a page's links together):
        each target some run links is marked in ``linked``; a page's node (``node_of_page``,
        -1: none) gets in ``outlinks`` the distinct targets of its run; each node (of a
        target: ``node_of_tid``) a run links, the page's own excepted, gets 1 in
        ``inlinks``, and 1 in ``followed`` when one of those links is not nofollow. The
        counts' arrays ("I") have a last slot for the targets of no node (-1). Returns the
        distinct (run, target) pairs. Compiled unless the pure twin is asked for."""
        if _walk_c is not None:
            edges: int = _walk_c(self, node_of_tid, node_of_page, linked, outlinks, inlinks,
                                 followed)  # fmt: skip
            return edges
        return self.walk_py(node_of_tid, node_of_page, linked, outlinks, inlinks, followed)

    def walk_py(
        self,
        node_of_tid: array[int],
        node_of_page: array[int],
        linked: bytearray,
        outlinks: array[int],
        inlinks: array[int],
        followed: array[int],
    ) -> int:
        """`walk` in Python (the reference twin): a set a run."""
        target, nofollow, starts = self._target, self._nofollow, self._run_start
        ends = [*starts[1:], len(target)] if starts else []
        mark = linked.__setitem__
        node_at = node_of_tid.__getitem__
        edges = 0
        for page, start, end in zip(self._run_page, starts, ends, strict=True):
            source = node_of_page[page]
            distinct = set(target[start:end])
            deque(map(mark, distinct, repeat(1)), 0)
            edges += len(distinct)
            if source >= 0:
                outlinks[source] += len(distinct)
            nodes = set(map(node_at, distinct))
            nodes.discard(source)
            for node in nodes:
                inlinks[node] += 1
            follow = nofollow[start:end].tobytes().translate(_FLIP)
            nodes = set(map(node_at, set(compress(target[start:end], follow))))
            nodes.discard(source)
            for node in nodes:
                followed[node] += 1
        return edges

    def depths(
        self, node_of_tid: array[int], node_of_page: array[int], seeds: list[int], size: int
    ) -> array[int]:
        """Each node's clicks from the ``seeds`` nodes (ids below ``size``; the result has
        ``size + 1`` slots, -1: unreached), breadth first over the runs: a page's runs read
        again from the columns when its node is reached. Compiled unless the pure twin is
        asked for."""
        if _depths_c is not None:
            found: array[int] = _depths_c(self, node_of_tid, node_of_page, seeds, size)
            return found
        return self.depths_py(node_of_tid, node_of_page, seeds, size)

    def depths_py(
        self, node_of_tid: array[int], node_of_page: array[int], seeds: list[int], size: int
    ) -> array[int]:
        """`depths` in Python (the reference twin): a level at a time, a set a run."""
        target, starts = self._target, self._run_start
        ends = [*starts[1:], len(target)] if starts else []
        depth = array("i", [-1]) * (size + 1)
        unreached = bytearray(b"\1") * size + b"\0"  # the last: no node (-1)
        first_run = array("i", [-1]) * (size + 1)  # a node's runs, linked: next_run
        next_run = array("i", [-1]) * len(starts)
        for run, page in enumerate(self._run_page):
            source = node_of_page[page]
            if source >= 0:
                next_run[run] = first_run[source]
                first_run[source] = run
        level = array("i")
        for node_id in seeds:
            if 0 <= node_id < size and unreached[node_id]:
                unreached[node_id] = depth[node_id] = 0
                level.append(node_id)
        node_at = node_of_tid.__getitem__
        d = 0
        while level:
            d += 1
            below = array("i")
            for page in level:
                run = first_run[page]
                while run >= 0:
                    linked = set(map(node_at, set(target[starts[run] : ends[run]])))
                    new = list(compress(linked, map(unreached.__getitem__, linked)))
                    deque(map(unreached.__setitem__, new, repeat(0)), 0)
                    deque(map(depth.__setitem__, new, repeat(d)), 0)
                    below.extend(new)
                    run = next_run[run]
            level = below
        return depth

    def _positions(self, lines: list[int], columns: list[int]) -> tuple[array[int], array[int]]:
        """A page's lines and columns (rows from the current end on, in the run begun)
        delta-coded: the line as the step from the previous link's (the run's first from
        0), the column as the step from the previous link's when on the same line, else
        itself; one that does not fit (or goes back) kept whole in the side table, the
        column holding the escape. Values are clamped to 0 .. 2**32 - 1 first."""
        line_at, col_at = self._at
        base = len(self._target)
        line_steps: list[int] = []
        col_steps: list[int] = []
        for k, (line, column) in enumerate(zip(lines, columns, strict=True)):
            line = min(max(line, 0), _MAX)
            column = min(max(column, 0), _MAX)
            step = line - line_at
            if 0 <= step < _LINE_ESCAPE:
                line_steps.append(step)
            else:
                line_steps.append(_LINE_ESCAPE)
                self._line_wide_at.append(base + k)
                self._line_wide.append(line)
            step = column - col_at if line == line_at else column
            if 0 <= step < _COL_ESCAPE:
                col_steps.append(step)
            else:
                col_steps.append(_COL_ESCAPE)
                self._col_wide_at.append(base + k)
                self._col_wide.append(column)
            line_at, col_at = line, column
        self._at = (line_at, col_at)
        return array("B", line_steps), array("H", col_steps)

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
_tables = (
    None
    if TYPE_CHECKING
    else compiled("crawler.urls._tables_c", "Texts", what="the compiled occurrences' tables")
)
_read = (
    None
    if TYPE_CHECKING
    else compiled(
        "crawler.urls._occur_read_c",
        "rows_of",
        "walk",
        "depths",
        "decode",
        what="the compiled occurrences' readers",
    )
)
_take_c: Any = None if _c is None else _c[0]
_texts_c: Any = None if _c is None or _tables is None else _tables[0]
_rows_of_c: Any = None if _read is None else _read[0]
_walk_c: Any = None if _read is None else _read[1]
_depths_c: Any = None if _read is None else _read[2]
_decode_c: Any = None if _read is None else _read[3]


def new_texts() -> Interner:
    """An interner for raw values: the compiled ``Texts`` (the strings' UTF-8 bytes end to
    end in one buffer, found by a hash table of them: no Python object a string, about
    half the bytes of a ``str`` and a dict entry each), else an `Interner`. The same ids in the
    same order either way, the same strings read back."""
    return Interner() if _texts_c is None else _texts_c()


IMPLEMENTATION = "py" if _take_c is None else "c"
