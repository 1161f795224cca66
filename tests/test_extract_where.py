"""Where each link stands: ``Link.line`` and ``Link.column`` in both extractor twins.

The line and column (1-based) are those of the ``<`` of the link's tag, lines counted after
the standard's newline normalisation (CR LF and a lone CR are one break each), columns in code
points of the decoded document. Checked against

* a hand-made table (every kind of line break, tabs, multi-byte characters, invalid UTF-8,
  single-byte, Shift_JIS, UTF-16 and ISO-2022-JP documents, values and comments holding
  newlines, meta refresh and srcset), whatever the chunking;
* html5lib, a spec-compliant parser whose input stream counts lines and columns as the
  standard's tokenizer sees them: every link's position is that of a start tag of its name
  there (generated documents and corpus pages);
* a page with a link 6,000 lines down, fed in chunks that split its CR LFs;
* hypothesis: any chunking gives the same positions, and the compiled twin the reference's.
"""

from __future__ import annotations

import codecs
import random
from typing import Any

import html5lib
import pytest
from html5lib import _tokenizer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crawler.extract import Link
from tests.extract_common import IMPL_NAMES, IMPLS, PAGES, corpus_params, run_strict


@pytest.fixture(params=IMPL_NAMES)
def impl(request: pytest.FixtureRequest) -> Any:
    return IMPLS[request.param]


def where(links: list[Link]) -> list[tuple[str, int, int]]:
    return [(x.raw, x.line, x.column) for x in links]


def every_split(impl: Any, data: bytes, encoding: str | None, **kw: Any) -> list[Link]:
    """The links fed whole, and checked to be the same (positions included) for every cut
    into two pieces and for one byte at a time."""
    whole = run_strict(impl, data, None, encoding, **kw)
    for k in range(1, len(data)):
        assert run_strict(impl, data, [k], encoding, **kw) == whole, k
    assert run_strict(impl, data, [1] * len(data), encoding, **kw) == whole
    return whole


# (document, transport charset, [(raw, line, column)]), worked out by hand.
TABLE: list[tuple[bytes, str | None, list[tuple[str, int, int]]]] = [
    (b"<a href=a>", "utf-8", [("a", 1, 1)]),
    (b"x\n<a href=a>", "utf-8", [("a", 2, 1)]),
    (b"x\r\n<a href=a>", "utf-8", [("a", 2, 1)]),  # CR LF: one break
    (b"x\r<a href=a>", "utf-8", [("a", 2, 1)]),  # a lone CR: one break
    (b"x\r\r\n\n<a href=a>", "utf-8", [("a", 4, 1)]),  # CR, CR LF, LF
    (b"\n\r\n\r", "utf-8", []),
    (b"\t\t<a href=a> <a href=b>", "utf-8", [("a", 1, 3), ("b", 1, 14)]),  # a tab is one
    (b"\f<a href=a>", "utf-8", [("a", 1, 2)]),  # a form feed is no line break
    # Multi-byte characters count one each: e-acute (2 bytes), a CJK one (3), G clef (4).
    (b"\xc3\xa9\xe6\x97\xa5\xf0\x9d\x84\x9e<a href=a>", "utf-8", [("a", 1, 4)]),
    (b"\xef\xbb\xbf<a href=a>", None, [("a", 1, 1)]),  # the BOM is no character
    # Invalid UTF-8: one U+FFFD per maximal invalid part (a cut sequence before '<' is one).
    (
        b"\xe6\x97<a href=a>\xff\xfe<a href=b>\xc0\x80<a href=c>",
        "utf-8",
        [
            ("a", 1, 2),
            ("b", 1, 14),
            ("c", 1, 26),
        ],
    ),
    (b"\xe9\xe9\n\xe9<a href=a>", "windows-1252", [("a", 2, 2)]),
    (b"\x93\xfa<a href=a>", "iso-8859-2", [("a", 1, 3)]),
    # Shift_JIS: a two-byte character is one code point.
    ("日本\n語<a href=a>".encode("shift_jis"), "shift_jis", [("a", 2, 2)]),
    # The link's own tag: the <meta> of a refresh, the <img> of every srcset candidate.
    (
        b"<p>\n  <meta http-equiv=refresh content='0; url=r'><img srcset='x 1x,\ny 2x'><a href=a>",
        "utf-8",
        [("r", 2, 3), ("x", 2, 47), ("y", 2, 47), ("a", 3, 7)],
    ),
    # Newlines inside a value, a comment, a script: counted like any other.
    (
        b"<a href='a\r\nb'><!--\n\n--><script>\n</script><a href=c>",
        "utf-8",
        [
            ("a\nb", 1, 1),
            ("c", 5, 10),
        ],
    ),
    # A tag written over several lines stands where its '<' is.
    (b"x<a\nhref\n=\nb\n>", "utf-8", [("b", 1, 2)]),
]


@pytest.mark.parametrize("doc,encoding,want", TABLE)
def test_hand_made_table(impl: Any, doc: bytes, encoding: str | None, want: Any) -> None:
    kw = {"link_set": "resources"}
    assert where(every_split(impl, doc, encoding, **kw)) == want


@pytest.mark.parametrize(
    "codec,bom",
    [("utf-16-le", b"\xff\xfe"), ("utf-16-be", b"\xfe\xff"), ("iso2022_jp", b"")],
)
def test_transcoded_documents_count_their_text(impl: Any, codec: str, bom: bytes) -> None:
    """UTF-16 and ISO-2022-JP are decoded before they are scanned: the positions are those
    of the text (an escape sequence of ISO-2022-JP is no character)."""
    text = "日本\r\n語 <a href=a>\r語<a href=b>"
    data = bom + text.encode(codec)
    encoding = None if bom else "iso-2022-jp"
    assert where(every_split(impl, data, encoding)) == [("a", 2, 3), ("b", 3, 2)]


def test_a_link_6000_lines_down_fed_in_chunks(impl: Any) -> None:
    lines = [f"<p>line {i} &amp; more</p>" for i in range(1, 6001)]
    body = "\r\n".join(lines) + "\r\n\t<a href=/deep>"
    data = body.encode()
    for size in (1000, 997, 4096, len(data)):
        cuts = list(range(size, len(data), size))
        sizes = [b - a for a, b in zip([0, *cuts], cuts, strict=False)]
        links = run_strict(impl, data, sizes, "utf-8")
        assert where(links) == [("/deep", 6001, 2)], size
    # The CR LFs the chunks split (in a chunk of 1000 bytes, one at least is split).
    assert any(data[k - 1 : k + 1] == b"\r\n" for k in range(997, len(data), 997))


def test_positions_in_a_frameset_document_and_held_links(impl: Any) -> None:
    """Links held back while a <frameset> could remove the body keep their positions."""
    doc = b"<html>\n<body>\n<a href=held>\n<p>text <a href=after>"
    assert where(every_split(impl, doc, "utf-8")) == [("held", 3, 1), ("after", 4, 9)]


def test_late_meta_charset_counts_what_follows_in_it(impl: Any) -> None:
    """A <meta charset> past the prescan while the encoding is a guess: the values after it
    are decoded in that encoding, and so are the columns counted."""
    doc = b" " * 1100 + b"<meta charset=utf-8>\n\xc3\xa9\xc3\xa9<a href=a>"
    assert where(every_split(impl, doc, None)) == [("a", 2, 3)]


def test_the_tag_that_changes_the_encoding_is_counted_in_the_old_one(impl: Any) -> None:
    """A change of encoding inside a tag applies after it, however the bytes are split.

    Fuzz finding F2: in an undeclared document ASCII for 1024 bytes, the first non-ASCII
    value switches the guess (windows-1252) to UTF-8. Its tag counted from '<' in UTF-8 when
    fed whole, but in windows-1252 for the part before a chunk boundary inside the tag: the
    next link's column depended on the chunking. The same holds for a late ``<meta
    charset>`` tag with non-ASCII bytes of its own."""
    pad = b" " * 1100
    doc = pad + b"<img src='\xef\xbb\xbf\xc3\xa9'>\xc3\xa9<a href=a>"
    # the img tag is 17 windows-1252 characters; the e-acute after it, one UTF-8 one
    got = where(every_split(impl, doc, None, link_set="resources"))
    assert got == [("\ufeff\xe9", 1, 1101), ("a", 1, 1119)]
    doc = pad + b"<meta charset=utf-8 name='\xc3\xa9\xc3\xa9'>\xc3\xa9<a href=a>"
    assert where(every_split(impl, doc, None)) == [("a", 1, 1134)]


# html5lib as the reference ------------------------------------------------------------------


def html5lib_starts(text: str, monkeypatch: pytest.MonkeyPatch) -> set[tuple[str, int, int]]:
    """(name, line, column) of every start tag html5lib's parser tokenized in ``text``: its
    tokenizer is made to note where each start tag's '<' is (its input stream counts lines
    after newline normalisation, columns in characters)."""
    starts: list[tuple[str, int, int]] = []
    tok = _tokenizer.HTMLTokenizer
    tag_open, emit = tok.tagOpenState, tok.emitCurrentToken

    def noting_tag_open(self: Any) -> Any:
        self.lc_lt = self.stream.position()  # just after the '<': its 1-based column
        return tag_open(self)

    def noting_emit(self: Any) -> None:
        emit(self)
        token = self.tokenQueue[-1]
        if token["type"] == _tokenizer.tokenTypes["StartTag"]:
            starts.append((token["name"], *self.lc_lt))

    with monkeypatch.context() as m:
        m.setattr(tok, "tagOpenState", noting_tag_open)
        m.setattr(tok, "emitCurrentToken", noting_emit)
        html5lib.parse(text, treebuilder="etree")
    return set(starts)


def check_against_html5lib(links: list[Link], starts: set[tuple[str, int, int]]) -> None:
    for x in links:
        names = {x.tag, "image"} if x.tag == "img" else {x.tag}
        assert any((n, x.line, x.column) in starts for n in names), x


_PIECES = [
    "<a href=a>",
    "<a\nhref=b>",
    "<area href='c\r\nd'>",
    "<img srcset='e 1x'>",
    "<iframe src=f>",
    "\n",
    "\r\n",
    "\r",
    "\t",
    " ",
    "x",
    "é",
    "日本",
    "\U0001d11e",
    "<p>",
    "</p>",
    "<!--\n-->",
    "<script>\n<a href=no>\n</script>",
    "<style>\r\n</style>",
    "<textarea>\n</textarea>",
    "<svg>\n<a href=s>\n</svg>",
    "<math>",
    "</math>",
    "<table>\n<tr>",
    "&amp;",
    "<",
    "<!x\n>",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pieces=st.lists(st.sampled_from(_PIECES), max_size=40), data=st.data())
def test_generated_markup_positions_match_html5lib(pieces: list[str], data: Any) -> None:
    text = "<body>" + "".join(pieces)
    raw = text.encode()
    sizes = data.draw(st.lists(st.integers(0, 12), max_size=30))
    with pytest.MonkeyPatch.context() as mp:
        starts = html5lib_starts(text, mp)
    first = None
    for name in IMPL_NAMES:
        links = run_strict(IMPLS[name], raw, sizes, "utf-8", link_set="resources")
        check_against_html5lib(links, starts)
        assert first is None or links == first, name
        first = links


def _sample_pages() -> list[Any]:
    """A dozen corpus pages with links, the smallest first (html5lib parses a megabyte in
    seconds)."""
    pages = [p for p in PAGES if b"<a " in p.read_bytes()]
    return sorted(pages, key=lambda p: p.stat().st_size)[:: max(1, len(pages) // 12)][:12]


@pytest.mark.parametrize("page", corpus_params(_sample_pages()), ids=lambda p: p.stem[:40])
def test_corpus_positions_match_html5lib(
    impl: Any, page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = page.read_bytes()
    text = data.decode("utf-8", "replace").removeprefix("\ufeff")
    starts = html5lib_starts(text, monkeypatch)
    rng = random.Random(page.name)
    sizes = [rng.randint(1, 5000) for _ in range(len(data) // 2500)]
    links = run_strict(impl, data, sizes, "utf-8", link_set="resources")
    assert links, page.name
    check_against_html5lib(links, starts)


@pytest.mark.slow
@pytest.mark.parametrize("page", corpus_params(PAGES), ids=lambda p: p.stem[:40])
def test_every_corpus_page_positions_match_html5lib(
    impl: Any, page: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = page.read_bytes()
    starts = html5lib_starts(data.decode("utf-8", "replace").removeprefix("\ufeff"), monkeypatch)
    check_against_html5lib(run_strict(impl, data, None, "utf-8", link_set="resources"), starts)


# Any chunking, either twin --------------------------------------------------------------------

_BYTES = st.lists(
    st.sampled_from(
        [
            b"<a href=x>",
            b"<img srcset='a 1x, b 2x'>",
            b"\r",
            b"\n",
            b"\r\n",
            b"\t",
            b"x",
            b"\xc3\xa9",
            b"\xe6\x97\xa5",
            b"\xf0\x9d\x84\x9e",
            b"\xe6",
            b"\x80",
            b"\xff",
            b"<a",
            b" href=",
            b"'",
            b">",
            b"<!--",
            b"-->",
            b"<meta http-equiv=refresh content=1;u>",
        ]
    ),
    max_size=60,
).map(b"".join)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    doc=_BYTES,
    enc=st.sampled_from(["utf-8", "windows-1252", "shift_jis", "gb18030", None]),
    data=st.data(),
)
def test_any_chunking_same_positions_in_both_twins(doc: bytes, enc: str | None, data: Any) -> None:
    # (undeclared and ASCII for 1024 bytes: the first non-ASCII value decides the guess)
    pad = b" " * 1024 if enc is None and data.draw(st.booleans(), label="pad") else b""
    doc = b"<body>" + pad + doc
    want = run_strict(IMPLS["py"], doc, None, enc, link_set="resources")
    for name in IMPL_NAMES:
        sizes = data.draw(st.lists(st.integers(0, 9), max_size=40), label=name)
        if pad:  # (the small pieces where the tags are)
            sizes = [len(pad) + data.draw(st.integers(0, 6), label="first")] + sizes
        assert run_strict(IMPLS[name], doc, sizes, enc, link_set="resources") == want, name


def test_breaks_at_every_offset_same_in_both_twins() -> None:
    """The compiled twin counts 16, 64 and 128 bytes at a time: breaks, CR LFs split between
    blocks and multi-byte characters at every offset of long lines, any chunking."""
    rng = random.Random(12)
    units = [b"x", b"\n", b"\r", b"\r\n", b"\xc3\xa9", b"\xe6\x97\xa5", b"\x80", b"<a href=l>"]
    weights = [60, 3, 1, 2, 2, 1, 1, 3]
    for length in list(range(0, 300, 7)) + [1000, 5000]:
        for _ in range(3):
            doc = b"<body>" + b"".join(rng.choices(units, weights, k=length))
            want = run_strict(IMPLS["py"], doc, None, "utf-8")
            assert [x.line for x in want] == sorted(x.line for x in want)
            for name in IMPL_NAMES:
                sizes = [rng.randint(1, 300) for _ in range(len(doc) // 100)]
                assert run_strict(IMPLS[name], doc, sizes, "utf-8") == want, (name, doc)


def test_columns_are_code_points_of_the_decoded_text() -> None:
    """The reference's column is the length of the decoded line before the '<' (checked with
    the codec directly, on documents where no character is invalid)."""
    rng = random.Random(7)
    alphabet = ["a", " ", "\t", "é", "日", "\U0001d11e", "\n", "\r\n", "\r"]
    for codec, label in (("utf-8", "utf-8"), ("cp932", "shift_jis"), ("utf-16-le", None)):
        for _ in range(30):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
            if codec == "cp932":
                text = text.replace("\U0001d11e", "x").replace("é", "e")
            doc = "<body>" + text + "<a href=z>"
            data = (b"\xff\xfe" if label is None else b"") + codecs.encode(doc, codec)
            norm = doc.replace("\r\n", "\n").replace("\r", "\n")
            i = norm.rindex("<a href=z>")
            line = norm.count("\n", 0, i) + 1
            col = i - (norm.rfind("\n", 0, i) + 1) + 1
            for name in IMPL_NAMES:
                got = run_strict(IMPLS[name], data, [7] * (len(data) // 7), label)
                assert where(got) == [("z", line, col)], (name, codec, text)
