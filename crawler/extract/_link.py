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
    """

    url: str | None
    raw: str
    tag: str
    attr: str
    nofollow: bool = False


_new = tuple.__new__


def make_link(url: str | None, raw: str, tag: str, attr: str, nofollow: bool) -> Link:
    """Build a `Link` without the NamedTuple ``__new__`` overhead (same result)."""
    return _new(Link, (url, raw, tag, attr, nofollow))
