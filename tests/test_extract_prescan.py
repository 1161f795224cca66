"""The compiled <meta> prescan is `charset.prescan`, byte for byte of its answer.

The compiled extractor prescans in C (`_extract_c.prescan`); the pure-Python one uses
`crawler.extract.charset.prescan` (regexes). Heads are built from the pieces every step of the
algorithm branches on (comments, other tags and their attributes, quotes, the ``<meta>``
attributes and their duplicates, content values, truncation at and around 1024 bytes).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.extract import LinkExtractorC, charset

pytestmark = pytest.mark.skipif(LinkExtractorC is None, reason="the compiled twin is not built")

PIECES = [
    b"<meta", b"<META", b"<MeTa", b"<meta ", b"<meta/", b"<metax", b" ", b"\t", b"\n", b"\x0c",
    b"\r", b"/", b"=", b">", b'"', b"'", b"<", b"</", b"<!", b"<?", b"<!--", b"-->", b"--", b"-",
    b"<a", b"</a", b"<div", b"charset", b"CHARSET", b"charset=", b"utf-8", b"UTF-8",
    b"iso-8859-2", b"shift_jis", b"utf-16le", b"x-user-defined", b"bogus-label",
    b"http-equiv", b"content-type", b"Content-Type", b"content", b'content="text/html; charset=',
    b"text/html;charset=koi8-r", b"; ", b";", b"x", b"name", b"==", b"\xff", b"\x00", b"a=b",
    b' charset="windows-1251"', b" http-equiv=content-type content='text/html; charset=euc-jp'",
]  # fmt: skip
HEADS = st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join)


def _compiled(data: bytes) -> str | None:
    from crawler.extract._extract_c import prescan  # noqa: PLC0415 (compiled only)

    return prescan(data)  # type: ignore[no-any-return]


@settings(max_examples=3000, deadline=None)
@given(head=HEADS)
def test_prescan_is_the_python_one(head: bytes) -> None:
    assert _compiled(head) == charset.prescan(head)


@settings(max_examples=300, deadline=None)
@given(head=HEADS, pad=st.integers(0, 1100), tail=HEADS)
def test_prescan_at_the_1024_byte_edge(head: bytes, pad: int, tail: bytes) -> None:
    data = head + b"x" * pad + tail
    assert _compiled(data) == charset.prescan(data)


@pytest.mark.parametrize(
    ("head", "want"),
    [
        (b'<meta charset="utf-8">', "utf-8"),
        (b"<!-- <meta charset=koi8-r> --><meta charset=iso-8859-2>", "iso-8859-2"),
        (b'<meta http-equiv="Content-Type" content="text/html; charset=shift_jis">', "shift_jis"),
        (b'<meta content="text/html; charset=shift_jis">', None),  # no pragma
        (b"<meta charset=utf-16le>", "utf-8"),
        (b"<a title='<meta charset=utf-8>'>", None),
        (b"x" * 1020 + b"<meta charset=utf-8>", None),
    ],
)
def test_prescan_cases(head: bytes, want: str | None) -> None:
    assert _compiled(head) == charset.prescan(head) == want
