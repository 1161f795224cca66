"""Sans-I/O link extraction: bytes in, `Link` objects out.

    ex = LinkExtractor("https://example.org/dir/page.html", encoding=None)
    links = ex.feed(chunk1) + ex.feed(chunk2) + ex.close()
    links = extract_links(data, "https://example.org/")   # one-shot

Behaviour worth knowing (details in ``_machine.py``):

* Chunk invariant: any split of the same bytes gives the same list; time is linear in the input
  whatever the chunking; memory is bounded (an attribute value over ``max_token`` bytes, 64 KiB
  by default, is dropped whole, never cut).
* Without a transport charset, the first 1024 bytes are held for the ``<meta>`` prescan before
  any link is returned (with one, only the 3 bytes of a possible BOM).
* ``<base href>``: the first one sets the base for the links that follow it; links before it keep
  the document URL (a browser would resolve them against that base too).
* Every Link has the ``line`` and ``column`` of its tag's ``<`` (1-based; columns in code
  points of the decoded text), counted as the bytes stream, whatever the chunking.
* ``collect_ids=True``: ``ex.ids`` holds the document's fragment targets (element ids, ``<a
  name>``), ``ex.ids_complete`` says whether a missing one is really missing.
* ``Link.url`` is WHATWG-resolved (fragment dropped); a value that does not resolve still gives
  a Link, whose ``url`` is None (a crawler skips it, a link checker reports it).
  As in a browser, the query of an http(s)/ftp/file URL is percent-encoded in the document's
  encoding (a Shift_JIS page's ``?q=テスト`` gives ``?q=%83e%83X%83g``; UTF-16 pages use UTF-8),
  the rest of the URL in UTF-8. ``Link.raw`` keeps the decoded text.
* ``head_facts=True``: ``ex.head`` holds what the page's ``<head>`` says about the page
  (`HeadFacts`: ``<link rel=canonical>``, ``<link rel=alternate hreflang>``, the ``<base>``
  href, a ``<meta name=robots>`` noindex; each value as written, with its line and column),
  read up to the first tag that starts the body (``_headfacts``). Off: no cost; on: the same
  links.
* Never raises on any input (a ``link_set`` name that does not exist is a ValueError at
  construction: that is a programming error, not input).

``LinkExtractor`` is the compiled twin (``_extract_c``, Cython source ``_extract_c.pyx``: the
same states and output as ``_machine``, byte-level C) when ``pip install`` could build it and
``CRAWLER_NO_EXTENSIONS`` is not set, else the pure-Python reference ``_machine.LinkExtractor``.
Both are exported explicitly (``LinkExtractorPy``, ``LinkExtractorC`` or None) for tests and
benchmarks; ``IMPLEMENTATION`` says which one is in use. With ``CRAWLER_REQUIRE_EXTENSIONS=1``
(and no ``CRAWLER_NO_EXTENSIONS``) a compiled module that is missing or fails to import is an
ImportError instead of a fallback, and ``setup.py`` fails when it cannot build it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from crawler._twins import NO_EXTENSIONS as NO_EXTENSIONS  # (re-exported: tests read them)
from crawler._twins import REQUIRE_EXTENSIONS as REQUIRE_EXTENSIONS
from crawler._twins import compiled

from ._headfacts import HeadFacts, HeadLink
from ._link import Link
from ._linkset import MAX_ID_CHARS, MAX_IDS, MAX_TOKEN
from ._machine import LinkExtractor as LinkExtractorPy

_c = (
    None
    if TYPE_CHECKING
    else compiled(
        "crawler.extract._extract_c", "LinkExtractor", "LinkRecord", what="the compiled extractor"
    )
)
LinkExtractorC: Any = None if _c is None else _c[0]
#: The compiled extractor's record of a page's links (``record=True``), or None: a sequence of
#: Links made when read (``crawler.core.results.PageResult.links`` with ``link_record``).
LinkRecord: Any = None if _c is None else _c[1]
if LinkRecord is not None:  # pragma: no cover - depends on the build
    Sequence.register(LinkRecord)
if TYPE_CHECKING or LinkExtractorC is None:
    LinkExtractor = LinkExtractorPy
    IMPLEMENTATION = "py"
else:  # pragma: no cover - depends on the build
    LinkExtractor = LinkExtractorC
    IMPLEMENTATION = "c"


def extract_links(
    data: bytes,
    base_url: str,
    encoding: str | None = None,
    *,
    link_set: str | Mapping[str, Any] = "links",
) -> list[Link]:
    """All the links of a whole document: ``feed(data) + close()`` of a new extractor.

    Args:
        data: the document's bytes.
        base_url: the document's URL.
        encoding: the charset from Content-Type, if any.
        link_set: ``"links"``, ``"resources"`` or a ``{tag: (attr, ...)}`` mapping.

    Returns:
        The links in document order.
    """
    ex = LinkExtractor(base_url, encoding, link_set=link_set)
    return ex.feed(data) + ex.close()


__all__ = [
    "HeadFacts",
    "HeadLink",
    "IMPLEMENTATION",
    "Link",
    "LinkExtractor",
    "LinkExtractorC",
    "LinkExtractorPy",
    "LinkRecord",
    "MAX_IDS",
    "MAX_ID_CHARS",
    "MAX_TOKEN",
    "extract_links",
]
