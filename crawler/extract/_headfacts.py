"""What a page's ``<head>`` says about the page itself (``LinkExtractor(head_facts=True)``):
its canonicals, hreflang alternates, base URL and the ``<meta name=robots>`` that makes it
not indexable, each where it stands. The extractor already tokenizes every byte and reads
``<base>`` and ``<meta>``; with this on it also keeps ``rel``/``href``/``hreflang`` of
``<link>``, and hands the (rare) head ``<link>``, ``<meta>`` and ``<base>`` to `head_tag`,
so an audit needs no second parse of each page.

Shared by both twins (`_machine` and `_extract_c` call the same function with the same dict
of the tag's kept attributes), so their facts agree on every input. The scope is the one
``crawler.audit.head`` (the html.parser scan it replaces) uses: the head is read until the
first start tag that cannot stand in a ``<head>`` (`HEAD_SCOPE`; text does not end it), not
inside a ``<template>``'s content (inert, not in the document) and not in svg/math content.
The values are those of the reference too: ``href`` and ``hreflang`` stripped, ``rel`` a
case-insensitive token list, the first ``<base>`` with a non-empty ``href``, the first robots
meta whose content says ``noindex`` or ``none`` for every crawler (`robots_noindex`). An
attribute value dropped for being over ``max_token`` bytes counts as absent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = [
    "HEAD_FACT_TAGS",
    "HEAD_SCOPE",
    "MAX_HEAD_LINKS",
    "HeadFacts",
    "HeadLink",
    "head_tag",
    "robots_noindex",
]

# Start tags that may stand in a <head> (and the wrappers before it): any other starts the
# body, and the scan ends (``crawler.audit.head``'s list, as bytes).
HEAD_SCOPE = frozenset(b"html head title meta link script style base noscript template".split())
# Canonicals and alternates kept each (memory stays bounded whatever the head; a real page has
# one canonical and at most a few hundred alternates); past it, ``complete`` is False.
MAX_HEAD_LINKS = 4096
# The head tags that carry a fact, and the attributes kept of each for it.
HEAD_FACT_TAGS: dict[bytes, tuple[bytes, ...]] = {
    b"link": (b"rel", b"href", b"hreflang"),
    b"meta": (b"name", b"content"),
    b"base": (b"href",),
}


class HeadLink(NamedTuple):
    """A canonical, an alternate or a robots meta as the head gives it.

    Attributes:
        href: the value as written (a link's ``href`` stripped; a meta's ``content``).
        line: 1-based line of the tag's ``<``.
        column: 1-based column of its ``<`` in code points (as `Link.column`).
        hreflang: an alternate's language code ("" otherwise).
    """

    href: str
    line: int
    column: int
    hreflang: str = ""


@dataclass(slots=True)
class HeadFacts:
    """The head's canonicals and alternates in order, its base URL (as written, stripped)
    and the first ``<meta name=robots>`` that makes the page not indexable; ``complete`` is
    False when more than `MAX_HEAD_LINKS` canonicals or alternates were left out."""

    canonicals: list[HeadLink] = field(default_factory=list)
    alternates: list[HeadLink] = field(default_factory=list)
    base: str | None = None
    noindex: HeadLink | None = None
    complete: bool = True


def robots_noindex(value: str) -> bool:
    """Whether robots directives (a meta's content, an ``X-Robots-Tag`` value) say
    ``noindex`` (or ``none``) for every crawler: directives after a ``name:`` prefix apply to
    that user agent only and are not counted."""
    for part in value.split(","):
        token = part.strip().lower()
        if ":" in token:
            continue  # "googlebot: noindex" or "unavailable_after: ..."
        if token in ("noindex", "none"):
            return True
    return False


def head_tag(
    facts: HeadFacts,
    name: bytes,
    attrs: dict[bytes, bytes | None],
    line: int,
    column: int,
    text: Callable[[bytes], str],
) -> None:
    """One ``<link>``, ``<meta>`` or ``<base>`` start tag of the head (``attrs``: the kept
    attributes, lower-case names, raw values, None past ``max_token``; ``text``: a value as
    the DOM holds it)."""
    if name == b"base":
        href = attrs.get(b"href")
        if facts.base is None and href:
            value = text(href)
            if value:
                facts.base = value.strip()
        return
    if name == b"meta":
        meta = attrs.get(b"name")
        if facts.noindex is not None or meta is None or text(meta).strip().lower() != "robots":
            return
        raw = attrs.get(b"content")
        content = text(raw) if raw is not None else ""
        if robots_noindex(content):
            facts.noindex = HeadLink(content, line, column)
        return
    raw = attrs.get(b"href")
    if raw is None:
        return
    rel_raw = attrs.get(b"rel")
    rel = text(rel_raw).lower().split() if rel_raw is not None else ()
    canonical = "canonical" in rel
    lang = attrs.get(b"hreflang")
    alternate = "alternate" in rel and lang is not None
    if not (canonical or alternate):
        return
    value = text(raw).strip()
    if canonical:
        _keep(facts, facts.canonicals, HeadLink(value, line, column))
    if alternate:
        assert lang is not None
        _keep(facts, facts.alternates, HeadLink(value, line, column, text(lang).strip()))


def _keep(facts: HeadFacts, into: list[HeadLink], note: HeadLink) -> None:
    if len(into) < MAX_HEAD_LINKS:
        into.append(note)
    else:
        facts.complete = False
