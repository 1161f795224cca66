"""What an audit run with ``--state DIR`` keeps of each page besides the checker's journal
line: the nofollow flag of each link, the ``Link``/``X-Robots-Tag`` headers, and what its
head said (canonicals, alternates, base, noindex, with their lines), so that a resumed audit
reports the pages an earlier run finished as a run in one go would.

The head facts are the extractor's (``Crawler(head_facts=True)``: read by the tokenizer that
reads the links, no second parse); the sink is called with a page before the audit's
``on_page``, and hands the facts it made of them to the Auditor (``parsed``).
"""

from __future__ import annotations

from typing import Any

from crawler.audit.head import Annotation, HeadFacts
from crawler.check.journal import PageJournal
from crawler.core.results import PageResult

__all__ = ["AuditJournal", "head_facts"]


def head_facts(page: PageResult) -> HeadFacts | None:
    """The head facts the extractor read of a page (None: it read no HTML)."""
    found = page.head_facts
    if found is None:
        return None
    noindex = found.noindex
    return HeadFacts(
        [Annotation(c.href, c.line, c.column) for c in found.canonicals],
        [Annotation(a.href, a.line, a.column, a.hreflang) for a in found.alternates],
        found.base,
        None if noindex is None else Annotation(noindex.href, noindex.line, noindex.column),
    )


def _notes(notes: list[Annotation]) -> list[list[Any]]:
    return [[n.href, n.line, n.column, n.hreflang, n.source] for n in notes]


def _annotations(rows: Any) -> list[Annotation]:
    return [
        Annotation(str(h), int(ln), int(col), str(code), str(src))
        for h, ln, col, code, src in rows or ()
    ]


class AuditJournal(PageJournal):
    """The checker's page journal, with what the audit needs of a page."""

    def __init__(self, directory: str) -> None:
        super().__init__(directory)
        #: page URL -> its head facts: read when the page was written, taken by the Auditor
        self.parsed: dict[str, HeadFacts | None] = {}

    def record_of(self, page: PageResult) -> dict[str, Any]:
        rec = super().record_of(page)
        rec["nf"] = [i for i, link in enumerate(page.links) if link.nofollow]
        rec["lh"] = page.link_header
        rec["rh"] = page.robots_header
        facts = head_facts(page)
        self.parsed[page.url] = facts
        if facts is not None:
            noindex = _notes([facts.noindex]) if facts.noindex is not None else []
            rec["hf"] = [_notes(facts.canonicals), _notes(facts.alternates), facts.base, noindex]
        return rec

    def page_of(self, rec: dict[str, Any]) -> PageResult:
        page = super().page_of(rec)
        nofollow = set(rec.get("nf") or ())
        if nofollow:
            links = list(page.links)
            for i in nofollow:
                if 0 <= i < len(links):
                    links[i] = links[i]._replace(nofollow=True)
            page.links = links
        page.link_header = rec.get("lh")
        page.robots_header = rec.get("rh")
        found = rec.get("hf")
        if found:
            canonicals, alternates, base, noindex = found
            facts = HeadFacts(_annotations(canonicals), _annotations(alternates), base)
            notes = _annotations(noindex)
            facts.noindex = notes[0] if notes else None
            self.parsed[page.url] = facts
        return page
