"""ISO-2022-JP documents: the transcoding decoder never raises, whatever the escapes.

Python's incremental ``iso2022_jp`` decoder raises ``pending buffer overflow`` (even with
errors="replace") a few bytes after an ESC that starts no escape sequence it knows; the
extractor then lost every link of the document (fuzz finding F1). The standard's decoder never
fails: an invalid escape is one U+FFFD and the bytes after it are read again.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from crawler.extract import Link
from crawler.extract.charset import Iso2022JPDecoder
from tests.extract_common import IMPLS, run_strict


@pytest.fixture(params=[name for name, cls in IMPLS.items() if cls is not None])
def impl(request: pytest.FixtureRequest) -> Any:
    return IMPLS[request.param]


def run(impl: Any, data: bytes, sizes: list[int] | None = None, **kw: Any) -> list[Link]:
    return run_strict(impl, data, sizes, kw.pop("encoding", "iso-2022-jp"), **kw)


@pytest.mark.parametrize(
    "esc", [b"\x1b$(", b"\x1b$[abc", b"\x1b(I", b"\x1b", b"\x1bX", b"\x1b$(D", b"\x1b\x1b(B"]
)
def test_invalid_escape_keeps_every_link(impl: Any, esc: bytes) -> None:
    data = b"<a href=/a>" + esc + b"<a href=/b>\x1b(B<a href=/c>"
    for sizes in (None, [1] * len(data), [3] * (len(data) // 3)):
        raws = [x.raw for x in run(impl, data, sizes)]
        assert raws[0] == "/a" and raws[-1] == "/c", (esc, sizes, raws)


def test_valid_escapes_still_decode(impl: Any) -> None:
    text = "<a href='/\u65e5\u672c'>"
    data = text.encode("iso2022_jp")
    assert b"\x1b$B" in data
    for sizes in (None, [1] * len(data)):
        assert [x.raw for x in run(impl, data, sizes)] == ["/\u65e5\u672c"]
    # the same through a <meta> in the prescan
    meta = b"<meta charset=iso-2022-jp>" + data
    assert [x.raw for x in run(impl, meta, encoding=None)] == ["/\u65e5\u672c"]


def test_decoder_never_raises_on_random_escapes() -> None:
    pieces = [b"\x1b", b"$", b"(", b"B", b"J", b"@", b"I", b"D", b"[", b"<a>", b"\x80", b"\xff"]
    pieces += [b"\x0e", b"\x0f", b"!!", b"x"]
    rnd = random.Random(13)
    for _ in range(3000):
        doc = b"".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 40)))
        dec = Iso2022JPDecoder()
        pos = 0
        while pos < len(doc):
            k = rnd.randint(1, 6)
            dec.decode(doc[pos : pos + k], False)
            pos += k
        dec.decode(b"", True)
