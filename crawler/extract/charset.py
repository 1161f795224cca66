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

Names are the standard's (lower case). `python_codec` maps each to the Python codec whose
decoder matches it best; the label table covers the labels pages use in practice, and any
other label Python knows falls back to Python's codec of that name.
"""

from __future__ import annotations

import codecs
import re

# label -> WHATWG encoding name (https://encoding.spec.whatwg.org/#names-and-labels)
_LABELS: dict[str, str] = {}


def _add(name: str, labels: str) -> None:
    for label in labels.split():
        _LABELS[label] = name
    _LABELS[name] = name


_add("utf-8", "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf8 x-unicode20utf8")
_add(
    "windows-1252",
    "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 "
    "iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii x-cp1252",
)
for _n in range(1250, 1259):
    _add(f"windows-{_n}", f"cp{_n} x-cp{_n}")
_add(
    "windows-1254",
    "iso-8859-9 iso8859-9 iso88599 iso_8859-9 iso_8859-9:1989 l5 latin5 iso-ir-148 csisolatin5",
)
_add("windows-874", "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620")
for _n in (2, 3, 4, 5, 6, 7, 8, 10, 13, 14, 15, 16):
    _add(f"iso-8859-{_n}", f"iso8859-{_n} iso8859{_n} iso_8859-{_n} iso-ir-1{_n:02d}")
_add("iso-8859-8-i", "csiso88598i logical")
_add("shift_jis", "csshiftjis ms932 ms_kanji shift-jis sjis windows-31j x-sjis")
_add("euc-jp", "cseucpkdfmtjapanese x-euc-jp")
_add("iso-2022-jp", "csiso2022jp")
_add(
    "euc-kr",
    "cseuckr csksc56011987 iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 ksc5601 ksc_5601 "
    "windows-949",
)
_add("gbk", "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 iso-ir-58 x-gbk")
_add("gb18030", "")
_add("big5", "big5-hkscs cn-big5 csbig5 x-x-big5")
_add("koi8-r", "cskoi8r koi koi8 koi8_r")
_add("koi8-u", "koi8-ru")
_add("ibm866", "866 cp866 csibm866")
_add("macintosh", "csmacintosh mac x-mac-roman")
_add("x-mac-cyrillic", "x-mac-ukrainian")
_add("utf-16be", "unicodefffe")
_add("utf-16le", "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16")
_add("x-user-defined", "")
_add("replacement", "csiso2022kr hz-gb-2312 iso-2022-cn iso-2022-cn-ext iso-2022-kr")

_CODECS: dict[str, str] = {
    "utf-8": "utf-8",
    "windows-1252": "cp1252",
    "windows-874": "cp874",
    "iso-8859-8-i": "iso8859_8",
    "shift_jis": "cp932",
    "euc-jp": "euc_jp",
    "iso-2022-jp": "iso2022_jp",
    "euc-kr": "cp949",
    "gbk": "gb18030",  # the standard's GBK decoder is the gb18030 decoder
    "gb18030": "gb18030",
    "big5": "big5hkscs",
    "koi8-r": "koi8_r",
    "koi8-u": "koi8_u",
    "ibm866": "cp866",
    "macintosh": "mac_roman",
    "x-mac-cyrillic": "mac_cyrillic",
    "utf-16be": "utf-16-be",
    "utf-16le": "utf-16-le",
    "x-user-defined": "latin-1",  # documented simplification: bytes >= 0x80 differ
}

# Encodings whose bytes cannot be scanned for ASCII markup directly: decode to text first.
TRANSCODE = frozenset({"utf-16be", "utf-16le", "iso-2022-jp"})


def _c1_passthrough(err: UnicodeError) -> tuple[str, int]:
    """windows-1252 and friends: the standard maps undefined bytes to the same code point."""
    assert isinstance(err, UnicodeDecodeError)
    return chr(err.object[err.start]), err.start + 1


codecs.register_error("crawler-whatwg", _c1_passthrough)


def lookup(label: str | None) -> str | None:
    """The WHATWG encoding name for a label, or None if the label is unknown."""
    if not label:
        return None
    key = label.strip("\t\n\f\r ").lower()
    name = _LABELS.get(key)
    if name is not None:
        return name
    try:
        return codecs.lookup(key).name
    except (LookupError, ValueError):
        return None


def python_codec(name: str) -> tuple[str, str]:
    """(Python codec, errors handler) decoding like the WHATWG encoding ``name``."""
    codec = _CODECS.get(name)
    if codec is None:
        if name.startswith("windows-125"):
            return "cp" + name[8:], "crawler-whatwg"
        if name.startswith("iso-8859-"):
            return "iso8859_" + name[9:], "replace"
        return name, "replace"
    if codec == "cp1252" or codec == "cp874":
        return codec, "crawler-whatwg"
    return codec, "replace"


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


def charset_from_content(content: bytes) -> str | None:
    """The standard's "extracting a character encoding from a meta element"."""
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
    charset: str | None = None
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
            c = lookup(value.decode("latin-1"))
            if c is not None and need_pragma is None:
                charset = c
                need_pragma = False
    if charset is None or need_pragma is None or (need_pragma and not got_pragma):
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
