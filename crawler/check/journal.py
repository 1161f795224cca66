"""What a check run with ``--state DIR`` keeps of each page, so that a resumed run reports it.

A resumed crawl does not fetch again the pages an earlier run finished, so their results and
links would be missing from the report. Each finished page is appended to
``DIR/check-pages.jsonl`` as one JSON line (its URL, status, redirects, error, fragment ids
and every link with its line and column) by a `Sink`: the engine calls ``flush()`` before it
commits a page's completion to the state, so a page the state counts as done is in the file.
A resumed run replays the file first. A last line cut by a kill is dropped (that page was
not committed: the engine fetches it again); a page found both in the file and again in this
run (in flight at the kill) keeps one copy of its links.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from crawler.core.results import PageResult
from crawler.extract import Link

__all__ = ["JOURNAL_NAME", "PageJournal"]

JOURNAL_NAME = "check-pages.jsonl"


def record_of(page: PageResult) -> dict[str, Any]:
    """A page's journal line (JSON-ready)."""
    ids = page.ids
    return {
        "u": page.url,
        "d": page.depth,
        "f": page.final_url,
        "s": page.status,
        "t": page.content_type,
        "e": page.error,
        "x": page.error_detail,
        "r": list(page.redirects),
        "h": list(page.redirect_statuses),
        "i": None if ids is None else list(ids),
        "ic": page.ids_complete,
        "l": [
            [k.url, k.raw, k.tag, k.attr, k.line, k.column]
            for k in (*page.links, *page.rendered_links)  # (a resumed check: all of them)
        ],
    }


def page_of(rec: dict[str, Any]) -> PageResult:
    """The PageResult of a journal line."""
    page = PageResult(str(rec["u"]), int(rec.get("d") or 0))
    page.final_url = rec.get("f")
    page.status = rec.get("s")
    page.content_type = rec.get("t")
    page.error = rec.get("e")
    page.error_detail = rec.get("x")
    page.redirects = [str(u) for u in rec.get("r", [])]
    page.links = [
        Link(url, raw, tag, attr, False, int(line), int(col))
        for url, raw, tag, attr, line, col in rec.get("l", [])
    ]
    page.redirect_statuses = [int(s) for s in rec.get("h", [])]
    ids = rec.get("i")
    page.ids = None if ids is None else {str(i) for i in ids}
    page.ids_complete = bool(rec.get("ic", True))
    return page


class PageJournal:
    """The check's page log under a state directory: a Sink, and a replay of earlier runs."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / JOURNAL_NAME
        self._file: IO[str] | None = None

    def replay(self) -> Iterator[PageResult]:
        """The pages earlier runs finished, in order; a cut last line is dropped from the file."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1
        if end < len(data):
            with open(self.path, "r+b") as f:  # a line cut by a kill: never committed
                f.truncate(end)
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict) and "u" in rec:
                yield self.page_of(rec)

    def record_of(self, page: PageResult) -> dict[str, Any]:
        """A page's line (a subclass keeps more)."""
        return record_of(page)

    def page_of(self, rec: dict[str, Any]) -> PageResult:
        """A line's page (a subclass reads more)."""
        return page_of(rec)

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a", encoding="utf-8")  # noqa: SIM115

    # -- the Sink protocol --

    def link(self, url: str, referrer: str, kind: str) -> None:
        """Links come with their page (``page``)."""

    def page(self, page: PageResult) -> None:
        if self._file is None:
            self.open()
        assert self._file is not None
        self._file.write(
            json.dumps(self.record_of(page), ensure_ascii=False, separators=(",", ":"))
        )
        self._file.write("\n")

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
