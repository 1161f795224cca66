"""What the HTML standard says about links, as tables and small value parsers.

Which elements carry links (`LINK_SETS`), which attributes are read for other reasons
(`_AUX`), the tags that change the tokenizer state or leave foreign content, the parsers for
``srcset`` and meta refresh ``content`` values, and a decoded value made the text the DOM holds
(`dom_text`). Shared by `_machine` and its compiled twin.
"""

from __future__ import annotations

import math
import re

from ._entities import unescape_attr

_RAWTEXT_NAMES = (b"style", b"xmp", b"iframe", b"noembed", b"noframes", b"title", b"textarea")

# A foreign (svg/math) subtree ends at these HTML start tags ("breakout").
_BREAKOUT = frozenset(
    b"b big blockquote body br center code dd div dl dt em embed h1 h2 h3 h4 h5 h6 head hr i "
    b"img li listing menu meta nobr ol p pre ruby s small span strong strike sub sup table tt "
    b"u ul var".split()
)
# Inside these foreign elements, tags are tokenized as HTML again.
# Entries of the foreign stack are b"s:name" (SVG) or b"m:name" (MathML).
_INTEGRATION = frozenset(
    b"s:foreignobject s:desc s:title m:mi m:mo m:mn m:ms m:mtext m:annotation-xml+html".split()
)

LINK_SETS: dict[str, dict[str, tuple[str, ...]]] = {
    "links": {"a": ("href",), "area": ("href",), "frame": ("src",), "iframe": ("src",)},
}
LINK_SETS["resources"] = dict(
    LINK_SETS["links"],
    img=("src", "srcset"),
    script=("src",),
    link=("href",),
    source=("src", "srcset"),
    video=("src", "poster"),
    audio=("src",),
    track=("src",),
    embed=("src",),
    object=("data",),
    form=("action",),
    button=("formaction",),
    input=("src", "formaction"),
)
# Attributes read for reasons other than producing a link.
_AUX: dict[bytes, tuple[bytes, ...]] = {
    b"a": (b"rel",),
    b"area": (b"rel",),
    b"form": (b"rel",),
    b"base": (b"href",),
    b"meta": (b"http-equiv", b"content", b"name", b"charset"),
    b"font": (b"color", b"face", b"size"),
    b"annotation-xml": (b"encoding",),
}
_SWITCH_NAMES = [*_RAWTEXT_NAMES, b"script", b"plaintext", b"svg", b"math", b"base", b"meta"]

_ASCII_WS = "\t\n\f\r "
_WS_SPLIT = re.compile(r"[\t\n\f\r ]+")
_SRCSET_URL = re.compile(r"[\t\n\f\r ,]*([^\t\n\f\r ]+)")
_SRCSET_DESC = re.compile(r"((?:[^,(]+|\([^)]*\)?)*),?")
_DESC_TOKEN = re.compile(r"(?:[^\t\n\f\r (]+|\([^)]*\)?)+")
_NON_NEG_INT = re.compile(r"[0-9]+")
_FLOAT = re.compile(r"-?(?:[0-9]+(?:\.[0-9]+)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _valid_descriptors(desc: str) -> bool:
    """The descriptor checks of the standard's srcset parser (step "descriptor parser").

    No number is converted to an int: a page may write thousands of digits, more than
    ``int()`` accepts; a width or height is valid when it is digits, not all zeros. A density
    goes through ``float()``, which takes any length and, like the standard's parser, rounds
    to the nearest double; one too large for a double (``inf``) is the standard's error.
    """
    width = density = height = False
    for d in _DESC_TOKEN.findall(desc):
        kind = d[-1]
        num = d[:-1]
        if kind == "w":
            if width or density or not _positive_int(num):
                return False
            width = True
        elif kind == "x":
            if width or density or height or _FLOAT.fullmatch(num) is None:
                return False
            value = float(num)
            if value < 0 or math.isinf(value):
                return False
            density = True
        elif kind == "h":
            if height or density or not _positive_int(num):
                return False
            height = True
        else:
            return False
    return width or not height


def _positive_int(num: str) -> bool:
    """A valid non-negative integer (ASCII digits) that is not zero, of any length."""
    return _NON_NEG_INT.fullmatch(num) is not None and num.strip("0") != ""


def parse_srcset(value: str) -> list[str]:
    """The URLs of a srcset value, as the standard's srcset parser finds them.

    Candidates whose descriptors are invalid (``1x 2x``, ``10h`` without a width, ``-1x``,
    ``foo``) are dropped, as the standard drops them.
    """
    urls: list[str] = []
    pos = 0
    n = len(value)
    while pos < n:
        m = _SRCSET_URL.match(value, pos)
        if m is None:
            break
        url = m.group(1)
        pos = m.end()
        if url.endswith(","):
            url = url.rstrip(",")
        else:
            d = _SRCSET_DESC.match(value, pos)
            if d is not None:
                pos = d.end()
                if not _valid_descriptors(d.group(1)):
                    continue
        if url:
            urls.append(url)
    return urls


def refresh_url(content: str) -> str | None:
    """The URL of a meta refresh ``content``, per the standard's declarative refresh steps.

    Returns None when the value is invalid or names no URL (a refresh of the same page).
    """
    n = len(content)
    pos = 0
    while pos < n and content[pos] in _ASCII_WS:
        pos += 1
    start = pos
    while pos < n and "0" <= content[pos] <= "9":
        pos += 1
    if pos == start and (pos >= n or content[pos] != "."):
        return None
    while pos < n and ("0" <= content[pos] <= "9" or content[pos] == "."):
        pos += 1
    if pos >= n:
        return None
    c = content[pos]
    if c not in ";," and c not in _ASCII_WS:
        return None
    while pos < n and content[pos] in _ASCII_WS:
        pos += 1
    if pos < n and content[pos] in ";,":
        pos += 1
    while pos < n and content[pos] in _ASCII_WS:
        pos += 1
    if pos >= n:
        return None
    # The standard keeps the text from here ("urlString") when "url" is not followed by
    # "=" (or only a prefix of "url" is there): only a full "url=" is skipped.
    url_start = pos
    if content[pos] in "Uu":
        pos += 1
        if not (pos < n and content[pos] in "Rr"):
            return content[url_start:]
        pos += 1
        if not (pos < n and content[pos] in "Ll"):
            return content[url_start:]
        pos += 1
        while pos < n and content[pos] in _ASCII_WS:
            pos += 1
        if not (pos < n and content[pos] == "="):
            return content[url_start:]
        pos += 1
        while pos < n and content[pos] in _ASCII_WS:
            pos += 1
    quote = ""
    if pos < n and content[pos] in "\"'":
        quote = content[pos]
        pos += 1
    url = content[pos:]
    if quote:
        q = url.find(quote)
        if q >= 0:
            url = url[:q]
    return url


def dom_text(s: str) -> str:
    """A decoded attribute value as the DOM holds it: newlines, NUL, character references.

    Newlines are normalised in the input stream, before the tokenizer decodes character
    references: a written CR or CRLF becomes LF, but "&#13;" stays U+000D."""
    if "\r" in s:
        s = s.replace("\r\n", "\n").replace("\r", "\n")
    if "\x00" in s:
        s = s.replace("\x00", "\ufffd")
    if "&" in s:
        s = unescape_attr(s)
    return s
