"""What a page says about itself: canonical, hreflang alternates and robots directives, from
its ``<head>`` and its ``Link``/``X-Robots-Tag`` headers. Sans-I/O: text in, facts out.

An audit's crawl has the link extractor read each HTML page's head as it reads the links
(``Crawler(head_facts=True)``, ``crawler.extract._headfacts``: one tokenizer pass, in C).
`read_head` is the same scan over decoded text with the standard library's HTML tokenizer,
which the audit used before: the tests hold the extractor's facts to it (on real pages and
generated heads), and it serves a caller that has a document's text rather than a crawl.
The scan stops at the first element that cannot stand in a ``<head>`` (the body has begun;
a canonical or an alternate there is ignored by search engines too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from crawler.extract._headfacts import HEAD_SCOPE, robots_noindex

__all__ = ["Annotation", "HeadFacts", "parse_link_header", "read_head", "robots_noindex"]

# Elements that may stand in a <head> (and the wrappers before it): anything else starts the body.
_HEAD_TAGS = frozenset(t.decode() for t in HEAD_SCOPE)  # (the extractor's scope)
_LINK_ITEM = re.compile(r"<([^>]*)>([^<]*)")
_LINK_PARAM = re.compile(r';\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;,\s]*)')


@dataclass(frozen=True, slots=True)
class Annotation:
    """A canonical or an alternate as the page gives it.

    Attributes:
        href: the value as written.
        line: 1-based line of the ``<link>`` (0 for a header).
        column: 1-based column of its ``<`` in code points (0 for a header).
        hreflang: the alternate's language code ("" for a canonical).
        source: ``html``, ``header`` or ``sitemap``.
    """

    href: str
    line: int
    column: int
    hreflang: str = ""
    source: str = "html"


@dataclass(slots=True)
class HeadFacts:
    """What the head says: its canonicals and alternates in order, its base URL, and the
    ``<meta name=robots>`` directives that make it not indexable (with where they stand)."""

    canonicals: list[Annotation] = field(default_factory=list)
    alternates: list[Annotation] = field(default_factory=list)
    base: str | None = None
    noindex: Annotation | None = None


class _Stop(Exception):
    """The body has begun: nothing more of the head to read."""


class _HeadScanner(HTMLParser):
    def __init__(self, facts: HeadFacts) -> None:
        super().__init__(convert_charrefs=True)
        self.facts = facts

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _HEAD_TAGS:
            raise _Stop
        if tag not in ("link", "meta", "base"):
            return
        values: dict[str, str] = {}
        for name, value in attrs:
            values.setdefault(name, value or "")
        line, offset = self.getpos()
        facts = self.facts
        if tag == "base":
            if facts.base is None and values.get("href"):
                facts.base = values["href"].strip()
            return
        if tag == "meta":
            if values.get("name", "").strip().lower() == "robots" and robots_noindex(
                values.get("content", "")
            ):
                if facts.noindex is None:
                    facts.noindex = Annotation(values.get("content", ""), line, offset + 1)
            return
        rel = values.get("rel", "").lower().split()
        href = values.get("href")
        if href is None:
            return
        href = href.strip()
        if "canonical" in rel:
            facts.canonicals.append(Annotation(href, line, offset + 1))
        if "alternate" in rel and "hreflang" in values:
            code = values["hreflang"].strip()
            facts.alternates.append(Annotation(href, line, offset + 1, code))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)


def read_head(text: str) -> HeadFacts:
    """The head facts of a document's beginning (``text``: decoded, possibly cut)."""
    facts = HeadFacts()
    scanner = _HeadScanner(facts)
    try:
        scanner.feed(text)
        scanner.close()
    except _Stop:
        pass
    except AssertionError:  # (the stdlib tokenizer's way to give up on a malformed tag)
        pass
    return facts


def parse_link_header(value: str) -> tuple[list[Annotation], list[Annotation]]:
    """(canonicals, alternates with hreflang) of an HTTP ``Link`` header (RFC 8288)."""
    canonicals: list[Annotation] = []
    alternates: list[Annotation] = []
    for match in _LINK_ITEM.finditer(value):
        href = match.group(1).strip()
        params: dict[str, str] = {}
        for name, raw in _LINK_PARAM.findall(match.group(2)):
            if raw.startswith('"'):
                raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
            params.setdefault(name.lower(), raw)
        rel = params.get("rel", "").lower().split()
        if "canonical" in rel:
            canonicals.append(Annotation(href, 0, 0, source="header"))
        if "alternate" in rel and "hreflang" in params:
            alternates.append(Annotation(href, 0, 0, params["hreflang"].strip(), "header"))
    return canonicals, alternates
