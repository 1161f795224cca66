"""The `Link` value object: one link occurrence found in a document.

A `typing.NamedTuple`: immutable, hashable, cheap to build (a page yields hundreds) and
unpacks like a tuple. The extractor builds it with ``tuple.__new__`` to skip the
Python-level ``__new__``; `make_link` is that fast constructor.
"""

from __future__ import annotations

from typing import NamedTuple


class Link(NamedTuple):
    """One link occurrence, in document order.

    Attributes:
        url: absolute URL, resolved as browsers resolve it (WHATWG URL standard) against the
            document's base URL at that point; the fragment is dropped. None when the value
            does not resolve to a URL (``http://a b/``, ``https://:99999/``, ``//``): still a
            link, which a crawler skips and a link checker reports as broken.
        raw: the attribute value as the DOM holds it (character references decoded), or for a
            meta refresh the URL part of ``content``.
        tag: lower-case tag name (``a``, ``area``, ``iframe``, ``meta``, ``img``, ...).
        attr: lower-case attribute name (``href``, ``src``, ``srcset``, ``content``, ...).
        nofollow: the element's ``rel`` contains ``nofollow`` (``a``, ``area``, ``form``).
        line: 1-based line of the ``<`` of the link's tag (the ``<meta>`` of a refresh, the
            ``<img>``/``<source>`` of srcset candidates), lines counted as the HTML standard
            counts them after newline normalisation (CRLF and a lone CR are one break each).
            0 for a Link not made by an extractor.
        column: 1-based column of that ``<``, in code points of the decoded document (a tab
            is one): what an editor shows, SARIF's ``unicodeCodePoints`` column kind.
    """

    url: str | None
    raw: str
    tag: str
    attr: str
    nofollow: bool = False
    line: int = 0
    column: int = 0


_new = tuple.__new__


def make_link(
    url: str | None, raw: str, tag: str, attr: str, nofollow: bool, line: int = 0, column: int = 0
) -> Link:
    """Build a `Link` without the NamedTuple ``__new__`` overhead (same result)."""
    return _new(Link, (url, raw, tag, attr, nofollow, line, column))
