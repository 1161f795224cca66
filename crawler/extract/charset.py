"""WHATWG encoding sniffing: BOM, transport charset, ``<meta>`` prescan, default.

`sniff` follows the HTML standard's "encoding sniffing algorithm" without the optional
steps (no frequency analysis, no parent-document or locale hints): a byte order mark wins,
then the Content-Type charset given by the caller, then the "prescan a byte stream" of the
first 1024 bytes, then a default. A change of encoding requested by a ``<meta>`` found
later in the document (which makes a browser re-parse) is not followed.

The default when nothing is declared (no BOM, no transport charset, no ``<meta>`` in the
prescan) is what browsers do rather than the standard's bare locale default: they detect
UTF-8. `detect_undeclared` looks at the same 1024 bytes: non-ASCII bytes that are valid UTF-8
give UTF-8 (so an undeclared ``https://münchen.example/`` comes out right, not as mojibake),
invalid UTF-8 gives windows-1252, and ASCII only decides nothing yet.

Names are the standard's (lower case). Labels are exactly the standard's table: a label it
does not list is no encoding and is ignored wherever it appears (Content-Type, ``<meta
charset>``, ``<meta http-equiv>``), however many Python codecs know it (``hex``, ``rot13``,
``utf-7``, ...): decoding with those would fail or yield nonsense. `python_codec` maps each
name to the Python codec whose decoder matches it best; `Iso2022JPDecoder` decodes ISO-2022-JP
where that codec would raise, and `MULTIBYTE_CODECS` names the codecs whose columns are counted
by decoding (both extractors use them).
"""

from __future__ import annotations

import codecs
import re
from typing import Any

# The Encoding Standard's table of names and labels, exactly
# (https://encoding.spec.whatwg.org/#names-and-labels): encoding name, then its labels.
# Nothing else is a label: Python's codecs know many names the standard does not (hex,
# base64, rot13, zlib, idna, utf-7, ...), and those must be ignored, not decoded with.
_TABLE = """
utf-8: unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8
ibm866: 866 cp866 csibm866 ibm866
iso-8859-2: csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2
    latin2
iso-8859-3: csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3
    latin3
iso-8859-4: csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4
    latin4
iso-8859-5: csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5
    iso_8859-5:1988
iso-8859-6: arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6
    iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987
iso-8859-7: csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7
    iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek
iso-8859-8: csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8
    iso88598 iso_8859-8 iso_8859-8:1988 visual
iso-8859-8-i: csiso88598i iso-8859-8-i logical
iso-8859-10: csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6
iso-8859-13: iso-8859-13 iso8859-13 iso885913
iso-8859-14: iso-8859-14 iso8859-14 iso885914
iso-8859-15: csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9
iso-8859-16: iso-8859-16
koi8-r: cskoi8r koi koi8 koi8-r koi8_r
koi8-u: koi8-ru koi8-u
macintosh: csmacintosh mac macintosh x-mac-roman
windows-874: dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874
windows-1250: cp1250 windows-1250 x-cp1250
windows-1251: cp1251 windows-1251 x-cp1251
windows-1252: ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100
    iso8859-1 iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252
windows-1253: cp1253 windows-1253 x-cp1253
windows-1254: cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9
    iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254
windows-1255: cp1255 windows-1255 x-cp1255
windows-1256: cp1256 windows-1256 x-cp1256
windows-1257: cp1257 windows-1257 x-cp1257
windows-1258: cp1258 windows-1258 x-cp1258
x-mac-cyrillic: x-mac-cyrillic x-mac-ukrainian
gbk: chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk
gb18030: gb18030
big5: big5 big5-hkscs cn-big5 csbig5 x-x-big5
euc-jp: cseucpkdfmtjapanese euc-jp x-euc-jp
iso-2022-jp: csiso2022jp iso-2022-jp
shift_jis: csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis
euc-kr: cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601
    ksc_5601 windows-949
replacement: csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr replacement
utf-16be: unicodefffe utf-16be
utf-16le: csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le
x-user-defined: x-user-defined
"""


def _parse_table(table: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    name = ""
    for line in table.strip().splitlines():
        if not line.startswith(" "):
            name, _, line = line.partition(":")
        for label in line.split():
            labels[label] = name
    return labels


# label -> WHATWG encoding name
LABELS: dict[str, str] = _parse_table(_TABLE)
ENCODINGS: frozenset[str] = frozenset(LABELS.values())

# encoding name -> the Python codec whose decoder matches it best. Every name of the
# standard is here, so a name `lookup` returns always decodes.
_CODECS: dict[str, str] = {
    "utf-8": "utf-8",
    "ibm866": "cp866",
    **{f"iso-8859-{n}": f"iso8859_{n}" for n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16)},
    "iso-8859-8-i": "iso8859_8",
    "koi8-r": "koi8_r",
    "koi8-u": "koi8_u",
    "macintosh": "mac_roman",
    "windows-874": "cp874",
    **{f"windows-{n}": f"cp{n}" for n in range(1250, 1259)},
    "x-mac-cyrillic": "mac_cyrillic",
    "gbk": "gb18030",  # the standard's GBK decoder is the gb18030 decoder
    "gb18030": "gb18030",
    "big5": "big5hkscs",
    "euc-jp": "euc_jp",
    "iso-2022-jp": "iso2022_jp",
    "shift_jis": "cp932",
    "euc-kr": "cp949",
    "replacement": "utf-8",  # never used to decode: the document is one U+FFFD
    "utf-16be": "utf-16-be",
    "utf-16le": "utf-16-le",
    "x-user-defined": "crawler-x-user-defined",  # registered below
}
# The standard's windows-125x and windows-874 decoders map the bytes Microsoft leaves
# undefined to the same code point; Python's codecs reject them.
_PASSTHROUGH = frozenset({"windows-874", *(f"windows-{n}" for n in range(1250, 1259))})

# Encodings whose bytes cannot be scanned for ASCII markup directly: decode to text first.
TRANSCODE = frozenset({"utf-16be", "utf-16le", "iso-2022-jp"})


def _c1_passthrough(err: UnicodeError) -> tuple[str, int]:
    """windows-1252 and friends: the standard maps undefined bytes to the same code point."""
    assert isinstance(err, UnicodeDecodeError)
    return chr(err.object[err.start]), err.start + 1


codecs.register_error("crawler-whatwg", _c1_passthrough)

# The standard's x-user-defined: ASCII as itself, bytes 0x80..0xFF as U+F780..U+F7FF (no
# Python codec does that; latin-1 would give U+0080..U+00FF).
_XUD_DECODE = "".join(map(chr, range(0x80))) + "".join(chr(0xF780 + i) for i in range(0x80))
_XUD_ENCODE = codecs.charmap_build(_XUD_DECODE)


def _xud_encode(text: str, errors: str = "strict") -> tuple[bytes, int]:
    return codecs.charmap_encode(text, errors, _XUD_ENCODE)


def _xud_decode(data: Any, errors: str = "strict") -> tuple[str, int]:  # Any: a Buffer
    return codecs.charmap_decode(data, errors, _XUD_DECODE)


def _find_codec(name: str) -> codecs.CodecInfo | None:
    if name != "crawler_x_user_defined":  # codecs.lookup hands over "-" as "_"
        return None
    return codecs.CodecInfo(_xud_encode, _xud_decode, name="crawler-x-user-defined")


codecs.register(_find_codec)


def lookup(label: str | None) -> str | None:
    """The standard's "get an encoding": the encoding name for a label, or None (failure).

    Only the Encoding Standard's labels count, compared after trimming ASCII whitespace and
    ASCII-lowercasing; any other string, even one a Python codec knows, is no encoding.
    """
    if not label:
        return None
    key = label.strip("\t\n\f\r ")
    if not key.isascii():  # str.lower() maps some non-ASCII letters to ASCII ones (K sign)
        return None
    return LABELS.get(key.lower())


def python_codec(name: str) -> tuple[str, str]:
    """(Python codec, errors handler) decoding like the WHATWG encoding ``name``.

    ``name`` is one `lookup` returned; anything else decodes as windows-1252, the default.
    """
    codec = _CODECS.get(name)
    if codec is None:
        return "cp1252", "crawler-whatwg"
    return codec, "crawler-whatwg" if name in _PASSTHROUGH else "replace"


# Python codecs (`python_codec`) in which a code point may take more than one byte:
# columns are counted by decoding (both twins), not by the byte count.
MULTIBYTE_CODECS = frozenset({"utf-8", "gb18030", "big5hkscs", "euc_jp", "cp932", "cp949"})


class Iso2022JPDecoder:
    """An incremental ISO-2022-JP decoder that never raises (both twins use it).

    Python's ``iso2022_jp`` decoder keeps the bytes after an ESC that starts no escape
    sequence it knows as "pending" and, a few bytes later, raises ``pending buffer overflow``
    even with errors="replace". The standard's decoder never fails: an invalid escape is an
    error (U+FFFD) and the bytes after the ESC are read again. So such an ESC becomes a byte
    that decodes to U+FFFD (0x80) before Python's decoder sees it; an ESC in the last two
    bytes of a chunk waits for the next one.
    """

    __slots__ = ("_dec", "_tail")
    _VALID = frozenset({b"(B", b"(J", b"$@", b"$B"})

    def __init__(self) -> None:
        self._dec = codecs.getincrementaldecoder("iso2022_jp")("replace")
        self._tail = b""

    def decode(self, data: bytes, final: bool = False) -> str:
        data = self._tail + data if self._tail else data
        self._tail = b""
        if not final:
            j = data.rfind(b"\x1b", max(0, len(data) - 2))
            if j >= 0:
                data, self._tail = data[:j], data[j:]
        i = data.find(b"\x1b")
        if i >= 0:
            buf = bytearray(data)
            while i >= 0:
                if data[i + 1 : i + 3] not in self._VALID:
                    buf[i] = 0x80
                i = data.find(b"\x1b", i + 1)
            data = bytes(buf)
        return self._dec.decode(data, final)


_UTF8_LEN = (2,) * 0x20 + (3,) * 0x10 + (4,) * 0x10  # sequence length by lead byte 0xC0..0xFF


def detect_undeclared(data: bytes, final: bool) -> str | None:
    """The encoding of an undeclared document judged from its first bytes, as browsers do.

    Returns "utf-8" when ``data`` has non-ASCII bytes and all of it is valid UTF-8 (a
    sequence cut at the end of ``data`` counts as valid unless ``final``), "windows-1252"
    when it holds invalid UTF-8, and None when it is ASCII only (nothing to judge by).
    It runs on every undeclared page, so the work is done by the codec, not a Python loop.
    """
    if data.isascii():
        return None
    try:
        _, used = codecs.utf_8_decode(data, "strict", final)
    except UnicodeDecodeError:
        return "windows-1252"
    tail = data[used:]
    if len(tail) >= 2:
        # The codec accepts any incomplete tail whose second byte it checks, except after
        # 0xED (0xED 0xA0..0xBF begins a surrogate, never valid). Completing the tail with
        # continuation bytes asks it again: only the second byte of a sequence is restricted.
        filler = b"\x80" * (_UTF8_LEN[tail[0] - 0xC0] - len(tail))
        try:
            codecs.utf_8_decode(tail + filler, "strict", True)
        except UnicodeDecodeError:
            return "windows-1252"
    return "utf-8"


def bom(data: bytes) -> tuple[str, int] | None:
    """(encoding, BOM length) if ``data`` starts with a byte order mark."""
    if data.startswith(b"\xef\xbb\xbf"):
        return "utf-8", 3
    if data.startswith(b"\xfe\xff"):
        return "utf-16be", 2
    if data.startswith(b"\xff\xfe"):
        return "utf-16le", 2
    return None


_WS = rb"\t\n\f\r "
_PRE_TOKEN = re.compile(rb"<!--|<(?i:meta)[" + _WS + rb"/]|</?[A-Za-z]|<[!/?]")
_PRE_ATTR = re.compile(
    rb"[" + _WS + rb"/]*([^" + _WS + rb"/>][^" + _WS + rb"/=>]*)"
    rb"(?:[" + _WS + rb"]*=[" + _WS + rb"]*(?:\"([^\"]*)\"?|'([^']*)'?|([^" + _WS + rb">]*)))?"
)
_PRE_ATTR_END = re.compile(rb"[" + _WS + rb"/]*>")
_NAME_END = re.compile(rb"[" + _WS + rb">]")
_CHARSET = re.compile(rb"(?i:charset)[" + _WS + rb"]*=[" + _WS + rb"]*")


# charset_from_content's answers for short values: a site's pages carry the same
# <meta http-equiv content> on every page (DocBook, Javadoc, ...). Bounded: emptied when full.
_FROM_CONTENT: dict[bytes, str | None] = {}
_FROM_CONTENT_MAX = 256
_FROM_CONTENT_VALUE = 256


def charset_from_content(content: bytes) -> str | None:
    """The standard's "extracting a character encoding from a meta element"."""
    if type(content) is not bytes:
        return _charset_from_content(content)
    try:
        return _FROM_CONTENT[content]
    except KeyError:
        pass
    name = _charset_from_content(content)
    if len(content) <= _FROM_CONTENT_VALUE:
        if len(_FROM_CONTENT) >= _FROM_CONTENT_MAX:
            _FROM_CONTENT.clear()
        _FROM_CONTENT[content] = name
    return name


def _charset_from_content(content: bytes) -> str | None:
    pos = 0
    while True:
        i = content.lower().find(b"charset", pos)
        if i < 0:
            return None
        m = _CHARSET.match(content, i)
        if m is None:
            pos = i + 7
            continue
        j = m.end()
        if j < len(content) and content[j] in b"\"'":
            q = content.find(content[j : j + 1], j + 1)
            if q < 0:
                return None
            return lookup(content[j + 1 : q].decode("latin-1"))
        k = j
        while k < len(content) and content[k] not in b"\t\n\f\r ;":
            k += 1
        if k == j:
            return None
        return lookup(content[j:k].decode("latin-1"))


def _meta(data: bytes, pos: int) -> tuple[int, str | None]:
    """Attributes of one <meta> in the prescan: (position after it, encoding or None)."""
    seen: set[bytes] = set()
    got_pragma = False
    need_pragma: bool | None = None
    charset: str | None = None  # None: null; "" : failure (a charset attribute no label)
    n = len(data)
    while True:
        e = _PRE_ATTR_END.match(data, pos)
        if e is not None:
            pos = e.end()
            break
        m = _PRE_ATTR.match(data, pos)
        if m is None or m.end() >= n:
            return n, None  # ran off the 1024 bytes: the prescan gives up
        pos = m.end()
        name = m.group(1).lower()
        if name in seen:
            continue
        seen.add(name)
        value = m.group(2) or m.group(3) or m.group(4) or b""
        if name == b"http-equiv":
            if value.lower() == b"content-type":
                got_pragma = True
        elif name == b"content":
            if charset is None:
                c = charset_from_content(value)
                if c is not None:
                    charset = c
                    need_pragma = True
        elif name == b"charset":
            # Unconditional in the standard: it overrides a content attribute's answer, and
            # an unknown label makes this <meta> give nothing (the prescan goes on).
            charset = lookup(value.decode("latin-1")) or ""
            need_pragma = False
    if not charset or need_pragma is None or (need_pragma and not got_pragma):
        return pos, None
    if charset in ("utf-16be", "utf-16le"):
        charset = "utf-8"
    elif charset == "x-user-defined":
        charset = "windows-1252"
    return pos, charset


def prescan(data: bytes) -> str | None:
    """The standard's "prescan a byte stream to determine its encoding" (first 1024 bytes)."""
    data = data[:1024]
    n = len(data)
    pos = 0
    while pos < n:
        m = _PRE_TOKEN.search(data, pos)
        if m is None:
            return None
        tok = m.group()
        pos = m.end()
        if tok == b"<!--":
            e = data.find(b"-->", pos - 2)
            if e < 0:
                return None
            pos = e + 3
        elif tok[:5].lower() == b"<meta":
            pos, enc = _meta(data, pos)
            if enc is not None:
                return enc
        elif tok[-1:].isalpha():
            ne = _NAME_END.search(data, pos)
            if ne is None:
                return None
            pos = ne.start()
            while True:
                end = _PRE_ATTR_END.match(data, pos)
                if end is not None:
                    pos = end.end()
                    break
                a = _PRE_ATTR.match(data, pos)
                if a is None or a.end() >= n:
                    return None
                pos = a.end()
        else:
            e = data.find(b">", pos)
            if e < 0:
                return None
            pos = e + 1
    return None
