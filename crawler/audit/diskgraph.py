"""The audit's link graph on disk (``--state DIR``): every link occurrence in SQLite, so that a
site of millions of pages is audited without its links in memory.

Without ``--state`` the checker keeps its occurrences in memory columns (`OccurrenceStore`:
9 to 13 bytes a link, target and raw ids 2 or 4, line step 1, column 2, tag 1, nofollow 1;
plus its interned raw value). With it, `DiskOccurrences` takes a page's links the same way
(the same ``take``, compiled or not: the same target ids, the same calls of ``target_of``),
then moves the columns' rows into ``DIR/audit-graph.sqlite`` a batch of
pages at a time (one ``executemany`` in one transaction, no Python step a link: the rows are
``zip``ped from the columns) and empties them; the raw values interned for the batch are let
go too once there are many of them (the compiled twin's hash tables with them). What stays
in memory is one batch of links.

The report reads it back in SQL: each page's distinct targets, inlinks and the followed
inlinks by node as ``GROUP BY`` aggregates over the indexes (made once the crawl is over:
bulk inserts without them are faster), click depth as a breadth-first walk a level at a
time (a level's pages in a temporary table, the next level's nodes by one ``SELECT
DISTINCT``), and the places of a finding for its reported targets only (`select`). The
graph files read the links in crawl order (`edges`), a row at a time.

The file is the journal's derivative, not a state of its own: a run (a resumed one too)
starts it afresh, and the pages replayed from the checker's journal (``check-pages.jsonl``)
fill it as the pages of this run do, so a resumed audit reports what a run in one go does
(tests/test_audit_disk.py kills one and compares). Nothing in it needs to survive a kill:
``synchronous=OFF``, WAL.
"""

from __future__ import annotations

import os
import sqlite3
from array import array
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

from crawler.check.model import Occurrence
from crawler.check.store import OccurrenceStore
from crawler.urls.occurrences import Interner, TargetOf, new_texts

__all__ = ["GRAPH_DB", "DiskOccurrences"]

#: The file under the state directory.
GRAPH_DB = "audit-graph.sqlite"
#: Links kept in the columns before they go to the file (a few pages' worth).
BATCH_LINKS = 8192
#: Raw values interned before the interner (and the compiled twin's tables) start afresh.
MAX_RAWS = 65536
#: SQLite's page cache, KiB (its sorts and temporary tables spill to files past it): small,
#: since the pages written are not read again until the report (32 MB took back more than
#: the columns gave at 111,111 pages: benchmarks/AUDIT.md).
CACHE_KIB = 2048

_SCHEMA = """
CREATE TABLE link (
    seq INTEGER PRIMARY KEY,
    page INTEGER NOT NULL,
    target INTEGER NOT NULL,
    line INTEGER NOT NULL,
    col INTEGER NOT NULL,
    tag INTEGER NOT NULL,
    raw TEXT NOT NULL,
    nofollow INTEGER NOT NULL
);
"""
_INDEXES = """
CREATE INDEX IF NOT EXISTS link_page ON link (page, target, nofollow);
CREATE INDEX IF NOT EXISTS link_target ON link (target);
"""


class DiskOccurrences(OccurrenceStore):
    """`OccurrenceStore` with its rows moved to SQLite as the crawl goes.

    Args:
        path: the database file; an existing one (an earlier run's) is replaced.
    """

    __slots__ = ("_db", "_done", "_stored", "path")

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path
        for suffix in ("", "-wal", "-shm"):
            try:
                os.remove(path + suffix)
            except FileNotFoundError:
                pass
        self._db = sqlite3.connect(path, isolation_level=None)
        for pragma in (
            "journal_mode=WAL",
            "synchronous=OFF",
            "temp_store=FILE",
            f"cache_size=-{CACHE_KIB}",
        ):
            self._db.execute(f"PRAGMA {pragma}")
        self._db.executescript(_SCHEMA)
        self._stored = 0  # rows in the file
        self._done = False  # indexed: the crawl is over

    def __len__(self) -> int:
        return self._stored + len(self._target)

    # -- in: a page's links --

    def take(
        self,
        page: int,
        links: Iterable[Any],
        targets: Interner,
        target_of: TargetOf,
        check_frags: bool,
    ) -> int:
        n = super().take(page, links, targets, target_of, check_frags)
        if len(self._target) >= BATCH_LINKS:
            self.flush()
        return n

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
        super().add_page(page, targets, lines, columns, tag_attrs, raws, nofollows)
        if len(self._target) >= BATCH_LINKS:
            self.flush()

    def flush(self) -> None:
        """The links in the columns into the file (one transaction), the columns emptied."""
        n = len(self._target)
        if n:
            lines, columns = self.positions()
            rows = zip(
                range(self._stored, self._stored + n),
                self._pages(),
                self._target,
                lines,
                columns,
                self._tagattr,
                map(self.raws.__getitem__, self._raw),
                self._nofollow,
                strict=True,
            )
            db = self._db
            db.execute("BEGIN")
            db.executemany("INSERT INTO link VALUES (?,?,?,?,?,?,?,?)", rows)
            db.execute("COMMIT")
            self._stored += n
            for name in ("_target", "_run_page", "_run_start", "_line", "_col", "_tagattr",
                         "_raw", "_nofollow", "_line_wide_at", "_line_wide", "_col_wide_at",
                         "_col_wide"):  # fmt: skip
                setattr(self, name, array(getattr(self, name).typecode))
        if len(self.raws) > MAX_RAWS:
            self.raws = new_texts()

    def finish(self) -> None:
        """The crawl is over: the last rows in, the indexes made (once)."""
        if self._done:
            return
        self.flush()
        self._db.executescript(_INDEXES)
        self._db.execute("ANALYZE")
        self._done = True

    def close(self) -> None:
        """Close the file (it stays in the state directory)."""
        self._db.close()

    def nbytes(self) -> int:
        """Bytes held in memory by the columns (one batch at most)."""
        return super().nbytes()

    # -- out: what the check's and the audit's reports read --

    def _rows(self, sql: str, params: Iterable[Any] = ()) -> sqlite3.Cursor:
        self.finish()
        return self._db.execute(sql, tuple(params))

    def select(self, groups: dict[int, int]) -> dict[int, list[Occurrence]]:
        """The occurrences of the targets in ``groups`` (target id -> group id), by group, in
        crawl order: only those rows are read (the target index), through a temporary
        table of the ids."""
        found: dict[int, list[Occurrence]] = {g: [] for g in groups.values()}
        if not groups:
            return found
        self.finish()
        db = self._db
        db.execute("CREATE TEMP TABLE IF NOT EXISTS wanted (tid INTEGER PRIMARY KEY, grp INTEGER)")
        db.execute("DELETE FROM wanted")
        db.executemany("INSERT INTO wanted VALUES (?, ?)", groups.items())
        pages, tags = self.pages, self.tags
        rows = db.execute(
            "SELECT w.grp, l.page, l.line, l.col, l.tag, l.raw FROM wanted w"
            " JOIN link l ON l.target = w.tid ORDER BY l.seq"
        )
        for group, page, line, col, tag_id, raw in rows:
            tag, _, attr = tags[tag_id].partition("\0")
            found[group].append(Occurrence(pages[page], line, col, tag, attr, raw))
        db.execute("DELETE FROM wanted")
        return found

    def edges(self) -> Iterator[tuple[int, int, int, bool]]:
        """Every occurrence as (page id, target id, tag/attr id, nofollow), in crawl order."""
        rows = self._rows("SELECT page, target, tag, nofollow FROM link ORDER BY seq")
        return ((p, t, g, bool(nf)) for p, t, g, nf in rows)

    def target_ids(self) -> array[int]:
        """The target id of each occurrence, in crawl order (read from the file: a copy)."""
        out = array("I")
        for (tid,) in self._rows("SELECT target FROM link ORDER BY seq"):
            out.append(tid)
        return out

    # -- the audit's walk, in SQL --

    def set_nodes(self, node_of_tid: array[int], node_of_page: array[int]) -> None:
        """The graph's node of each target and of each page (-1: none), for the aggregates
        and the walk (two temporary tables, indexed by both ends)."""
        self.finish()
        db = self._db
        db.executescript(
            "DROP TABLE IF EXISTS temp.tnode; DROP TABLE IF EXISTS temp.pnode;"
            "CREATE TEMP TABLE tnode (tid INTEGER PRIMARY KEY, node INTEGER NOT NULL);"
            "CREATE TEMP TABLE pnode (pid INTEGER PRIMARY KEY, node INTEGER NOT NULL);"
        )
        db.execute("BEGIN")
        db.executemany("INSERT INTO tnode VALUES (?, ?)", enumerate(node_of_tid))
        db.executemany("INSERT INTO pnode VALUES (?, ?)", enumerate(node_of_page))
        db.execute("CREATE INDEX temp.pnode_node ON pnode (node)")
        db.execute("COMMIT")

    def linked_targets(self) -> Iterator[int]:
        """Each target some page links, once (the target index, in order)."""
        return chain.from_iterable(self._rows("SELECT DISTINCT target FROM link"))

    def outlinks_by_page(self) -> Iterator[tuple[int, int]]:
        """(page id, distinct targets it links), a page at a time."""
        return iter(self._rows("SELECT page, COUNT(DISTINCT target) FROM link GROUP BY page"))

    def inlinks_by_node(self) -> Iterator[tuple[int, int, int]]:
        """(node, distinct pages that link it, those of them with a link that is not
        nofollow), itself not counted: one aggregate (`set_nodes` first)."""
        return iter(
            self._rows(
                "SELECT t.node, COUNT(DISTINCT l.page),"
                " COUNT(DISTINCT CASE WHEN l.nofollow = 0 THEN l.page END) FROM link l"
                " JOIN tnode t ON t.tid = l.target JOIN pnode p ON p.pid = l.page"
                " WHERE t.node >= 0 AND t.node != p.node GROUP BY t.node"
            )
        )

    def click_depth(self, seeds: list[int], size: int) -> array[int]:
        """Each node's clicks from the ``seeds`` nodes (-1: unreached), breadth first: a
        level's nodes in a temporary table, the nodes their pages link by one query
        (`set_nodes` first). Held: the depth array and a level's node ids."""
        depth = array("i", [-1]) * (size + 1)
        db = self._db
        db.executescript(
            "DROP TABLE IF EXISTS temp.level;CREATE TEMP TABLE level (node INTEGER PRIMARY KEY);"
        )
        level = array("i")
        for node in seeds:
            if depth[node] < 0:
                depth[node] = 0
                level.append(node)
        query = (
            "SELECT DISTINCT t.node FROM level v JOIN pnode p ON p.node = v.node"
            " JOIN link l ON l.page = p.pid JOIN tnode t ON t.tid = l.target"
            " WHERE t.node >= 0"
        )
        d = 0
        while level:
            d += 1
            db.execute("BEGIN")
            db.execute("DELETE FROM level")
            db.executemany("INSERT INTO level VALUES (?)", zip(level, strict=True))
            db.execute("COMMIT")
            below = array("i")
            for (node,) in db.execute(query):
                if depth[node] < 0:
                    depth[node] = d
                    below.append(node)
            level = below
        return depth
