"""charset.py on its own: labels, the prescan, and the undeclared-encoding detection."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from crawler.extract.charset import detect_undeclared


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
