"""URL resolution: WHATWG test data, and the fast path against the full resolver (Ada)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.extract._resolve import _MISS, Resolver, _normalize, encode_query, full_resolve
from tests.extract_common import SHARED

URLTESTDATA = SHARED / "testdata" / "url" / "urltestdata.json"
if not URLTESTDATA.exists():  # a copy travels with the tests
    URLTESTDATA = Path(__file__).parent / "data" / "extract" / "urltestdata.json"


def _cases() -> list[dict[str, object]]:
    data = json.loads(URLTESTDATA.read_text(encoding="utf-8"))
    return [c for c in data if isinstance(c, dict)]


CASES = _cases()


def test_urltestdata_has_cases() -> None:
    assert len(CASES) > 800


@pytest.mark.parametrize("case", CASES, ids=range(len(CASES)))
def test_urltestdata(case: dict[str, object]) -> None:
    # Without a base, an invalid base stands in: only absolute inputs resolve.
    base = "" if case["base"] is None else str(case["base"])
    raw = str(case["input"])
    got = Resolver(base).resolve(raw)
    if case.get("failure"):
        assert got is None
    else:
        href = str(case["href"])
        assert got == href.split("#", 1)[0]


BASES = [
    "https://example.org/dir/page.html",
    "http://example.org/",
    "https://example.org/a/b/c?q=1#frag",
    "http://user:pw@example.org:8080/x/y/",
    "https://example.org",
    "http://EXAMPLE.org/%7e/p;x",
    "https://sub.example.co.uk/dir/",
]

_PIECES = st.sampled_from(
    (
        "a B 0 9 - . .. / // ? # % %2e %2E %41 %zz : @ ~ _ ! $ & ' ( ) * + , ; = \\ [ ] ^ | { } "
        '< > " ` é \x7f http: https: HTTP:// http:// https:// mailto: javascript: ftp:// '
        "example.com EXAMPLE.COM xn--nxasmq6b 127.0.0.1 0x7f.1 1.2 a.b. :80 :443 :8080 :0 :99999 "
        ":08 ./ ../ /./ /../ x.y foo index.html"
    ).split()
    + [" ", "\t", "\n", "\x00"]
)
RAWS = st.lists(_PIECES, max_size=12).map("".join)


@settings(max_examples=3000, deadline=None)
@given(base=st.sampled_from(BASES), raw=RAWS)
def test_fast_path_agrees_with_full_resolver(base: str, raw: str) -> None:
    r = Resolver(base)
    fast = r._fast_path(raw)
    if fast is not _MISS:
        assert fast == full_resolve(r.base, raw)
    assert r.resolve(raw) == full_resolve(r.base, raw)


def test_fast_path_takes_the_common_forms() -> None:
    r = Resolver("https://example.org/dir/page.html?q#f")
    for raw in [
        "https://other.example/x?y",
        "http://Example.COM:80/a/./b/../c",
        "//cdn.example/x.js",
        "/root/./x/../y?q=1#frag",
        "rel/a/../b",
        "../up",
        "?only=query",
        "",
        "#frag",
        "  /trim  ",
    ]:
        assert r._fast_path(raw) is not _MISS, raw
        assert r._fast_path(raw) == full_resolve(r.base, raw)


def test_unresolvable_gives_none() -> None:
    r = Resolver("https://example.org/")
    assert r.resolve("http://[::1") is None
    assert r.resolve("https://exa mple.org/") is None
    assert Resolver("not a url").resolve("relative") is None
    assert Resolver("not a url").resolve("https://example.org/#x") == "https://example.org/"


def test_normalize() -> None:
    assert _normalize("/a/b/../c/./d") == "/a/c/d"
    assert _normalize("/a/..") == "/"
    assert _normalize("/a/.") == "/a/"
    assert _normalize("/../../x") == "/x"
    assert _normalize("/a//b") == "/a//b"


def test_encode_query() -> None:
    assert encode_query("/p?q=é#é", "cp1252", True) == "/p?q=%E9#é"
    assert encode_query("/é?q=1", "cp1252", True) == "/é?q=1"  # the path stays UTF-8
    assert encode_query("?日", "cp1252", True) == "?%26%2326085%3B"
    assert encode_query("?日本", "cp932", True) == "?%93%FA%96{"  # 0x7B is not encoded
    assert encode_query("mailto:a?é", "cp1252", True) == "mailto:a?é"
    assert encode_query("?é", "cp1252", False) == "?é"  # relative to a non-special base
    assert encode_query(" HTTPS://h/?é", "cp1252", False) == " HTTPS://h/?%E9"
    r = Resolver("https://example.org/", "cp1251")
    assert r.resolve("/?q=я") == "https://example.org/?q=%FF"
    assert r.resolve("/я") == "https://example.org/%D1%8F"
