"""charset.py: labels, the prescan, undeclared-encoding detection, and both extractors on them."""

from __future__ import annotations

import codecs
import itertools
from typing import Any

import pytest
from aiohttp import web
from hypothesis import given
from hypothesis import strategies as st

import crawler
from crawler.extract.charset import (
    ENCODINGS,
    detect_undeclared,
    lookup,
    prescan,
    python_codec,
)
from tests.extract_common import BASE, IMPL_NAMES, IMPLS


def _utf8_state(data: bytes) -> str:
    """Reference: the WHATWG UTF-8 decoder written out byte by byte (slow, obvious).

    "ascii", "valid", "incomplete" (valid but cut inside a sequence at the end) or "invalid".
    """
    need = 0
    lower, upper = 0x80, 0xBF
    for byte in data:
        if need == 0:
            if byte <= 0x7F:
                continue
            if 0xC2 <= byte <= 0xDF:
                need = 1
            elif 0xE0 <= byte <= 0xEF:
                need = 2
                lower = 0xA0 if byte == 0xE0 else 0x80
                upper = 0x9F if byte == 0xED else 0xBF
            elif 0xF0 <= byte <= 0xF4:
                need = 3
                lower = 0x90 if byte == 0xF0 else 0x80
                upper = 0x8F if byte == 0xF4 else 0xBF
            else:
                return "invalid"
            continue
        if not lower <= byte <= upper:
            return "invalid"
        lower, upper = 0x80, 0xBF
        need -= 1
    if need:
        return "incomplete"
    return "ascii" if data.isascii() else "valid"


def _expected(data: bytes, final: bool) -> str | None:
    state = _utf8_state(data)
    if state == "ascii":
        return None
    if state == "valid" or (state == "incomplete" and not final):
        return "utf-8"
    return "windows-1252"


@pytest.mark.parametrize(
    ("data", "final", "expected"),
    [
        (b"", True, None),
        (b"<a href=/x>plain ascii</a>", True, None),
        ("https://münchen.example/".encode(), True, "utf-8"),
        ("https://münchen.example/".encode("cp1252"), True, "windows-1252"),
        (b"a\xc3", False, "utf-8"),  # cut inside a sequence: valid so far
        (b"a\xc3", True, "windows-1252"),  # ... but not when nothing follows
        ("a😀".encode()[:-1], False, "utf-8"),
        ("a😀".encode()[:-1], True, "windows-1252"),
        (b"a\xed\xa0", False, "windows-1252"),  # a surrogate's first two bytes: never valid
        (b"a\xed\x9f", False, "utf-8"),
        (b"a\xe0\x80", False, "windows-1252"),  # overlong
        (b"a\xf4\x90", False, "windows-1252"),  # above U+10FFFF
        (b"\xc0\x80", True, "windows-1252"),
        (b"\xff", False, "windows-1252"),
        ("é".encode() + b"\xe9", True, "windows-1252"),  # valid first, invalid later
    ],
)
def test_detect_undeclared_cases(data: bytes, final: bool, expected: str | None) -> None:
    assert detect_undeclared(data, final) == expected


def test_detect_undeclared_every_short_tail() -> None:
    """Every one-, two- and three-byte ending after valid UTF-8 text, against the reference."""
    high = range(0x80, 0x100)
    tails = [bytes(t) for n in (1, 2) for t in itertools.product(high, repeat=n)]
    tails += [
        bytes((a, b, c))
        for a in (0xE0, 0xED, 0xF0, 0xF4, 0xF5)
        for b in high
        for c in (0x80, 0xBF, 0xC0)
    ]
    for tail in tails:
        data = "é".encode() + tail
        for final in (False, True):
            assert detect_undeclared(data, final) == _expected(data, final), (data, final)


@given(st.binary(max_size=64), st.booleans())
def test_detect_undeclared_matches_reference(data: bytes, final: bool) -> None:
    assert detect_undeclared(data, final) == _expected(data, final)


@given(st.text(max_size=200), st.integers(min_value=0, max_value=800))
def test_detect_undeclared_text_and_its_prefixes(text: str, cut: int) -> None:
    """Any text encoded as UTF-8 is UTF-8 (or ASCII); so is any prefix while not final."""
    data = text.encode("utf-8", "surrogatepass")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return  # lone surrogates are not UTF-8; the binary test covers invalid input
    want = None if data.isascii() else "utf-8"
    assert detect_undeclared(data, True) == want
    prefix = data[:cut]
    assert detect_undeclared(prefix, False) == (None if prefix.isascii() else "utf-8")


# Labels Python's codecs know but the Encoding Standard does not: each must be ignored.
NOT_LABELS = [
    "hex",
    "zlib",
    "base64",
    "rot13",
    "rot_13",
    "idna",
    "punycode",
    "uu",
    "bz2",
    "undefined",
    "utf-7",
    "utf7",
    "utf-32",
    "utf_8",
    "latin-1",
    "cp437",
    "quopri",
    "unicode_escape",
    "raw_unicode_escape",
    "mbcs",
    "\u212aoi8-r",  # KELVIN SIGN: str.lower() makes it "koi8-r"
]


@pytest.mark.parametrize("label", NOT_LABELS)
def test_lookup_knows_only_the_standard_labels(label: str) -> None:
    assert lookup(label) is None


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("  UTF8\t", "utf-8"),
        ("latin1", "windows-1252"),
        ("latin2", "iso-8859-2"),
        ("greek", "iso-8859-7"),
        ("arabic", "iso-8859-6"),
        ("hebrew", "iso-8859-8"),
        ("logical", "iso-8859-8-i"),
        ("l9", "iso-8859-15"),
        ("tis-620", "windows-874"),
        ("iso-8859-9", "windows-1254"),
        ("gb2312", "gbk"),
        ("ms932", "shift_jis"),
        ("hz-gb-2312", "replacement"),
        ("ucs-2", "utf-16le"),
        ("x-mac-ukrainian", "x-mac-cyrillic"),
    ],
)
def test_lookup_standard_labels(label: str, name: str) -> None:
    assert lookup(label) == name
    codec, errors = python_codec(name)
    assert codecs.lookup(codec) and codecs.lookup_error(errors)


def test_every_name_has_a_codec() -> None:
    for name in ENCODINGS:
        codec, _ = python_codec(name)
        codecs.lookup(codec)
        assert lookup(name) == name


@pytest.mark.parametrize("label", NOT_LABELS)
def test_prescan_ignores_unknown_labels_and_keeps_looking(label: str) -> None:
    enc = label.encode("utf-8")
    assert prescan(b"<meta charset=" + enc + b">") is None
    assert prescan(b"<meta charset='" + enc + b"'><meta charset=koi8-r>") == "koi8-r"
    pragma = b'<meta http-equiv=content-type content="text/html; charset=' + enc + b'">'
    assert prescan(pragma) is None
    assert prescan(pragma + b"<meta charset=koi8-r>") == "koi8-r"


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        # The charset attribute is taken unconditionally: it overrides the content attribute,
        # whichever comes first, and an unknown label there makes the <meta> give nothing.
        (b'<meta http-equiv=content-type content="charset=koi8-r" charset=big5>', "big5"),
        (b'<meta charset=big5 http-equiv=content-type content="charset=koi8-r">', "big5"),
        (b'<meta http-equiv=content-type content="charset=koi8-r" charset=hex>', None),
        (b'<meta charset=hex http-equiv=content-type content="charset=koi8-r">', None),
        (b"<meta charset=hex><meta charset=big5>", "big5"),
    ],
)
def test_prescan_charset_attribute_is_unconditional(head: bytes, expected: str | None) -> None:
    assert prescan(head) == expected


def _links(impl: Any, data: bytes, transport: str | None = None) -> tuple[str, list[str]]:
    ex = impl(BASE, transport)
    links = ex.feed(data) + ex.close()
    return ex.encoding, [link.url for link in links]


PAGE_TAIL = "<title>t</title><a href='/straße?q=é'>x</a><a href='/after'>y</a>"


@pytest.mark.parametrize("impl", IMPL_NAMES)
@pytest.mark.parametrize("label", NOT_LABELS)
def test_extract_ignores_unknown_meta_label(impl: str, label: str) -> None:
    """A bogus <meta> label is skipped: a later valid one decides, links decode right."""
    cls = IMPLS[impl]
    data = f"<meta charset='{label}'><meta charset=utf-8>{PAGE_TAIL}".encode()
    enc, urls = _links(cls, data)
    assert enc == "utf-8"
    assert urls == ["https://example.org/stra%C3%9Fe?q=%C3%A9", "https://example.org/after"]
    # Alone, it decides nothing: windows-1252 bytes (invalid UTF-8) stay windows-1252.
    data = f"<meta charset='{label}'>{PAGE_TAIL}".encode("cp1252", "replace")
    enc, urls = _links(cls, data)
    assert enc == "windows-1252"
    assert urls == ["https://example.org/stra%C3%9Fe?q=%E9", "https://example.org/after"]


@pytest.mark.parametrize("impl", IMPL_NAMES)
@pytest.mark.parametrize("label", NOT_LABELS)
def test_extract_ignores_unknown_transport_label(impl: str, label: str) -> None:
    """A bogus Content-Type charset is as if none were given: the prescan decides."""
    cls = IMPLS[impl]
    tail = PAGE_TAIL.replace("straße", "путь").replace("é", "ж")
    data = f"<meta charset=koi8-r>{tail}".encode("koi8-r")
    enc, urls = _links(cls, data, transport=label)
    assert enc == "koi8-r"
    assert urls == [
        "https://example.org/%D0%BF%D1%83%D1%82%D1%8C?q=%D6",
        "https://example.org/after",
    ]


@pytest.mark.parametrize("impl", IMPL_NAMES)
def test_x_user_defined_transport(impl: str) -> None:
    """The standard's x-user-defined maps bytes 0x80..0xFF to U+F780..U+F7FF (not latin-1)."""
    enc, urls = _links(IMPLS[impl], b'<a href="/\x80\xff?q=\x80&r=\xe9">x</a>', "x-user-defined")
    assert enc == "x-user-defined"
    # The path is UTF-8 (U+F780 is EF 9E 80); the query goes back to the document's bytes.
    assert urls == ["https://example.org/%EF%9E%80%EF%9F%BF?q=%80&r=%E9"]
    assert b"\x00a\x7f\x80\xff".decode("crawler-x-user-defined") == "\x00a\x7f\uf780\uf7ff"
    # In a <meta>, the prescan makes it windows-1252, as the standard says.
    assert prescan(b"<meta charset=x-user-defined>") == "windows-1252"


@pytest.mark.parametrize("label", ["rot13", "utf-7", "base64", "hex", "x-bogus"])
async def test_crawl_ignores_unknown_content_type_charset(serve, label: str) -> None:  # type: ignore[no-untyped-def]
    """End to end: a real server's Content-Type names a charset the standard does not know;
    the page is read as if none were named (here: its <meta charset=utf-8>)."""
    body = "<meta charset=utf-8><a href='/münchen/straße'>x</a><a href='/after'>y</a>"

    async def page(request: web.Request) -> web.Response:
        return web.Response(
            body=body.encode(), headers={"Content-Type": f"text/html; charset={label}"}
        )

    app = web.Application()
    app.router.add_get("/", page)
    server = await serve(app)
    root = str(server.make_url("/"))
    result = await crawler.crawl(root, max_pages=1, ignore_robots=True, retries=0)
    (first,) = result.pages
    assert first.error is None
    assert [link.url for link in first.links] == [root + "m%C3%BCnchen/stra%C3%9Fe", root + "after"]


@given(
    st.lists(
        st.one_of(
            st.binary(max_size=40),
            st.sampled_from(
                [
                    b"text/html; charset=UTF-8",
                    b"charset='latin1'",
                    b"x" * 300,
                    b'text/html;charset="shift_jis',
                    b"CHARSET = koi8-r",
                ]
            ),  # fmt: skip
        ),
        max_size=600,
    )
)
def test_charset_from_content_cache_changes_no_answer(values: list[bytes]) -> None:
    """The answers kept for short values (and emptied when 256 are kept) are the algorithm's."""
    from crawler.extract import charset  # noqa: PLC0415

    for v in values:
        assert charset.charset_from_content(v) == charset._charset_from_content(v)
        assert charset.charset_from_content(bytearray(v)) == charset._charset_from_content(v)
    assert len(charset._FROM_CONTENT) <= charset._FROM_CONTENT_MAX
    assert all(len(k) <= charset._FROM_CONTENT_VALUE for k in charset._FROM_CONTENT)
