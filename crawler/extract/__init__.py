"""Sans-I/O link extraction: bytes in, `Link` objects out.

``LinkExtractor`` is the compiled twin (``_extract_c``, built from ``_machine.py`` by Cython)
when it is available and ``CRAWLER_NO_EXTENSIONS`` is not set, else the pure-Python
reference ``_machine.LinkExtractor``. Both are exported explicitly (``LinkExtractorPy``,
``LinkExtractorC`` or None) for tests and benchmarks; ``IMPLEMENTATION`` says which one is in use.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._link import Link
from ._machine import MAX_TOKEN
from ._machine import LinkExtractor as LinkExtractorPy

NO_EXTENSIONS = (
    bool(os.environ.get("CRAWLER_NO_EXTENSIONS")) or sys.implementation.name != "cpython"
)

LinkExtractorC: Any = None
if TYPE_CHECKING or NO_EXTENSIONS:
    LinkExtractor = LinkExtractorPy
    IMPLEMENTATION = "py"
else:
    try:
        from ._extract_c import LinkExtractor as LinkExtractorC  # type: ignore[no-redef]
    except ImportError:  # pragma: no cover - the extension is optional
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
    "IMPLEMENTATION",
    "MAX_TOKEN",
    "Link",
    "LinkExtractor",
    "LinkExtractorC",
    "LinkExtractorPy",
    "extract_links",
]
