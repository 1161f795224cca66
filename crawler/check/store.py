"""Where every link stands, kept compactly until the end of a check run.

A link is known broken only once its target has been checked, often long after the page
that links it was parsed, so every occurrence of every link is kept until the report is
built. Kept as `Occurrence` objects that would be ~200 bytes each (a 100k-page site with
100 links a page: 10 million, 2 GB and more). Here an occurrence is a few machine integers
in parallel ``array`` columns, each as narrow as its values allow (the line and column
delta-coded within a page, 1 and 2 bytes, those that do not fit in a side table; the few
tag/attribute pairs in 1, widened once when a value needs it), and its nofollow flag (a
byte: the audit's link graph reads it): about 13 bytes.
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
from crawler.urls.occurrences import Interner, Occurrences

__all__ = ["Interner", "OccurrenceStore"]


class OccurrenceStore(Occurrences):
    """Every link occurrence of a run: (target id, page, line, column, tag/attr, raw).

    Target ids are the caller's (an `Interner` of target keys); the rest is interned here.
    The columns and how a page's links go in (``take``, compiled: no object a link) are
    `crawler.urls.occurrences.Occurrences`'; reading them back is here.
    """

    __slots__ = ()

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

        One pass over the columns, so each group's list is in the order of crawling; the
        occurrences of other targets are skipped in C (a byte a target id: `rows_of`), the
        page of each one kept found from the runs.
        """
        found: dict[int, list[Occurrence]] = {g: [] for g in groups.values()}
        column_t = self._target
        if not groups or not column_t:
            return found
        wanted = bytearray(max(groups) + 1)
        for target in groups:
            wanted[target] = 1
        pages = self.pages
        # a raw value (decoded from its bytes, compiled) and a tag/attr pair made once a
        # select, shared by its places as the interned strings were
        raws: dict[int, str] = {}
        tags: dict[int, tuple[str, str]] = {}
        starts = self._run_start
        run_page = self._run_page
        last_run = len(starts) - 1
        run = 0
        decoded = -1  # the run whose positions are in lines, columns (compiled: `decode`)
        lines = columns = array("I")
        for i in self.rows_of(wanted):
            while run < last_run and starts[run + 1] <= i:
                run += 1
            if decoded != run:
                lines, columns = self.decode(run, run + 1)
                decoded = run
            tag_id, raw_id = self._tagattr[i], self._raw[i]
            tag = tags.get(tag_id)
            if tag is None:
                tag = tags[tag_id] = self.tag_attr(tag_id)
            raw = raws.get(raw_id)
            if raw is None:
                raw = raws[raw_id] = self.raws[raw_id]
            found[groups[column_t[i]]].append(
                Occurrence(
                    page=pages[run_page[run]],
                    line=lines[i - starts[run]],
                    column=columns[i - starts[run]],
                    tag=tag[0],
                    attr=tag[1],
                    raw=raw,
                )
            )
        return found

    def edges(self) -> Iterator[tuple[int, int, int, bool]]:
        """Every occurrence as (page id, target id, tag/attr id, nofollow), in crawl order:
        the link graph's edges, a page's links together."""
        return zip(
            self._pages(), self._target, self._tagattr, map(bool, self._nofollow), strict=True
        )

    def target_ids(self) -> array[int]:
        """The target id of each occurrence, in crawl order (the column itself: not to be
        changed)."""
        return self._target

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
            self._line_wide_at,
            self._line_wide,
            self._col_wide_at,
            self._col_wide,
        )
        return sum(c.itemsize * c.buffer_info()[1] for c in cols)
