"""What the extractor test modules share: the document URL, the implementations, the corpus."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from crawler.extract import Link, LinkExtractorC, LinkExtractorPy

BASE = "https://example.org/dir/page.html"

# Elements whose href is a link: HTML a/area, and a in SVG and MathML (an SVG or MathML
# <area> is no link, and the extractor does not report it).
HTML_NS, _SVG, _MATHML = (
    "http://www.w3.org/1999/xhtml",
    "http://www.w3.org/2000/svg",
    "http://www.w3.org/1998/Math/MathML",
)
LINK_ELEMENTS = {f"{{{HTML_NS}}}a", f"{{{HTML_NS}}}area", f"{{{_SVG}}}a", f"{{{_MATHML}}}a"}

IMPLS: dict[str, Any] = {"py": LinkExtractorPy, "c": LinkExtractorC}
IMPL_NAMES = [name for name, cls in IMPLS.items() if cls is not None]

# ../shared beside the project root, as laid out for the team and for CI.
SHARED = Path(__file__).resolve().parents[2] / "shared"
CORPUS = SHARED / "corpus" / "pages"
PAGES = sorted(CORPUS.glob("*.html")) if CORPUS.is_dir() else []
# Outside CI a checkout without ../shared skips the corpus tests; in CI a missing corpus fails.
SKIP_WITHOUT_CORPUS = not PAGES and not os.environ.get("CI")
#: Why a corpus test is skipped: a fresh clone has no ../shared (the team's corpus).
NO_CORPUS = f"../shared/corpus/pages not found beside the project (looked in {CORPUS})"


def corpus_params(pages: list[Path]) -> list[Any]:
    """``pages`` to parametrize a test with, or one skipped case saying why there are none
    (an empty list would be skipped by pytest as "got empty parameter set", naming nothing)."""
    if pages:
        return list(pages)
    return [pytest.param(None, id="no-corpus", marks=pytest.mark.skip(reason=NO_CORPUS))]


def run_strict(
    impl: Any, data: bytes, sizes: list[int] | None = None, encoding: str = "utf-8", **kw: Any
) -> list[Link]:
    """``feed`` the first ``sum(sizes)`` bytes in those sizes, the rest at once, then ``close``,
    with ``_strict`` set so that an internal error raises instead of ending extraction."""
    ex = impl(BASE, encoding, **kw)
    ex._strict = True
    out: list[Link] = []
    i = 0
    for k in sizes or []:
        out += ex.feed(data[i : i + k])
        i += k
    out += ex.feed(data[i:])
    return out + ex.close()


def feed_in(
    impl: Any, data: bytes, sizes: list[int], url: str = BASE, **kw: Any
) -> tuple[list[Any], Any]:
    """``data`` (the document at ``url``) fed to a new ``impl`` extractor in pieces of
    ``sizes`` (then the rest), and closed: its links and the extractor (strict: a bug raises
    instead of ending quietly)."""
    ex = impl(url, kw.pop("encoding", None), **kw)
    ex._strict = True
    out: list[Any] = []
    i = 0
    for k in sizes:
        out += ex.feed(data[i : i + k])
        i += k
    out += ex.feed(data[i:])
    out += ex.close()
    return out, ex


def head_plain(facts: Any) -> tuple[Any, ...]:
    """Head facts (the extractor's or ``crawler.audit.head.read_head``'s) as plain tuples:
    canonicals and alternates as (href, line, column, hreflang), base, noindex, complete."""

    def notes(items: Any) -> list[tuple[str, int, int, str]]:
        return [(n.href, n.line, n.column, n.hreflang) for n in items]

    noindex = facts.noindex
    return (
        notes(facts.canonicals),
        notes(facts.alternates),
        facts.base,
        None if noindex is None else notes([noindex])[0],
        getattr(facts, "complete", True),
    )
