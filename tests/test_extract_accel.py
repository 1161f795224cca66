"""The compiled extractor (`_extract_c`) against the pure-Python reference (`_machine`).

The rest of the extractor suite runs on both implementations (the ``impl`` fixture); here the
two are compared directly: same list of `Link`, same ``base_url``, ``nofollow`` and
``encoding`` for any bytes, any chunking (each side split differently), every link set and a
tiny value cap; the same on every corpus page with random chunkings; and the C URL fast path
against the Python resolver. A guard checks that the compiled module is really in use when
it was built and not switched off (yarl's ``test_quoting_c_loaded``).
"""

from __future__ import annotations

import importlib
import itertools
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import crawler.extract as extract
from crawler.extract import LinkExtractorC, LinkExtractorPy
from crawler.extract._entities import NAMED, unescape_attr
from crawler.extract._resolve import Resolver
from tests.extract_common import CORPUS, NO_CORPUS, feed_in

BASE = "https://example.org/dir/page.html"
HERE = Path(extract.__file__).resolve().parent
BUILT = any(HERE.glob("_extract_c.*.so")) or any(HERE.glob("_extract_c*.pyd"))

# The compiled module itself (for its resolver hooks), when the selector could import it.
_C: Any = importlib.import_module("crawler.extract._extract_c") if LinkExtractorC else None
# With CRAWLER_REQUIRE_EXTENSIONS (CI with a compiler) a compiled-only test never skips: a
# missing module is already an ImportError at collection, and these fail rather than skip.
REQUIRED = extract.REQUIRE_EXTENSIONS and not extract.NO_EXTENSIONS
needs_c = pytest.mark.skipif(
    LinkExtractorC is None and not REQUIRED,
    reason="compiled extractor not built, or CRAWLER_NO_EXTENSIONS set",
)


def test_compiled_extractor_loaded_when_built() -> None:
    if os.environ.get("CRAWLER_NO_EXTENSIONS"):
        assert extract.IMPLEMENTATION == "py"
        assert extract.LinkExtractor is LinkExtractorPy
        return
    if not BUILT and not REQUIRED:
        pytest.skip("no compiled extractor next to crawler/extract (pure-Python install)")
    assert LinkExtractorC is not None, "built but not importable"
    assert extract.IMPLEMENTATION == "c"
    assert extract.LinkExtractor is LinkExtractorC
    assert LinkExtractorC.__module__ == "crawler.extract._extract_c"


_BREAK_C = """
import importlib.abc, sys
class Broken(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "crawler.extract._extract_c":
            raise ImportError("simulated: undefined symbol PyFoo")
sys.meta_path.insert(0, Broken())
import crawler.extract as e
print(e.IMPLEMENTATION)
"""


@pytest.mark.parametrize(
    ("env", "ok", "expect"),
    [
        ({}, True, "py"),  # the optional extension: a silent fallback
        ({"CRAWLER_REQUIRE_EXTENSIONS": "1"}, False, "simulated: undefined symbol PyFoo"),
        ({"CRAWLER_REQUIRE_EXTENSIONS": "1", "CRAWLER_NO_EXTENSIONS": "1"}, True, "py"),
    ],
)
def test_require_extensions_makes_a_broken_module_fatal(
    env: dict[str, str], ok: bool, expect: str
) -> None:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("CRAWLER_REQUIRE_EXTENSIONS", "CRAWLER_NO_EXTENSIONS")
    }
    proc = subprocess.run(
        [sys.executable, "-c", _BREAK_C],
        env=clean | env,
        cwd=HERE.parents[1],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode == 0) is ok, proc.stderr
    assert expect in (proc.stdout if ok else proc.stderr)
    if not ok:
        assert "ImportError: CRAWLER_REQUIRE_EXTENSIONS is set" in proc.stderr


def _run(impl: Any, data: bytes, sizes: list[int], **kw: Any) -> tuple[Any, ...]:
    out, ex = feed_in(impl, data, sizes, **kw)
    return out, ex.base_url, ex.nofollow, ex.encoding


def _same(data: bytes, sizes_py: list[int], sizes_c: list[int], **kw: Any) -> None:
    want = _run(LinkExtractorPy, data, sizes_py, **dict(kw))
    got = _run(LinkExtractorC, data, sizes_c, **dict(kw))
    assert got == want


SPLITS = st.lists(st.integers(min_value=1, max_value=40), max_size=60)
OPTIONS = st.fixed_dictionaries(
    {
        "encoding": st.sampled_from([None, "utf-8", "windows-1252", "utf-16le", "shift_jis"]),
        "link_set": st.sampled_from(["links", "resources"]),
        "max_token": st.sampled_from([3, 20, 64 * 1024]),
    }
)


@needs_c
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2000), a=SPLITS, b=SPLITS, kw=OPTIONS)
def test_arbitrary_bytes_same_as_python(
    data: bytes, a: list[int], b: list[int], kw: dict[str, Any]
) -> None:
    _same(data, a, b, **kw)


# Markup pieces reaching every tokenizer state, every exit and the URL forms.
PIECES = [
    "<a href=",
    "<a href='",
    '<a href="',
    "<A HREF=",
    "<area href=",
    "<a/href=",
    "<a\nhref =",
    "<a rel=nofollow href=",
    "<a rel='x NoFollow' href=",
    "<div title=",
    "<img src=",
    "<img srcset='a.png 1x, b.png 2x'>",
    "<source srcset=",
    "<link href=",
    "<form action=",
    "<iframe src=f>",
    "<frame src=",
    '"',
    "'",
    ">",
    "/>",
    "<",
    "</",
    "/",
    "=",
    " ",
    "\n",
    "\t",
    "x",
    "Y",
    "/p",
    "//h.example/q",
    "http://Ex.COM:80/a/../b?c#d",
    "https://x.org:0443",
    "HTTP://a.b.",
    "http://1.2.3.4/",
    "http://xn--nxasmq6b/",
    "http://u@h/",
    "?q=1",
    "#f",
    "../up",
    "./",
    "%2e%2E/",
    "%41",
    "mailto:a@b",
    "javascript:x",
    "data:,x",
    "\\x",
    "é",
    "&amp;",
    "&amp",
    "&",
    "&#38;",
    "&#x",
    "&#x41;",
    "&#128;",
    "&notit;",
    "&copy=",
    "&lt",
    "\x00",
    "\r\n",
    "\r",
    "<!--",
    "-->",
    "--!>",
    "-",
    "--",
    "!",
    "<!",
    "<!-",
    "<?",
    "<!DOCTYPE html>",
    "<script>",
    "</script>",
    "<script",
    "</script",
    "<!--<script>",
    "<style>",
    "</style>",
    "<title>",
    "</title>",
    "<textarea>",
    "</textarea>",
    "<xmp>",
    "</xmp>",
    "<noembed>",
    "</noembed>",
    "<noframes>",
    "</iframe>",
    "<plaintext>",
    "<noscript>",
    "<svg>",
    "</svg>",
    "<svg/>",
    "<math>",
    "</math>",
    "<mi>",
    "<mglyph>",
    "<foreignObject>",
    "</foreignObject>",
    "<annotation-xml encoding=text/html>",
    "</annotation-xml>",
    "<desc>",
    "<![CDATA[",
    "]]>",
    "<p>",
    "</p>",
    "<b>",
    "<br>",
    "</br>",
    "<font color=red>",
    "<font>",
    "<base href=/b/>",
    "<base href='http://other.example/x/'>",
    "<meta http-equiv=refresh content='0;url=/r'>",
    "<meta name=robots content='noindex,NOFOLLOW'>",
    "<meta charset=shift_jis>",
    '<meta http-equiv=content-type content="text/html; charset=koi8-r">',
    "\x82\xa0",
    "\xff",
]
# Each piece may be followed by a link, so that a state that ends too early or too late shows.
LINKS = ["", "", "<a href=/l>", "<a href='?q' rel=nofollow>", '<area href="x/y">']
DOCS = st.lists(
    st.tuples(st.sampled_from(PIECES), st.sampled_from(LINKS)).map("".join), max_size=40
).map("".join)


@needs_c
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=DOCS, a=SPLITS, b=SPLITS, kw=OPTIONS, codec=st.sampled_from(["utf-8", "latin-1"]))
def test_generated_markup_same_as_python(
    doc: str, a: list[int], b: list[int], kw: dict[str, Any], codec: str
) -> None:
    _same(doc.encode(codec, "replace"), a, b, **kw)


def _corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.html")) if CORPUS.is_dir() else []


def _chunks(rnd: random.Random, n: int, small: bool) -> list[int]:
    sizes: list[int] = []
    total = 0
    while total < n:
        k = rnd.randint(1, 64) if small else rnd.randint(1, 8192)
        sizes.append(k)
        total += k
    return sizes


@needs_c
@pytest.mark.skipif(not _corpus(), reason=NO_CORPUS)
def test_corpus_pages_same_as_python_with_random_chunkings() -> None:
    for i, page in enumerate(_corpus()):
        data = page.read_bytes()
        rnd = random.Random(i)
        for link_set in ("links", "resources"):
            want = _run(LinkExtractorPy, data, [], link_set=link_set)
            got = _run(LinkExtractorC, data, _chunks(rnd, len(data), False), link_set=link_set)
            assert got == want, page.name
        # One page in eight also byte-sized chunks (slow in Python, so only the C side).
        if i % 8 == 0:
            got = _run(LinkExtractorC, data, _chunks(rnd, len(data), True))
            assert got == _run(LinkExtractorPy, data, []), page.name


_PAGES = _corpus()


@needs_c
@pytest.mark.skipif(not _PAGES, reason=NO_CORPUS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    page=st.sampled_from(_PAGES or [Path("none")]),
    a=st.lists(st.integers(min_value=1, max_value=3000), max_size=40),
    b=st.lists(st.integers(min_value=1, max_value=3000), max_size=40),
)
def test_corpus_page_any_chunking_same_as_python(page: Path, a: list[int], b: list[int]) -> None:
    _same(page.read_bytes(), a, b, link_set="resources")


# URL resolution: the C fast path answers or hands over, and never differs from Python.
URL_ALPHABET = "aAhHtTpPsS:/.?#%2eE0189-_~!$&()*+,;=@[]\\ \t\nxé"
URLS = st.one_of(
    st.text(alphabet=URL_ALPHABET, max_size=30),
    st.builds(
        "".join,
        st.lists(
            st.sampled_from(
                [
                    "http",
                    "HTTPS",
                    "://",
                    "//",
                    "/",
                    "..",
                    ".",
                    "a",
                    "b-c",
                    "xn--d",
                    "1",
                    ":",
                    "8080",
                    ":80",
                    ":443",
                    ":65536",
                    ":0",
                    "?",
                    "#",
                    "%2e",
                    "%2F",
                    "@",
                    " ",
                    "\t",
                    "é",
                    "a.b.",
                    "-",
                    "_",
                    "~",
                    "mailto:",
                ]
            ),
            max_size=12,
        ),
    ),
)
URL_PARTS = [
    ["", "http://", "HTTPS://", "//", "/", "http:", "hTtP:/", "h", " "],
    ["", "a", "Ex.Com", "a.b.", "1.2.3.4", "xn--a.b", "a..b", "-a", "u@h"],
    ["", ":", ":80", ":443", ":0080", ":0", ":65535", ":65536", ":x", ":99999999"],
    ["", "/", "/a/../b", "/./", "/..", "/%2e/", "/a b", "/\u00e9", "\\x", "/.a"],
    ["", "?", "?a=b&c", "?/../"],
    ["", "#x y", "\t"],
]
URLS = st.one_of(URLS, st.tuples(*map(st.sampled_from, URL_PARTS)).map("".join))
BASES = [
    BASE,
    "http://example.org",
    "https://Example.ORG:8443/a/b/?x=1#frag",
    "http://h.example/",
    "http://h.example/a/./b/../c",
    "file:///tmp/x.html",
    "data:text/html,x",
]


@needs_c
@settings(max_examples=1500, deadline=None)
@given(raw=URLS, base=st.sampled_from(BASES))
def test_url_fast_path_same_as_python(raw: str, base: str) -> None:
    assert _C.resolve(base, raw) == Resolver(base).resolve(raw)


@needs_c
def test_url_fast_path_every_combination() -> None:
    """Every combination of the URL parts above, against three bases: each form, each
    host, port and path rule meets the Python resolver at least once, whatever hypothesis
    draws."""
    raws = ["".join(parts) for parts in itertools.product(*URL_PARTS)]
    for base in (BASE, "http://h.example/a/b", "https://Example.ORG:8443/a/b/?x=1#frag"):
        py = Resolver(base).resolve
        assert _C.resolve_all(base, raws) == [py(r) for r in raws], base


@needs_c
def test_every_pair_of_pieces_same_as_python() -> None:
    """Each piece, a link, each other piece, a link: every state entered by one piece and left
    (or not) by another, with a link after each to show where the tokenizer is."""
    for p1 in PIECES:
        for p2 in PIECES:
            data = (p1 + "<a href=/1>" + p2 + "<a href=/2>").encode("utf-8")
            want = _run(LinkExtractorPy, data, [], encoding="utf-8")
            assert _run(LinkExtractorC, data, [], encoding="utf-8") == want, (p1, p2)


@needs_c
def test_url_fast_path_takes_opaque_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    """``mailto:``, ``javascript:``, ``tel:``: a non-special scheme whose rest does not start
    with '/' is resolved in C (no Python resolver is made for it); special schemes and
    hierarchical rests go to the Python resolver; the same results for all of them."""
    seen: list[str] = []
    orig = Resolver.resolve

    def recorded(self: Resolver, raw: str) -> str | None:
        seen.append(raw)
        return orig(self, raw)

    monkeypatch.setattr(Resolver, "resolve", recorded)
    schemes = ["mailto", "JavaScript", "tel", "a", "c", "x+y.z-w", "Files", "blob"]
    special = ["http", "HTTPS", "ws", "wss", "ftp", "file", "FiLe"]
    rests = ["", "x@y", "void(0)", ";", "a?b#c", ":", "#f", "?q=1&r", "https://a/b", "x/../y"]
    odd = ["/a/../b", "//h/p", "a b", "%2e", "\u00e9", "\t"]
    for scheme in schemes + special:
        for rest in rests + odd:
            raw = scheme + ":" + rest
            seen.clear()
            assert _C.resolve(BASE, raw) == orig(Resolver(BASE), raw), raw
            absolute = scheme.lower() in ("http", "https") and rest == "//h/p"  # as before
            taken = scheme in schemes and (rest in rests or rest == "%2e")
            assert (seen == []) == (taken or absolute), raw


@needs_c
def test_url_fast_path_examples() -> None:
    cases = {
        "": "https://example.org/dir/page.html",
        "#x": "https://example.org/dir/page.html",
        "?q": "https://example.org/dir/page.html?q",
        "/a/./b/../c?d#e": "https://example.org/a/c?d",
        "x/../../..": "https://example.org/",
        "//Other.Example:443/p": "https://other.example/p",
        "HTTP://A.example:0080": "http://a.example/",
        "http://a.example:8080?x": "http://a.example:8080/?x",
        "mailto:x@y": "mailto:x@y",
        " /sp ": "https://example.org/sp",
    }
    for raw, want in cases.items():
        assert _C.resolve(BASE, raw) == want, raw


REF_PIECES = [
    "&",
    "#",
    "x",
    "X",
    ";",
    "=",
    "0",
    "9",
    "a",
    "F",
    "amp",
    "AMP",
    "lt",
    "not",
    "notin",
    "copy",
    "it",
    "128",
    "x80",
    "xD800",
    "1114112",
    "000000041",
    "x110000",
    " ",
    "\r",
]


@needs_c
@settings(max_examples=1500, deadline=None)
@given(
    value=st.one_of(
        st.text(alphabet="&#xX;=0123456789aAfFgGlt \x00", max_size=24),
        st.lists(st.sampled_from(REF_PIECES), max_size=12).map("".join),
    )
)
def test_character_references_same_as_python(value: str) -> None:
    assert _C.unescape(value.encode("ascii")) == unescape_attr(value)


@needs_c
def test_every_named_reference_same_as_python() -> None:
    for name in NAMED:
        for tail in ("", "=", "x", ";", " "):
            value = f"a&{name}{tail}b"
            assert _C.unescape(value.encode("ascii")) == unescape_attr(value), value


@needs_c
def test_links_of_the_fast_path_are_not_tracked_by_the_cyclic_gc() -> None:
    """A Link the compiled fast path makes holds only str, int, bool and None: untracked at
    birth (no young collection walks a page's Links), equal and usable as any other."""
    import gc  # noqa: PLC0415

    data = b"".join(b'<a href="/p/%d.html">x</a> <area href="i%d">\n' % (k, k) for k in range(500))
    ex = LinkExtractorC(BASE, "utf-8")
    links = ex.feed(data) + ex.close()
    assert len(links) == 1000
    assert sum(gc.is_tracked(k) for k in links) == 0
    py = LinkExtractorPy(BASE, "utf-8")
    assert links == py.feed(data) + py.close()
    gc.collect()
    assert links[999].url == "https://example.org/dir/i499"
