"""The atomic-group rewrite used on CPython < 3.11.5 matches exactly as the possessive form."""

from __future__ import annotations

import re

import pytest

from crawler.extract import _states
from crawler.extract._regex import atomize
from tests.extract_common import CORPUS


@pytest.mark.parametrize(
    ("possessive", "atomic"),
    [
        (rb"[^<]++|<+(?=[^a])", rb"(?>[^<]+)|<+(?=[^a])"),
        (rb"(?:a[b]*+)*+x", rb"(?>(?:a(?>[b]*))*)x"),
        (rb"\"[^\"\]]*+\"?+", rb"\"(?>[^\"\]]*)(?>\"?)"),
        (rb"(?s:.*?)--!?>", rb"(?s:.*?)--!?>"),
        (rb"a{2,3}+b", rb"(?>a{2,3})b"),
        (rb"(?>x)?+", rb"(?>(?>x)?)"),
        (rb"[]a]*+", rb"(?>[]a]*)"),
        (rb"\(*+", rb"(?>\(*)"),
    ],
)
def test_atomize_rewrites_possessive_quantifiers(possessive: bytes, atomic: bytes) -> None:
    assert atomize(possessive) == atomic
    re.compile(atomic)


def _patterns() -> list[tuple[str, re.Pattern[bytes]]]:
    found = [
        (name, value)
        for name, value in vars(_states).items()
        if isinstance(value, re.Pattern) and isinstance(value.pattern, bytes)
    ]
    skipper = _states._boring([b"a", b"base", b"meta", b"script", b"style", b"svg", b"title"])
    found.append(("_boring", skipper))
    marks = (b"*+", b"++", b"?+", b"(?>")
    return [(n, p) for n, p in found if any(m in p.pattern for m in marks)]


def test_the_tokenizer_has_possessive_patterns() -> None:
    assert len(_patterns()) >= 5


@pytest.mark.parametrize("name", [name for name, _ in _patterns()])
def test_atomic_form_matches_like_possessive(name: str) -> None:
    pattern = dict(_patterns())[name]
    possessive = re.compile(pattern.pattern, pattern.flags)
    atomic = re.compile(atomize(pattern.pattern), pattern.flags)
    samples = [
        b"<a href=x><a href=\"y\" title='z'>t</a><!-- c --><?pi?></p><br/>",
        b"<<<a\thref = 'q' / ><svg><![CDATA[x]]></svg><script>if(a<b)</script>",
        b'<a href="unterminated <b c=d',
    ]
    samples += [p.read_bytes()[:40_000] for p in sorted(CORPUS.glob("*.html"))[:8]]
    for data in samples:
        for pos in range(0, len(data), 11):
            m1 = possessive.match(data, pos)
            m2 = atomic.match(data, pos)
            assert (m1 and (m1.span(), m1.groups())) == (m2 and (m2.span(), m2.groups())), (
                name,
                pos,
            )
